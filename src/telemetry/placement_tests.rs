//! Tests of [`super`] (placement.rs): a synthetic GPU burst, its driver samples on
//! another clock and its reads, placed on the span clock.

use super::*;
use crate::store::lanes::series::{busy_cores, util_lanes, util_time, UtilPlacement};
use crate::telemetry::nvml::FastReading;

const MS: u64 = 1_000_000;
/// CLOCK_REALTIME − CLOCK_MONOTONIC on the synthetic machine.
const REALTIME_OFFSET: u64 = 1_764_000_000_000_000_000;
/// The GPU is busy from 10.0 s to 10.6 s of the span clock: three whole windows.
const BUSY: (u64, u64) = (10_000 * MS, 10_600 * MS);
/// A burst across the windows' ends: partial windows too.
const SKEWED: (u64, u64) = (10_050 * MS, 10_650 * MS);
/// The driver averages over 200 ms.
const PERIOD: u64 = 200 * MS;

/// The share of `[end − PERIOD, end]` inside the burst `busy`, in %.
fn busy_pct(end: u64, busy: (u64, u64)) -> u32 {
    let start = end - PERIOD;
    let overlap = end.min(busy.1).saturating_sub(start.max(busy.0));
    (overlap * 100 / PERIOD) as u32
}

/// The driver's samples end every 200 ms from 9.2 s to 11.4 s.
fn driver_ends() -> Vec<u64> {
    (0..12).map(|k| 9_200 * MS + k * PERIOD).collect()
}

fn pairs_at(mono: u64) -> ClockPairs {
    let mut p = ClockPairs::default();
    for (i, c) in HostClock::ALL.into_iter().enumerate() {
        let clock = match c {
            HostClock::Realtime => mono + REALTIME_OFFSET,
            _ => mono,
        };
        p.pairs[i] = Some(ClockPair {
            cupti_ns: clock,
            mono_ns: mono,
            window_ns: 50,
        });
    }
    p
}

fn sample(gpu: u32, t_ns: u64) -> Sample {
    Sample {
        gpu,
        t_ns,
        read_ns: 1_000,
        fast: None,
        pcie: None,
        process_cpu_ns: None,
        driver: None,
    }
}

/// What the sampler would return for the burst: reads every 20 ms from 9.0 s to 11.6 s
/// (each the driver's latest average), the process's CPU time at each read, and, with
/// `driver`, the driver's samples (timestamps on CLOCK_REALTIME, µs) fetched at 11.6 s.
fn stream(driver: bool, busy: (u64, u64)) -> Vec<Sample> {
    let ends = driver_ends();
    let mut out = Vec::new();
    for i in 0..130u64 {
        let t = 9_000 * MS + i * 20 * MS;
        let latest = ends
            .iter()
            .rev()
            .find(|&&e| e <= t)
            .map(|&e| busy_pct(e, busy));
        out.push(Sample {
            fast: Some(FastReading {
                sm_util_pct: Some(latest.unwrap_or(0)),
                ..Default::default()
            }),
            ..sample(0, t)
        });
        out.push(Sample {
            process_cpu_ns: Some(i * 40 * MS),
            ..sample(0, t)
        });
    }
    if driver {
        for e in ends {
            out.push(Sample {
                driver: Some(DriverSample {
                    ts_us: (e + REALTIME_OFFSET) / 1_000,
                    sm_util_pct: Some(busy_pct(e, busy)),
                    mem_util_pct: None,
                }),
                ..sample(0, 11_600 * MS)
            });
        }
    }
    out
}

fn clocks(unavailable: &BTreeMap<u32, String>) -> RepClocks<'_> {
    RepClocks {
        begin_ns: 9_000 * MS,
        end_ns: 11_600 * MS,
        begin: Some(pairs_at(9_000 * MS)),
        end: pairs_at(11_700 * MS),
        unavailable,
    }
}

