//! GPU activity records (kernels, copies, memsets, and the NVTX ranges CUPTI recorded)
//! independent of CUPTI's structs, their rows in gpu_activity.csv, and the GPU-busy time
//! of each span.
//!
//! Busy time of a span = length of the union of the rep's kernel intervals (any stream,
//! any GPU) clipped to the span. Copies and memsets are recorded but do not count as busy:
//! the question busy/idle answers is "were the SMs working", and copy engines run
//! alongside kernels. NVTX ranges are host-side phases (the spans as an NVTX tool saw
//! them), never GPU work.

use crate::store::{ActivityKind, GpuActivityRow, SpanRow};
use crate::trace::selftime::Coverage;

use super::clock::ClockMap;

/// One activity record as CUPTI reported it (timestamps on CUPTI's clock).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActivityRecord {
    pub kind: ActivityKind,
    /// Kernel name, copy direction, "memset", or the NVTX range's message.
    pub name: String,
    pub device: u32,
    pub stream: u32,
    /// CUPTI's correlation id; for an NVTX range, the marker id CUPTI gave it.
    pub correlation_id: u32,
    pub start: u64,
    pub end: u64,
    pub grid: Option<[u32; 3]>,
    pub block: Option<[u32; 3]>,
    pub bytes: Option<u64>,
}

impl ActivityRecord {
    /// The row of gpu_activity.csv, converted to the span clock.
    pub fn to_row(&self, rep: u32, variant: &str, map: &ClockMap) -> GpuActivityRow {
        let start_ns = map.to_span_ns(self.start);
        let end_ns = map.to_span_ns(self.end).max(start_ns);
        let g = |v: Option<[u32; 3]>, i: usize| v.map(|a| a[i]);
        GpuActivityRow {
            rep,
            variant: variant.to_string(),
            kind: self.kind.as_str().into(),
            name: self.name.clone(),
            device: self.device,
            stream: self.stream,
            correlation_id: self.correlation_id,
            start_ns,
            end_ns,
            duration_ns: end_ns - start_ns,
            grid_x: g(self.grid, 0),
            grid_y: g(self.grid, 1),
            grid_z: g(self.grid, 2),
            block_x: g(self.block, 0),
            block_y: g(self.block, 1),
            block_z: g(self.block, 2),
            bytes: self.bytes,
        }
    }
}

pub use gapscope_cupti::copy_direction;

impl From<gapscope_cupti::RecordKind> for ActivityKind {
    fn from(k: gapscope_cupti::RecordKind) -> ActivityKind {
        match k {
            gapscope_cupti::RecordKind::Kernel => ActivityKind::Kernel,
            gapscope_cupti::RecordKind::Memcpy => ActivityKind::Memcpy,
            gapscope_cupti::RecordKind::Memset => ActivityKind::Memset,
        }
    }
}

impl From<gapscope_cupti::Record> for ActivityRecord {
    fn from(r: gapscope_cupti::Record) -> ActivityRecord {
        ActivityRecord {
            kind: ActivityKind::from(r.kind),
            name: r.name,
            device: r.device,
            stream: r.stream,
            correlation_id: r.correlation_id,
            start: r.start,
            end: r.end,
            grid: r.grid,
            block: r.block,
            bytes: r.bytes,
        }
    }
}

