//! Run folders name no machine's folders: a run writes its paths relative to the run
//! folder or the repository, `~` for the home folder and `$TMPDIR` for the temporary
//! one (`[run] absolute_paths = true` keeps them as they are), and the committed run
//! folders and logs under evidence/ and tests/fixtures/ hold none either
//! (scripts/portable-paths.py rewrote those written before).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Starts of absolute paths that name a machine's folders: its workspace, a home folder,
/// its temporary folder.
const MACHINE_FOLDERS: [&str; 5] = ["/work/", "/root/", "/home/", "/Users/", "/tmp/"];

/// Where `text` names a machine's folder: each such path, from its start to the next
/// space or quote. A path starts at a `/` that follows no path character (`a/tmp/x` and
/// `$TMPDIR/x` are not absolute); `/home/` counts with a user's name after it.
fn machine_paths(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (i, _) in text.match_indices('/') {
        let before = text[..i].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || "._-~$/".contains(c)) {
            continue;
        }
        let rest = &text[i..];
        let Some(m) = MACHINE_FOLDERS.iter().find(|m| rest.starts_with(**m)) else {
            continue;
        };
        let end = rest
            .find(|c: char| c.is_whitespace() || "\"'`),;]".contains(c))
            .unwrap_or(rest.len());
        let path = &rest[..end];
        // "/home/" alone (the folder of homes) names nobody's.
        if *m == "/home/" && path.len() == m.len() {
            continue;
        }
        found.push(path.chars().take(100).collect());
    }
    found
}

/// The text of committed file `p`, decompressed when gzipped; None for a binary file.
fn text_of(p: &Path) -> Option<String> {
    let raw = std::fs::read(p).ok()?;
    let bytes = if p.extension().is_some_and(|e| e == "gz") {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&raw[..])
            .read_to_end(&mut out)
            .ok()?;
        out
    } else {
        raw
    };
    String::from_utf8(bytes).ok()
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            files_under(&p, out);
        } else if e.file_type().is_ok_and(|t| t.is_file()) {
            out.push(p);
        }
    }
}

