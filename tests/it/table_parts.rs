//! spans.csv in parts: a run whose part size is lowered (`GAPSCOPE_TABLE_PART_BYTES`)
//! writes `spans.2.csv`, `spans.3.csv`, … with each rep's rows in one part; `summary`,
//! `diff` and `report` read the parts as they read one spans.csv holding them all; a run
//! killed and resumed goes on in its last part and loses nothing; and a part replaced by
//! a link is refused as the first part is. Every command runs under a time limit.

use crate::common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use gapscope::store::{self, RunData, SpanRow};

const LIMIT: Duration = Duration::from_secs(120);
const DEMO: &str = env!("GAPSCOPE_EMIT_DEMO");

/// `gapscope` in `tmp` under [`LIMIT`], with parts of `part_bytes`.
fn gapscope(tmp: &Path, part_bytes: u64) -> assert_cmd::Command {
    let mut c = common::gapscope(tmp);
    c.timeout(LIMIT)
        .env(store::PART_BYTES_VAR, part_bytes.to_string());
    c
}

/// An experiment of two variants running the emitter's demo (`work STEPS SPIN_MS`).
fn experiment(t: &Path, reps: u32, spin_ms: u32) -> PathBuf {
    let exp = t.join("parts.toml");
    std::fs::write(
        &exp,
        format!(
            "name = \"parts\"\n[workload]\ncommand = [\"{DEMO}\", \"work\", \"3\", \"{spin_ms}\"]\n\
             [run]\nreps = {reps}\nwarmups = 0\n[[variant]]\nname = \"a\"\n\
             [[variant]]\nname = \"b\"\n"
        ),
    )
    .unwrap();
    exp
}

/// The parts of spans.csv in `dir`, in order (plain files).
fn parts(dir: &Path) -> Vec<PathBuf> {
    (1..)
        .map(|n| dir.join(store::part_name(store::SPANS, n)))
        .take_while(|p| p.exists())
        .collect()
}

/// Checks that every rep of `dir` has its rows in one part and all of them there, and
/// that the folder reads back; returns what it read.
fn every_rep_whole_in_one_part(dir: &Path) -> RunData {
    let mut part_of: HashMap<u32, usize> = HashMap::new();
    let mut rows: HashMap<u32, u32> = HashMap::new();
    for (i, p) in parts(dir).iter().enumerate() {
        let spans: Vec<SpanRow> = store::read_csv(p).unwrap();
        for s in spans {
            let first = *part_of.entry(s.rep).or_insert(i);
            assert_eq!(first, i, "rep {} is split across parts", s.rep);
            *rows.entry(s.rep).or_default() += 1;
        }
    }
    let data = RunData::load(dir).unwrap();
    for r in &data.runs {
        assert!(r.span_rows.unwrap_or(0) > 1, "{r:?}");
        assert_eq!(r.span_rows, rows.get(&r.rep).copied(), "rep {}", r.rep);
    }
    data
}

/// A copy of run folder `dir` at `to` with every part's rows in the one spans.csv.
fn merged_copy(dir: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if e.file_type().unwrap().is_file() && !name.starts_with("spans.") {
            std::fs::copy(e.path(), to.join(&name)).unwrap();
        }
    }
    let mut text = String::new();
    for (i, p) in parts(dir).iter().enumerate() {
        let part = std::fs::read_to_string(p).unwrap();
        let skip = if i == 0 {
            0
        } else {
            part.find('\n').unwrap() + 1
        };
        text.push_str(&part[skip..]);
    }
    std::fs::write(to.join(store::SPANS), text).unwrap();
}

/// stdout of `args` on `dir` (and report.md for `report`), the folder's path replaced.
fn answer(t: &Path, args: &[&str], dir: &Path) -> String {
    let out_dir = t.join("report-out");
    let _ = std::fs::remove_dir_all(&out_dir);
    let mut c = gapscope(t, 1);
    c.args(args).arg(dir);
    if args[0] == "report" {
        c.arg("--out").arg(&out_dir);
    }
    let out = c.assert().success().get_output().clone();
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    if args[0] == "report" {
        text.push_str(&std::fs::read_to_string(out_dir.join("report.md")).unwrap());
    }
    text.replace(&dir.display().to_string(), "RUN")
}

