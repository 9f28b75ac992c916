//! Phases: one stacked bar per variant of the median self time of every span on the
//! critical path (the thread of `prove`), so the bar adds up to the wall time. A
//! wrapper's self time is split in two: the part its children on other threads cover
//! (waiting, drawn pale) and the part no child covers (unattributed, striped). Time spent
//! on other threads (workers, the background drop thread) is a thin second bar. A table
//! below gives every segment's median per variant and its delta against the baseline.

use std::collections::BTreeMap;

use plotters::prelude::*;

use super::canvas::*;
use super::{chart_backends, header, run_line, Chart, Notes};
use crate::prover::spans;
use crate::stats::median;
use crate::store::family;
use crate::store::{RunView, SpanTime};
use crate::units::{fmt_delta, fmt_ns_short};

pub struct Phases;

/// Which part of a span's self time a segment is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Part {
    /// A wrapper waiting while its children run on other threads.
    Waiting,
    /// A wrapper's time that no child covers.
    Unattributed,
    /// A leaf's own time.
    Own,
}

/// One stacked segment: a span family and a part of its self time.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Seg {
    pub name: String,
    pub part: Part,
}

impl Seg {
    pub fn label(&self) -> String {
        match self.part {
            Part::Own => self.name.clone(),
            Part::Waiting => format!("{} (waiting on other threads)", self.name),
            Part::Unattributed => format!("{} (unattributed)", self.name),
        }
    }
}

/// Median self time per segment, on the critical path and elsewhere.
#[derive(Debug, Default, Clone)]
pub(crate) struct VariantPhases {
    pub variant: String,
    pub reps: usize,
    pub critical: BTreeMap<Seg, f64>,
    pub other: BTreeMap<Seg, f64>,
    pub wall_ns: Option<f64>,
}

