use super::folded::{line, parse_line, read_rep, write_rep};
use super::sampler::RawSample;
use super::symbolize::Symbolizer;
use super::*;
use crate::trace::{self, Span};
use std::sync::Arc;

extern "C" {
    /// In `cuda/profile_selftest.c`: starts a thread from C that spins for `cpu_ms` of its
    /// own CPU time in `gapscope_profile_spin_leaf`, and joins it.
    fn gapscope_profile_spin_thread(cpu_ms: u32) -> i32;
}

/// Spins on this thread for `ms` of its CPU time.
#[inline(never)]
fn rust_spin(ms: u64) -> u64 {
    let cpu = || {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: valid timespec.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    };
    let (start, mut x) = (cpu(), 1u64);
    while cpu() - start < ms * 1_000_000 {
        for i in 0..10_000u64 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
        }
    }
    x
}

#[test]
fn a_busy_thread_started_from_c_is_attributed_to_the_span_open_on_the_prove_thread() {
    let sampling = RepSampling::begin(1000, Opener::Perf);
    let root = Span::enter("p_prove");
    let trace_id = root.trace();
    {
        let _s = Span::enter("p_rust_busy");
        rust_spin(100);
    }
    {
        let _s = Span::enter("p_c_busy");
        // SAFETY: plain C function, no pointers.
        assert_eq!(unsafe { gapscope_profile_spin_thread(150) }, 0);
    }
    drop(root);
    let spans = trace::drain_trace(trace_id);
    let iv: Vec<SpanInterval> = spans.iter().map(SpanInterval::from).collect();
    let p = sampling.finish(7, "v", &iv, trace_id);
    if let Some(why) = &p.unavailable {
        eprintln!("skipped: this machine does not allow sampling: {why}");
        return;
    }
    let sum = |span: &str, foreign: bool, frame: &str| -> u64 {
        p.rows
            .iter()
            .filter(|r| r.span == span && r.foreign == foreign)
            .filter(|r| r.frames.iter().any(|f| f.contains(frame)))
            .map(|r| r.count)
            .sum()
    };
    let c_frame = "gapscope_profile_spin_leaf";
    // 150 ms of the C thread's CPU time at 1 kHz: about 150 samples.
    let c_in_span = sum("p_c_busy", true, c_frame);
    assert!(c_in_span >= 50, "{c_in_span} C samples in p_c_busy: {p:?}");
    let c_elsewhere: u64 = p
        .rows
        .iter()
        .filter(|r| r.span != "p_c_busy" && r.frames.iter().any(|f| f.contains(c_frame)))
        .map(|r| r.count)
        .sum();
    assert_eq!(c_elsewhere, 0, "C samples outside their span");
    // The prove thread's own busy loop: its own span, not foreign. (Which frames its
    // stacks show depends on frame pointers in this build; its leaf is always right.)
    let rust_own = sum("p_rust_busy", false, "");
    assert!(
        rust_own >= 30,
        "{rust_own} own samples in p_rust_busy: {p:?}"
    );
    assert!(p.counts.foreign >= c_in_span);
    assert!(p.threads >= 2);
    assert!(p.describe().contains("at 1000 Hz"));
}

#[test]
fn forbidden_perf_events_degrade_to_unavailable_with_the_reason() {
    let sampling = RepSampling::begin(1000, Opener::Deny("perf_event_paranoid is 3".into()));
    let root = Span::enter("d_prove");
    let trace_id = root.trace();
    drop(root);
    let iv: Vec<SpanInterval> = trace::drain_trace(trace_id)
        .iter()
        .map(SpanInterval::from)
        .collect();
    let p = sampling.finish(1, "v", &iv, trace_id);
    let why = p.unavailable.as_deref().expect("unavailable");
    assert!(
        why.contains("refused") && why.contains("perf_event_paranoid is 3"),
        "{why}"
    );
    assert!(p.rows.is_empty());
    assert!(p.describe().starts_with("sampled stacks unavailable: "));
    // It round-trips like any other rep.
    let dir = tempfile::tempdir().unwrap();
    write_rep(dir.path(), &p).unwrap();
    assert_eq!(read_rep(dir.path(), 1).unwrap().unwrap(), p);
}

