//! Every file a run folder holds, replaced by something hostile: a link to a secret, a
//! FIFO, a link to /dev/zero, and a bomb (a small `.gz` that decompresses past what any
//! table holds, or a file past its cap). The names come from the store's own list
//! ([`store::RUN_FILES`]), so a file added to the store is planted here too. Each reader
//! of the folder (`report` reads them all, `history add` what it stores) answers with
//! the reason, in its error or in report.md, and never the secret; none hangs: each runs
//! under a time limit. And what the readers pass on (sampled stacks' frame names and
//! statuses, folder names) lands escaped in report.md and on the terminal.

use crate::common;
use crate::fixture;

use std::path::{Path, PathBuf};
use std::time::Duration;

use gapscope::profile::{FoldedRow, RepProfile};
use gapscope::store::{self, RunFile};

/// Longest a command on a fixture may take: past it, the command hangs.
const LIMIT: Duration = Duration::from_secs(120);
const SECRET: &str = "API_TOKEN=hunter2";

#[derive(Debug, Clone, Copy, PartialEq)]
enum Plant {
    LinkToSecret,
    Fifo,
    LinkToDevZero,
    /// A character device node with /dev/zero's numbers: made where mknod is allowed
    /// (root); elsewhere the case is left out and says so. The readers refuse it as they
    /// refuse a FIFO (not a regular file), so only the resume test plants it.
    DevZeroNode,
    Bomb,
}

impl Plant {
    const ALL: [Plant; 4] = [
        Plant::LinkToSecret,
        Plant::Fifo,
        Plant::LinkToDevZero,
        Plant::Bomb,
    ];

    /// What the reader must say of it (one of these words).
    fn reasons(self) -> &'static [&'static str] {
        match self {
            Plant::LinkToSecret | Plant::LinkToDevZero => &["is a symbolic link"],
            Plant::Fifo => &["is a FIFO, not a regular file"],
            Plant::DevZeroNode => &["is a character device, not a regular file"],
            Plant::Bomb => &["decompression bomb", "more than gapscope reads"],
        }
    }
}

/// The fixture run folder with sampled stacks for every measured rep, so that the
/// stacks' files are there to be replaced.
fn profiled_run(t: &Path) -> PathBuf {
    profiled_run_with(t, "sampled at 99 Hz", &["main", "work"])
}

/// [`profiled_run`] with `status` as each variant's profile status and `frames` as
/// every sample's stack (outermost first).
fn profiled_run_with(t: &Path, status: &str, frames: &[&str]) -> PathBuf {
    let dir = fixture::write(t, &fixture::Options::default());
    let meta_path = dir.join(store::META);
    let mut m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&meta_path).unwrap()).unwrap();
    for v in fixture::VARIANTS {
        m["profile"][v] = status.into();
    }
    std::fs::write(&meta_path, serde_json::to_vec(&m).unwrap()).unwrap();
    let data = store::RunData::load(&dir).unwrap();
    for r in &data.runs {
        let p = RepProfile {
            rep: r.rep,
            variant: r.variant.clone(),
            hz: 99,
            unavailable: None,
            counts: Default::default(),
            lost: 0,
            threads: 1,
            threads_failed: 0,
            frame_pointers: true,
            sampler_cpu_ns: 0,
            thread_failure: None,
            of_program: false,
            left_out: Default::default(),
            rows: vec![FoldedRow {
                span_id: u64::from(r.rep) * 1000 + 1,
                span: "prove".into(),
                foreign: false,
                frames: frames.iter().map(|f| f.to_string()).collect(),
                count: 10,
            }],
        };
        gapscope::profile::folded::write_rep(&dir, &p).unwrap();
    }
    dir
}

