//! The self-test's checks of the timeline's lanes: each sampled GPU's utilisation placed
//! where the driver's averages belong (from its own samples, or from the reads shifted
//! back by its window), the driver's samples reaching the rep's end (the sample of its
//! last window, posted after the rep, waited for), and the process's CPU time sampled
//! every period.

use super::checks::Check;
use crate::store::lanes::series::{SOURCE_DRIVER_SAMPLES, SOURCE_PROCESS_CPU};
use crate::telemetry::RepTelemetry;

/// Per GPU with driver samples, whether the newest ends at or after `end_ns` (the end
/// of the rep's `prove` span): None when no GPU has driver samples.
fn last_window(t: &RepTelemetry, end_ns: u64) -> Option<Check> {
    let mut newest: std::collections::BTreeMap<u32, (u64, u64)> = Default::default();
    for s in t
        .samples
        .iter()
        .filter(|s| s.source == SOURCE_DRIVER_SAMPLES)
    {
        let e = newest.entry(s.gpu).or_default();
        *e = (*e).max((s.t_ns, s.util_window_ns.unwrap_or(0)));
    }
    if newest.is_empty() {
        return None;
    }
    let ms = |ns: i128| ns as f64 / 1e6;
    Some(Check {
        rep: 0,
        name: "NVML last window recorded",
        ok: newest.values().all(|&(t, _)| t >= end_ns),
        detail: newest
            .iter()
            .map(|(g, &(t, w))| {
                format!(
                    "GPU {g}: the driver's last sample ends {:+.1} ms from prove's end \
                     ({:.0} ms window)",
                    ms(t as i128 - end_ns as i128),
                    ms(w as i128)
                )
            })
            .collect::<Vec<_>>()
            .join("; "),
    })
}

/// The lanes' checks of one rep whose `prove` span ended at `end_ns`.
pub fn check_lanes(rep: u32, t: &RepTelemetry, end_ns: u64) -> Vec<Check> {
    let mut gpus: Vec<u32> = t
        .samples
        .iter()
        .filter(|s| s.source == "nvml" && s.sm_util_pct.is_some())
        .map(|s| s.gpu)
        .collect();
    gpus.sort_unstable();
    gpus.dedup();
    let placed = |g: u32| {
        t.util_placement.iter().any(|l| {
            l.starts_with(&format!("GPU {g}: driver samples"))
                || l.starts_with(&format!("GPU {g}: read values shifted"))
        })
    };
    let cpu = t
        .samples
        .iter()
        .filter(|s| s.source == SOURCE_PROCESS_CPU && s.process_cpu_ns.is_some())
        .count();
    let last = last_window(t, end_ns).map(|c| Check { rep, ..c });
    let mut out = vec![
        Check {
            rep,
            name: "NVML utilisation placed",
            ok: !gpus.is_empty() && gpus.iter().all(|&g| placed(g)),
            detail: if t.util_placement.is_empty() {
                format!("no placement recorded for GPUs {gpus:?}")
            } else {
                t.util_placement.join("; ")
            },
        },
        Check {
            rep,
            name: "process CPU time sampled",
            ok: cpu >= 2,
            detail: format!("{cpu} samples of the process's CPU time"),
        },
    ];
    out.extend(last);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::TelemetryRow;

    fn rep_telemetry(lines: &[&str], cpu_rows: usize) -> RepTelemetry {
        let mut samples = Vec::new();
        for gpu in 0..2 {
            samples.push(TelemetryRow {
                gpu,
                source: "nvml".into(),
                sm_util_pct: Some(40),
                ..TelemetryRow::sample()
            });
        }
        for i in 0..cpu_rows {
            samples.push(TelemetryRow {
                source: SOURCE_PROCESS_CPU.into(),
                t_ns: i as u64,
                process_cpu_ns: Some(i as u64),
                ..TelemetryRow::sample()
            });
        }
        RepTelemetry {
            samples,
            util_placement: lines.iter().map(|l| l.to_string()).collect(),
            ..Default::default()
        }
    }

    fn failed(c: &[Check]) -> Vec<&'static str> {
        c.iter().filter(|c| !c.ok).map(|c| c.name).collect()
    }

    #[test]
    fn each_gpu_must_be_placed_and_the_cpu_sampled() {
        let good = rep_telemetry(
            &[
                "GPU 0: driver samples (…)",
                "GPU 1: read values shifted back by the driver's 200 ms window",
            ],
            3,
        );
        assert!(failed(&check_lanes(1, &good, 0)).is_empty());
        // GPU 1 drawn at read time; no CPU samples.
        let bad = rep_telemetry(&["GPU 0: driver samples (…)", "GPU 1: at read time (…)"], 1);
        let c = check_lanes(1, &bad, 0);
        assert_eq!(
            failed(&c),
            ["NVML utilisation placed", "process CPU time sampled"]
        );
        assert!(
            c[0].detail.contains("GPU 1: at read time"),
            "{}",
            c[0].detail
        );
        // Nothing recorded at all.
        let none = rep_telemetry(&[], 3);
        let c = check_lanes(1, &none, 0);
        assert_eq!(failed(&c), ["NVML utilisation placed"]);
        assert_eq!(c[0].detail, "no placement recorded for GPUs [0, 1]");
    }

    #[test]
    fn the_driver_samples_must_reach_the_end_of_prove() {
        const MS: u64 = 1_000_000;
        let mut t = rep_telemetry(
            &["GPU 0: driver samples (…)", "GPU 1: driver samples (…)"],
            3,
        );
        assert_eq!(
            check_lanes(1, &t, 0).len(),
            2,
            "no driver samples, no check"
        );
        for (gpu, end) in [(0, 10_600), (0, 10_400), (1, 10_500)] {
            t.samples.push(TelemetryRow {
                gpu,
                source: SOURCE_DRIVER_SAMPLES.into(),
                t_ns: end * MS,
                sm_util_pct: Some(75),
                util_window_ns: Some(200 * MS),
                ..TelemetryRow::sample()
            });
        }
        let c = check_lanes(1, &t, 10_550 * MS);
        assert_eq!(failed(&c), ["NVML last window recorded"]);
        assert_eq!(
            c[2].detail,
            "GPU 0: the driver's last sample ends +50.0 ms from prove's end (200 ms window); \
             GPU 1: the driver's last sample ends -50.0 ms from prove's end (200 ms window)"
        );
        assert!(failed(&check_lanes(1, &t, 10_500 * MS)).is_empty());
    }
}
