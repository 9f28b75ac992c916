//! Run folders and outputs made by someone else, or pointed somewhere odd: each class of
//! hostile input as a test of the command that meets it. Nothing is written outside the
//! target, nothing is read outside the folder, no command panics, and none hangs: every
//! command runs under a time limit, so a hang fails the test instead of stalling CI.

use crate::common;
use crate::fixture;

use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use assert_cmd::Command;
use gapscope::store::{self, SpanRow};

/// Longest a command on a fixture may take (a debug build on a busy 2-core machine
/// reports a fixture in a few seconds): past it, the command hangs.
const LIMIT: Duration = Duration::from_secs(120);

/// `gapscope` in `tmp`, with its own params cache, under [`LIMIT`].
fn gapscope(tmp: &Path) -> Command {
    let mut c = common::gapscope(tmp);
    c.timeout(LIMIT);
    c
}

/// A fixture run folder under `tmp`.
fn run(tmp: &Path) -> PathBuf {
    fixture::write(tmp, &fixture::Options::default())
}

/// The exit status and stderr of a command that must fail cleanly: exit 1 (an error),
/// never 101 (a panic) nor a kill at the time limit.
fn fails(c: &mut Command) -> String {
    let out = c.output().expect("gapscope runs");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

/// Rewrites spans.csv of `dir` after `edit`.
fn edit_spans(dir: &Path, edit: impl FnOnce(&mut Vec<SpanRow>)) {
    let path = dir.join(store::SPANS);
    let mut rows: Vec<SpanRow> = store::read_csv(&path).unwrap();
    edit(&mut rows);
    let mut w = csv::Writer::from_path(&path).unwrap();
    for r in &rows {
        w.serialize(r).unwrap();
    }
    w.flush().unwrap();
}

fn edit_meta(dir: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let path = dir.join(store::META);
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    edit(&mut v);
    std::fs::write(&path, serde_json::to_vec(&v).unwrap()).unwrap();
}

/// Names of the entries of `dir` that a failed write could leave (temp files).
fn temp_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains(".tmp"))
                .collect()
        })
        .unwrap_or_default()
}

// --- Writes replace nothing they are not meant to. ---

#[test]
fn an_export_to_a_device_or_through_a_link_is_refused_and_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let dir = run(t);
    let e = fails(
        gapscope(t)
            .arg("export")
            .arg(&dir)
            .args(["--out-file", "/dev/null"]),
    );
    assert!(e.contains("a character device, not a regular file"), "{e}");
    let null = std::fs::symlink_metadata("/dev/null").unwrap();
    assert!(null.file_type().is_char_device(), "/dev/null was replaced");
    assert!(temp_files(Path::new("/dev")).is_empty());

    std::fs::write(t.join("victim.txt"), "keep me").unwrap();
    std::os::unix::fs::symlink(t.join("victim.txt"), t.join("trace.json")).unwrap();
    let e = fails(
        gapscope(t)
            .arg("export")
            .arg(&dir)
            .arg("--out-file")
            .arg(t.join("trace.json")),
    );
    assert!(e.contains("is a symbolic link"), "{e}");
    assert_eq!(
        std::fs::read_to_string(t.join("victim.txt")).unwrap(),
        "keep me"
    );
    assert!(temp_files(t).is_empty(), "{:?}", temp_files(t));
}

#[test]
fn out_dash_is_stdout() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let dir = run(t);
    let out = gapscope(t)
        .arg("export")
        .arg(&dir)
        .args(["--out-file", "-"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&out).expect("the trace on stdout");
    assert!(v["traceEvents"].as_array().is_some_and(|e| !e.is_empty()));
    assert!(!t.join("-").exists() && !t.join("exports").exists());
    let e = fails(gapscope(t).arg("report").arg(&dir).args(["--out", "-"]));
    assert!(e.contains("--out DIR"), "{e}");
}

#[test]
fn a_resume_refuses_a_folder_with_links_and_appends_through_none() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let dir = tiny_run(t);
    std::fs::write(t.join("elsewhere.csv"), "untouched\n").unwrap();
    std::fs::remove_file(dir.join(store::TELEMETRY)).unwrap();
    std::os::unix::fs::symlink(t.join("elsewhere.csv"), dir.join(store::TELEMETRY)).unwrap();
    let e = fails(gapscope(t).arg("run").arg("--resume").arg(&dir));
    assert!(e.contains("is a symbolic link"), "{e}");
    assert!(e.contains("telemetry.csv"), "{e}");
    assert_eq!(
        std::fs::read_to_string(t.join("elsewhere.csv")).unwrap(),
        "untouched\n"
    );
}

// --- Reads stay inside the folder; derived paths pass the rule of names. ---

