//! The timeline's lanes under the GPU intervals: one utilisation lane per GPU, placed
//! where the driver's averages belong (`store::lanes::series`), and the CPU lane, the
//! process's busy cores over time on the scale of the machine's cores, so that an idle
//! GPU beside a busy host is seen at a glance.

use plotters::prelude::*;

use super::canvas::*;
use crate::store::lanes::series::{
    busy_cores, drawn_at, kernel_agreement, read_points, util_lanes, UtilLane, UtilPlacement,
    UtilPoint,
};
use crate::store::{GpuActivityRow, TelemetryRow};
use crate::trace::selftime::Coverage;
use crate::units::fmt_ns_short;

pub(super) const UTIL_H: i32 = 62;
pub(super) const CPU_H: i32 = 62;
const LABEL_W: i32 = 200;
const RIGHT_W: i32 = 40;

/// What the lanes of one panel draw.
pub(super) struct Lanes {
    util: Vec<UtilLane>,
    /// Per utilisation lane, the same GPU's values at read time.
    reads: Vec<Vec<UtilPoint>>,
    cpu: Vec<(u64, u64, f64)>,
}

impl Lanes {
    pub fn of(rows: &[&TelemetryRow]) -> Self {
        let util = util_lanes(rows);
        Lanes {
            reads: util.iter().map(|u| read_points(rows, u.gpu)).collect(),
            util,
            cpu: busy_cores(rows),
        }
    }

    /// For each placed utilisation lane whose GPU has kernels in `activity`, how close
    /// it is to them, and how close the same values were at read time (the chart's
    /// notes, so report.md says it): within the panel's time `range`.
    pub fn agreement_notes(
        &self,
        variant: &str,
        activity: &[&GpuActivityRow],
        range: (u64, u64),
    ) -> Vec<String> {
        let mut out = Vec::new();
        for (lane, reads) in self.util.iter().zip(&self.reads) {
            let window = match lane.placement {
                UtilPlacement::DriverSamples { window_ns }
                | UtilPlacement::Shifted { window_ns } => window_ns,
                UtilPlacement::ReadTime => continue,
            };
            let kernels = Coverage::new(
                activity
                    .iter()
                    .filter(|a| a.kind == "kernel" && a.device == lane.gpu)
                    .map(|a| (a.start_ns, a.end_ns)),
            );
            if kernels.total() == 0 {
                continue;
            }
            let placed = kernel_agreement(&lane.points, window, &kernels, range);
            let read = kernel_agreement(reads, window, &kernels, range);
            if let (Some((p, n)), Some((r, m))) = (placed, read) {
                out.push(format!(
                    "{variant}: GPU {} SM utilisation against CUPTI's kernels on device {} \
                     (busy share of each {} window): off by {p:.0} points on average as \
                     drawn ({}, {n} points), {r:.0} at read time ({m} points)",
                    lane.gpu,
                    lane.gpu,
                    fmt_ns_short(window as f64),
                    short_label(lane.placement),
                ));
            }
        }
        out
    }

    pub fn has_util(&self) -> bool {
        !self.util.is_empty()
    }

    pub fn height(&self) -> i32 {
        self.util.len() as i32 * UTIL_H + if self.cpu.is_empty() { 0 } else { CPU_H }
    }
}

/// The legend's lines for the lanes of every panel, once each.
pub(super) fn notes(lanes: &[&Lanes], cores: u32, period_ms: Option<u64>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut push = |s: String| {
        if !out.contains(&s) {
            out.push(s);
        }
    };
    for l in lanes {
        for u in &l.util {
            push(format!(
                "GPU {} utilisation (SM solid, memory faint): {}",
                u.gpu,
                long_label(u.placement)
            ));
        }
    }
    if lanes.iter().any(|l| !l.cpu.is_empty()) {
        let every = period_ms
            .map(|p| format!(", every {p} ms"))
            .unwrap_or_default();
        push(format!(
            "CPU lane: the process's busy cores (CPU time of all its threads / wall between \
             samples{every}), on the scale of the machine's {cores} cores"
        ));
    }
    out
}

fn long_label(p: UtilPlacement) -> String {
    let ms = |w: u64| fmt_ns_short(w as f64);
    match p {
        UtilPlacement::DriverSamples { window_ns } => format!(
            "the driver's samples, each at the middle of its {} window",
            ms(window_ns)
        ),
        UtilPlacement::Shifted { window_ns } => format!(
            "values read every period, shifted back by the driver's {} window",
            ms(window_ns)
        ),
        UtilPlacement::ReadTime => {
            "at read time (the driver's window not known): late by up to two windows".into()
        }
    }
}

fn short_label(p: UtilPlacement) -> String {
    match p {
        UtilPlacement::DriverSamples { .. } => "driver samples".into(),
        UtilPlacement::Shifted { window_ns } => {
            format!("reads − {}", fmt_ns_short(window_ns as f64))
        }
        UtilPlacement::ReadTime => "at read time".into(),
    }
}

