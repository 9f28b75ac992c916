//! `[workload.log_spans]` end to end: a program that prints the motivating case's own
//! timing lines ("GPU prove time: …s" from the kernels, "GPU prove complete gpu_ms=…"
//! from the wrapper once the call returned) gets those phases as spans, and the
//! wrapper's unattributed time is the time its kernels did not cover.

use std::path::{Path, PathBuf};

use gapscope::store::{RepStatus, RunData, SpanRow};

use crate::common;
use common::{gapscope, run_dir_of};

/// Spins (real work) through an entry phase, the kernels and a drop, timing each like
/// the prover's own logging does, and prints the two lines at the ends of its phases.
const FIXTURE: &str = r#"
now() { local t=${EPOCHREALTIME/./}; echo $((10#$t)); }
spin() { local end=$(( $(now) + $1 )); while (( $(now) < end )); do :; done; }
echo "loading params"
t0=$(now)
spin 20000
k0=$(now)
spin 80000
k=$(( $(now) - k0 ))
printf 'GPU prove time: %d.%06ds\n' $((k / 1000000)) $((k % 1000000)) >&2
spin 40000
w=$(( $(now) - t0 ))
echo "GPU prove complete gpu_ms=$(( w / 1000 ))" >&2
"#;

fn experiment(dir: &Path, body: &str) -> PathBuf {
    let script = dir.join("prover.sh");
    std::fs::write(&script, FIXTURE).unwrap();
    let p = dir.join("logs.toml");
    std::fs::write(
        &p,
        format!(
            "name = \"logs\"\n[workload]\ncommand = [\"bash\", \"{}\"]\n{body}\n\
             [run]\nreps = 2\nwarmups = 0\n[[variant]]\nname = \"a\"\n",
            script.display()
        ),
    )
    .unwrap();
    p
}

const RULES: &str = r#"
[workload.log_spans]
gpu_prove = { duration = 'GPU prove complete gpu_ms=(?P<ms>\d+)' }
kernels = { duration = 'GPU prove time: (?P<s>[0-9.]+)s', parent = "gpu_prove" }
"#;

#[test]
fn the_gap_between_the_two_lines_is_the_wrappers_unattributed_time() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = experiment(tmp.path(), RULES);
    let out = gapscope(tmp.path())
        .arg("run")
        .arg(&exp)
        .arg("--results-dir")
        .arg(tmp.path().join("results"))
        .assert()
        .success();
    let d = RunData::load(&run_dir_of(&out.get_output().stdout)).unwrap();
    for r in &d.runs {
        assert_eq!(r.status, RepStatus::Ok, "{}", r.error);
        let mine: Vec<&SpanRow> = d.spans.iter().filter(|s| s.rep == r.rep).collect();
        let one = |n: &str| -> &SpanRow {
            let v: Vec<_> = mine.iter().filter(|s| s.name == n).collect();
            assert_eq!(v.len(), 1, "one {n}: {mine:?}");
            v[0]
        };
        let (w, k) = (one("gpu_prove"), one("kernels"));
        assert_eq!(k.parent_id, Some(w.span_id));
        assert_eq!(w.duration_ns % 1_000_000, 0, "gpu_ms is whole ms");
        assert!(k.duration_ns >= 80_000_000, "{k:?}");
        assert!(w.duration_ns >= 140_000_000, "{w:?}");
        // The kernels lie inside the wrapper, on its thread: its self time is the rest.
        assert_eq!(w.self_ns, w.duration_ns - k.duration_ns);
        assert!(w.self_ns >= 55_000_000, "entry 20 ms + drop 40 ms: {w:?}");
        let root = mine.iter().find(|s| s.parent_id.is_none()).unwrap();
        assert_eq!(w.parent_id, Some(root.span_id));
        assert!(
            root.attrs.contains("\"unparseable_lines\":0"),
            "{}",
            root.attrs
        );
    }
}

#[test]
fn a_bad_pattern_is_refused_before_any_rep_with_the_entry_named() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = experiment(
        tmp.path(),
        "[workload.log_spans]\nkernels = { duration = 'took (?P<ms>[0-9+ ms' }\n",
    );
    let err = common::run_refused(tmp.path(), &exp);
    assert!(
        err.contains("workload.log_spans.kernels.duration: regex parse error"),
        "{err}"
    );
}

#[test]
fn lines_that_match_badly_are_counted_and_the_rep_still_counts() {
    let tmp = tempfile::tempdir().unwrap();
    // The wrapper's line is read with a group that cannot be a duration; the kernels'
    // line still makes its span.
    let exp = experiment(
        tmp.path(),
        "[workload.log_spans]\ngpu_prove = { duration = 'GPU prove (?P<ms>complete)' }\n\
         kernels = { duration = 'GPU prove time: (?P<s>[0-9.]+)s' }\n",
    );
    let out = gapscope(tmp.path())
        .arg("run")
        .arg(&exp)
        .arg("--results-dir")
        .arg(tmp.path().join("results"))
        .assert()
        .success();
    let d = RunData::load(&run_dir_of(&out.get_output().stdout)).unwrap();
    assert!(d.runs.iter().all(|r| r.status == RepStatus::Ok));
    for root in d.spans.iter().filter(|s| s.parent_id.is_none()) {
        assert!(
            root.attrs.contains("\"unparseable_lines\":1"),
            "{}",
            root.attrs
        );
    }
}

/// Lines that match and not one span of them: the run has none of what was asked for,
/// so it fails as a run with no successful rep does, and says why.
#[test]
fn a_run_whose_every_matching_line_was_dropped_fails_saying_why() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = experiment(
        tmp.path(),
        "[workload.log_spans]\ngpu_prove = { duration = 'GPU prove (?P<ms>complete)' }\n",
    );
    let out = gapscope(tmp.path())
        .arg("run")
        .arg(&exp)
        .arg("--results-dir")
        .arg(tmp.path().join("results"))
        .assert()
        .code(5);
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(err.contains("no successful rep of a"), "{err}");
    assert!(
        err.contains("every one of the 1 line(s) that matched workload.log_spans was dropped"),
        "{err}"
    );
    assert!(err.contains("is not a number"), "{err}");
    let d = RunData::load(&run_dir_of(&out.get_output().stdout)).unwrap();
    assert!(d.runs.iter().all(|r| r.status == RepStatus::Failed));
}

