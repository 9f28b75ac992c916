//! Timeline: the representative (median-wall) rep of each variant as a Gantt chart. One
//! row per thread, spans nested as in a flame chart (a child one level below its
//! parent), then one row per GPU lane when GPU activity was recorded, and beneath them
//! ([`super::lanes`]) each GPU's NVML utilisation and the process's busy cores. All
//! variants share one time axis.
//!
//! The rep drawn is [`RunView::representative_rep`]: the measured verified rep whose
//! wall time is the median (for an even count, the lower of the two middle ones). Each
//! level of a row is drawn through [`super::merge`]: spans narrower than a pixel are
//! merged into pale marks, so drawing is bounded by pixels, not spans, and the notes say
//! how many spans each variant's marks stand for.

use std::collections::{BTreeMap, HashMap};

use plotters::prelude::*;

use super::canvas::*;
use super::lanes::{self, Lanes};
use super::merge::{row_marks, RowMarks};
use super::{chart_backends, header, median_rep_words, run_line, Chart, Notes};
use crate::store::lanes::{label, GpuLane};
use crate::store::{family, RunView};
use crate::store::{GpuActivityRow, RunRow, SpanRow};
use crate::units::fmt_ns_short;

pub struct Timeline;

const LABEL_W: i32 = 200;
const RIGHT_W: i32 = 40;
const LEVEL_H: i32 = 20;
const PANEL_HEAD: i32 = 30;
const NOTE_H: i32 = 24;
const AXIS_H: i32 = 30;
const LEGEND_ROW: i32 = 22;

/// A span placed on its row: its depth among same-thread ancestors.
struct Placed<'a> {
    span: &'a SpanRow,
    depth: usize,
}

struct ThreadRow<'a> {
    label: String,
    spans: Vec<Placed<'a>>,
    levels: usize,
}

/// One variant's representative rep, laid out.
struct Panel<'a> {
    variant: String,
    run: &'a RunRow,
    reps: usize,
    origin_ns: u64,
    end_ns: u64,
    threads: Vec<ThreadRow<'a>>,
    lanes: Vec<(GpuLane, Vec<&'a GpuActivityRow>)>,
    /// Utilisation per GPU and the CPU lane.
    under: Lanes,
}

impl Panel<'_> {
    fn height(&self, gpu_missing: bool) -> i32 {
        let rows: i32 = self
            .threads
            .iter()
            .map(|t| t.levels as i32 * LEVEL_H + 6)
            .sum();
        let lanes = self.lanes.len() as i32 * (LEVEL_H + 6);
        let note = if gpu_missing && !self.under.has_util() {
            NOTE_H
        } else {
            0
        };
        PANEL_HEAD + rows + lanes + note + self.under.height() + AXIS_H + 10
    }
}

fn panels(input: &RunView) -> Vec<Panel<'_>> {
    // One closure per variant builds its panel from one rep (span depths, thread rows in
    // order, GPU lanes): every part reads the same rep's spans and activity.
    input
        .variants()
        .into_iter()
        .filter_map(|v| {
            let run = input.representative_rep(&v)?;
            let spans = input.spans_of(run.rep);
            let origin_ns = spans
                .iter()
                .map(|s| s.start_ns)
                .min()
                .unwrap_or(run.start_ns);
            let end_ns = spans
                .iter()
                .map(|s| s.end_ns)
                .max()
                .unwrap_or(run.start_ns + run.wall_ns);
            let by_id: HashMap<u64, &SpanRow> = spans.iter().map(|s| (s.span_id, *s)).collect();
            let depth = |s: &SpanRow| {
                let mut d = 0;
                let mut cur = s;
                while let Some(p) = cur.parent_id.and_then(|p| by_id.get(&p)) {
                    if p.thread_id != s.thread_id || d > 64 {
                        break;
                    }
                    d += 1;
                    cur = p;
                }
                d
            };
            let root = input.root_thread(run.rep);
            let mut by_thread: BTreeMap<u64, Vec<Placed>> = BTreeMap::new();
            for s in &spans {
                by_thread.entry(s.thread_id).or_default().push(Placed {
                    span: s,
                    depth: depth(s),
                });
            }
            let mut threads: Vec<ThreadRow> = by_thread
                .into_iter()
                .map(|(tid, spans)| {
                    let name = spans
                        .first()
                        .map(|p| p.span.thread_name.clone())
                        .unwrap_or_default();
                    let label = if name.is_empty() {
                        format!("thread {tid}")
                    } else if name.contains(&tid.to_string()) {
                        name.to_string()
                    } else {
                        format!("{name} ({tid})")
                    };
                    let levels = spans.iter().map(|p| p.depth + 1).max().unwrap_or(1);
                    ThreadRow {
                        label,
                        spans,
                        levels,
                    }
                })
                .collect();
            let first_start = |t: &ThreadRow| {
                t.spans
                    .iter()
                    .map(|p| p.span.start_ns)
                    .min()
                    .unwrap_or(u64::MAX)
            };
            threads.sort_by_key(|t| {
                let is_root = t
                    .spans
                    .first()
                    .map(|p| Some(p.span.thread_id) == root)
                    .unwrap_or(false);
                (!is_root, first_start(t))
            });
            let mut lanes: BTreeMap<GpuLane, Vec<&GpuActivityRow>> = BTreeMap::new();
            for a in input.gpu.activity_of(run.rep) {
                lanes.entry(GpuLane::of(a)).or_default().push(a);
            }
            let end_ns = lanes
                .values()
                .flatten()
                .map(|a| a.end_ns)
                .fold(end_ns, u64::max);
            Some(Panel {
                reps: input.measured_reps(&v).len(),
                variant: v,
                run,
                origin_ns,
                end_ns,
                threads,
                lanes: lanes.into_iter().collect(),
                under: Lanes::of(&input.gpu.telemetry_of(run.rep)),
            })
        })
        .collect()
}

