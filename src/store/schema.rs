//! Row and file types of a run folder. One serde struct per row kind; integer
//! nanoseconds and bytes everywhere (no float seconds). Adding a field is compatible
//! when it has `#[serde(default)]`; renaming or removing one bumps [`SCHEMA_VERSION`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Count, Shared};
use crate::counters::Availability;
use crate::phases::{PhaseSpec, WorkloadKind};

/// 2: meta.json's `workload.kind` and `phases`, a command's workload without circuit
/// fields; runs.csv's `verified`/`proofs` are `checked`/`outputs`.
pub const SCHEMA_VERSION: u32 = 2;

/// Outcome of one rep.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RepStatus {
    /// Proved and every proof verified.
    Ok,
    /// Proving failed or a proof did not verify; never enters a diff.
    Failed,
}

/// One row of runs.csv: a rep of one variant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRow {
    /// Position in the run's schedule (warm-ups included), from 0.
    pub rep: u32,
    pub variant: String,
    /// Index among this variant's measured reps (or among its warm-ups).
    pub iteration: u32,
    pub warmup: bool,
    pub status: RepStatus,
    /// Every output of the rep passed its workload's check (each proof bellperson's
    /// verifier; a program's exit status). `verified` in run folders of schema 1.
    #[serde(rename = "checked", alias = "verified")]
    pub checked: bool,
    /// What the rep produced: proofs of the Groth16 prover, 0 for a program. `proofs`
    /// in run folders of schema 1.
    #[serde(rename = "outputs", alias = "proofs")]
    pub outputs: u32,
    /// Start of the root span (meta.json's `phases.root`), CLOCK_MONOTONIC ns.
    pub start_ns: u64,
    /// Duration of the root span (0 when it did not complete).
    pub wall_ns: u64,
    pub started_utc: String,
    pub pid: u32,
    /// Resident set size of the process after the rep (leak watch).
    pub rss_end_bytes: Option<u64>,
    /// GPU memory used after the rep, where a GPU is watched.
    #[serde(default)]
    pub gpu_mem_used_end_bytes: Option<u64>,
    /// Why the rep failed (empty when ok).
    pub error: String,
    /// How many rows of spans.csv the rep wrote (before this row, which commits it). A
    /// rep with fewer or more is not committed: its spans were cut off or doubled.
    /// Empty in run folders from before this column.
    #[serde(default)]
    pub span_rows: Option<u32>,
}

impl RunRow {
    pub fn sample() -> Self {
        RunRow {
            rep: 0,
            variant: String::new(),
            iteration: 0,
            warmup: false,
            status: RepStatus::Ok,
            checked: true,
            outputs: 0,
            start_ns: 0,
            wall_ns: 0,
            started_utc: String::new(),
            pid: 0,
            rss_end_bytes: None,
            gpu_mem_used_end_bytes: None,
            error: String::new(),
            span_rows: None,
        }
    }
}

/// One row of spans.csv: a finished span of one rep. Counter columns are deltas over
/// the span on its own thread; empty where the counter is unavailable (see meta.json).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpanRow {
    pub rep: u32,
    pub variant: Shared,
    pub span_id: u64,
    pub parent_id: Option<u64>,
    pub name: Shared,
    pub thread_id: u64,
    pub thread_name: Shared,
    pub start_ns: u64,
    pub end_ns: u64,
    pub duration_ns: u64,
    /// Duration minus the union of its children's intervals on the same thread.
    pub self_ns: u64,
    pub instructions: Count,
    pub branches: Count,
    pub cycles: Count,
    pub task_clock_ns: Count,
    pub page_faults: Count,
    pub context_switches: Count,
    /// Span attributes as a JSON object (bytes, sizes, gpu_ms, …).
    pub attrs: Shared,
    /// Time inside the span during which at least one GPU kernel ran (union of the CUPTI
    /// kernel intervals of the rep, clipped to the span). Empty where no activity was
    /// collected.
    #[serde(default)]
    pub gpu_busy_ns: Count,
    /// CPU time of the whole process (every thread, including a library's own) over the
    /// span, CLOCK_PROCESS_CPUTIME_ID. Empty in run folders from before this column.
    #[serde(default)]
    pub process_cpu_ns: Count,
}

