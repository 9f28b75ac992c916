//! Gaps: for every measured rep, the wrapper (the run's phases' `wrapper`, `gpu_prove`
//! for the prover, or the experiment's `gaps.wrapper`) against the inner GPU time, drawn where it happened; the wrapper's
//! time outside it is the striped gap. The seed's 10.2-second ghost is exactly such a gap.
//!
//! Inner GPU time is the GPU's own view where the rep has one: the union of the kernels
//! CUPTI recorded inside the wrapper (`gpu_activity.csv`), which also covers code that
//! records no spans of its own (the upstream prover, an external program). A rep without
//! kernel records falls back to the inner spans: the phases' `inner` (the backend's
//! compute children) or the experiment's `gaps.inner`. A run with no span named like the
//! wrapper gets no chart at all ([`not_drawn`] says why).

use plotters::prelude::*;

use super::canvas::*;
use super::{chart_backends, header, run_line, Chart, Notes};
use crate::stats::median;
pub use crate::store::gaps::fill::{rep_gaps, rep_gaps_of, GapNames, InnerSource, RepGap};
use crate::store::RunView;
use crate::units::fmt_ns_short;

pub struct Gaps;

/// Why the chart is not drawn for this run, in one line: no verified rep has a span
/// named like the wrapper (an external program without `gaps`, or a `gaps.wrapper` that
/// is no span of the run).
pub fn not_drawn(input: &RunView) -> Option<String> {
    let names = GapNames::of(input);
    // With no verified rep at all the chart is drawn, saying so, like every other chart.
    if input
        .variants()
        .iter()
        .all(|v| input.measured_reps(v).is_empty())
    {
        return None;
    }
    let has = input.variants().iter().any(|v| {
        input.measured_reps(v).iter().any(|r| {
            input
                .spans_of(r.rep)
                .iter()
                .any(|s| s.name == names.wrapper)
        })
    });
    if has {
        return None;
    }
    let seen: Vec<String> = input.span_order().into_iter().take(8).collect();
    let seen = if seen.is_empty() {
        "it has none".to_string()
    } else {
        format!("its spans include {}", seen.join(", "))
    };
    Some(if names.configured {
        format!(
            "not drawn: gaps.wrapper = {:?} is no span of any verified rep ({seen}); name one \
             in [workload] gaps",
            names.wrapper
        )
    } else if names.wrapper.is_empty() {
        format!(
            "not drawn: this program's run names no wrapper; add gaps = {{ wrapper = \"SPAN\", \
             inner = [\"SPAN\", …] }} to [workload] ({seen})"
        )
    } else if input.data.meta.workload.is_command() {
        format!(
            "not drawn: this program's run names no wrapper and has no {} span; add \
             gaps = {{ wrapper = \"SPAN\", inner = [\"SPAN\", …] }} to [workload] ({seen})",
            names.wrapper
        )
    } else {
        format!(
            "not drawn: no {} span in any verified rep ({seen})",
            names.wrapper
        )
    })
}

const LABEL_W: i32 = 170;
const RIGHT_W: i32 = 300;
const ROW_H: i32 = 22;
const GROUP_H: i32 = 30;
/// The line under a variant's heading naming what fills its gap.
const FILL_H: i32 = 18;
/// Spans that line names, largest first.
pub const FILLERS_NAMED: usize = 4;

