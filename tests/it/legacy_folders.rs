//! Every committed run folder (each folder with a meta.json under tests/fixtures/ and
//! evidence/) prints what it printed before meta.json carried its workload's kind and
//! phases: `summary`, `diff` (terminal and JSON) of each, and `report` of the fixtures
//! and of every command workload's run, hashed and compared with
//! tests/golden/legacy_folders.tsv. The golden was written by the gapscope that read
//! these folders with the prover's constants. A deliberate change of what these
//! commands print (a statistic, a wording) rewrites it: `GAPSCOPE_BLESS=1 cargo test
//! --test it -- legacy_folders::`, then review the golden's diff. On a mismatch the outputs
//! are kept under target/legacy_folders/ for comparison.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use sha2::{Digest, Sha256};

const GOLDEN: &str = "tests/golden/legacy_folders.tsv";
/// Fewer bootstrap resamples than the default: the phases are what is compared, and
/// the verdicts stay deterministic for a given count.
const RESAMPLES: &str = "200";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Run folders under `dir` (relative to the repository root), sorted.
pub(crate) fn run_folders(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(root().join(dir)) else {
        return;
    };
    let mut names: Vec<_> = entries.flatten().map(|e| e.file_name()).collect();
    names.sort();
    for n in names {
        let rel = dir.join(&n);
        let abs = root().join(&rel);
        if n == "meta.json" {
            out.push(dir.to_path_buf());
        } else if abs.is_dir() {
            run_folders(&rel, out);
        }
    }
}

fn is_command_workload(dir: &Path) -> bool {
    let text = std::fs::read_to_string(root().join(dir).join("meta.json")).unwrap();
    let meta: serde_json::Value = serde_json::from_str(&text).unwrap();
    meta.get("external").is_some_and(|e| !e.is_null())
}

/// One command's output as compared: stdout, stderr and the exit status.
fn run(args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gapscope"))
        .args(args)
        .current_dir(root())
        .output()
        .unwrap();
    format!(
        "{}\n--- stderr\n{}\n--- status {:?}\n",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        out.status.code()
    )
}

/// `report`: report.md (its own folder's name replaced), every chart's SVG and the
/// Chrome trace, in name order.
fn report(dir: &str, tmp: &Path) -> String {
    let out_dir = tmp.join(dir.replace('/', "_"));
    let out_s = out_dir.to_str().unwrap().to_string();
    let mut text = run(&["report", dir, "--out", &out_s]).replace(&out_s, "OUT");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&out_dir)
        .map(|r| r.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    files.sort();
    for f in files {
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        if name == "report.md" || name.ends_with(".svg") || name == "trace.json" {
            let body = std::fs::read_to_string(&f).unwrap().replace(&out_s, "OUT");
            text.push_str(&format!("=== {name}\n{body}\n"));
        }
    }
    text
}

fn hash(text: &str) -> String {
    let d = Sha256::digest(text.as_bytes());
    d.iter().take(12).map(|b| format!("{b:02x}")).collect()
}

fn golden() -> BTreeMap<(String, String), String> {
    let text = std::fs::read_to_string(root().join(GOLDEN)).unwrap_or_default();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            assert_eq!(
                f.len(),
                3,
                "{GOLDEN}: {l:?} is not folder<TAB>command<TAB>hash"
            );
            ((f[0].to_string(), f[1].to_string()), f[2].to_string())
        })
        .collect()
}

#[test]
fn committed_run_folders_print_what_they_printed() {
    let mut folders = Vec::new();
    run_folders(Path::new("tests/fixtures"), &mut folders);
    run_folders(Path::new("evidence"), &mut folders);
    assert!(
        folders.len() > 100,
        "found only {} run folders",
        folders.len()
    );
    let tmp = tempfile::tempdir().unwrap();
    let mut jobs: Vec<(String, &'static str)> = Vec::new();
    for f in &folders {
        let d = f.to_str().unwrap().to_string();
        jobs.push((d.clone(), "summary"));
        jobs.push((d.clone(), "diff"));
        jobs.push((d.clone(), "diff-json"));
        if f.starts_with("tests/fixtures") || is_command_workload(f) {
            jobs.push((d, "report"));
        }
    }
    let results = Mutex::new(BTreeMap::new());
    let next = Mutex::new(0usize);
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get().min(4));
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let i = {
                    let mut n = next.lock().unwrap();
                    *n += 1;
                    *n - 1
                };
                let Some((dir, cmd)) = jobs.get(i) else {
                    break;
                };
                let text = match *cmd {
                    "summary" => run(&["summary", dir]),
                    "diff" => run(&["diff", dir, "--resamples", RESAMPLES]),
                    "diff-json" => {
                        run(&["diff", dir, "--resamples", RESAMPLES, "--format", "json"])
                    }
                    _ => report(dir, tmp.path()),
                };
                results
                    .lock()
                    .unwrap()
                    .insert((dir.clone(), cmd.to_string()), text);
            });
        }
    });
    let results = results.into_inner().unwrap();
    if std::env::var_os("GAPSCOPE_BLESS").is_some() {
        let mut text = String::from(
            "# folder\tcommand\tsha256 (first 12 bytes) of its output: tests/it/legacy_folders.rs\n",
        );
        for ((dir, cmd), out) in &results {
            text.push_str(&format!("{dir}\t{cmd}\t{}\n", hash(out)));
        }
        std::fs::create_dir_all(root().join("tests/golden")).unwrap();
        std::fs::write(root().join(GOLDEN), text).unwrap();
        return;
    }
    let golden = golden();
    let keep = root().join("target/legacy_folders");
    let mut wrong = Vec::new();
    for (key, out) in &results {
        match golden.get(key) {
            Some(h) if *h == hash(out) => {}
            Some(_) => {
                let _ = std::fs::create_dir_all(&keep);
                let file = keep.join(format!("{}.{}", key.0.replace('/', "_"), key.1));
                let _ = std::fs::write(&file, out);
                wrong.push(format!(
                    "{} {}: differs (now: {})",
                    key.0,
                    key.1,
                    file.display()
                ));
            }
            None => wrong.push(format!(
                "{} {}: not in {GOLDEN} (a new run folder: GAPSCOPE_BLESS=1)",
                key.0, key.1
            )),
        }
    }
    for key in golden.keys().filter(|k| !results.contains_key(*k)) {
        wrong.push(format!("{} {}: in {GOLDEN}, no longer found", key.0, key.1));
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
