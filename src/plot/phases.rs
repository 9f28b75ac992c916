//! Phases: one stacked bar per variant of the median self time of every span on the
//! critical path (the thread of `prove`), so the bar adds up to the wall time and a
//! wrapper's unattributed time is a striped segment of its own. Time spent on other
//! threads (workers, the background drop thread) is a thin second bar. A table below
//! gives every segment's median per variant and its delta against the baseline.

use std::collections::BTreeMap;

use plotters::prelude::*;

use super::canvas::*;
use super::input::{median, PlotInput};
use super::{chart_backends, header, run_line, Chart, Notes};
use crate::plot::input::family;

pub struct Phases;

/// Median self time per span family, on the critical path and elsewhere.
#[derive(Debug, Default, Clone)]
pub(crate) struct VariantPhases {
    pub variant: String,
    pub reps: usize,
    pub critical: BTreeMap<String, f64>,
    pub other: BTreeMap<String, f64>,
    pub wall_ns: Option<f64>,
}

pub(crate) fn variant_phases(input: &PlotInput, variant: &str) -> VariantPhases {
    let reps = input.measured_reps(variant);
    let mut crit: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut other: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for (i, r) in reps.iter().enumerate() {
        let root = input.root_thread(r.rep);
        for s in input.spans_of(r.rep) {
            let map = if Some(s.thread_id) == root {
                &mut crit
            } else {
                &mut other
            };
            let v = map.entry(family(&s.name).into_owned()).or_default();
            // A family absent from earlier reps counts as zero there.
            v.resize(i + 1, 0.0);
            v[i] += s.self_ns as f64;
        }
    }
    let finish = |m: BTreeMap<String, Vec<f64>>| {
        m.into_iter()
            .map(|(k, mut v)| {
                v.resize(reps.len(), 0.0);
                (k, median(&v).unwrap_or(0.0))
            })
            .collect()
    };
    let walls: Vec<f64> = reps.iter().map(|r| r.wall_ns as f64).collect();
    VariantPhases {
        variant: variant.to_string(),
        reps: reps.len(),
        critical: finish(crit),
        other: finish(other),
        wall_ns: median(&walls),
    }
}

/// A segment's label: a wrapper's self time is its unattributed part.
pub(crate) fn segment_label(input: &PlotInput, name: &str) -> String {
    if input.is_wrapper(name) {
        format!("{name} (unattributed)")
    } else {
        name.to_string()
    }
}

const LABEL_W: i32 = 190;
const RIGHT_W: i32 = 250;
const BAR_H: i32 = 34;
const OTHER_H: i32 = 16;
const ROW_H: i32 = 22;

impl Phases {
    fn model(&self, input: &PlotInput) -> (Vec<VariantPhases>, Vec<String>, Vec<String>) {
        let phases: Vec<VariantPhases> = input
            .variants()
            .iter()
            .map(|v| variant_phases(input, v))
            .collect();
        let order = input.span_order();
        let pick = |f: &dyn Fn(&VariantPhases) -> &BTreeMap<String, f64>| -> Vec<String> {
            let mut names: Vec<String> = order
                .iter()
                .filter(|n| {
                    phases
                        .iter()
                        .any(|p| f(p).get(*n).is_some_and(|&v| v > 0.0))
                })
                .cloned()
                .collect();
            for p in &phases {
                for (n, &v) in f(p) {
                    if v > 0.0 && !names.contains(n) {
                        names.push(n.clone());
                    }
                }
            }
            names
        };
        let crit = pick(&|p| &p.critical);
        let other = pick(&|p| &p.other);
        (phases, crit, other)
    }

