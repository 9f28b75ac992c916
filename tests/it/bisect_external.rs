//! `gapscope bisect` and rev A/Bs of a program that reports its spans in the line
//! protocol: the worked example of docs/revisions-and-bisect.md, made by scripts/bisect-demo.sh (a
//! throwaway git repository of a small C program; its fifth commit makes the `work`
//! span longer, its fourth does not compile). The metric is the span's CPU time,
//! which the program reports (`process_cpu_ns`): on a shared 2-core machine a span's
//! wall time moves by tens of percent with the load, its CPU time by a few.

use std::path::{Path, PathBuf};
use std::process::Command as Std;

use gapscope::store::{RepStatus, RunData};

use crate::common;
use common::{diff_metric, gapscope, run_ok};

/// The demo's repository and experiment in `tmp`, and its commits, oldest first.
/// The fifth commit's work is `percent` of the fourth's.
fn demo(tmp: &Path, percent: u32) -> (PathBuf, PathBuf, Vec<String>) {
    let dir = tmp.join("demo");
    let out = Std::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/bisect-demo.sh"))
        .arg(&dir)
        .arg(percent.to_string())
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
    // 30% more work: on a 2-core machine under a load of 8 to 10, the CPU time of the
    // demo's 8% once spread so that 50 pairs of the ends could not tell it.
    let (repo, exp, commits) = demo(tmp.path(), 130);
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
    // The log it names is there, although meta.json names it relative to the run folder.
    let log = stdout
        .split("did not build (log: ")
        .nth(1)
        .and_then(|r| r.split(')').next())
        .unwrap();
    assert!(std::path::Path::new(log).is_file(), "{log}");
    // The worktrees belonged to the cache: the repository lists none, and the bisect
    // removed them when it was done (a re-run reuses the run folders).
    assert_eq!(common::git(&repo, &["worktree", "list"]).lines().count(), 1);
    let revs = tmp.path().join("results").join(".revs");
    for c in &commits {
        assert!(!revs.join(c).join("tree").exists(), "{c}");
    }
    assert!(revs.join(&commits[0]).is_dir());
    // Each commit built once, though the good end ran in every step: later runs of a
    // worktree in the same process reuse its build (meta.json says so).
    let mut builds: std::collections::HashMap<String, (u32, u32)> = Default::default();
    let bisect_dir = std::fs::read_dir(tmp.path().join("results"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .contains("-bisect-")
        })
        .unwrap();
    for run in std::fs::read_dir(&bisect_dir).unwrap() {
        let run = run.unwrap().path();
        if !run.is_dir() {
            continue;
        }
        let meta = gapscope::store::read_meta(&run).unwrap();
        for (_, v) in meta.command_workload.unwrap().variants {
            let b = v.build.unwrap();
            let e = builds.entry(v.dir).or_default();
            match b.reused {
                true => e.1 += 1,
                false => e.0 += 1,
            }
        }
    }
    assert!(builds.values().all(|&(built, _)| built == 1), "{builds:?}");
    assert!(builds.values().any(|&(_, reused)| reused > 0), "{builds:?}");
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
        diff["verdict"] == "regressed" || diff["verdict"] == "inconclusive",
        "{diff}"
    );
    // The answer is the sequence the run against the parent stopped on.
    let seq = &j["outcome"]["sequence"];
    assert!(seq["ratios"]["iterations"].as_u64().unwrap() >= 1, "{seq}");
    let r = j["outcome"]["diff"]["relative"].as_f64().unwrap();
    assert!((0.2..0.45).contains(&r), "{r}");
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
    let (repo, exp, commits) = demo(tmp.path(), 108);
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
    let ext = d.meta.command_workload.clone().unwrap();
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

/// A repository of a shell program: `prog.sh` sleeps `secs[i]` seconds at commit `i`
/// (a negative number: it never ends). Its experiment, `metric` program.total (the
/// program reports no spans), and the commits, oldest first.
fn sleeper(tmp: &Path, secs: &[f64]) -> (PathBuf, PathBuf, Vec<String>) {
    let repo = tmp.join("sleeper");
    std::fs::create_dir_all(&repo).unwrap();
    common::git(&repo, &["init", "-q", "-b", "main"]);
    let mut commits = Vec::new();
    for (i, s) in secs.iter().enumerate() {
        let body = if *s < 0.0 {
            "while :; do sleep 1; done".to_string()
        } else {
            format!("sleep {s}")
        };
        std::fs::write(
            repo.join("prog.sh"),
            format!("#!/bin/sh\n# commit {i}\n{body}\n"),
        )
        .unwrap();
        common::git(&repo, &["add", "prog.sh"]);
        common::git(&repo, &["commit", "-q", "-m", &format!("commit {i}")]);
        commits.push(common::git(&repo, &["rev-parse", "HEAD"]));
    }
    let exp = tmp.join("sleeper.toml");
    std::fs::write(
        &exp,
        "name = \"sleeper\"\n[workload]\ncommand = [\"sh\", \"prog.sh\"]\n[run]\nreps = 8\n\
         warmups = 0\norder = \"counterbalanced\"\n[[variant]]\nname = \"s\"\n",
    )
    .unwrap();
    (repo, exp, commits)
}