impl SpanRow {
    /// Whether the span's self time is on its rep's critical path: its chain of parents
    /// reaches the root without leaving its thread (a span on another thread, such as
    /// an async drop, runs beside the path). `parent` looks a span of the same rep up by
    /// id; a chain longer than `bound` (a cycle) is not on the path. The diff's
    /// `self on critical path` and the history's `critical_self` both use this rule.
    pub fn on_critical_path<'a>(
        &'a self,
        parent: impl Fn(u64) -> Option<&'a SpanRow>,
        bound: usize,
    ) -> bool {
        let mut cur = self;
        for _ in 0..=bound {
            let Some(pid) = cur.parent_id else {
                return true;
            };
            match parent(pid) {
                Some(p) if p.thread_id == cur.thread_id => cur = p,
                _ => return false,
            }
        }
        false
    }

    /// [`Self::on_critical_path`], remembering in `memo` (span id → answer, for one
    /// rep) the answer of every span the walk passes: they all share it, since a chain
    /// that stays on one thread up to an ancestor has that ancestor's answer. Asked of
    /// every span of a rep, each span is walked once: linear however deep the tree
    /// (the walk without memo is quadratic in the depth). A chain longer than `bound`
    /// (a cycle) is off the path, as there.
    pub fn on_critical_path_memo<'a>(
        &'a self,
        parent: impl Fn(u64) -> Option<&'a SpanRow>,
        bound: usize,
        memo: &mut std::collections::HashMap<u64, bool>,
    ) -> bool {
        let mut walked: Vec<u64> = Vec::new();
        let mut cur = self;
        let answer = loop {
            if let Some(&known) = memo.get(&cur.span_id) {
                break known;
            }
            walked.push(cur.span_id);
            if walked.len() > bound.saturating_add(1) {
                break false;
            }
            let Some(pid) = cur.parent_id else {
                break true;
            };
            match parent(pid) {
                Some(p) if p.thread_id == cur.thread_id => cur = p,
                _ => break false,
            }
        };
        for id in walked {
            memo.insert(id, answer);
        }
        answer
    }

    pub fn sample() -> Self {
        SpanRow {
            rep: 0,
            variant: String::new().into(),
            span_id: 0,
            parent_id: None,
            name: String::new().into(),
            thread_id: 0,
            thread_name: String::new().into(),
            start_ns: 0,
            end_ns: 0,
            duration_ns: 0,
            self_ns: 0,
            instructions: None.into(),
            branches: None.into(),
            cycles: None.into(),
            task_clock_ns: None.into(),
            page_faults: None.into(),
            context_switches: None.into(),
            attrs: "{}".into(),
            gpu_busy_ns: None.into(),
            process_cpu_ns: None.into(),
        }
    }

    /// Cores the process kept busy on average over the span (process CPU time / wall).
    pub fn busy_cores(&self) -> Option<f64> {
        self.process_cpu_ns
            .filter(|_| self.duration_ns > 0)
            .map(|c| c as f64 / self.duration_ns as f64)
    }

    /// Time inside the span with no kernel running on the GPU (duration − busy); the
    /// GPU-idle time of `gpu_prove` is the wrapper's share the kernels do not cover.
    pub fn gpu_idle_ns(&self) -> Option<u64> {
        self.gpu_busy_ns.map(|b| self.duration_ns.saturating_sub(b))
    }

    /// Value of a counter column by its name in meta.json / CounterKind::column.
    pub fn counter(&self, column: &str) -> Option<u64> {
        match column {
            "instructions" => self.instructions.get(),
            "branches" => self.branches.get(),
            "cycles" => self.cycles.get(),
            "task_clock_ns" => self.task_clock_ns.get(),
            "page_faults" => self.page_faults.get(),
            "context_switches" => self.context_switches.get(),
            _ => None,
        }
    }
}

/// The machine a run ran on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostInfo {
    pub hostname: String,
    pub os: String,
    pub kernel: String,
    pub cpu_model: String,
    pub cpu_cores: u32,
    pub memory_bytes: u64,
}

/// Source revision of the gapscope that ran.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GitInfo {
    pub revision: Option<String>,
    pub dirty: Option<bool>,
}

/// GPU side of the machine (filled by telemetry; `available: false` with a reason otherwise).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuMeta {
    pub available: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default)]
    pub devices: Vec<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_driver_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_runtime_version: Option<String>,
    /// Number of GPUs NVML sees.
    #[serde(default)]
    pub count: u32,
    /// NVML sampling: "available", or "unavailable: <reason>" (telemetry.csv).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvml: Option<String>,
    /// CUPTI activity: "available", or "unavailable: <reason>" (gpu_activity.csv).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cupti: Option<String>,
    /// NVTX mirroring of spans (`--nvtx`): "available (<where the ranges go>)", "off", or
    /// "unavailable: <reason>"; "(CUPTI markers)" at the end when CUPTI records them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvtx: Option<String>,
    /// NVML sampling period.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample_period_ms: Option<u64>,
    /// Per rep: how CUPTI timestamps map onto the span clock.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clock_calibration: Vec<ClockCalibration>,
    /// Per GPU: how its utilisation lane is placed in time (driver samples, or read
    /// values shifted back by the driver's window), one line each as first recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub util_placement: Vec<String>,
}