/// A lane's frame and its label on the left; returns its inner top and bottom.
fn frame<DB>(
    c: &Canvas<'_, DB>,
    y: i32,
    h: i32,
    title: &str,
    sub: &str,
    top: &str,
) -> Drawn<(i32, i32)>
where
    DB: DrawingBackend,
    DB::ErrorType: 'static,
{
    let (w, _) = c.size();
    let (y0, y1) = (y + 4, y + h - 6);
    c.outline((LABEL_W, y0), (w - RIGHT_W, y1), INK.mix(0.3), 1)?;
    c.text(title, (12, (y0 + y1) / 2 - 8), SMALL_PX, INK, Align::Left)?;
    c.text(
        &fit(sub, SMALL_PX - 2, LABEL_W - 40),
        (12, (y0 + y1) / 2 + 9),
        SMALL_PX - 2,
        MUTED,
        Align::Left,
    )?;
    c.text(
        top,
        (LABEL_W - 4, y0 + 5),
        SMALL_PX - 2,
        MUTED,
        Align::Right,
    )?;
    c.text(
        "0",
        (LABEL_W - 4, y1 - 5),
        SMALL_PX - 2,
        MUTED,
        Align::Right,
    )?;
    Ok((y0, y1))
}

/// Draws the lanes of a panel whose time axis starts at `origin` and ends at `end`
/// (span clock), from `y`; returns the y below them.
pub(super) fn draw<DB>(
    c: &Canvas<'_, DB>,
    lanes: &Lanes,
    (origin, end): (u64, u64),
    x: &Axis,
    unit: &TimeUnit,
    cores: u32,
    mut y: i32,
) -> Drawn<i32>
where
    DB: DrawingBackend,
    DB::ErrorType: 'static,
{
    // The GPU utilisation lanes, then the CPU lane, one after the other on the panel's time
    // axis from the same y.
    let tx = |t: u64| x.px(unit.value(t.saturating_sub(origin) as f64));
    for (gi, lane) in lanes.util.iter().enumerate() {
        let (y0, y1) = frame(
            c,
            y,
            UTIL_H,
            &format!("GPU {} util %", lane.gpu),
            &short_label(lane.placement),
            "100",
        )?;
        let ypx = |pct: u32| {
            y1 - ((f64::from(pct).clamp(0.0, 100.0) / 100.0) * (y1 - y0) as f64).round() as i32
        };
        // A window reaching over the rep's first span's start or its last span's end
        // (the rep's last window, fetched after it) is drawn at the middle of its part
        // on the axis; points wholly off the axis are not drawn.
        let window = lane.placement.window_ns();
        let on_axis: Vec<UtilPoint> = lane
            .points
            .iter()
            .filter_map(|p| drawn_at(p.0, window, (origin, end)).map(|t| (t, p.1, p.2)))
            .collect();
        let color = variant_color(gi + 2);
        let mem: Vec<(i32, i32)> = on_axis
            .iter()
            .filter_map(|p| p.2.map(|m| (tx(p.0), ypx(m))))
            .collect();
        let sm: Vec<(i32, i32)> = on_axis
            .iter()
            .filter_map(|p| p.1.map(|m| (tx(p.0), ypx(m))))
            .collect();
        if mem.len() > 1 {
            c.line(&mem, color.mix(0.35), 1)?;
        }
        if sm.len() > 1 {
            c.line(&sm, color.mix(1.0), 2)?;
        }
        y += UTIL_H;
    }
    if !lanes.cpu.is_empty() {
        let peak = lanes.cpu.iter().map(|c| c.2).fold(0.0, f64::max);
        // The machine's cores; a folder without them scales to the peak.
        let scale = if cores > 0 {
            f64::from(cores)
        } else {
            peak.ceil().max(1.0)
        };
        let (y0, y1) = frame(
            c,
            y,
            CPU_H,
            "CPU busy cores",
            &format!("process, peak {peak:.1}"),
            &format!("{scale:.0}"),
        )?;
        let ypx = |v: f64| y1 - ((v / scale).clamp(0.0, 1.0) * (y1 - y0) as f64).round() as i32;
        let fill = RGBColor(214, 96, 77);
        // Samples narrower than a pixel are drawn as one column of their time-weighted
        // mean, so the lane costs at most one rectangle per pixel.
        let txf = |t: u64| x.pxf(unit.value(t.saturating_sub(origin) as f64));
        let mut column: Option<(i32, f64, f64)> = None;
        let bar = |col: (i32, f64, f64)| -> Drawn {
            let v = if col.2 > 0.0 { col.1 / col.2 } else { 0.0 };
            c.rect((col.0, ypx(v)), (col.0 + 1, y1), fill.mix(0.75))
        };
        for &(s, e, v) in lanes.cpu.iter().filter(|c| c.1 > origin && c.0 < end) {
            let (s, e) = (s.max(origin), e.min(end));
            let (fs, fe) = (txf(s), txf(e));
            if fe - fs >= 1.0 {
                if let Some(col) = column.take() {
                    bar(col)?;
                }
                let (x0, x1) = (tx(s), tx(e));
                c.rect((x0, ypx(v)), (x1.max(x0 + 1), y1), fill.mix(0.75))?;
                continue;
            }
            let (at, dt) = (fs.round() as i32, e.saturating_sub(s) as f64);
            match column.as_mut() {
                Some(col) if col.0 == at => {
                    col.1 += v * dt;
                    col.2 += dt;
                }
                _ => {
                    if let Some(col) = column.replace((at, v * dt, dt)) {
                        bar(col)?;
                    }
                }
            }
        }
        if let Some(col) = column {
            bar(col)?;
        }
        y += CPU_H;
    }
    Ok(y)
}