#[test]
fn a_report_never_embeds_a_file_a_link_points_to() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let dir = run(t);
    std::fs::write(t.join("secret.env"), "API_TOKEN=hunter2\n").unwrap();
    std::fs::remove_file(dir.join(store::EXPERIMENT_COPY)).unwrap();
    std::os::unix::fs::symlink(t.join("secret.env"), dir.join(store::EXPERIMENT_COPY)).unwrap();
    let out = t.join("report");
    gapscope(t)
        .arg("report")
        .arg(&dir)
        .arg("--out")
        .arg(&out)
        .assert()
        .success();
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(!md.contains("hunter2"), "the linked file was embedded");
    assert!(md.contains("is a symbolic link"), "{md}");
}

#[test]
fn names_from_meta_json_never_make_a_path_outside() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let work = t.join("work");
    std::fs::create_dir(&work).unwrap();
    let dir = run(t);
    edit_meta(&dir, |m| m["experiment"] = "../../escaped".into());
    for cmd in ["report", "export"] {
        let e = fails(gapscope(&work).arg(cmd).arg(&dir));
        assert!(
            e.contains("meta.json's experiment \"../../escaped\" is not allowed"),
            "{e}"
        );
    }
    assert!(!t.join("escaped").exists() && !work.join("reports").exists());
    edit_meta(&dir, |m| {
        m["experiment"] = "fixture".into();
        m["run_id"] = "../x".into();
    });
    let e = fails(gapscope(&work).arg("report").arg(&dir));
    assert!(e.contains("run_id"), "{e}");
}

// --- Crafted tables end in an error naming the row, fast. ---

#[test]
fn a_parent_loop_is_refused_by_every_reader() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let dir = run(t);
    edit_spans(&dir, |rows| {
        // The root of rep 2 becomes the child of its own child.
        let root = rows
            .iter()
            .position(|s| s.rep == 2 && s.parent_id.is_none())
            .unwrap();
        let child = rows
            .iter()
            .find(|s| s.rep == 2 && s.parent_id == Some(rows[root].span_id))
            .unwrap()
            .span_id;
        rows[root].parent_id = Some(child);
    });
    for args in [
        vec!["diff"],
        vec!["report", "--out", "r"],
        vec!["summary"],
        vec!["export", "--out-file", "x.json"],
    ] {
        let e = fails(gapscope(t).args(&args[..1]).arg(&dir).args(&args[1..]));
        assert!(e.contains("its parent chain loops"), "{args:?}: {e}");
        assert!(e.contains("spans.csv, line "), "{e}");
    }
}

/// An edit of a run's span rows that a reader must refuse.
type RowEdit = Box<dyn Fn(&mut Vec<SpanRow>)>;

#[test]
fn duplicate_ids_and_impossible_values_are_refused_naming_the_row() {
    let cases: Vec<(&str, RowEdit)> = vec![
        (
            "is already the id of line",
            Box::new(|rows: &mut Vec<SpanRow>| {
                let id = rows[1].span_id;
                let r = rows[1].rep;
                let other = rows
                    .iter()
                    .position(|s| s.rep == r && s.span_id != id)
                    .unwrap();
                rows[other].span_id = id;
            }),
        ),
        (
            "past the clock's range",
            Box::new(|rows: &mut Vec<SpanRow>| {
                rows[3].end_ns = u64::MAX;
                rows[3].duration_ns = u64::MAX - rows[3].start_ns;
            }),
        ),
        (
            "is longer than the span",
            Box::new(|rows: &mut Vec<SpanRow>| rows[3].self_ns = rows[3].duration_ns + 1),
        ),
    ];
    for (want, edit) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let t = tmp.path();
        let dir = run(t);
        edit_spans(&dir, |rows| edit(rows));
        let e = fails(gapscope(t).arg("diff").arg(&dir));
        assert!(e.contains(want), "{want}: {e}");
        assert!(e.contains("spans.csv, line "), "{e}");
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = run(tmp.path());
    edit_meta(&dir, |m| m["schema_version"] = 99.into());
    let e = fails(gapscope(tmp.path()).arg("summary").arg(&dir));
    assert!(
        e.contains("schema_version 99 is not one this gapscope reads"),
        "{e}"
    );
}

#[test]
fn an_experiment_path_without_end_and_giant_schedules_fail_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let e = fails(gapscope(t).args(["run", "/dev/zero"]));
    assert!(e.contains("more than 1048576 bytes"), "{e}");
    let exp = |name: &str, run: &str| {
        let p = t.join(format!("{name}.toml"));
        std::fs::write(
            &p,
            format!(
                "name = \"{name}\"\n[workload]\ncircuit = \"porep\"\nlog2_constraints = 10\n\
                 batch = 1\nbackend = \"cpu\"\n[run]\n{run}\n[[variant]]\nname = \"a\"\n"
            ),
        )
        .unwrap();
        p
    };
    for (run, want) in [
        (
            "reps = 4000000000",
            "run.reps = 4000000000 is more than 100000",
        ),
        (
            "warmups = 4000000000",
            "run.warmups = 4000000000 is more than 10000",
        ),
        (
            "rep_timeout_s = 9223372036854775807",
            "run.rep_timeout_s = 9223372036854775807 is more than",
        ),
    ] {
        let e = fails(gapscope(t).arg("run").arg(exp("giant", run)));
        assert!(e.contains(want), "{run}: {e}");
    }
    assert!(!t.join("results").exists() && !t.join("params").exists());
}

