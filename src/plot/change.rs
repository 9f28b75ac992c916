//! Change: where the time went between a baseline and a candidate, one horizontal bar
//! per span: the change of its self time on the critical path, with its interval as a
//! whisker, coloured by verdict, under a first bar for the end-to-end change. The rows
//! are plain data ([`ChangeRow`], a [`SpanChange`] each) that the report fills from a
//! diff, so this chart knows nothing of the analysis; it draws what it is given.

use plotters::prelude::*;

use super::canvas::*;
use super::verdict::{signed, verdict_color};
pub use super::verdict::{Judged, SpanChange};
use super::{chart_backends, header, run_line, Chart, Notes};
use crate::store::RunView;
use crate::units::TimeUnit;

/// One bar: a label and the diff's change (statistic, interval, verdict and its words,
/// printed right of the bar, e.g. "improved (q=0.008)").
#[derive(Debug, Clone, PartialEq)]
pub struct ChangeRow {
    pub label: String,
    pub change: SpanChange,
    /// Where the whisker's interval is not the change's own (a row whose change has none
    /// drawn with the interval of its share of end to end): which it is, in words printed
    /// beside it, so that it is not taken for the table's interval of the change.
    pub interval_words: Option<String>,
}

/// The chart: a title naming the comparison, the end-to-end row, then the span rows.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub title: String,
    /// The change statistic's name ("ratio of geometric means").
    pub statistic: String,
    pub rows: Vec<ChangeRow>,
    /// Spans whose change is not drawn (the chart keeps a fixed number of rows): named in
    /// one line under the bars, "+N other spans".
    pub left_out: usize,
}

const ROW_H: i32 = 38;
const LABEL_W: i32 = 260;
const VERDICT_W: i32 = 300;