/// The incident's four lines at their own pace scaled ×0.01 (the run's start, the
/// kernels' line from the C++ side on stderr 257.8 ms in, the wrapper's on stdout 101.8
/// ms later, the end 0.1 ms after that and the exit), each line written at its time
/// from the script's start; the durations they print are the incident's ×0.01, whole ms
/// for `gpu_ms` as the program prints it. Once the lines are out, the replayer appends
/// to `$1` how late (µs) its latest line was written.
const REPLAY: &str = r#"
t0=${EPOCHREALTIME/./}
worst=0
at() { local until=$((t0 + $1)); while (( ${EPOCHREALTIME/./} < until )); do :; done; }
was() { local l=$(( ${EPOCHREALTIME/./} - t0 - $1 )); (( l > worst )) && worst=$l; }
echo "seal_commit_phase2: start"
at 257800; echo "GPU prove time: 0.257862892s" >&2; was 257800
at 359600; echo "GPU prove complete gpu_ms=360"; was 359600
at 359700; echo "seal_commit_phase2: done"; was 359700
echo "$worst" >> "$1"
"#;

/// How late (µs) a replayed line may be written and still be the incident's log: the
/// wrapper's start is known to 1 ms (whole `gpu_ms`) and lies 0.34 ms before the
/// kernels' start, so a line written 1.3 ms late makes a log in which the kernels
/// start before the wrapper.
const ON_TIME_US: u64 = 300;

