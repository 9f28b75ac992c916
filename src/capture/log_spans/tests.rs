//! Log-line spans from lines fed by hand, with arrival times chosen by the test.

use super::*;

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
    let mut m = LogMatcher::new(std::sync::Arc::new(p), 7, 0);
    let t0 = 100_000_000_000u64;
    m.feed(b"loading params", t0);
    m.feed(b"GPU prove time: 25.786289234s", t0 + 26_000_000_000);
    m.feed(b"GPU prove complete gpu_ms=35961", t0 + 36_000_000_000);
    let (spans, counts, samples) = m.finish(t0 + 40_000_000_000);
    assert!(samples.is_empty(), "{samples:?}");
    assert_eq!(counts.protocol_lines, 2);
    let w = spans.iter().find(|s| s.name == "gpu_prove").unwrap();
    let k = spans.iter().find(|s| s.name == "kernels").unwrap();
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
    let mut m = LogMatcher::new(std::sync::Arc::new(p), 1, 1_000_000_000_000);
    m.feed(b"1010.5 CUZK_TIMING begin synth", 0);
    m.feed(b"1011 CUZK_TIMING begin inner", 0);
    m.feed(b"1011.25 CUZK_TIMING end", 0);
    m.feed(b"1012 CUZK_TIMING end", 0);
    m.feed(b"1013 CUZK_TIMING end", 0);
    m.feed(b"1014 CUZK_TIMING begin left_open", 0);
    let (spans, counts, samples) = m.finish(20_000_000_000);
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
    let mut m = LogMatcher::new(std::sync::Arc::new(p), 1, 0);
    m.feed(b"wrapper NaN ms", 5_000_000_000);
    m.feed(b"wrapper 1e400 ms", 5_000_000_000);
    m.feed(b"kernels 10 ms", 6_000_000_000); // no wrapper holds it
    let (spans, counts, samples) = m.finish(7_000_000_000);
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
