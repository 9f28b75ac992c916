//! CPU time and sampled stacks of external programs, end to end: `gapscope run` of a C
//! program (cuda/child_profile_demo.c, compiled here with frame pointers) that burns a
//! known amount of CPU in known functions, on a thread with spans and on one without.
//! Its spans must get the program's CPU time over them although it sends none, its
//! samples must land in the right spans with the right function names, and the rep's
//! CPU lane must be the program's.

use std::path::{Path, PathBuf};

use gapscope::profile::folded::read_run;
use gapscope::store::{RepStatus, RunData, SpanRow};

use crate::common;
use common::{gapscope, run_ok};

const BURN_MS: u64 = 300;

/// Compiles the demo into `tmp`; `None` (with the reason printed) without a C compiler.
/// `readings`: its span lines carry the emitter's CPU readings (else gapscope has to
/// interpolate its own).
fn demo(tmp: &Path, readings: bool) -> Option<PathBuf> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("cuda");
    let exe = tmp.join(format!("child-profile-demo-{readings}"));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = std::process::Command::new(&cc)
        .args(["-O1", "-fno-omit-frame-pointer", "-pthread"])
        .args((!readings).then_some("-DGAPSCOPE_EMIT_NO_CPU"))
        .arg("-I")
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .arg(src.join("child_profile_demo.c"))
        .output();
    match out {
        Ok(o) if o.status.success() => Some(exe),
        Ok(o) => panic!(
            "compiling child_profile_demo.c failed: {}",
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => {
            eprintln!("skipped: no C compiler ({cc}: {e})");
            None
        }
    }
}

fn experiment(tmp: &Path, command: &[&str], run: &str, variant: &str) -> PathBuf {
    let p = tmp.join("child.toml");
    let argv: Vec<String> = command.iter().map(|a| format!("{a:?}")).collect();
    std::fs::write(
        &p,
        format!(
            "name = \"child\"\n[workload]\ncommand = [{}]\n[run]\nwarmups = 0\n{run}\n\
             [[variant]]\nname = \"a\"\n{variant}\n",
            argv.join(", ")
        ),
    )
    .unwrap();
    p
}

fn span<'a>(d: &'a RunData, rep: u32, name: &str) -> &'a SpanRow {
    d.spans
        .iter()
        .find(|s| s.rep == rep && s.name == name)
        .unwrap_or_else(|| panic!("rep {rep} has a span {name}"))
}

fn attr_u64(s: &SpanRow, key: &str) -> u64 {
    let v: serde_json::Value = serde_json::from_str(&s.attrs).unwrap();
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} in {}", s.attrs))
}

