use std::path::Path;

use super::child::{ChildRun, Ending};
use super::rows::{nest, rep_rows, ROOT};
use crate::experiment::spec::Experiment;
use crate::protocol::{LineCounts, ParsedSpan};

fn parse(text: &str) -> Result<Experiment, String> {
    Experiment::parse(text, Path::new("e.toml")).map_err(|e| e.to_string())
}

const HEAD: &str = "name = \"e\"\n[workload]\n";
const TAIL: &str = "[[variant]]\nname = \"a\"\n";

#[test]
fn a_command_workload_parses_and_round_trips() {
    let e = parse(&format!(
        "{HEAD}command = [\"./bench\", \"--n\", \"3\"]\nbuild = [\"make\"]\ndir = \"sub\"\n{TAIL}"
    ))
    .unwrap();
    let x = e.workload.command.clone().unwrap();
    assert_eq!(x.command, ["./bench", "--n", "3"]);
    assert_eq!(x.build.as_deref(), Some(&["make".to_string()][..]));
    let again = parse(&toml::to_string(&e).unwrap()).unwrap();
    assert_eq!(again, e);
    // The prover's workloads still parse, and round-trip, as before.
    let p = parse(&format!(
        "{HEAD}circuit = \"chain\"\nlog2_constraints = 4\n{TAIL}"
    ))
    .unwrap();
    assert!(p.workload.command.is_none());
    assert_eq!(p.workload.batch, 1);
    assert_eq!(parse(&toml::to_string(&p).unwrap()).unwrap(), p);
}

#[test]
fn mixed_or_incomplete_workloads_say_what_to_write() {
    let e = parse(&format!(
        "{HEAD}command = [\"x\"]\ncircuit = \"porep\"\n{TAIL}"
    ))
    .unwrap_err();
    assert!(e.contains("belong to the built-in prover"), "{e}");
    let e = parse(&format!("{HEAD}command = []\n{TAIL}")).unwrap_err();
    assert!(e.contains("must name a program"), "{e}");
    let e = parse(&format!("{HEAD}build = [\"make\"]\n{TAIL}")).unwrap_err();
    assert!(e.contains("go with command"), "{e}");
    let e = parse(&format!("{HEAD}log2_constraints = 10\n{TAIL}")).unwrap_err();
    assert!(e.contains("workload.circuit is missing"), "{e}");
    let e = parse(&format!("{HEAD}command = [\"x\"]\ncomand = 1\n{TAIL}")).unwrap_err();
    assert!(e.contains("comand"), "{e}");
}

#[test]
fn prover_knobs_and_emulated_counters_are_refused_for_a_command_but_profile_is_not() {
    let e = parse(&format!(
        "{HEAD}command = [\"x\"]\n[[variant]]\nname = \"a\"\ndrop = \"async\"\n"
    ))
    .unwrap_err();
    assert!(e.contains("drop is a knob of the built-in prover"), "{e}");
    let e = parse(&format!(
        "{HEAD}command = [\"x\"]\n[[variant]]\nname = \"a\"\ncounters = \"emulated\"\n"
    ))
    .unwrap_err();
    assert!(e.contains("not available for a command"), "{e}");
    // Sampled stacks of the program: on, at a rate, for one variant.
    let p = parse(&format!(
        "{HEAD}command = [\"x\"]\n[[variant]]\nname = \"a\"\nprofile = true\nprofile_hz = 250\n\
         [[variant]]\nname = \"b\"\n"
    ))
    .unwrap();
    let v = p.resolved_variants();
    assert_eq!((v[0].profile, v[1].profile), (Some(250), None));
    let ok = parse(&format!(
        "{HEAD}command = [\"x\"]\n[[variant]]\nname = \"a\"\ncounters = false\ntelemetry = \"nvml\"\n"
    ));
    assert!(ok.is_ok(), "{ok:?}");
}