#[test]
fn the_clock_is_the_one_on_which_the_newest_sample_is_recent() {
    let mono = 5_000_000 * MS;
    let boot = mono + 100_000 * MS; // 100 s of suspend
    let real = mono + REALTIME_OFFSET;
    let now = [
        (HostClock::Monotonic, mono),
        (HostClock::Boottime, boot),
        (HostClock::Realtime, real),
    ];
    let us = |ns: u64| ns / 1_000;
    assert_eq!(
        detect_clock(us(real - 300 * MS), &now),
        Some(HostClock::Realtime)
    );
    assert_eq!(
        detect_clock(us(boot - 300 * MS), &now),
        Some(HostClock::Boottime)
    );
    assert_eq!(
        detect_clock(us(mono - 300 * MS), &now),
        Some(HostClock::Monotonic)
    );
    // Far in the future or long ago on every clock.
    assert_eq!(detect_clock(us(real + 3_600_000 * MS), &now), None);
    assert_eq!(detect_clock(us(mono / 2), &now), None);
    // Without suspend BOOTTIME equals MONOTONIC: the span clock itself is taken.
    let same = [(HostClock::Monotonic, mono), (HostClock::Boottime, mono)];
    assert_eq!(
        detect_clock(us(mono - MS), &same),
        Some(HostClock::Monotonic)
    );
}

#[test]
fn driver_samples_land_on_the_burst_not_at_read_or_fetch_time() {
    let none = BTreeMap::new();
    let mut gaps = ReadGaps::default();
    let placed = rep_rows(&stream(true, BUSY), &clocks(&none), &mut gaps, 4, "v");
    let driver: Vec<&TelemetryRow> = placed
        .rows
        .iter()
        .filter(|r| r.source == SOURCE_DRIVER_SAMPLES)
        .collect();
    // 9.2 s ends a window that began before the rep: kept, since it ends inside it.
    assert_eq!(driver.len(), 12);
    assert!(driver.iter().all(|r| r.util_window_ns == Some(PERIOD)
        && r.util_placement.as_deref() == Some(PLACED_DRIVER_SAMPLE)
        && r.rep == 4));
    // The driver's timestamps, back on the span clock, are exactly the window ends.
    let ends: Vec<u64> = driver.iter().map(|r| r.t_ns).collect();
    assert_eq!(ends, driver_ends());
    // Every fully busy window is drawn inside the burst, every idle one outside it.
    for r in &driver {
        let at = util_time(r);
        match r.sm_util_pct {
            Some(100) => assert!(at >= BUSY.0 && at <= BUSY.1, "{at}"),
            Some(0) => assert!(at + PERIOD / 2 <= BUSY.0 || at >= BUSY.1 + PERIOD / 2),
            other => panic!("no partial window in this grid: {other:?}"),
        }
    }
    assert_eq!(
        driver.iter().filter(|r| r.sm_util_pct == Some(100)).count(),
        3
    );
    assert!(placed.lines[0].starts_with("GPU 0: driver samples"));
    assert!(
        placed.lines[0].contains("CLOCK_REALTIME"),
        "{:?}",
        placed.lines
    );
    assert!(placed.lines[0].contains("200 ms"), "{:?}", placed.lines);
    // The lane draws the driver's samples, and its busy points all fall in the burst;
    // the same values drawn at read time reach 200 ms past its end.
    let refs: Vec<&TelemetryRow> = placed.rows.iter().collect();
    let lane = &util_lanes(&refs)[0];
    assert_eq!(
        lane.placement,
        UtilPlacement::DriverSamples { window_ns: PERIOD }
    );
    let busy_at: Vec<u64> = lane
        .points
        .iter()
        .filter(|p| p.1 == Some(100))
        .map(|p| p.0)
        .collect();
    assert_eq!(busy_at, [10_100 * MS, 10_300 * MS, 10_500 * MS]);
    let read_late = placed
        .rows
        .iter()
        .filter(|r| r.source == "nvml" && r.sm_util_pct == Some(100))
        .map(|r| r.t_ns)
        .max()
        .unwrap();
    assert!(read_late > BUSY.1 + 150 * MS, "{read_late}");
    // The process's CPU time passes through: 40 ms per 20 ms read, two cores.
    let cores = busy_cores(&refs);
    assert_eq!(cores.len(), 129);
    assert!(cores.iter().all(|c| (c.2 - 2.0).abs() < 1e-9));
}

