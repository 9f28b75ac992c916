//! Values no run writes in telemetry.csv and gpu_activity.csv: a percentage above 100,
//! an interval that ends before it starts, a duration that is not its end minus its
//! start, a time past the clock's range or an hour outside its rep (where runs.csv gives
//! the rep's window: a rep cut off by a kill has GPU rows and no row of its own). Such
//! a row is left out, and the reader says so, naming the file, the line
//! and the value (one line per reason, with how many rows it left out), so that one
//! damaged or edited row neither draws a lane from nonsense nor hides the rest of the
//! file. A value that does not parse at all (a negative count, `NaN`) already fails the
//! file's read with its line.

use std::collections::{BTreeMap, HashMap};

use super::integrity::MAX_CLOCK_NS;
use super::{GpuActivityRow, RepStatus, RunRow, TelemetryRow, GPU_ACTIVITY, TELEMETRY};

/// Furthest a GPU record may lie outside its rep's window (`start_ns` to `start_ns +
/// wall_ns` in runs.csv): samples are taken around a rep, never an hour away from it; a
/// time further out was taken on another clock or edited.
pub const FAR_NS: u64 = 3_600_000_000_000;
/// Highest value a column may hold on any GPU (far above every real one): 1,000 °C,
/// 10 kW, 100 GHz, 1 PiB of memory, 1 PB/s over PCIe.
const MAX_TEMPERATURE_C: u32 = 1_000;
const MAX_POWER_MW: u32 = 10_000_000;
const MAX_CLOCK_MHZ: u32 = 100_000;
const MAX_MEM_BYTES: u64 = 1 << 50;
const MAX_PCIE_BYTES_PER_S: u64 = 1_000_000_000_000_000;

/// Each rep's window widened by [`FAR_NS`] on both sides; `None` for a rep whose window
/// runs.csv does not give (a failed rep records no start and no wall time).
fn windows(runs: &[RunRow]) -> HashMap<u32, Option<(u64, u64)>> {
    runs.iter()
        .map(|r| {
            let known = r.status == RepStatus::Ok && r.wall_ns > 0;
            let end = r.start_ns.saturating_add(r.wall_ns);
            let w = (
                r.start_ns.saturating_sub(FAR_NS),
                end.saturating_add(FAR_NS),
            );
            (r.rep, known.then_some(w))
        })
        .collect()
}

/// Rows left out of one file, by reason: the first line and message, and how many.
struct Dropped {
    file: &'static str,
    by_reason: BTreeMap<&'static str, (u64, String, u64)>,
}

impl Dropped {
    fn new(file: &'static str) -> Self {
        Dropped {
            file,
            by_reason: BTreeMap::new(),
        }
    }

    fn add(&mut self, line: u64, reason: &'static str, message: String) {
        let e = self.by_reason.entry(reason).or_insert((line, message, 0));
        e.2 += 1;
    }

    /// One line per reason, first line first.
    fn messages(self) -> Vec<String> {
        let mut v: Vec<(u64, String, u64)> = self.by_reason.into_values().collect();
        v.sort_by_key(|(line, ..)| *line);
        v.into_iter()
            .map(|(line, message, n)| {
                let more = if n > 1 {
                    format!(" (and {} more rows for the same reason)", n - 1)
                } else {
                    String::new()
                };
                format!(
                    "{}, line {line}: {message}; no run writes this, so the row is left \
                     out{more}",
                    self.file
                )
            })
            .collect()
    }
}

/// Why a time is not one of its rep's, if it is not.
fn time_problem(
    what: &str,
    t: u64,
    rep: u32,
    windows: &HashMap<u32, Option<(u64, u64)>>,
) -> Option<(&'static str, String)> {
    if t > MAX_CLOCK_NS {
        return Some(("clock", format!("{what} = {t} is past the clock's range")));
    }
    let (lo, hi) = (*windows.get(&rep)?)?;
    (t < lo || t > hi).then(|| {
        (
            "far",
            format!(
                "{what} = {t} lies more than an hour outside rep {rep} (taken on another \
                 clock?)"
            ),
        )
    })
}

