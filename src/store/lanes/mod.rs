//! Lanes, the one home of the word: the timeline's rows beneath the spans, as the charts
//! (`plot::timeline`, `plot::lanes`) and the trace export read them. Here, the GPU side
//! of a run folder; in [`series`], the utilisation and CPU series placed on the span
//! clock.
//!
//! The GPU side of a run folder as the charts and the trace export read it: NVML samples
//! (`telemetry.csv`) and CUPTI kernel/copy intervals (`gpu_activity.csv`), both on the
//! span clock. A run without a GPU has the files empty, and one from before telemetry
//! has none; either way the charts say so rather than fail. NVTX ranges that CUPTI
//! recorded (`--nvtx`, kind `nvtx`) are host phases, the spans again: they are loaded
//! but drawn on no GPU lane.

pub mod series;

use super::{ActivityKind, GpuActivityRow, RunData, TelemetryRow, GPU_ACTIVITY, TELEMETRY};

/// What gapscope says of a host where NVML's library (`libnvidia-ml.so.1`, installed with
/// the NVIDIA driver) cannot be opened: one sentence, in place of the loader's error text,
/// which meta.json keeps in `gpu.nvml`.
pub const NO_GPU: &str = "no NVIDIA GPU/driver on this host";

/// Whether `raw`, an error of opening NVML, is the loader's "cannot open" of its library:
/// no driver installed, so no NVIDIA GPU to use.
pub fn is_no_driver(raw: &str) -> bool {
    raw.contains("libnvidia-ml") && raw.contains("cannot open shared object file")
}

/// meta.json's `gpu.reason` as a user reads it: [`NO_GPU`] where it is the loader's
/// error (as run folders written before the sentence recorded it), else as recorded.
pub fn gpu_reason(reason: &str) -> &str {
    if is_no_driver(reason) {
        NO_GPU
    } else {
        reason
    }
}

/// The track a GPU interval is drawn on: one per device and stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct GpuLane {
    pub gpu: u32,
    pub stream: u32,
}

impl GpuLane {
    pub fn of(a: &GpuActivityRow) -> Self {
        GpuLane {
            gpu: a.device,
            stream: a.stream,
        }
    }
}

impl std::fmt::Display for GpuLane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GPU {} stream {}", self.gpu, self.stream)
    }
}

/// What an interval is called on its lane: the kernel name, else its kind.
pub(crate) fn label(a: &GpuActivityRow) -> &str {
    if a.name.is_empty() {
        &a.kind
    } else {
        &a.name
    }
}

/// The numeric series of a sample, as (track name, value).
pub(crate) fn series(t: &TelemetryRow) -> Vec<(&'static str, f64)> {
    [
        ("sm_util_pct", t.sm_util_pct.map(f64::from)),
        ("mem_util_pct", t.mem_util_pct.map(f64::from)),
        ("mem_used_bytes", t.mem_used_bytes.map(|x| x as f64)),
        ("power_mw", t.power_mw.map(f64::from)),
        ("sm_clock_mhz", t.sm_clock_mhz.map(f64::from)),
        ("temperature_c", t.temperature_c.map(f64::from)),
        (
            "pcie_tx_bytes_per_s",
            t.pcie_tx_bytes_per_s.map(|x| x as f64),
        ),
        (
            "pcie_rx_bytes_per_s",
            t.pcie_rx_bytes_per_s.map(|x| x as f64),
        ),
    ]
    .into_iter()
    .filter_map(|(k, v)| v.map(|v| (k, v)))
    .collect()
}

/// The GPU records of a run, and why any could not be read.
#[derive(Debug, Default, Clone)]
pub(crate) struct GpuRecords {
    pub telemetry: Vec<TelemetryRow>,
    pub activity: Vec<GpuActivityRow>,
    /// Why a file in the folder was not used (it never fails a chart).
    pub problems: Vec<String>,
    /// What meta.json says about the GPU side, for the "nothing recorded" note.
    status: String,
}

