//! Where NVML's utilisation belongs on the span clock, and a rep's sampler output as
//! telemetry.csv rows.
//!
//! NVML's utilisation is the share of the driver's own sample period during which a
//! kernel ran (1/6 s to 1 s by product, NVML's documentation says; in the committed
//! two-GPU H200 run, driver 580, the values read every 20 ms change only at multiples of
//! 200 ms). `nvmlDeviceGetUtilizationRates` returns the latest such average whenever it
//! is read, so drawn where it was read a burst shows up late, and a rep's first reads
//! show the previous rep's tail. Two placements, the first where the driver allows:
//!
//! - **Driver samples** (`nvmlDeviceGetSamples`): each sample's timestamp says when its
//!   average ended. NVML documents the timestamps as "CPU timestamp in microseconds"
//!   without naming the clock, and drivers have been reported on CLOCK_REALTIME and on
//!   CLOCK_BOOTTIME; so the clock is found per rep ([`detect_clock`]: the one on which
//!   the newest sample is recent and not in the future) and mapped onto the span clock
//!   (CLOCK_MONOTONIC) through pairs of that clock and the span clock read at the rep's
//!   start and end, with [`ClockMap`] as for CUPTI. The window is the median gap
//!   between the samples. Every window overlapping the rep is kept, also the last one,
//!   whose sample the sampler waits for after the rep ([`super::driver_clock`]).
//! - **Reads shifted back by the window**, where the buffer cannot be read: the driver's
//!   update period is estimated from the reads themselves ([`ReadGaps`]: the reads at
//!   which a value changes are the driver's updates, late by one read period at most,
//!   and the shortest gaps between changes, over the whole run, are one period).
//!   Without such gaps the window stays unknown and the reads are drawn where they were
//!   read, labelled so.
//!
//! The rows say which (`util_placement`, `util_window_ns`); `store::lanes::series` draws
//! them, and meta.json's `gpu.util_placement` says it in words per GPU.

use std::collections::BTreeMap;

use super::clock::{ClockMap, ClockPair};
pub use super::driver_clock::{detect_clock, HostClock};
use super::driver_clock::{driver_period_ns, wait_budget_ns};
use super::nvml::{DriverSample, Sample};
use crate::store::lanes::series::{PLACED_DRIVER_SAMPLE, PLACED_READ_TIME, SOURCE_DRIVER_SAMPLES};
use crate::store::TelemetryRow;
use crate::trace::now_ns;

/// A pair (that clock, span clock) for each host clock, read at one end of a rep.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ClockPairs {
    pairs: [Option<ClockPair>; 3],
}

impl ClockPairs {
    pub fn measure() -> Self {
        let mut out = ClockPairs::default();
        for (i, c) in HostClock::ALL.into_iter().enumerate() {
            out.pairs[i] = ClockPair::measure(3, || c.now_ns(), now_ns);
        }
        out
    }

    pub fn get(&self, c: HostClock) -> Option<ClockPair> {
        self.pairs[HostClock::ALL.iter().position(|x| *x == c).unwrap_or(0)]
    }

    /// Each clock's time at the pair's moment.
    fn now(&self) -> Vec<(HostClock, u64)> {
        HostClock::ALL
            .into_iter()
            .filter_map(|c| self.get(c).map(|p| (c, p.cupti_ns)))
            .collect()
    }
}

/// Gaps between the reads at which a GPU's utilisation changed, over the whole run: the
/// driver's update period is the shortest of them, give or take one read period. Also
/// the period last measured from each GPU's driver samples, for a rep that fetched one.
#[derive(Debug, Default)]
pub struct ReadGaps {
    gaps: BTreeMap<u32, Vec<u64>>,
    driver_period: BTreeMap<u32, u64>,
}

/// Fewest gaps near the shortest one before the estimate is trusted.
const MIN_GAPS: usize = 3;

impl ReadGaps {
    /// Adds one rep's reads of `gpu`, (read time, SM %) by time.
    pub fn add(&mut self, gpu: u32, reads: &[(u64, u32)]) {
        let changes: Vec<u64> = reads
            .windows(2)
            .filter(|w| w[0].1 != w[1].1)
            .map(|w| w[1].0)
            .collect();
        self.gaps
            .entry(gpu)
            .or_default()
            .extend(changes.windows(2).map(|w| w[1] - w[0]));
    }

