//! `gapscope track` on a throwaway repository of a shell program whose work doubles at
//! its last commit: six earlier commits are measured into the history first; a HEAD
//! like them exits 0 (steady, or suspected under load and cleared against its parent), and the HEAD that doubles the work is suspected,
//! re-run against its parent as interleaved `rev` variants, and confirmed (exit 4).
//! The metric is the program's CPU time (`program.process_cpu`), which the load of a
//! shared machine moves far less than its wall time.

use std::path::Path;

use crate::common;
use common::{gapscope, git};

const EXPERIMENT: &str = r#"
name = "track_demo"
[workload]
command = ["sh", "work.sh"]
[run]
reps = 3
warmups = 0
order = "interleaved"
rep_timeout_s = 60
[[variant]]
name = "only"
"#;

fn commit(repo: &Path, loops: u32, msg: &str) {
    std::fs::write(
        repo.join("work.sh"),
        format!("i=0\nwhile [ $i -lt {loops} ]; do i=$((i+1)); done\n"),
    )
    .unwrap();
    git(repo, &["add", "work.sh"]);
    git(repo, &["commit", "-q", "--allow-empty", "-m", msg]);
}

fn track(tmp: &Path, repo: &Path, exp: &Path) -> assert_cmd::assert::Assert {
    gapscope(tmp)
        .current_dir(repo)
        .arg("track")
        .arg(exp)
        .args([
            "--metric",
            "program.process_cpu",
            "--last",
            "10",
            "--confirm-reps",
            "8",
        ])
        .arg("--db")
        .arg(tmp.join("h.sqlite"))
        .arg("--results-dir")
        .arg(tmp.join("results"))
        .assert()
}

#[test]
fn track_confirms_a_step_against_its_parent_and_not_a_steady_head() {
    let _serial = common::timing_lock();
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    let exp = tmp.path().join("track_demo.toml");
    std::fs::write(&exp, EXPERIMENT).unwrap();
    for i in 0..6 {
        commit(&repo, 40_000, &format!("steady {i}"));
        let dir = {
            let mut c = gapscope(tmp.path());
            c.current_dir(&repo);
            let out = c
                .arg("run")
                .arg(&exp)
                .arg("--results-dir")
                .arg(tmp.path().join("results"))
                .assert()
                .success()
                .get_output()
                .stdout
                .clone();
            common::run_dir_of(&out)
        };
        gapscope(tmp.path())
            .current_dir(&repo)
            .args(["history", "add"])
            .arg(&dir)
            .arg("--db")
            .arg(tmp.path().join("h.sqlite"))
            .assert()
            .success();
    }
    commit(&repo, 40_000, "steady 6");
    let out = track(tmp.path(), &repo, &exp)
        .success()
        .get_output()
        .stdout
        .clone();
    let md = String::from_utf8_lossy(&out);
    assert!(md.contains("### gapscope track: track_demo"), "{md}");
    // A steady HEAD is either within the history's spread or, when the machine's load
    // moved it out, suspected and then cleared by the interleaved re-run against its
    // parent; it never exits 4 and is never confirmed.
    assert!(
        md.contains("steady (against 6 commits)") || md.contains("suspected, not confirmed"),
        "{md}"
    );
    assert!(!md.contains("confirmed**"), "{md}");
    commit(&repo, 160_000, "four times the work");
    let out = track(tmp.path(), &repo, &exp).code(4).get_output().clone();
    let md = String::from_utf8_lossy(&out.stdout);
    assert!(
        md.contains("**regressed, confirmed**"),
        "{md}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(md.contains("re-run against the parent"), "{md}");
}