/// Most span names the legend lists; beyond, the first of them in span order and one
/// "+N other names" entry, so that a run with thousands of names keeps a fixed legend.
const MAX_LEGEND_NAMES: usize = 60;

/// Names drawn, in tree order, for the legend.
fn legend_names(input: &RunView, panels: &[Panel]) -> Vec<String> {
    // The families drawn, once: scanning every span for every name was quadratic.
    let drawn: std::collections::HashSet<String> = panels
        .iter()
        .flat_map(|p| p.threads.iter())
        .flat_map(|t| t.spans.iter())
        .map(|s| family(&s.span.name).to_string())
        .collect();
    let mut names: Vec<String> = input
        .span_order()
        .into_iter()
        .filter(|n| drawn.contains(n.as_str()))
        .collect();
    if names.len() > MAX_LEGEND_NAMES {
        let rest = names.len() - (MAX_LEGEND_NAMES - 1);
        names.truncate(MAX_LEGEND_NAMES - 1);
        names.push(format!("+{rest} other names"));
    }
    for p in panels {
        for (_, acts) in &p.lanes {
            for a in acts {
                let k = format!(
                    "GPU {}",
                    if a.kind.is_empty() {
                        "activity"
                    } else {
                        &a.kind
                    }
                );
                if !names.contains(&k) {
                    names.push(k);
                }
            }
        }
    }
    names
}

/// The lanes' legend lines: how each GPU's utilisation is placed, what the CPU lane is.
fn lane_notes(input: &RunView, panels: &[Panel]) -> Vec<String> {
    let m = &input.data.meta;
    let under: Vec<&Lanes> = panels.iter().map(|p| &p.under).collect();
    lanes::notes(&under, m.host.cpu_cores, m.gpu.sample_period_ms)
}

fn legend_rows(names: &[String], width: i32) -> i32 {
    let mut rows = 1;
    let mut x = 20;
    for n in names {
        let w = 26 + text_width(n, SMALL_PX) + 18;
        if x + w > width - 20 {
            rows += 1;
            x = 20;
        }
        x += w;
    }
    rows
}

fn gpu_color(kind: &str) -> RGBColor {
    match kind {
        "kernel" => RGBColor(89, 161, 79),
        "memcpy" => RGBColor(78, 121, 167),
        "memset" => RGBColor(150, 150, 150),
        _ => RGBColor(176, 122, 161),
    }
}