#[test]
fn a_rep_that_fetched_one_driver_sample_keeps_the_period_measured_before() {
    let none = BTreeMap::new();
    let mut gaps = ReadGaps::default();
    let one: Vec<Sample> = stream(true, BUSY)
        .into_iter()
        .filter(|s| {
            s.driver
                .is_none_or(|d| d.ts_us == (10_400 * MS + REALTIME_OFFSET) / 1_000)
        })
        .collect();
    // Alone, and first in the run: no window to place it with; read values are not
    // trusted either (one gap of 600 ms).
    let first = rep_rows(&one, &clocks(&none), &mut gaps, 0, "v");
    assert!(
        first.lines[0].contains("a single sample"),
        "{:?}",
        first.lines
    );
    // After a rep with many, its period is kept.
    rep_rows(&stream(true, BUSY), &clocks(&none), &mut gaps, 1, "v");
    let later = rep_rows(&one, &clocks(&none), &mut gaps, 2, "v");
    assert!(
        later.lines[0].starts_with("GPU 0: driver samples"),
        "{:?}",
        later.lines
    );
    let d: Vec<&TelemetryRow> = later
        .rows
        .iter()
        .filter(|r| r.source == SOURCE_DRIVER_SAMPLES)
        .collect();
    assert_eq!(d.len(), 1);
    assert_eq!(
        (d[0].t_ns, d[0].util_window_ns),
        (10_400 * MS, Some(PERIOD))
    );
}

#[test]
fn without_driver_samples_reads_are_shifted_back_by_the_estimated_window() {
    let why: BTreeMap<u32, String> = [(0, "nvmlDeviceGetSamples: Not Supported".into())].into();
    let mut gaps = ReadGaps::default();
    // A first rep without value changes: the window is not known yet.
    let flat: Vec<Sample> = stream(false, SKEWED)
        .into_iter()
        .filter(|s| s.t_ns < 9_900 * MS)
        .collect();
    let first = rep_rows(&flat, &clocks(&why), &mut gaps, 0, "v");
    assert!(
        first.lines[0].starts_with("GPU 0: at read time"),
        "{:?}",
        first.lines
    );
    assert!(
        first.lines[0].contains("Not Supported"),
        "{:?}",
        first.lines
    );
    let refs: Vec<&TelemetryRow> = first.rows.iter().collect();
    assert_eq!(util_lanes(&refs)[0].placement, UtilPlacement::ReadTime);
    // A rep with the burst: changes 200, 400 and 200 ms apart, too few to trust.
    let once = rep_rows(&stream(false, SKEWED), &clocks(&why), &mut gaps, 1, "v");
    assert!(
        once.lines[0].starts_with("GPU 0: at read time"),
        "{:?}",
        once.lines
    );
    // The run's next rep: now four gaps of 200 ms.
    let placed = rep_rows(&stream(false, SKEWED), &clocks(&why), &mut gaps, 2, "v");
    assert_eq!(gaps.window_ns(0), Some(PERIOD));
    assert!(placed.lines[0].contains("shifted back by the driver's 200 ms window"));
    let refs: Vec<&TelemetryRow> = placed.rows.iter().collect();
    let lane = &util_lanes(&refs)[0];
    assert_eq!(lane.placement, UtilPlacement::Shifted { window_ns: PERIOD });
    // Every read of a fully busy window (those ending at 10.4 and 10.6 s, read from
    // 10.4 s to 10.8 s) is drawn inside the burst.
    let busy: Vec<u64> = lane
        .points
        .iter()
        .filter(|p| p.1 == Some(100))
        .map(|p| p.0)
        .collect();
    assert_eq!(busy.len(), 20);
    assert!(
        busy.iter().all(|&t| t >= SKEWED.0 && t <= SKEWED.1),
        "{busy:?}"
    );
}

#[test]
fn the_read_window_needs_several_gaps_and_ignores_multiples() {
    let mut g = ReadGaps::default();
    // Changes 2.2 s apart only: could be any divisor.
    g.add(1, &[(0, 0), (100 * MS, 5), (2_300 * MS, 7)]);
    assert_eq!(g.window_ns(1), None);
    // Gaps of 200 ms ± one 20 ms read, and multiples of it.
    let mut t = 0;
    let mut reads = vec![];
    for (k, gap) in [200u64, 220, 400, 180, 200, 600, 200]
        .into_iter()
        .enumerate()
    {
        t += gap * MS;
        reads.push((t, k as u32));
    }
    g.add(1, &reads);
    assert_eq!(g.window_ns(1), Some(200 * MS));
    assert_eq!(g.window_ns(0), None);
}

/// A driver sample of the window ending at `end` (span clock) for the burst `busy`,
/// fetched at `fetched`.
fn driver_sample(end: u64, busy: (u64, u64), fetched: u64) -> Sample {
    Sample {
        driver: Some(DriverSample {
            ts_us: (end + REALTIME_OFFSET) / 1_000,
            sm_util_pct: Some(busy_pct(end, busy)),
            mem_util_pct: None,
        }),
        ..sample(0, fetched)
    }
}