    fn draw<DB>(&self, input: &PlotInput, c: &Canvas<'_, DB>) -> Drawn<Notes>
    where
        DB: DrawingBackend,
        DB::ErrorType: 'static,
    {
        let (w, _) = c.size();
        let mut notes = Notes::default();
        let (phases, crit, other) = self.model(input);
        let mut y = header(
            c,
            "Where the time went: self time per span, median over reps",
            &format!(
                "{} · bar = critical path ({} thread); striped = a wrapper's unattributed time",
                run_line(input),
                "prove"
            ),
        )?;
        let with_data: Vec<&VariantPhases> = phases.iter().filter(|p| p.reps > 0).collect();
        for p in phases.iter().filter(|p| p.reps == 0) {
            notes.push(format!(
                "variant {} has no verified measured reps: nothing to draw",
                p.variant
            ));
        }
        if with_data.is_empty() || crit.is_empty() {
            notes.push("no spans recorded for any verified rep");
            c.text(
                "no spans recorded for any verified rep",
                (20, y + 20),
                LABEL_PX,
                WORSE,
                Align::Left,
            )?;
            return Ok(notes);
        }
        let base = with_data[0];
        let max_ns = with_data
            .iter()
            .flat_map(|p| {
                [
                    p.critical.values().sum::<f64>(),
                    p.other.values().sum::<f64>(),
                    p.wall_ns.unwrap_or(0.0),
                ]
            })
            .fold(1.0, f64::max);
        let unit = TimeUnit::for_max(max_ns);
        let x = Axis::new(0.0, unit.value(max_ns) * 1.02, LABEL_W, w - RIGHT_W);
        y += 10;
        let top = y;
        for (vi, p) in with_data.iter().enumerate() {
            let name = fit(
                &format!("{} ({} reps)", p.variant, p.reps),
                LABEL_PX,
                LABEL_W - 20,
            );
            c.text(&name, (12, y + BAR_H / 2), LABEL_PX, INK, Align::Left)?;
            let mut at = 0.0;
            for n in &crit {
                let v = p.critical.get(n).copied().unwrap_or(0.0);
                if v <= 0.0 {
                    continue;
                }
                let (x0, x1) = (x.px(unit.value(at)), x.px(unit.value(at + v)));
                segment(c, input, n, (x0, y), (x1, y + BAR_H))?;
                let label = fit(n, SMALL_PX, x1 - x0 - 6);
                if !label.is_empty() && !label.ends_with('…') {
                    c.text(
                        &label,
                        ((x0 + x1) / 2, y + BAR_H / 2),
                        SMALL_PX,
                        INK,
                        Align::Center,
                    )?;
                }
                at += v;
            }
            // The bar's end, annotated with the median wall time and its delta.
            let end = x.px(unit.value(at)) + 8;
            let wall = p.wall_ns.unwrap_or(at);
            c.text(
                &fmt_ns(wall),
                (end, y + BAR_H / 2 - 8),
                LABEL_PX,
                INK,
                Align::Left,
            )?;
            if vi > 0 {
                let b = base.wall_ns.unwrap_or(0.0);
                let d = wall - b;
                c.text(
                    &fmt_delta(d, b),
                    (end, y + BAR_H / 2 + 9),
                    SMALL_PX,
                    delta_color(d, b),
                    Align::Left,
                )?;
            } else {
                c.text(
                    "baseline",
                    (end, y + BAR_H / 2 + 9),
                    SMALL_PX,
                    MUTED,
                    Align::Left,
                )?;
            }
            y += BAR_H + 4;
            if !other.is_empty() {
                c.text(
                    "other threads",
                    (28, y + OTHER_H / 2),
                    SMALL_PX,
                    MUTED,
                    Align::Left,
                )?;
                let mut at = 0.0;
                for n in &other {
                    let v = p.other.get(n).copied().unwrap_or(0.0);
                    if v <= 0.0 {
                        continue;
                    }
                    let (x0, x1) = (x.px(unit.value(at)), x.px(unit.value(at + v)));
                    segment(c, input, n, (x0, y), (x1, y + OTHER_H))?;
                    at += v;
                }
                if at > 0.0 {
                    c.text(
                        &fmt_ns(at),
                        (x.px(unit.value(at)) + 8, y + OTHER_H / 2),
                        SMALL_PX,
                        MUTED,
                        Align::Left,
                    )?;
                }
                y += OTHER_H;
            }
            y += 18;
        }
        // Time axis.
        let ticks = x.ticks(8);
        let step = ticks.get(1).map(|t| t - ticks[0]).unwrap_or(1.0);
        for t in &ticks {
            let px = x.px(*t);
            c.line(&[(px, top - 4), (px, y - 10)], GRID.mix(0.8), 1)?;
            c.line(&[(px, y - 10), (px, y - 5)], INK.mix(1.0), 1)?;
            c.text(
                &unit.tick(*t, step),
                (px, y + 5),
                SMALL_PX,
                INK,
                Align::Center,
            )?;
        }
        c.text(
            &format!("time ({})", unit.suffix),
            (w - RIGHT_W + 10, y + 5),
            SMALL_PX,
            INK,
            Align::Left,
        )?;
        y += 34;
        // Table: one row per segment, medians per variant, deltas against the baseline.
        let name_w = 300;
        let col_w = 120;
        let delta_w = 190;
        let mut cols = vec![];
        let mut cx = 12 + name_w;
        for _ in &with_data {
            cols.push(cx);
            cx += col_w;
        }
        let delta_x = cx + 10;
        c.text(
            "span (median self time)",
            (12, y),
            SMALL_PX,
            MUTED,
            Align::Left,
        )?;
        for (p, &cx) in with_data.iter().zip(&cols) {
            c.text(
                &fit(&p.variant, SMALL_PX, col_w - 8),
                (cx + col_w - 8, y),
                SMALL_PX,
                MUTED,
                Align::Right,
            )?;
        }
        for (k, p) in with_data.iter().enumerate().skip(1) {
            let label = fit(
                &format!("Δ {} − {}", p.variant, base.variant),
                SMALL_PX,
                delta_w - 8,
            );
            c.text(
                &label,
                (delta_x + (k as i32 - 1) * delta_w, y),
                SMALL_PX,
                MUTED,
                Align::Left,
            )?;
        }
        y += ROW_H;
        let rows: Vec<(&String, bool)> = crit
            .iter()
            .map(|n| (n, true))
            .chain(other.iter().map(|n| (n, false)))
            .collect();
        for (n, critical) in rows {
            let value = |p: &VariantPhases| {
                if critical {
                    p.critical.get(n)
                } else {
                    p.other.get(n)
                }
                .copied()
            };
            let get = |p: &VariantPhases| value(p).unwrap_or(0.0);
            segment(c, input, n, (14, y - 7), (28, y + 7))?;
            let mut label = segment_label(input, n);
            if !critical {
                label.push_str(" · other threads");
            }
            c.text(
                &fit(&label, LABEL_PX, name_w - 26),
                (36, y),
                LABEL_PX,
                INK,
                Align::Left,
            )?;
            for (p, &cx) in with_data.iter().zip(&cols) {
                let shown = value(p).map(fmt_ns).unwrap_or_else(|| "—".into());
                c.text(&shown, (cx + col_w - 8, y), LABEL_PX, INK, Align::Right)?;
            }
            for (k, p) in with_data.iter().enumerate().skip(1) {
                let (b, v) = (get(base), get(p));
                let d = v - b;
                c.text(
                    &fit(&fmt_delta(d, b), LABEL_PX, delta_w - 8),
                    (delta_x + (k as i32 - 1) * delta_w, y),
                    LABEL_PX,
                    delta_color(d, b),
                    Align::Left,
                )?;
            }
            y += ROW_H;
        }
        Ok(notes)
    }
}

/// One segment: solid in the span's colour, or striped when it is a wrapper's own time.
fn segment<DB>(
    c: &Canvas<'_, DB>,
    input: &PlotInput,
    name: &str,
    a: (i32, i32),
    b: (i32, i32),
) -> Drawn
where
    DB: DrawingBackend,
    DB::ErrorType: 'static,
{
    if b.0 <= a.0 {
        return Ok(());
    }
    if input.is_wrapper(name) {
        c.hatch(a, b, GHOST)?;
        // A light edge keeps neighbouring striped segments apart.
        c.line(&[(a.0, a.1), (a.0, b.1)], WHITE.mix(1.0), 2)
    } else {
        c.rect(a, b, span_color(name).to_rgba())?;
        c.outline(a, b, WHITE.mix(1.0), 1)
    }
}

impl Chart for Phases {
    fn name(&self) -> &'static str {
        "phases"
    }
    fn title(&self) -> &'static str {
        "Where the time went"
    }
    fn caption(&self) -> &'static str {
        "Median self time of each span on the critical path, stacked per variant; striped segments are time inside a wrapper that no child span accounts for."
    }
    fn size(&self, input: &PlotInput) -> (u32, u32) {
        let (phases, crit, other) = self.model(input);
        let bars = phases.len().max(1) as u32
            * (BAR_H + 4 + 18 + if other.is_empty() { 0 } else { OTHER_H }) as u32;
        let table = (crit.len() + other.len() + 1) as u32 * ROW_H as u32;
        (1200, 66 + 10 + bars + 34 + table + 30)
    }
    chart_backends!();
}