#[test]
fn the_path_finder_finds_machine_folders_and_nothing_else() {
    assert_eq!(
        machine_paths(r#""command": ["/work/main/.bundle/gapscope", "x"]"#),
        ["/work/main/.bundle/gapscope"]
    );
    assert_eq!(
        machine_paths("log /root/out: cd /home/ann/src && ls (/tmp/x/y)"),
        ["/root/out:", "/home/ann/src", "/tmp/x/y"]
    );
    assert!(
        machine_paths("$TMPDIR/x ~/y ../wt-ext/cuda a/tmp/b under /tmp; /home/ /usr/bin/x")
            .is_empty()
    );
}

/// Source code of fixtures (tests/fixtures/*.rs) builds run folders in memory; its paths
/// are made up, not a machine's.
fn is_source(p: &Path) -> bool {
    p.extension().is_some_and(|e| e == "rs")
}

#[test]
fn committed_files_name_no_machine_folder() {
    let mut files = Vec::new();
    for d in ["evidence", "tests/fixtures"] {
        files_under(&root().join(d), &mut files);
    }
    files.sort();
    assert!(files.len() > 500, "found only {} files", files.len());
    let mut named = Vec::new();
    let mut read_gz = 0;
    for f in files.iter().filter(|f| !is_source(f)) {
        let Some(text) = text_of(f) else {
            continue;
        };
        read_gz += usize::from(f.extension().is_some_and(|e| e == "gz"));
        let paths = machine_paths(&text);
        if let Some(first) = paths.first() {
            let rel = f.strip_prefix(root()).unwrap_or(f);
            named.push(format!(
                "{} ({}×, first {first})",
                rel.display(),
                paths.len()
            ));
        }
    }
    assert!(read_gz > 10, "read only {read_gz} gzipped files");
    assert!(
        named.is_empty(),
        "{} committed files name a machine's folders; write them relative to the run \
         folder or the repository, ~ for a home folder (scripts/portable-paths.py):\n{}",
        named.len(),
        named.join("\n")
    );
}

/// A folder for a run with the home folder, the temporary folder and the repository
/// (the current folder, a git repository) where the test puts them.
struct Machine {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    temp: PathBuf,
    repo: PathBuf,
}

impl Machine {
    fn new() -> Machine {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home/ann");
        let temp = tmp.path().join("scratch");
        let repo = home.join("src/bench");
        for d in [&repo.join(".git"), &temp.join("subject")] {
            std::fs::create_dir_all(d).unwrap();
        }
        Machine {
            _tmp: tmp,
            home,
            temp,
            repo,
        }
    }

    fn gapscope(&self, args: &[&str]) -> std::process::Output {
        Command::new(env!("CARGO_BIN_EXE_gapscope"))
            .args(args)
            .current_dir(&self.repo)
            .env("HOME", &self.home)
            .env("TMPDIR", &self.temp)
            .output()
            .unwrap()
    }

    /// Runs a command workload of two variants built in `$TMPDIR/subject` (a build that
    /// fails with `fail`), its results under `results_dir`; the run folder.
    fn run(&self, results_dir: &Path, run_extra: &str, fail: bool) -> PathBuf {
        let exp = self.repo.join("exp.toml");
        let subject = self.temp.join("subject");
        std::fs::write(
            &exp,
            format!(
                "name = \"paths\"\n[workload]\ncommand = [\"sh\", \"-c\", \"true\"]\n\
                 build = [\"sh\", \"-c\", \"echo built in $PWD for $HOME; exit {}\"]\n\
                 dir = \"{}\"\n[run]\nreps = 1\nwarmups = 0\n{run_extra}\n\
                 [[variant]]\nname = \"good\"\n\
                 [[variant]]\nname = \"bad\"\ncommand = [\"sh\", \"-c\", \"true\"]\n",
                u8::from(fail) * 3,
                subject.display()
            ),
        )
        .unwrap();
        let out = self.gapscope(&[
            "run",
            exp.to_str().unwrap(),
            "--results-dir",
            results_dir.to_str().unwrap(),
            "-q",
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let runs: Vec<PathBuf> = std::fs::read_dir(results_dir.join("paths"))
            .unwrap_or_else(|e| panic!("no run folder ({e}): {stderr}"))
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.join("meta.json").is_file())
            .collect();
        assert_eq!(runs.len(), 1, "{stderr}");
        runs[0].clone()
    }

    /// Every file of run folder `dir`, as text.
    fn files(&self, dir: &Path) -> Vec<(String, String)> {
        let mut files = Vec::new();
        files_under(dir, &mut files);
        files.sort();
        files
            .iter()
            .filter_map(|f| Some((f.file_name()?.to_string_lossy().into(), text_of(f)?)))
            .collect()
    }
}

#[test]
fn a_run_folder_names_no_machine_folder_and_still_reads() {
    let m = Machine::new();
    let dir = m.run(&m.repo.join("results"), "", false);
    let files = m.files(&dir);
    assert!(files.iter().any(|(n, _)| n == "build-good.log"));
    // The experiment copy is the user's file as written (its sha256 guards a resume).
    for (name, text) in files.iter().filter(|(n, _)| n != "experiment.toml") {
        for folder in [&m.home, &m.temp, &m.repo] {
            let f = folder.display().to_string();
            assert!(!text.contains(&f), "{name} names {f}:\n{text}");
        }
    }
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("meta.json")).unwrap()).unwrap();
    assert_eq!(meta["paths"]["repo"], "../../..");
    assert_eq!(meta["command"][2], "exp.toml");
    assert_eq!(meta["command"][4], "results");
    let good = &meta["external"]["variants"]["good"];
    assert_eq!(good["dir"], "$TMPDIR/subject");
    assert_eq!(good["build"]["log"], "build-good.log");
    let log = std::fs::read_to_string(dir.join("build-good.log")).unwrap();
    assert_eq!(log, "built in $TMPDIR/subject for ~\n");
    // The readers take the folder as before.
    let d = dir.to_str().unwrap();
    for args in [vec!["summary", d], vec!["diff", d, "--resamples", "200"]] {
        let out = m.gapscope(&args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn a_failed_builds_errors_name_no_machine_folder() {
    let m = Machine::new();
    let dir = m.run(&m.temp.join("results"), "", true);
    let runs = std::fs::read_to_string(dir.join("runs.csv")).unwrap();
    assert!(runs.contains("build failed"), "{runs}");
    for folder in [&m.home, &m.temp, &m.repo] {
        assert!(!runs.contains(&folder.display().to_string()), "{runs}");
    }
    // The run folder lies outside the repository and under $TMPDIR: its repository is
    // recorded under ~.
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("meta.json")).unwrap()).unwrap();
    assert_eq!(meta["paths"]["repo"], "~/src/bench");
    assert_eq!(meta["command"][4], "$TMPDIR/results");
}

#[test]
fn absolute_paths_keeps_the_machines_paths() {
    let m = Machine::new();
    let dir = m.run(&m.repo.join("results"), "absolute_paths = true", false);
    let text = std::fs::read_to_string(dir.join("meta.json")).unwrap();
    let meta: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert!(meta.get("paths").is_none(), "{text}");
    let subject = m.temp.join("subject").display().to_string();
    assert_eq!(
        meta["external"]["variants"]["good"]["dir"],
        subject.as_str()
    );
    let log = meta["external"]["variants"]["good"]["build"]["log"]
        .as_str()
        .unwrap();
    assert!(Path::new(log).is_absolute(), "{log}");
    let built = std::fs::read_to_string(dir.join("build-good.log")).unwrap();
    assert!(built.contains(&subject), "{built}");
}
