//! Log-line spans from lines fed by hand, with arrival times chosen by the test.

use std::sync::Arc;

use super::*;
use crate::protocol::ParsedSpan;
use crate::trace::AttrValue;

fn rules(entries: &[(&str, LogSpanRule)]) -> BTreeMap<String, LogSpanRule> {
    entries
        .iter()
        .map(|(n, r)| (n.to_string(), r.clone()))
        .collect()
}

fn duration(re: &str, parent: Option<&str>) -> LogSpanRule {
    LogSpanRule {
        duration: Some(re.into()),
        parent: parent.map(str::to_string),
        ..Default::default()
    }
}

fn attr(s: &ParsedSpan, k: &str) -> Option<AttrValue> {
    s.attrs.iter().find(|(a, _)| a == k).map(|(_, v)| v.clone())
}

/// The motivating case's two lines: the kernels' time printed by the C++ side, then
/// the wrapper's by the Rust side once the call returned.
#[test]
fn the_wrappers_gap_is_what_its_inner_span_leaves() {
    let p = LogPatterns::new(&rules(&[
        (
            "gpu_prove",
            duration(r"GPU prove complete gpu_ms=(?P<ms>\d+)", None),
        ),
        (
            "kernels",
            duration(r"GPU prove time: (?P<s>[0-9.]+)s", Some("gpu_prove")),
        ),
    ]))
    .unwrap();
    let mut m = LogMatcher::new(Arc::new(p), 7, 0);
    let t0 = 100_000_000_000u64;
    m.feed(b"loading params", t0);
    m.feed(b"GPU prove time: 25.786289234s", t0 + 26_000_000_000);
    m.feed(b"GPU prove complete gpu_ms=35961", t0 + 36_000_000_000);
    let LogOutcome {
        spans,
        counts,
        samples,
        ..
    } = m.finish(t0, t0 + 40_000_000_000);
    assert!(samples.is_empty(), "{samples:?}");
    assert_eq!(counts.protocol_lines, 2);
    let w = spans.iter().find(|s| &*s.name == "gpu_prove").unwrap();
    let k = spans.iter().find(|s| &*s.name == "kernels").unwrap();
    assert_eq!(w.end_ns - w.start_ns, 35_961_000_000);
    assert_eq!(k.end_ns - k.start_ns, 25_786_289_234);
    assert_eq!(attr(k, GS_PARENT), attr(w, GS_ID));
    let gap = (w.end_ns - w.start_ns) - (k.end_ns - k.start_ns);
    assert_eq!(gap, 10_174_710_766);
}

#[test]
fn begin_end_pairs_nest_and_take_a_timestamp_group_and_attributes() {
    let p = LogPatterns::new(&rules(&[(
        "phase",
        LogSpanRule {
            begin: Some(r"^(?P<ts>[0-9.]+) CUZK_TIMING begin (?P<what>\w+)".into()),
            end: Some(r"^(?P<ts>[0-9.]+) CUZK_TIMING end".into()),
            ..Default::default()
        },
    )]))
    .unwrap();
    // Wall clock = span clock + 1000 s.
    let mut m = LogMatcher::new(Arc::new(p), 1, 1_000_000_000_000);
    m.feed(b"1010.5 CUZK_TIMING begin synth", 0);
    m.feed(b"1011 CUZK_TIMING begin inner", 0);
    m.feed(b"1011.25 CUZK_TIMING end", 0);
    m.feed(b"1012 CUZK_TIMING end", 0);
    m.feed(b"1013 CUZK_TIMING end", 0);
    m.feed(b"1014 CUZK_TIMING begin left_open", 0);
    let LogOutcome {
        spans,
        counts,
        samples,
        ..
    } = m.finish(0, 20_000_000_000);
    assert_eq!(counts.unmatched_ends, 1);
    assert_eq!(counts.unmatched_begins, 1);
    assert_eq!(samples.len(), 1, "{samples:?}");
    let inner = spans
        .iter()
        .find(|s| attr(s, "what") == Some(AttrValue::Str("inner".into())))
        .unwrap();
    assert_eq!(
        (inner.start_ns, inner.end_ns),
        (11_000_000_000, 11_250_000_000)
    );
    let outer = spans
        .iter()
        .find(|s| attr(s, "what") == Some(AttrValue::Str("synth".into())))
        .unwrap();
    assert_eq!(
        (outer.start_ns, outer.end_ns),
        (10_500_000_000, 12_000_000_000)
    );
    let open = spans.iter().find(|s| s.unmatched).unwrap();
    assert_eq!(open.end_ns, 20_000_000_000);
}

