//! `gapscope bisect`, `bisect-step` and rev A/Bs over revisions of a gapscope: a
//! throwaway repository of a tiny crate named gapscope that speaks the worker protocol.
//! Its `__worker` times a deterministic busy loop (the `work` span, inside `prove`) and
//! answers with the result line; one commit makes the loop 50% longer. The metric is
//! the span's on-CPU time (`task_clock_ns`, CLOCK_THREAD_CPUTIME_ID): on
//! a shared 2-core machine the loop's wall time moves by tens of percent with the
//! load, its CPU time by a few.

use std::path::{Path, PathBuf};
use std::process::Command as Std;

use gapscope::store::{RepStatus, RunData, RunRow, SpanRow};

use crate::common;
use common::{diff_metric, gapscope, git, run_ok};

/// The result line's JSON with placeholders the fake worker fills in.
fn template() -> String {
    let mut run = RunRow::sample();
    run.started_utc = "2026-01-01T00:00:00Z".into();
    let mut v = serde_json::json!({ "run": run, "spans": [SpanRow::sample(), SpanRow::sample()] });
    v["run"]["variant"] = "@VARIANT@".into();
    for (k, p) in [
        ("rep", "@REP@"),
        ("iteration", "@ITER@"),
        ("warmup", "@WARMUP@"),
        ("wall_ns", "@NS@"),
        ("outputs", "@ONE@"),
    ] {
        v["run"][k] = p.into();
    }
    for (i, name) in ["prove", "work"].iter().enumerate() {
        let s = &mut v["spans"][i];
        s["variant"] = "@VARIANT@".into();
        s["rep"] = "@REP@".into();
        s["name"] = (*name).into();
        s["span_id"] = (i + 1).into();
        s["parent_id"] = if i == 0 {
            serde_json::Value::Null
        } else {
            1.into()
        };
        s["thread_id"] = 1.into();
        s["start_ns"] = 1000.into();
        s["end_ns"] = "@END@".into();
        s["duration_ns"] = "@NS@".into();
        s["self_ns"] = if i == 0 { 0.into() } else { "@NS@".into() };
        s["task_clock_ns"] = "@CPU@".into();
    }
    let mut t = v.to_string();
    for p in ["REP", "ITER", "WARMUP", "NS", "END", "ONE", "CPU"] {
        t = t.replace(&format!("\"@{p}@\""), &format!("@{p}@"));
    }
    t
}

const MAIN: &str = r#"
use std::time::Instant;
const TEMPLATE: &str = include_str!("../result.json");
#[repr(C)]
struct Timespec { s: i64, ns: i64 }
extern "C" { fn clock_gettime(clock: i32, t: *mut Timespec) -> i32; }
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let get = |k: &str| a.iter().position(|x| x == k).map(|i| a[i + 1].clone());
    match a.get(1).map(String::as_str) {
        Some("__protocol") => println!("gapscope-worker-protocol 1"),
        Some("__worker") => {
            let copy = std::fs::read_to_string(format!("{}/experiment.toml", get("--run-dir").unwrap())).unwrap();
            if copy.contains("rev =") || copy.matches("[[variant]]").count() != 1 {
                eprintln!("the experiment copy still names revisions: {copy}");
                std::process::exit(3);
            }
            // On-CPU time of this thread (ns), as the task-clock counter counts it.
            let cpu = || -> u64 {
                let mut t = Timespec { s: 0, ns: 0 };
                // SAFETY: clock_gettime writes one timespec.
                unsafe { clock_gettime(3 /* CLOCK_THREAD_CPUTIME_ID */, &mut t) };
                t.s as u64 * 1_000_000_000 + t.ns as u64
            };
            let (t, c) = (Instant::now(), cpu());
            let mut x = 1u64;
            for i in 0..ITERATIONS {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
            }
            let ns = t.elapsed().as_nanos().max(1) as u64;
            let cpu_ns = cpu() - c;
            let line = TEMPLATE
                .replace("@VARIANT@", &get("--variant").unwrap())
                .replace("@REP@", &get("--rep").unwrap())
                .replace("@ITER@", &get("--iteration").unwrap())
                .replace("@WARMUP@", if a.iter().any(|x| x == "--warmup") { "true" } else { "false" })
                .replace("@NS@", &ns.to_string())
                .replace("@END@", &(1000 + ns).to_string())
                .replace("@ONE@", "1")
                .replace("@CPU@", &cpu_ns.to_string());
            println!("gapscope-rep-v1 {line}");
        }
        _ => std::process::exit(2),
    }
}
"#;

