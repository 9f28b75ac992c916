//! Tests of the gaps chart's wrapper and inner spans (`[workload] gaps`) and of its
//! agreement with the diff's gaps table, kept beside gaps.rs.

use std::path::Path;

use super::*;
use crate::analysis::synthetic::SyntheticRun;
use crate::analysis::{diff_runs, DiffOptions};
use crate::plot::{render, Chart, ImageFormat};
use crate::store::GapsSpec;
use crate::trace::selftime::Coverage;

/// The synthetic run's wrapper, main inner span and CPU-side MSM (the prover's).
const OUTER: &str = "gpu_prove";
const INNER: &str = "kernels";
const B_G2_MSM: &str = "b_g2_msm";

fn view_with(gaps: Option<GapsSpec>, command: bool) -> RunView {
    let mut data = SyntheticRun::new().build();
    data.meta.gaps = gaps;
    if command {
        data.meta.workload = crate::store::WorkloadMeta::command();
    }
    RunView::new(data)
}

/// The wrapper's time outside its inner intervals and outside its other children on its
/// thread: what no span accounts for, as the chart reads it.
fn chart_unattributed(r: &RepGap) -> u64 {
    let all = Coverage::new(
        r.inner
            .iter()
            .copied()
            .chain(r.others.iter().map(|(_, a, b)| (*a, *b))),
    );
    r.outer_ns - all.within(0, r.outer_ns)
}

/// Issue #27 item 6: the chart's inner set is the backend's compute children, so on the
/// CPU backend its gap, less the wrapper's other (bookkeeping) children, is the diff's
/// unattributed time of `gpu_prove`, to 1 %. A committed real run (2^12, batch 2, 10
/// reps per variant).
#[test]
fn on_the_cpu_backend_the_chart_agrees_with_the_diffs_gaps_table() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/aa-cpu-a");
    let input = RunView::load(&dir).unwrap();
    assert_eq!(input.data.meta.workload.backend(), "cpu");
    let d = diff_runs(
        &input.data,
        "baseline",
        &input.data,
        "candidate",
        &DiffOptions::default(),
    )
    .unwrap();
    let row = d
        .gaps
        .iter()
        .find(|g| g.span == OUTER)
        .expect("a gpu_prove row");
    for (variant, side) in [("baseline", row.baseline), ("candidate", row.candidate)] {
        let side = side.expect("both sides have gpu_prove");
        let reps = rep_gaps(&input, variant);
        assert_eq!(reps.len(), 10, "{variant}");
        assert!(reps.iter().all(|r| r.source == InnerSource::Span));
        // Per rep, the chart's own reading and the store's agree exactly ...
        for r in &reps {
            assert_eq!(chart_unattributed(r), r.unattributed_ns, "rep {}", r.rep);
            assert!(
                r.gap_ns > r.unattributed_ns,
                "the bookkeeping children are in the gap"
            );
        }
        // ... and their median is the diff's, to 1 %.
        let chart: Vec<f64> = reps.iter().map(|r| chart_unattributed(r) as f64).collect();
        let chart = median(&chart).unwrap();
        let rel = (chart - side.unattributed_ns).abs() / side.unattributed_ns;
        assert!(
            rel < 0.01,
            "{variant}: chart {chart} ns vs diff {} ns ({:.2} %)",
            side.unattributed_ns,
            100.0 * rel
        );
        // The gap itself is the unattributed time plus the other children's time.
        let others: Vec<f64> = reps
            .iter()
            .map(|r| (r.gap_ns - chart_unattributed(r)) as f64)
            .collect();
        assert!(median(&others).unwrap() > 0.0);
    }
}

#[test]
fn the_experiments_gaps_name_the_wrapper_and_the_inner_spans() {
    let default = view_with(None, false);
    let names = GapNames::of(&default);
    assert_eq!((names.wrapper.as_str(), names.configured), (OUTER, false));
    let base = rep_gaps(&default, "baseline");
    // Only `kernels` counts as inner: b_g2_msm moves into the gap (as an "other" child).
    let input = view_with(
        Some(GapsSpec {
            wrapper: OUTER.into(),
            inner: vec![INNER.into()],
        }),
        false,
    );
    let narrow = rep_gaps(&input, "baseline");
    assert_eq!(narrow.len(), base.len());
    for (n, b) in narrow.iter().zip(&base) {
        assert_eq!(n.outer_ns, b.outer_ns);
        assert!(n.inner_ns < b.inner_ns && n.gap_ns > b.gap_ns);
        assert!(n.others.iter().any(|(name, _, _)| name == B_G2_MSM));
        assert_eq!(n.unattributed_ns, b.unattributed_ns);
    }
    // Another wrapper: `synthesis`, whose inner spans are its per-item children (on
    // other threads: inner spans count on any thread).
    let synth = view_with(
        Some(GapsSpec {
            wrapper: "synthesis".into(),
            inner: vec!["synthesis[0]".into(), "synthesis[1]".into()],
        }),
        false,
    );
    let g = rep_gaps(&synth, "baseline");
    assert!(!g.is_empty());
    let whole = synth.spans_of(g[0].rep);
    let s = whole.iter().find(|s| s.name == "synthesis").unwrap();
    assert_eq!(g[0].outer_ns, s.duration_ns);
    assert!(g[0].inner_ns > 0 && g[0].inner_ns < g[0].outer_ns);
    assert!(not_drawn(&synth).is_none());
}