#[test]
fn lines_that_match_badly_are_counted_with_an_example() {
    let p = LogPatterns::new(&rules(&[
        ("w", duration(r"wrapper (?P<ms>\S+) ms", None)),
        ("k", duration(r"kernels (?P<ms>\S+) ms", Some("w"))),
    ]))
    .unwrap();
    let mut m = LogMatcher::new(Arc::new(p), 1, 0);
    m.feed(b"wrapper NaN ms", 5_000_000_000);
    m.feed(b"wrapper 1e400 ms", 5_000_000_000);
    m.feed(b"kernels 10 ms", 6_000_000_000); // no wrapper holds it
    let LogOutcome {
        spans,
        counts,
        samples,
        ..
    } = m.finish(0, 7_000_000_000);
    assert_eq!(counts.unparseable, 3, "{samples:?}");
    assert_eq!(spans.len(), 1);
    assert!(samples
        .iter()
        .any(|s| s.contains("is not a length of time")));
    assert!(samples.iter().any(|s| s.contains("no \"w\" span holds it")));
}

#[test]
fn bad_entries_are_refused_with_what_to_write() {
    let bad_re = LogPatterns::new(&rules(&[("x", duration(r"took (?P<ms>[0-9+ ms", None))]));
    let msg = bad_re.err().unwrap().to_string();
    assert!(
        msg.starts_with("workload.log_spans.x.duration: regex parse error"),
        "{msg}"
    );
    let no_group = LogPatterns::new(&rules(&[("x", duration(r"took (\d+) ms", None))]));
    assert!(matches!(
        no_group,
        Err(LogSpanError::NoDurationGroup { .. })
    ));
    let half = LogPatterns::new(&rules(&[(
        "x",
        LogSpanRule {
            begin: Some("a".into()),
            ..Default::default()
        },
    )]));
    assert!(half.err().unwrap().to_string().contains("both begin"));
    let orphan = LogPatterns::new(&rules(&[("x", duration(r"(?P<s>\d+)", Some("y")))]));
    assert!(matches!(orphan, Err(LogSpanError::UnknownParent { .. })));
}

fn motivating_rules() -> Arc<LogPatterns> {
    Arc::new(
        LogPatterns::new(&rules(&[
            (
                "gpu_prove",
                duration(r"GPU prove complete gpu_ms=(?P<ms>\d+)", None),
            ),
            (
                "kernels",
                duration(r"GPU prove time: (?P<s>[0-9.]+)s", Some("gpu_prove")),
            ),
        ]))
        .unwrap(),
    )
}

fn one<'a>(spans: &'a [ParsedSpan], name: &str) -> &'a ParsedSpan {
    let v: Vec<_> = spans.iter().filter(|s| &*s.name == name).collect();
    assert_eq!(v.len(), 1, "one {name}: {spans:?}");
    v[0]
}

/// The incident's lines replayed at ×0.01: the kernels' line, then 101.8 ms later the
/// wrapper's with its 359.61 ms truncated to whole ms (359). The kernels' derived start
/// lies 0.66 ms before the wrapper's: inside the 1 ms a whole-ms number is known to, so
/// the kernels nest, and the wrapper is widened to hold them.
#[test]
fn a_whole_ms_parent_holds_its_child_within_the_precision_it_prints() {
    let mut m = LogMatcher::new(motivating_rules(), 7, 0);
    let t0 = 50_000_000_000u64;
    let tk = t0 + 257_800_000;
    m.feed(b"GPU prove time: 0.257862892s", tk);
    m.feed(b"GPU prove complete gpu_ms=359", tk + 101_800_000);
    let out = m.finish(t0 - 1_000_000_000, tk + 200_000_000);
    assert!(out.samples.is_empty(), "{:?}", out.samples);
    assert_eq!((out.matched, out.kept), (2, 2));
    let (w, k) = (one(&out.spans, "gpu_prove"), one(&out.spans, "kernels"));
    assert_eq!(attr(k, GS_PARENT), attr(w, GS_ID));
    assert_eq!(k.end_ns - k.start_ns, 257_862_892);
    // Widened by the 0.663 ms the kernels stuck out: 359.663 ms, inside [359, 360).
    assert_eq!(w.start_ns, k.start_ns);
    assert_eq!(w.end_ns - w.start_ns, 359_662_892);
    let gap = (w.end_ns - w.start_ns) - (k.end_ns - k.start_ns);
    assert_eq!(gap, 101_800_000);
}

