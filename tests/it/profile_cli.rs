//! End-to-end tests of sampled stacks (`profile = true`): `gapscope run` records them per
//! rep, `summary` and `report` show them, `diff --flame-span` draws the differential graph, and
//! a machine that refuses perf events gets "unavailable" with the reason, not a failed run.

use std::path::{Path, PathBuf};

use gapscope::store::{RepStatus, RunData};

use crate::common;
use common::{gapscope, run_ok};

const EXP: &str = r#"
name = "prof"
[workload]
circuit = "porep"
log2_constraints = 10
batch = 1
backend = "cpu"
[run]
reps = 2
warmups = 0
profile = true
profile_hz = 2000
[[variant]]
name = "baseline"
[[variant]]
name = "candidate"
gadget = "lc"
"#;

/// Runs `body` with `extra` flags; the run folder and `gapscope summary`'s output.
fn run(tmp: &Path, body: &str, extra: &[&str]) -> (PathBuf, String) {
    let exp = tmp.join("prof.toml");
    std::fs::write(&exp, body).unwrap();
    let dir = tmp.join(run_ok(tmp, &exp, extra));
    let out = gapscope(tmp).arg("summary").arg(&dir).assert().success();
    let summary = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    (dir, summary)
}

#[test]
fn refused_perf_events_leave_the_reps_whole_and_say_why() {
    let tmp = tempfile::tempdir().unwrap();
    for process in ["shared", "per_rep"] {
        let body = EXP.replace(
            "warmups = 0",
            &format!("warmups = 0\nprocess = \"{process}\""),
        );
        let (dir, stdout) = run(tmp.path(), &body, &["--debug-deny-profile", "paranoid 4"]);
        let d = RunData::load(&dir).unwrap();
        assert!(
            d.runs.iter().all(|r| r.status == RepStatus::Ok),
            "{process}"
        );
        assert!(!d.spans.is_empty());
        let why = "unavailable: perf_event_open(cpu-clock) refused: paranoid 4";
        assert_eq!(d.meta.profile["baseline"], why, "{process}");
        assert!(
            stdout.contains(&format!("sampled stacks (candidate): {why}")),
            "{process}: {stdout}"
        );
        let reps = gapscope::profile::folded::read_run(&dir, true).unwrap();
        assert_eq!(reps.len(), 4, "{process}");
        assert!(reps
            .iter()
            .all(|p| p.unavailable.is_some() && p.rows.is_empty()));
        // The report says so instead of drawing.
        let out = tmp.path().join(format!("report-{process}"));
        gapscope(tmp.path())
            .args([
                "report",
                dir.to_str().unwrap(),
                "--out",
                out.to_str().unwrap(),
            ])
            .assert()
            .success();
        let md = std::fs::read_to_string(out.join("report.md")).unwrap();
        assert!(md.contains("## Sampled stacks") && md.contains(why), "{md}");
    }
}

#[test]
fn sampled_stacks_reach_the_report_and_the_differential_flame_graph() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, stdout) = run(tmp.path(), EXP, &[]);
    let d = RunData::load(&dir).unwrap();
    if d.meta.profile["baseline"].starts_with("unavailable") {
        eprintln!("skipped: {}", d.meta.profile["baseline"]);
        return;
    }
    assert!(d.meta.profile["baseline"].starts_with("sampled at 2000 Hz"));
    assert_eq!(
        d.meta.profile["baseline"].contains("no frame pointers"),
        !gapscope::profile::frame_pointers()
    );
    assert!(stdout.contains("sampled stacks (baseline): sampled at 2000 Hz"));
    assert!(stdout.contains("2 reps, median"), "{stdout}");
    let reps = gapscope::profile::folded::read_run(&dir, true).unwrap();
    assert_eq!(reps.len(), 4);
    // Every row names a span of its rep.
    for p in &reps {
        assert!(p.counts.own + p.counts.foreign > 0, "{p:?}");
        for r in &p.rows {
            assert!(d
                .spans
                .iter()
                .any(|s| s.rep == p.rep && s.span_id == r.span_id && s.name == r.span));
        }
    }
    let out = tmp.path().join("report");
    gapscope(tmp.path())
        .args([
            "report",
            dir.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .args(["--flame-span", "prove"])
        .assert()
        .success();
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        md.contains("[flame-baseline-prove.svg](flame-baseline-prove.svg)"),
        "{md}"
    );
    let svg = std::fs::read_to_string(out.join("flame-candidate-prove.svg")).unwrap();
    assert!(svg.contains("[prove]") && svg.contains("[gpu_prove]"));
    let flame = tmp.path().join("d.svg");
    let o = gapscope(tmp.path())
        .args([
            "diff",
            dir.to_str().unwrap(),
            "--flame-span",
            "gpu_prove",
            "--flame-file",
        ])
        .arg(&flame)
        .assert()
        .success();
    let text = String::from_utf8_lossy(&o.get_output().stdout).into_owned();
    assert!(text.contains("Sampled stacks of `gpu_prove`"), "{text}");
    assert!(text.contains("gpu_prove total: "), "{text}");
    assert!(std::fs::read_to_string(&flame).unwrap().contains("<svg"));
    // A span nobody sampled is an error that names it; the flag's old name still works,
    // with a line that gives the new one.
    gapscope(tmp.path())
        .args(["diff", dir.to_str().unwrap(), "--flame", "no_such_span"])
        .assert()
        .failure()
        .stderr(predicates::str::contains(
            "no samples under span \"no_such_span\"",
        ))
        .stderr(predicates::str::contains(
            "note: `--flame` is now `--flame-span`",
        ));
}