#[test]
fn a_c_programs_threads_are_sampled_into_its_spans_and_every_span_gets_its_cpu_time() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(exe) = demo(tmp.path(), false) else {
        return;
    };
    let ms = BURN_MS.to_string();
    let exp = experiment(
        tmp.path(),
        &[exe.to_str().unwrap(), "spans", &ms],
        "reps = 2",
        "profile = true\nprofile_hz = 1000",
    );
    let dir = tmp.path().join(run_ok(tmp.path(), &exp, &[]));
    let d = RunData::load(&dir).unwrap();
    assert_eq!(d.runs.len(), 2);
    assert!(d.runs.iter().all(|r| r.status == RepStatus::Ok));
    // CPU time, whether or not sampling works here.
    let lane = d.load_telemetry().unwrap();
    for r in &d.runs {
        let root = span(&d, r.rep, "program");
        for (name, expect_label) in [("worker_burn", true), ("foreign_phase", true)] {
            let s = span(&d, r.rep, name);
            let burn = attr_u64(s, "burn_cpu_ns") as f64;
            let cpu = s.process_cpu_ns.get().expect("interpolated process CPU") as f64;
            // Off by at most the program's CPU in one 5 ms reading period at each end
            // (one busy thread), plus what the rest of the program did meanwhile.
            assert!(
                (cpu - burn).abs() < 0.1 * burn + 15e6,
                "{name}: process CPU {cpu} vs the busy thread's own {burn}"
            );
            // One thread busy: no more CPU than wall time.
            assert!(cpu <= s.duration_ns as f64 * 1.05 + 10e6, "{name}: {s:?}");
            assert_eq!(
                s.attrs.contains("interpolated"),
                expect_label,
                "{}",
                s.attrs
            );
        }
        let both = attr_u64(span(&d, r.rep, "worker_burn"), "burn_cpu_ns")
            + attr_u64(span(&d, r.rep, "foreign_phase"), "burn_cpu_ns");
        let root_cpu = root.process_cpu_ns.get().expect("the root's CPU time");
        assert!(
            root_cpu >= both && root_cpu < both + 60_000_000,
            "root {root_cpu} vs burns {both}"
        );
        // The CPU lane is the program's: it ends at the root's CPU time.
        let rows: Vec<u64> = lane
            .iter()
            .filter(|t| t.rep == r.rep && t.source == "process_cpu")
            .filter_map(|t| t.process_cpu_ns)
            .collect();
        assert!(rows.len() >= 5, "{rows:?}");
        assert_eq!(rows.iter().max(), Some(&root_cpu));
    }
    // Sampled stacks.
    let status = &d.meta.profile["a"];
    if status.starts_with("unavailable") {
        eprintln!("skipped the sampled stacks: {status}");
        return;
    }
    assert!(
        status.starts_with("sampled at 1000 Hz (the program's threads"),
        "{status}"
    );
    let reps = read_run(&dir, true).unwrap();
    assert_eq!(reps.len(), 2);
    for p in &reps {
        let count = |span: Option<&str>, foreign: bool, frame: &str| -> u64 {
            p.rows
                .iter()
                .filter(|r| span.is_none_or(|s| r.span == s) && r.foreign == foreign)
                .filter(|r| r.frames.iter().any(|f| f.starts_with(frame)))
                .map(|r| r.count)
                .sum()
        };
        let all = |frame| count(None, false, frame) + count(None, true, frame);
        // 300 ms of one thread's CPU at 1 kHz: about 300 samples each.
        let own = count(Some("worker_burn"), false, "child_demo_burn_leaf");
        assert!(
            own >= 150,
            "{own} samples of the burn in worker_burn: {p:?}"
        );
        assert_eq!(own, all("child_demo_burn_leaf"), "burn samples elsewhere");
        let foreign = count(Some("foreign_phase"), true, "child_demo_foreign_leaf");
        assert!(foreign >= 150, "{foreign} of the spanless thread: {p:?}");
        assert_eq!(foreign, all("child_demo_foreign_leaf"));
        // Callers through the frame pointers: the thread's function above the leaf.
        assert!(p.rows.iter().any(|r| r
            .frames
            .windows(2)
            .any(|w| w[0] == "worker" && w[1].starts_with("child_demo_burn_leaf"))));
        // Pseudo-files keep their own brackets.
        assert!(p
            .rows
            .iter()
            .all(|r| r.frames.iter().all(|f| !f.starts_with("[["))));
    }
    // The report draws the program's flame graph.
    let out = tmp.path().join("report");
    gapscope(tmp.path())
        .args(["report", dir.to_str().unwrap(), "--out"])
        .arg(&out)
        .args(["--flame-span", "program"])
        .assert()
        .success();
    let svg = std::fs::read_to_string(out.join("flame-a-program.svg")).unwrap();
    assert!(svg.contains("child_demo_burn_leaf") && svg.contains("[worker_burn]"));
    // By default, a span samples fell in: not `phase`, whose thread only waits.
    let out = tmp.path().join("report-default");
    gapscope(tmp.path())
        .args(["report", dir.to_str().unwrap(), "--out"])
        .arg(&out)
        .assert()
        .success();
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        md.contains("Flame graphs of `worker_burn`")
            || md.contains("Flame graphs of `foreign_phase`"),
        "{md}"
    );
}