#[test]
fn the_folder_is_the_variants_then_the_workloads_then_the_working_directory() {
    let e = parse(&format!("{HEAD}command = [\"x\"]\ndir = \"sub\"\n{TAIL}")).unwrap();
    let x = e.workload.command.unwrap();
    let cwd = std::env::current_dir().unwrap();
    assert_eq!(x.folder(None), cwd.join("sub"));
    assert_eq!(x.folder(Some(Path::new("/tmp/wt"))), Path::new("/tmp/wt"));
    let no_dir = super::CommandWorkload { dir: None, ..x };
    assert_eq!(no_dir.folder(None), cwd);
}

fn span(name: &str, tid: u64, start: u64, end: u64, seq: u64) -> ParsedSpan {
    ParsedSpan {
        name: name.into(),
        tid,
        start_ns: start,
        end_ns: end,
        attrs: Vec::new(),
        seq,
        unmatched: false,
        via: None,
    }
}

#[test]
fn spans_nest_by_time_on_their_own_thread_whatever_their_order() {
    // Children reported before their parent (complete spans are written at their end).
    let s = vec![
        span("leaf", 1, 12, 14, 1),
        span("mid", 1, 11, 15, 2),
        span("outer", 1, 10, 20, 3),
        span("other_thread", 2, 11, 13, 4),
        span("sibling", 1, 16, 18, 5),
        // Same interval as outer, opened after it: its child.
        span("twin", 1, 10, 20, 6),
    ];
    let (p, refused) = nest(&s);
    assert_eq!(refused, 0);
    assert_eq!(p[2], None);
    assert_eq!(p[5], Some(2));
    assert_eq!(p[1], Some(5));
    assert_eq!(p[0], Some(1));
    assert_eq!(
        p[3], None,
        "another thread's span never nests under this one"
    );
    assert_eq!(p[4], Some(5));
}

/// A span on its own thread with `gs.id` = `id` and, where given, `gs.parent`.
fn with_ids(name: &str, tid: u64, start: u64, id: u64, parent: Option<u64>) -> ParsedSpan {
    use crate::capture::log_spans::{GS_ID, GS_PARENT};
    use crate::trace::AttrValue;
    let mut s = span(name, tid, start, start + 10, start);
    s.attrs.push((GS_ID.into(), AttrValue::U64(id)));
    if let Some(p) = parent {
        s.attrs.push((GS_PARENT.into(), AttrValue::U64(p)));
    }
    s
}

#[test]
fn twice_sent_self_named_and_looping_ids_are_refused_and_counted() {
    let s = vec![
        with_ids("a", 1, 0, 1, None),
        with_ids("b", 2, 1, 2, Some(1)),
        // Self-parent.
        with_ids("self", 3, 2, 3, Some(3)),
        // Id 4 sent twice: neither is a parent by it, the child nests by time.
        with_ids("dup1", 4, 3, 4, None),
        with_ids("dup2", 5, 4, 4, None),
        with_ids("child_of_dup", 6, 5, 6, Some(4)),
        // A loop of two: x names y, y names x.
        with_ids("x", 7, 6, 7, Some(8)),
        with_ids("y", 8, 7, 8, Some(7)),
    ];
    let (p, refused) = nest(&s);
    assert_eq!(p[1], Some(0), "a valid named parent is followed");
    assert_eq!(p[2], None);
    assert_eq!(p[5], None);
    // One link of the loop is put back to its parent by time (none: own thread).
    assert_eq!(
        [p[6], p[7]].iter().filter(|x| x.is_none()).count(),
        1,
        "{p:?}"
    );
    assert!(p[6] == Some(7) || p[7] == Some(6), "{p:?}");
    // Self 1, the duplicate 1, the loop 1.
    assert_eq!(refused, 3);
}

#[test]
fn a_chain_of_100_000_named_parents_nests_in_linear_time() {
    let n = 100_000u64;
    // Each span on its own thread, so only the ids make the chain; sent deepest first.
    let s: Vec<ParsedSpan> = (0..n)
        .rev()
        .map(|i| with_ids("s", i + 1, i, i + 1, (i > 0).then_some(i)))
        .collect();
    let t = std::time::Instant::now();
    let (p, refused) = nest(&s);
    assert_eq!(refused, 0);
    assert_eq!(p[0], Some(1));
    assert_eq!(p[(n - 1) as usize], None);
    // Quadratic would be 10^10 steps; linear is well under a second even unoptimised.
    assert!(
        t.elapsed() < std::time::Duration::from_secs(20),
        "{:?}",
        t.elapsed()
    );
}

