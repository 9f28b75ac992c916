//! `rev` variants of gapscope itself: the worker protocol, a revision that does not
//! build, and one whose gapscope is older than the worker protocol (a throwaway
//! repository of a tiny crate named gapscope, built by cargo in seconds).

use std::path::Path;

use gapscope::store::{RepStatus, RunData};

use crate::common;
use common::{gapscope, git};

/// A repository with one commit of `files`; its commit id.
fn repo(dir: &Path, files: &[(&str, &str)]) -> String {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
    for (name, body) in files {
        let p = dir.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
        git(dir, &["add", name]);
    }
    git(dir, &["commit", "-q", "-m", "one"]);
    git(dir, &["rev-parse", "HEAD"])
}

fn experiment(tmp: &Path, repo: &Path) -> std::path::PathBuf {
    let p = tmp.join("ab.toml");
    std::fs::write(
        &p,
        format!(
            r#"name = "ab"
[workload]
circuit = "chain"
log2_constraints = 4
batch = 1
[run]
reps = 2
warmups = 0
[[variant]]
name = "here"
[[variant]]
name = "there"
rev = "main"
repo = "{}"
"#,
            repo.display()
        ),
    )
    .unwrap();
    p
}

#[test]
fn this_build_states_its_worker_protocol() {
    let tmp = tempfile::tempdir().unwrap();
    gapscope(tmp.path())
        .arg("__protocol")
        .assert()
        .success()
        .stdout(format!("{}\n", gapscope_workload::worker::WORKER_PROTOCOL));
}

#[test]
fn a_revision_that_does_not_build_fails_its_variant_and_the_run_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    let r = tmp.path().join("r");
    let commit = repo(&r, &[("README", "no cargo project here\n")]);
    let dir = common::run_exit(
        tmp.path(),
        &experiment(tmp.path(), &r),
        &[],
        gapscope::cli::EXIT_NO_OK_REP,
    );
    let d = RunData::load(&dir).unwrap();
    let status = |v: &str| -> Vec<RepStatus> {
        d.runs
            .iter()
            .filter(|x| x.variant == v)
            .map(|x| x.status)
            .collect()
    };
    assert_eq!(status("here"), [RepStatus::Ok, RepStatus::Ok]);
    assert_eq!(status("there"), [RepStatus::Failed, RepStatus::Failed]);
    let failed = d.runs.iter().find(|x| x.variant == "there").unwrap();
    assert!(failed.error.contains("did not build"), "{}", failed.error);
    // cargo's complaint, from the log's tail.
    assert!(failed.error.contains("Cargo.toml"), "{}", failed.error);
    let rev = d.meta.variants[1].revision.clone().unwrap();
    assert_eq!(
        (rev.rev.as_str(), rev.commit.as_str()),
        ("main", commit.as_str())
    );
    assert!(!rev.dirty);
    assert_eq!(rev.build[..2], ["cargo", "build"]);
    assert!(rev.failed.unwrap().contains("did not build"));
    // meta.json names the log portably; it resolves to the revision cache.
    let log = d.meta.repo_path(&d.dir, &rev.build_log.unwrap());
    assert!(
        log.starts_with(tmp.path().join("results/.revs")),
        "{}",
        log.display()
    );
    assert!(log.exists());
    assert!(d.meta.variants[0].revision.is_none());
    // A second run reuses the cached outcome.
    let dir = common::run_exit(
        tmp.path(),
        &experiment(tmp.path(), &r),
        &[],
        gapscope::cli::EXIT_NO_OK_REP,
    );
    let d = RunData::load(&dir).unwrap();
    assert!(d.meta.variants[1].revision.as_ref().unwrap().build_reused);
    // The branch moves on: a resume of that run would measure another commit.
    git(&r, &["commit", "-q", "--allow-empty", "-m", "two"]);
    let out = gapscope(tmp.path())
        .arg("run")
        .arg("--resume")
        .arg(&dir)
        .assert()
        .failure();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        stderr.contains("rev main is now commit") && stderr.contains(&commit[..12]),
        "{stderr}"
    );
}

