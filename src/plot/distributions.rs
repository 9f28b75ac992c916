//! Distributions: one small panel per span (and per wrapper's unattributed time) with
//! each variant's reps as points over a box (quartiles, whiskers to min and max), so
//! the noise behind a median is visible. The y axis is fitted to the data, not to zero:
//! the spread is what this chart is for. Each panel's label gives every candidate's
//! change as the diff computed it for that span and measure ([`Changes`]), relative to
//! the baseline and coloured by the diff's verdict.

use plotters::prelude::*;

use super::canvas::*;
use super::verdict::{percent, signed, verdict_color, Changes, Quantity, SpanChange};
use super::{chart_backends, header, run_line, Chart, Notes};
use crate::stats::quantile;
use crate::store::{RunView, SpanTime};

/// The chart, with the diffs' changes its labels print.
#[derive(Debug, Clone, Default)]
pub struct Distributions {
    pub changes: Changes,
}

const COLS: usize = 4;
const PANEL_W: i32 = 295;
const PANEL_H: i32 = 230;

/// One panel: a metric and each variant's per-rep values (ns).
#[derive(Clone)]
struct Metric {
    /// The span (family) name and which of its times.
    name: String,
    measure: SpanTime,
    label: String,
    values: Vec<(String, Vec<f64>)>,
}

/// The diff's quantity a panel shows.
fn quantity(m: SpanTime) -> Quantity {
    match m {
        SpanTime::Total => Quantity::Total,
        SpanTime::SelfTime => Quantity::SelfTime,
        SpanTime::Unattributed => Quantity::Unattributed,
    }
}

/// "candidate +4.2%": a candidate's change as the panel labels it.
pub fn label_text(candidate: &str, c: &SpanChange) -> String {
    match c.relative {
        Some(r) => format!("{candidate} {}", percent(r)),
        None => format!("{candidate} {}", signed(c.delta_ns)),
    }
}

/// Most panels drawn: a run with thousands of span names keeps the ones with the most
/// time (largest median of any variant), in span order; the rest are named by count.
const MAX_PANELS: usize = 48;

/// The panels drawn and how many span times were left out.
fn shown_metrics(input: &RunView) -> (Vec<Metric>, usize) {
    // Made once per view: the chart is asked for its size, then drawn once per format.
    let ms = (*input.memo("distributions metrics", || metrics(input))).clone();
    if ms.len() <= MAX_PANELS {
        return (ms, 0);
    }
    let size = |m: &Metric| {
        m.values
            .iter()
            .filter_map(|(_, v)| crate::stats::median(v))
            .fold(0.0, f64::max)
    };
    let mut order: Vec<usize> = (0..ms.len()).collect();
    order.sort_by(|&a, &b| size(&ms[b]).total_cmp(&size(&ms[a])));
    let keep: std::collections::BTreeSet<usize> = order[..MAX_PANELS].iter().copied().collect();
    let left = ms.len() - MAX_PANELS;
    let shown = ms
        .into_iter()
        .enumerate()
        .filter(|(i, _)| keep.contains(i))
        .map(|(_, m)| m)
        .collect();
    (shown, left)
}

fn metrics(input: &RunView) -> Vec<Metric> {
    let variants = input.variants();
    let mut out = Vec::new();
    for name in input.span_order() {
        for (m, label) in input.span_measures(&name, " (unattributed)") {
            let values: Vec<(String, Vec<f64>)> = variants
                .iter()
                .map(|v| {
                    (
                        v.clone(),
                        input
                            .per_rep(v, &name, m)
                            .iter()
                            .map(|&(_, ns)| ns as f64)
                            .collect(),
                    )
                })
                .collect();
            if values.iter().any(|(_, v)| !v.is_empty()) {
                out.push(Metric {
                    name: name.clone(),
                    measure: m,
                    label,
                    values,
                });
            }
        }
    }
    out
}