fn telemetry_problem(
    r: &TelemetryRow,
    windows: &HashMap<u32, Option<(u64, u64)>>,
) -> Option<(&'static str, String)> {
    for (what, v) in [
        ("sm_util_pct", r.sm_util_pct),
        ("mem_util_pct", r.mem_util_pct),
    ] {
        if let Some(v) = v.filter(|&v| v > 100) {
            return Some(("pct", format!("{what} = {v} is above 100 %")));
        }
    }
    let over = |what: &str, v: Option<u64>, max: u64| {
        v.filter(|&v| v > max).map(|v| {
            (
                "range",
                format!("{what} = {v} is more than any GPU reports ({max})"),
            )
        })
    };
    let checks = [
        over(
            "temperature_c",
            r.temperature_c.map(u64::from),
            MAX_TEMPERATURE_C.into(),
        ),
        over("power_mw", r.power_mw.map(u64::from), MAX_POWER_MW.into()),
        over(
            "sm_clock_mhz",
            r.sm_clock_mhz.map(u64::from),
            MAX_CLOCK_MHZ.into(),
        ),
        over("mem_used_bytes", r.mem_used_bytes, MAX_MEM_BYTES),
        over(
            "pcie_tx_bytes_per_s",
            r.pcie_tx_bytes_per_s,
            MAX_PCIE_BYTES_PER_S,
        ),
        over(
            "pcie_rx_bytes_per_s",
            r.pcie_rx_bytes_per_s,
            MAX_PCIE_BYTES_PER_S,
        ),
        over("util_window_ns", r.util_window_ns, MAX_CLOCK_NS),
        over("process_cpu_ns", r.process_cpu_ns, MAX_CLOCK_NS),
    ];
    if let Some(p) = checks.into_iter().flatten().next() {
        return Some(p);
    }
    time_problem("t_ns", r.t_ns, r.rep, windows).or_else(|| {
        (r.read_ns > MAX_CLOCK_NS).then(|| {
            (
                "clock",
                format!("read_ns = {} is past the clock's range", r.read_ns),
            )
        })
    })
}

fn activity_problem(
    r: &GpuActivityRow,
    windows: &HashMap<u32, Option<(u64, u64)>>,
) -> Option<(&'static str, String)> {
    if r.end_ns < r.start_ns {
        return Some((
            "order",
            format!(
                "{} {:?} ends (end_ns = {}) before it starts (start_ns = {})",
                r.kind, r.name, r.end_ns, r.start_ns
            ),
        ));
    }
    if r.duration_ns != r.end_ns - r.start_ns {
        return Some((
            "duration",
            format!(
                "duration_ns = {} is not end_ns - start_ns = {}",
                r.duration_ns,
                r.end_ns - r.start_ns
            ),
        ));
    }
    time_problem("start_ns", r.start_ns, r.rep, windows)
        .or_else(|| time_problem("end_ns", r.end_ns, r.rep, windows))
}

fn keep<T>(
    rows: Vec<T>,
    file: &'static str,
    problem: impl Fn(&T) -> Option<(&'static str, String)>,
) -> (Vec<T>, Vec<String>) {
    let mut dropped = Dropped::new(file);
    let kept = rows
        .into_iter()
        .enumerate()
        .filter_map(|(i, r)| match problem(&r) {
            // Line 1 is the header.
            Some((reason, message)) => {
                dropped.add(i as u64 + 2, reason, message);
                None
            }
            None => Some(r),
        })
        .collect();
    (kept, dropped.messages())
}

/// The rows of telemetry.csv a run could have written, and what was left out.
pub fn check_telemetry(
    rows: Vec<TelemetryRow>,
    runs: &[RunRow],
) -> (Vec<TelemetryRow>, Vec<String>) {
    let w = windows(runs);
    keep(rows, TELEMETRY, |r| telemetry_problem(r, &w))
}

/// The rows of gpu_activity.csv a run could have written, and what was left out.
pub fn check_activity(
    rows: Vec<GpuActivityRow>,
    runs: &[RunRow],
) -> (Vec<GpuActivityRow>, Vec<String>) {
    let w = windows(runs);
    keep(rows, GPU_ACTIVITY, |r| activity_problem(r, &w))
}
