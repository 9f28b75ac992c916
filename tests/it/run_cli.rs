//! End-to-end tests of `gapscope run` on tiny experiments (CPU backend).

use std::path::{Path, PathBuf};

use gapscope::store::{RepStatus, RunData};

use crate::common;
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
/// `code`: the exit status expected (5 when a variant has no successful rep).
fn run_with_debug(tmp: &Path, exp: &Path, debug: &[&str], code: i32) -> (String, RunData) {
    let out = gapscope(tmp)
        .arg("run")
        .arg(exp)
        .args(debug)
        .arg("--results-dir")
        .arg(tmp.join("results"))
        .assert()
        .code(code);
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
        assert!(r.checked && r.outputs == 2 && r.wall_ns > 0);
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
    assert!(d.spans.iter().any(|s| s.task_clock_ns.get().unwrap() > 0));
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
        gapscope::cli::EXIT_NO_OK_REP,
    );
    assert!(
        stderr.contains("no successful rep of candidate"),
        "{stderr}"
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
        !cand.checked && cand.error.contains("verification failed"),
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
    let (stderr, d) = run_with_debug(
        tmp.path(),
        &exp,
        &["--debug-worker", "hang"],
        gapscope::cli::EXIT_NO_OK_REP,
    );
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

/// `gapscope run --cmd …` in `tmp`, with `gapscope` itself on PATH (for `gapscope now`).
fn run_cmd(tmp: &Path, args: &[&str]) -> assert_cmd::assert::Assert {
    let bin = assert_cmd::cargo::cargo_bin("gapscope");
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    gapscope(tmp)
        .env("PATH", path)
        .arg("run")
        .args(args)
        .arg("--results-dir")
        .arg(tmp.join("results"))
        .assert()
}

#[test]
fn cmd_mode_is_the_experiment_file_it_exports() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("cmp.toml");
    let out = run_cmd(
        tmp.path(),
        &[
            "--cmd",
            "true",
            "--cmd",
            "sleep 0.01",
            "--name",
            "noop",
            "--reps",
            "3",
            "--warmups",
            "1",
            "--prepare",
            "echo p >> prepared.log",
            "--export-experiment",
            file.to_str().unwrap(),
        ],
    )
    .success();
    let o = out.get_output();
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    // The headline of the diff, as for an experiment file of two variants.
    assert!(stdout.contains("cmd: noop"), "{stdout}");
    assert!(stdout.contains("sleep_0.01"), "{stdout}");
    // The program's run keeps its own root: not the prover's `prove`.
    assert!(stdout.contains("End to end: program (total)"), "{stdout}");
    let a = RunData::load(&run_dir_of(&o.stdout)).unwrap();
    assert_eq!(a.runs.len(), 8, "2 variants x (1 warm-up + 3 reps)");
    assert!(a.runs.iter().all(|r| r.status == RepStatus::Ok));
    let names: Vec<&str> = a.meta.variants.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["noop", "sleep_0.01"]);
    // No span lines: the whole process is the one span, the root `program`.
    assert!(a.spans.iter().all(|s| s.name == "program"));
    assert_eq!(a.spans.len(), 8);
    // meta.json: a command's workload has its kind and no circuit fields; its phases
    // name its root.
    let dir = run_dir_of(&o.stdout);
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("meta.json")).unwrap()).unwrap();
    assert_eq!(meta["schema_version"], 2);
    assert_eq!(meta["workload"], serde_json::json!({"kind": "command"}));
    assert_eq!(meta["phases"], serde_json::json!({"root": "program"}));
    let runs_csv = std::fs::read_to_string(dir.join("runs.csv")).unwrap();
    let header = runs_csv.lines().next().unwrap();
    assert!(
        header.contains(",checked,outputs,") && !header.contains("verified"),
        "{header}"
    );
    // summary, diff and report show the program's root.
    let summary = gapscope(tmp.path())
        .arg("summary")
        .arg(&dir)
        .assert()
        .success();
    let summary = String::from_utf8_lossy(&summary.get_output().stdout).into_owned();
    assert!(summary.contains("total (program)"), "{summary}");
    assert!(!summary.contains("prove"), "{summary}");
    let diff = gapscope(tmp.path())
        .arg("diff")
        .arg(&dir)
        .assert()
        .success();
    let diff = String::from_utf8_lossy(&diff.get_output().stdout).into_owned();
    assert!(diff.contains("End to end: program (total)"), "{diff}");
    assert!(diff.contains("end to end (program)"), "{diff}");
    assert!(
        !diff.contains("(prove)") && !diff.contains("prove ("),
        "{diff}"
    );
    let report_dir = tmp.path().join("report");
    gapscope(tmp.path())
        .arg("report")
        .arg(&dir)
        .arg("--out")
        .arg(&report_dir)
        .assert()
        .success();
    let md = std::fs::read_to_string(report_dir.join("report.md")).unwrap();
    assert!(md.contains("**End to end:** program (total)"), "{md}");
    assert!(!md.contains("`prove`") && !md.contains("(prove)"), "{md}");
    // `prepare` ran before every rep.
    let prepared = std::fs::read_to_string(tmp.path().join("prepared.log")).unwrap();
    assert_eq!(prepared.lines().count(), 8);
    // The exported file, run, is the same experiment.
    let text = std::fs::read_to_string(&file).unwrap();
    // A command without shell syntax runs directly; one with it through the shell,
    // which execs its last command.
    assert!(text.contains("command = [\"sleep\", \"0.01\"]"), "{text}");
    assert!(
        text.contains("prepare = [\"sh\", \"-c\", \"exec echo p >> prepared.log\"]"),
        "{text}"
    );
    let b = RunData::load(&run_ok(tmp.path(), &file, &["--quiet"])).unwrap();
    assert_eq!(a.meta.variants, b.meta.variants);
    assert_eq!(a.meta.workload, b.meta.workload);
    assert_eq!(a.meta.experiment, b.meta.experiment);
    let copy = |d: &RunData| std::fs::read_to_string(d.dir.join("experiment.toml")).unwrap();
    assert_eq!(copy(&a), copy(&b));
    assert_eq!(copy(&a), text);
    assert_eq!(b.runs.len(), 8);
    let order = |d: &RunData| -> Vec<(String, bool)> {
        d.runs
            .iter()
            .map(|r| (r.variant.clone(), r.warmup))
            .collect()
    };
    assert_eq!(order(&a), order(&b), "the same schedule");
}