#[test]
fn the_incidents_four_lines_give_the_wrapper_its_kernels_and_its_gap_in_every_rep() {
    let tmp = tempfile::tempdir().unwrap();
    let script = tmp.path().join("replay.sh");
    let lateness = tmp.path().join("late.txt");
    std::fs::write(&script, REPLAY).unwrap();
    // The lines' times are the replayer's to keep: a line it writes late is a different
    // log (its printed numbers no longer agree with when it was written). Where a
    // real-time priority is allowed, the replayer runs at one, so that a host busy with
    // other work does not make it late; it says how late it was all the same.
    let realtime = std::process::Command::new("chrt")
        .args(["-f", "1", "true"])
        .output()
        .is_ok_and(|o| o.status.success());
    let runner = if realtime {
        "\"chrt\", \"-f\", \"1\", "
    } else {
        ""
    };
    let exp = tmp.path().join("replay.toml");
    std::fs::write(
        &exp,
        format!(
            "name = \"replay\"\n[workload]\ncommand = [{runner}\"bash\", \"{}\", \"{}\"]\n\
             {RULES}\n[run]\nreps = 4\nwarmups = 0\n[[variant]]\nname = \"a\"\n",
            script.display(),
            lateness.display()
        ),
    )
    .unwrap();
    let d = RunData::load(&common::run_ok(tmp.path(), &exp, &[])).unwrap();
    assert_eq!(d.runs.len(), 4);
    // The replayer's lateness of each rep, in the order the reps ran.
    let late: Vec<u64> = std::fs::read_to_string(&lateness)
        .unwrap()
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    assert_eq!(late.len(), 4, "{late:?}");
    let mut runs: Vec<_> = d.runs.iter().collect();
    runs.sort_by_key(|r| r.rep);
    let mut strict = 0;
    for (r, &late_us) in runs.into_iter().zip(&late) {
        assert_eq!(r.status, RepStatus::Ok, "{}", r.error);
        let mine: Vec<&SpanRow> = d.spans.iter().filter(|s| s.rep == r.rep).collect();
        let one = |n: &str| -> &SpanRow {
            let v: Vec<_> = mine.iter().filter(|s| s.name == n).collect();
            assert_eq!(v.len(), 1, "rep {}: one {n}: {mine:?}", r.rep);
            v[0]
        };
        let (w, k) = (one("gpu_prove"), one("kernels"));
        assert_eq!(k.duration_ns, 257_862_892);
        let root = mine.iter().find(|s| s.parent_id.is_none()).unwrap();
        assert_eq!(w.parent_id, Some(root.span_id));
        let held = k.parent_id == Some(w.span_id);
        let kernels_in_w = if held { k.duration_ns } else { 0 };
        assert_eq!(
            w.self_ns,
            w.duration_ns - kernels_in_w,
            "rep {}: {mine:?}",
            r.rep
        );
        // The rep says how its lines were timed.
        assert!(
            root.attrs
                .contains("\"log_lines\":\"timed by reader threads at "),
            "{}",
            root.attrs
        );
        assert!(
            root.attrs.contains("\"spans_outside_rep\":0"),
            "{}",
            root.attrs
        );
        // A log written late, or read by readers the host may run late, is not the
        // incident's: the kernels may then start before the wrapper, and the rep must
        // say so rather than nest them silently.
        let read_on_time = root.attrs.contains("at a real-time priority");
        if late_us > ON_TIME_US || !read_on_time {
            if !held {
                assert!(
                    root.attrs.contains("\"unparseable_lines\":1"),
                    "{}",
                    root.attrs
                );
            }
            continue;
        }
        strict += 1;
        assert!(held, "rep {}: {mine:?}", r.rep);
        // 35.96 s ×0.01 as printed (360 ms), widened by at most the 1 ms it is known to.
        assert!(
            (360_000_000..=361_000_000).contains(&w.duration_ns),
            "rep {}: {w:?}",
            r.rep
        );
        // The 10.2 s ×0.01 the kernels leave is the wrapper's own time.
        assert!(
            (101_500_000..=103_200_000).contains(&w.self_ns),
            "rep {}: {w:?}",
            r.rep
        );
        assert!(
            root.attrs.contains("\"unparseable_lines\":0"),
            "{}",
            root.attrs
        );
    }
    eprintln!("{strict} of 4 reps on time (replayer lateness µs {late:?})");
}

/// A phase timed by the program's own log times, in the incident's format (local time,
/// no zone): read once with the default formats (the whole date and time) and once with
/// a `ts_format` of the time of day only, whose date is the rep's.
const LOCAL_TIMES: &str = r#"
stamp() { local t=$EPOCHREALTIME; printf -v ts '%(%Y-%m-%d %H:%M:%S)T.%s' "${t%.*}" "${t#*.}"; }
spin() { local end=$(( ${EPOCHREALTIME/./} + $1 )); while (( ${EPOCHREALTIME/./} < end )); do :; done; }
spin 5000
stamp; echo "$ts INFO begin prep"
spin 50000
stamp; echo "$ts INFO end prep" >&2
spin 5000
"#;