/// Beyond the precision the lines print, a child is not held: 2 ms out of a whole-ms
/// parent is more than its 1 ms.
#[test]
fn a_child_beyond_the_printed_precision_is_not_held() {
    let mut m = LogMatcher::new(motivating_rules(), 7, 0);
    let t0 = 50_000_000_000u64;
    let tk = t0 + 257_800_000;
    m.feed(b"GPU prove time: 0.257862892s", tk);
    // The wrapper's start lies 2.06 ms after the kernels'.
    m.feed(b"GPU prove complete gpu_ms=358", tk + 102_200_000);
    let out = m.finish(t0 - 1_000_000_000, tk + 200_000_000);
    let k = one(&out.spans, "kernels");
    assert_eq!(attr(k, GS_PARENT), None);
    assert_eq!(out.counts.unparseable, 1);
    assert!(
        out.samples
            .iter()
            .any(|s| s.contains("no \"gpu_prove\" span holds it")),
        "{:?}",
        out.samples
    );
}

/// Whole numbers are known to one unit (truncation), decimals to half their last digit.
#[test]
fn printed_numbers_carry_their_precision() {
    assert_eq!(printed_precision("35961", 1e6), 1_000_000);
    assert_eq!(printed_precision("25.786289234", 1e9), 1);
    assert_eq!(printed_precision("25.79", 1e9), 5_000_000);
    assert_eq!(printed_precision("1.5e3", 1e3), 50_000);
}

/// A line the reader got after the program's exit was written before it: the span ends
/// at the exit (keeping its printed length), not dropped as outside the rep.
#[test]
fn a_line_read_after_the_exit_is_kept_at_the_exit() {
    let mut m = LogMatcher::new(motivating_rules(), 7, 0);
    let (start, exit) = (10_000_000_000u64, 10_400_000_000u64);
    m.feed(b"GPU prove complete gpu_ms=360", exit + 3_000_000);
    let out = m.finish(start, exit);
    assert_eq!(out.counts.outside_rep, 0, "{:?}", out.samples);
    let w = one(&out.spans, "gpu_prove");
    assert_eq!((w.start_ns, w.end_ns), (exit - 360_000_000, exit));
}

/// A span that lies before the rep by more than its precision is dropped with a reason
/// that is about the line (its unit), not about the span clock.
#[test]
fn a_span_before_the_rep_is_dropped_saying_what_to_check() {
    let mut m = LogMatcher::new(motivating_rules(), 7, 0);
    let start = 100_000_000_000u64;
    // 36 s printed 0.4 s after the start: ms printed as if they were the unit.
    m.feed(b"GPU prove complete gpu_ms=36000", start + 400_000_000);
    let out = m.finish(start, start + 500_000_000);
    assert_eq!((out.matched, out.kept, out.counts.outside_rep), (1, 0, 1));
    let why = out.dropped.unwrap();
    assert!(why.contains("\"gpu_prove\""), "{why}");
    assert!(why.contains("unit group"), "{why}");
    assert!(!why.contains("CLOCK_MONOTONIC"), "{why}");
}

/// A `ts` printed to hundredths is truncated: a begin printed in the rep's first
/// hundredth may read up to 10 ms before the spawn, and is moved to the rep's start.
#[test]
fn a_ts_outside_the_rep_by_less_than_its_precision_is_moved_in() {
    let p = LogPatterns::new(&rules(&[(
        "phase",
        LogSpanRule {
            begin: Some(r"^(?P<ts>\S+) begin".into()),
            end: Some(r"^(?P<ts>\S+) end".into()),
            tz: Some("UTC".into()),
            ts_format: Some("%H:%M:%S%.f".into()),
            ..Default::default()
        },
    )]))
    .unwrap();
    // The span clock's zero is 2024-03-14 00:00:00 UTC.
    let day = 1_710_374_400_000_000_000i128;
    let mut m = LogMatcher::new(Arc::new(p), 1, day);
    let start = (3_600 + 8 * 60 + 47) * 1_000_000_000u64 + 534_000_000; // 01:08:47.534
    m.feed(b"01:08:47.53 begin", start + 1_000_000);
    m.feed(b"01:08:47.71 end", start + 180_000_000);
    let out = m.finish(start, start + 200_000_000);
    assert_eq!(out.counts.outside_rep, 0, "{:?}", out.samples);
    let s = one(&out.spans, "phase");
    assert_eq!(s.start_ns, start);
    assert_eq!(s.end_ns, start - 4_000_000 + 180_000_000);
}