    /// The driver's update period of `gpu`: the median of the gaps within 1.5× the
    /// shortest (longer ones span several updates of equal value), once there are
    /// [`MIN_GAPS`] of them.
    pub fn window_ns(&self, gpu: u32) -> Option<u64> {
        let g = self.gaps.get(&gpu)?;
        let min = *g.iter().filter(|&&x| x > 0).min()?;
        let mut near: Vec<u64> = g
            .iter()
            .copied()
            .filter(|&x| x > 0 && x * 2 <= min * 3)
            .collect();
        if near.len() < MIN_GAPS {
            return None;
        }
        near.sort_unstable();
        Some(near[near.len() / 2])
    }
}

/// What a rep's conversion needs besides the samples.
pub struct RepClocks<'a> {
    /// When the rep's window opened (span clock): driver samples whose window ended
    /// before it belong to the time between reps.
    pub begin_ns: u64,
    /// When it closed (span clock): driver samples whose window began at or after it
    /// belong to the time between reps. The sampler waits for the window covering it
    /// ([`super::driver_clock::due`]).
    pub end_ns: u64,
    pub begin: Option<ClockPairs>,
    pub end: ClockPairs,
    /// Per GPU, why the driver's samples could not be read.
    pub unavailable: &'a BTreeMap<u32, String>,
}

/// A rep's telemetry rows and, per GPU, how its utilisation is placed (for meta.json).
#[derive(Debug, Default)]
pub struct PlacedRep {
    pub rows: Vec<TelemetryRow>,
    pub lines: Vec<String>,
    /// Per GPU whose driver samples stop before the rep's end, by how much (a note).
    pub notes: Vec<String>,
}

fn ms(ns: u64) -> String {
    format!("{:.0} ms", ns as f64 / 1e6)
}

/// One GPU's driver samples placed on the span clock.
struct DriverPlaced {
    /// (end of the sample's window on the span clock, the sample).
    samples: Vec<(u64, DriverSample)>,
    window_ns: u64,
    /// meta.json's line.
    line: String,
}

/// One GPU's driver samples on the span clock, or why they cannot be placed.
fn place_driver(
    gpu: u32,
    samples: &[DriverSample],
    clocks: &RepClocks,
    known_window: Option<u64>,
) -> Result<DriverPlaced, String> {
    let newest = samples
        .iter()
        .map(|d| d.ts_us)
        .max()
        .ok_or("none fetched")?;
    let clock = detect_clock(newest, &clocks.end.now())
        .ok_or_else(|| format!("their timestamps (newest {newest} µs) match no host clock"))?;
    let map = match clock {
        HostClock::Monotonic => ClockMap::offset_only(ClockPair {
            cupti_ns: 0,
            mono_ns: 0,
            window_ns: 0,
        }),
        c => {
            let end = clocks.end.get(c).ok_or("no clock pair")?;
            match clocks.begin.and_then(|b| b.get(c)) {
                Some(begin) => ClockMap { begin, end },
                None => ClockMap::offset_only(end),
            }
        }
    };
    let ts: Vec<u64> = samples.iter().map(|d| d.ts_us).collect();
    let window = driver_period_ns(&ts)
        .or(known_window)
        .ok_or("a single sample, and no window known from earlier reps")?;
    let placed = samples
        .iter()
        .map(|d| (map.to_span_ns(d.ts_us.saturating_mul(1_000)), *d))
        // A window overlapping the rep's start or end is kept whole, drawn at its
        // middle, like the others; `util_window_ns` says how far it reaches.
        .filter(|(t, _)| *t >= clocks.begin_ns && t.saturating_sub(window) < clocks.end_ns)
        .collect();
    let line = format!(
        "GPU {gpu}: driver samples (nvmlDeviceGetSamples, timestamps on {}), each drawn at \
         the middle of its {} window",
        clock.name(),
        ms(window)
    );
    Ok(DriverPlaced {
        samples: placed,
        window_ns: window,
        line,
    })
}

