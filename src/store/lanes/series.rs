//! The timeline's lanes beneath the GPU intervals, as telemetry.csv holds them: each
//! GPU's utilisation placed where the driver's average belongs, and the process's busy
//! cores. Charts and the trace export read them here, so that they draw the same thing.
//!
//! Utilisation rows say how they are placed (`util_placement`, `util_window_ns`):
//! - `driver_sample` (source `nvml_samples`): `t_ns` is the end of the driver's own
//!   sample period on the span clock; the value is drawn at the middle of its window,
//!   `t_ns − window/2`.
//! - `read_time` with a window: `t_ns` is when gapscope read the driver's latest average,
//!   which ended at the driver's last update, on average half a window before the read;
//!   the value is drawn at the middle of that window, `t_ns − window`.
//! - no placement (run folders from before these columns), or no window known: drawn
//!   at `t_ns`, and labelled "at read time".
//!
//! When a GPU has driver samples in a rep, its lane draws those, not the reads.

use super::TelemetryRow;

/// telemetry.csv's source of the driver's own utilisation samples.
pub const SOURCE_DRIVER_SAMPLES: &str = "nvml_samples";
/// telemetry.csv's source of the process's CPU time.
pub const SOURCE_PROCESS_CPU: &str = "process_cpu";
/// `util_placement` of a driver sample.
pub const PLACED_DRIVER_SAMPLE: &str = "driver_sample";
/// `util_placement` of a value read at `t_ns`.
pub const PLACED_READ_TIME: &str = "read_time";

/// Whether a telemetry row describes a GPU (NVML), as opposed to the process.
pub fn is_gpu_row(t: &TelemetryRow) -> bool {
    t.source != SOURCE_PROCESS_CPU
}

/// Where a row's utilisation belongs on the span clock (see the module's comment).
pub fn util_time(t: &TelemetryRow) -> u64 {
    match (t.util_placement.as_deref(), t.util_window_ns) {
        (Some(PLACED_DRIVER_SAMPLE), Some(w)) => t.t_ns.saturating_sub(w / 2),
        (Some(PLACED_READ_TIME), Some(w)) => t.t_ns.saturating_sub(w),
        _ => t.t_ns,
    }
}

/// A point of a utilisation lane: (time on the span clock, SM %, memory %).
pub type UtilPoint = (u64, Option<u32>, Option<u32>);

/// How one GPU's utilisation lane of a rep is placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UtilPlacement {
    /// The driver's samples, at the middle of each sample's window.
    DriverSamples { window_ns: u64 },
    /// The reads, shifted back by the driver's window.
    Shifted { window_ns: u64 },
    /// The reads, where they were read (old run folders, or no window known).
    ReadTime,
}

impl UtilPlacement {
    /// The averaging window each point stands for, centred on it (none at read time).
    pub fn window_ns(self) -> Option<u64> {
        match self {
            UtilPlacement::DriverSamples { window_ns } | UtilPlacement::Shifted { window_ns } => {
                Some(window_ns)
            }
            UtilPlacement::ReadTime => None,
        }
    }
}

/// Where a point placed at `at`, the middle of a `window_ns` window, is drawn on a time
/// axis `(lo, hi)`: at `at` inside it; where its window reaches over an end of the axis
/// (a rep's first and last windows), at the middle of the part on the axis; nowhere when
/// no part is on it. A point at read time is drawn only inside the axis.
pub fn drawn_at(at: u64, window_ns: Option<u64>, (lo, hi): (u64, u64)) -> Option<u64> {
    if (lo..=hi).contains(&at) {
        return Some(at);
    }
    let half = window_ns? / 2;
    let (start, end) = (at.saturating_sub(half).max(lo), (at + half).min(hi));
    (start < end).then(|| start + (end - start) / 2)
}

/// One GPU's utilisation lane: its placement and (time, SM %, memory %) points by time.
#[derive(Debug, Clone, PartialEq)]
pub struct UtilLane {
    pub gpu: u32,
    pub placement: UtilPlacement,
    pub points: Vec<UtilPoint>,
}

