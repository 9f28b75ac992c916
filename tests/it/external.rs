//! End-to-end tests of external subjects: `gapscope run` of experiments whose workload is
//! `command = […]`, over the C test program of cuda/gapscope_emit.h (build.rs compiles
//! it): spans read back through the span pipe, a crash, a hang cut by the timeout, a
//! non-zero exit, malformed lines, and a failed build.

use std::path::{Path, PathBuf};

use gapscope::store::{RepStatus, RunData, SpanRow};

use crate::common;
use common::{gapscope, run_dir_of, run_ok};

const DEMO: &str = env!("GAPSCOPE_EMIT_DEMO");
const SCOPE_DEMO: &str = env!("GAPSCOPE_EMIT_SCOPE_DEMO");

fn experiment(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(format!("{name}.toml"));
    std::fs::write(&p, format!("name = \"{name}\"\n{body}")).unwrap();
    p
}

fn root(d: &RunData, rep: u32) -> &SpanRow {
    d.spans
        .iter()
        .find(|s| s.rep == rep && s.parent_id.is_none())
        .expect("every rep has a root span")
}

fn parent<'a>(d: &'a RunData, s: &SpanRow) -> &'a SpanRow {
    d.spans
        .iter()
        .find(|x| x.rep == s.rep && Some(x.span_id) == s.parent_id)
        .expect("parent present")
}

#[test]
fn spans_of_a_c_program_nest_per_thread_inside_the_rep() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = experiment(
        tmp.path(),
        "demo",
        &format!(
            "[workload]\ncommand = [\"{DEMO}\", \"work\", \"3\", \"5\"]\n\
             [run]\nreps = 2\nwarmups = 1\n[[variant]]\nname = \"a\"\n"
        ),
    );
    let out = gapscope(tmp.path())
        .arg("run")
        .arg(&exp)
        .arg("--results-dir")
        .arg(tmp.path().join("results"))
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let d = RunData::load(&run_dir_of(&out.get_output().stdout)).unwrap();
    assert!(stdout.contains("total (program)"), "{stdout}");
    assert_eq!(d.runs.len(), 3);
    for r in &d.runs {
        assert_eq!(r.status, RepStatus::Ok, "{}", r.error);
        let rt = root(&d, r.rep);
        assert_eq!(rt.name, "program");
        assert_eq!(
            rt.thread_id, r.pid as u64,
            "root on the program's main thread"
        );
        let mine: Vec<&SpanRow> = d.spans.iter().filter(|s| s.rep == r.rep).collect();
        let names = |n: &str| mine.iter().filter(|s| s.name == n).count();
        assert_eq!((names("run"), names("step"), names("inner")), (1, 3, 3));
        assert_eq!(names("background"), 1);
        // Every span lies inside the rep's root: one clock.
        for s in &mine {
            assert!(s.start_ns >= rt.start_ns && s.end_ns <= rt.end_ns, "{s:?}");
        }
        for s in mine.iter().filter(|s| s.name == "step") {
            assert_eq!(parent(&d, s).name, "run");
            assert_eq!(s.thread_id, r.pid as u64);
        }
        for s in mine.iter().filter(|s| s.name == "inner") {
            assert_eq!(parent(&d, s).name, "step");
            assert!(s.duration_ns >= 5_000_000, "spins 5 ms: {s:?}");
        }
        let bg = mine.iter().find(|s| s.name == "background").unwrap();
        assert_ne!(bg.thread_id, r.pid as u64, "the worker thread's own tid");
        assert_eq!(
            parent(&d, bg).name,
            "program",
            "a thread's top span hangs off the root"
        );
        assert!(bg.attrs.contains("\"role\":\"helper\""), "{}", bg.attrs);
        let run = mine.iter().find(|s| s.name == "run").unwrap();
        assert!(run.attrs.contains("\"steps\":3"), "{}", run.attrs);
        assert!(run.attrs.contains("\"ratio\":0.25"), "{}", run.attrs);
        // The step's self time excludes its inner span.
        for s in mine.iter().filter(|s| s.name == "step") {
            assert!(s.self_ns < s.duration_ns, "{s:?}");
        }
        assert!(rt.attrs.contains("\"unparseable_lines\":0"), "{}", rt.attrs);
    }
    let ext = d
        .meta
        .command_workload
        .as_ref()
        .expect("meta.json says external");
    let a = &ext.variants["a"];
    assert_eq!(a.reps, 3);
    assert_eq!(a.lines.unparseable, 0);
    assert!(a.lines.protocol_lines >= 3 * 9, "{:?}", a.lines);
    // Counters of the whole program: where the kernel allows software events, the
    // root carries its task-clock, all threads included: at least the CPU time the
    // program itself measured over `run` (both threads' spinning), at most its wall time
    // on every core.
    if d.meta.counters["task_clock_ns"].available {
        let cores = std::thread::available_parallelism().unwrap().get() as u64;
        for r in &d.runs {
            let rt = root(&d, r.rep);
            let tc = rt.task_clock_ns.get().expect("task clock of the program");
            let run = d
                .spans
                .iter()
                .find(|s| s.rep == r.rep && s.name == "run")
                .unwrap();
            let cpu = run.process_cpu_ns.get().expect("reported by the program");
            // Where kernel time is not counted (perf_event_paranoid > 1 without
            // privileges), task-clock is user time only: allow for the page faults'.
            let kernel_counted = unsafe { libc::geteuid() } == 0
                || std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
                    .is_ok_and(|p| p.trim().parse::<i32>().is_ok_and(|p| p <= 1));
            let floor = if kernel_counted { cpu } else { cpu / 2 };
            assert!(
                cpu > 0 && tc >= floor,
                "task clock {tc} ns < process CPU {cpu} ns"
            );
            assert!(
                tc <= rt.duration_ns * cores,
                "{tc} ns in {} ns",
                rt.duration_ns
            );
            assert!(rt.page_faults.unwrap_or(0) > 0, "{rt:?}");
        }
    }
}

