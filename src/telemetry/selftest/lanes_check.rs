//! The self-test's checks of the timeline's lanes: each sampled GPU's utilisation placed
//! where the driver's averages belong (from its own samples, or from the reads shifted
//! back by its window), and the process's CPU time sampled every period.

use super::checks::Check;
use crate::store::lane_series::SOURCE_PROCESS_CPU;
use crate::telemetry::RepTelemetry;

/// The lanes' checks of one rep.
pub fn check_lanes(rep: u32, t: &RepTelemetry) -> Vec<Check> {
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
    vec![
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
    ]
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
        assert!(failed(&check_lanes(1, &good)).is_empty());
        // GPU 1 drawn at read time; no CPU samples.
        let bad = rep_telemetry(&["GPU 0: driver samples (…)", "GPU 1: at read time (…)"], 1);
        let c = check_lanes(1, &bad);
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
        let c = check_lanes(1, &none);
        assert_eq!(failed(&c), ["NVML utilisation placed"]);
        assert_eq!(c[0].detail, "no placement recorded for GPUs [0, 1]");
    }
}