fn sample_profile(rows: usize) -> RepProfile {
    RepProfile {
        rep: 3,
        variant: "base".into(),
        hz: 997,
        unavailable: None,
        counts: ProfileCounts {
            samples: 10,
            own: 6,
            foreign: 3,
            outside: 1,
        },
        lost: 2,
        threads: 4,
        threads_failed: 1,
        frame_pointers: true,
        sampler_cpu_ns: 1234,
        thread_failure: Some("Cannot allocate memory (os error 12)".into()),
        of_program: false,
        left_out: Default::default(),
        rows: (0..rows)
            .map(|i| FoldedRow {
                span_id: 10 + (i % 3) as u64,
                span: format!("synthesis[{}]", i % 3),
                foreign: i % 2 == 1,
                frames: vec![
                    "main".into(),
                    "<bellperson::Foo as core::ops::Fn<(u32, u64)>>::call".into(),
                    format!("std::vector<int, std::allocator<int> >::push_back {i}"),
                ],
                count: 1 + i as u64,
            })
            .collect(),
    }
}

#[test]
fn folded_files_round_trip_plain_and_gzipped() {
    for rows in [5, 4000] {
        let dir = tempfile::tempdir().unwrap();
        let p = sample_profile(rows);
        let path = write_rep(dir.path(), &p).unwrap();
        assert_eq!(
            path.extension().unwrap() == "gz",
            rows > 5,
            "{}",
            path.display()
        );
        let back = read_rep(dir.path(), 3).unwrap().unwrap();
        assert_eq!(back, p);
        assert_eq!(back.rows, p.rows);
        assert_eq!(folded::read_run(dir.path(), true).unwrap(), vec![p.clone()]);
        // Written again smaller (or larger), the rep keeps one stacks file.
        let again = sample_profile(if rows > 5 { 5 } else { 4000 });
        write_rep(dir.path(), &again).unwrap();
        assert_eq!(read_rep(dir.path(), 3).unwrap().unwrap(), again);
        assert_eq!(
            std::fs::read_dir(folded::dir(dir.path())).unwrap().count(),
            2
        );
    }
    assert!(read_rep(std::path::Path::new("/nonexistent"), 1)
        .unwrap()
        .is_none());
}

#[test]
fn sample_counts_past_what_a_rep_can_hold_are_refused_not_summed_past_64_bits() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = sample_profile(3);
    p.rows[1].count = folded::MAX_REP_SAMPLES;
    write_rep(dir.path(), &p).unwrap();
    let e = format!("{:#}", read_rep(dir.path(), 3).unwrap_err());
    assert!(e.contains("stacks of rep 3, line 2: more than"), "{e}");
    // Without the rows, the rep's json file is read as it was written.
    assert!(folded::read_rep_with(dir.path(), 3, false).is_ok());
    p.rows[1].count = 1;
    p.counts.own = u64::MAX;
    write_rep(dir.path(), &p).unwrap();
    let e = format!("{:#}", folded::read_run(dir.path(), false).unwrap_err());
    assert!(e.contains("rep3.json counts more than"), "{e}");
}

#[test]
fn a_reps_stacks_are_not_written_through_a_planted_link() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "keep").unwrap();
    let p = sample_profile(5);
    let d = folded::dir(dir.path());
    std::fs::create_dir_all(&d).unwrap();
    let json = d.join(format!("rep{}.json", p.rep));
    std::os::unix::fs::symlink(&victim, &json).unwrap();
    let e = write_rep(dir.path(), &p).unwrap_err();
    assert!(format!("{e:#}").contains("is a symbolic link"), "{e:#}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    assert!(std::fs::symlink_metadata(&json)
        .unwrap()
        .file_type()
        .is_symlink());
    // The stacks file: a link there is removed (as a file of an earlier attempt), never
    // written through.
    std::fs::remove_file(&json).unwrap();
    let plain = d.join(format!("rep{}.folded", p.rep));
    std::os::unix::fs::symlink(&victim, &plain).unwrap();
    write_rep(dir.path(), &p).unwrap();
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    assert!(std::fs::symlink_metadata(&plain)
        .unwrap()
        .file_type()
        .is_file());
    assert_eq!(read_rep(dir.path(), p.rep).unwrap().unwrap(), p);
}