#[test]
fn crash_hang_and_exit_codes_fail_their_reps_and_the_run_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    // A shell script picks the mode from a file each rep: work, crash, hang, fail.
    let script = tmp.path().join("subject.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nn=$(cat count 2>/dev/null || echo 0)\necho $((n+1)) > count\n\
             case $n in\n0) exec {DEMO} work 1 1;;\n1) exec {DEMO} crash;;\n\
             2) exec {DEMO} hang;;\n3) exec {DEMO} fail 7;;\n*) exec {DEMO} junk;;\nesac\n"
        ),
    )
    .unwrap();
    let exp = experiment(
        tmp.path(),
        "faults",
        &format!(
            "[workload]\ncommand = [\"sh\", \"{}\"]\ndir = \"{}\"\n\
             [run]\nreps = 5\nwarmups = 0\nrep_timeout_s = 2\n[[variant]]\nname = \"a\"\n",
            script.display(),
            tmp.path().display()
        ),
    );
    let started = std::time::Instant::now();
    let out = gapscope(tmp.path())
        .arg("run")
        .arg(&exp)
        .arg("--results-dir")
        .arg(tmp.path().join("results"))
        .assert()
        .success();
    assert!(started.elapsed().as_secs() < 60, "the hang was cut");
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let d = RunData::load(&run_dir_of(&out.get_output().stdout)).unwrap();
    let r: Vec<_> = d.runs.iter().collect();
    assert_eq!(r.len(), 5);
    assert_eq!(r[0].status, RepStatus::Ok, "{}", r[0].error);
    assert_eq!(r[1].status, RepStatus::Failed);
    assert!(r[1].error.contains("signal: 11"), "{}", r[1].error);
    assert!(r[1].error.contains("about to crash"), "{}", r[1].error);
    assert_eq!(r[2].status, RepStatus::Failed);
    assert!(
        r[2].error.contains("did not finish in 2 s"),
        "{}",
        r[2].error
    );
    assert!(r[2].error.contains("hanging"), "{}", r[2].error);
    assert_eq!(r[3].status, RepStatus::Failed);
    assert!(r[3].error.contains("exit status: 7"), "{}", r[3].error);
    assert!(r[3].error.contains("input file missing"), "{}", r[3].error);
    // The crash's open span is closed at the rep's end and counted.
    let doomed = d
        .spans
        .iter()
        .find(|s| s.rep == r[1].rep && s.name == "doomed")
        .expect("spans of a crashed rep are kept");
    assert!(doomed.attrs.contains("unmatched_begin"), "{}", doomed.attrs);
    // Junk: counted, never fatal; the good span is kept.
    assert_eq!(r[4].status, RepStatus::Ok, "{}", r[4].error);
    assert!(d.spans.iter().any(|s| s.rep == r[4].rep && s.name == "ok"));
    let lines = d.meta.command_workload.as_ref().unwrap().variants["a"].lines;
    assert_eq!(lines.unparseable, 2, "{lines:?}");
    assert_eq!(lines.unmatched_ends, 1, "{lines:?}");
    // left_open (junk), doomed (crash), forever (hang).
    assert_eq!(lines.unmatched_begins, 3, "{lines:?}");
    assert!(
        stdout.contains("unparseable"),
        "the summary says so: {stdout}"
    );
    assert!(
        stdout.contains("a, first unparseable line: rep 4: thread id"),
        "{stdout}"
    );
}

