//! Leak watch: host RSS and GPU memory at the end of every rep (columns `rss_end_bytes`
//! and `gpu_mem_used_end_bytes` of runs.csv), and a flag where either grows steadily
//! across a variant's measured reps.
//!
//! A series is flagged when it grows in at least `min_growth_fraction` of its
//! consecutive steps (default 80 %) and its total growth, last − first, exceeds
//! `min_total_growth_bytes`. Both conditions matter: allocator noise makes single steps
//! go up and down (the fraction), and a few pages of growth are no leak (the total).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::store::{RunData, RunRow};

/// Which end-of-rep measurement grew.
/// Serialised as its runs.csv column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum LeakMetric {
    #[serde(rename = "rss_end_bytes")]
    HostRss,
    #[serde(rename = "gpu_mem_used_end_bytes")]
    GpuMemory,
}

impl LeakMetric {
    pub fn column(self) -> &'static str {
        match self {
            LeakMetric::HostRss => "rss_end_bytes",
            LeakMetric::GpuMemory => "gpu_mem_used_end_bytes",
        }
    }
}

/// A variant whose memory grew steadily across its measured reps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeakFlag {
    pub variant: String,
    pub metric: LeakMetric,
    /// Measured reps in the series.
    pub reps: usize,
    /// Steps (consecutive pairs) that grew, of `reps − 1`.
    pub growing_steps: usize,
    pub first_bytes: u64,
    pub last_bytes: u64,
}

impl LeakFlag {
    pub fn growth_bytes(&self) -> u64 {
        self.last_bytes.saturating_sub(self.first_bytes)
    }
}

impl fmt::Display for LeakFlag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
        write!(
            f,
            "variant {:?}: {} grew in {}/{} steps over {} reps, {:.1} → {:.1} MiB (+{:.1} MiB, {:.1} MiB/rep): possible leak",
            self.variant,
            self.metric.column(),
            self.growing_steps,
            self.reps.saturating_sub(1),
            self.reps,
            mib(self.first_bytes),
            mib(self.last_bytes),
            mib(self.growth_bytes()),
            mib(self.growth_bytes()) / self.reps.saturating_sub(1).max(1) as f64
        )
    }
}

/// Thresholds of the leak watch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LeakPolicy {
    pub min_growth_fraction: f64,
    pub min_total_growth_bytes: u64,
    /// Fewer measured reps than this say nothing.
    pub min_reps: usize,
}

impl Default for LeakPolicy {
    fn default() -> Self {
        LeakPolicy {
            min_growth_fraction: 0.8,
            min_total_growth_bytes: 64 << 20,
            min_reps: 3,
        }
    }
}

/// Whether one series (in rep order) grows steadily: `Some((growing steps, first, last))`.
pub fn steady_growth(series: &[u64], policy: &LeakPolicy) -> Option<(usize, u64, u64)> {
    if series.len() < policy.min_reps.max(2) {
        return None;
    }
    let steps = series.len() - 1;
    let growing = series.windows(2).filter(|w| w[1] > w[0]).count();
    let (first, last) = (series[0], series[steps]);
    let fraction_ok = growing as f64 >= policy.min_growth_fraction * steps as f64;
    let total_ok = last.saturating_sub(first) > policy.min_total_growth_bytes;
    (fraction_ok && total_ok).then_some((growing, first, last))
}

/// Leak flags of a run with the default policy.
pub fn leak_flags(data: &RunData) -> Vec<LeakFlag> {
    leak_flags_with(data, &LeakPolicy::default())
}

