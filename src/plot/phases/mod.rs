//! Phases: one stacked bar per variant of the median self time of every span on the
//! critical path (the thread of `prove`), so the bar adds up to the wall time. A
//! wrapper's self time is split in two: the part its children on other threads cover
//! (waiting, drawn pale) and the part no child covers (unattributed, striped). Time spent
//! on other threads (workers, the background drop thread) is a thin second bar. A table
//! below gives every span's median per variant and the diff's change of the same
//! quantity ([`Changes`]: its statistic, coloured by its verdict); the bar's end gives
//! the diff's end-to-end change.
//!
//! The critical path is the diff's: a span is on it when its ancestors on its own thread
//! reach a root span, so a bar adds up to the root's duration and its medians are the
//! ones the diff compares.

mod model;

use std::collections::{BTreeMap, BTreeSet};

use plotters::prelude::*;

use super::canvas::*;
use super::verdict::{change_text, verdict_color, Changes};
use super::{chart_backends, header, run_line, Chart, Notes};
use crate::store::RunView;
use crate::units::fmt_ns_short;
pub(crate) use model::{table_rows, variant_phases, Part, Row, Seg, VariantPhases};

/// The chart, with the diffs' changes it prints.
#[derive(Debug, Clone, Default)]
pub struct Phases {
    pub changes: Changes,
}

const LABEL_W: i32 = 190;
const RIGHT_W: i32 = 250;
const BAR_H: i32 = 34;
const OTHER_H: i32 = 16;
const ROW_H: i32 = 22;

impl Phases {
    /// The bars and the table's segments, made once per view (the chart is asked for its
    /// size, then drawn once per image format).
    fn model(&self, input: &RunView) -> (Vec<VariantPhases>, Vec<Seg>, Vec<Seg>) {
        let key = format!("phases model, baseline {:?}", self.changes.baseline);
        (*input.memo(&key, || self.make_model(input))).clone()
    }