pub(crate) fn variant_phases(input: &RunView, variant: &str) -> VariantPhases {
    let reps = input.measured_reps(variant);
    let mut crit: BTreeMap<Seg, Vec<f64>> = BTreeMap::new();
    let mut other: BTreeMap<Seg, Vec<f64>> = BTreeMap::new();
    for (i, r) in reps.iter().enumerate() {
        let root = input.root_thread(r.rep);
        for s in input.spans_of(r.rep) {
            let map = if Some(s.thread_id) == root {
                &mut crit
            } else {
                &mut other
            };
            let name = family(&s.name).into_owned();
            let parts = if input.is_wrapper(&name) {
                let none = input.measure(s, SpanTime::Unattributed).min(s.self_ns);
                vec![
                    (Part::Waiting, s.self_ns - none),
                    (Part::Unattributed, none),
                ]
            } else {
                vec![(Part::Own, s.self_ns)]
            };
            for (part, ns) in parts {
                let v = map
                    .entry(Seg {
                        name: name.clone(),
                        part,
                    })
                    .or_default();
                // A segment absent from earlier reps counts as zero there.
                v.resize(i + 1, 0.0);
                v[i] += ns as f64;
            }
        }
    }
    let finish = |m: BTreeMap<Seg, Vec<f64>>| {
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

const LABEL_W: i32 = 190;
const RIGHT_W: i32 = 250;
const BAR_H: i32 = 34;
const OTHER_H: i32 = 16;
const ROW_H: i32 = 22;

impl Phases {
    fn model(&self, input: &RunView) -> (Vec<VariantPhases>, Vec<Seg>, Vec<Seg>) {
        let phases: Vec<VariantPhases> = input
            .variants()
            .iter()
            .map(|v| variant_phases(input, v))
            .collect();
        let order = input.span_order();
        // Segments in tree order, each part of a name together; leftovers after.
        let pick = |f: &dyn Fn(&VariantPhases) -> &BTreeMap<Seg, f64>| -> Vec<Seg> {
            let shown = |seg: &Seg| {
                phases
                    .iter()
                    .any(|p| f(p).get(seg).is_some_and(|&v| v > 0.0))
            };
            let mut segs: Vec<Seg> = order
                .iter()
                .flat_map(|n| {
                    [Part::Waiting, Part::Unattributed, Part::Own].map(|part| Seg {
                        name: n.clone(),
                        part,
                    })
                })
                .filter(|seg| shown(seg))
                .collect();
            for p in &phases {
                for seg in f(p).keys() {
                    if shown(seg) && !segs.contains(seg) {
                        segs.push(seg.clone());
                    }
                }
            }
            segs
        };
        let crit = pick(&|p| &p.critical);
        let other = pick(&|p| &p.other);
        (phases, crit, other)
    }

    fn draw<DB>(&self, input: &RunView, c: &Canvas<'_, DB>) -> Drawn<Notes>
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
                "{} · bar = critical path ({} thread); striped = in no child span; pale = waiting on other threads",
                run_line(input),
                spans::PROVE
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
            // Segments first, then the names that fit inside them, so that no segment
            // is drawn over a neighbour's name.
            let mut labels = Vec::new();
            for n in &crit {
                let v = p.critical.get(n).copied().unwrap_or(0.0);
                if v <= 0.0 {
                    continue;
                }
                let (x0, x1) = (x.px(unit.value(at)), x.px(unit.value(at + v)));
                segment(c, n, (x0, y), (x1, y + BAR_H))?;
                let label = fit(&n.name, SMALL_PX, x1 - x0 - 10);
                if !label.is_empty() && !label.ends_with('…') {
                    labels.push((label, (x0 + x1) / 2));
                }
                at += v;
            }
            for (label, cx) in labels {
                c.text(&label, (cx, y + BAR_H / 2), SMALL_PX, INK, Align::Center)?;
            }
            // The bar's end, annotated with the median wall time and its delta.
            let end = x.px(unit.value(at)) + 8;
            let wall = p.wall_ns.unwrap_or(at);
            c.text(
                &fmt_ns_short(wall),
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
                    segment(c, n, (x0, y), (x1, y + OTHER_H))?;
                    at += v;
                }
                if at > 0.0 {
                    c.text(
                        &fmt_ns_short(at),
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
        for px in c.time_ticks(&x, &unit, 8, (top - 4, y - 10), GRID.mix(0.8), y + 5)? {
            c.line(&[(px, y - 10), (px, y - 5)], INK.mix(1.0), 1)?;
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
        let rows: Vec<(&Seg, bool)> = crit
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
            segment(c, n, (14, y - 7), (28, y + 7))?;
            let mut label = n.label();
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
                let shown = value(p).map(fmt_ns_short).unwrap_or_else(|| "—".into());
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

/// One segment: solid in the span's colour, pale while waiting on other threads,
/// striped where no child span accounts for the time.
fn segment<DB>(c: &Canvas<'_, DB>, seg: &Seg, a: (i32, i32), b: (i32, i32)) -> Drawn
where
    DB: DrawingBackend,
    DB::ErrorType: 'static,
{
    if b.0 <= a.0 {
        return Ok(());
    }
    match seg.part {
        Part::Unattributed => {
            c.hatch(a, b, GHOST)?;
            // A light edge keeps neighbouring striped segments apart.
            c.line(&[(a.0, a.1), (a.0, b.1)], WHITE.mix(1.0), 2)
        }
        Part::Waiting => {
            c.rect(a, b, lighten(span_color(&seg.name), 0.6).to_rgba())?;
            c.outline(a, b, span_color(&seg.name).mix(0.8), 1)
        }
        Part::Own => {
            c.rect(a, b, span_color(&seg.name).to_rgba())?;
            c.outline(a, b, WHITE.mix(1.0), 1)
        }
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
        "Median self time of each span on the critical path, stacked per variant; striped segments are time inside a wrapper that no child span accounts for, pale ones a wrapper waiting on its children on other threads."
    }
    fn size(&self, input: &RunView) -> (u32, u32) {
        let (phases, crit, other) = self.model(input);
        let bars = phases.len().max(1) as u32
            * (BAR_H + 4 + 18 + if other.is_empty() { 0 } else { OTHER_H }) as u32;
        let table = (crit.len() + other.len() + 1) as u32 * ROW_H as u32;
        (1200, 66 + 10 + bars + 34 + table + 30)
    }
    chart_backends!();
}