impl Distributions {
    fn draw<DB>(&self, input: &RunView, c: &Canvas<'_, DB>) -> Drawn<Notes>
    where
        DB: DrawingBackend,
        DB::ErrorType: 'static,
    {
        let mut notes = Notes::default();
        let y0 = header(
            c,
            "Distributions: every measured rep per span and variant",
            &match self.changes.statistic() {
                Some(stat) => format!(
                    "{} · points = reps, box = quartiles, whiskers = min to max · label = the diff's change ({stat}) over the baseline median, coloured by its verdict",
                    run_line(input)
                ),
                None => format!(
                    "{} · points = reps, box = quartiles, whiskers = min to max",
                    run_line(input)
                ),
            },
        )?;
        let (ms, left) = shown_metrics(input);
        if left > 0 {
            notes.push(format!(
                "+{left} other span times not drawn: the {MAX_PANELS} with the largest median \
                 are; the diff's tables have every one"
            ));
        }
        if ms.is_empty() {
            let msg = "no spans recorded for any verified rep";
            c.text(msg, (20, y0 + 20), LABEL_PX, WORSE, Align::Left)?;
            notes.push(msg);
            return Ok(notes);
        }
        for v in input.variants() {
            if input.measured_reps(&v).len() < 2 {
                notes.push(format!("variant {v} has fewer than 2 verified measured reps: its spread cannot be seen"));
            }
        }
        let mut unlabelled = Vec::new();
        for (i, m) in ms.iter().enumerate() {
            let (col, row) = ((i % COLS) as i32, (i / COLS) as i32);
            let (px0, py0) = (10 + col * PANEL_W, y0 + row * PANEL_H);
            let labels = self.labels(m, &mut notes);
            if labels.is_empty() && !self.changes.candidates.is_empty() {
                unlabelled.push(m.label.clone());
            }
            self.panel(c, m, &labels, (px0, py0))?;
        }
        if !unlabelled.is_empty() {
            notes.push(format!(
                "distributions: no change printed for {} (the diff compares spans grouped \
                 by index one by one, or has no comparison of it)",
                unlabelled.join(", ")
            ));
        }
        Ok(notes)
    }

    /// Each candidate's change of the panel's metric, as the diff computed it.
    fn labels(&self, m: &Metric, notes: &mut Notes) -> Vec<(String, RGBColor)> {
        self.changes
            .candidates
            .iter()
            .filter_map(|v| {
                let ch = v.spans.get(&(m.name.clone(), quantity(m.measure)))?;
                if let Some(n) =
                    Changes::disagreement_note(&format!("{} {}", v.candidate, m.label), ch)
                {
                    notes.push(n);
                }
                Some((label_text(&v.candidate, ch), verdict_color(ch.judged)))
            })
            .collect()
    }

    fn panel<DB>(
        &self,
        c: &Canvas<'_, DB>,
        m: &Metric,
        sub: &[(String, RGBColor)],
        (x0, y0): (i32, i32),
    ) -> Drawn
    where
        DB: DrawingBackend,
        DB::ErrorType: 'static,
    {
        // One metric's panel: title, legend, the value axis and its ticks, then a box plot
        // per variant, all placed in the same plot area and axis.
        let inner_w = PANEL_W - 20;
        c.text(
            &fit(&m.label, LABEL_PX, inner_w),
            (x0 + 8, y0 + 14),
            LABEL_PX,
            INK,
            Align::Left,
        )?;
        let mut sx = x0 + 8;
        for (s, color) in sub {
            let s = fit(s, SMALL_PX, x0 + inner_w - 50 - sx);
            c.text(&s, (sx, y0 + 34), SMALL_PX, *color, Align::Left)?;
            sx += text_width(&s, SMALL_PX) + 12;
        }
        let all: Vec<f64> = m
            .values
            .iter()
            .flat_map(|(_, v)| v.iter().copied())
            .collect();
        let (lo, hi) = all
            .iter()
            .fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
        let pad = ((hi - lo) * 0.08).max(hi.abs() * 0.01).max(1.0);
        let unit = TimeUnit::for_max(hi);
        let plot = (x0 + 62, y0 + 48, x0 + PANEL_W - 14, y0 + PANEL_H - 36);
        let y = Axis::new(
            unit.value((lo - pad).max(0.0)),
            unit.value(hi + pad),
            plot.3,
            plot.1,
        );
        c.outline((plot.0, plot.1), (plot.2, plot.3), INK.mix(0.35), 1)?;
        let ticks = y.ticks(4);
        let step = ticks.get(1).map(|t| t - ticks[0]).unwrap_or(1.0);
        for t in &ticks {
            let ty = y.px(*t);
            c.line(&[(plot.0, ty), (plot.2, ty)], GRID.mix(1.0), 1)?;
            c.text(
                &unit.tick(*t, step),
                (plot.0 - 5, ty),
                SMALL_PX - 2,
                INK,
                Align::Right,
            )?;
        }
        // The axis unit at the right of the subtitle row, clear of the tick labels.
        c.text(
            &format!("in {}", unit.suffix),
            (plot.2, y0 + 34),
            SMALL_PX - 1,
            MUTED,
            Align::Right,
        )?;
        let n = m.values.len().max(1) as i32;
        let slot = (plot.2 - plot.0) / n;
        for (k, (v, vals)) in m.values.iter().enumerate() {
            let cx = plot.0 + slot * k as i32 + slot / 2;
            let color = variant_color(k);
            c.text(
                &fit(v, SMALL_PX - 1, slot - 4),
                (cx, plot.3 + 12),
                SMALL_PX - 1,
                INK,
                Align::Center,
            )?;
            if vals.is_empty() {
                c.text(
                    "no reps",
                    (cx, (plot.1 + plot.3) / 2),
                    SMALL_PX - 1,
                    MUTED,
                    Align::Center,
                )?;
                continue;
            }
            let q = |p| {
                quantile(vals, p)
                    .map(|x| y.px(unit.value(x)))
                    .unwrap_or(plot.3)
            };
            let half = (slot / 4).clamp(6, 30);
            // Whisker, box, median.
            c.line(&[(cx, q(0.0)), (cx, q(1.0))], color.mix(0.9), 1)?;
            c.line(
                &[(cx - half / 2, q(0.0)), (cx + half / 2, q(0.0))],
                color.mix(0.9),
                1,
            )?;
            c.line(
                &[(cx - half / 2, q(1.0)), (cx + half / 2, q(1.0))],
                color.mix(0.9),
                1,
            )?;
            c.rect((cx - half, q(0.75)), (cx + half, q(0.25)), color.mix(0.15))?;
            c.outline(
                (cx - half, q(0.75)),
                (cx + half, q(0.25)),
                color.mix(0.9),
                1,
            )?;
            c.line(
                &[(cx - half, q(0.5)), (cx + half, q(0.5))],
                color.mix(1.0),
                3,
            )?;
            // Reps as points, spread sideways in a fixed pattern so equal values stay visible.
            for (i, &val) in vals.iter().enumerate() {
                let jitter = [0, -6, 6, -3, 3, -9, 9][i % 7];
                c.dot(
                    (cx + half + 10 + jitter, y.px(unit.value(val))),
                    3,
                    color.mix(0.85),
                )?;
            }
        }
        Ok(())
    }
}

impl Chart for Distributions {
    fn name(&self) -> &'static str {
        "distributions"
    }
    fn title(&self) -> &'static str {
        "Rep-to-rep spread"
    }
    fn caption(&self) -> &'static str {
        "Every measured rep of every span per variant (points) over its quartiles (box) and range (whiskers); the label gives each candidate's change as the diff computed it (its statistic over the baseline median), coloured by the diff's verdict."
    }
    fn size(&self, input: &RunView) -> (u32, u32) {
        let rows = shown_metrics(input).0.len().div_ceil(COLS).max(1) as i32;
        (
            (20 + COLS as i32 * PANEL_W) as u32,
            (66 + rows * PANEL_H + 10) as u32,
        )
    }
    chart_backends!();
}
