//! End-to-end tests of `gapscope run` on tiny experiments (CPU backend).

use std::path::{Path, PathBuf};

use gapscope::store::{RepStatus, RunData};

mod common;
use common::{gapscope, run_dir_of, run_ok};

fn experiment(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(format!("{name}.toml"));
    std::fs::write(&p, format!("name = \"{name}\"\n{body}")).unwrap();
    p
}

const TINY: &str = r#"
[workload]
circuit = "porep"
log2_constraints = 10
batch = 2
backend = "cpu"
[run]
reps = 2
warmups = 1
[[variant]]
name = "baseline"
drop = "sync"
[[variant]]
name = "candidate"
drop = "async"
gadget = "lc"
"#;

/// A successful `gapscope run` of a per_rep experiment with the hidden test-double flags
/// `debug` (worker noise, a hang, corrupted proofs); its stderr and its run folder's data.
fn run_with_debug(tmp: &Path, exp: &Path, debug: &[&str]) -> (String, RunData) {
    let out = gapscope(tmp)
        .arg("run")
        .arg(exp)
        .args(debug)
        .arg("--results-dir")
        .arg(tmp.join("results"))
        .assert()
        .success();
    let o = out.get_output();
    let d = RunData::load(&run_dir_of(&o.stdout)).unwrap();
    (String::from_utf8_lossy(&o.stderr).into_owned(), d)
}

fn parent_of<'a>(d: &'a RunData, s: &gapscope::store::SpanRow) -> Option<&'a str> {
    let p = s.parent_id?;
    d.spans
        .iter()
        .find(|x| x.rep == s.rep && x.span_id == p)
        .map(|x| x.name.as_str())
}