/// Sets `gpu_busy_ns` on every span from the rep's kernel rows (all on the span clock).
/// Call only for reps whose activity was collected: a span with no kernel gets `Some(0)`.
pub fn annotate_gpu_busy(spans: &mut [SpanRow], activity: &[GpuActivityRow]) {
    let cov = Coverage::new(
        activity
            .iter()
            .filter(|a| a.kind == ActivityKind::Kernel.as_str())
            .map(|a| (a.start_ns, a.end_ns)),
    );
    for s in spans {
        s.gpu_busy_ns = Some(cov.within(s.start_ns, s.end_ns)).into();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::clock::ClockPair;
    use proptest::prelude::*;

    fn brute(iv: &[(u64, u64)], lo: u64, hi: u64) -> u64 {
        (lo..hi)
            .filter(|t| iv.iter().any(|&(a, b)| a <= *t && *t < b))
            .count() as u64
    }

    #[test]
    fn coverage_merges_overlaps_and_clips() {
        let c = Coverage::new([(10, 20), (15, 30), (40, 50), (50, 55), (60, 60)]);
        assert_eq!(c.total(), 20 + 15);
        assert_eq!(c.within(0, 100), 35);
        assert_eq!(c.within(12, 45), 18 + 5);
        assert_eq!(c.within(30, 40), 0);
        assert_eq!(c.within(52, 52), 0);
        assert_eq!(c.within(50, 40), 0);
        assert_eq!(Coverage::new([]).within(0, 10), 0);
    }

    proptest! {
        #[test]
        fn coverage_equals_brute_force(
            iv in prop::collection::vec((0u64..200, 0u64..40), 0..40),
            lo in 0u64..250, len in 0u64..250,
        ) {
            let iv: Vec<(u64, u64)> = iv.into_iter().map(|(a, l)| (a, a + l)).collect();
            let c = Coverage::new(iv.iter().copied());
            prop_assert_eq!(c.within(lo, lo + len), brute(&iv, lo, lo + len));
        }
    }

    fn kernel(start: u64, end: u64) -> ActivityRecord {
        ActivityRecord {
            kind: ActivityKind::Kernel,
            name: "k".into(),
            device: 0,
            stream: 7,
            correlation_id: 1,
            start,
            end,
            grid: Some([64, 2, 1]),
            block: Some([256, 1, 1]),
            bytes: None,
        }
    }

    #[test]
    fn records_convert_to_span_clock_rows() {
        let map = ClockMap::offset_only(ClockPair {
            cupti_ns: 1_000,
            mono_ns: 101_000,
            window_ns: 0,
        });
        let r = kernel(2_000, 2_500).to_row(4, "v", &map);
        assert_eq!(
            (r.start_ns, r.end_ns, r.duration_ns),
            (102_000, 102_500, 500)
        );
        assert_eq!(
            (r.grid_x, r.grid_y, r.block_x, r.block_z),
            (Some(64), Some(2), Some(256), Some(1))
        );
        assert_eq!(
            (r.rep, r.variant.as_str(), r.kind.as_str()),
            (4, "v", "kernel")
        );
        // A record whose end precedes its start (never expected) gets zero length.
        let r = kernel(3_000, 2_000).to_row(0, "v", &map);
        assert_eq!(r.duration_ns, 0);
        assert_eq!(copy_direction(1), "HtoD");
        assert_eq!(copy_direction(2), "DtoH");
        assert_eq!(copy_direction(200), "unknown");
    }

    #[test]
    fn busy_and_idle_per_span() {
        let map = ClockMap::offset_only(ClockPair {
            cupti_ns: 0,
            mono_ns: 0,
            window_ns: 0,
        });
        let mut copy = kernel(0, 1_000).to_row(0, "v", &map);
        copy.kind = "memcpy".into();
        let range = ActivityRecord {
            kind: ActivityKind::NvtxRange,
            name: "gpu_prove".into(),
            grid: None,
            block: None,
            ..kernel(0, 1_000)
        }
        .to_row(0, "v", &map);
        assert_eq!((range.kind.as_str(), range.grid_x), ("nvtx", None));
        assert!(!ActivityKind::is_gpu_interval(&range.kind));
        assert!(ActivityKind::is_gpu_interval("kernel") && ActivityKind::is_gpu_interval("new"));
        let acts = vec![
            kernel(100, 300).to_row(0, "v", &map),
            kernel(250, 400).to_row(0, "v", &map), // overlaps the first (another stream)
            kernel(700, 800).to_row(0, "v", &map),
            copy,  // copies are not "busy"
            range, // nor are NVTX ranges (host phases)
        ];
        let mut gpu_prove = SpanRow::sample();
        (gpu_prove.start_ns, gpu_prove.end_ns, gpu_prove.duration_ns) = (0, 1_000, 1_000);
        let mut kernels = SpanRow::sample();
        (kernels.start_ns, kernels.end_ns, kernels.duration_ns) = (200, 750, 550);
        let mut spans = vec![gpu_prove, kernels];
        annotate_gpu_busy(&mut spans, &acts);
        assert_eq!(spans[0].gpu_busy_ns, Some(300 + 100));
        assert_eq!(spans[0].gpu_idle_ns(), Some(600));
        assert_eq!(spans[1].gpu_busy_ns, Some(200 + 50));
        annotate_gpu_busy(&mut spans, &[]);
        assert_eq!(spans[1].gpu_busy_ns, Some(0));
    }
}
