//! The change chart read back from its SVG: every number it prints is the diff's, and a
//! bar or whisker cut at the axis is marked and keeps its numbers.

use std::path::Path;

use super::change_chart;
use crate::analysis::{diff_runs, DiffOptions};
use crate::plot::change::{Change, ChangeRow};
use crate::plot::verdict::{signed, Judged, SpanChange};
use crate::plot::{render, ImageFormat, Rendered};
use crate::store::RunView;

/// Draws `chart` as SVG into a temporary folder: the outcome and the SVG's text.
fn svg_of(chart: &Change, view: &RunView) -> (Rendered, String) {
    let tmp = tempfile::tempdir().unwrap();
    let r = render(chart, view, tmp.path(), &[ImageFormat::Svg]).unwrap();
    let svg = std::fs::read_to_string(tmp.path().join("change.svg")).unwrap();
    (r, svg)
}

/// What the chart prints beside a bar: the change and its whole interval.
fn value(delta: f64, interval: Option<(f64, f64)>) -> String {
    match interval {
        Some((lo, hi)) => format!("{} [{}, {}]", signed(delta), signed(lo), signed(hi)),
        None => signed(delta),
    }
}

#[test]
fn the_chart_prints_the_diffs_changes_and_intervals() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/quickstart-cpu");
    let view = RunView::load(&dir).unwrap();
    let diff = diff_runs(
        &view.data,
        "baseline",
        &view.data,
        "candidate",
        &DiffOptions::default(),
    )
    .unwrap();
    let chart = change_chart(&diff);
    let (_, svg) = svg_of(&chart, &view);
    // The end-to-end row against the diff's JSON.
    let json = serde_json::to_value(&diff).unwrap();
    let total = &json["contributions"]["total"];
    let (d, lo, hi) = (
        total["delta"].as_f64().unwrap(),
        total["delta_ci"]["lo"].as_f64().unwrap(),
        total["delta_ci"]["hi"].as_f64().unwrap(),
    );
    assert!(svg.contains(&value(d, Some((lo, hi)))), "{svg}");
    // Every row's numbers are printed whole, whatever the axis.
    for r in &chart.rows {
        let v = value(r.change.delta_ns, r.change.interval_ns);
        assert!(svg.contains(&v), "{}: {v} not in the SVG", r.label);
    }
}

#[test]
fn a_cut_bar_and_a_cut_whisker_are_marked_and_keep_their_numbers() {
    let view = RunView::new(crate::analysis::synthetic::SyntheticRun::new().build());
    let ms = 1e6;
    let row = |label: &str, delta: f64, ci: (f64, f64), judged, words: Option<&str>| ChangeRow {
        label: label.into(),
        change: SpanChange {
            delta_ns: delta,
            relative: None,
            interval_ns: Some(ci),
            judged,
            verdict: "words".into(),
            medians_disagree: None,
        },
        interval_words: words.map(str::to_string),
    };
    let chart = Change {
        title: "t".into(),
        statistic: "s".into(),
        rows: vec![
            // Not resolved, and far larger than the axis (scaled to the resolved row).
            row(
                "end to end (prove)",
                744.3 * ms,
                (-43.2 * ms, 1523.0 * ms),
                Judged::Inconclusive,
                None,
            ),
            row(
                "msm_h",
                100.0 * ms,
                (90.0 * ms, 110.0 * ms),
                Judged::Regressed,
                None,
            ),
            row(
                "drop",
                -2.0 * ms,
                (-5.0 * ms, 1.0 * ms),
                Judged::Equivalent,
                Some("the interval of its share of end to end"),
            ),
        ],
        left_out: 49_990,
    };
    let (r, svg) = svg_of(&chart, &view);
    // The spans past the chart's rows, counted under them.
    assert!(svg.contains("+49990 other spans not drawn"), "{svg}");
    let notes = r.notes.0.join("\n");
    assert!(
        notes.contains("end to end (prove): its bar (+744 ms) is longer than the axis"),
        "{notes}"
    );
    assert!(
        notes.contains("end to end (prove): its interval [−43.2 ms, +1.52 s] runs past the axis"),
        "{notes}"
    );
    assert!(!notes.contains("msm_h:"), "{notes}");
    assert!(
        notes.contains("drop: its whisker is the interval of its share of end to end"),
        "{notes}"
    );
    assert!(svg.contains("+744 ms [−43.2 ms, +1.52 s]"), "{svg}");
    assert!(svg.contains("+100 ms [+90.0 ms, +110 ms]"), "{svg}");
    assert!(
        svg.contains("(the interval of its share of end to end)"),
        "{svg}"
    );
}
