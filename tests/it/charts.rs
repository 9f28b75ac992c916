//! The charts against the diff: every Δ a chart prints is the diff's change statistic of
//! the same span and measure, coloured by the diff's verdict; the timeline draws the
//! median-wall rep of the measured verified reps; a rep of many spans narrower than a
//! pixel is drawn in marks bounded by pixels, and the notes say how many it merged.

use std::path::Path;

use gapscope::analysis::synthetic::SyntheticRun;
use gapscope::analysis::{Diff, Measure, Verdict};
use gapscope::plot::distributions::{label_text, Distributions};
use gapscope::plot::phases::Phases;
use gapscope::plot::verdict::{change_text, signed, verdict_color, Changes, Judged};
use gapscope::plot::{self, Chart, ImageFormat};
use gapscope::report::{self, chart_changes, headline};
use gapscope::store::{RunRow, RunView, SpanRow};

/// Every `<text>` of an SVG: its fill colour and its content.
fn texts(svg: &str) -> Vec<(String, String)> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| {
            let fill = t.split("fill=\"").nth(1)?.split('"').next()?.to_uppercase();
            let body = t.split_once('>')?.1.split("</text>").next()?;
            let body = body.trim().replace("&apos;", "'").replace("&quot;", "\"");
            Some((
                fill,
                body.replace("&lt;", "<")
                    .replace("&gt;", ">")
                    .replace("&amp;", "&"),
            ))
        })
        .collect()
}

fn hex(j: Judged) -> String {
    let c = verdict_color(j);
    format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2)
}

fn svg_of(chart: &dyn Chart, view: &RunView, dir: &Path) -> String {
    let r = plot::render(chart, view, dir, &[ImageFormat::Svg]).unwrap();
    std::fs::read_to_string(&r.files[0]).unwrap()
}

/// A paired run whose iterations drift (half of them 30% slower for both variants),
/// so the median of per-pair differences and the difference of medians differ.
fn drifting() -> RunView {
    let mut run = SyntheticRun::new();
    run.reps = 12;
    run.drift = 0.3;
    run.noise = 0.03;
    run.seed = 7;
    let c = run.variant_mut("candidate");
    c.scale.insert("msm_h".into(), 1.25);
    c.scale.insert("synthesis[0]".into(), 1.15);
    c.scale.insert("ntt_h".into(), 1.04);
    RunView::new(run.build())
}

fn the_diff(view: &RunView) -> (Diff, Changes) {
    let diffs = report::diffs(&view.data);
    let changes = chart_changes::changes(&diffs);
    let diff = diffs.unwrap().results.remove(0).1.unwrap();
    (diff, changes)
}

#[test]
fn every_charts_change_is_the_diffs_statistic_coloured_by_its_verdict() {
    let tmp = tempfile::tempdir().unwrap();
    let view = drifting();
    let (diff, changes) = the_diff(&view);
    let total = &diff.contributions.total;
    assert!(diff.pairs.is_some(), "the run is paired");
    let medians = total.candidate.median.unwrap() - total.baseline.median.unwrap();
    // The two statistics read differently here, so a chart computing its own
    // difference of medians would print another number.
    assert_ne!(signed(total.delta.unwrap()), signed(medians));

    let phases = texts(&svg_of(
        &Phases {
            changes: changes.clone(),
        },
        &view,
        tmp.path(),
    ));
    let dists = texts(&svg_of(
        &Distributions {
            changes: changes.clone(),
        },
        &view,
        tmp.path(),
    ));
    let change = texts(&svg_of(&headline::change_chart(&diff), &view, tmp.path()));
    let drawn = |texts: &[(String, String)], want: &str| -> Vec<String> {
        texts
            .iter()
            .filter(|(_, t)| t.starts_with(want))
            .map(|(f, _)| f.clone())
            .collect()
    };

    // End to end: the bar's end of the phase chart and the first row of the change chart.
    let e2e = chart_changes::span_change(total);
    let fills = drawn(&phases, &change_text(&e2e));
    assert_eq!(fills, vec![hex(e2e.judged)], "end to end in phases.svg");
    assert!(
        drawn(&change, &signed(e2e.delta_ns)).len() == 1,
        "end to end in change.svg: {change:?}"
    );
    // The bar's end says the change and its verdict, and nothing else.
    let bar: Vec<&String> = phases
        .iter()
        .map(|t| &t.1)
        .filter(|t| t.ends_with(&format!(") {}", e2e.judged.word())))
        .collect();
    assert_eq!(
        bar,
        vec![&format!("{} {}", change_text(&e2e), e2e.judged.word())]
    );

    // Each span's critical-path self time: the phase table and the change chart.
    let mut checked = 0;
    let mut unchanged_past_one_percent = 0;
    for item in &diff.contributions.items {
        let c = &item.comparison;
        if c.span.contains('[') {
            continue; // the chart groups synthesis[i] as synthesis[*]: no Δ of its own
        }
        let ch = chart_changes::span_change(c);
        let fills = drawn(&phases, &change_text(&ch));
        assert!(
            fills.contains(&hex(ch.judged)),
            "{}: {} coloured {} not in phases.svg",
            c.span,
            change_text(&ch),
            hex(ch.judged)
        );
        if c.verdict == Verdict::Inconclusive && c.relative.is_some_and(|r| r.abs() > 0.01) {
            unchanged_past_one_percent += 1;
        }
        checked += 1;
    }
    assert!(checked >= 10, "{checked}");
    // The old colouring (red or green by sign past 1%) would have coloured these.
    assert!(unchanged_past_one_percent > 0);
    // The change chart's bars: each in its verdict's colour, its value beside it.
    let change_svg = svg_of(&headline::change_chart(&diff), &view, tmp.path()).to_uppercase();
    for row in headline::change_chart(&diff).rows {
        let fill = format!("FILL=\"{}\"", hex(row.change.judged));
        assert!(change_svg.contains(&fill), "{}: no bar {fill}", row.label);
        assert!(
            !drawn(&change, &signed(row.change.delta_ns)).is_empty(),
            "{}",
            row.label
        );
    }

    // Each span's total: the label of its distribution panel.
    let mut labels = 0;
    for c in diff.metrics.iter().filter(|c| c.measure == Measure::Total) {
        if c.span.contains('[') {
            continue;
        }
        let ch = chart_changes::span_change(c);
        let want = label_text("candidate", &ch);
        let fills = drawn(&dists, &want);
        assert!(
            fills.contains(&hex(ch.judged)),
            "{}: {want} coloured {} not in distributions.svg",
            c.span,
            hex(ch.judged)
        );
        labels += 1;
    }
    assert!(labels >= 10, "{labels}");
}

