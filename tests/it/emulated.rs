//! Emulated counters (`counters = "emulated"`) against valgrind's own counts.
//!
//! - A span around a loop of known length, opened from C++ through the span ABI, gets
//!   exactly the instructions and branches callgrind itself attributes to the loop's
//!   function, and the loop's length shows as exactly 2 instructions and 1 branch per
//!   iteration (x86-64: `dec; jnz`).
//! - `gapscope run` with one emulated rep of a tiny circuit records counts for every
//!   span and says where they came from; a missing valgrind falls back, loudly.
//!
//! These need valgrind. Where it is missing they say so and pass, except under CI
//! (`CI` set), which installs it (.ci/run) and so fails here without it.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use assert_cmd::cargo::CommandCargoExt;
use gapscope::counters::emulated;

extern "C" {
    /// crates/gapscope-trace/native/trace_selftest.cpp: spans `known_loop_empty` around the loop of 0 iterations
    /// and `known_loop` around the loop of `n` iterations.
    fn gapscope_selftest_loop_spans(n: u64) -> u64;
}

const LOOPS: [u64; 2] = [1_000, 25_000];
const LOOP_FN: &str = "gapscope_selftest_known_loop";

/// Whether valgrind (and a build that can talk to it) is here; panics under CI without.
fn valgrind_here() -> bool {
    let ok = Command::new("valgrind")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
        && emulated::built();
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI needs valgrind and a build with its headers (.ci/run installs it)"
        );
        eprintln!(
            "skipped: valgrind or its headers are missing; {}",
            emulated::INSTALL_HINT
        );
    }
    ok
}

/// Runs under callgrind (started by the test below): the loop spans inside one trace,
/// then one line per span: `loopspan NAME ID`.
#[test]
#[ignore = "runs under callgrind, started by span_around_a_known_loop_gets_the_emulators_count"]
fn loop_spans_under_callgrind() {
    emulated::arm().expect("under callgrind");
    let window = emulated::RepWindow::open();
    let outer = gapscope::trace::Span::enter("outer");
    for n in LOOPS {
        // SAFETY: a plain C++ function of the test library, no preconditions.
        assert_eq!(unsafe { gapscope_selftest_loop_spans(n) }, n);
    }
    let trace = outer.trace();
    drop(outer);
    drop(window);
    for s in gapscope::trace::drain_trace(trace) {
        println!("loopspan {} {}", s.name, s.id);
    }
}

/// What callgrind reports for the calls to `function` in one dump file: the inclusive
/// cost on the line after each `calls=` line under a `cfn=` naming it, as (Ir, Bc + Bi).
fn call_cost(text: &str, function: &str) -> (u64, u64) {
    let mut events: Vec<&str> = Vec::new();
    // Names are compressed: "(7) name" names number 7 once, then "(7)" refers back.
    let mut names: BTreeMap<String, String> = BTreeMap::new();
    let mut callee_is_it = false;
    let mut next_is_call_cost = false;
    let (mut ir, mut br) = (0, 0);
    for line in text.lines() {
        if let Some(e) = line.strip_prefix("events:") {
            events = e.split_whitespace().collect();
            continue;
        }
        if next_is_call_cost {
            next_is_call_cost = false;
            if callee_is_it {
                let vals: Vec<u64> = line
                    .split_whitespace()
                    .skip(1)
                    .map(|v| v.parse().unwrap())
                    .collect();
                let get = |name: &str| {
                    let i = events.iter().position(|e| *e == name);
                    i.and_then(|i| vals.get(i)).copied().unwrap_or(0)
                };
                ir += get("Ir");
                br += get("Bc") + get("Bi");
            }
            continue;
        }
        let fn_ref = line
            .strip_prefix("cfn=")
            .map(|f| (true, f))
            .or_else(|| line.strip_prefix("fn=").map(|f| (false, f)));
        if let Some((is_callee, f)) = fn_ref {
            let name = match f.split_once(' ') {
                Some((n, name)) => {
                    names.insert(n.to_string(), name.to_string());
                    name.to_string()
                }
                None => names.get(f).cloned().unwrap_or_default(),
            };
            if is_callee {
                callee_is_it = name == function;
            }
        } else if line.starts_with("calls=") {
            next_is_call_cost = true;
        }
    }
    (ir, br)
}