#[test]
fn folded_lines_parse_back_and_bad_lines_say_what_is_wrong() {
    let r = &sample_profile(2).rows[1];
    assert_eq!(&parse_line(&line(r)).unwrap(), r);
    for (bad, says) in [
        ("12:x;own;a;b", "no sample count"),
        ("12:x;own;a;b many", "not a number"),
        ("12x;own;a 3", "<span_id>:<span name>"),
        ("12:x;mine;a 3", "neither own nor foreign"),
    ] {
        let e = format!("{:#}", parse_line(bad).unwrap_err());
        assert!(e.contains(says), "{bad}: {e}");
    }
}

/// Names addresses by a table (tests of attribution without real code).
struct Table;
impl Symbolizer for Table {
    fn frames(&mut self, addr: u64, _ret: bool) -> Arc<[String]> {
        vec![format!("f{addr}")].into()
    }
}

#[test]
fn attribution_picks_the_innermost_span_and_sends_threadless_samples_to_the_prove_thread() {
    let span = |id, name: &str, thread_id, start_ns, end_ns| SpanInterval {
        id,
        name: name.into(),
        thread_id,
        start_ns,
        end_ns,
    };
    // prove (thread 1) ⊃ outer ⊃ inner; worker span on thread 2 from 20 to 30.
    let spans = vec![
        span(1, "prove", 1, 0, 100),
        span(2, "outer", 1, 10, 90),
        span(3, "inner", 1, 40, 60),
        span(4, "work", 2, 20, 30),
    ];
    let s = |time_ns, tid, chain: Vec<u64>| RawSample {
        time_ns,
        tid,
        chain,
    };
    let samples = vec![
        s(5, 1, vec![1]),     // prove, own
        s(50, 1, vec![2, 9]), // inner, own; frames outermost first: f9;f2
        s(25, 2, vec![3]),    // work, own
        s(35, 2, vec![3]),    // thread 2 has nothing open: outer, foreign
        s(50, 3, vec![4]),    // foreign thread: inner, foreign
        s(150, 3, vec![4]),   // after prove: outside
    ];
    let (rows, counts) = attribute::attribute(&spans, 1, &samples, &mut Table);
    assert_eq!(
        counts,
        ProfileCounts {
            samples: 6,
            own: 3,
            foreign: 2,
            outside: 1
        }
    );
    let got: Vec<(String, bool, String, u64)> = rows
        .iter()
        .map(|r| (r.span.clone(), r.foreign, r.frames.join(";"), r.count))
        .collect();
    let want = vec![
        ("prove".to_string(), false, "f1".to_string(), 1),
        ("outer".into(), true, "f3".into(), 1),
        ("inner".into(), false, "f9;f2".into(), 1),
        ("inner".into(), true, "f4".into(), 1),
        ("work".into(), false, "f3".into(), 1),
    ];
    assert_eq!(got, want);
}