#[test]
fn a_failed_build_fails_the_reps_with_its_log_and_a_build_runs_in_the_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let sub = tmp.path().join("subject");
    std::fs::create_dir(&sub).unwrap();
    let exp = experiment(
        tmp.path(),
        "build",
        &format!(
            "[workload]\ndir = \"subject\"\nbuild = [\"sh\", \"-c\", \"cp {DEMO} ./prog && echo built\"]\n\
             command = [\"./prog\", \"work\", \"1\", \"1\"]\n[run]\nreps = 1\nwarmups = 0\n\
             [[variant]]\nname = \"a\"\n"
        ),
    );
    let d = RunData::load(&run_ok(tmp.path(), &exp, &[])).unwrap();
    assert_eq!(d.runs[0].status, RepStatus::Ok, "{}", d.runs[0].error);
    let b = d.meta.command_workload.as_ref().unwrap().variants["a"]
        .build
        .clone()
        .unwrap();
    assert!(b.ok);
    // meta.json names the log relative to the run folder.
    assert_eq!(b.log, "build-a.log");
    let log = d.meta.run_file_path(&d.dir, &b.log);
    assert!(std::fs::read_to_string(log).unwrap().contains("built"));

    let bad = experiment(
        tmp.path(),
        "badbuild",
        "[workload]\nbuild = [\"sh\", \"-c\", \"echo 'error: no compiler here' >&2; exit 2\"]\n\
         command = [\"true\"]\n[run]\nreps = 2\nwarmups = 0\n[[variant]]\nname = \"a\"\n",
    );
    // Its reps fail without running; no rep of the variant succeeded: exit 5.
    let out = gapscope(tmp.path())
        .arg("run")
        .arg(&bad)
        .arg("--results-dir")
        .arg(tmp.path().join("results"))
        .assert()
        .code(gapscope::cli::EXIT_NO_OK_REP);
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(err.contains("no successful rep of a"), "{err}");
    let d = RunData::load(&run_dir_of(&out.get_output().stdout)).unwrap();
    assert_eq!(d.runs.len(), 2);
    for r in &d.runs {
        assert_eq!(r.status, RepStatus::Failed);
        assert!(
            r.error.contains("build failed (exit status: 2)"),
            "{}",
            r.error
        );
        assert!(r.error.contains("no compiler here"), "{}", r.error);
    }
}

#[test]
fn the_cpp_scope_class_nests_and_carries_attributes() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = experiment(
        tmp.path(),
        "scope",
        &format!(
            "[workload]\ncommand = [\"{SCOPE_DEMO}\"]\n[run]\nreps = 1\nwarmups = 0\n\
             [[variant]]\nname = \"a\"\n"
        ),
    );
    let d = RunData::load(&run_ok(tmp.path(), &exp, &[])).unwrap();
    let get = |n: &str| d.spans.iter().find(|s| s.name == n).unwrap();
    assert_eq!(parent(&d, get("inner")).name, "outer");
    assert_eq!(parent(&d, get("outer")).name, "program");
    assert!(get("outer").attrs.contains("\"answer\":42"));
    let inner = &get("inner").attrs;
    for kv in [
        "\"share\":0.5",
        "\"bytes\":8192",
        "\"delta\":-3",
        "\"ok\":1",
    ] {
        assert!(inner.contains(kv), "{kv} in {inner}");
    }
    assert!(get("on_thread").attrs.contains("worker_thread"));
    assert_ne!(get("on_thread").thread_id, get("outer").thread_id);
}

/// Not a test of its own: the program the next test runs (this test binary, re-run
/// with GAPSCOPE_TEST_EMIT_CHILD set), reporting spans with `gapscope::emit`.
#[test]
fn rust_emitter_child() {
    if std::env::var_os("GAPSCOPE_TEST_EMIT_CHILD").is_none() {
        return;
    }
    use gapscope::emit;
    let _outer = emit::Scope::new("rust outer");
    emit::attr("label", "two words");
    let t0 = emit::now_ns();
    std::thread::spawn(|| {
        let _s = emit::Scope::new("on_thread");
        emit::attr("n", 7);
    })
    .join()
    .unwrap();
    emit::complete("measured", t0, emit::now_ns() - t0);
}