fn child_run(spans: Vec<ParsedSpan>) -> ChildRun {
    ChildRun {
        pid: 1,
        start_ns: 1_000,
        end_ns: 2_000,
        ending: Ending::NotStarted("test".into()),
        spans,
        counts: LineCounts::default(),
        samples: Vec::new(),
        counters: None,
        stderr_tail: Vec::new(),
        cpu: Default::default(),
        sampled: None,
        outsiders: Default::default(),
        thread_names: Default::default(),
        gpu: Default::default(),
        span_cap: super::rows::MAX_SPANS_PER_REP,
        spans_over_cap: 0,
        spans_read: 0,
        log: None,
    }
}

#[test]
fn spans_on_another_clock_fall_outside_the_rep_and_are_dropped_with_a_count() {
    // CLOCK_MONOTONIC times inside the rep are kept as they are (the span clock is
    // CLOCK_MONOTONIC); wall-clock times (CLOCK_REALTIME, 1.7e18 ns) are not.
    let mut run = child_run(vec![
        span("mono", 1, 1_100, 1_900, 1),
        span(
            "realtime",
            1,
            1_764_500_000_000_000_000,
            1_764_500_000_000_001_000,
            2,
        ),
        span("before_spawn", 1, 900, 1_500, 3),
    ]);
    let (rows, counts) = rep_rows(&mut run, "prog", ROOT, 0, "a");
    assert_eq!(counts.outside_rep, 2);
    assert_eq!(
        super::rows::counts_of_root(&rows[0].attrs),
        counts,
        "read back"
    );
    assert_eq!(rows.len(), 2);
    assert_eq!(
        (rows[1].name.as_str(), rows[1].start_ns, rows[1].end_ns),
        ("mono", 1_100, 1_900)
    );
    // The root's self time on the main thread excludes the program's span there.
    assert_eq!(rows[0].self_ns, 1_000 - 800);
    assert!(
        rows[0].attrs.contains("\"spans_outside_rep\":2"),
        "{}",
        rows[0].attrs
    );
}

#[test]
fn a_process_cpu_attribute_fills_the_process_cpu_column() {
    let mut s = span("phase", 1, 1_100, 1_900, 1);
    s.attrs
        .push(("process_cpu_ns".into(), crate::trace::AttrValue::U64(1_234)));
    let (rows, _) = rep_rows(&mut child_run(vec![s]), "prog", ROOT, 0, "a");
    assert_eq!(rows[1].process_cpu_ns, Some(1_234));
    assert_eq!(rows[0].process_cpu_ns, None);
}

#[test]
fn a_variant_may_bring_its_own_command_but_only_for_a_command_workload() {
    let e = parse(&format!(
        "{HEAD}command = [\"./bench\"]\n[[variant]]\nname = \"a\"\n\
         [[variant]]\nname = \"b\"\ncommand = [\"./bench\", \"--fast\"]\n"
    ))
    .unwrap();
    let v = e.resolved_variants();
    assert_eq!(v[0].command, None);
    assert_eq!(v[1].command.as_deref().unwrap(), ["./bench", "--fast"]);
    let ext = e.workload.command.as_ref().unwrap();
    let knobs = super::variant_meta(&v[1], ext, "hardware".into()).knobs;
    assert_eq!(knobs["command"], "./bench --fast");
    let knobs = super::variant_meta(&v[0], ext, "hardware".into()).knobs;
    assert_eq!(knobs["command"], "./bench");
    let err = parse(&format!(
        "{HEAD}circuit = \"chain\"\nlog2_constraints = 4\n[[variant]]\nname = \"a\"\ncommand = [\"x\"]\n"
    ))
    .unwrap_err();
    assert!(
        err.contains("command goes with a command workload"),
        "{err}"
    );
    let err = parse(&format!(
        "{HEAD}command = [\"x\"]\n[[variant]]\nname = \"a\"\ncommand = []\n"
    ))
    .unwrap_err();
    assert!(err.contains("must name a program"), "{err}");
}