/// Replaces rep 0's `file` in `dir` with `plant`; returns the name planted, or `None`
/// where it cannot be made (a device node without root).
fn plant(t: &Path, dir: &Path, file: &RunFile, plant: Plant) -> Option<String> {
    let name = file.of_rep(0);
    let path = dir.join(&name);
    let gz = dir.join(file.gz_of_rep(0));
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(&gz);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    match plant {
        Plant::LinkToSecret => std::os::unix::fs::symlink(t.join("secret.env"), &path).unwrap(),
        Plant::LinkToDevZero => std::os::unix::fs::symlink("/dev/zero", &path).unwrap(),
        Plant::Fifo => {
            let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
            // SAFETY: a valid NUL-terminated path; mkfifo has no other precondition.
            assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        }
        Plant::DevZeroNode => {
            let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
            // SAFETY: as mkfifo; makedev only computes a number.
            let made =
                unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o600, libc::makedev(1, 5)) };
            if made != 0 {
                return None;
            }
        }
        Plant::Bomb if file.gzip => {
            std::fs::write(&gz, bomb()).unwrap();
            return Some(file.gz_of_rep(0));
        }
        // A file that cannot be gzipped is a bomb by its size (sparse: no disk used).
        Plant::Bomb => std::fs::File::create(&path)
            .unwrap()
            .set_len(16 << 30)
            .unwrap(),
    }
    Some(name)
}

/// 96 MiB of one byte in about 100 KiB of gzip.
fn bomb() -> &'static [u8] {
    static BOMB: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    BOMB.get_or_init(|| {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        let chunk = vec![b'1'; 1 << 20];
        for _ in 0..96 {
            std::io::Write::write_all(&mut gz, &chunk).unwrap();
        }
        gz.finish().unwrap()
    })
}

/// Runs `args` on the folder under the time limit: exit 0 or 1 (never a panic or a
/// kill at the limit); stdout, stderr and report.md together.
fn answer(t: &Path, args: &[&str], dir: &Path) -> String {
    let out_dir = t.join("report");
    let _ = std::fs::remove_dir_all(&out_dir);
    let mut c = common::gapscope(t);
    c.timeout(LIMIT).args(args).arg(dir);
    match args[0] {
        "report" => {
            c.arg("--out").arg(&out_dir);
        }
        "export" => {
            c.arg("--out-file").arg(t.join("export.json"));
        }
        "history" => {
            c.arg("--db").arg(t.join("history.sqlite"));
        }
        _ => {}
    }
    let out = c.output().expect("gapscope runs");
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    text.push_str(&std::fs::read_to_string(out_dir.join("report.md")).unwrap_or_default());
    assert!(
        matches!(out.status.code(), Some(0 | 1)) && !text.contains("panicked"),
        "{args:?}: {:?}\n{text}",
        out.status
    );
    text
}

/// The commands that read `file`: `report` reads every file of a run folder; `history
/// add` the tables and the experiment copy, not the GPU tables nor the stacks.
fn readers(file: &RunFile) -> Vec<&'static [&'static str]> {
    let mut r: Vec<&'static [&'static str]> = vec![&["report"]];
    if [
        store::META,
        store::RUNS,
        store::SPANS,
        store::SPANS_PART_2,
        store::EXPERIMENT_COPY,
    ]
    .contains(&file.name)
    {
        r.push(&["history", "add"]);
    }
    // The whole-folder readers of the tables every command reads.
    if [store::META, store::RUNS, store::SPANS, store::SPANS_PART_2].contains(&file.name) {
        r.push(&["summary"]);
        r.push(&["diff"]);
    }
    // The export: the tables and the GPU tables (not the experiment copy nor the stacks).
    if ![
        store::EXPERIMENT_COPY,
        store::STACKS_JSON.name,
        store::STACKS_FOLDED.name,
    ]
    .contains(&file.name)
    {
        r.push(&["export"]);
    }
    r
}

