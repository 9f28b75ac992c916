//! The second in-process workload (`[workload] kind = "hash"`, crates/gapscope-hash)
//! through the whole pipeline: run (in the runner's process, in per-rep workers and in
//! serving workers), the run folder's kind and phases, summary, diff.

use std::path::Path;

use gapscope::store::{RepStatus, RunData};

use crate::common::{gapscope, run_ok};

const HASH: &str = r#"
name = "hash_ab"
[workload]
kind = "hash"
bytes = 262144
[run]
reps = 3
warmups = 1
[[variant]]
name = "baseline"
[[variant]]
name = "candidate"
knobs = { algorithm = "sha512", chunk_kib = 16, threads = 2 }
"#;

fn write(dir: &Path, body: &str) -> std::path::PathBuf {
    let p = dir.join("hash_ab.toml");
    std::fs::write(&p, body).unwrap();
    p
}

#[test]
fn a_hash_ab_runs_checks_every_digest_and_diffs_end_to_end() {
    let tmp = tempfile::tempdir().unwrap();
    for process in ["shared", "per_rep", "per_variant"] {
        let body = HASH.replace(
            "warmups = 1",
            &format!("warmups = 1\nprocess = \"{process}\""),
        );
        let dir = run_ok(tmp.path(), &write(tmp.path(), &body), &[]);
        let d = RunData::load(&dir).unwrap();
        assert_eq!(d.runs.len(), 8, "{process}: 2 warm-ups and 6 reps");
        for r in &d.runs {
            assert_eq!(r.status, RepStatus::Ok, "{process}: {r:?}");
            assert!(
                r.checked && r.outputs == 1,
                "{process}: every digest checked: {r:?}"
            );
        }
        let meta: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("meta.json")).unwrap()).unwrap();
        assert_eq!(meta["workload"]["kind"], "hash", "{process}");
        assert_eq!(meta["phases"]["root"], "hash", "{process}");
        assert_eq!(
            meta["variants"][1]["knobs"]["algorithm"], "sha512",
            "{process}"
        );
        assert!(
            meta["workload"].get("circuit").is_none(),
            "{process}: no circuit fields"
        );
        // The candidate's tree: its digest split over two threads, then the combine.
        let names = |v: &str| -> Vec<String> {
            d.spans
                .iter()
                .filter(|s| s.variant.as_ref() == v)
                .map(|s| s.name.to_string())
                .collect()
        };
        let cand = names("candidate");
        for n in ["hash", "digest", "digest[0]", "digest[1]", "combine"] {
            assert!(cand.iter().any(|x| x == n), "{process}: {n} in {cand:?}");
        }
        assert!(
            !names("baseline").iter().any(|x| x == "combine"),
            "{process}"
        );

        let out = gapscope(tmp.path())
            .args(["diff", "--format", "json"])
            .arg(&dir)
            .assert()
            .success();
        let j: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
        let text = j.to_string();
        assert!(
            text.contains("\"digest\""),
            "{process}: the diff compares digest: {text}"
        );
        assert!(
            text.contains("combine"),
            "{process}: and names combine: {text}"
        );
        let summary = gapscope(tmp.path())
            .arg("summary")
            .arg(&dir)
            .assert()
            .success();
        let s = String::from_utf8_lossy(&summary.get_output().stdout).into_owned();
        assert!(s.contains("hash") && s.contains("digest"), "{process}: {s}");
    }
}

#[test]
fn hash_knobs_are_checked_by_the_workload_before_anything_runs() {
    let tmp = tempfile::tempdir().unwrap();
    for (edit, want) in [
        ("algorithm = \"sha512\"", "algorithm = \"md5\""),
        ("threads = 2", "thread = 2"),
    ] {
        let body = HASH.replace(edit, want);
        let e = crate::common::run_refused(tmp.path(), &write(tmp.path(), &body));
        assert!(e.contains("candidate"), "{e}");
        assert!(
            e.contains("sha512") || e.contains("algorithm, chunk_kib, threads"),
            "{e}"
        );
    }
    let body = HASH.replace(
        "name = \"baseline\"",
        "name = \"baseline\"\ndrop = \"async\"",
    );
    let e = crate::common::run_refused(tmp.path(), &write(tmp.path(), &body));
    assert!(e.contains("drop is not a knob of the hash workload"), "{e}");
    assert!(!tmp.path().join("results").exists(), "nothing was run");
}

fn hash_worker() -> std::path::PathBuf {
    crate::common::workspace_bin("gapscope-hash", "gapscope-hash-worker")
}