fn argv(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

#[test]
fn a_program_that_cannot_start_is_a_reason_not_an_error() {
    let run = super::child::run_once(
        &argv(&["/nonexistent/prog"]),
        Path::new("/"),
        None,
        true,
        None,
        &Default::default(),
        super::rows::MAX_SPANS_PER_REP,
    );
    let why = super::rows::failure(&run).unwrap();
    assert!(
        why.contains("cannot start") && why.contains("/nonexistent/prog"),
        "{why}"
    );
}

#[test]
fn the_timeout_kills_the_whole_process_group_and_its_pipes_close() {
    // The shell's children hold stdout and stderr open: only killing the group ends them.
    let started = std::time::Instant::now();
    let run = super::child::run_once(
        &argv(&["sh", "-c", "sleep 30 & sleep 30 & echo waiting >&2; wait"]),
        Path::new("/"),
        Some(std::time::Duration::from_millis(300)),
        false,
        None,
        &Default::default(),
        super::rows::MAX_SPANS_PER_REP,
    );
    assert!(
        matches!(run.ending, Ending::TimedOut(_)),
        "{:?}",
        run.ending
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    assert_eq!(run.stderr_tail, ["waiting"]);
    let why = super::rows::failure(&run).unwrap();
    assert!(
        why.contains("process group was killed") && why.contains("waiting"),
        "{why}"
    );
}

#[test]
fn span_lines_arrive_from_stdout_and_stderr_as_well_as_the_pipe() {
    let script = "echo '@gapscope1 X 1 0 0 never_in_the_rep'; \
        echo '@gapscope1 B 1 5' >&2; \
        echo '@gapscope1 E 1 9 nothing' >&$GAPSCOPE_SPAN_FD";
    // bash: the pipe's descriptor may be 10 or above, which dash cannot redirect to.
    let mut run = super::child::run_once(
        &argv(&["bash", "-c", script]),
        Path::new("/"),
        None,
        false,
        None,
        &Default::default(),
        super::rows::MAX_SPANS_PER_REP,
    );
    // stdout: a span (outside the rep: time 0); stderr: an unparseable line; the pipe: an
    // unmatched end.
    assert_eq!(run.spans.len(), 1);
    assert_eq!(run.counts.unparseable, 1);
    assert_eq!(run.counts.unmatched_ends, 1);
    let (rows, counts) = rep_rows(&mut run, "sh", ROOT, 0, "a");
    assert_eq!((rows.len(), counts.outside_rep), (1, 1));
}

#[test]
fn lines_read_before_a_stream_that_never_ends_are_kept() {
    // The span line arrives, then a process outside the program's group keeps every
    // stream open past the drain: what was read stays. It left for another group of the
    // same session (a job of a shell with job control) with an environment of its own
    // (no group cookie), which neither the group's end, nor the end of marked processes,
    // nor the end of escaped sessions reaches (procs::cookie's limits).
    // The program exits only once that process has left its group (it writes a marker
    // file then), so the group kill at its exit cannot reach it.
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("left");
    let script = format!(
        "echo '@gapscope1 X 1 0 0 kept' >&$GAPSCOPE_SPAN_FD; \
         echo '@gapscope1 X 1 0 0 kept_too'; \
         set -m; env -i bash -c 'touch {m}; exec sleep 10' & \
         while [ ! -e {m} ]; do :; done",
        m = marker.display()
    );
    let run = super::child::run_once(
        &argv(&["bash", "-c", &script]),
        Path::new("/"),
        None,
        false,
        None,
        &Default::default(),
        super::rows::MAX_SPANS_PER_REP,
    );
    let mut names: Vec<&str> = run.spans.iter().map(|s| &*s.name).collect();
    names.sort();
    assert_eq!(
        names,
        ["kept", "kept_too"],
        "{:?} {:?}",
        run.ending,
        run.stderr_tail
    );
    assert!(
        run.stderr_tail
            .last()
            .is_some_and(|l| l.contains("still open") && l.contains("are kept")),
        "{:?}",
        run.stderr_tail
    );
}

#[test]
fn a_spans_cpu_time_is_its_own_report_else_its_begin_and_end_readings_else_interpolated() {
    let with = |name: &str, seq: u64, attrs: &[(&str, u64)]| {
        let mut s = span(name, 1, 1_200, 1_600, seq);
        s.attrs = attrs
            .iter()
            .map(|&(k, v)| (k.to_string(), crate::trace::AttrValue::U64(v)))
            .collect();
        s
    };
    let at = crate::emit::CPU_AT;
    let mut run = child_run(vec![
        with("reported", 1, &[(at, 10), ("process_cpu_ns", 7), (at, 90)]),
        with("readings", 2, &[(at, 10), (at, 90)]),
        with("one_reading", 3, &[(at, 10)]),
        with("nothing", 4, &[]),
    ]);
    run.cpu = super::cpu::CpuSeries {
        points: vec![(1_000, 0), (1_500, 1_000), (2_000, 1_000)],
    };
    let sent = run.spans.clone();
    let (rows, _) = rep_rows(&mut run, "p", ROOT, 0, "v");
    let get = |n: &str| rows.iter().find(|r| r.name == n).unwrap().clone();
    assert_eq!(get("reported").process_cpu_ns, Some(7));
    assert_eq!(get("readings").process_cpu_ns, Some(80));
    assert!(
        !get("readings").attrs.contains(at),
        "{}",
        get("readings").attrs
    );
    assert!(!get("readings").attrs.contains("interpolated"));
    // 400 ns of CPU by 1200, 1000 by 1600 (on the line from 1000 to 1500).
    assert_eq!(get("one_reading").process_cpu_ns, Some(600));
    assert_eq!(get("nothing").process_cpu_ns, Some(600));
    assert!(get("nothing").attrs.contains("interpolated"));
    // The root: its ends are readings.
    assert_eq!(get(ROOT).process_cpu_ns, Some(1_000));
    // A thread that is not the program's: its own readings still count, the program's
    // clock does not.
    run.outsiders.insert(1);
    run.spans = sent.clone();
    let (rows, _) = rep_rows(&mut run, "p", ROOT, 0, "v");
    let get = |n: &str| rows.iter().find(|r| r.name == n).unwrap().clone();
    assert_eq!(get("readings").process_cpu_ns, Some(80));
    assert_eq!(get("nothing").process_cpu_ns, None);
    assert!(get("nothing").attrs.contains("not measured"));
    run.outsiders.clear();
    // A program whose clock was never read gets no CPU time rather than a made-up one.
    run.cpu = Default::default();
    run.spans = sent.clone();
    let (rows, _) = rep_rows(&mut run, "p", ROOT, 0, "v");
    assert!(rows
        .iter()
        .filter(|r| r.name != "reported" && r.name != "readings")
        .all(|r| r.process_cpu_ns.is_none()));
}

#[test]
fn a_failed_builds_log_is_read_as_a_run_folders_files_are_and_only_its_tail() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let meta = |log: &Path| crate::store::BuildMeta {
        ok: false,
        wall_ns: 0,
        log: log.display().to_string(),
        status: "exit status: 1".into(),
        reused: false,
    };
    // A long log: its last lines, controls shown, never the whole file.
    let log = t.join("build.log");
    let mut text = "early line\n".repeat(20_000);
    text.push_str("error[E0308]: \x1b[31mmismatched types\x1b[0m\n");
    std::fs::write(&log, &text).unwrap();
    let why = super::build_failure(&meta(&log));
    assert!(
        why.contains("mismatched types") && !why.contains('\x1b'),
        "{why}"
    );
    // A log that is a link to a secret, or a FIFO: named, not read, not waited on.
    let secret = t.join("secret");
    std::fs::write(&secret, "password=hunter2\n").unwrap();
    let link = t.join("link.log");
    std::os::unix::fs::symlink(&secret, &link).unwrap();
    let why = super::build_failure(&meta(&link));
    assert!(
        why.contains("symbolic link") && !why.contains("hunter2"),
        "{why}"
    );
    let fifo = t.join("fifo.log");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let why = super::build_failure(&meta(&fifo));
    assert!(
        why.contains("not a regular file") || why.contains("FIFO"),
        "{why}"
    );
}