#[test]
fn span_around_a_known_loop_gets_the_emulators_count() {
    if !valgrind_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let out = Command::new("valgrind")
        .args([
            "--tool=callgrind",
            "--quiet",
            "--separate-threads=yes",
            "--branch-sim=yes",
            "--instr-atstart=no",
        ])
        .arg(format!(
            "--callgrind-out-file={}",
            dir.path().join("callgrind.out.%p").display()
        ))
        .arg(&exe)
        .args([
            "emulated::loop_spans_under_callgrind",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let spans: Vec<(String, u64)> = stdout
        .lines()
        // The test harness may print its own words before the first one.
        .filter_map(|l| l.split_once("loopspan ").map(|(_, rest)| rest))
        .map(|l| {
            let (name, id) = l.split_once(' ').unwrap();
            (name.to_string(), id.parse().unwrap())
        })
        .collect();
    assert_eq!(spans.len(), 1 + 2 * LOOPS.len(), "{stdout}");
    // The worker's files are named by its pid; here the only process is the test's.
    let pid = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .find_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.strip_prefix("callgrind.out.")?
                .split(['.', '-'])
                .next()?
                .parse::<u32>()
                .ok()
        })
        .expect("callgrind wrote files");
    let dumps = gapscope::experiment::emulation::read_dumps(dir.path(), pid).unwrap();
    let counts = emulated::span_counts(&dumps).unwrap();
    // The emulator's own count of the loop function inside each span: the span's end
    // dump holds exactly the span (nothing nests inside it).
    let mut files: BTreeMap<u64, String> = BTreeMap::new();
    for e in std::fs::read_dir(dir.path()).unwrap().flatten() {
        let text = std::fs::read_to_string(e.path()).unwrap();
        if let Ok(d) = emulated::parse_dump(&text) {
            if let Some((id, emulated::Edge::End)) = d.span_edge() {
                files.insert(id, text);
            }
        }
    }
    let loop_spans: Vec<&(String, u64)> = spans.iter().filter(|(n, _)| n != "outer").collect();
    // Per span: its count minus the emulator's own count of the loop call inside it.
    let around = |id: u64| {
        let c = counts[&id];
        let (ir, br) = call_cost(&files[&id], LOOP_FN);
        assert!(ir > 0, "{LOOP_FN} not in the dump of span {id}");
        (c.instructions - ir, c.branches - br)
    };
    let names: Vec<&str> = loop_spans.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "known_loop_empty",
            "known_loop",
            "known_loop_empty",
            "known_loop"
        ]
    );
    // Whatever the loop's length, the span holds the loop's call exactly as the emulator
    // counts it, plus the same fixed amount of recorder and caller code.
    let (short, long) = (loop_spans[1].1, loop_spans[3].1);
    assert_eq!(around(short), around(long));
    assert_eq!(around(loop_spans[0].1), around(loop_spans[2].1));
    // The empty span differs only in how the caller passes the argument (a constant
    // instead of a variable): a few instructions.
    let (e, l) = (around(loop_spans[0].1), around(short));
    assert!(e.0.abs_diff(l.0) <= 4 && e.1 == l.1, "{e:?} vs {l:?}");
    // And the loop's length shows exactly: 2 instructions and 1 branch per iteration.
    #[cfg(target_arch = "x86_64")]
    {
        let (s, l) = (counts[&short], counts[&long]);
        let extra = LOOPS[1] - LOOPS[0];
        assert_eq!(l.instructions - s.instructions, 2 * extra);
        assert_eq!(l.branches - s.branches, extra);
    }
    let outer = counts[&spans.iter().find(|(n, _)| n == "outer").unwrap().1];
    assert!(outer.instructions > 2 * (LOOPS[0] + LOOPS[1]));
}

/// `gapscope diff --format json RUN`, parsed.
fn diff_json(run: &Path) -> serde_json::Value {
    let out = Command::cargo_bin("gapscope")
        .unwrap()
        .args(["diff", "--format", "json"])
        .arg(run)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    serde_json::from_str(&text).unwrap()
}

fn tiny_experiment(dir: &Path) -> std::path::PathBuf {
    let p = dir.join("tiny.toml");
    std::fs::write(
        &p,
        "name = \"tiny\"\n[workload]\ncircuit = \"chain\"\nlog2_constraints = 4\nbatch = 1\n\
         [run]\nreps = 1\nwarmups = 0\n\
         [[variant]]\nname = \"baseline\"\ncounters = \"emulated\"\n\
         [[variant]]\nname = \"candidate\"\n",
    )
    .unwrap();
    p
}

fn run_tiny(dir: &Path, valgrind: Option<&str>) -> (std::process::Output, serde_json::Value) {
    let exp = tiny_experiment(dir);
    let mut cmd = Command::cargo_bin("gapscope").unwrap();
    cmd.arg("run")
        .arg(&exp)
        .arg("--results-dir")
        .arg(dir.join("results"))
        .arg("--params-dir")
        .arg(dir.join("params"));
    if let Some(v) = valgrind {
        cmd.env("GAPSCOPE_VALGRIND", v);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = std::fs::read_dir(dir.join("results/tiny"))
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path();
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("meta.json")).unwrap()).unwrap();
    (out, meta)
}

