//! The GPU side of a run folder as the charts and the trace export read it: NVML samples
//! (`telemetry.csv`) and kernel/copy intervals (`gpu_activity.csv`), both on the span
//! clock. Both files are optional; a run without a GPU has neither.
//!
//! The row types are deliberately minimal and read by header, so extra columns written
//! by the telemetry module are ignored and missing optional ones read as empty.

use std::path::Path;

use serde::Deserialize;

use crate::store::read_csv;

pub const TELEMETRY: &str = "telemetry.csv";
pub const GPU_ACTIVITY: &str = "gpu_activity.csv";

/// One NVML sample.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub(crate) struct TelemetryRow {
    #[serde(default)]
    pub rep: Option<u32>,
    pub t_ns: u64,
    #[serde(default, alias = "gpu_index", alias = "device")]
    pub gpu: Option<u32>,
    #[serde(default)]
    pub sm_util_pct: Option<f64>,
    #[serde(default)]
    pub mem_util_pct: Option<f64>,
    #[serde(default)]
    pub mem_used_bytes: Option<u64>,
    #[serde(default)]
    pub power_mw: Option<u64>,
    #[serde(default)]
    pub sm_clock_mhz: Option<u64>,
    #[serde(default)]
    pub temp_c: Option<f64>,
}

impl TelemetryRow {
    /// The numeric series of a sample, as (track name, value).
    pub fn series(&self) -> Vec<(&'static str, f64)> {
        let mut v = Vec::new();
        let mut push = |name, x: Option<f64>| {
            if let Some(x) = x {
                v.push((name, x));
            }
        };
        push("sm_util_pct", self.sm_util_pct);
        push("mem_util_pct", self.mem_util_pct);
        push("mem_used_bytes", self.mem_used_bytes.map(|x| x as f64));
        push("power_mw", self.power_mw.map(|x| x as f64));
        push("sm_clock_mhz", self.sm_clock_mhz.map(|x| x as f64));
        push("temp_c", self.temp_c);
        v
    }
}

/// One interval of GPU work: a kernel, a copy or a memset.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub(crate) struct GpuActivityRow {
    #[serde(default)]
    pub rep: Option<u32>,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub name: String,
    pub start_ns: u64,
    pub end_ns: u64,
    #[serde(default, alias = "gpu_index", alias = "device")]
    pub gpu: Option<u32>,
    #[serde(default)]
    pub stream: Option<u64>,
    #[serde(default)]
    pub bytes: Option<u64>,
}

impl GpuActivityRow {
    /// The lane this interval is drawn on: one per GPU and stream.
    pub fn lane(&self) -> GpuLane {
        GpuLane {
            gpu: self.gpu.unwrap_or(0),
            stream: self.stream,
        }
    }

    pub fn label(&self) -> &str {
        if self.name.is_empty() {
            &self.kind
        } else {
            &self.name
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct GpuLane {
    pub gpu: u32,
    pub stream: Option<u64>,
}

impl std::fmt::Display for GpuLane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.stream {
            Some(s) => write!(f, "GPU {} stream {s}", self.gpu),
            None => write!(f, "GPU {}", self.gpu),
        }
    }
}

/// The GPU records of a run, and what could not be read.
#[derive(Debug, Default, Clone)]
pub(crate) struct GpuRecords {
    pub telemetry: Vec<TelemetryRow>,
    pub activity: Vec<GpuActivityRow>,
    /// Why a file present in the folder was not used (it never fails a chart).
    pub problems: Vec<String>,
}

impl GpuRecords {
    pub fn load(dir: &Path) -> Self {
        let mut out = GpuRecords::default();
        let tp = dir.join(TELEMETRY);
        if tp.exists() {
            match read_csv(&tp) {
                Ok(rows) => out.telemetry = rows,
                Err(e) => out.problems.push(format!("{TELEMETRY} not used: {e}")),
            }
        }
        let ap = dir.join(GPU_ACTIVITY);
        if ap.exists() {
            match read_csv(&ap) {
                Ok(rows) => out.activity = rows,
                Err(e) => out.problems.push(format!("{GPU_ACTIVITY} not used: {e}")),
            }
        }
        out
    }

    pub fn is_empty(&self) -> bool {
        self.telemetry.is_empty() && self.activity.is_empty()
    }

    /// Samples of one rep: those tagged with it, or untagged ones inside its window.
    pub fn telemetry_of(&self, rep: u32, window: (u64, u64)) -> Vec<&TelemetryRow> {
        self.telemetry
            .iter()
            .filter(|r| match r.rep {
                Some(x) => x == rep,
                None => r.t_ns >= window.0 && r.t_ns <= window.1,
            })
            .collect()
    }

    /// Intervals of one rep: those tagged with it, or untagged ones overlapping its window.
    pub fn activity_of(&self, rep: u32, window: (u64, u64)) -> Vec<&GpuActivityRow> {
        self.activity
            .iter()
            .filter(|r| match r.rep {
                Some(x) => x == rep,
                None => r.end_ns >= window.0 && r.start_ns <= window.1,
            })
            .collect()
    }

    /// What the charts say when a run has no GPU records.
    pub fn missing_note(&self) -> String {
        let mut s = format!(
            "no GPU activity recorded (no {TELEMETRY} or {GPU_ACTIVITY} in the run folder)"
        );
        for p in &self.problems {
            s.push_str("; ");
            s.push_str(p);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_read_by_header_ignore_extra_columns_and_accept_missing_ones() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(TELEMETRY),
            "t_ns,gpu,sm_util_pct,pcie_tx_bytes_per_s,rep,future_column\n100,0,55.5,123,3,x\n200,0,,7,3,y\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join(GPU_ACTIVITY),
            "rep,kind,name,start_ns,end_ns,stream,correlation_id\n3,kernel,msm,150,180,7,99\n",
        )
        .unwrap();
        let g = GpuRecords::load(dir.path());
        assert!(g.problems.is_empty(), "{:?}", g.problems);
        assert_eq!(g.telemetry.len(), 2);
        assert_eq!(g.telemetry[0].sm_util_pct, Some(55.5));
        assert_eq!(g.telemetry[1].sm_util_pct, None);
        assert_eq!(g.telemetry[0].series(), vec![("sm_util_pct", 55.5)]);
        assert_eq!(g.activity[0].lane().to_string(), "GPU 0 stream 7");
        assert_eq!(g.activity_of(3, (0, 0)).len(), 1);
        assert_eq!(g.activity_of(4, (0, 1000)).len(), 0);
    }

    #[test]
    fn an_unreadable_file_is_a_problem_not_an_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(TELEMETRY), "gpu,sm_util_pct\n0,5\n").unwrap();
        let g = GpuRecords::load(dir.path());
        assert!(g.is_empty());
        assert_eq!(g.problems.len(), 1);
        assert!(g.missing_note().contains("telemetry.csv not used"));
    }
}