impl GpuRecords {
    pub fn load(data: &RunData) -> Self {
        let mut out = GpuRecords {
            status: status_line(data),
            ..Default::default()
        };
        match data.load_telemetry_checked() {
            Ok((rows, dropped)) => {
                out.telemetry = rows;
                out.problems.extend(dropped);
            }
            Err(e) => out.problems.push(format!("{TELEMETRY} not used: {e}")),
        }
        match data.load_gpu_activity_checked() {
            Ok((rows, dropped)) => {
                out.activity = rows;
                out.problems.extend(dropped);
            }
            Err(e) => out.problems.push(format!("{GPU_ACTIVITY} not used: {e}")),
        }
        out
    }

    pub fn is_empty(&self) -> bool {
        // The process's CPU time is sampled without a GPU too.
        !self.telemetry.iter().any(super::lanes::series::is_gpu_row)
            && !self
                .activity
                .iter()
                .any(|a| ActivityKind::is_gpu_interval(&a.kind))
    }

    /// Telemetry rows of one rep: NVML samples, and the process's CPU time.
    pub fn telemetry_of(&self, rep: u32) -> Vec<&TelemetryRow> {
        self.telemetry.iter().filter(|r| r.rep == rep).collect()
    }

    /// GPU intervals of one rep (kernels, copies, memsets, kinds this version does not
    /// know; not NVTX ranges).
    pub fn activity_of(&self, rep: u32) -> Vec<&GpuActivityRow> {
        self.activity
            .iter()
            .filter(|r| r.rep == rep && ActivityKind::is_gpu_interval(&r.kind))
            .collect()
    }

    /// What the charts say when a run has no GPU records.
    pub fn missing_note(&self) -> String {
        if self.status == NO_GPU {
            let mut s = format!("no GPU lanes: {NO_GPU}");
            for p in &self.problems {
                s.push_str("; ");
                s.push_str(p);
            }
            return s;
        }
        let mut s =
            format!("no GPU activity recorded ({TELEMETRY} without NVML rows, {GPU_ACTIVITY} empty or absent");
        if !self.status.is_empty() {
            s.push_str("; ");
            s.push_str(&self.status);
        }
        s.push(')');
        for p in &self.problems {
            s.push_str("; ");
            s.push_str(p);
        }
        s
    }

    /// Whether the run had no GPU to use because the host has no NVIDIA driver
    /// ([`NO_GPU`]), which [`Self::missing_note`] then says.
    pub fn no_driver(&self) -> bool {
        self.status == NO_GPU
    }
}