#[test]
fn tiny_experiment_end_to_end() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = experiment(tmp.path(), "tiny", TINY);
    let out = gapscope(tmp.path())
        .arg("run")
        .arg(&exp)
        .arg("--results-dir")
        .arg(tmp.path().join("results"))
        .assert()
        .success();
    let stdout = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(
        stdout.contains("phase (median ms)") && stdout.contains("unattributed"),
        "{stdout}"
    );
    let dir = PathBuf::from(stdout.lines().last().unwrap().trim());
    assert!(dir.starts_with(tmp.path().join("results").join("tiny")));

    let d = RunData::load(&dir).unwrap();
    // The params file is named relative to the params dir, not by this machine's path.
    assert!(!d.meta.params.is_empty());
    for p in &d.meta.params {
        let path = p["path"].as_str().unwrap();
        assert!(path.ends_with(".params") && !path.contains('/'), "{path}");
    }
    // 1 warm-up + 2 reps per variant, interleaved after the warm-ups.
    assert_eq!(d.runs.len(), 6);
    let order: Vec<_> = d
        .runs
        .iter()
        .map(|r| (r.variant.as_str(), r.warmup))
        .collect();
    assert_eq!(
        order,
        [
            ("baseline", true),
            ("candidate", true),
            ("baseline", false),
            ("candidate", false),
            ("baseline", false),
            ("candidate", false)
        ]
    );
    for r in &d.runs {
        assert_eq!(r.status, RepStatus::Ok, "{r:?}");
        assert!(r.verified && r.proofs == 2 && r.wall_ns > 0);
    }
    let expect = [
        ("prove", None),
        ("synthesis", Some("prove")),
        ("synthesis[0]", Some("synthesis")),
        ("synthesis[1]", Some("synthesis")),
        ("gpu_prove", Some("prove")),
        ("entry", Some("gpu_prove")),
        ("prep", Some("gpu_prove")),
        ("split_vectors_alloc", Some("gpu_prove")),
        ("kernels", Some("gpu_prove")),
        ("ntt_h", Some("kernels")),
        ("msm_h", Some("kernels")),
        ("b_g2_msm", Some("gpu_prove")),
        ("assemble", Some("gpu_prove")),
        ("drop", Some("gpu_prove")),
        ("drop_assignments", Some("prove")),
    ];
    for r in &d.runs {
        for (name, parent) in expect {
            let s = d
                .spans
                .iter()
                .find(|s| s.rep == r.rep && s.name == name)
                .unwrap_or_else(|| panic!("rep {} lacks span {name}", r.rep));
            assert_eq!(parent_of(&d, s), parent, "parent of {name}");
            assert!(s.self_ns <= s.duration_ns);
        }
    }
    // Async drops ran on the background thread.
    let cand_drop = d
        .spans
        .iter()
        .find(|s| s.variant == "candidate" && s.name == "drop")
        .unwrap();
    assert_eq!(cand_drop.thread_name, "gapscope-drop");

    // Software counters are numbers; hardware counters follow meta.json's verdict.
    let sw = ["task_clock_ns", "page_faults", "context_switches"];
    for c in sw {
        assert!(
            d.meta.counters[c].available,
            "{c}: {:?}",
            d.meta.counters[c]
        );
        assert!(
            d.spans.iter().all(|s| s.counter(c).is_some()),
            "{c} missing"
        );
    }
    assert!(d.spans.iter().any(|s| s.task_clock_ns.unwrap() > 0));
    // Every rep's prove span carries the heap it started from (glibc).
    for p in d.spans.iter().filter(|s| s.name == "prove") {
        let attrs: serde_json::Value = serde_json::from_str(&p.attrs).unwrap();
        assert_eq!(attrs["backend"], "cpu", "{attrs}");
        if cfg!(target_env = "gnu") {
            assert!(attrs["heap_arena_bytes"].as_u64().unwrap() > 0, "{attrs}");
            assert!(attrs["heap_free_bytes"].is_u64(), "{attrs}");
        }
    }
    // Each circuit's synthesis says which CPU it started and ended on.
    for w in d.spans.iter().filter(|s| s.name.starts_with("synthesis[")) {
        let attrs: serde_json::Value = serde_json::from_str(&w.attrs).unwrap();
        for k in ["cpu_start", "cpu_end"] {
            let cpu = attrs[k].as_i64().unwrap_or(-2);
            assert!((0..4096).contains(&cpu), "{k}: {attrs}");
        }
    }
    for c in ["instructions", "branches", "cycles"] {
        let a = &d.meta.counters[c];
        if a.available {
            assert!(d.spans.iter().all(|s| s.counter(c).is_some()));
        } else {
            let reason = a.reason.as_deref().unwrap();
            assert!(reason.contains("perf_event_open"), "{reason}");
            assert!(
                d.spans.iter().all(|s| s.counter(c).is_none()),
                "{c} was faked"
            );
        }
    }
    let raw = std::fs::read_to_string(dir.join("meta.json")).unwrap();
    assert!(raw.contains("\"workload\"") && raw.contains("\"hostname\""));
    assert!(dir.join("experiment.toml").exists());

    // `summary` reads it back.
    gapscope(tmp.path())
        .arg("summary")
        .arg(&dir)
        .assert()
        .success()
        .stdout(predicates::str::contains("gpu_prove"));
}

#[test]
fn params_missing_from_the_cache_are_generated_in_a_child_then_loaded() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let exp = experiment(t, "tiny", TINY);
    let params_meta = |dir: &Path| {
        let meta: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("meta.json")).unwrap()).unwrap();
        meta["params"][0].clone()
    };
    let source = |p: &serde_json::Value| p["source"].as_str().unwrap().to_string();
    let generator = |p: &serde_json::Value| p["generator"].as_str().unwrap().to_string();
    // The run process only loads: the first run's params come from a child process, the
    // second run's from the cache the child filled. Both name what made the file; the
    // first also carries the child's stage timings.
    let first = params_meta(&run_ok(t, &exp, &[]));
    assert_eq!(source(&first), "generated in a child process");
    assert!(
        generator(&first).starts_with("paramgen, fixed base cpu ("),
        "{first}"
    );
    assert_eq!(
        first["generation"]["queries"].as_array().unwrap().len(),
        6,
        "{first}"
    );
    let second = params_meta(&run_ok(t, &exp, &[]));
    assert_eq!(source(&second), "loaded");
    assert_eq!(generator(&second), generator(&first));
    assert!(second.get("generation").is_none(), "{second}");
    // An unknown generator is refused with the valid ones.
    let out = gapscope(t)
        .env("GAPSCOPE_PARAMGEN", "gpu")
        .args(["run", exp.to_str().unwrap(), "--results-dir"])
        .arg(t.join("results"))
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && e.contains("GAPSCOPE_PARAMGEN")
            && e.contains("auto, cpu, cuda, bellperson"),
        "{e}"
    );
    // The child's own errors name what was wrong.
    let e = failure_stderr(
        t,
        &[
            "__params",
            "--circuit",
            "nope",
            "--log2-constraints",
            "10",
            "--gadget",
            "lc",
            "--params-dir",
            "p",
        ],
    );
    assert!(e.contains("--circuit") && e.contains("porep"), "{e}");
}