/// Sets the wall times of the baseline's measured reps and returns their rep numbers.
fn with_walls(view: RunView, walls: &[u64], unverified: Option<usize>) -> (RunView, Vec<u32>) {
    let mut data = view.data;
    let mut reps = Vec::new();
    for (k, r) in data
        .runs
        .iter_mut()
        .filter(|r| r.variant == "baseline" && !r.warmup)
        .enumerate()
    {
        if k < walls.len() {
            r.wall_ns = walls[k];
            r.checked = Some(k) != unverified;
            reps.push(r.rep);
        } else {
            // Reps past the list fail, so only the listed ones are candidates.
            r.status = gapscope::store::RepStatus::Failed;
        }
    }
    (RunView::new(data), reps)
}

fn baseline_run() -> RunView {
    let mut run = SyntheticRun::new();
    run.reps = 6;
    RunView::new(run.build())
}

#[test]
fn the_median_rep_is_the_median_wall_of_the_verified_reps_and_the_timeline_says_which() {
    let tmp = tempfile::tempdir().unwrap();
    // Five reps; the one of median wall (3 ms) did not verify, so of the four left
    // (1, 2, 4, 5 ms) the lower middle one, 2 ms, stands for the variant.
    let (view, reps) = with_walls(
        baseline_run(),
        &[5_000_000, 1_000_000, 3_000_000, 2_000_000, 4_000_000],
        Some(2),
    );
    let pick: &RunRow = view.representative_rep("baseline").unwrap();
    assert_eq!(pick.rep, reps[3]);
    assert_eq!(view.measured_reps("baseline").len(), 4);
    let svg = svg_of(&plot::timeline::Timeline, &view, tmp.path());
    assert!(
        svg.contains(&format!(
            "baseline — rep {} (#{}), wall 2.00 ms, the lower of the two middle of 4 reps",
            pick.rep, pick.iteration
        )),
        "{}",
        texts(&svg)
            .iter()
            .map(|t| t.1.clone())
            .collect::<Vec<_>>()
            .join("\n")
    );
    // An odd count: the median itself.
    let (view, reps) = with_walls(baseline_run(), &[5_000_000, 1_000_000, 3_000_000], None);
    assert_eq!(view.representative_rep("baseline").unwrap().rep, reps[2]);
    let svg = svg_of(&plot::timeline::Timeline, &view, tmp.path());
    assert!(svg.contains("wall 3.00 ms, the median of 3 reps"));
}

/// One rep with `n` spans of 1 µs under its root, back to back on one thread.
fn many_spans(n: u64) -> RunView {
    let mut run = SyntheticRun::new();
    run.reps = 1;
    run.warmups = 0;
    run.variants.truncate(1);
    let mut data = run.build();
    let rep = data.runs[0].rep;
    let root = data
        .spans
        .iter()
        .find(|s| s.rep == rep && s.parent_id.is_none())
        .unwrap()
        .clone();
    data.spans
        .retain(|s| s.rep != rep || s.span_id == root.span_id);
    let mut root = root;
    root.end_ns = root.start_ns + n * 1_000;
    root.duration_ns = n * 1_000;
    root.self_ns = 0;
    data.runs[0].wall_ns = root.duration_ns;
    data.runs[0].span_rows = None;
    let first = root.span_id + 1;
    for i in 0..n {
        let start = root.start_ns + i * 1_000;
        data.spans.push(SpanRow {
            span_id: first + i,
            parent_id: Some(root.span_id),
            name: format!("item{}", i % 3).into(),
            start_ns: start,
            end_ns: start + 1_000,
            duration_ns: 1_000,
            self_ns: 1_000,
            ..root.clone()
        });
    }
    data.spans.retain(|s| s.rep == rep);
    data.spans[0] = root;
    RunView::new(data)
}

#[test]
fn a_rep_of_many_narrow_spans_is_drawn_in_marks_bounded_by_pixels() {
    let tmp = tempfile::tempdir().unwrap();
    let view = many_spans(100_000);
    let r = plot::render(
        &plot::timeline::Timeline,
        &view,
        tmp.path(),
        &[ImageFormat::Svg, ImageFormat::Png],
    )
    .unwrap();
    let svg = std::fs::read_to_string(tmp.path().join("timeline.svg")).unwrap();
    // 1,400 pixels wide: a few thousand elements at most, not 100,000 rectangles.
    let rects = svg.matches("<rect").count();
    assert!(rects < 5_000, "{rects} rectangles");
    // Every span but a column's lone one is merged, and the note says how many.
    let merged: usize = r
        .notes
        .0
        .iter()
        .find_map(|n| {
            n.strip_prefix("baseline: ")?
                .split_once(" spans or GPU intervals narrower than a pixel are drawn merged")?
                .0
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("{:?}", r.notes));
    assert!((99_990..=100_000).contains(&merged), "{merged}");
}