#[test]
fn a_gapscope_older_than_the_worker_protocol_is_refused_and_the_run_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    let r = tmp.path().join("old");
    // An old gapscope: a binary that knows no `__protocol` (as clap would say).
    repo(
        &r,
        &[
            (
                "Cargo.toml",
                "[package]\nname = \"gapscope\"\nversion = \"0.0.1\"\nedition = \"2021\"\n",
            ),
            (
                "src/main.rs",
                "fn main() {\n    let a: Vec<String> = std::env::args().collect();\n    \
                 eprintln!(\"error: unrecognized subcommand '{}'\", a[1]);\n    \
                 std::process::exit(2);\n}\n",
            ),
        ],
    );
    let out = gapscope(tmp.path())
        .arg("run")
        .arg(experiment(tmp.path(), &r))
        .arg("--results-dir")
        .arg(tmp.path().join("results"))
        .assert()
        .code(gapscope::cli::EXIT_NO_OK_REP);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(stderr.contains("does not speak"), "{stderr}");
    let dir = common::run_dir_of(&out.get_output().stdout);
    let d = RunData::load(&dir).unwrap();
    let rev = d.meta.variants[1].revision.clone().unwrap();
    let why = rev.failed.unwrap();
    assert!(why.contains("no `__protocol` command"), "{why}");
    assert!(
        why.contains("unrecognized subcommand '__protocol'"),
        "{why}"
    );
    for x in d.runs.iter().filter(|x| x.variant == "there") {
        assert_eq!(x.status, RepStatus::Failed);
        assert!(x.error.contains("are refused"), "{}", x.error);
    }
    assert!(d
        .runs
        .iter()
        .filter(|x| x.variant == "here")
        .all(|x| x.status == RepStatus::Ok));
}

/// A fake prover binary (a tiny crate of the workspace, named as the real one): it
/// shakes hands as the prover's workload binary and answers each rep with one `prove`
/// span marked `fake = 1`, its proof counted as checked.
const FAKE_PROVER_BIN: &str = r#"use std::io::BufRead;
fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.get(1).map(String::as_str) == Some("__protocol") {
        println!("gapscope-workload-worker 1 groth16");
        return;
    }
    assert_eq!(a.get(1).map(String::as_str), Some("__serve"));
    for line in std::io::stdin().lock().lines() {
        let line = line.unwrap();
        let rep: u32 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        let start = 1_000_000 + u64::from(rep) * 1000;
        println!(
            "gapscope-rep-v1 {{\"rep\":{rep},\"root\":1,\"spans\":[{{\"id\":1,\"trace\":1,\"name\":\"prove\",\"thread_id\":1,\"thread_name\":\"main\",\"start_ns\":{start},\"end_ns\":{},\"attrs\":[[\"fake\",1]]}}],\"checked\":{{\"ok\":true,\"checked\":true,\"outputs\":1,\"error\":\"\"}},\"pid\":{}}}",
            start + 500,
            std::process::id()
        );
    }
}
"#;

#[test]
fn a_revision_with_the_provers_own_binary_builds_only_that_and_this_gapscope_runs_it() {
    let tmp = tempfile::tempdir().unwrap();
    let r = tmp.path().join("r");
    let commit = repo(
        &r,
        &[
            (
                "Cargo.toml",
                "[workspace]\nmembers = [\"crates/gapscope-groth16\"]\nresolver = \"2\"\n",
            ),
            (
                "crates/gapscope-groth16/Cargo.toml",
                "[package]\nname = \"gapscope-groth16\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
            ),
            ("crates/gapscope-groth16/src/lib.rs", ""),
            (
                "crates/gapscope-groth16/src/bin/gapscope-groth16-worker.rs",
                FAKE_PROVER_BIN,
            ),
        ],
    );
    let out = gapscope(tmp.path())
        .arg("run")
        .arg(experiment(tmp.path(), &r))
        .arg("--results-dir")
        .arg(tmp.path().join("results"))
        .assert()
        .success();
    let dir = common::run_dir_of(&out.get_output().stdout);
    let d = RunData::load(&dir).unwrap();
    for x in &d.runs {
        assert_eq!(x.status, RepStatus::Ok, "{x:?}");
    }
    let there: Vec<_> = d.runs.iter().filter(|x| x.variant == "there").collect();
    assert_eq!(there.len(), 2);
    assert_eq!(there[0].pid, there[1].pid, "one process served both reps");
    assert_ne!(there[0].pid, std::process::id());
    assert!(there.iter().all(|x| x.checked && x.outputs == 1));
    // Its spans are the binary's, its rows made by this gapscope.
    let fake: Vec<_> = d
        .spans
        .iter()
        .filter(|s| s.variant.as_ref() == "there")
        .collect();
    assert_eq!(fake.len(), 2);
    assert!(fake
        .iter()
        .all(|s| s.name.as_ref() == "prove" && s.attrs.contains("fake")));
    assert_eq!(there[0].wall_ns, 500);
    let rev = d.meta.variants[1].revision.clone().unwrap();
    assert_eq!(rev.commit, commit);
    assert_eq!(
        rev.build,
        [
            "cargo",
            "build",
            "--release",
            "-p",
            "gapscope-groth16",
            "--bin",
            "gapscope-groth16-worker"
        ]
    );
    // The variant in this gapscope's own process is the real prover's.
    assert!(d
        .spans
        .iter()
        .any(|s| s.variant.as_ref() == "here" && s.name.as_ref() == "synthesis"));
}