fn driver_rows(p: &PlacedRep) -> Vec<&TelemetryRow> {
    p.rows
        .iter()
        .filter(|r| r.source == SOURCE_DRIVER_SAMPLES)
        .collect()
}

/// Two reps back to back. Rep A (9.0–10.55 s) ends with a GPU phase of 150 ms
/// (10.4–10.55 s), shorter than a window: the driver posts the sample of 10.4–10.6 s
/// only after the rep, and the sampler, waiting for it, also got the next (10.6–10.8 s)
/// by the time it stopped. Rep B (10.9–11.5 s) fetches from there on.
#[test]
fn the_last_window_fetched_after_the_rep_is_the_reps_and_counted_once() {
    const PHASE: (u64, u64) = (10_400 * MS, 10_550 * MS);
    let none = BTreeMap::new();
    let mut gaps = ReadGaps::default();
    let ends_a: Vec<u64> = (0..9).map(|k| 9_200 * MS + k * PERIOD).collect();
    let mut a: Vec<Sample> = ends_a
        .iter()
        .filter(|&&e| e <= 10_400 * MS)
        .map(|&e| driver_sample(e, PHASE, 10_450 * MS))
        .collect();
    let in_rep = a.clone();
    // Fetched during the wait after the close at 10.55 s.
    a.push(driver_sample(10_600 * MS, PHASE, 10_630 * MS));
    a.push(driver_sample(10_800 * MS, PHASE, 10_830 * MS));
    let clocks_a = RepClocks {
        begin_ns: 9_000 * MS,
        end_ns: 10_550 * MS,
        begin: Some(pairs_at(9_000 * MS)),
        end: pairs_at(10_850 * MS),
        unavailable: &none,
    };
    let placed_a = rep_rows(&a, &clocks_a, &mut gaps, 0, "v");
    let rows_a = driver_rows(&placed_a);
    let ends: Vec<u64> = rows_a.iter().map(|r| r.t_ns).collect();
    // 10.6 s is the rep's (its window began inside it); 10.8 s began after it.
    assert_eq!(ends, ends_a[..8].to_vec());
    assert!(placed_a.notes.is_empty(), "{:?}", placed_a.notes);
    // On the lane: the phase's window drawn at its middle, 150 of its 200 ms busy.
    let refs: Vec<&TelemetryRow> = placed_a.rows.iter().collect();
    let lane = &util_lanes(&refs)[0];
    assert_eq!(
        lane.points.last().map(|p| (p.0, p.1)),
        Some((10_500 * MS, Some(75)))
    );

    // Rep B: the cursor is past 10.8 s; the sample covering its end (11.6 s) was
    // waited for.
    let b: Vec<Sample> = [11_000, 11_200, 11_400, 11_600]
        .into_iter()
        .map(|e| driver_sample(e * MS, BUSY, e * MS + 30 * MS))
        .collect();
    let clocks_b = RepClocks {
        begin_ns: 10_900 * MS,
        end_ns: 11_500 * MS,
        begin: Some(pairs_at(10_900 * MS)),
        end: pairs_at(11_700 * MS),
        unavailable: &none,
    };
    let placed_b = rep_rows(&b, &clocks_b, &mut gaps, 1, "v");
    let mut all: Vec<u64> = ends.clone();
    all.extend(driver_rows(&placed_b).iter().map(|r| r.t_ns));
    let n = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), n, "a window counted in both reps");
    assert_eq!(
        driver_rows(&placed_b)
            .iter()
            .map(|r| r.t_ns)
            .collect::<Vec<_>>(),
        [11_000 * MS, 11_200 * MS, 11_400 * MS, 11_600 * MS]
    );

    // Had the sample not come (the driver late past the wait), the lane stops at
    // 10.4 s and the rep says so.
    let mut g = ReadGaps::default();
    let short = rep_rows(&in_rep, &clocks_a, &mut g, 0, "v");
    let refs: Vec<&TelemetryRow> = short.rows.iter().collect();
    assert!(util_lanes(&refs)[0].points.iter().all(|p| p.1 == Some(0)));
    assert_eq!(
        short.notes,
        [
            "GPU 0: the driver's samples end 150 ms before the rep's end (the sample of its \
          last window did not come within 300 ms of it); the utilisation lane stops there"
        ]
    );
}