/// meta.json's word on the GPU: why there is none, or what NVML and CUPTI said.
fn status_line(data: &RunData) -> String {
    let g = &data.meta.gpu;
    if !g.available {
        return gpu_reason(g.reason.as_deref().unwrap_or_default()).to_string();
    }
    [("NVML", &g.nvml), ("CUPTI", &g.cupti)]
        .iter()
        .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k}: {v}")))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The loader's error (as meta.json kept it before, and as NVML gives it) reads as
    /// the one sentence; other reasons stay as recorded.
    #[test]
    fn the_loader_s_error_reads_as_no_gpu_on_this_host() {
        let raw = "unavailable: NVML init failed: a libloading error occurred: \
                   libnvidia-ml.so.1: cannot open shared object file: No such file or directory";
        assert!(is_no_driver(raw));
        assert_eq!(gpu_reason(raw), NO_GPU);
        assert_eq!(gpu_reason(NO_GPU), NO_GPU);
        let other = "unavailable: NVML init failed: Driver/library version mismatch";
        assert!(!is_no_driver(other));
        assert_eq!(gpu_reason(other), other);
        let records = GpuRecords {
            status: NO_GPU.into(),
            ..Default::default()
        };
        assert!(records.no_driver());
        assert_eq!(records.missing_note(), format!("no GPU lanes: {NO_GPU}"));
        let other = GpuRecords {
            status: other.into(),
            ..Default::default()
        };
        assert!(!other.no_driver());
        assert!(other.missing_note().contains("version mismatch"));
    }

    fn run_dir() -> (tempfile::TempDir, RunData) {
        let dir = tempfile::tempdir().unwrap();
        let meta: crate::store::Meta = serde_json::from_value(serde_json::json!({
            "schema_version": 1, "gapscope_version": "0", "experiment": "e", "run_id": "r",
            "created_utc": "", "command": [], "host": {"hostname": "", "os": "", "kernel": "",
            "cpu_model": "", "cpu_cores": 1, "memory_bytes": 0}, "git": {}, "counters": {},
            "gpu": {"available": false, "reason": "no GPU here"},
            "workload": {"circuit": "c", "log2_constraints": 1, "batch": 1, "backend": "cpu"},
            "variants": [], "reps": 1, "warmups": 0, "order": "interleaved", "process": "shared"
        }))
        .unwrap();
        let run = dir.path().join("run");
        let mut w = crate::store::RunWriter::create(&run, &meta, "").unwrap();
        let t = TelemetryRow {
            rep: 3,
            sm_util_pct: Some(55),
            t_ns: 100,
            ..TelemetryRow::sample()
        };
        let a = GpuActivityRow {
            rep: 3,
            kind: "kernel".into(),
            stream: 7,
            start_ns: 150,
            end_ns: 180,
            duration_ns: 30,
            ..GpuActivityRow::sample()
        };
        let range = GpuActivityRow {
            kind: "nvtx".into(),
            name: "gpu_prove".into(),
            stream: 0,
            start_ns: 100,
            end_ns: 200,
            duration_ns: 100,
            ..a.clone()
        };
        let unknown = GpuActivityRow {
            kind: "graph".into(),
            start_ns: 185,
            end_ns: 190,
            duration_ns: 5,
            ..a.clone()
        };
        w.append_gpu(&[t], &[a, range, unknown]).unwrap();
        drop(w);
        let data = RunData::load(&run).unwrap();
        (dir, data)
    }

    #[test]
    fn records_of_a_rep_are_found_by_its_number() {
        let (_dir, data) = run_dir();
        let g = GpuRecords::load(&data);
        assert!(g.problems.is_empty(), "{:?}", g.problems);
        assert_eq!(series(g.telemetry_of(3)[0]), vec![("sm_util_pct", 55.0)]);
        assert!(g.telemetry_of(4).is_empty());
        assert_eq!(
            GpuLane::of(g.activity_of(3)[0]).to_string(),
            "GPU 0 stream 7"
        );
        assert_eq!(label(g.activity_of(3)[0]), "kernel");
        // Every row loads; NVTX ranges are no GPU interval, a kind unknown here is.
        assert_eq!(g.activity.len(), 3);
        let kinds: Vec<&str> = g.activity_of(3).iter().map(|a| a.kind.as_str()).collect();
        assert_eq!(kinds, ["kernel", "graph"]);
    }

    #[test]
    fn nvtx_ranges_alone_are_no_gpu_record() {
        let g = GpuRecords {
            activity: vec![GpuActivityRow {
                kind: "nvtx".into(),
                ..GpuActivityRow::sample()
            }],
            ..Default::default()
        };
        assert!(g.is_empty() && g.activity_of(0).is_empty());
    }

    #[test]
    fn an_unreadable_file_is_a_problem_not_an_error() {
        let (_dir, data) = run_dir();
        std::fs::write(data.dir.join(TELEMETRY), "gpu,sm_util_pct\n0,5\n").unwrap();
        let g = GpuRecords::load(&data);
        assert!(g.telemetry.is_empty());
        assert_eq!(g.problems.len(), 1);
        let note = g.missing_note();
        assert!(note.contains("telemetry.csv not used"), "{note}");
        assert!(note.contains("no GPU here"), "{note}");
    }
}