#[test]
fn bad_time_settings_are_refused_naming_the_entry() {
    let with = |ts_format: Option<&str>, tz: Option<&str>| {
        LogPatterns::new(&rules(&[(
            "x",
            LogSpanRule {
                duration: Some(r"(?P<ts>\S+) took (?P<ms>\d+)".into()),
                ts_format: ts_format.map(str::to_string),
                tz: tz.map(str::to_string),
                ..Default::default()
            },
        )]))
        .err()
        .map(|e| e.to_string())
    };
    let msg = with(Some("%Y-%m-%d"), None).unwrap();
    assert!(msg.starts_with("workload.log_spans.x.ts_format:"), "{msg}");
    assert!(msg.contains("%H"), "{msg}");
    let msg = with(Some("%H:%M:%Q"), None).unwrap();
    assert!(msg.contains("not a strftime format"), "{msg}");
    let msg = with(None, Some("Europe/Paris")).unwrap();
    assert!(msg.starts_with("workload.log_spans.x.tz:"), "{msg}");
    assert!(msg.contains("\"+02:00\""), "{msg}");
    assert_eq!(with(Some("%H:%M:%S%.f"), Some("+02:00")), None);
    assert_eq!(with(None, Some("local")), None);
}

/// The incident's log at full pace, read with its own times (hundredths of a second):
/// the printed numbers put the kernels' start 5 ms before the wrapper's, within the
/// 21 ms the two lines are known to, so the kernels nest and the gap is 10.2 s.
#[test]
fn the_incidents_log_with_its_own_times_nests_at_full_pace() {
    let ts = |re: &str| format!(r"^(?P<ts>\S+ \S+) .*{re}");
    let p = LogPatterns::new(&rules(&[
        (
            "gpu_prove",
            LogSpanRule {
                tz: Some("UTC".into()),
                ..duration(&ts(r"GPU prove complete gpu_ms=(?P<ms>\d+)"), None)
            },
        ),
        (
            "kernels",
            LogSpanRule {
                tz: Some("UTC".into()),
                ..duration(&ts(r"GPU prove time: (?P<s>[0-9.]+)s"), Some("gpu_prove"))
            },
        ),
    ]))
    .unwrap();
    // The span clock's zero is 2024-03-14 00:00:00 UTC.
    let day = 1_710_374_400_000_000_000i128;
    let sec = |h: u64, m: u64, s: u64| (h * 3600 + m * 60 + s) * 1_000_000_000;
    let mut m = LogMatcher::new(Arc::new(p), 1, day);
    let lines: [&[u8]; 4] = [
        b"2024-03-14 01:08:11.57 INFO seal_commit_phase2: start",
        b"2024-03-14 01:08:37.35 INFO GPU prove time: 25.786289234s",
        b"2024-03-14 01:08:47.53 INFO GPU prove complete gpu_ms=35961",
        b"2024-03-14 01:08:47.54 INFO seal_commit_phase2: done",
    ];
    for (i, l) in lines.iter().enumerate() {
        m.feed(l, sec(1, 8, 11) + 600_000_000 + i as u64 * 1000);
    }
    let out = m.finish(sec(1, 8, 11), sec(1, 8, 48));
    assert!(out.samples.is_empty(), "{:?}", out.samples);
    let (w, k) = (one(&out.spans, "gpu_prove"), one(&out.spans, "kernels"));
    assert_eq!(attr(k, GS_PARENT), attr(w, GS_ID));
    assert_eq!(k.end_ns - k.start_ns, 25_786_289_234);
    // Widened by the 5.29 ms the kernels stuck out.
    assert_eq!(w.end_ns - w.start_ns, 35_966_289_234);
    let gap = (w.end_ns - w.start_ns) - (k.end_ns - k.start_ns);
    assert_eq!(gap, 10_180_000_000);
}