/// Turns a rep's sampler output into telemetry.csv rows of rep `rep` of `variant`,
/// placing each GPU's utilisation (see the module's comment); `gaps` keeps the run's
/// read gaps across reps.
pub fn rep_rows(
    samples: &[Sample],
    clocks: &RepClocks,
    gaps: &mut ReadGaps,
    rep: u32,
    variant: &str,
) -> PlacedRep {
    // Per GPU, the driver's samples placed on the span clock where they can be (else the
    // read values shifted by the known window), then every read value: one function, since
    // the read rows need the windows that the first part found.
    let mut out = PlacedRep::default();
    let mut driver: BTreeMap<u32, Vec<DriverSample>> = BTreeMap::new();
    let mut reads: BTreeMap<u32, Vec<(u64, u32)>> = BTreeMap::new();
    for s in samples {
        if let Some(d) = s.driver {
            driver.entry(s.gpu).or_default().push(d);
        } else if let Some(sm) = s.fast.and_then(|f| f.sm_util_pct) {
            reads.entry(s.gpu).or_default().push((s.t_ns, sm));
        }
    }
    for (gpu, r) in &reads {
        gaps.add(*gpu, r);
    }
    let mut windows: BTreeMap<u32, u64> = BTreeMap::new();
    let gpus: Vec<u32> = {
        let mut g: Vec<u32> = reads.keys().chain(driver.keys()).copied().collect();
        g.sort_unstable();
        g.dedup();
        g
    };
    for gpu in gpus {
        let read_window = gaps.window_ns(gpu);
        let placed = match driver.get_mut(&gpu) {
            Some(d) => {
                d.sort_by_key(|d| d.ts_us);
                d.dedup_by_key(|d| d.ts_us);
                let ts: Vec<u64> = d.iter().map(|d| d.ts_us).collect();
                if let Some(p) = driver_period_ns(&ts) {
                    gaps.driver_period.insert(gpu, p);
                }
                let known = gaps.driver_period.get(&gpu).copied().or(read_window);
                place_driver(gpu, d, clocks, known)
            }
            None => Err(clocks
                .unavailable
                .get(&gpu)
                .cloned()
                .unwrap_or_else(|| "none fetched".into())),
        };
        match placed {
            Ok(DriverPlaced {
                samples: placed,
                window_ns: window,
                line,
            }) => {
                windows.insert(gpu, window);
                out.lines.push(line);
                let last = placed.iter().map(|(t, _)| *t).max().unwrap_or(0);
                if last < clocks.end_ns {
                    out.notes.push(format!(
                        "GPU {gpu}: the driver's samples end {} before the rep's end (the \
                         sample of its last window did not come within {} of it); the \
                         utilisation lane stops there",
                        ms(clocks.end_ns - last.max(clocks.begin_ns)),
                        ms(wait_budget_ns(window))
                    ));
                }
                out.rows
                    .extend(placed.into_iter().map(|(t_ns, d)| TelemetryRow {
                        rep,
                        variant: variant.to_string(),
                        gpu,
                        source: SOURCE_DRIVER_SAMPLES.into(),
                        t_ns,
                        sm_util_pct: d.sm_util_pct,
                        mem_util_pct: d.mem_util_pct,
                        util_placement: Some(PLACED_DRIVER_SAMPLE.into()),
                        util_window_ns: Some(window),
                        ..TelemetryRow::sample()
                    }));
            }
            Err(why) => {
                let line = match read_window {
                    Some(w) => {
                        windows.insert(gpu, w);
                        format!(
                            "GPU {gpu}: read values shifted back by the driver's {} window \
                             (the shortest gaps between changes of the read values); \
                             driver samples not used: {why}",
                            ms(w)
                        )
                    }
                    None => format!(
                        "GPU {gpu}: at read time (the driver's window not known yet: too \
                         few changes of the read values); driver samples not used: {why}"
                    ),
                };
                out.lines.push(line);
            }
        }
    }
    for s in samples.iter().filter(|s| s.driver.is_none()) {
        let mut row = s.to_row(rep, variant);
        if s.fast.is_some() {
            row.util_placement = Some(PLACED_READ_TIME.into());
            row.util_window_ns = windows.get(&s.gpu).copied();
        }
        out.rows.push(row);
    }
    out.rows.sort_by_key(|r| (r.t_ns, r.gpu));
    out
}

#[cfg(test)]
#[path = "placement_tests.rs"]
mod tests;