#[test]
fn a_hash_ab_runs_in_the_workloads_own_binary_one_process_per_variant() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = hash_worker();
    let body = HASH.replace(
        "bytes = 262144",
        &format!("bytes = 262144\nworker = [{:?}]", bin.to_str().unwrap()),
    );
    let dir = run_ok(tmp.path(), &write(tmp.path(), &body), &[]);
    let d = RunData::load(&dir).unwrap();
    assert_eq!(d.runs.len(), 8, "2 warm-ups and 6 reps");
    for r in &d.runs {
        assert_eq!(r.status, RepStatus::Ok, "{r:?}");
        assert!(r.checked && r.outputs == 1, "every digest checked: {r:?}");
        assert!(r.wall_ns > 0 && r.start_ns > 0, "{r:?}");
    }
    // Each variant's reps ran in one process of the binary, not in gapscope's.
    let pids = |v: &str| -> std::collections::BTreeSet<u32> {
        d.runs
            .iter()
            .filter(|r| r.variant == v)
            .map(|r| r.pid)
            .collect()
    };
    let (a, b) = (pids("baseline"), pids("candidate"));
    assert_eq!((a.len(), b.len()), (1, 1), "{a:?} {b:?}");
    assert_ne!(a, b);
    let comm = |pid: u32| std::fs::read_to_string(format!("/proc/{pid}/comm")).ok();
    assert!(
        comm(*a.first().unwrap()).is_none(),
        "the binary is gone after the run"
    );
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("meta.json")).unwrap()).unwrap();
    assert_eq!(meta["workload"]["kind"], "hash");
    assert_eq!(meta["variants"][1]["knobs"]["threads"], "2");
    let cand: Vec<String> = d
        .spans
        .iter()
        .filter(|s| s.variant.as_ref() == "candidate")
        .map(|s| s.name.to_string())
        .collect();
    for n in ["hash", "digest", "digest[0]", "digest[1]", "combine"] {
        assert!(cand.iter().any(|x| x == n), "{n} in {cand:?}");
    }
    // Spans nest under the rep's root and carry their self time, as in-process ones do.
    let root = d
        .spans
        .iter()
        .find(|s| s.name.as_ref() == "hash" && s.variant.as_ref() == "candidate")
        .unwrap();
    assert!(root.parent_id.is_none() && root.self_ns <= root.duration_ns);
    let out = gapscope(tmp.path())
        .args(["diff", "--format", "json"])
        .arg(&dir)
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        text.contains("\"digest\"") && text.contains("combine"),
        "{text}"
    );
}

#[test]
fn a_workload_binary_that_is_not_one_is_refused_and_one_that_answers_garbage_fails_its_rep() {
    let tmp = tempfile::tempdir().unwrap();
    let with = |worker: &str| {
        HASH.replace(
            "bytes = 262144",
            &format!("bytes = 262144\nworker = {worker}"),
        )
    };
    // Not a workload binary: refused before anything runs, saying what it answered.
    let out = gapscope(tmp.path())
        .arg("run")
        .arg(write(tmp.path(), &with("[\"echo\", \"hello\"]")))
        .assert()
        .failure();
    let e = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        e.contains("is not a hash workload binary") && e.contains("hello"),
        "{e}"
    );
    assert!(!tmp.path().join("results").exists(), "nothing was run");
    // What only gapscope's own process does is refused with a workload binary.
    let bin = hash_worker();
    let body = with(&format!("[{:?}]", bin.to_str().unwrap()))
        .replace("name = \"baseline\"", "name = \"baseline\"\nprofile = true");
    let e = crate::common::run_refused(tmp.path(), &write(tmp.path(), &body));
    assert!(e.contains("profile samples gapscope's own process"), "{e}");
    // A binary that shakes hands, then answers a rep with garbage: that rep fails with
    // the reason, its process is killed, and the next rep starts another.
    let script = "case \"$1\" in __protocol) echo 'gapscope-workload-worker 1 hash';; \
                  __serve) read l; echo 'oops' >&2; echo 'gapscope-rep-v1 {not json'; cat >/dev/null;; esac";
    let body = with(&format!("[\"sh\", \"-c\", {script:?}, \"sh\"]"));
    let out = gapscope(tmp.path())
        .arg("run")
        .arg(write(tmp.path(), &body))
        .arg("--results-dir")
        .arg(tmp.path().join("results"))
        .assert()
        .code(5);
    let dir = crate::common::run_dir_of(&out.get_output().stdout);
    let d = RunData::load(&dir).unwrap();
    assert_eq!(d.runs.len(), 8, "every rep recorded, failed");
    for r in &d.runs {
        assert_eq!(r.status, RepStatus::Failed, "{r:?}");
        assert!(
            r.error.contains("malformed result line") && r.error.contains("oops"),
            "{}",
            r.error
        );
    }
}