#[test]
fn flame_graphs_and_function_changes_come_from_the_stored_rows() {
    let mut base = sample_profile(6);
    base.rep = 1;
    let mut cand = sample_profile(6);
    cand.rep = 2;
    cand.rows[0].count += 20; // synthesis[0], own: one stack grew by 20 samples
    let all = [base, cand];
    // synthesis[0] is span 10 in every rep.
    let path = |_rep: u32, id: u64| (id == 10).then(|| vec!["synthesis".to_string()]);
    let b = flame::span_stacks(&all, &[1], "synthesis", &path);
    let c = flame::span_stacks(&all, &[2], "synthesis", &path);
    assert_eq!((b.reps, c.reps), (1, 1));
    assert_eq!(c.total() - b.total(), 20);
    let ch = flame::function_changes(&b, &c, 3);
    assert_eq!(ch[0].delta(), 20.0);
    assert!(ch.iter().all(|x| x.delta() == 20.0));
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("d.svg");
    flame::draw_diff(&b, &c, &out).unwrap();
    let svg = std::fs::read_to_string(&out).unwrap();
    assert!(svg.contains("<svg") && svg.contains("push_back 0"), "{svg}");
    assert!(svg.contains("[synthesis]"));
    let out = dir.path().join("f.svg");
    flame::draw(&c, 997, &out).unwrap();
    assert!(std::fs::read_to_string(&out)
        .unwrap()
        .contains("span&apos;s thread"));
    let top = &flame::top_self(&c, 1)[0];
    assert!(top.0.ends_with("push_back 0") && top.1 == 21.0, "{top:?}");
    // A link planted under a flame graph's name is neither followed nor replaced, and
    // nothing is left beside it.
    std::fs::write(dir.path().join("victim"), "keep").unwrap();
    let link = dir.path().join("flame-diff-synthesis.svg");
    std::os::unix::fs::symlink(dir.path().join("victim"), &link).unwrap();
    for e in [
        flame::draw_diff(&b, &c, &link).unwrap_err(),
        flame::draw(&c, 997, &link).unwrap_err(),
    ] {
        assert!(format!("{e:#}").contains("is a symbolic link"), "{e:#}");
    }
    assert_eq!(
        std::fs::read_to_string(dir.path().join("victim")).unwrap(),
        "keep"
    );
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_folded_file_past_its_cap_keeps_the_stacks_with_most_samples_and_counts_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = sample_profile(40);
    // One stack far longer than the whole budget: left out whatever its count.
    p.rows[5].frames.push("x".repeat(4096));
    p.rows[5].count = 1_000;
    let lines: Vec<String> = p.rows.iter().map(line).collect();
    let cap = 1024;
    let path = super::folded::write_rep_within(dir.path(), &p, cap).unwrap();
    assert!(std::fs::metadata(&path).unwrap().len() <= cap as u64);
    let back = read_rep(dir.path(), p.rep).unwrap().unwrap();
    assert!(
        !back.rows.is_empty() && back.rows.len() < 40,
        "{}",
        back.rows.len()
    );
    // Every kept stack has at least the samples of every stack left out but the long one.
    let kept: Vec<String> = back.rows.iter().map(line).collect();
    let out: Vec<usize> = (0..40).filter(|i| !kept.contains(&lines[*i])).collect();
    assert!(out.contains(&5));
    let least_kept = back.rows.iter().map(|r| r.count).min().unwrap();
    assert!(out
        .iter()
        .filter(|&&i| i != 5)
        .all(|&i| p.rows[i].count <= least_kept));
    assert_eq!(back.left_out.stacks, out.len() as u64);
    assert_eq!(
        back.left_out.samples,
        out.iter().map(|&i| p.rows[i].count).sum::<u64>()
    );
    // Kept in the order written.
    let positions: Vec<usize> = kept
        .iter()
        .map(|k| lines.iter().position(|l| l == k).unwrap())
        .collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{positions:?}");
    assert!(back.describe().contains("stacks ("), "{}", back.describe());
    // Within the cap, nothing is left out and the json says nothing of it.
    write_rep(dir.path(), &p).unwrap();
    let back = read_rep(dir.path(), p.rep).unwrap().unwrap();
    assert_eq!(back.rows.len(), 40);
    assert!(back.left_out.is_none());
    let json = std::fs::read_to_string(dir.path().join("stacks/rep3.json")).unwrap();
    assert!(!json.contains("left_out"), "{json}");
}