#[test]
fn log_times_in_local_time_without_a_zone_give_the_phase() {
    let tmp = tempfile::tempdir().unwrap();
    let script = tmp.path().join("local.sh");
    std::fs::write(&script, LOCAL_TIMES).unwrap();
    let exp = tmp.path().join("local.toml");
    std::fs::write(
        &exp,
        format!(
            "name = \"local\"\n[workload]\ncommand = [\"bash\", \"{}\"]\n\
             [workload.log_spans]\n\
             prep = {{ begin = '^(?P<ts>\\S+ \\S+) INFO begin prep', \
             end = '^(?P<ts>\\S+ \\S+) INFO end prep' }}\n\
             step = {{ begin = ' (?P<ts>[0-9:.]+) INFO begin', end = ' (?P<ts>[0-9:.]+) INFO \
             end', ts_format = '%H:%M:%S%.f', tz = 'local' }}\n\
             [run]\nreps = 2\nwarmups = 0\n[[variant]]\nname = \"a\"\n",
            script.display()
        ),
    )
    .unwrap();
    // A zone half an hour off whole hours, where the zoneinfo is there to set one.
    let zone = std::path::Path::new("/usr/share/zoneinfo/Asia/Kolkata").exists();
    let mut cmd = gapscope(tmp.path());
    if zone {
        cmd.env("TZ", "Asia/Kolkata");
    }
    let out = cmd
        .arg("run")
        .arg(&exp)
        .arg("--results-dir")
        .arg(tmp.path().join("results"))
        .assert()
        .success();
    let d = RunData::load(&run_dir_of(&out.get_output().stdout)).unwrap();
    for r in &d.runs {
        assert_eq!(r.status, RepStatus::Ok, "{}", r.error);
        let get = |n: &str| {
            d.spans
                .iter()
                .find(|s| s.rep == r.rep && s.name == n)
                .unwrap_or_else(|| panic!("rep {}: no {n}", r.rep))
        };
        let (prep, step) = (get("prep"), get("step"));
        // At least the 50 ms spun between the lines (more when the host preempts it),
        // with the µs the lines print: a time read in the wrong zone would lie hours
        // outside the rep and be dropped.
        assert!(prep.duration_ns >= 50_000_000, "{prep:?}");
        assert_eq!(prep.duration_ns % 1_000, 0, "{prep:?}");
        assert!(prep.end_ns <= r.start_ns + r.wall_ns, "{prep:?} {r:?}");
        assert_eq!((prep.start_ns, prep.end_ns), (step.start_ns, step.end_ns));
        // The spin before the begin line: it lies inside the rep, after its start.
        assert!(prep.start_ns >= r.start_ns + 4_000_000, "{prep:?} {r:?}");
    }
}

/// A log span outside the rep was timed by gapscope (or by its `ts`), not on the
/// program's clock: what the run says names the line's unit, not CLOCK_MONOTONIC.
#[test]
fn a_log_span_outside_the_rep_is_named_with_what_to_check_in_the_line() {
    let tmp = tempfile::tempdir().unwrap();
    // The wrapper's whole ms read as seconds: 140 s and more, in a rep of 0.2 s.
    let exp = experiment(
        tmp.path(),
        "[workload.log_spans]\ngpu_prove = { duration = 'gpu_ms=(?P<s>\\d+)' }\n",
    );
    let out = gapscope(tmp.path())
        .arg("run")
        .arg(&exp)
        .arg("--results-dir")
        .arg(tmp.path().join("results"))
        .assert()
        .code(5);
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(err.contains("log span \"gpu_prove\""), "{err}");
    assert!(err.contains("check the unit group's name"), "{err}");
    assert!(!err.contains("CLOCK_MONOTONIC"), "{err}");
    let d = RunData::load(&run_dir_of(&out.get_output().stdout)).unwrap();
    for root in d.spans.iter().filter(|s| s.parent_id.is_none()) {
        assert!(
            root.attrs.contains("\"spans_outside_rep\":1"),
            "{}",
            root.attrs
        );
    }
}
