//! The built-in prover in its own binary (`[workload] worker =
//! ["…/gapscope-groth16-worker"]`): the reps run there, one serving process per variant,
//! every proof verified there, while this gapscope schedules, stores and judges them;
//! the rows are those of an in-process run of the same experiment.

use std::path::{Path, PathBuf};

use gapscope::store::{RepStatus, RunData};

use crate::common::{gapscope, run_ok};

const PROVER: &str = r#"
name = "prover_bin"
[workload]
circuit = "porep"
log2_constraints = 10
batch = 2
[run]
reps = 2
warmups = 1
[[variant]]
name = "baseline"
[[variant]]
name = "candidate"
gadget = "add_to_lc"
drop = "async"
"#;

fn prover_worker() -> std::path::PathBuf {
    crate::common::workspace_bin("gapscope-groth16", "gapscope-groth16-worker")
}

fn write(dir: &Path, body: &str) -> PathBuf {
    let p = dir.join("prover_bin.toml");
    std::fs::write(&p, body).unwrap();
    p
}

fn span_names(d: &RunData, variant: &str) -> std::collections::BTreeSet<String> {
    d.spans
        .iter()
        .filter(|s| s.variant.as_ref() == variant)
        .map(|s| s.name.to_string())
        .collect()
}

#[test]
fn the_prover_runs_in_its_own_binary_with_every_proof_verified_and_the_same_span_tree() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = prover_worker();
    let body = PROVER.replace(
        "batch = 2",
        &format!("batch = 2\nworker = [{:?}]", bin.to_str().unwrap()),
    );
    let dir = run_ok(tmp.path(), &write(tmp.path(), &body), &[]);
    let d = RunData::load(&dir).unwrap();
    assert_eq!(d.runs.len(), 6, "2 warm-ups and 4 reps");
    for r in &d.runs {
        assert_eq!(r.status, RepStatus::Ok, "{r:?}");
        assert!(r.checked && r.outputs == 2, "both proofs verified: {r:?}");
        assert!(r.wall_ns > 0, "{r:?}");
    }
    let pids = |v: &str| -> std::collections::BTreeSet<u32> {
        d.runs
            .iter()
            .filter(|r| r.variant == v)
            .map(|r| r.pid)
            .collect()
    };
    let (a, b) = (pids("baseline"), pids("candidate"));
    assert_eq!(
        (a.len(), b.len()),
        (1, 1),
        "one process per variant: {a:?} {b:?}"
    );
    assert_ne!(a, b);
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("meta.json")).unwrap()).unwrap();
    assert_eq!(meta["workload"]["kind"], "groth16");
    assert_eq!(meta["phases"]["root"], "prove");
    assert!(
        !meta["params"].as_array().unwrap().is_empty(),
        "params made here first"
    );

    // The same experiment in gapscope's own process: the same spans by name.
    let inproc = run_ok(tmp.path(), &write(tmp.path(), PROVER), &[]);
    let e = RunData::load(&inproc).unwrap();
    for v in ["baseline", "candidate"] {
        assert_eq!(span_names(&d, v), span_names(&e, v), "{v}");
    }
    assert!(span_names(&d, "baseline").contains("synthesis"));

    let out = gapscope(tmp.path())
        .args(["diff", "--format", "json"])
        .arg(&dir)
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(text.contains("\"synthesis\""), "{text}");
}

#[test]
fn a_prover_binary_answers_only_to_its_own_kind_and_refuses_what_it_cannot_do() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = prover_worker();
    // The hash workload's binary is not the prover's.
    let hash = crate::common::workspace_bin("gapscope-hash", "gapscope-hash-worker");
    let body = PROVER.replace(
        "batch = 2",
        &format!("batch = 2\nworker = [{:?}]", hash.to_str().unwrap()),
    );
    let e = crate::common::run_refused(tmp.path(), &write(tmp.path(), &body));
    assert!(
        e.contains("is not a groth16 workload binary") && e.contains("hash"),
        "{e}"
    );
    // A revision is built as a whole gapscope; the binary runs as it is.
    let body = PROVER
        .replace(
            "batch = 2",
            &format!("batch = 2\nworker = [{:?}]", bin.to_str().unwrap()),
        )
        .replace(
            "name = \"candidate\"",
            "name = \"candidate\"\nrev = \"HEAD\"",
        );
    let e = crate::common::run_refused(tmp.path(), &write(tmp.path(), &body));
    assert!(e.contains("rev builds another gapscope"), "{e}");
    // A command workload is its own program already.
    let body = "name = \"c\"\n[workload]\ncommand = [\"true\"]\nworker = [\"x\"]\n[[variant]]\nname = \"a\"\n";
    let out = gapscope(tmp.path())
        .arg("run")
        .arg(write(tmp.path(), body))
        .assert()
        .failure();
    let e = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(e.contains("a command workload is its own program"), "{e}");
    assert!(!tmp.path().join("results").exists(), "nothing was run");
}