#[test]
fn the_rust_and_c_emitters_report_through_the_pipe_or_else_stderr() {
    let tmp = tempfile::tempdir().unwrap();
    let me = std::env::current_exe().unwrap();
    let child = format!(
        "GAPSCOPE_TEST_EMIT_CHILD=1 exec {} --exact external::rust_emitter_child --nocapture --test-threads=1",
        me.display()
    );
    let exp = experiment(
        tmp.path(),
        "emitters",
        &format!(
            "[workload]\ncommand = [\"sh\", \"-c\", \"{child}\"]\n[run]\nreps = 1\nwarmups = 0\n\
             [[variant]]\nname = \"rust_pipe\"\n\
             [[variant]]\nname = \"rust_stderr\"\n\
             command = [\"sh\", \"-c\", \"unset GAPSCOPE_SPAN_FD; {child}\"]\n\
             [[variant]]\nname = \"c_stderr\"\n\
             command = [\"sh\", \"-c\", \"unset GAPSCOPE_SPAN_FD; exec {DEMO} work 2 1\"]\n"
        ),
    );
    let d = RunData::load(&run_ok(tmp.path(), &exp, &[])).unwrap();
    for r in &d.runs {
        assert_eq!(r.status, RepStatus::Ok, "{}: {}", r.variant, r.error);
    }
    for v in ["rust_pipe", "rust_stderr"] {
        let get = |n: &str| {
            d.spans
                .iter()
                .find(|s| s.variant == v && s.name == n)
                .unwrap_or_else(|| panic!("{v}: no span {n}"))
        };
        let outer = get("rust_outer");
        assert!(
            outer.attrs.contains("\"label\":\"two_words\""),
            "{}",
            outer.attrs
        );
        assert_eq!(parent(&d, get("measured")).name, "rust_outer");
        assert_eq!(parent(&d, get("on_thread")).name, "program");
        assert!(get("on_thread").attrs.contains("\"n\":7"));
        // The test harness's own output on stdout is not counted as garbage.
        let lines = d.meta.command_workload.as_ref().unwrap().variants[v].lines;
        assert_eq!(
            lines.unparseable + lines.unmatched_begins + lines.unmatched_ends,
            0
        );
    }
    let steps = d
        .spans
        .iter()
        .filter(|s| s.variant == "c_stderr" && s.name == "step")
        .count();
    assert_eq!(steps, 2);
}

#[test]
fn a_run_killed_mid_rep_resumes_with_its_line_counts() {
    let tmp = tempfile::tempdir().unwrap();
    // The third program kills gapscope itself (SIGKILL: no handler runs), mid-rep.
    let script = tmp.path().join("subject.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nn=$(cat count 2>/dev/null || echo 0)\necho $((n+1)) > count\n\
             if [ $n -eq 2 ]; then kill -9 $PPID; sleep 5; fi\nexec {DEMO} work 1 1\n"
        ),
    )
    .unwrap();
    let exp = experiment(
        tmp.path(),
        "killed",
        &format!(
            "[workload]\ncommand = [\"sh\", \"{}\"]\ndir = \"{}\"\n\
             [run]\nreps = 2\nwarmups = 1\n[[variant]]\nname = \"a\"\n[[variant]]\nname = \"b\"\n",
            script.display(),
            tmp.path().display()
        ),
    );
    gapscope(tmp.path())
        .arg("run")
        .arg(&exp)
        .arg("--results-dir")
        .arg(tmp.path().join("results"))
        .assert()
        .failure();
    let dir = std::fs::read_dir(tmp.path().join("results/killed"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    assert_eq!(
        RunData::load(&dir).unwrap().runs.len(),
        2,
        "two reps before the kill"
    );
    // A kill between meta.json's write and the rep's commit leaves meta.json counting a
    // rep that is run again: the resume recounts from the committed reps.
    let meta_path = dir.join("meta.json");
    let mut meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&meta_path).unwrap()).unwrap();
    meta["external"]["variants"]["a"]["reps"] = 9.into();
    meta["external"]["variants"]["a"]["lines"]["protocol_lines"] = 999.into();
    std::fs::write(&meta_path, meta.to_string()).unwrap();
    let out = gapscope(tmp.path())
        .arg("run")
        .arg("--resume")
        .arg(&dir)
        .assert()
        .success();
    let d = RunData::load(&run_dir_of(&out.get_output().stdout)).unwrap();
    assert_eq!(
        d.runs.len(),
        6,
        "2 warm-ups and 4 measured reps, none added"
    );
    assert!(d.runs.iter().all(|r| r.status == RepStatus::Ok));
    let ext = d.meta.command_workload.as_ref().unwrap();
    for v in ["a", "b"] {
        let m = &ext.variants[v];
        assert_eq!(m.reps, 3, "{v}: counts of the reps before the kill kept");
        // `work 1 1` prints 12 span lines a rep (cuda/emit_demo.c):
        // B run, A steps, B step, X inner, A index, E step, B background, A role,
        // E background, A ratio, A process_cpu_ns, E run.
        assert_eq!(m.lines.protocol_lines, 3 * 12, "{v}: {m:?}");
    }
}