/// How CUPTI's timestamps relate to CLOCK_MONOTONIC over one rep: pairs sampled at the
/// rep's start and end. `offset = monotonic − cupti`; with CUPTI's timestamp callback
/// set to CLOCK_MONOTONIC both offsets are ~0 and records need no conversion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClockCalibration {
    pub rep: u32,
    /// "callback" (CUPTI reads CLOCK_MONOTONIC itself) or "linear" (records converted
    /// with the offsets below).
    pub mode: String,
    pub offset_begin_ns: i64,
    pub offset_end_ns: i64,
    /// Rate difference of the two clocks over the rep, parts per million.
    pub drift_ppm: f64,
    /// Widest host window (ns) around a CUPTI timestamp read: the pairing's uncertainty.
    pub uncertainty_ns: u64,
}

/// One row of telemetry.csv: an NVML reading of one GPU during a rep. `t_ns` is on the
/// span clock (CLOCK_MONOTONIC, when the reading started); `read_ns` is how long it took.
/// The `nvml` source reads utilisation, memory, power, clock and temperature each period;
/// the `nvml_pcie` source reads PCIe throughput on its own thread, because NVML samples
/// each PCIe counter over a 20 ms window before it returns. Rows of source
/// `nvml_samples` are the driver's own utilisation samples (nvmlDeviceGetSamples), one
/// per window overlapping the rep (the last one's `t_ns`, its window's end, may lie after
/// the rep's end), and rows of source `process_cpu` (gpu 0, also without a GPU) the
/// process's CPU time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TelemetryRow {
    pub rep: u32,
    pub variant: String,
    pub gpu: u32,
    pub source: String,
    pub t_ns: u64,
    pub read_ns: u64,
    pub sm_util_pct: Option<u32>,
    pub mem_util_pct: Option<u32>,
    pub mem_used_bytes: Option<u64>,
    pub power_mw: Option<u32>,
    pub sm_clock_mhz: Option<u32>,
    pub temperature_c: Option<u32>,
    pub pcie_tx_bytes_per_s: Option<u64>,
    pub pcie_rx_bytes_per_s: Option<u64>,
    /// Where the utilisation columns belong in time (`store::util_time`): `driver_sample`
    /// (a row of source `nvml_samples`: `t_ns` is the driver's own sample time, mapped
    /// onto the span clock), `read_time` (`t_ns` is when gapscope read the driver's
    /// latest average). Empty in run folders from before this column: drawn at `t_ns`.
    #[serde(default)]
    pub util_placement: Option<String>,
    /// The driver's averaging window the utilisation columns stand for (ns), where known.
    #[serde(default)]
    pub util_window_ns: Option<u64>,
    /// CPU time of the whole process at `t_ns` (CLOCK_PROCESS_CPUTIME_ID), on rows of
    /// source `process_cpu`: the CPU lane's busy cores are its rate between rows.
    #[serde(default)]
    pub process_cpu_ns: Option<u64>,
}

impl TelemetryRow {
    pub fn sample() -> Self {
        TelemetryRow {
            rep: 0,
            variant: String::new(),
            gpu: 0,
            source: String::new(),
            t_ns: 0,
            read_ns: 0,
            sm_util_pct: None,
            mem_util_pct: None,
            mem_used_bytes: None,
            power_mw: None,
            sm_clock_mhz: None,
            temperature_c: None,
            pcie_tx_bytes_per_s: None,
            pcie_rx_bytes_per_s: None,
            util_placement: None,
            util_window_ns: None,
            process_cpu_ns: None,
        }
    }
}