/// Leak flags per variant and metric: the variant's measured (not warm-up) reps in
/// schedule order, reps without the measurement left out.
pub fn leak_flags_with(data: &RunData, policy: &LeakPolicy) -> Vec<LeakFlag> {
    let mut variants: Vec<&str> = data.meta.variants.iter().map(|v| v.name.as_str()).collect();
    for r in &data.runs {
        if !variants.contains(&r.variant.as_str()) {
            variants.push(&r.variant);
        }
    }
    let mut out = Vec::new();
    for v in variants {
        let mut rows: Vec<&RunRow> = data
            .runs
            .iter()
            .filter(|r| r.variant == v && !r.warmup)
            .collect();
        rows.sort_by_key(|r| r.rep);
        for metric in [LeakMetric::HostRss, LeakMetric::GpuMemory] {
            let series: Vec<u64> = rows
                .iter()
                .filter_map(|r| match metric {
                    LeakMetric::HostRss => r.rss_end_bytes,
                    LeakMetric::GpuMemory => r.gpu_mem_used_end_bytes,
                })
                .collect();
            if let Some((growing_steps, first_bytes, last_bytes)) = steady_growth(&series, policy) {
                out.push(LeakFlag {
                    variant: v.to_string(),
                    metric,
                    reps: series.len(),
                    growing_steps,
                    first_bytes,
                    last_bytes,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Meta, VariantMeta};

    const MIB: u64 = 1 << 20;

    fn policy() -> LeakPolicy {
        LeakPolicy::default()
    }

    #[test]
    fn steady_growth_needs_both_fraction_and_total() {
        // +100 MiB every rep: flagged.
        let s: Vec<u64> = (0..6).map(|i| 1000 * MIB + i * 100 * MIB).collect();
        assert_eq!(
            steady_growth(&s, &policy()),
            Some((5, 1000 * MIB, 1500 * MIB))
        );
        // Same total growth but in one jump among flat steps: 1/5 growing, not steady.
        let s = [1000, 1000, 1000, 1500, 1500, 1500].map(|m| m * MIB);
        assert_eq!(steady_growth(&s, &policy()), None);
        // Steady but tiny (allocator warm-up): 4 KiB per rep.
        let s: Vec<u64> = (0..10).map(|i| 1000 * MIB + i * 4096).collect();
        assert_eq!(steady_growth(&s, &policy()), None);
        // Noise: up and down around a level.
        let s = [1000, 1090, 1010, 1100, 990, 1080, 1000].map(|m| m * MIB);
        assert_eq!(steady_growth(&s, &policy()), None);
    }

    #[test]
    fn the_eighty_percent_boundary() {
        // 5 steps, 4 growing (80 %): flagged; 3 growing (60 %): not.
        let four = [100, 200, 300, 290, 400, 500].map(|m| m * MIB);
        assert_eq!(steady_growth(&four, &policy()).map(|g| g.0), Some(4));
        let three = [100, 200, 190, 300, 290, 500].map(|m| m * MIB);
        assert_eq!(steady_growth(&three, &policy()), None);
        // Too short to say.
        assert_eq!(steady_growth(&[100 * MIB, 900 * MIB], &policy()), None);
        assert_eq!(steady_growth(&[], &policy()), None);
        // Shrinking is never a leak.
        let down: Vec<u64> = (0..6).map(|i| 2000 * MIB - i * 100 * MIB).collect();
        assert_eq!(steady_growth(&down, &policy()), None);
    }

    fn data(rows: Vec<RunRow>) -> RunData {
        let variant = |n: &str| VariantMeta {
            name: n.into(),
            backend: "cpu".into(),
            knobs: Default::default(),
            counters: None,
            scope: None,
            revision: None,
            patches: Vec::new(),
            patch_failed: None,
        };
        RunData {
            dir: "x".into(),
            meta: Meta {
                variants: vec![variant("leaky"), variant("clean")],
                reps: 5,
                warmups: 1,
                ..Meta::sample()
            },
            runs: rows,
            spans: vec![],
        }
    }

    #[test]
    fn flags_are_per_variant_and_metric_and_skip_warmups() {
        let mut rows = Vec::new();
        let mut rep = 0;
        for i in 0..6u64 {
            for v in ["leaky", "clean"] {
                let mut r = RunRow::sample();
                r.rep = rep;
                rep += 1;
                r.variant = v.into();
                r.warmup = i == 0;
                // The warm-up of "clean" is far below its level: must not count as growth.
                r.rss_end_bytes = Some(if v == "clean" && i == 0 {
                    10 * MIB
                } else {
                    500 * MIB + (i % 2) * MIB
                });
                r.gpu_mem_used_end_bytes = Some(if v == "leaky" {
                    1000 * MIB + i * 256 * MIB
                } else {
                    1000 * MIB
                });
                rows.push(r);
            }
        }
        // Interleaved order: sort must follow `rep`, not file order.
        rows.reverse();
        let flags = leak_flags(&data(rows));
        assert_eq!(flags.len(), 1, "{flags:?}");
        let f = &flags[0];
        assert_eq!(
            (f.variant.as_str(), f.metric, f.reps, f.growing_steps),
            ("leaky", LeakMetric::GpuMemory, 5, 4)
        );
        assert_eq!(f.growth_bytes(), 4 * 256 * MIB);
        let text = f.to_string();
        assert!(
            text.contains("gpu_mem_used_end_bytes")
                && text.contains("4/4 steps")
                && text.contains("+1024.0 MiB"),
            "{text}"
        );
    }

    #[test]
    fn reps_without_the_measurement_are_left_out() {
        let rows: Vec<RunRow> = (0..8u32)
            .map(|i| {
                let mut r = RunRow::sample();
                r.rep = i;
                r.variant = "leaky".into();
                // GPU memory only known on odd reps; RSS never.
                r.gpu_mem_used_end_bytes = (i % 2 == 1).then_some(100 * MIB * i as u64);
                r
            })
            .collect();
        let flags = leak_flags(&data(rows));
        assert_eq!(flags.len(), 1);
        assert_eq!((flags[0].reps, flags[0].metric), (4, LeakMetric::GpuMemory));
    }
}