/// A finished run of `exp` under `t/results` with parts of one byte (a part per rep);
/// its folder.
fn run_in_parts(t: &Path, exp: &Path) -> PathBuf {
    let out = gapscope(t, 1)
        .arg("run")
        .arg(exp)
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
fn a_run_goes_on_in_parts_that_summary_diff_and_report_read_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let exp = experiment(t, 3, 1);
    // One byte: each rep after the first starts a part of its own.
    let dir = run_in_parts(t, &exp);
    let data = every_rep_whole_in_one_part(&dir);
    assert_eq!(data.runs.len(), 6);
    assert_eq!(parts(&dir).len(), 6, "a part per rep");
    let merged = t.join("merged").join(dir.file_name().unwrap());
    merged_copy(&dir, &merged);
    assert_eq!(
        RunData::load(&merged).unwrap().spans.len(),
        data.spans.len()
    );
    for args in [&["summary"][..], &["diff", "--format", "json"], &["report"]] {
        let parted = answer(t, args, &dir);
        assert_eq!(parted, answer(t, args, &merged), "{args:?}");
        assert!(!parted.is_empty(), "{args:?}");
    }
}

#[test]
fn a_run_killed_and_resumed_goes_on_in_its_last_part_and_loses_no_rep() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let exp = experiment(t, 4, 100);
    let results = t.join("results");
    let mut run = common::run_process(t, &exp)
        .arg("--quiet")
        .env(store::PART_BYTES_VAR, "1")
        .spawn()
        .unwrap();
    // Killed (SIGKILL) once its third part is there, in the middle of a later rep.
    let end = std::time::Instant::now() + LIMIT;
    let dir = loop {
        let found = std::fs::read_dir(results.join("parts"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .find(|d| d.join(store::part_name(store::SPANS, 3)).exists());
        if let Some(d) = found {
            break d;
        }
        assert!(std::time::Instant::now() < end, "no third part");
        std::thread::sleep(Duration::from_millis(20));
    };
    std::thread::sleep(Duration::from_millis(150));
    run.kill().unwrap();
    run.wait().unwrap();
    let before = RunData::load(&dir).unwrap();
    assert!(before.runs.len() < 8, "the run finished before the kill");
    let kept: Vec<(u32, u32)> = before
        .runs
        .iter()
        .map(|r| (r.rep, r.span_rows.unwrap()))
        .collect();
    let parts_before = parts(&dir).len();
    gapscope(t, 1)
        .arg("run")
        .arg("--resume")
        .arg(&dir)
        .arg("--quiet")
        .assert()
        .success();
    let data = every_rep_whole_in_one_part(&dir);
    assert_eq!(data.runs.len(), 8, "every rep there once");
    for (rep, n) in kept {
        let r = data.runs.iter().find(|r| r.rep == rep).unwrap();
        assert_eq!(r.span_rows, Some(n), "rep {rep} kept as it was");
    }
    // A part per rep, as without the kill: the resume went on in the last part (a
    // part the killed rep had begun is taken by the rep that runs again), none is
    // left empty, and none is missing on the way.
    let parts_after = parts(&dir);
    assert!(
        parts_after.len() >= parts_before,
        "{parts_before} parts before"
    );
    assert_eq!(parts_after.len(), 8, "{parts_after:?}");
}

#[test]
fn a_link_named_as_a_later_part_is_refused_like_the_first_part() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let exp = experiment(t, 1, 1);
    let dir = run_in_parts(t, &exp);
    let second = dir.join(store::SPANS_PART_2);
    let secret = t.join("secret.csv");
    std::fs::copy(&second, &secret).unwrap();
    std::fs::remove_file(&second).unwrap();
    std::os::unix::fs::symlink(&secret, &second).unwrap();
    for args in [&["summary"][..], &["run", "--resume"]] {
        let out = gapscope(t, 1).args(args).arg(&dir).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains("symbolic link") && err.contains(store::SPANS_PART_2),
            "{args:?}: {err}"
        );
    }
    // A part missing between two others is named.
    std::fs::remove_file(&second).unwrap();
    std::fs::write(
        dir.join(store::part_name(store::SPANS, 3)),
        std::fs::read(&secret).unwrap(),
    )
    .unwrap();
    let out = gapscope(t, 1).arg("summary").arg(&dir).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("spans.2.csv: missing") && err.contains("spans.3.csv is there"),
        "{err}"
    );
}