#[test]
fn params_time_only_cross_checks_generators_by_digest() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let chain_2e6 = [
        "__params",
        "--circuit",
        "chain",
        "--log2-constraints",
        "6",
        "--gadget",
        "lc",
    ];
    let time = |generator: &str, seed: &str| -> serde_json::Value {
        let out = gapscope(t)
            .args(chain_2e6)
            .args(["--time-only", "--digest", "--toxic-seed", seed])
            .args(["--generator", generator])
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        serde_json::from_slice(&out).unwrap()
    };
    let ours = time("cpu", "5");
    let theirs = time("bellperson", "5");
    assert_eq!(
        ours["params_sha256"], theirs["params_sha256"],
        "{ours} {theirs}"
    );
    assert_eq!(ours["report"]["domain_size"], 64);
    assert!(theirs["report"].is_null());
    assert_ne!(time("cpu", "6")["params_sha256"], ours["params_sha256"]);
    assert!(!t.join("params").exists(), "--time-only writes no params");
    // A fixed seed never reaches the cache.
    let mut args = chain_2e6.to_vec();
    args.extend(["--params-dir", "p", "--toxic-seed", "1"]);
    let e = failure_stderr(t, &args);
    assert!(e.contains("--time-only"), "{e}");
}

#[test]
fn per_rep_processes_tolerate_child_noise_and_failed_verification_is_recorded() {
    let tmp = tempfile::tempdir().unwrap();
    let body = TINY
        .replace("reps = 2", "reps = 1\nprocess = \"per_rep\"")
        .replace("warmups = 1", "warmups = 0")
        .replace("gadget = \"lc\"\n", "");
    let exp = experiment(tmp.path(), "perrep", &body);
    let (stderr, d) = run_with_debug(
        tmp.path(),
        &exp,
        &[
            "--debug-worker",
            "noise",
            "--debug-corrupt-proofs",
            "candidate",
        ],
    );
    assert!(stderr.contains("CUDA init noise"), "{stderr}");
    assert!(stderr.contains("1 rep(s) failed"), "{stderr}");
    assert_eq!(d.runs.len(), 2);
    let base = d.runs.iter().find(|r| r.variant == "baseline").unwrap();
    let cand = d.runs.iter().find(|r| r.variant == "candidate").unwrap();
    assert_eq!(base.status, RepStatus::Ok);
    assert_ne!(base.pid, std::process::id());
    assert_eq!(cand.status, RepStatus::Failed);
    assert!(
        !cand.verified && cand.error.contains("verification failed"),
        "{}",
        cand.error
    );
    // The failed rep's spans are still there: it shows how far it got.
    assert!(d
        .spans
        .iter()
        .any(|s| s.rep == cand.rep && s.name == "gpu_prove"));
}

#[test]
fn a_killed_run_resumes_without_losing_or_repeating_reps() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = experiment(tmp.path(), "resume", TINY);
    let dir = run_ok(tmp.path(), &exp, &["--quiet"]);
    // Simulate a kill after rep 3: cut runs.csv to header + 4 rows and leave half a line.
    let runs = dir.join("runs.csv");
    let text = std::fs::read_to_string(&runs).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut cut = lines[..5].join("\n");
    cut.push('\n');
    cut.push_str(&lines[5][..10]);
    std::fs::write(&runs, cut).unwrap();
    gapscope(tmp.path())
        .arg("run")
        .arg("--resume")
        .arg(&dir)
        .arg("--quiet")
        .assert()
        .success();
    let d = RunData::load(&dir).unwrap();
    let reps: Vec<u32> = d.runs.iter().map(|r| r.rep).collect();
    // The resumed process warms up (rep 6, past the schedule's 6 slots) before it
    // measures rep 4: its first rep would otherwise fault in what the killed one warmed.
    assert_eq!(reps, vec![0, 1, 2, 3, 6, 4, 5]);
    let warm = &d.runs[4];
    assert!(
        warm.warmup && warm.variant == "baseline" && warm.iteration == 1,
        "{warm:?}"
    );
    assert!(!d.runs[5].warmup);
    let prove_per_rep = |r: u32| {
        d.spans
            .iter()
            .filter(|s| s.rep == r && s.name == "prove")
            .count()
    };
    for r in 0..7 {
        assert_eq!(prove_per_rep(r), 1, "rep {r}");
    }
}