/// The utilisation lanes of one rep's telemetry rows, one per GPU that has any.
pub fn util_lanes(rows: &[&TelemetryRow]) -> Vec<UtilLane> {
    let mut gpus: Vec<u32> = rows
        .iter()
        .filter(|t| is_gpu_row(t) && (t.sm_util_pct.is_some() || t.mem_util_pct.is_some()))
        .map(|t| t.gpu)
        .collect();
    gpus.sort_unstable();
    gpus.dedup();
    gpus.into_iter()
        .map(|gpu| {
            let of_gpu = |source: &str| -> Vec<&TelemetryRow> {
                rows.iter()
                    .copied()
                    .filter(|t| t.gpu == gpu && t.source == source)
                    .filter(|t| t.sm_util_pct.is_some() || t.mem_util_pct.is_some())
                    .collect()
            };
            let driver = of_gpu(SOURCE_DRIVER_SAMPLES);
            let (used, placement) = if !driver.is_empty() {
                let window_ns = median(driver.iter().filter_map(|t| t.util_window_ns));
                (driver, UtilPlacement::DriverSamples { window_ns })
            } else {
                let reads = of_gpu("nvml");
                let shifted = reads.iter().all(|t| {
                    t.util_placement.as_deref() == Some(PLACED_READ_TIME)
                        && t.util_window_ns.is_some()
                });
                let placement = if shifted && !reads.is_empty() {
                    let window_ns = median(reads.iter().filter_map(|t| t.util_window_ns));
                    UtilPlacement::Shifted { window_ns }
                } else {
                    UtilPlacement::ReadTime
                };
                (reads, placement)
            };
            let mut points: Vec<UtilPoint> = used
                .iter()
                .map(|t| {
                    let at = if placement == UtilPlacement::ReadTime {
                        t.t_ns
                    } else {
                        util_time(t)
                    };
                    (at, t.sm_util_pct, t.mem_util_pct)
                })
                .collect();
            points.sort_by_key(|p| p.0);
            UtilLane {
                gpu,
                placement,
                points,
            }
        })
        .collect()
}

/// One GPU's utilisation as read, at read time: (t, SM %, memory %) by time.
pub fn read_points(rows: &[&TelemetryRow], gpu: u32) -> Vec<UtilPoint> {
    let mut v: Vec<UtilPoint> = rows
        .iter()
        .filter(|t| t.gpu == gpu && t.source == "nvml" && t.sm_util_pct.is_some())
        .map(|t| (t.t_ns, t.sm_util_pct, t.mem_util_pct))
        .collect();
    v.sort_by_key(|p| p.0);
    v
}

/// Fewest points before [`kernel_agreement`] says anything.
const MIN_AGREEMENT_POINTS: usize = 3;

/// How close SM utilisation drawn at `points` is to the kernels CUPTI recorded on that
/// GPU (`kernels`, their union): for each point, the kernels' busy share of the
/// `window_ns` centred where it is drawn, against its value. Returns the mean absolute
/// difference in percentage points and how many points it covers: those whose window
/// lies inside `within`; None with fewer than three.
pub fn kernel_agreement(
    points: &[UtilPoint],
    window_ns: u64,
    kernels: &crate::trace::selftime::Coverage,
    (lo, hi): (u64, u64),
) -> Option<(f64, usize)> {
    if window_ns == 0 {
        return None;
    }
    let diffs: Vec<f64> = points
        .iter()
        .filter_map(|&(t, sm, _)| {
            let (a, b) = (t.checked_sub(window_ns / 2)?, t + window_ns / 2);
            (a >= lo && b <= hi).then_some(())?;
            let busy = 100.0 * kernels.within(a, b) as f64 / (b - a) as f64;
            Some((f64::from(sm?) - busy).abs())
        })
        .collect();
    (diffs.len() >= MIN_AGREEMENT_POINTS)
        .then(|| (diffs.iter().sum::<f64>() / diffs.len() as f64, diffs.len()))
}

