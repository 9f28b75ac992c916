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
        let out = gapscope(tmp.path())
            .arg("run")
            .arg(write(tmp.path(), &body))
            .assert()
            .failure();
        let e = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
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
    let out = gapscope(tmp.path())
        .arg("run")
        .arg(write(tmp.path(), &body))
        .assert()
        .failure();
    let e = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(e.contains("drop is not a knob of the hash workload"), "{e}");
    assert!(!tmp.path().join("results").exists(), "nothing was run");
}