impl Timeline {
    fn draw<DB>(&self, input: &RunView, c: &Canvas<'_, DB>) -> Drawn<Notes>
    where
        DB: DrawingBackend,
        DB::ErrorType: 'static,
    {
        // One panel per variant (its threads' rows of spans, its GPU lanes, the lanes under
        // them, its grid and axis), then the legend and the lanes' notes; every part moves
        // the same y down the canvas.
        let (w, _) = c.size();
        let mut notes = Notes::default();
        let panels = panels(input);
        let mut y = header(
            c,
            "Timeline of the median-wall rep of each variant",
            &format!(
                "{} · a row per thread (children drawn below their parent) and per GPU lane",
                run_line(input)
            ),
        )?;
        for v in input.variants() {
            if input.representative_rep(&v).is_none() {
                notes.push(format!(
                    "variant {v} has no verified measured rep: no timeline"
                ));
            }
        }
        if panels.is_empty() {
            c.text(
                "no verified measured rep to draw",
                (20, y + 20),
                LABEL_PX,
                WORSE,
                Align::Left,
            )?;
            notes.push("no verified measured rep to draw");
            return Ok(notes);
        }
        let gpu_missing = input.gpu.is_empty();
        if gpu_missing {
            notes.push(input.gpu.missing_note());
        }
        let max_ns = panels
            .iter()
            .map(|p| (p.end_ns - p.origin_ns) as f64)
            .fold(1.0, f64::max);
        let unit = TimeUnit::for_max(max_ns);
        let x = Axis::new(0.0, unit.value(max_ns) * 1.01, LABEL_W, w - RIGHT_W);
        let pxf = |origin: u64, ns: u64| x.pxf(unit.value(ns.saturating_sub(origin) as f64));
        for (vi, p) in panels.iter().enumerate() {
            let head = format!(
                "{} — rep {} (#{}), wall {}, {}",
                p.variant,
                p.run.rep,
                p.run.iteration,
                fmt_ns_short(p.run.wall_ns as f64),
                median_rep_words(p.reps)
            );
            let mut folded = RowMarks::default();
            c.text(
                &fit(&head, LABEL_PX, w - 40),
                (12, y + PANEL_HEAD / 2),
                LABEL_PX,
                variant_color(vi),
                Align::Left,
            )?;
            y += PANEL_HEAD;
            let top = y;
            for t in &p.threads {
                let h = t.levels as i32 * LEVEL_H;
                c.rect(
                    (LABEL_W, y),
                    (w - RIGHT_W, y + h),
                    RGBColor(246, 246, 246).to_rgba(),
                )?;
                c.text(
                    &fit(&t.label, SMALL_PX, LABEL_W - 20),
                    (12, y + LEVEL_H / 2),
                    SMALL_PX,
                    INK,
                    Align::Left,
                )?;
                let mut levels: Vec<Vec<&Placed>> = vec![Vec::new(); t.levels];
                for s in &t.spans {
                    levels[s.depth.min(t.levels - 1)].push(s);
                }
                for (depth, level) in levels.iter().enumerate() {
                    let y0 = y + depth as i32 * LEVEL_H + 1;
                    let items: Vec<(u64, u64, RGBColor)> = level
                        .iter()
                        .map(|s| (s.span.start_ns, s.span.end_ns, span_color(&s.span.name)))
                        .collect();
                    let marks = row_marks(&items, |ns| pxf(p.origin_ns, ns));
                    for m in &marks.marks {
                        let (x0, x1) = (m.x0, m.x1.max(m.x0 + 1));
                        let Some(i) = m.alone else {
                            c.rect((x0, y0), (x1, y0 + LEVEL_H - 2), m.color.mix(0.45))?;
                            continue;
                        };
                        let name = &level[i].span.name;
                        c.rect((x0, y0), (x1, y0 + LEVEL_H - 2), m.color.to_rgba())?;
                        if x1 - x0 > 3 {
                            c.outline((x0, y0), (x1, y0 + LEVEL_H - 2), WHITE.mix(1.0), 1)?;
                        }
                        if x1 - x0 > 12 {
                            let label = fit(name, SMALL_PX, x1 - x0 - 6);
                            if label.chars().count() > 3 || label == *name {
                                c.text(
                                    &label,
                                    (x0 + 3, y0 + LEVEL_H / 2 - 1),
                                    SMALL_PX,
                                    INK,
                                    Align::Left,
                                )?;
                            }
                        }
                    }
                    folded.merged += marks.merged;
                    folded.hidden += marks.hidden;
                    folded
                        .marks
                        .extend(marks.marks.iter().filter(|m| m.alone.is_none()).copied());
                }
                y += h + 6;
            }
            for (lane, acts) in &p.lanes {
                c.rect(
                    (LABEL_W, y),
                    (w - RIGHT_W, y + LEVEL_H),
                    RGBColor(240, 246, 240).to_rgba(),
                )?;
                c.text(
                    &fit(&lane.to_string(), SMALL_PX, LABEL_W - 20),
                    (12, y + LEVEL_H / 2),
                    SMALL_PX,
                    INK,
                    Align::Left,
                )?;
                let items: Vec<(u64, u64, RGBColor)> = acts
                    .iter()
                    .map(|a| (a.start_ns, a.end_ns, gpu_color(&a.kind)))
                    .collect();
                let marks = row_marks(&items, |ns| pxf(p.origin_ns, ns));
                for m in &marks.marks {
                    let (x0, x1) = (m.x0, m.x1.max(m.x0 + 1));
                    let Some(i) = m.alone else {
                        c.rect((x0, y + 1), (x1, y + LEVEL_H - 1), m.color.mix(0.45))?;
                        continue;
                    };
                    c.rect((x0, y + 1), (x1, y + LEVEL_H - 1), m.color.to_rgba())?;
                    if x1 - x0 > 12 {
                        let label = fit(label(acts[i]), SMALL_PX, x1 - x0 - 6);
                        if label.chars().count() > 3 {
                            c.text(
                                &label,
                                (x0 + 3, y + LEVEL_H / 2),
                                SMALL_PX,
                                WHITE,
                                Align::Left,
                            )?;
                        }
                    }
                }
                folded.merged += marks.merged;
                folded.hidden += marks.hidden;
                folded
                    .marks
                    .extend(marks.marks.iter().filter(|m| m.alone.is_none()).copied());
                y += LEVEL_H + 6;
            }
            if gpu_missing && !p.under.has_util() {
                // The whole note is also in the chart's notes (and so in report.md).
                c.text(
                    &fit(&input.gpu.missing_note(), SMALL_PX, w - RIGHT_W - LABEL_W),
                    (LABEL_W, y + NOTE_H / 2),
                    SMALL_PX,
                    MUTED,
                    Align::Left,
                )?;
                y += NOTE_H;
            }
            if folded.merged > 0 {
                notes.push(format!(
                    "{}: {} spans or GPU intervals narrower than a pixel are drawn merged \
                     into {} pale marks (every one is in trace.json)",
                    p.variant,
                    folded.merged,
                    folded.merged_marks()
                ));
            }
            if folded.hidden > 0 {
                notes.push(format!(
                    "{}: {} spans or GPU intervals lie wholly under others of their row \
                     (overlapping spans of one level) and are not drawn",
                    p.variant, folded.hidden
                ));
            }
            let acts: Vec<&GpuActivityRow> = p.lanes.iter().flat_map(|l| l.1.clone()).collect();
            for n in p
                .under
                .agreement_notes(&p.variant, &acts, (p.origin_ns, p.end_ns))
            {
                notes.push(n);
            }
            y = lanes::draw(
                c,
                &p.under,
                (p.origin_ns, p.end_ns),
                &x,
                &unit,
                input.data.meta.host.cpu_cores,
                y,
            )?;
            // Grid and time axis of this panel.
            c.time_ticks(&x, &unit, 10, (top, y), INK.mix(0.12), y + 10)?;
            c.text(
                &format!("time ({})", unit.suffix),
                (LABEL_W - 24, y + 10),
                SMALL_PX,
                INK,
                Align::Right,
            )?;
            y += AXIS_H + 10;
        }
        // Legend: every name drawn, so a name cut short inside a bar can be read here.
        let mut lx = 20;
        for n in legend_names(input, &panels) {
            let wn = 26 + text_width(&n, SMALL_PX) + 18;
            if lx + wn > w - 20 {
                lx = 20;
                y += LEGEND_ROW;
            }
            let color = match n.strip_prefix("GPU ") {
                Some(kind) => gpu_color(kind),
                None if n.starts_with('+') => MUTED,
                None => span_color(&n),
            };
            c.rect((lx, y), (lx + 18, y + 14), color.to_rgba())?;
            c.text(&n, (lx + 24, y + 7), SMALL_PX, INK, Align::Left)?;
            lx += wn;
        }
        for line in lane_notes(input, &panels) {
            y += LEGEND_ROW;
            c.text(
                &fit(&line, SMALL_PX, w - 40),
                (20, y + 7),
                SMALL_PX,
                MUTED,
                Align::Left,
            )?;
        }
        Ok(notes)
    }
}

impl Chart for Timeline {
    fn name(&self) -> &'static str {
        "timeline"
    }
    fn title(&self) -> &'static str {
        "Timeline of a representative rep"
    }
    fn caption(&self) -> &'static str {
        "The median-wall rep of each variant (of its measured verified reps; the lower of the two middle ones for an even count): one row per thread with children below their parent, GPU lanes and each GPU's NVML utilisation when recorded, and the process's busy cores. Spans narrower than a pixel are merged into pale marks; the notes say how many."
    }
    fn size(&self, input: &RunView) -> (u32, u32) {
        let width = 1400;
        let ps = panels(input);
        let gpu_missing = input.gpu.is_empty();
        let body: i32 = ps.iter().map(|p| p.height(gpu_missing)).sum();
        let legend = (legend_rows(&legend_names(input, &ps), width)
            + lane_notes(input, &ps).len() as i32)
            * LEGEND_ROW;
        (width as u32, (66 + body + legend + 30).max(200) as u32)
    }
    chart_backends!();
}