#[test]
fn without_a_wrapper_span_the_chart_is_not_drawn_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let formats = [ImageFormat::Svg, ImageFormat::Png];
    // A wrapper the run does not have.
    let missing = view_with(
        Some(GapsSpec {
            wrapper: "no_such_span".into(),
            inner: vec![],
        }),
        false,
    );
    let why = not_drawn(&missing).unwrap();
    assert!(why.contains("gaps.wrapper = \"no_such_span\""), "{why}");
    assert!(why.contains("gpu_prove"), "names spans the run has: {why}");
    // An earlier report's image in the folder is removed, not left to pass for this one.
    std::fs::write(dir.path().join("gaps.png"), b"old").unwrap();
    let r = render(&Gaps, &missing, dir.path(), &formats).unwrap();
    assert_eq!(r.skipped.as_deref(), Some(why.as_str()));
    assert!(r.files.is_empty());
    assert!(!dir.path().join("gaps.png").exists() && !dir.path().join("gaps.svg").exists());
    // An external program's run with no gaps: not drawn, saying what to add. (The
    // synthetic run's spans are renamed so that it has no gpu_prove.)
    let mut data = SyntheticRun::new().build();
    data.meta.workload = crate::store::WorkloadMeta::command();
    for s in &mut data.spans {
        if s.name == OUTER {
            s.name = "step".into();
        }
    }
    let program = RunView::new(data);
    let why = Gaps.not_drawn(&program).unwrap();
    assert!(why.contains("gaps = {"), "{why}");
    // With the default wrapper present, the chart is drawn as before.
    let r = render(&Gaps, &view_with(None, true), dir.path(), &formats).unwrap();
    assert!(r.skipped.is_none());
    assert_eq!(r.files.len(), 2);
    // An inner name the run does not have is a note on the drawn chart.
    let odd = view_with(
        Some(GapsSpec {
            wrapper: OUTER.into(),
            inner: vec![INNER.into(), "kernal".into()],
        }),
        false,
    );
    let r = render(&Gaps, &odd, dir.path(), &formats).unwrap();
    assert!(
        r.notes
            .0
            .iter()
            .any(|n| n.contains("\"kernal\" is no span")),
        "{:?}",
        r.notes
    );
}

/// What fills the gap (the diff's lines, the report's table): nothing to split without
/// kernel records; with them, the wrapper's other spans, largest first.
#[test]
fn without_kernel_records_there_is_nothing_to_split_and_with_them_the_host_spans_fill_it() {
    use crate::store::lanes::GpuRecords;
    use crate::store::GpuActivityRow;
    let run = SyntheticRun::new();
    let plain = RunView::new(run.build());
    assert_eq!(
        crate::store::gaps::fill::fill_lines([(&plain, "baseline"), (&plain, "candidate")]),
        None
    );
    // One kernel record in each rep, over the `kernels` span: the gap is the rest of
    // gpu_prove, which the wrapper's other children fill.
    let activity: Vec<GpuActivityRow> = plain
        .data
        .spans
        .iter()
        .filter(|s| s.name == INNER)
        .map(|k| GpuActivityRow {
            rep: k.rep,
            kind: "kernel".into(),
            start_ns: k.start_ns,
            end_ns: k.end_ns,
            ..GpuActivityRow::sample()
        })
        .collect();
    let mut gpu = GpuRecords::default();
    gpu.activity = activity;
    let view = RunView::with_gpu(run.build(), gpu);
    let names = GapNames::of(&view);
    let fill =
        crate::store::gaps::fill::fillers(&view, &rep_gaps_of(&view, "baseline", &names), &names);
    assert!(!fill.is_empty());
    assert!(fill.windows(2).all(|w| w[0].median_ns >= w[1].median_ns));
    assert!(fill
        .iter()
        .all(|f| f.name != "gpu_prove" && f.name != "kernels"));
    let lines =
        crate::store::gaps::fill::fill_lines([(&view, "baseline"), (&view, "candidate")]).unwrap();
    assert_eq!(lines.len(), 3);
    assert!(
        lines[1].starts_with("  baseline (baseline, gap "),
        "{}",
        lines[1]
    );
    assert!(lines[1].contains(&fill[0].name), "{}", lines[1]);
}