/// A duration printed with a huge exponent (`0e300`) is known to no better than past
/// u64's range of ns: added to its line's time precision, and to its parent's
/// precision when nesting, the sums saturate instead of overflowing.
#[test]
fn precisions_past_u64s_range_saturate() {
    let ts = |re: &str| format!(r"^(?P<ts>\S+ \S+) {re}");
    let utc = |r: LogSpanRule| LogSpanRule {
        tz: Some("UTC".into()),
        ..r
    };
    let p = LogPatterns::new(&rules(&[
        ("outer", utc(duration(&ts(r"outer (?P<s>\S+)s"), None))),
        (
            "inner",
            utc(duration(&ts(r"inner (?P<s>\S+)s"), Some("outer"))),
        ),
    ]))
    .unwrap();
    // The span clock's zero is 2024-03-14 00:00:00 UTC.
    let day = 1_710_374_400_000_000_000i128;
    let hour = 3_600_000_000_000u64;
    let mut m = LogMatcher::new(Arc::new(p), 1, day);
    m.feed(b"2024-03-14 01:00:00 inner 0e300s", hour);
    m.feed(b"2024-03-14 01:00:01 outer 0e300s", hour + 1_000_000_000);
    let out = m.finish(hour - 1_000_000_000, hour + 2_000_000_000);
    assert_eq!(out.spans.len(), 2, "{:?} {:?}", out.spans, out.samples);
    let (outer, inner) = (one(&out.spans, "outer"), one(&out.spans, "inner"));
    assert_eq!(attr(inner, GS_PARENT), attr(outer, GS_ID));
}

/// 100,000 children in 1,000 parents, each child a line before its parent's: every child
/// finds its parent, and the search for it is not a scan of every span (which took 69 s
/// for 40,000 lines).
#[test]
fn a_hundred_thousand_lines_with_a_parent_nest_without_a_scan_per_line() {
    let p = LogPatterns::new(&rules(&[
        ("outer", duration(r"^outer (?P<ms>\d+)$", None)),
        ("item", duration(r"^item (?P<ms>\d+)$", Some("outer"))),
    ]))
    .unwrap();
    let mut m = LogMatcher::new(Arc::new(p), 7, 0);
    let ms = 1_000_000u64;
    let t0 = 10_000_000_000u64;
    for b in 0..1_000u64 {
        let tb = t0 + b * 200 * ms;
        for i in 0..100u64 {
            m.feed(b"item 1", tb + (i + 1) * ms);
        }
        m.feed(b"outer 101", tb + 101 * ms);
    }
    let started = std::time::Instant::now();
    let out = m.finish(t0 - ms, t0 + 1_000 * 200 * ms);
    let took = started.elapsed();
    assert_eq!(
        (out.matched, out.kept),
        (101_000, 101_000),
        "{:?}",
        out.samples
    );
    let ids: std::collections::HashMap<u64, u64> = out
        .spans
        .iter()
        .filter(|s| &*s.name == "outer")
        .map(|s| match attr(s, GS_ID) {
            Some(AttrValue::U64(id)) => (id, s.start_ns),
            other => panic!("outer without an id: {other:?}"),
        })
        .collect();
    for s in out.spans.iter().filter(|s| &*s.name == "item") {
        let Some(AttrValue::U64(p)) = attr(s, GS_PARENT) else {
            panic!("an item without its parent: {s:?}");
        };
        // Its own batch's outer: the latest that starts at or before it.
        assert!(ids[&p] <= s.start_ns && s.start_ns < ids[&p] + 101 * ms);
    }
    assert!(took < std::time::Duration::from_secs(60), "{took:?}");
}

#[test]
fn lines_slow_to_match_are_the_matchers_time_and_past_its_budget_are_not_matched() {
    let p = Arc::new(
        LogPatterns::new(&rules(&[(
            "step",
            duration(r"step took (?P<ms>\d+)ms", None),
        )]))
        .unwrap(),
    );
    let t0 = 100_000_000_000u64;
    let lines = [&b"step took 5ms"[..], b"step took 6ms", b"step took 7ms"];
    // Every line slow (any time is over 0 ns), the budget spent by the first.
    let mut m = LogMatcher::new(p.clone(), 7, 0).with_match_budget(0, 0);
    for (k, l) in lines.iter().enumerate() {
        m.feed(l, t0 + (k as u64 + 1) * 1_000_000_000);
    }
    let out = m.finish(t0, t0 + 10_000_000_000);
    assert_eq!(out.spans.len(), 1);
    let note = out.slow.expect("a note");
    assert!(
        note.contains("1 line(s) took the patterns over 0.0 ms"),
        "{note}"
    );
    assert!(note.contains("entry `step`"), "{note}");
    assert!(
        note.contains("the matcher's time, not the program's"),
        "{note}"
    );
    assert!(
        note.contains("the rep's other 2 line(s) were not matched"),
        "{note}"
    );
    // The defaults: these lines match in microseconds, no note.
    let mut m = LogMatcher::new(p, 7, 0);
    for (k, l) in lines.iter().enumerate() {
        m.feed(l, t0 + (k as u64 + 1) * 1_000_000_000);
    }
    let out = m.finish(t0, t0 + 10_000_000_000);
    assert_eq!((out.spans.len(), out.slow), (3, None));
}