/// One row of gpu_activity.csv: a kernel, memcpy or memset as CUPTI saw it, on the span
/// clock. `name` is the (mangled) kernel name, or the copy direction for a memcpy
/// (HtoD, DtoH, DtoD, …) and "memset" for a memset. With `--nvtx` and CUPTI as the NVTX
/// tool, rows of kind "nvtx" are the span mirror's ranges (host time, not GPU work):
/// `name` is the range's message, `correlation_id` CUPTI's marker id, device and stream
/// 0. Readers keep rows of kinds they do not know.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuActivityRow {
    pub rep: u32,
    pub variant: String,
    /// kernel | memcpy | memset | nvtx
    pub kind: String,
    pub name: String,
    pub device: u32,
    pub stream: u32,
    pub correlation_id: u32,
    pub start_ns: u64,
    pub end_ns: u64,
    pub duration_ns: u64,
    pub grid_x: Option<u32>,
    pub grid_y: Option<u32>,
    pub grid_z: Option<u32>,
    pub block_x: Option<u32>,
    pub block_y: Option<u32>,
    pub block_z: Option<u32>,
    pub bytes: Option<u64>,
}

/// The `kind` column of gpu_activity.csv.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActivityKind {
    Kernel,
    Memcpy,
    Memset,
    /// An NVTX push/pop range as CUPTI recorded it (`--nvtx` with CUPTI as the NVTX
    /// tool): host time, not GPU work.
    NvtxRange,
}

impl ActivityKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ActivityKind::Kernel => "kernel",
            ActivityKind::Memcpy => "memcpy",
            ActivityKind::Memset => "memset",
            ActivityKind::NvtxRange => "nvtx",
        }
    }

    /// Whether a gpu_activity.csv row of kind `kind` is an interval of the GPU (a
    /// kernel, a copy, a memset, or a kind this version does not know), as opposed to an
    /// NVTX range, which the GPU lanes of charts and traces leave out.
    pub fn is_gpu_interval(kind: &str) -> bool {
        kind != ActivityKind::NvtxRange.as_str()
    }
}

impl GpuActivityRow {
    pub fn sample() -> Self {
        GpuActivityRow {
            rep: 0,
            variant: String::new(),
            kind: String::new(),
            name: String::new(),
            device: 0,
            stream: 0,
            correlation_id: 0,
            start_ns: 0,
            end_ns: 0,
            duration_ns: 0,
            grid_x: None,
            grid_y: None,
            grid_z: None,
            block_x: None,
            block_y: None,
            block_z: None,
            bytes: None,
        }
    }
}

/// The workload every variant of a run measures: its kind, and for the Groth16 prover
/// its circuit (a variant may change only the backend).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct WorkloadMeta {
    /// Absent in run folders of schema 1: the Groth16 prover, or a command where
    /// `circuit` is "command" ([`WorkloadMeta::kind`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<WorkloadKind>,
    /// The Groth16 prover's circuit, size, batch and backend (absent for a command).
    #[serde(flatten)]
    pub circuit: Option<CircuitMeta>,
}

/// What the Groth16 prover proved, in meta.json's `workload`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CircuitMeta {
    pub circuit: String,
    pub log2_constraints: u32,
    pub batch: u32,
    pub backend: String,
}

impl WorkloadMeta {
    /// A Groth16 prover's workload.
    pub fn groth16(circuit: &str, log2_constraints: u32, batch: u32, backend: &str) -> Self {
        WorkloadMeta {
            kind: Some(WorkloadKind::Groth16),
            circuit: Some(CircuitMeta {
                circuit: circuit.into(),
                log2_constraints,
                batch,
                backend: backend.into(),
            }),
        }
    }

    /// A command's workload: its kind alone (its command is in meta.json's `external`).
    pub fn command() -> Self {
        WorkloadMeta {
            kind: Some(WorkloadKind::Command),
            circuit: None,
        }
    }

    /// The kind, also of a folder of schema 1.
    pub fn kind(&self) -> WorkloadKind {
        match (self.kind, &self.circuit) {
            (Some(k), _) => k,
            (None, Some(c)) if c.circuit == super::command::COMMAND_WORKLOAD => {
                WorkloadKind::Command
            }
            (None, _) => WorkloadKind::Groth16,
        }
    }

    /// Whether the run measured a program gapscope did not build (`command = […]`).
    pub fn is_command(&self) -> bool {
        self.kind() == WorkloadKind::Command
    }

    /// The backend of the workload ("command" for a command's run of schema 1, empty for
    /// one without).
    pub fn backend(&self) -> &str {
        self.circuit.as_ref().map_or("", |c| c.backend.as_str())
    }