fn median(xs: impl Iterator<Item = u64>) -> u64 {
    let mut v: Vec<u64> = xs.collect();
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

/// The process's busy cores between consecutive `process_cpu` rows of one rep: (start,
/// end, cores) on the span clock, CPU time over wall time.
pub fn busy_cores(rows: &[&TelemetryRow]) -> Vec<(u64, u64, f64)> {
    let mut cpu: Vec<(u64, u64)> = rows
        .iter()
        .filter(|t| t.source == SOURCE_PROCESS_CPU)
        .filter_map(|t| t.process_cpu_ns.map(|c| (t.t_ns, c)))
        .collect();
    cpu.sort_unstable();
    cpu.windows(2)
        .filter(|w| w[1].0 > w[0].0)
        .map(|w| {
            let cores = w[1].1.saturating_sub(w[0].1) as f64 / (w[1].0 - w[0].0) as f64;
            (w[0].0, w[1].0, cores)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(gpu: u32, source: &str, t_ns: u64, sm: u32) -> TelemetryRow {
        TelemetryRow {
            gpu,
            source: source.into(),
            t_ns,
            sm_util_pct: Some(sm),
            ..TelemetryRow::sample()
        }
    }

    #[test]
    fn each_placement_puts_the_value_where_its_window_is() {
        let mut d = row(0, SOURCE_DRIVER_SAMPLES, 1_000, 90);
        d.util_placement = Some(PLACED_DRIVER_SAMPLE.into());
        d.util_window_ns = Some(200);
        assert_eq!(util_time(&d), 900);
        let mut r = row(0, "nvml", 1_000, 90);
        assert_eq!(util_time(&r), 1_000, "an old row stays at read time");
        r.util_placement = Some(PLACED_READ_TIME.into());
        assert_eq!(util_time(&r), 1_000, "no window known");
        r.util_window_ns = Some(200);
        assert_eq!(util_time(&r), 800);
    }

    #[test]
    fn a_lane_per_gpu_and_driver_samples_win_over_reads() {
        let mut reads: Vec<TelemetryRow> = (0..4)
            .flat_map(|i| [row(0, "nvml", 100 * i, 10), row(1, "nvml", 100 * i, 20)])
            .collect();
        for r in reads.iter_mut().filter(|r| r.gpu == 1) {
            r.util_placement = Some(PLACED_READ_TIME.into());
            r.util_window_ns = Some(50);
        }
        let mut driver = row(0, SOURCE_DRIVER_SAMPLES, 400, 77);
        driver.util_placement = Some(PLACED_DRIVER_SAMPLE.into());
        driver.util_window_ns = Some(100);
        let cpu = TelemetryRow {
            source: SOURCE_PROCESS_CPU.into(),
            process_cpu_ns: Some(5),
            ..TelemetryRow::sample()
        };
        let all: Vec<&TelemetryRow> = reads.iter().chain([&driver, &cpu]).collect();
        let lanes = util_lanes(&all);
        assert_eq!(lanes.len(), 2);
        assert_eq!(lanes[0].gpu, 0);
        assert_eq!(
            lanes[0].placement,
            UtilPlacement::DriverSamples { window_ns: 100 }
        );
        assert_eq!(lanes[0].points, vec![(350, Some(77), None)]);
        assert_eq!(lanes[1].placement, UtilPlacement::Shifted { window_ns: 50 });
        assert_eq!(lanes[1].points[1], (50, Some(20), None));
        // Old rows: at read time.
        let old: Vec<&TelemetryRow> = reads.iter().filter(|r| r.gpu == 0).collect();
        assert_eq!(util_lanes(&old)[0].placement, UtilPlacement::ReadTime);
    }

    #[test]
    fn agreement_with_the_kernels_is_the_mean_distance_in_points() {
        use crate::trace::selftime::Coverage;
        // Kernels busy from 1 000 to 2 000; windows of 200.
        let k = Coverage::new([(1_000, 2_000)]);
        let placed = [
            (900, Some(50), None),
            (1_500, Some(100), None),
            (2_100, Some(0), None),
        ];
        // 900: [800, 1000) idle, 50 off; 1 500: busy, exact; 2 100: idle, exact.
        assert_eq!(
            kernel_agreement(&placed, 200, &k, (0, 3_000)),
            Some((50.0 / 3.0, 3))
        );
        // A window reaching outside `within` is left out, and then too few remain.
        assert_eq!(kernel_agreement(&placed, 200, &k, (850, 3_000)), None);
        assert_eq!(kernel_agreement(&placed, 0, &k, (0, 3_000)), None);
    }

    #[test]
    fn busy_cores_are_cpu_time_over_wall_between_rows() {
        let cpu = |t_ns, c| TelemetryRow {
            source: SOURCE_PROCESS_CPU.into(),
            t_ns,
            process_cpu_ns: Some(c),
            ..TelemetryRow::sample()
        };
        let rows = [cpu(1_000, 0), cpu(2_000, 3_000), cpu(4_000, 3_500)];
        let refs: Vec<&TelemetryRow> = rows.iter().collect();
        assert_eq!(
            busy_cores(&refs),
            vec![(1_000, 2_000, 3.0), (2_000, 4_000, 0.25)]
        );
        assert!(busy_cores(&refs[..1]).is_empty());
    }

    #[test]
    fn a_window_over_an_end_of_the_axis_is_drawn_at_the_middle_of_its_part_on_it() {
        const MS: u64 = 1_000_000;
        let axis = (9_000 * MS, 10_450 * MS);
        let w = Some(200 * MS);
        assert_eq!(drawn_at(10_300 * MS, w, axis), Some(10_300 * MS));
        // The rep's last window, 10.4–10.6 s: its 50 ms on the axis.
        assert_eq!(drawn_at(10_500 * MS, w, axis), Some(10_425 * MS));
        // Its first, 8.9–9.1 s.
        assert_eq!(drawn_at(9_000 * MS, w, axis), Some(9_000 * MS));
        assert_eq!(drawn_at(8_990 * MS, w, axis), Some(9_045 * MS));
        // Wholly off the axis, and reads at read time, are not drawn.
        assert_eq!(drawn_at(10_600 * MS, w, axis), None);
        assert_eq!(drawn_at(10_500 * MS, None, axis), None);
        assert_eq!(UtilPlacement::ReadTime.window_ns(), None);
        assert_eq!(UtilPlacement::Shifted { window_ns: 5 }.window_ns(), Some(5));
    }
}