#[test]
fn every_file_of_a_run_folder_replaced_by_a_link_a_fifo_a_device_or_a_bomb_is_refused() {
    assert!(store::RUN_FILES.len() >= 8, "the store lists its files");
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    std::fs::write(t.join("secret.env"), format!("{SECRET}\n")).unwrap();
    let mut failures = Vec::new();
    for file in store::RUN_FILES {
        for p in Plant::ALL {
            let case = t.join(format!("case-{}-{p:?}", file.name.replace('/', "_")));
            let dir = profiled_run(&case);
            let Some(planted) = plant(t, &dir, file, p) else {
                eprintln!(
                    "{p:?} not made for {} (mknod needs root): left out",
                    file.name
                );
                continue;
            };
            for args in readers(file) {
                let text = answer(t, args, &dir);
                let named = p.reasons().iter().any(|r| text.contains(r));
                if !named || !text.contains(&planted) || text.contains(SECRET) {
                    failures.push(format!("{args:?} with {p:?} at {planted}:\n{text}"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn the_flame_section_escapes_statuses_and_frame_names() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let status = "sampled <img src=x onerror=alert(1)> [c](javascript:alert(1))";
    let frame = "evil`</code><img src=x onerror=alert(1)>|x";
    let dir = profiled_run_with(t, status, &["main", frame]);
    let out = t.join("report");
    common::gapscope(t)
        .timeout(LIMIT)
        .arg("report")
        .arg(&dir)
        .args(["--flame-span", "prove", "--out"])
        .arg(&out)
        .assert()
        .success();
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("## Sampled stacks"), "{md}");
    assert!(
        md.contains("sampled &lt;img src=x onerror=alert(1)> [c]\\(javascript:alert(1))"),
        "{md}"
    );
    // The frame's backtick cannot close its code span, nor its pipe split the row: the
    // only `<img` left is inside that code span.
    let span = "``evil`</code><img src=x onerror=alert(1)>\\|x``";
    assert!(md.contains(&format!("| {span} |")), "{md}");
    assert_eq!(md.matches("<img").count(), md.matches(span).count(), "{md}");
}

/// The output of a command that succeeded, with no terminal control character in it.
fn succeeded_without_controls(out: std::process::Output) -> String {
    let text = [out.stdout, out.stderr].concat();
    let text = String::from_utf8_lossy(&text).into_owned();
    assert!(out.status.success(), "{text}");
    assert!(!text.contains('\x1b') && !text.contains('\x07'), "{text:?}");
    text
}

#[test]
fn history_add_prints_folder_names_and_reasons_with_their_controls_shown() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let evil = t.join("runs\x1b]0;owned\x07\x1b[2J");
    let dir = fixture::write(&evil, &fixture::Options::default());
    let out = common::gapscope(t)
        .timeout(LIMIT)
        .args(["history", "add"])
        .arg(&dir)
        .arg("--db")
        .arg(t.join("h.sqlite"))
        .output()
        .unwrap();
    let text = succeeded_without_controls(out);
    assert!(text.contains("runs\\x1b]0;owned\\x07\\x1b[2J"), "{text}");
}

#[test]
fn run_prints_a_programs_span_names_with_their_controls_shown() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    // A span whose name sets the terminal's title and clears the screen.
    let script = "import os, time; t = time.clock_gettime_ns(time.CLOCK_MONOTONIC); \
                  print(f'@gapscope1 X {os.getpid()} {t} 10 evil\\x1b]0;owned\\x07\\x1b[2J')";
    let exp = t.join("e.toml");
    std::fs::write(
        &exp,
        format!(
            "name = \"evil\"\n[workload]\ncommand = [\"python3\", \"-c\", {script:?}]\n[run]\n\
             reps = 2\nwarmups = 0\n[[variant]]\nname = \"a\"\n[[variant]]\nname = \"b\"\n"
        ),
    )
    .unwrap();
    let out = common::gapscope(t)
        .timeout(LIMIT)
        .arg("run")
        .arg(&exp)
        .output()
        .unwrap();
    let text = succeeded_without_controls(out);
    assert!(text.contains("evil\\x1b]0;owned\\x07\\x1b[2J"), "{text}");
}

/// Whether `name` (a path inside a run folder) is one the store lists: a file of
/// `RUN_FILES` (a rep's number for `{rep}`, or gzipped where it may be), a next part of
/// a table (`spans.3.csv`), or a variant's build log.
fn listed(name: &str) -> bool {
    let as_pattern = |f: &str| {
        regex::escape(f)
            .replace(r"\{rep\}", r"\d+")
            .replace(r"\.2\.csv", r"\.\d+\.csv")
    };
    store::RUN_FILES.iter().any(|f| {
        let p = as_pattern(f.name);
        let p = if f.gzip {
            format!("^{p}(\\.gz)?$")
        } else {
            format!("^{p}$")
        };
        regex::Regex::new(&p).unwrap().is_match(name)
    }) || ["a", "b"].iter().any(|v| name == store::build_log(v))
}

/// A finished run of a command workload in `t`: a build, telemetry on (no GPU here: its
/// tables still come), and enough spans to roll spans.csv into parts.
fn command_run(t: &Path) -> PathBuf {
    let script = "import os, time\nfor k in range(200):\n    t = time.clock_gettime_ns(time.CLOCK_MONOTONIC)\n    print(f'@gapscope1 X {os.getpid()} {t} 10 step')\n";
    std::fs::create_dir_all(t).unwrap();
    let exp = t.join("e.toml");
    std::fs::write(
        &exp,
        format!(
            "name = \"files\"\n[workload]\ncommand = [\"python3\", \"-c\", {script:?}]\n\
             build = [\"true\"]\n[run]\nreps = 2\nwarmups = 1\n\
             [[variant]]\nname = \"a\"\n[[variant]]\nname = \"b\"\n"
        ),
    )
    .unwrap();
    let out = common::gapscope(t)
        .timeout(LIMIT)
        .env(store::PART_BYTES_VAR, "4096")
        .arg("run")
        .arg(&exp)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let dir = common::run_dir_of(&out.stdout);
    if dir.is_absolute() {
        dir
    } else {
        t.join(dir)
    }
}

/// Every file under `dir` (relative path → bytes).
fn files_of(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut walk = vec![dir.to_path_buf()];
    while let Some(d) = walk.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let t = e.file_type().unwrap();
            let rel = e.path().strip_prefix(dir).unwrap().display().to_string();
            if t.is_dir() {
                walk.push(e.path());
            } else if t.is_file() {
                out.insert(rel, std::fs::read(e.path()).unwrap());
            } else {
                out.insert(rel, Vec::new());
            }
        }
    }
    out
}

#[test]
fn a_run_writes_only_files_the_store_lists_for_its_readers() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let dir = command_run(t);
    let names: Vec<String> = files_of(&dir).into_keys().collect();
    assert!(names.iter().any(|n| n == "spans.3.csv"), "{names:?}");
    assert!(names.iter().any(|n| n == "build-a.log"), "{names:?}");
    let unlisted: Vec<&String> = names.iter().filter(|n| !listed(n)).collect();
    assert!(
        unlisted.is_empty(),
        "files no reader's hostile test covers: {unlisted:?}"
    );
}