#[test]
fn one_emulated_rep_counts_every_span_and_is_never_compared_with_hardware_counts() {
    if !valgrind_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (_, meta) = run_tiny(dir.path(), None);
    let source = meta["variants"][0]["counters"].as_str().unwrap();
    assert!(source.starts_with("emulated (callgrind 3."), "{source}");
    assert_eq!(meta["variants"][1]["counters"], "hardware");
    let run = std::fs::read_dir(dir.path().join("results/tiny"))
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path();
    let mut rdr = csv::Reader::from_path(run.join("spans.csv")).unwrap();
    let mut emulated_spans = 0;
    for r in rdr.deserialize::<gapscope::store::SpanRow>() {
        let r = r.unwrap();
        if r.variant != "baseline" {
            continue;
        }
        emulated_spans += 1;
        assert!(r.instructions.get().unwrap() > 0, "{}", r.name);
        assert!(r.branches.is_some(), "{}", r.name);
        // Under the emulator perf events would count the emulator: none are recorded.
        assert_eq!(
            (r.task_clock_ns.get(), r.page_faults.get()),
            (None, None),
            "{}",
            r.name
        );
    }
    assert!(emulated_spans >= 5, "{emulated_spans} spans");
    assert!(
        !run.read_dir()
            .unwrap()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with(".callgrind")),
        "the emulator's dumps are removed"
    );
    let diff = diff_json(&run);
    let notes = diff["notes"].to_string();
    assert!(notes.contains("never compared"), "{notes}");
    for m in diff["metrics"].as_array().unwrap() {
        assert_ne!(m["measure"], "instructions", "{m}");
        assert_ne!(m["measure"], "branches", "{m}");
    }
}

#[test]
fn without_valgrind_an_emulated_variant_falls_back_and_says_how_to_install_it() {
    let dir = tempfile::tempdir().unwrap();
    let (out, meta) = run_tiny(dir.path(), Some("/nonexistent/valgrind"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("falls back") && stderr.contains("apt-get install valgrind"),
        "{stderr}"
    );
    let source = meta["variants"][0]["counters"].as_str().unwrap();
    assert!(
        source.starts_with("hardware (emulated was asked for: valgrind not found"),
        "{source}"
    );
}

#[test]
fn a_gpu_backend_under_the_emulator_counts_synthesis_alone_and_says_so() {
    if !valgrind_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exp = dir.path().join("synth.toml");
    // backend = "cuda" needs no CUDA here: under the emulator only synthesis runs.
    std::fs::write(
        &exp,
        "name = \"synth\"\n[workload]\ncircuit = \"chain\"\nlog2_constraints = 4\nbatch = 2\n\
         [run]\nreps = 1\nwarmups = 0\ncounters = \"emulated\"\n\
         [[variant]]\nname = \"cpu\"\n\
         [[variant]]\nname = \"gpu\"\nbackend = \"cuda\"\n",
    )
    .unwrap();
    let out = Command::cargo_bin("gapscope")
        .unwrap()
        .arg("run")
        .arg(&exp)
        .arg("--results-dir")
        .arg(dir.path().join("results"))
        .arg("--params-dir")
        .arg(dir.path().join("params"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("counts synthesis alone") && stderr.contains("not run"),
        "{stderr}"
    );
    let run = std::fs::read_dir(dir.path().join("results/synth"))
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path();
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("meta.json")).unwrap()).unwrap();
    assert!(meta["variants"][0].get("scope").is_none(), "{meta}");
    assert_eq!(meta["variants"][1]["scope"], "synthesis");
    let mut runs = csv::Reader::from_path(run.join("runs.csv")).unwrap();
    for r in runs.deserialize::<gapscope::store::RunRow>() {
        let r = r.unwrap();
        assert!(r.checked, "{r:?}");
        assert_eq!(r.outputs, if r.variant == "gpu" { 0 } else { 2 }, "{r:?}");
    }
    let mut synth: std::collections::BTreeMap<(String, String), u64> = Default::default();
    let mut rdr = csv::Reader::from_path(run.join("spans.csv")).unwrap();
    for r in rdr.deserialize::<gapscope::store::SpanRow>() {
        let r = r.unwrap();
        if r.variant == "gpu" {
            assert!(
                ["prove", "synthesis", "synthesis[0]", "synthesis[1]"].contains(&r.name.as_str()),
                "the synthesis-only rep ran {}",
                r.name
            );
        }
        synth.insert(
            (r.variant.to_string(), r.name.to_string()),
            r.instructions.get().unwrap(),
        );
    }
    // The same synthesis code, counted on both: equal to within a few instructions of
    // thread-pool bookkeeping.
    for name in ["synthesis[0]", "synthesis[1]"] {
        let (c, g) = (
            synth[&("cpu".to_string(), name.to_string())] as f64,
            synth[&("gpu".to_string(), name.to_string())] as f64,
        );
        assert!((c - g).abs() / c < 0.01, "{name}: cpu {c} gpu {g}");
    }
    let diff = diff_json(&run);
    let notes = diff["notes"].to_string();
    assert!(notes.contains("compare their synthesis spans"), "{notes}");
    // The headline's end to end is the largest scope both sides ran: synthesis.
    let out = Command::cargo_bin("gapscope")
        .unwrap()
        .arg("diff")
        .arg(&run)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("End to end: synthesis (total)"), "{text}");
}
