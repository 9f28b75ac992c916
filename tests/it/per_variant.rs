//! `process = "per_variant"`: one worker process per variant serves all of its reps
//! (params and backend set up once), the variants still interleaved. A worker that
//! crashes or hangs fails its rep and the next rep starts a new one.

use std::path::Path;

use gapscope::store::{RepStatus, RunData};

use crate::common;
use common::gapscope;

const EXP: &str = r#"name = "pv"
[workload]
circuit = "chain"
log2_constraints = 4
batch = 2
backend = "cpu"
[run]
reps = 4
warmups = 1
process = "per_variant"
[[variant]]
name = "baseline"
[[variant]]
name = "candidate"
drop = "async"
"#;

fn run(tmp: &Path, body: &str, extra: &[&str], code: i32) -> (RunData, String) {
    let exp = tmp.join("pv.toml");
    std::fs::write(&exp, body).unwrap();
    let out = gapscope(tmp)
        .arg("run")
        .arg(&exp)
        .arg("--quiet")
        .arg("--results-dir")
        .arg(tmp.join("results"))
        .args(extra)
        .assert()
        .code(code);
    let o = out.get_output();
    let dir = common::run_dir_of(&o.stdout);
    (
        RunData::load(&dir).unwrap(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// What `gapscope diff RUN` prints.
fn diff_text(tmp: &Path, run: &Path) -> String {
    let out = gapscope(tmp).arg("diff").arg(run).assert().success();
    String::from_utf8_lossy(&out.get_output().stdout).into_owned()
}

#[test]
fn each_variant_runs_in_one_worker_of_its_own_and_the_reps_interleave() {
    let tmp = tempfile::tempdir().unwrap();
    let (d, stderr) = run(tmp.path(), EXP, &[], 0);
    assert_eq!(d.runs.len(), 10, "{stderr}");
    assert!(
        d.runs
            .iter()
            .all(|r| r.status == RepStatus::Ok && r.checked),
        "{:?}",
        d.runs
    );
    let pids = |v: &str| {
        let mut p: Vec<u32> = d
            .runs
            .iter()
            .filter(|r| r.variant == v)
            .map(|r| r.pid)
            .collect();
        p.dedup();
        p
    };
    let (b, c) = (pids("baseline"), pids("candidate"));
    assert_eq!((b.len(), c.len()), (1, 1), "one worker each: {b:?} {c:?}");
    assert_ne!(b[0], c[0]);
    assert_ne!(b[0], std::process::id());
    let order: Vec<&str> = d.runs.iter().map(|r| r.variant.as_str()).collect();
    assert_eq!(
        &order[..4],
        ["baseline", "candidate", "baseline", "candidate"]
    );
    assert_eq!(d.meta.process, "per_variant");
    let text = diff_text(tmp.path(), &d.dir);
    assert!(
        text.contains("every rep of the candidate in another (pid")
            && text.contains("set run.reps_per_worker below the reps per variant"),
        "{text}"
    );
    // Every measured rep has its span tree, from the worker.
    for r in d.runs.iter().filter(|r| !r.warmup) {
        assert!(d
            .spans
            .iter()
            .any(|s| s.rep == r.rep && s.name == "synthesis"));
    }
}

#[test]
fn reps_per_worker_spreads_each_variant_over_several_workers_in_turn() {
    let tmp = tempfile::tempdir().unwrap();
    let body = EXP.replace("reps = 4", "reps = 5").replace(
        "process = \"per_variant\"",
        "process = \"per_variant\"\nreps_per_worker = 2",
    );
    let (d, stderr) = run(tmp.path(), &body, &[], 0);
    assert_eq!(d.runs.len(), 12, "{stderr}");
    assert!(
        d.runs.iter().all(|r| r.status == RepStatus::Ok),
        "{:?}",
        d.runs
    );
    let mut all = std::collections::HashSet::new();
    for v in ["baseline", "candidate"] {
        // The warm-up and the first two measured reps in one worker, then two, then one.
        let pids: Vec<u32> = d
            .runs
            .iter()
            .filter(|r| r.variant == v)
            .map(|r| r.pid)
            .collect();
        assert_eq!(pids.len(), 6, "{v}: {pids:?}");
        assert!(pids[0] == pids[1] && pids[1] == pids[2], "{v}: {pids:?}");
        assert!(pids[3] == pids[4] && pids[5] != pids[4], "{v}: {pids:?}");
        assert!(pids[2] != pids[3] && pids[5] != pids[2], "{v}: {pids:?}");
        all.extend([pids[0], pids[3], pids[5]]);
    }
    assert_eq!(all.len(), 6, "six workers in all, none shared: {all:?}");
    // Only the schedule's warm-ups are recorded; a replacement's own are not.
    assert_eq!(d.runs.iter().filter(|r| r.warmup).count(), 2);
    let text = diff_text(tmp.path(), &d.dir);
    assert!(!text.contains("set run.reps_per_worker"), "{text}");
}

#[test]
fn reps_per_worker_needs_per_variant() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = tmp.path().join("pv.toml");
    std::fs::write(
        &exp,
        EXP.replace(
            "process = \"per_variant\"",
            "process = \"shared\"\nreps_per_worker = 2",
        ),
    )
    .unwrap();
    let err = common::run_refused(tmp.path(), &exp);
    assert!(
        err.contains("reps_per_worker applies only to process = \"per_variant\""),
        "{err}"
    );
}

#[test]
fn a_worker_that_crashes_or_hangs_fails_its_rep_and_the_next_rep_gets_a_new_one() {
    let tmp = tempfile::tempdir().unwrap();
    // Only the hang needs a rep timeout: with one, a crashing worker whose start a loaded
    // machine slowed past it would read "timed out" instead of its crash.
    for (debug, why, limit) in [
        ("crash", "ended without a result line", ""),
        ("hang", "timed out", "\nrep_timeout_s = 2"),
    ] {
        let body = EXP
            .replace("reps = 4", "reps = 2")
            .replace("warmups = 1", &format!("warmups = 0{limit}"));
        let t = tmp.path().join(debug);
        std::fs::create_dir_all(&t).unwrap();
        let (d, stderr) = run(
            &t,
            &body,
            &["--debug-worker", debug],
            gapscope::cli::EXIT_NO_OK_REP,
        );
        assert_eq!(d.runs.len(), 4, "{debug}: every rep recorded: {stderr}");
        for r in &d.runs {
            assert_eq!(r.status, RepStatus::Failed, "{debug}: {r:?}");
            assert!(r.error.contains(why), "{debug}: {}", r.error);
        }
    }
    // Noise on stdout before the serve loop: passed through, every rep still found (no
    // rep timeout here, so that a slow machine's worker start is no failure).
    let t = tmp.path().join("noise");
    std::fs::create_dir_all(&t).unwrap();
    let calm = EXP
        .replace("reps = 4", "reps = 2")
        .replace("warmups = 1", "warmups = 0");
    let (d, stderr) = run(&t, &calm, &["--debug-worker", "noise"], 0);
    assert!(d.runs.iter().all(|r| r.status == RepStatus::Ok), "{stderr}");
    assert!(stderr.contains("CUDA init noise"), "{stderr}");
}