#[test]
fn cmd_mode_reads_span_lines_and_names_a_wrong_clock() {
    let tmp = tempfile::tempdir().unwrap();
    let mono = "t0=$(gapscope now); sleep 0.01; t1=$(gapscope now); \
                echo \"@gapscope1 X $$ $t0 $((t1-t0)) step\"";
    let real = "t0=$(date +%s%N); sleep 0.01; t1=$(date +%s%N); \
                echo \"@gapscope1 X $$ $t0 $((t1-t0)) step\"";
    let out = run_cmd(
        tmp.path(),
        &[
            "--cmd",
            mono,
            "--name",
            "mono",
            "--cmd",
            real,
            "--name",
            "real",
            "--reps",
            "2",
            "--warmups",
            "0",
        ],
    )
    .success();
    let o = out.get_output();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    let d = RunData::load(&run_dir_of(&o.stdout)).unwrap();
    let steps = |v: &str| {
        d.spans
            .iter()
            .filter(|s| s.variant == v && s.name == "step")
            .count()
    };
    assert_eq!(steps("mono"), 2, "spans on the span clock are kept");
    assert_eq!(steps("real"), 0, "spans on the wall clock are dropped");
    assert!(stderr.contains("real: rep "), "{stderr}");
    assert!(
        stderr.contains(": 1 of 1 span(s) (first: \"step\")"),
        "{stderr}"
    );
    assert!(stderr.contains("CLOCK_REALTIME"), "{stderr}");
    assert!(stderr.contains("$(gapscope now)"), "{stderr}");
    assert!(!stderr.contains("mono: rep"), "{stderr}");
}

#[test]
fn cmd_mode_checks_programs_first_and_fails_a_run_with_no_good_rep() {
    let tmp = tempfile::tempdir().unwrap();
    // Not found: named, before any rep.
    let out = run_cmd(
        tmp.path(),
        &["--cmd", "true", "--cmd", "gapscope-no-such-program --fast"],
    )
    .code(1);
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(err.contains("\"gapscope-no-such-program\""), "{err}");
    assert!(err.contains("no rep ran"), "{err}");
    // No run folder is left behind: nothing was measured, nothing was built.
    assert!(!tmp.path().join("results/cmd").exists());
    // --shell none: the program itself is looked up.
    let out = run_cmd(tmp.path(), &["--shell", "none", "--cmd", "./nope 1"]).code(1);
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        err.contains("\"./nope\"") && err.contains("does not exist"),
        "{err}"
    );
    // A prepare that fails fails its reps: that variant has no successful rep.
    let out = run_cmd(
        tmp.path(),
        &[
            "--cmd",
            "true",
            "--prepare",
            "echo cache busy >&2; exit 9",
            "--reps",
            "2",
        ],
    )
    .code(gapscope::cli::EXIT_NO_OK_REP);
    let o = out.get_output();
    let d = RunData::load(&run_dir_of(&o.stdout)).unwrap();
    assert!(d.runs.iter().all(|r| r.status == RepStatus::Failed));
    assert!(d.runs[0].error.contains("prepare"), "{}", d.runs[0].error);
    assert!(
        d.runs[0].error.contains("cache busy"),
        "{}",
        d.runs[0].error
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("no successful rep of true"));
    // Flags of --cmd need --cmd; an experiment file and --cmd do not mix.
    gapscope(tmp.path())
        .args(["run", "--reps", "3"])
        .assert()
        .code(2);
    gapscope(tmp.path())
        .args(["run", "x.toml", "--cmd", "true"])
        .assert()
        .code(2);
}

#[test]
fn now_prints_the_span_clock() {
    let tmp = tempfile::tempdir().unwrap();
    let before = gapscope::trace::now_ns();
    let out = gapscope(tmp.path()).arg("now").assert().success();
    let after = gapscope::trace::now_ns();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let ns: u64 = text.trim().parse().unwrap();
    assert!(before <= ns && ns <= after, "{before} <= {ns} <= {after}");
    assert_eq!(text, format!("{ns}\n"));
}