#[test]
fn a_program_without_span_lines_gets_its_cpu_time_on_the_root_span() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(exe) = demo(tmp.path(), false) else {
        return;
    };
    let exp = experiment(
        tmp.path(),
        &[exe.to_str().unwrap(), "quiet", "200"],
        "reps = 2",
        "counters = false\ntelemetry = false",
    );
    let d = RunData::load(&tmp.path().join(run_ok(tmp.path(), &exp, &[]))).unwrap();
    for r in &d.runs {
        assert_eq!(r.status, RepStatus::Ok, "{}", r.error);
        let root = span(&d, r.rep, "program");
        let cpu = root.process_cpu_ns.get().expect("the root's CPU time");
        assert!((200_000_000..260_000_000).contains(&cpu), "{cpu}");
        assert!(cpu <= root.duration_ns, "{root:?}");
    }
}

#[test]
fn a_refused_sampler_keeps_the_programs_reps_and_says_why() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(exe) = demo(tmp.path(), false) else {
        return;
    };
    let exp = experiment(
        tmp.path(),
        &[exe.to_str().unwrap(), "spans", "20"],
        "reps = 2\nprofile = true",
        "",
    );
    let dir = tmp.path().join(run_ok(
        tmp.path(),
        &exp,
        &["--debug-deny-profile", "paranoid 4"],
    ));
    let d = RunData::load(&dir).unwrap();
    assert!(d.runs.iter().all(|r| r.status == RepStatus::Ok));
    assert_eq!(
        d.meta.profile["a"],
        "unavailable: perf_event_open(cpu-clock) refused: paranoid 4"
    );
    let reps = read_run(&dir, true).unwrap();
    assert_eq!(reps.len(), 2);
    assert!(reps.iter().all(|p| p.unavailable.is_some()));
    assert!(d.spans.iter().any(|s| s.name == "worker_burn"));
}

#[test]
fn the_emitters_cpu_readings_on_begin_and_end_give_the_exact_cpu_time() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(exe) = demo(tmp.path(), true) else {
        return;
    };
    let exp = experiment(
        tmp.path(),
        &[exe.to_str().unwrap(), "spans", "40"],
        "reps = 2",
        "counters = false",
    );
    let d = RunData::load(&tmp.path().join(run_ok(tmp.path(), &exp, &[]))).unwrap();
    for r in &d.runs {
        assert_eq!(r.status, RepStatus::Ok, "{}", r.error);
        for name in ["worker_burn", "foreign_phase"] {
            let s = span(&d, r.rep, name);
            let burn = attr_u64(s, "burn_cpu_ns");
            let cpu = s.process_cpu_ns.get().expect("exact process CPU");
            // Exact: the busy thread's own CPU time plus the little the rest did.
            assert!(
                cpu >= burn && cpu < burn + 2_000_000,
                "{name}: process CPU {cpu} vs the busy thread's {burn}"
            );
            assert!(
                !s.attrs.contains("interpolated") && !s.attrs.contains("process_cpu_at_ns"),
                "{}",
                s.attrs
            );
        }
    }
}

#[test]
fn spans_of_a_process_the_program_started_get_no_cpu_time_of_the_wrong_process() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(exe) = demo(tmp.path(), false) else {
        return;
    };
    // `; true` keeps the shell from exec'ing the demo: the spans come from its child.
    let script = format!("{} spans 30; true", exe.display());
    let exp = experiment(tmp.path(), &["sh", "-c", &script], "reps = 1", "");
    let d = RunData::load(&tmp.path().join(run_ok(tmp.path(), &exp, &[]))).unwrap();
    let s = span(&d, 0, "worker_burn");
    assert_eq!(s.process_cpu_ns, None, "{s:?}");
    assert!(s.attrs.contains("not measured"), "{}", s.attrs);
    // The root still has the shell's own CPU time, whatever little it is.
    assert!(span(&d, 0, "program").process_cpu_ns.is_some());
}