/// Iterations of the busy loop per commit (about 1 ns each in a release build).
const LOOPS: [u64; 6] = [
    4_000_000, 4_000_000, 4_000_000, 4_000_000, 6_000_000, 6_000_000,
];

/// The repository: one commit per entry of [`LOOPS`] (the fifth slows `work` by 50%: a
/// step a shared 2-core machine resolves in every run, where 10% was once unresolved),
/// and a commit that does not build before the fourth: commits 0-2 and 4 are fast, 3
/// does not build, 5 is the first slow one. Its commit ids.
fn history(dir: &Path) -> Vec<String> {
    std::fs::create_dir_all(dir.join("src")).unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
    std::fs::write(
        dir.join("Cargo.toml"),
        "[package]\nname = \"gapscope\"\nversion = \"0.0.1\"\nedition = \"2021\"\n",
    )
    .unwrap();
    std::fs::write(dir.join("result.json"), template()).unwrap();
    std::fs::write(dir.join(".gitignore"), "target\n").unwrap();
    let mut commits = Vec::new();
    for (i, n) in LOOPS.iter().enumerate() {
        if i == 3 {
            std::fs::write(dir.join("src/main.rs"), "fn main() { not rust }\n").unwrap();
            git(dir, &["add", "."]);
            git(dir, &["commit", "-q", "-m", "broken"]);
            commits.push(git(dir, &["rev-parse", "HEAD"]));
        }
        let main = MAIN.replace("ITERATIONS", &format!("{n}u64"));
        std::fs::write(dir.join("src/main.rs"), main).unwrap();
        git(dir, &["add", "."]);
        git(
            dir,
            &["commit", "-q", "--allow-empty", "-m", &format!("loop {n}")],
        );
        commits.push(git(dir, &["rev-parse", "HEAD"]));
    }
    commits
}