#[test]
fn a_hang_is_skipped_at_its_first_timeout_and_a_wrong_metric_is_refused_before_building() {
    let _serial = common::timing_lock();
    let tmp = tempfile::tempdir().unwrap();
    // 0.3 s from commit 4 on; commit 2, the first step, hangs.
    let (repo, exp, commits) = sleeper(tmp.path(), &[0.0, 0.0, -1.0, 0.0, 0.3, 0.3]);
    let results = tmp.path().join("results");
    let bisect = |metric: &str| {
        gapscope(tmp.path())
            .args([
                "bisect", "--good", "main~5", "--bad", "main", "--metric", metric,
            ])
            .arg("--experiment")
            .arg(&exp)
            .arg("--repo")
            .arg(&repo)
            .arg("--results-dir")
            .arg(&results)
            .assert()
    };
    // A metric the program does not have: refused after one rep of the good end, before
    // the bad end (or anything else) is checked out.
    let out = bisect("work.total").failure().get_output().clone();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("metric work.total is not in the good end's rep"),
        "{stderr}"
    );
    assert!(stderr.contains("program.total"), "{stderr}");
    let cached = |c: &str| results.join(".revs").join(c).exists();
    assert!(cached(&commits[0]) && !cached(&commits[5]), "{stderr}");
    // The hang: one rep of it, killed at the derived timeout, then stepped around.
    let out = bisect("program.total").success().get_output().clone();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        stdout.starts_with(&format!("first bad commit: {}\n", commits[4])),
        "{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("rep timeout: 10 s (derived: 10× the ends' slowest rep"),
        "{stdout}"
    );
    let hung: Vec<&str> = stdout
        .lines()
        .skip_while(|l| !l.contains(&format!("#2   {}", &commits[2][..12])))
        .take_while(|l| !l.starts_with("  #") || l.contains(&commits[2][..12]))
        .collect();
    assert!(hung[0].contains("failed"), "{stdout}");
    assert!(hung[1].contains("why: timed out after 10 s"), "{stdout}");
    // One rep of it ran: the step stopped at its first timeout.
    let run = hung
        .iter()
        .find_map(|l| l.trim().strip_prefix("run: "))
        .unwrap();
    let d = RunData::load(Path::new(run)).unwrap();
    let reps: Vec<_> = d.runs.iter().filter(|r| r.variant == "step").collect();
    assert_eq!(reps.len(), 1, "{reps:?}");
    // No worktree was added to the repository.
    assert_eq!(common::git(&repo, &["worktree", "list"]).lines().count(), 1);
}

/// A revision's worktree seeded from the commit built before it (its outputs copied, as
/// an in-place checkout leaves them) whose build then fails is built once more from a
/// clean worktree: here the build refuses an output stamped by another commit, as a
/// build folder that records its source's path or commit does.
#[test]
fn a_seeded_build_that_fails_is_built_again_in_a_clean_worktree() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("stamped");
    std::fs::create_dir_all(&repo).unwrap();
    common::git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join(".gitignore"), "stamp\n").unwrap();
    std::fs::write(
        repo.join("build.sh"),
        "head=$(git rev-parse HEAD)\n\
         if [ -e stamp ] && [ \"$(cat stamp)\" != \"$head\" ]; then\n\
         \x20 echo \"stamp of another commit: $(cat stamp)\" >&2; exit 1\nfi\n\
         echo \"$head\" > stamp\n",
    )
    .unwrap();
    let mut commits = Vec::new();
    for i in 0..2 {
        std::fs::write(repo.join("prog.sh"), format!("# commit {i}\ncat stamp\n")).unwrap();
        common::git(&repo, &["add", "."]);
        common::git(&repo, &["commit", "-q", "-m", &format!("commit {i}")]);
        commits.push(common::git(&repo, &["rev-parse", "HEAD"]));
    }
    let exp = tmp.path().join("stamped.toml");
    std::fs::write(
        &exp,
        format!(
            "name = \"stamped\"\n[workload]\ncommand = [\"sh\", \"prog.sh\"]\n\
             build = [\"sh\", \"build.sh\"]\n[run]\nreps = 1\nwarmups = 0\n\
             [[variant]]\nname = \"before\"\nrev = \"main~1\"\nrepo = \"{r}\"\n\
             [[variant]]\nname = \"after\"\nrev = \"main\"\nrepo = \"{r}\"\n",
            r = repo.display()
        ),
    )
    .unwrap();
    let out = gapscope(tmp.path())
        .arg("run")
        .arg(&exp)
        .arg("--results-dir")
        .arg(tmp.path().join("results"))
        .env("GAPSCOPE_REV_CACHE", tmp.path().join("cache"))
        .assert()
        .success()
        .get_output()
        .clone();
    let err = String::from_utf8_lossy(&out.stderr);
    // The second commit's worktree was seeded from the first's (its stamp came along)...
    assert!(err.contains("seeded from"), "{err}");
    let dir = common::run_dir_of(&out.stdout);
    let d = RunData::load(&dir).unwrap();
    assert!(
        d.runs.iter().all(|r| r.status == RepStatus::Ok),
        "{:?}\n{err}",
        d.runs
    );
    // ...and built again clean: each worktree's stamp is its own commit.
    let ext = d.meta.command_workload.clone().unwrap();
    for (v, c) in [("before", &commits[0]), ("after", &commits[1])] {
        // meta.json writes the worktree's folder as the run's working folder saw it.
        let stamp = std::fs::read_to_string(tmp.path().join(&ext.variants[v].dir).join("stamp"));
        assert_eq!(stamp.unwrap().trim(), c.as_str(), "{v}\n{err}");
    }
}