/// Runs `gapscope ARGS` in `t`, expects it to fail, and returns its stderr.
fn failure_stderr<S: AsRef<std::ffi::OsStr>>(t: &Path, args: &[S]) -> String {
    let out = gapscope(t).args(args).output().unwrap();
    assert!(
        !out.status.success(),
        "gapscope {:?} should fail",
        args.iter().map(|a| a.as_ref()).collect::<Vec<_>>()
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `gapscope run` of a variant of TINY, expected to fail; its stderr.
fn run_failure(t: &Path, name: &str, from: &str, to: &str) -> String {
    let exp = experiment(t, name, &TINY.replace(from, to));
    failure_stderr(t, &[std::ffi::OsStr::new("run"), exp.as_os_str()])
}

#[test]
fn bad_input_is_reported_before_any_work() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let e = run_failure(t, "bad", "batch = 2", "batch = = 2");
    assert!(e.contains("bad.toml") && e.contains("line 6"), "{e}");
    let e = run_failure(t, "knob", "drop = \"sync\"", "dorp = \"sync\"");
    assert!(e.contains("dorp") && e.contains("gadget"), "{e}");
    let e = run_failure(t, "gpu", "backend = \"cpu\"", "backend = \"supraseal\"");
    assert!(e.contains("--features supraseal"), "{e}");
    let e = run_failure(t, "zero", "[run]", "[run]\nrep_timeout_s = 0");
    assert!(e.contains("rep_timeout_s"), "{e}");
    // Unwritable results dir: a regular file stands where a directory must go.
    let good = experiment(t, "good", TINY);
    std::fs::write(t.join("blocked"), "").unwrap();
    let e = failure_stderr(
        t,
        &[
            std::ffi::OsStr::new("run"),
            good.as_os_str(),
            std::ffi::OsStr::new("--results-dir"),
            t.join("blocked").as_os_str(),
        ],
    );
    assert!(e.contains("--results-dir"), "{e}");
    assert!(
        !t.join("params").exists(),
        "no params work before the error"
    );
    let e = failure_stderr(
        t,
        &[
            std::ffi::OsStr::new("run"),
            t.join("missing.toml").as_os_str(),
        ],
    );
    assert!(e.contains("missing.toml"), "{e}");
    // The upstream control names valid circuits, and fails cleanly without a GPU build
    // or a GPU (this test runs where there is none).
    let e = failure_stderr(
        t,
        &[
            "upstream-reference",
            "--circuit",
            "poerp",
            "--log2-constraints",
            "10",
        ],
    );
    assert!(e.contains("poerp") && e.contains("porep"), "{e}");
    let e = failure_stderr(t, &["upstream-reference", "--log2-constraints", "10"]);
    assert!(
        e.contains("--features supraseal") || e.contains("needs a GPU"),
        "{e}"
    );
}

#[test]
fn a_hung_worker_is_killed_at_the_rep_timeout_and_its_rep_fails() {
    let tmp = tempfile::tempdir().unwrap();
    let body = TINY
        .replace(
            "reps = 2",
            "reps = 1\nprocess = \"per_rep\"\nrep_timeout_s = 2",
        )
        .replace("warmups = 1", "warmups = 0");
    let exp = experiment(tmp.path(), "hang", &body);
    let t0 = std::time::Instant::now();
    // `sleep 60` stands in for a GPU call that never returns.
    let (stderr, d) = run_with_debug(tmp.path(), &exp, &["--debug-worker", "hang"]);
    assert!(
        t0.elapsed().as_secs() < 40,
        "the hung workers were not killed in time"
    );
    assert!(stderr.contains("[worker rep 0] about to hang"), "{stderr}");
    assert_eq!(d.runs.len(), 2);
    for r in &d.runs {
        assert_eq!(r.status, RepStatus::Failed);
        assert!(r.error.contains("timed out after 2 s"), "{}", r.error);
        assert!(r.error.contains("about to hang"), "{}", r.error);
    }
}