    /// The workload in a title: "porep 2^12 × 2 on cpu", or "an external command" for a
    /// program gapscope did not build.
    pub fn describe(&self) -> String {
        match (&self.circuit, self.is_command()) {
            (Some(c), false) => format!(
                "{} 2^{} × {} on {}",
                c.circuit, c.log2_constraints, c.batch, c.backend
            ),
            _ if self.kind() == WorkloadKind::Import => "imported traces".into(),
            _ if self.kind() == WorkloadKind::Hash => "the hash workload".into(),
            _ => "an external command".into(),
        }
    }

    /// A field of the circuit as text ("" where the workload has no circuit, also for a
    /// command's folder of schema 1, whose circuit reads "command"): `circuit`,
    /// `log2_constraints`, `batch` or `backend`.
    pub fn field(&self, name: &str) -> String {
        let Some(c) = self.circuit.as_ref().filter(|_| !self.is_command()) else {
            return String::new();
        };
        match name {
            "circuit" => c.circuit.clone(),
            "log2_constraints" => c.log2_constraints.to_string(),
            "batch" => c.batch.to_string(),
            "backend" => c.backend.clone(),
            _ => String::new(),
        }
    }

    /// Checks what was read: a Groth16 prover's workload names its circuit.
    pub fn check(&self) -> Result<(), String> {
        if self.kind() == WorkloadKind::Groth16 && self.circuit.is_none() {
            return Err(
                "workload of kind groth16 lacks circuit, log2_constraints, batch or backend \
                 (each is required, with its type: string, integer, integer, string)"
                    .into(),
            );
        }
        Ok(())
    }
}

/// A variant as it ran: its name, effective backend and every knob's value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VariantMeta {
    pub name: String,
    pub backend: String,
    pub knobs: BTreeMap<String, String>,
    /// Where its counters came from: "hardware" (perf events), "emulated (callgrind
    /// 3.19)", "off"; absent in runs made before the source was recorded (hardware).
    /// Counts of different sources are never compared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counters: Option<String>,
    /// What its reps ran when not the whole prover: "synthesis" for a GPU backend under
    /// the emulator (`prove` holds synthesis alone; gpu_prove is not run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// The git revision a `rev` variant ran (absent for variants of this build).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<RevisionMeta>,
    /// The dependency patches a `patch` variant's worker was built with, by crate
    /// (absent for other variants).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub patches: Vec<PatchMeta>,
    /// Why a `patch` variant could not run (reason and the build log's tail).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch_failed: Option<String>,
}

/// One dependency patch of a `patch` variant: where the crate came from and what it was.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct PatchMeta {
    /// The crate it replaces (its name on crates.io).
    #[serde(rename = "crate")]
    pub krate: String,
    /// The repository (top folder, or the git URL it was cloned from).
    #[serde(default)]
    pub repo: String,
    /// The folder cargo built it from (a cached worktree, or the working tree).
    #[serde(default)]
    pub path: String,
    /// The revision as the experiment names it (empty: the working tree).
    #[serde(default)]
    pub rev: String,
    /// Its commit (empty where the folder is not in a git repository).
    #[serde(default)]
    pub commit: String,
    /// Tracked files differed from the commit (always false with `rev`).
    #[serde(default)]
    pub dirty: bool,
    /// The version its Cargo.toml declares.
    #[serde(default)]
    pub version: String,
    /// The gapscope commit its worker was built from.
    #[serde(default)]
    pub gapscope_commit: String,
    /// The worker's build log (kept in the revision cache).
    #[serde(default)]
    pub build_log: String,
    /// The worker came from the cache (an earlier run or `gapscope prepare`).
    #[serde(default)]
    pub build_reused: bool,
}

/// A `rev` variant's revision: what was checked out and how it was built.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RevisionMeta {
    /// The revision as the experiment names it.
    pub rev: String,
    pub repo: String,
    pub commit: String,
    /// Tracked files of its worktree differed from the commit (after the build).
    pub dirty: bool,
    /// The build command, run in the worktree; empty when none.
    pub build: Vec<String>,
    /// The build log (kept in the revision cache).
    #[serde(default)]
    pub build_log: Option<String>,
    /// The build's outcome came from an earlier run's cache.
    #[serde(default)]
    pub build_reused: bool,
    /// Why the variant could not run (a failed build with its log's tail, a gapscope
    /// too old for this worker protocol); its reps are then recorded as failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
}