fn experiment(tmp: &Path, body: &str) -> PathBuf {
    let p = tmp.join("loop.toml");
    let text = format!(
        "name = \"loop\"\n[workload]\ncircuit = \"chain\"\nlog2_constraints = 4\nbatch = 1\n\
         [run]\nreps = 8\nwarmups = 1\norder = \"counterbalanced\"\n{body}"
    );
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn bisect_names_the_commit_that_slowed_a_span_and_reuses_its_runs() {
    let _serial = common::timing_lock();
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let commits = history(&repo);
    let exp = experiment(tmp.path(), "[[variant]]\nname = \"v\"\n");
    let bisect = |format: &str| {
        gapscope(tmp.path())
            .args(["bisect", "--good", &commits[0], "--bad", "main"])
            .arg("--experiment")
            .arg(&exp)
            .args([
                "--metric",
                "work.task_clock_ns",
                // A cap, not a count: each step stops once decided (about 6 reps);
                // room for a disturbed rep on a loaded machine.
                "--reps",
                "24",
                "--format",
                format,
            ])
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
    let slow = &commits[5];
    assert!(
        stdout.starts_with(&format!("first bad commit: {slow}\n")),
        "{stdout}\n{stderr}"
    );
    assert!(stdout.contains("regressed"), "{stdout}");
    // Every step is listed with its measurement; the middle commit does not build and
    // was stepped around.
    assert!(stdout.contains("steps:\n  #3   "), "{stdout}");
    assert!(
        stdout.contains(&format!("#3   {}  did not build", &commits[3][..12])),
        "{stdout}"
    );
    assert!(stdout.contains("did not build"), "{stdout}");
    // Again, as JSON: every run folder is reused, nothing is measured anew.
    let out = bisect("json");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(stderr.contains("reusing"), "{stderr}");
    assert!(!stderr.contains(": measured "), "{stderr}");
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["outcome"]["kind"], "first_bad");
    assert_eq!(j["outcome"]["commit"], slow.as_str());
    assert_eq!(j["outcome"]["parent"], commits[4].as_str());
    // Its change against its parent: the slowdown shows in the median. The run stops
    // on its sequence (narrowed by the ends' spread: as few as 1 or 2 iterations), so
    // the diff's tests beside it may have too few pairs for a verdict.
    let diff = &j["outcome"]["diff"];
    assert!(diff["relative"].as_f64().unwrap() > 0.0, "{diff}");
    assert!(
        diff["verdict"] == "regressed" || diff["verdict"] == "inconclusive",
        "{diff}"
    );
    let seq = &j["outcome"]["sequence"];
    assert!(seq["ratios"]["mean"].as_f64().unwrap() > 0.0, "{seq}");
    let steps = j["steps"].as_array().unwrap();
    assert!(!steps.is_empty());
    for s in steps {
        let dirs = s["run_dirs"].as_array().unwrap();
        for d in dirs {
            assert!(Path::new(d.as_str().unwrap()).join("meta.json").exists());
        }
    }
}

#[test]
fn two_rev_variants_and_a_knob_variant_make_one_ab() {
    let _serial = common::timing_lock();
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let commits = history(&repo);
    let exp = experiment(
        tmp.path(),
        &format!(
            "[[variant]]\nname = \"fast\"\nrev = \"{}\"\nrepo = \"{r}\"\n\
             [[variant]]\nname = \"slow\"\nrev = \"main\"\nrepo = \"{r}\"\n\
             [[variant]]\nname = \"here\"\ndrop = \"async\"\n",
            commits[0],
            r = repo.display()
        ),
    );
    // 16 pairs: a verdict on the 50% change that disturbed pairs cannot undo.
    let text = std::fs::read_to_string(&exp).unwrap();
    std::fs::write(&exp, text.replace("reps = 8", "reps = 16")).unwrap();
    let dir = run_ok(tmp.path(), &exp, &["--quiet"]);
    let d = RunData::load(&dir).unwrap();
    // Interleaved: a warm-up each, then the variants take turns (counterbalanced).
    let order: Vec<&str> = d.runs.iter().map(|r| r.variant.as_str()).collect();
    assert_eq!(
        &order[..9],
        ["fast", "slow", "here", "fast", "slow", "here", "here", "slow", "fast"]
    );
    assert!(
        d.runs.iter().all(|r| r.status == RepStatus::Ok),
        "{:?}",
        d.runs
    );
    let rev = |i: usize| d.meta.variants[i].revision.clone();
    assert_eq!(rev(0).unwrap().commit, commits[0]);
    assert_eq!(rev(1).unwrap().commit, commits[6]);
    assert!(rev(2).is_none());
    // Only the knob variant ran the prover here.
    assert!(d
        .spans
        .iter()
        .any(|s| s.variant == "here" && s.name == "synthesis"));
    assert!(d
        .spans
        .iter()
        .all(|s| s.variant == "here" || s.name != "synthesis"));
    let m = diff_metric(tmp.path(), &dir, "fast", "slow", "work", "task_clock_ns");
    assert_eq!(m["verdict"], "regressed", "{m}");
    let r = m["relative"].as_f64().unwrap();
    assert!((0.35..0.65).contains(&r), "{m}");
}

#[test]
fn bisect_step_serves_git_bisect_run() {
    let _serial = common::timing_lock();
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let commits = history(&repo);
    let exp = experiment(tmp.path(), "[[variant]]\nname = \"v\"\n");
    let bin = assert_cmd::cargo::cargo_bin("gapscope");
    git(&repo, &["bisect", "start", "main", &commits[0]]);
    let out = Std::new("git")
        .arg("-C")
        .arg(&repo)
        .args(["bisect", "run"])
        .arg(&bin)
        .args(["bisect-step", "--good", &commits[0], "--bad", "main"])
        .arg("--experiment")
        .arg(&exp)
        .args(["--metric", "work.task_clock_ns", "--reps", "24"])
        .arg("--results-dir")
        .arg(tmp.path().join("results"))
        .env("GAPSCOPE_PARAMS_DIR", tmp.path().join("params"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains(&format!("{} is the first bad commit", commits[5])),
        "{stdout}\n{stderr}"
    );
    // The commit that does not build, if git asked about it, was skipped (125).
    if stdout.contains(&commits[3][..12]) {
        assert!(stderr.contains("failed (exit 125)"), "{stderr}");
    }
    // Outside `git bisect run`: the exit statuses themselves.
    let step = |rev: &str| {
        gapscope(tmp.path())
            .args([
                "bisect-step",
                "--good",
                &commits[0],
                "--bad",
                "main",
                "--rev",
                rev,
            ])
            .arg("--experiment")
            .arg(&exp)
            .args(["--metric", "work.task_clock_ns", "--reps", "24"])
            .arg("--repo")
            .arg(&repo)
            .arg("--results-dir")
            .arg(tmp.path().join("results"))
            .output()
            .unwrap()
            .status
            .code()
    };
    assert_eq!(step(&commits[3]), Some(125));
    assert_eq!(step(&commits[6]), Some(1));
    assert_eq!(step(&commits[0]), Some(0));
    assert_eq!(step("no-such-rev"), Some(128));
}