/// `run --resume` of a finished folder with one file replaced (each name the store lists,
/// each plant): it refuses, naming the file and why, or, where it does not read that
/// file, finds nothing left to run. Either way it measures nothing over the folder: every
/// other file keeps its bytes.
#[test]
fn a_resume_of_a_finished_folder_with_a_planted_file_refuses_or_does_nothing_and_keeps_every_byte()
{
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    std::fs::write(t.join("secret.env"), format!("{SECRET}\n")).unwrap();
    let dir = command_run(&t.join("first"));
    let before = files_of(&dir);
    let mut failures = Vec::new();
    for file in store::RUN_FILES {
        for p in [
            Plant::LinkToSecret,
            Plant::Fifo,
            Plant::DevZeroNode,
            Plant::Bomb,
        ] {
            let case = t.join(format!("case-{}-{p:?}", file.name.replace('/', "_")));
            for (rel, bytes) in &before {
                let to = case.join(rel);
                std::fs::create_dir_all(to.parent().unwrap()).unwrap();
                std::fs::write(&to, bytes).unwrap();
            }
            let Some(planted) = plant(t, &case, file, p) else {
                continue;
            };
            let out = common::gapscope(t)
                .timeout(LIMIT)
                .args(["run", "--resume"])
                .arg(&case)
                .output()
                .unwrap();
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            let refused = out.status.code() == Some(1)
                && p.reasons().iter().any(|r| text.contains(r))
                && text.contains(&planted);
            let nothing_to_run = out.status.success();
            // The other files, read as they were (the planted one may be 16 GiB sparse).
            let changed: Vec<&String> = before
                .iter()
                .filter(|(rel, bytes)| {
                    ![file.of_rep(0), file.gz_of_rep(0)].contains(*rel)
                        && std::fs::read(case.join(rel)).ok().as_ref() != Some(*bytes)
                })
                .map(|(rel, _)| rel)
                .collect();
            if !(refused || nothing_to_run) || !changed.is_empty() || text.contains(SECRET) {
                failures.push(format!(
                    "{p:?} at {planted}: {:?}, changed {changed:?}\n{text}",
                    out.status
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