impl Change {
    fn draw<DB>(&self, input: &RunView, c: &Canvas<'_, DB>) -> Drawn<Notes>
    where
        DB: DrawingBackend,
        DB::ErrorType: 'static,
    {
        // The chart top to bottom on one axis: header, the axis scaled to the resolved
        // changes, then one row per change (label, bar, cut marks, verdict). The rows share
        // the axis and the notes, hence one function.
        let (w, _) = c.size();
        let mut notes = Notes::default();
        let top = header(
            c,
            &self.title,
            &format!(
                "{} · bar = the diff's change, the {}; whisker = its 95% interval; colour = its verdict",
                run_line(input),
                self.statistic
            ),
        )? + 24;
        if self.rows.is_empty() {
            notes.push("nothing to draw: no span's time changed");
            return Ok(notes);
        }
        // The axis is scaled to the resolved changes (every change when none is): a
        // change within noise may be far larger than the one that matters, and its bar
        // is then cut at the edge, its number still printed beside it.
        let resolved: Vec<f64> = self
            .rows
            .iter()
            .filter(|r| matches!(r.change.judged, Judged::Improved | Judged::Regressed))
            .map(|r| r.change.delta_ns.abs())
            .collect();
        let sizes = if resolved.is_empty() {
            self.rows.iter().map(|r| r.change.delta_ns.abs()).collect()
        } else {
            resolved
        };
        let reach_ns = sizes.into_iter().fold(0.0, f64::max).max(1.0) * 1.15;
        let unit = TimeUnit::for_max(reach_ns);
        let reach = unit.value(reach_ns);
        let (x0, x1) = (LABEL_W + 20, w - VERDICT_W - 20);
        let axis = Axis::new(-reach, reach, x0, x1);
        let at = |ns: f64| axis.px(unit.value(ns).clamp(-reach, reach));
        let bottom = top + self.rows.len() as i32 * ROW_H;
        c.time_ticks(&axis, &unit, 6, (top - 6, bottom), GRID.into(), top - 16)?;
        c.text(
            &format!("change ({})", unit.suffix),
            (x0 - 12, top - 16),
            SMALL_PX,
            MUTED,
            Align::Right,
        )?;
        let zero = axis.px(0.0);
        for (i, r) in self.rows.iter().enumerate() {
            let y = top + i as i32 * ROW_H + ROW_H / 2;
            if i == 1 {
                c.line(
                    &[(20, y - ROW_H / 2), (w - 20, y - ROW_H / 2)],
                    MUTED.into(),
                    1,
                )?;
            }
            let r_change = &r.change;
            let color = verdict_color(r_change.judged);
            if let Some(note) = super::verdict::Changes::disagreement_note(&r.label, r_change) {
                notes.push(note);
            }
            c.text(
                &fit(&r.label, LABEL_PX, LABEL_W),
                (20, y),
                LABEL_PX,
                INK,
                Align::Left,
            )?;
            let end = at(r_change.delta_ns);
            let (a, b) = (zero.min(end), zero.max(end).max(zero.min(end) + 1));
            c.rect((a, y - 8), (b, y + 8), color.into())?;
            // A bar longer than the axis is cut at its edge: two white slashes across its
            // end say so, and its value is printed beside the verdict.
            let cut = r_change.delta_ns.abs() > reach_ns;
            if cut {
                notes.push(format!(
                    "{}: its bar ({}) is longer than the axis and cut at its edge",
                    r.label,
                    signed(r_change.delta_ns)
                ));
                let edge = if r_change.delta_ns > 0.0 {
                    b - 10
                } else {
                    a + 4
                };
                for dx in [0, 5] {
                    c.line(
                        &[(edge + dx, y + 9), (edge + dx + 6, y - 9)],
                        WHITE.into(),
                        2,
                    )?;
                }
            }
            // A whisker past the axis ends in an arrowhead at the edge instead of a cap,
            // and its whole interval is printed beside it.
            if let Some((lo, hi)) = r_change.interval_ns {
                let (l, h) = (at(lo), at(hi));
                c.line(&[(l, y), (h, y)], INK.into(), 1)?;
                for (x, past, out) in [(l, lo < -reach_ns, -1), (h, hi > reach_ns, 1)] {
                    if past {
                        c.line(
                            &[(x - 6 * out, y - 5), (x, y), (x - 6 * out, y + 5)],
                            INK.into(),
                            2,
                        )?;
                    } else {
                        c.line(&[(x, y - 5), (x, y + 5)], INK.into(), 1)?;
                    }
                }
                if lo < -reach_ns || hi > reach_ns {
                    notes.push(format!(
                        "{}: its interval [{}, {}] runs past the axis: its whisker ends in an \
                         arrowhead at the edge",
                        r.label,
                        signed(lo),
                        signed(hi)
                    ));
                }
            }
            // Beside the bar, two lines: the change and its whole interval (printed in
            // full, so a bar or whisker cut at the axis keeps its numbers), then the
            // verdict.
            let value = match r_change.interval_ns {
                Some((lo, hi)) => format!(
                    "{} [{}, {}]",
                    signed(r_change.delta_ns),
                    signed(lo),
                    signed(hi)
                ),
                None => signed(r_change.delta_ns),
            };
            let value = match &r.interval_words {
                Some(w) => {
                    notes.push(format!("{}: its whisker is {w}", r.label));
                    format!("{value} ({w})")
                }
                None => value,
            };
            c.text(&value, (x1 + 16, y - 8), SMALL_PX, INK, Align::Left)?;
            c.text(
                &fit(&r_change.verdict, SMALL_PX, VERDICT_W),
                (x1 + 16, y + 8),
                SMALL_PX,
                MUTED,
                Align::Left,
            )?;
        }
        c.line(&[(zero, top - 6), (zero, bottom)], INK.into(), 1)?;
        if self.left_out > 0 {
            c.text(
                &format!(
                    "+{} other spans not drawn: the diff's table has the change of every span",
                    self.left_out
                ),
                (20, bottom + 14),
                SMALL_PX,
                MUTED,
                Align::Left,
            )?;
        }
        Ok(notes)
    }
}

impl Chart for Change {
    fn name(&self) -> &'static str {
        "change"
    }
    fn title(&self) -> &'static str {
        "Where the time went: the change"
    }
    fn caption(&self) -> &'static str {
        "The end-to-end change, then each span's change of self time on the critical path, resolved changes first: coloured by the diff's verdict: green improved, red regressed, grey equivalent, amber inconclusive (too few reps, an interval across a floor, or on one side only); a bar longer than the axis, which is scaled to the resolved changes, is cut there, marked with two slashes, and its value printed beside it; the whisker is the change's interval (95%, or the false-coverage-adjusted level of a change the diff names, as its table says), ending in an arrowhead where it runs past the axis; beside each bar, the change and its whole interval, then the verdict."
    }
    fn size(&self, _input: &RunView) -> (u32, u32) {
        (
            1200,
            (66 + 24
                + self.rows.len().max(1) as i32 * ROW_H
                + 30
                + 22 * i32::from(self.left_out > 0)) as u32,
        )
    }
    chart_backends!();
}