/// meta.json: everything needed to interpret and reproduce a run.
/// (`Meta::sample` gives a minimal one, for tests that build run folders.)
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    pub schema_version: u32,
    pub gapscope_version: String,
    pub experiment: String,
    pub run_id: String,
    pub created_utc: String,
    /// The command line that started the run.
    pub command: Vec<String>,
    pub host: HostInfo,
    pub git: GitInfo,
    /// Per counter column: available, or the reason it is not.
    pub counters: BTreeMap<String, Availability>,
    pub gpu: GpuMeta,
    pub workload: WorkloadMeta,
    pub variants: Vec<VariantMeta>,
    pub reps: u32,
    pub warmups: u32,
    pub order: String,
    pub process: String,
    /// How params were obtained (loaded / generated), per params key.
    #[serde(default)]
    pub params: Vec<serde_json::Value>,
    /// One-time setup outside the measured reps (e.g. a backend's first call), in ns.
    #[serde(default)]
    pub setup_ns: BTreeMap<String, u64>,
    /// Set when the run finished its schedule.
    #[serde(default)]
    pub completed_utc: Option<String>,
    /// sha256 of the folder's experiment.toml as the run started: a resume refuses a
    /// copy edited since.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experiment_sha256: Option<String>,
    /// A run of a program gapscope did not build: its command, folders, builds and the
    /// span lines it printed.
    #[serde(rename = "external", default, skip_serializing_if = "Option::is_none")]
    pub command_workload: Option<super::command::CommandMeta>,
    /// Sampled stacks per variant that asked for them: the last rep's line ("N samples
    /// at H Hz …", or "sampled stacks unavailable: <reason>"). Files: `stacks/`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub profile: BTreeMap<String, String>,
    /// The span recorder of the process that wrote this meta: its clock (TSC or
    /// clock_gettime) with the error it measured, the process CPU mode, and what one
    /// span costs. Absent in run folders from before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorder: Option<crate::trace::cost::RecorderMeta>,
    /// The machine's load, clocks and throttling at the start and end of the run
    /// (absent in runs made before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift: Option<super::drift::Drift>,
    /// The gaps chart's wrapper and inner spans as the experiment named them
    /// (`[workload] gaps`); absent: the prover's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gaps: Option<super::GapsSpec>,
    /// The names of the workload's span tree that tables and charts look up, as the
    /// creator of the folder wrote them; absent in run folders of schema 1, which read
    /// as the Groth16 prover's ([`Meta::phases`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phases: Option<PhaseSpec>,
    /// A run of `gapscope run --until-decided` (its `reps` is then the cap per variant):
    /// the budget it ran under and why it stopped. Absent for a run of fixed reps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until_decided: Option<UntilDecidedMeta>,
    /// How the paths of this meta.json are written (`store::paths`): relative to the run
    /// folder or the repository, `~` for the home folder. Absent: as the machine had
    /// them (`[run] absolute_paths = true`, and folders from before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paths: Option<super::paths::PathsMeta>,
}

/// How a run of `gapscope run --until-decided` was bounded and why it stopped;
/// `--resume` continues the same loop.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UntilDecidedMeta {
    /// Wall-time budget of each invocation, seconds (a resume starts a fresh one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_s: Option<u64>,
    /// Why the run stopped ("decided after 7 pairs", …); absent while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
}

impl Meta {
    /// A minimal meta for a porep 2^10 × 1 cpu run with no variants (tests and fixtures).
    pub fn sample() -> Meta {
        Meta {
            schema_version: SCHEMA_VERSION,
            gapscope_version: "test".into(),
            experiment: "t".into(),
            run_id: "r".into(),
            created_utc: String::new(),
            command: vec![],
            host: HostInfo::default(),
            git: GitInfo::default(),
            counters: Default::default(),
            gpu: GpuMeta::default(),
            workload: WorkloadMeta::groth16("porep", 10, 1, "cpu"),
            variants: vec![],
            reps: 1,
            warmups: 0,
            order: "interleaved".into(),
            process: "shared".into(),
            params: vec![],
            setup_ns: Default::default(),
            completed_utc: None,
            experiment_sha256: None,
            command_workload: None,
            profile: Default::default(),
            recorder: None,
            drift: None,
            gaps: None,
            until_decided: None,
            phases: Some(PhaseSpec::groth16()),
            paths: None,
        }
    }

    /// The same meta with every path as the machine had it (`[run] absolute_paths`).
    pub fn with_absolute_paths(mut self, absolute: bool) -> Meta {
        if absolute {
            self.paths = None;
        }
        self
    }

    /// The run's phases: its own, or the Groth16 prover's of schema 1 in a folder
    /// written before meta.json had them.
    pub fn phases(&self) -> &PhaseSpec {
        self.phases
            .as_ref()
            .unwrap_or_else(|| PhaseSpec::groth16_ref())
    }
}
