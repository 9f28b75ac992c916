//! `gapscope bisect` and rev A/Bs of a program that reports its spans in the line
//! protocol: the worked example of docs/revisions-and-bisect.md, made by scripts/bisect-demo.sh (a
//! throwaway git repository of a small C program; its fifth commit makes the `work`
//! span 8% longer, its fourth does not compile). The metric is the span's CPU time,
//! which the program reports (`process_cpu_ns`): on a shared 2-core machine a span's
//! wall time moves by tens of percent with the load, its CPU time by a few.

use std::path::{Path, PathBuf};
use std::process::Command as Std;

use gapscope::store::{RepStatus, RunData};

mod common;
use common::{diff_metric, gapscope, run_ok};

/// The demo's repository and experiment in `tmp`, and its commits, oldest first.
fn demo(tmp: &Path) -> (PathBuf, PathBuf, Vec<String>) {
    let dir = tmp.join("demo");
    let out = Std::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/bisect-demo.sh"))
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let repo = dir.join("repo");
    let log = Std::new("git")
        .arg("-C")
        .arg(&repo)
        .args(["rev-list", "--reverse", "main"])
        .output()
        .unwrap();
    let commits: Vec<String> = String::from_utf8(log.stdout)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    assert_eq!(commits.len(), 7);
    (repo, dir.join("demo.toml"), commits)
}

#[test]
fn bisect_names_the_commit_that_slowed_the_span() {
    let _serial = common::timing_lock();
    let tmp = tempfile::tempdir().unwrap();
    let (repo, exp, commits) = demo(tmp.path());
    let bisect = |format: &str| {
        gapscope(tmp.path())
            .args(["bisect", "--good", "main~6", "--bad", "main"])
            .arg("--experiment")
            .arg(&exp)
            .args(["--metric", "work.process_cpu", "--format", format])
            .arg("--repo")
            .arg(&repo)
            .arg("--results-dir")
            .arg(tmp.path().join("results"))
            .assert()
            .success()
            .get_output()
            .clone()
    };
    let out = bisect("text");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        stdout.starts_with(&format!("first bad commit: {}\n", commits[5])),
        "{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains(&format!(
            "work.process_cpu against its parent {}",
            &commits[4][..12]
        )),
        "{stdout}"
    );
    // The commit that does not compile was skipped, with the compiler's complaint.
    assert!(
        stdout.contains(&format!("#3   {}  did not build (log: ", &commits[3][..12])),
        "{stdout}"
    );
    assert!(stdout.contains("did not build"), "{stdout}");
    // Reps derived from the ends' spread.
    assert!(
        stdout.contains("reps per step: ") && stdout.contains("(derived: "),
        "{stdout}"
    );
    // Again, whole as JSON: the run folders of the first are reused.
    let out = bisect("json");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!stderr.contains(": measured "), "{stderr}");
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["outcome"]["commit"], commits[5].as_str());
    // Its change against its parent: the slowdown shows in the median; whether it is
    // significant too depends on the load of the machine running the test (K reps).
    let diff = &j["outcome"]["diff"];
    assert!(diff["relative"].as_f64().unwrap() > 0.0, "{diff}");
    assert!(
        diff["verdict"] == "regressed" || diff["verdict"] == "unchanged",
        "{diff}"
    );
    let r = j["outcome"]["diff"]["relative"].as_f64().unwrap();
    assert!((0.04..0.12).contains(&r), "{r}");
    let failed = j["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["commit"] == commits[3].as_str())
        .unwrap();
    assert_eq!(failed["label"], "failed");
    assert!(
        failed["failure"].as_str().unwrap().contains("error"),
        "{failed}"
    );
}

#[test]
fn two_rev_variants_of_a_program_make_an_ab() {
    let _serial = common::timing_lock();
    let tmp = tempfile::tempdir().unwrap();
    let (repo, exp, commits) = demo(tmp.path());
    // 16 pairs: a verdict on an 8% change that one disturbed pair cannot undo.
    let text = std::fs::read_to_string(&exp)
        .unwrap()
        .replace("reps = 8", "reps = 16")
        .replace(
            "[[variant]]\nname = \"demo\"\n",
            &format!(
                "[[variant]]\nname = \"before\"\nrev = \"main~2\"\nrepo = \"{r}\"\n\
             [[variant]]\nname = \"after\"\nrev = \"main~1\"\nrepo = \"{r}\"\n",
                r = repo.display()
            ),
        );
    std::fs::write(&exp, text).unwrap();
    let dir = run_ok(tmp.path(), &exp, &["--quiet"]);
    let d = RunData::load(&dir).unwrap();
    assert!(
        d.runs.iter().all(|r| r.status == RepStatus::Ok),
        "{:?}",
        d.runs
    );
    let rev = |i: usize| d.meta.variants[i].revision.clone().unwrap();
    assert_eq!(rev(0).commit, commits[4]);
    assert_eq!(rev(1).commit, commits[5]);
    assert_eq!(rev(1).build, ["cc", "-O1", "-o", "prog", "prog.c"]);
    // Each ran in its own worktree.
    let ext = d.meta.external.clone().unwrap();
    let (a, b) = (&ext.variants["before"].dir, &ext.variants["after"].dir);
    assert!(
        a.contains(&commits[4]) && b.contains(&commits[5]),
        "{a} {b}"
    );
    let m = diff_metric(tmp.path(), &dir, "before", "after", "work", "process_cpu");
    // 16 pairs name an 8% change of CPU time on a quiet machine (the signed-rank analysis
    // keeps a few disturbed reps from hiding it); on a machine loaded many times over its
    // cores the CPU time of a 5 ms span moves by more. Whatever the load, nothing may
    // say the opposite: no improvement, no equivalence, an interval not below 0.
    let verdict = m["verdict"].as_str().unwrap();
    assert!(verdict == "regressed" || verdict == "inconclusive", "{m}");
    assert!(m["ci"]["lo"].as_f64().unwrap() > -0.1, "{m}");
    if verdict == "inconclusive" {
        eprintln!("an 8% change left inconclusive at this load: {m}");
    }
    let r = m["relative"].as_f64().unwrap();
    assert!((0.04..0.12).contains(&r), "{m}");
}
