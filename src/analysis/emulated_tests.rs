//! Diffs of emulated counts: exact changes in the phase table, work on worker threads
//! counted with its phase, and never a comparison with counts of another source.

use super::*;
use crate::store::{Meta, RunData, RunRow, SpanRow, VariantMeta};

const EMULATED: &str = "emulated (callgrind 3.19)";

/// One rep per variant: prove > synthesis on thread 1, synthesis[0] and synthesis[1]
/// under it on threads 2 and 3, each with `per_circuit` instructions (a tenth as many
/// branches); synthesis itself counts 100 on its own thread.
fn run(sources: [&str; 2], per_circuit: [u64; 2]) -> RunData {
    let mut meta = Meta::sample();
    meta.order = "interleaved".into();
    let names = ["baseline", "candidate"];
    meta.variants = names
        .iter()
        .zip(sources)
        .map(|(n, s)| VariantMeta {
            name: n.to_string(),
            backend: "cpu".into(),
            knobs: Default::default(),
            counters: Some(s.into()),
            scope: None,
            revision: None,
            patches: Vec::new(),
            patch_failed: None,
        })
        .collect();
    let mut runs = Vec::new();
    let mut spans = Vec::new();
    for (rep, name) in names.iter().enumerate() {
        let mut r = RunRow::sample();
        r.rep = rep as u32;
        r.variant = name.to_string();
        runs.push(r);
        let n = per_circuit[rep];
        let span = |id: u64, parent: Option<u64>, label: &str, thread: u64, ins: u64| {
            let mut s = SpanRow::sample();
            s.rep = rep as u32;
            s.variant = name.to_string().into();
            s.span_id = id;
            s.parent_id = parent;
            s.name = label.into();
            s.thread_id = thread;
            (s.start_ns, s.end_ns) = (id * 10, 1000 - id * 10);
            s.duration_ns = s.end_ns - s.start_ns;
            s.self_ns = s.duration_ns;
            s.instructions = Some(ins).into();
            s.branches = Some(ins / 10).into();
            s
        };
        spans.push(span(1, None, "prove", 1, 200));
        spans.push(span(2, Some(1), "synthesis", 1, 100));
        spans.push(span(3, Some(2), "synthesis[0]", 2, n));
        spans.push(span(4, Some(2), "synthesis[1]", 3, n));
    }
    RunData {
        dir: "run".into(),
        meta,
        runs,
        spans,
        spans_on_disk: false,
    }
}

fn row<'a>(d: &'a Diff, phase: &str) -> Option<&'a Comparison> {
    d.phase_table
        .iter()
        .find(|r| r.phase == phase)
        .map(|r| &r.comparison)
}

#[test]
fn one_emulated_rep_per_side_gives_exact_phase_counts_with_worker_threads() {
    let data = run([EMULATED, EMULATED], [1_000_000, 900_000]);
    let d = diff_runs(
        &data,
        "baseline",
        &data,
        "candidate",
        &DiffOptions::default(),
    )
    .unwrap();
    let c = row(&d, "synthesis instructions").expect("phase row");
    // synthesis's own 100 plus both circuits on their worker threads.
    assert_eq!(c.baseline.median, Some(2_000_100.0));
    assert_eq!(c.candidate.median, Some(1_800_100.0));
    assert_eq!((c.verdict, c.exact), (Verdict::Improved, true));
    assert!(c.ci.is_none() && c.p_value.is_none());
    let b = row(&d, "synthesis branches").unwrap();
    assert_eq!(b.delta, Some(-20_000.0));
    let text = render(&d, Format::Terminal);
    assert!(text.contains("improved (exact)"), "{text}");
    // Times of one rep per side still get no verdict.
    assert!(matches!(
        row(&d, "synthesis").unwrap().verdict,
        Verdict::Inconclusive
    ));
}

#[test]
fn emulated_and_hardware_counts_are_never_compared() {
    let data = run([EMULATED, "hardware"], [1_000_000, 900_000]);
    let d = diff_runs(
        &data,
        "baseline",
        &data,
        "candidate",
        &DiffOptions::default(),
    )
    .unwrap();
    assert!(row(&d, "synthesis instructions").is_none());
    assert!(!d
        .metrics
        .iter()
        .any(|m| m.measure.to_string().starts_with("instructions")));
    assert!(
        d.notes.iter().any(|n| n.contains("never compared")),
        "{:?}",
        d.notes
    );
    // Two emulator versions are two sources too.
    let data = run([EMULATED, "emulated (callgrind 3.24)"], [1, 1]);
    let d = diff_runs(
        &data,
        "baseline",
        &data,
        "candidate",
        &DiffOptions::default(),
    )
    .unwrap();
    assert!(row(&d, "synthesis instructions").is_none());
}