    fn make_model(&self, input: &RunView) -> (Vec<VariantPhases>, Vec<Seg>, Vec<Seg>) {
        // The diffs' baseline first: every Δ is against it.
        let mut variants = input.variants();
        if let Some(b) = &self.changes.baseline {
            if let Some(i) = variants.iter().position(|v| v == b) {
                let b = variants.remove(i);
                variants.insert(0, b);
            }
        }
        let mut phases: Vec<VariantPhases> =
            variants.iter().map(|v| variant_phases(input, v)).collect();
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
            // A set beside the list: a run of many span names has as many segments.
            let mut have: BTreeSet<Seg> = segs.iter().cloned().collect();
            for p in &phases {
                for seg in f(p).keys() {
                    if shown(seg) && have.insert(seg.clone()) {
                        segs.push(seg.clone());
                    }
                }
            }
            segs
        };
        let crit = pick(&|p| &p.critical);
        let other = pick(&|p| &p.other);
        let (crit, other) = model::fold_rest(&mut phases, crit, other);
        (phases, crit, other)
    }

    fn draw<DB>(&self, input: &RunView, c: &Canvas<'_, DB>) -> Drawn<Notes>
    where
        DB: DrawingBackend,
        DB::ErrorType: 'static,
    {
        // The chart, then its table, top to bottom: one bar per variant (segments, the
        // names that fit, the bar's end), the time axis, then the table of medians and
        // changes. Both use the same y, axis and variants compared, hence one function.
        let (w, _) = c.size();
        let mut notes = Notes::default();
        let (phases, crit, other) = self.model(input);
        let mut y = header(
            c,
            "Where the time went: self time per span, median over reps",
            &format!(
                "{} · bar = critical path (spans whose own-thread ancestors reach the root); striped = in no child span; pale = waiting on other threads",
                run_line(input),
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
        for p in &with_data {
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
            // The bar's end, annotated with the median wall time and its delta. The bar
            // stacks the spans' medians, which need not add up to the median of the reps'
            // wall times: where they differ by more than 1%, a tick marks the median wall
            // time and the label gives both.
            let wall = p.wall_ns.unwrap_or(at);
            let end = x.px(unit.value(at.max(wall))) + 8;
            let apart = (wall - at).abs() > 0.01 * wall;
            let label = if apart {
                let w_px = x.px(unit.value(wall));
                c.line(&[(w_px, y - 4), (w_px, y + BAR_H + 4)], INK.into(), 2)?;
                notes.push(format!(
                    "{}: its bar, the spans' median self times stacked ({}), is not its median \
                     end-to-end time ({}, the tick): the median of the reps' sums is not the sum \
                     of the spans' medians",
                    p.variant,
                    fmt_ns_short(at),
                    fmt_ns_short(wall)
                ));
                format!("{} · bar {}", fmt_ns_short(wall), fmt_ns_short(at))
            } else {
                fmt_ns_short(wall)
            };
            c.text(&label, (end, y + BAR_H / 2 - 8), LABEL_PX, INK, Align::Left)?;
            let is_base = self.changes.baseline.as_deref() == Some(p.variant.as_str());
            let said = if is_base {
                Some(("baseline".to_string(), MUTED))
            } else if self.changes.baseline.is_none() {
                None
            } else {
                match self
                    .changes
                    .of(&p.variant)
                    .and_then(|c| c.end_to_end.as_ref())
                {
                    Some((span, ch)) => {
                        if let Some(n) = Changes::disagreement_note(
                            &format!("{} end to end ({span})", p.variant),
                            ch,
                        ) {
                            notes.push(n);
                        }
                        Some((
                            format!("{} {}", change_text(ch), ch.judged.word()),
                            verdict_color(ch.judged),
                        ))
                    }
                    None => Some(("no comparison".to_string(), MUTED)),
                }
            };
            if let Some((text, color)) = said {
                c.text(
                    &fit(&text, SMALL_PX, RIGHT_W - 16),
                    (end, y + BAR_H / 2 + 9),
                    SMALL_PX,
                    color,
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
        // Table: one row per span (and part of a wrapper), medians per variant, and the
        // diff's change of the same quantity against the baseline.
        let name_w = 320;
        let col_w = 110;
        let delta_w = 230;
        let mut cols = vec![];
        let mut cx = 12 + name_w;
        for _ in &with_data {
            cols.push(cx);
            cx += col_w;
        }
        let delta_x = cx + 10;
        let compared: Vec<&VariantPhases> = with_data
            .iter()
            .skip(1)
            .copied()
            .filter(|p| self.changes.of(&p.variant).is_some())
            .collect();
        let statistic = self.changes.statistic();
        if let Some(stat) = &statistic {
            c.text(
                &fit(
                    &format!("Δ = the diff's change, the {stat}, coloured by its verdict (green improved, red regressed, grey equivalent, amber inconclusive)"),
                    SMALL_PX,
                    w - 24,
                ),
                (12, y),
                SMALL_PX,
                MUTED,
                Align::Left,
            )?;
        }
        y += ROW_H;
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
        for (k, p) in compared.iter().enumerate() {
            let label = fit(
                &format!("Δ {} − {}", p.variant, base.variant),
                SMALL_PX,
                delta_w - 8,
            );
            c.text(
                &label,
                (delta_x + k as i32 * delta_w, y),
                SMALL_PX,
                MUTED,
                Align::Left,
            )?;
        }
        for p in with_data.iter().skip(1) {
            if self.changes.baseline.is_some() && self.changes.of(&p.variant).is_none() {
                notes.push(format!(
                    "{}: no comparison with {} (see the phase section): no Δ drawn",
                    p.variant, base.variant
                ));
            }
        }
        y += ROW_H;
        let mut without = false;
        for row in table_rows(&crit, &other) {
            match &row {
                Row::Critical(n) => {
                    let seg = Seg {
                        name: n.clone(),
                        part: Part::Own,
                    };
                    segment(c, &seg, (14, y - 7), (28, y + 7))?;
                }
                Row::Part(seg) => segment(c, seg, (18, y - 5), (28, y + 5))?,
                Row::Other(seg) => segment(c, seg, (14, y - 7), (28, y + 7))?,
            }
            let label_px = if matches!(row, Row::Part(_)) {
                SMALL_PX
            } else {
                LABEL_PX
            };
            c.text(
                &fit(&row.label(), label_px, name_w - 26),
                (36, y),
                label_px,
                INK,
                Align::Left,
            )?;
            for (p, &cx) in with_data.iter().zip(&cols) {
                let shown = row.value(p).map(fmt_ns_short).unwrap_or_else(|| "—".into());
                c.text(&shown, (cx + col_w - 8, y), label_px, INK, Align::Right)?;
            }
            for (k, p) in compared.iter().enumerate() {
                let at = (delta_x + k as i32 * delta_w, y);
                match row.change(&self.changes, base, p) {
                    Some(ch) => {
                        if let Some(n) = Changes::disagreement_note(
                            &format!("{} {}", p.variant, row.label().trim()),
                            ch,
                        ) {
                            notes.push(n);
                        }
                        c.text(
                            &fit(&change_text(ch), LABEL_PX, delta_w - 8),
                            at,
                            LABEL_PX,
                            verdict_color(ch.judged),
                            Align::Left,
                        )?;
                    }
                    None => {
                        if !matches!(row, Row::Part(_)) {
                            without = true;
                        }
                        c.text("—", at, label_px, MUTED, Align::Left)?;
                    }
                }
            }
            y += ROW_H;
        }
        if without && !compared.is_empty() {
            notes.push(
                "phases: rows with Δ — have no comparison of their own in the diff (spans \
                 grouped by index such as synthesis[*], which the diff compares one by one, \
                 or time off the critical path of a span that also runs on it)",
            );
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
        "Median self time of each span on the critical path, stacked per variant; striped segments are time inside a wrapper that no child span accounts for, pale ones a wrapper waiting on its children on other threads. The number at a bar's end is the median end-to-end time; where the stacked medians add up to more than 1% more or less, a tick marks that median and the label gives the bar's length after it (\"1.67 s · bar 1.43 s\"). Beyond 40 span names, those with the least time are summed into one \"+N other names\" segment and row. Every Δ (the bar's end, the table) is the diff's change of the same span and measure, labelled with its statistic and coloured by the diff's verdict."
    }
    fn size(&self, input: &RunView) -> (u32, u32) {
        let (phases, crit, other) = self.model(input);
        let bars = phases.len().max(1) as u32
            * (BAR_H + 4 + 18 + if other.is_empty() { 0 } else { OTHER_H }) as u32;
        let table = (table_rows(&crit, &other).len() + 2) as u32 * ROW_H as u32;
        (1200, 66 + 10 + bars + 34 + table + 30)
    }
    chart_backends!();
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