impl Gaps {
    fn draw<DB>(&self, input: &RunView, c: &Canvas<'_, DB>) -> Drawn<Notes>
    where
        DB: DrawingBackend,
        DB::ErrorType: 'static,
    {
        // The gaps chart top to bottom: header and notes, a row of bars per rep of each
        // variant (the wrapper, its inner intervals, the gap and the other children under
        // it), the time axis, then the legend. Every part moves the same y and draws on the
        // same axis.
        let (w, _) = c.size();
        let mut notes = Notes::default();
        let names = GapNames::of(input);
        let outer = names.wrapper.as_str();
        let mut y = header(
            c,
            &format!("Wrapper vs inner GPU time: {outer} against its kernels, per rep"),
            &format!(
                "{} · striped = time inside {outer} with no kernel running (the gap)",
                run_line(input)
            ),
        )?;
        let groups: Vec<(String, Vec<RepGap>)> = input
            .variants()
            .into_iter()
            .map(|v| {
                let g = rep_gaps_of(input, &v, &names);
                (v, g)
            })
            .collect();
        if groups.iter().all(|(_, g)| g.is_empty()) {
            // (`render` checks `not_drawn` first; a chart drawn anyway says it.)
            let msg = format!("no {outer} span recorded in any verified rep: nothing to compare");
            c.text(&msg, (20, y + 20), LABEL_PX, WORSE, Align::Left)?;
            notes.push(msg);
            return Ok(notes);
        }
        if names.configured {
            let seen = input.span_order();
            for n in &names.inner {
                if !seen.iter().any(|s| s == n) {
                    notes.push(format!(
                        "gaps.inner {n:?} is no span of this run: it adds no inner time"
                    ));
                }
            }
        }
        let max_ns = groups
            .iter()
            .flat_map(|(_, g)| g.iter().map(|r| r.outer_ns as f64))
            .fold(1.0, f64::max);
        let unit = TimeUnit::for_max(max_ns);
        let x = Axis::new(0.0, unit.value(max_ns) * 1.02, LABEL_W, w - RIGHT_W);
        y += 8;
        let top = y;
        for (vi, (variant, reps)) in groups.iter().enumerate() {
            let gaps: Vec<f64> = reps.iter().map(|r| r.gap_ns as f64).collect();
            let outers: Vec<f64> = reps.iter().map(|r| r.outer_ns as f64).collect();
            let sources: Vec<String> = [InnerSource::Cupti, InnerSource::Span]
                .into_iter()
                .filter(|s| reps.iter().any(|r| r.source == *s && !r.inner.is_empty()))
                .map(|s| s.describe(&names))
                .collect();
            let head = match (median(&gaps), median(&outers)) {
                (Some(g), Some(o)) => format!(
                    "{variant}: median gap {} of {} {outer} ({:.0}%){}",
                    fmt_ns_short(g),
                    fmt_ns_short(o),
                    100.0 * g / o.max(1.0),
                    if sources.is_empty() {
                        String::new()
                    } else {
                        format!(" · inner: {}", sources.join(" and "))
                    }
                ),
                _ => format!("{variant}: no {outer} span in any verified rep"),
            };
            c.text(
                &fit(&head, LABEL_PX, w - 40),
                (12, y + GROUP_H / 2),
                LABEL_PX,
                variant_color(vi),
                Align::Left,
            )?;
            y += GROUP_H;
            let fill = crate::store::gaps::fill::fillers(input, reps, &names);
            if !fill.is_empty() {
                let named: Vec<String> = fill
                    .iter()
                    .take(FILLERS_NAMED)
                    .map(|f| format!("{} {}", f.name, fmt_ns_short(f.median_ns)))
                    .collect();
                c.text(
                    &fit(
                        &format!(
                            "no-kernel time filled by: {} (each span's self time in the gap, \
                             median per rep; threads at once each count)",
                            named.join(" · ")
                        ),
                        SMALL_PX,
                        w - 40,
                    ),
                    (28, y + FILL_H / 2 - 4),
                    SMALL_PX,
                    INK,
                    Align::Left,
                )?;
            }
            y += FILL_H;
            let without_inner = reps.iter().filter(|r| r.inner.is_empty()).count();
            if without_inner > 0 {
                notes.push(format!(
                    "{variant}: {without_inner} rep(s) have neither CUPTI kernel records nor an inner span ({}) inside {outer}",
                    names.inner_list()
                ));
            }
            for r in reps {
                let (y0, y1) = (y + 3, y + ROW_H - 3);
                c.text(
                    &format!("#{} (rep {})", r.iteration, r.rep),
                    (28, y + ROW_H / 2),
                    SMALL_PX,
                    INK,
                    Align::Left,
                )?;
                let px = |ns: u64| x.px(unit.value(ns as f64));
                // The gap is everything of the wrapper outside the inner intervals.
                let mut at = 0;
                for &(a, b) in &r.inner {
                    c.hatch((px(at), y0), (px(a), y1), GHOST)?;
                    c.rect((px(a), y0), (px(b), y1), INNER_COLOR.to_rgba())?;
                    at = b;
                }
                c.hatch((px(at), y0), (px(r.outer_ns), y1), GHOST)?;
                // Other children as a band along the bottom: the measured part of the gap.
                for (name, a, b) in &r.others {
                    c.rect(
                        (px(*a), y1 - 6),
                        (px(*b).max(px(*a) + 1), y1),
                        span_color(name).to_rgba(),
                    )?;
                }
                c.outline((px(0), y0), (px(r.outer_ns), y1), INK.mix(0.6), 1)?;
                let label = format!(
                    "gap {} ({:.0}%), {} in no span",
                    fmt_ns_short(r.gap_ns as f64),
                    100.0 * r.gap_fraction(),
                    fmt_ns_short(r.unattributed_ns as f64)
                );
                c.text(
                    &label,
                    (px(r.outer_ns) + 8, y + ROW_H / 2),
                    SMALL_PX,
                    INK,
                    Align::Left,
                )?;
                y += ROW_H;
            }
            y += 6;
        }
        c.time_ticks(&x, &unit, 8, (top, y), GRID.mix(0.7), y + 12)?;
        c.text(
            &format!("time since {outer} began ({})", unit.suffix),
            (w - RIGHT_W + 10, y + 12),
            SMALL_PX,
            INK,
            Align::Left,
        )?;
        y += 40;
        let inner_label = format!(
            "inner GPU time: CUPTI kernels, else the inner spans ({})",
            names.inner_list()
        );
        c.rect((20, y - 7), (40, y + 7), INNER_COLOR.to_rgba())?;
        c.text(&inner_label, (48, y), LABEL_PX, INK, Align::Left)?;
        let lx = 48 + text_width(&inner_label, LABEL_PX) + 30;
        c.hatch((lx, y - 7), (lx + 20, y + 7), GHOST)?;
        c.text(
            &format!("gap: {outer} time with no kernel running"),
            (lx + 28, y),
            LABEL_PX,
            INK,
            Align::Left,
        )?;
        // Colours of the other children drawn along the bottom of the bars.
        let mut names: Vec<&str> = Vec::new();
        for (_, reps) in &groups {
            for r in reps {
                for (n, _, _) in &r.others {
                    if !names.contains(&n.as_str()) {
                        names.push(n);
                    }
                }
            }
        }
        if !names.is_empty() {
            y += 24;
            c.text(
                &format!("band under the gap: other {outer} children"),
                (20, y),
                SMALL_PX,
                MUTED,
                Align::Left,
            )?;
            let mut lx =
                20 + text_width(
                    &format!("band under the gap: other {outer} children"),
                    SMALL_PX,
                ) + 16;
            for n in names {
                let wn = 22 + text_width(n, SMALL_PX) + 14;
                if lx + wn > w - 20 {
                    y += 20;
                    lx = 20;
                }
                c.rect((lx, y - 5), (lx + 16, y + 5), span_color(n).to_rgba())?;
                c.text(n, (lx + 22, y), SMALL_PX, INK, Align::Left)?;
                lx += wn;
            }
        }
        Ok(notes)
    }
}

impl Chart for Gaps {
    fn name(&self) -> &'static str {
        "gaps"
    }
    fn title(&self) -> &'static str {
        "Wrapper vs kernels: the gap"
    }
    fn caption(&self) -> &'static str {
        "Each rep's wrapper span (gpu_prove, or the experiment's gaps.wrapper) with its kernels drawn where they ran (CUPTI's kernel records where the rep has them, else the inner spans); the striped remainder is wrapper time no kernel explains."
    }
    fn not_drawn(&self, input: &RunView) -> Option<String> {
        not_drawn(input)
    }
    fn size(&self, input: &RunView) -> (u32, u32) {
        let variants = input.variants();
        let rows: usize = variants.iter().map(|v| input.measured_reps(v).len()).sum();
        (
            1200,
            (66 + 8 + variants.len() as i32 * (GROUP_H + FILL_H + 6) + rows as i32 * ROW_H + 130)
                .max(200) as u32,
        )
    }
    chart_backends!();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The synthetic run's main inner span (the prover's).
    const INNER: &str = "kernels";
    use crate::analysis::synthetic::SyntheticRun;
    use crate::store::lanes::GpuRecords;
    use crate::store::GpuActivityRow;
    use crate::trace::selftime::Coverage;

    /// A synthetic run where the first measured rep has two kernel records inside its
    /// `kernels` span (together half of it, overlapping once) and the others have none.
    #[test]
    fn cupti_kernels_are_the_inner_time_where_a_rep_has_them() {
        let run = SyntheticRun::new();
        let plain = RunView::new(run.build());
        let spans = rep_gaps(&plain, "baseline");
        let first = spans[0].rep;
        let k = plain
            .spans_of(first)
            .into_iter()
            .find(|s| s.name == INNER)
            .unwrap()
            .clone();
        let quarter = (k.end_ns - k.start_ns) / 4;
        let kernel = |a: u64, b: u64| GpuActivityRow {
            rep: first,
            kind: "kernel".into(),
            start_ns: a,
            end_ns: b,
            ..GpuActivityRow::sample()
        };
        let copy = GpuActivityRow {
            kind: "memcpy".into(),
            ..kernel(k.start_ns, k.end_ns)
        };
        // NVTX ranges (`--nvtx` with CUPTI as the tool) are host phases, never inner
        // GPU time, also in a rep that has nothing else.
        let range = |rep: u32| GpuActivityRow {
            rep,
            kind: "nvtx".into(),
            name: INNER.into(),
            ..kernel(k.start_ns, k.end_ns)
        };
        let activity = vec![
            kernel(k.start_ns, k.start_ns + quarter),
            kernel(k.start_ns + quarter / 2, k.start_ns + 2 * quarter),
            copy,
            range(first),
            range(spans[1].rep),
        ];
        let mut gpu = GpuRecords::default();
        gpu.activity = activity;
        let input = RunView::with_gpu(run.build(), gpu);
        let gaps = rep_gaps(&input, "baseline");
        assert_eq!(gaps[0].source, InnerSource::Cupti);
        assert_eq!(
            gaps[0].inner_ns,
            2 * quarter,
            "the union of the kernels, no copies or NVTX ranges"
        );
        assert_eq!(gaps[0].inner.len(), 1);
        // Reps without records keep the span.
        assert_eq!(gaps[1].source, InnerSource::Span);
        assert_eq!(gaps[1].inner_ns, spans[1].inner_ns);
        assert_eq!(spans[0].source, InnerSource::Span);
        assert!(gaps[0].gap_ns > spans[0].gap_ns);
    }

    fn union(v: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
        Coverage::new(v).intervals().to_vec()
    }

    #[test]
    fn overlapping_inner_intervals_count_once() {
        assert_eq!(
            union(vec![(20, 25), (5, 12), (0, 10)]),
            vec![(0, 12), (20, 25)]
        );
        assert_eq!(union(vec![(0, 5), (5, 6)]), vec![(0, 6)]);
        assert_eq!(union(vec![]), vec![]);
    }
}

#[cfg(test)]
#[path = "gaps_tests.rs"]
mod config_tests;