// --- Output from a folder is escaped. ---

#[test]
fn span_names_with_links_html_and_bidi_controls_are_escaped() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let dir = run(t);
    let evil = "[click](https://evil.example)<img src=x onerror=alert(1)>\u{202E}txt.exe";
    edit_spans(&dir, |rows| {
        for s in rows.iter_mut().filter(|s| s.name == "synthesis") {
            s.name = evil.into();
        }
    });
    let out = t.join("report");
    gapscope(t)
        .arg("report")
        .arg(&dir)
        .arg("--out")
        .arg(&out)
        .assert()
        .success();
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    let diff = gapscope(t)
        .arg("diff")
        .arg(&dir)
        .args(["--format", "markdown"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let diff = String::from_utf8(diff).unwrap();
    for (what, text) in [("report.md", &md), ("diff --format markdown", &diff)] {
        assert!(
            text.contains("[click]\\(https://evil.example)"),
            "{what}: {text}"
        );
        assert!(!text.contains("](https://evil"), "{what} links out");
        assert!(!text.contains("<img"), "{what} carries HTML");
        assert!(!text.contains('\u{202E}'), "{what} carries a bidi control");
        assert!(text.contains("⟨U+202E⟩"), "{what}");
    }
}

// --- Silent success. ---

const TINY: &str = r#"
[workload]
circuit = "porep"
log2_constraints = 10
batch = 1
backend = "cpu"
[run]
reps = 1
warmups = 0
[[variant]]
name = "a"
"#;

fn tiny(t: &Path) -> PathBuf {
    let p = t.join("tiny.toml");
    std::fs::write(&p, format!("name = \"tiny\"\n{TINY}")).unwrap();
    p
}

/// A finished run of [`TINY`] under `t/results`; its folder.
fn tiny_run(t: &Path) -> PathBuf {
    let exp = tiny(t);
    let out = gapscope(t)
        .arg("run")
        .arg(&exp)
        .arg("--results-dir")
        .arg(t.join("results"))
        .arg("--quiet")
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    common::run_dir_of(&out)
}

#[test]
fn a_resume_with_nothing_left_keeps_completed_utc() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let dir = tiny_run(t);
    let before = std::fs::read(dir.join(store::META)).unwrap();
    gapscope(t)
        .arg("run")
        .arg("--resume")
        .arg(&dir)
        .arg("--quiet")
        .assert()
        .success();
    let after = std::fs::read(dir.join(store::META)).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&before),
        String::from_utf8_lossy(&after),
        "a resume that ran nothing rewrote meta.json"
    );
    assert!(temp_files(&dir).is_empty(), "{:?}", temp_files(&dir));
}

// --- Races. ---

#[test]
fn three_first_runs_on_one_fresh_params_folder_record_the_params_that_are_there() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let exp = tiny(t);
    let children: Vec<_> = (0..3)
        .map(|i| {
            let mut c = std::process::Command::new(assert_cmd::cargo::cargo_bin("gapscope"));
            c.current_dir(t)
                .env("GAPSCOPE_PARAMS_DIR", t.join("params"))
                .arg("run")
                .arg(&exp)
                .arg("--results-dir")
                .arg(t.join(format!("results{i}")))
                .arg("--quiet")
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            c.spawn().unwrap()
        })
        .collect();
    let deadline = std::time::Instant::now() + LIMIT * 3;
    let mut dirs = Vec::new();
    for mut child in children {
        while child.try_wait().unwrap().is_none() {
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                panic!("a concurrent first run did not finish in {:?}", LIMIT * 3);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        dirs.push(common::run_dir_of(&out.stdout));
    }
    let params: Vec<PathBuf> = std::fs::read_dir(t.join("params"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    let file = params
        .iter()
        .find(|p| p.extension().is_some_and(|e| e == "params"))
        .expect("a params file");
    assert!(
        params
            .iter()
            .all(|p| !p.file_name().unwrap().to_string_lossy().contains(".tmp")),
        "{params:?}"
    );
    let sha = {
        use sha2::Digest;
        let d = sha2::Sha256::digest(std::fs::read(file).unwrap());
        d.iter().map(|b| format!("{b:02x}")).collect::<String>()
    };
    let sidecar: serde_json::Value =
        serde_json::from_slice(&std::fs::read(file.with_extension("json")).unwrap()).unwrap();
    assert_eq!(sidecar["params_sha256"], sha.as_str());
    for d in dirs {
        let meta = store::read_meta(&d).unwrap();
        assert_eq!(meta.params.len(), 1);
        assert_eq!(meta.params[0]["sha256"], sha.as_str(), "{}", d.display());
    }
}
