//! Experiment specs (TOML): a workload, a run policy and named variants.
//!
//! ```toml
//! name = "quickstart"
//! [workload]
//! circuit = "porep"          # sha256 | porep | chain
//! log2_constraints = 12
//! batch = 2
//! backend = "cpu"            # cpu | cuda | supraseal
//! [run]
//! reps = 5
//! warmups = 1
//! order = "interleaved"      # interleaved (ABAB…) | counterbalanced (ABBA…) | blocks | sequential (AA…BB…)
//! block = 5                  # reps per block with order = "blocks" (AAAAABBBBBBBBBBAAAAA…)
//! process = "shared"         # shared | per_rep (a worker per rep) | per_variant (one per variant)
//! reps_per_worker = 4        # per_variant: a new worker every 4 reps (after its warm-ups)
//! counters = true           # true | false | "hardware" (= true) | "emulated" (callgrind)
//! telemetry_period_ms = 20   # NVML sampling period
//! rep_timeout_s = 300        # optional: a rep (or backend setup) still running then fails
//! heap_trim = false          # malloc_trim before every rep (no heap carried between reps)
//! profile = false            # sampled stacks of every thread (also per variant)
//! profile_hz = 1000          # their rate, per second of each thread's CPU time (1..=10000)
//! [[variant]]
//! name = "baseline"
//! drop = "sync"              # knobs: drop, gadget, host_memory, backend, telemetry, counters
//! telemetry = true           # GPU telemetry during the reps: true | false | "nvml" | "cupti"
//! rev = "main~3"             # optional: a git revision whose build runs this variant
//! repo = "../other"          # optional: the repository of `rev` (default: this one)
//! patch = { "supraseal-c2" = { path = "../supraseal-c2", rev = "HEAD~1" } }
//!                            # optional: dependencies from other sources (crate::patches)
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::spec_checks::{
    check_command_variant, check_cuda_knobs, check_name, check_profile, check_rev,
    describe_toml_error, CudaKnobs,
};
use crate::counters::CounterMode;
use crate::prover::{BackendKind, CircuitKind, DropPolicy, Gadget, ProveOptions};
use crate::telemetry::TelemetryParts;

#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("cannot read experiment {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

/// What every variant runs: the built-in prover (`circuit`, `log2_constraints`, …), or
/// a program of the user's (`command = […]`, [`CommandWorkload`]); the file's
/// `[workload]` table is read through [`WorkloadFile`](super::workload_file::WorkloadFile).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "WorkloadFile", into = "WorkloadFile")]
pub struct Workload {
    pub circuit: CircuitKind,
    pub log2_constraints: u32,
    pub batch: u32,
    pub backend: BackendKind,
    /// A program gapscope did not build; the prover's fields above are then unused.
    pub command: Option<CommandWorkload>,
    /// `gaps = { wrapper, inner }`: the gaps chart's spans (default: the prover's).
    pub gaps: Option<crate::store::GapsSpec>,
    /// `kind = "hash"`: the hash workload instead of the prover (whose fields above are
    /// then unused).
    pub hash: Option<gapscope_hash::HashWorkload>,
    /// `worker = ["BINARY", …]`: the in-process workload's reps run in that binary, one
    /// serving process per variant ([`super::workload_bin`]).
    pub worker: Option<Vec<String>>,
}

impl Workload {
    /// `worker = [...]`: the binary that runs the reps, the settings it is started with
    /// (the in-process workload's own, as JSON) and the kind it must answer for.
    /// (`params_dir`: the params cache, which the prover's binary loads its params from.)
    pub fn binary(
        &self,
        params_dir: &Path,
    ) -> Option<(&[String], String, gapscope_workload::phases::WorkloadKind)> {
        let cmd = self.worker.as_deref()?;
        let (settings, kind) = self.binary_settings(params_dir)?;
        Some((cmd, settings, kind))
    }

    /// What a workload binary of this in-process workload is started with (its settings
    /// as JSON) and the kind it must answer for; `None` for a command workload.
    pub fn binary_settings(
        &self,
        params_dir: &Path,
    ) -> Option<(String, gapscope_workload::phases::WorkloadKind)> {
        use gapscope_workload::phases::WorkloadKind;
        if let Some(h) = &self.hash {
            let json = serde_json::to_string(h).unwrap_or_default();
            return Some((json, WorkloadKind::Hash));
        }
        if self.command.is_some() {
            return None;
        }
        let settings = serde_json::json!({
            "circuit": self.circuit,
            "log2_constraints": self.log2_constraints,
            "batch": self.batch,
            "params_dir": params_dir,
        });
        Some((settings.to_string(), WorkloadKind::Groth16))
    }

    /// A variant's knobs as its workload binary gets them: the workload's own (`knobs =
    /// { … }`), or the prover's, each named (`gapscope_groth16::knobs::to_knobs`).
    pub fn binary_knobs(&self, v: &ResolvedVariant) -> gapscope_workload::Knobs {
        if self.hash.is_some() {
            return v.workload_knobs.clone();
        }
        crate::prover::knobs::to_knobs(v.backend, v.gadget, &v.prove)
    }

    /// Whether the variants run the built-in prover (not a program of the user's, not
    /// another in-process workload): the one that needs params, backends and circuits.
    pub fn runs_prover(&self) -> bool {
        self.command.is_none() && self.hash.is_none()
    }
}

/// Largest `bytes` of the hash workload (4 GiB): a rep's buffer is made in memory.
pub const MAX_HASH_BYTES: u64 = 1 << 32;

pub use super::command::CommandWorkload;
pub use super::workload_file::{InProcessKind, WorkloadFile};

impl TryFrom<WorkloadFile> for Workload {
    type Error = String;

    fn try_from(f: WorkloadFile) -> Result<Workload, String> {
        // The two kinds of workload (a command of the user's, the built-in prover), each
        // with the keys it refuses from the other: one function, so that the checks and
        // their messages stay side by side.
        if let Some(g) = &f.gaps {
            g.check()?;
        }
        if let Some(w) = &f.worker {
            check_worker(w)?;
        }
        let gaps = f.gaps.clone();
        if f.kind == Some(InProcessKind::Hash) {
            return hash_workload(f);
        }
        if f.worker.is_some() && f.command.is_some() {
            return Err(
                "workload.worker runs an in-process workload's reps in a binary of its own \
                 (gapscope-groth16-worker, gapscope-hash-worker); a command workload is its \
                 own program already: remove worker"
                    .into(),
            );
        }
        if f.bytes.is_some() {
            return Err("workload.bytes goes with kind = \"hash\"; add it, or remove bytes".into());
        }
        if let Some(command) = f.command {
            if f.circuit.is_some() || f.log2_constraints.is_some() || f.batch.is_some() {
                return Err(
                    "workload: command = [...] runs a program of your own; circuit, \
                            log2_constraints and batch belong to the built-in prover: remove \
                            them (or remove command)"
                        .into(),
                );
            }
            if f.backend.is_some() {
                return Err(
                    "workload: backend is a knob of the built-in prover; a command \
                            workload runs its program as given: remove backend"
                        .into(),
                );
            }
            let command = CommandWorkload {
                command,
                build: f.build,
                prepare: f.prepare,
                dir: f.dir,
                capture: crate::capture::CaptureSpec {
                    log_spans: f.log_spans,
                    nvtx: f.nvtx,
                    cupti: f.cupti,
                    name_map: f.name_map,
                    tracing_names: f.tracing_names,
                },
                max_spans_per_rep: f.max_spans_per_rep,
                trace_file: f.trace_file,
            };
            command.check()?;
            return Ok(Workload {
                circuit: CircuitKind::Porep,
                log2_constraints: 0,
                batch: 1,
                backend: BackendKind::Cpu,
                command: Some(command),
                gaps,
                hash: None,
                worker: None,
            });
        }
        if f.build.is_some()
            || f.dir.is_some()
            || f.prepare.is_some()
            || f.nvtx
            || f.cupti
            || !f.log_spans.is_empty()
            || f.max_spans_per_rep.is_some()
            || !f.name_map.is_empty()
            || f.tracing_names.is_some()
            || f.trace_file.is_some()
        {
            return Err(
                "workload: build, prepare, dir, nvtx, cupti, log_spans, name_map, tracing_names, \
                 trace_file and max_spans_per_rep go \
                        with command = [\"prog\", \"args\"]; add command, or remove them \
                        (gapscope's own provers record CUPTI with telemetry = true or \"cupti\")"
                    .into(),
            );
        }
        let missing = |what: &str| {
            format!(
                "workload.{what} is missing: give circuit = \"porep\" (sha256 | porep | chain) \
                 and log2_constraints = 12 for the built-in prover, or command = [\"prog\", \
                 \"args\"] for a program of your own"
            )
        };
        Ok(Workload {
            circuit: f.circuit.ok_or_else(|| missing("circuit"))?,
            log2_constraints: f
                .log2_constraints
                .ok_or_else(|| missing("log2_constraints"))?,
            batch: f.batch.unwrap_or_else(one),
            backend: f.backend.unwrap_or(BackendKind::Cpu),
            command: None,
            gaps,
            hash: None,
            worker: f.worker,
        })
    }
}

/// `[workload] kind = "hash"`: `bytes` (default 16 MiB) and `gaps`, nothing of the
/// prover's or a command's.
fn hash_workload(f: WorkloadFile) -> Result<Workload, String> {
    let other = WorkloadFile {
        kind: None,
        bytes: None,
        gaps: None,
        worker: None,
        ..f.clone()
    };
    if other != WorkloadFile::default() {
        return Err(
            "workload: kind = \"hash\" takes bytes (and gaps, worker) only; circuit, log2_constraints, \
             batch and backend belong to the built-in prover, command and its keys to a program \
             of your own: remove them"
                .into(),
        );
    }
    let bytes = f.bytes.unwrap_or(16 << 20);
    if bytes == 0 || bytes > MAX_HASH_BYTES {
        return Err(format!(
            "workload.bytes = {bytes}: give 1 to {MAX_HASH_BYTES} (a rep's buffer is made in memory)"
        ));
    }
    Ok(Workload {
        circuit: CircuitKind::Porep,
        log2_constraints: 0,
        batch: 1,
        backend: BackendKind::Cpu,
        command: None,
        gaps: f.gaps,
        hash: Some(gapscope_hash::HashWorkload {
            bytes: bytes as usize,
        }),
        worker: f.worker,
    })
}

/// `worker = [...]`: a program (a path, or a name looked up in PATH) and its arguments.
fn check_worker(w: &[String]) -> Result<(), String> {
    match w.first() {
        Some(p) if !p.is_empty() && !p.starts_with('-') => Ok(()),
        _ => Err(
            "workload.worker must name a binary: worker = [\"target/release/gapscope-hash-worker\"]"
                .into(),
        ),
    }
}

impl From<Workload> for WorkloadFile {
    fn from(w: Workload) -> WorkloadFile {
        let gaps = w.gaps.clone();
        if let Some(h) = w.hash {
            return WorkloadFile {
                kind: Some(InProcessKind::Hash),
                bytes: Some(h.bytes as u64),
                gaps,
                worker: w.worker,
                ..WorkloadFile::default()
            };
        }
        let file = match w.command {
            Some(e) => WorkloadFile {
                command: Some(e.command),
                build: e.build,
                prepare: e.prepare,
                dir: e.dir,
                log_spans: e.capture.log_spans,
                nvtx: e.capture.nvtx,
                cupti: e.capture.cupti,
                name_map: e.capture.name_map,
                tracing_names: e.capture.tracing_names,
                max_spans_per_rep: e.max_spans_per_rep,
                trace_file: e.trace_file,
                ..WorkloadFile::default()
            },
            None => WorkloadFile {
                circuit: Some(w.circuit),
                log2_constraints: Some(w.log2_constraints),
                batch: Some(w.batch),
                backend: Some(w.backend),
                ..WorkloadFile::default()
            },
        };
        WorkloadFile { gaps, ..file }
    }
}

use super::run_policy::one;
pub use super::run_policy::MAX_REPS;
pub use super::run_policy::{Order, ProcessPolicy, RunPolicy};

/// Largest experiment file read (a real one is a few KiB).
pub const MAX_EXPERIMENT_BYTES: u64 = 1 << 20;
pub use crate::prover::{HostMemory, NttSchedule};

/// A named set of knobs. Unset knobs take their defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Variant {
    pub name: String,
    #[serde(default)]
    pub drop: Option<DropPolicy>,
    #[serde(default)]
    pub gadget: Option<Gadget>,
    #[serde(default)]
    pub host_memory: Option<HostMemory>,
    #[serde(default)]
    pub backend: Option<BackendKind>,
    /// cuda backend: streams for the NTTs of a, b and c (1 or 2; default 2).
    #[serde(default)]
    pub streams: Option<u32>,
    /// cuda backend: GPUs a batch is split over (default: every GPU of the host).
    #[serde(default)]
    pub gpus: Option<u32>,
    /// cuda backend: host threads for the split MSMs (1: L, A, B-G1, B-G2 one after
    /// another after H; 4: each on its own thread, beside H; 8: two per query, each with
    /// every other circuit). Default 1.
    #[serde(default)]
    pub msm_threads: Option<u32>,
    /// cuda backend: "first" (every circuit's NTTs, then the MSMs) or "overlap" (the
    /// NTTs on their own host thread, each circuit's H MSM right after its NTTs).
    /// Default "first".
    #[serde(default)]
    pub ntt: Option<NttSchedule>,
    /// cuda backend: host threads for the H MSMs (1: one after another; 2: every other
    /// circuit's on a second thread, so that one MSM's host-side reduction overlaps the
    /// other's kernels). Default 1.
    #[serde(default)]
    pub h_threads: Option<u32>,
    /// cuda backend: prep's worker threads, which split the scalars of the L, A and B
    /// queries (default: half the cores). Fewer split fewer circuits at once, each
    /// sooner, so the split MSMs can start earlier.
    #[serde(default)]
    pub prep_threads: Option<u32>,
    /// GPU telemetry during this variant's reps (default true: NVML sampling and CUPTI
    /// activity). `false` runs the reps with both off, `"nvml"` / `"cupti"` with one of
    /// them: A/B tests of telemetry's own overhead, part by part.
    #[serde(default)]
    pub telemetry: Option<TelemetryParts>,
    /// Counter source of this variant's reps (default: `[run] counters`).
    #[serde(default)]
    pub counters: Option<CounterMode>,
    /// Command workloads: this variant's program and arguments, instead of the
    /// workload's `command` (an A/B of two flags or two builds).
    #[serde(default)]
    pub command: Option<Vec<String>>,
    /// A git revision (commit, tag or branch): this variant's reps run that revision's
    /// build, checked out in its own worktree (see `experiment::revs`).
    #[serde(default)]
    pub rev: Option<String>,
    /// The repository `rev` is a revision of (default: the one holding the current
    /// folder); a relative path is taken from the current folder.
    #[serde(default)]
    pub repo: Option<PathBuf>,
    /// Crates of gapscope's dependency graph built from other sources: this variant's
    /// reps run in a worker of this gapscope built against them (see `crate::patches`).
    #[serde(default)]
    pub patch: Option<crate::patches::PatchSet>,
    /// Sampled stacks of every thread during this variant's reps (default: `[run]
    /// profile`).
    #[serde(default)]
    pub profile: Option<bool>,
    /// Their rate per second of each thread's CPU time (default: `[run] profile_hz`,
    /// then 1000).
    #[serde(default)]
    pub profile_hz: Option<u32>,
    /// The knobs of a workload other than the built-in prover (`kind = "hash"`:
    /// `knobs = { algorithm = "sha512", chunk_kib = 64, threads = 2 }`), checked by it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub knobs: BTreeMap<String, toml::Value>,
}

impl Variant {
    /// The prover's knobs, each with whether this variant sets it (refused on variants of
    /// other workloads, by name).
    pub fn prover_knobs(&self) -> [(&'static str, bool); 10] {
        [
            ("drop", self.drop.is_some()),
            ("gadget", self.gadget.is_some()),
            ("host_memory", self.host_memory.is_some()),
            ("backend", self.backend.is_some()),
            ("streams", self.streams.is_some()),
            ("gpus", self.gpus.is_some()),
            ("msm_threads", self.msm_threads.is_some()),
            ("ntt", self.ntt.is_some()),
            ("h_threads", self.h_threads.is_some()),
            ("prep_threads", self.prep_threads.is_some()),
        ]
    }
}

/// A variant with every knob resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedVariant {
    pub name: String,
    pub gadget: Gadget,
    pub backend: BackendKind,
    /// The options the prover's backend honours (drop policy, host memory and the cuda
    /// backend's knobs), declared once, in the prover's `ProveOptions`.
    pub prove: ProveOptions,
    pub telemetry: TelemetryParts,
    pub counters: CounterMode,
    /// External subjects (`command = […]`): the folder the variant's `build` and
    /// `command` run in. `None` (what [`Experiment::resolve`] gives): the workload's
    /// `dir`, else gapscope's working directory. A variant of another revision sets its
    /// worktree here.
    pub subject_dir: Option<PathBuf>,
    /// External subjects: the variant's own `command`, else the workload's.
    pub command: Option<Vec<String>>,
    /// The git revision this variant runs, and its repository (None: this build).
    pub rev: Option<String>,
    pub repo: Option<PathBuf>,
    /// Dependency patches (None: the crates this build has).
    pub patch: Option<crate::patches::PatchSet>,
    /// Sampled stacks at this rate (Hz), or none.
    pub profile: Option<u32>,
    /// The knobs of a workload other than the prover, as text (`Variant::knobs`).
    pub workload_knobs: gapscope_workload::Knobs,
}

impl ResolvedVariant {
    /// The knobs of a variant of a workload other than the prover, as meta.json records
    /// them: the workload's own with its defaults filled in, and the tool's.
    pub fn workload_knob_set(
        &self,
        w: &dyn gapscope_workload::Workload,
    ) -> BTreeMap<String, String> {
        let mut m = w
            .resolve_knobs(&self.workload_knobs)
            .unwrap_or_else(|_| self.workload_knobs.clone());
        self.insert_tool_knobs(&mut m);
        m
    }

    /// The tool's knobs every workload's variants record: telemetry, the sampling rate
    /// where stacks are sampled and the revision of a variant that runs another one
    /// (each recorded only when on or set, so that other runs keep their knob sets).
    fn insert_tool_knobs(&self, m: &mut BTreeMap<String, String>) {
        m.insert("telemetry".into(), self.telemetry.as_str().into());
        if let Some(hz) = self.profile {
            m.insert("profile".into(), format!("{hz} Hz"));
        }
        if let Some(rev) = &self.rev {
            m.insert("rev".into(), rev.clone());
        }
    }

    /// The prover's knobs of a variant, as meta.json records them.
    pub fn knobs(&self) -> BTreeMap<String, String> {
        let mut m = BTreeMap::new();
        m.insert("drop".into(), self.prove.drop.as_str().into());
        m.insert("gadget".into(), self.gadget.as_str().into());
        m.insert("host_memory".into(), self.prove.host_memory.as_str().into());
        // Recorded only where they apply, so runs of other backends keep their knob sets.
        if self.backend == BackendKind::Cuda {
            m.insert("streams".into(), self.prove.streams.to_string());
            m.insert("msm_threads".into(), self.prove.msm_threads.to_string());
            m.insert("ntt".into(), self.prove.ntt.as_str().into());
            m.insert("h_threads".into(), self.prove.h_threads.to_string());
            m.insert(
                "prep_threads".into(),
                match self.prove.prep_threads {
                    0 => "half the cores".to_string(),
                    n => n.to_string(),
                },
            );
            m.insert(
                "gpus".into(),
                match self.prove.gpus {
                    0 => "all".to_string(),
                    n => n.to_string(),
                },
            );
        }
        self.insert_tool_knobs(&mut m);
        if let Some(set) = &self.patch {
            let text: Vec<String> = set
                .iter()
                .map(|(k, p)| format!("{k}={}", p.describe()))
                .collect();
            m.insert("patch".into(), text.join(", "));
        }
        m
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Experiment {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    pub workload: Workload,
    #[serde(default)]
    pub run: RunPolicy,
    #[serde(rename = "variant")]
    pub variants: Vec<Variant>,
}

impl Experiment {
    /// Reads and validates an experiment file.
    /// At most [`MAX_EXPERIMENT_BYTES`] are read: a path such as /dev/zero ends in an
    /// error, not in a read without end.
    pub fn load(path: &Path) -> Result<(Experiment, String), SpecError> {
        let bytes = crate::fsx::read_capped(path, MAX_EXPERIMENT_BYTES);
        Self::from_bytes(path, bytes)
    }

    /// Reads and validates a run folder's experiment copy (`dir/name`): a regular file
    /// inside the folder, never through a link (a planted link would make the parse
    /// error quote another file).
    pub fn load_copy(dir: &Path, name: &str) -> Result<(Experiment, String), SpecError> {
        let bytes = crate::fsx::read_in_dir(dir, name, MAX_EXPERIMENT_BYTES);
        Self::from_bytes(&dir.join(name), bytes)
    }

    fn from_bytes(
        path: &Path,
        bytes: Result<Vec<u8>, crate::fsx::ReadError>,
    ) -> Result<(Experiment, String), SpecError> {
        let read = |source| SpecError::Read {
            path: path.to_path_buf(),
            source,
        };
        let bytes = bytes.map_err(|e| {
            read(match e {
                crate::fsx::ReadError::Io { source, .. } => source,
                other => std::io::Error::other(other.to_string()),
            })
        })?;
        let text = String::from_utf8(bytes).map_err(|_| {
            read(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "not UTF-8 text: is this an experiment file?",
            ))
        })?;
        let e = Self::parse(&text, path)?;
        Ok((e, text))
    }

    pub fn parse(text: &str, path: &Path) -> Result<Experiment, SpecError> {
        let e: Experiment = toml::from_str(text).map_err(|err| SpecError::Parse {
            path: path.to_path_buf(),
            message: describe_toml_error(text, &err),
        })?;
        e.validate().map_err(|message| SpecError::Invalid {
            path: path.to_path_buf(),
            message,
        })?;
        Ok(e)
    }

    fn validate(&self) -> Result<(), String> {
        // Every check of a parsed experiment, the run's first, then each variant's: one
        // list, so that what an experiment may hold reads in one place.
        check_name("name", &self.name, "it names the results folder")?;
        let w = &self.workload;
        let min = w.circuit.min_log2();
        if w.runs_prover() && (w.log2_constraints < min || w.log2_constraints > 28) {
            return Err(format!(
                "workload.log2_constraints = {} is out of range for circuit {}: use {min}..=28",
                w.log2_constraints,
                w.circuit.as_str()
            ));
        }
        if w.batch == 0 || w.batch > 1024 {
            return Err(format!(
                "workload.batch = {} must be between 1 and 1024",
                w.batch
            ));
        }
        if self.run.telemetry_period_ms == 0 || self.run.telemetry_period_ms > 60_000 {
            return Err(format!(
                "run.telemetry_period_ms = {} must be between 1 and 60000",
                self.run.telemetry_period_ms
            ));
        }
        if self.run.rep_timeout_s == Some(0) {
            return Err("run.rep_timeout_s must be at least 1 (seconds), or left out".into());
        }
        if self.run.reps == 0 {
            return Err("run.reps must be at least 1".into());
        }
        self.run.check_bounds(self.variants.len())?;
        match (self.run.order, self.run.block) {
            (Order::Blocks, Some(0)) => {
                return Err("run.block must be at least 1 (reps per block)".into());
            }
            (Order::Blocks, _) | (_, None) => {}
            (_, Some(_)) => {
                return Err(
                    "run.block applies only to order = \"blocks\"; remove it or set that order"
                        .into(),
                );
            }
        }
        if self.variants.is_empty() {
            return Err(
                "no [[variant]] tables: add at least one, e.g. [[variant]] name = \"baseline\""
                    .into(),
            );
        }
        let mut seen = std::collections::HashSet::new();
        for v in &self.variants {
            check_name(
                "variant name",
                &v.name,
                "it names rows and columns of the results",
            )?;
            if !seen.insert(&v.name) {
                return Err(format!("variant name {:?} is used twice", v.name));
            }
            let r = self.resolve(v);
            check_rev(&v.name, v.rev.as_deref(), v.repo.is_some())?;
            if let Some(set) = &v.patch {
                crate::patches::check(&v.name, set)?;
                if v.rev.is_some() {
                    return Err(format!(
                        "variant {:?}: patch builds this gapscope against other crates, rev runs \
                         another gapscope: give one of them (a patch of an older gapscope is \
                         not built)",
                        v.name
                    ));
                }
                if self.workload.command.is_some() {
                    return Err(format!(
                        "variant {:?}: patch applies to gapscope's own prover; a command \
                         workload builds its program itself (its build can take a patch)",
                        v.name
                    ));
                }
            }
            if let Some(h) = &self.workload.hash {
                check_hash_variant(v, h, &r)?;
                if self.workload.worker.is_some() {
                    check_worker_variant(&r)?;
                }
                continue;
            }
            if !v.knobs.is_empty() {
                return Err(format!(
                    "variant {:?}: knobs = {{ … }} are the knobs of a workload other than the \
                     built-in prover ([workload] kind = \"hash\"); the prover's are keys of the \
                     variant itself (drop, gadget, host_memory, backend, …)",
                    v.name
                ));
            }
            if self.workload.command.is_some() {
                let prover_knobs = v.prover_knobs();
                check_command_variant(&v.name, &prover_knobs, r.command.as_deref(), r.counters)?;
                continue;
            }
            if v.command.is_some() {
                return Err(format!(
                    "variant {:?}: command goes with a command workload ([workload] command = \
                     [...]); this experiment runs the built-in prover",
                    v.name
                ));
            }
            if self.workload.worker.is_some() {
                check_worker_variant(&r)?;
            }
            check_cuda_knobs(
                &v.name,
                &CudaKnobs {
                    any_set: v.streams.is_some()
                        || v.gpus.is_some()
                        || v.msm_threads.is_some()
                        || v.ntt.is_some()
                        || v.h_threads.is_some()
                        || v.prep_threads.is_some(),
                    backend: r.backend.as_str(),
                    cuda: r.backend == BackendKind::Cuda,
                    streams: r.prove.streams,
                    msm_threads: r.prove.msm_threads,
                    h_threads: r.prove.h_threads,
                    prep_threads: (v.prep_threads != Some(0)).then_some(r.prove.prep_threads),
                    gpus: (v.gpus != Some(0)).then_some(r.prove.gpus),
                },
            )?;
            check_profile(
                &v.name,
                self.run.profile_hz,
                v.profile_hz,
                v.profile.unwrap_or(self.run.profile),
            )?;
            if r.prove.host_memory == HostMemory::Pinned && r.backend == BackendKind::Cpu {
                return Err(format!(
                    "variant {:?}: host_memory = \"pinned\" needs a GPU backend (cuda or supraseal); the cpu backend has no host-device copies",
                    v.name
                ));
            }
        }
        Ok(())
    }

    pub fn resolve(&self, v: &Variant) -> ResolvedVariant {
        ResolvedVariant {
            name: v.name.clone(),
            gadget: v.gadget.unwrap_or(Gadget::AddToLc),
            backend: v.backend.unwrap_or(self.workload.backend),
            prove: ProveOptions {
                drop: v.drop.unwrap_or(DropPolicy::Sync),
                host_memory: v.host_memory.unwrap_or(HostMemory::Pageable),
                streams: v.streams.unwrap_or(2),
                gpus: v.gpus.unwrap_or(0),
                msm_threads: v.msm_threads.unwrap_or(1),
                ntt: v.ntt.unwrap_or(NttSchedule::First),
                h_threads: v.h_threads.unwrap_or(1),
                prep_threads: v.prep_threads.unwrap_or(0),
            },
            telemetry: v.telemetry.unwrap_or(TelemetryParts::ALL),
            counters: v.counters.unwrap_or(self.run.counters),
            subject_dir: None,
            command: v.command.clone(),
            rev: v.rev.clone(),
            repo: v.repo.clone(),
            patch: v.patch.clone(),
            profile: v.profile.unwrap_or(self.run.profile).then(|| {
                v.profile_hz
                    .or(self.run.profile_hz)
                    .unwrap_or(crate::profile::DEFAULT_HZ)
            }),
            workload_knobs: v
                .knobs
                .iter()
                .map(|(k, value)| {
                    let text = match value {
                        toml::Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    (k.clone(), text)
                })
                .collect(),
        }
    }

    pub fn resolved_variants(&self) -> Vec<ResolvedVariant> {
        self.variants.iter().map(|v| self.resolve(v)).collect()
    }
}

/// A variant of the hash workload: its knobs checked by the workload, and none of the
/// prover's or a command's.
fn check_hash_variant(
    v: &Variant,
    h: &gapscope_hash::HashWorkload,
    r: &ResolvedVariant,
) -> Result<(), String> {
    use gapscope_workload::Workload as _;
    let others = [
        ("command", v.command.is_some()),
        ("patch", v.patch.is_some()),
    ];
    if let Some((k, _)) = (v.prover_knobs().iter().chain(&others)).find(|(_, set)| *set) {
        return Err(format!(
            "variant {:?}: {k} is not a knob of the hash workload; its knobs go in \
             knobs = {{ algorithm = \"sha512\", chunk_kib = 64, threads = 2 }}",
            v.name
        ));
    }
    h.resolve_knobs(&r.workload_knobs)
        .map(|_| ())
        .map_err(|e| format!("variant {:?}: {e}", v.name))
}

/// A variant whose reps run in a workload binary (`[workload] worker`): that binary
/// measures what it is (not a revision of it), and the windows only gapscope's own
/// process opens around a rep (the emulator, the stack sampler) are not opened in it.
fn check_worker_variant(r: &ResolvedVariant) -> Result<(), String> {
    let name = &r.name;
    if r.rev.is_some() {
        return Err(format!(
            "variant {name:?}: rev builds another gapscope, while [workload] worker runs the \
             binary named there as it is: build the binary at that revision and name it in \
             an experiment of its own, or remove worker"
        ));
    }
    if r.counters == CounterMode::Emulated {
        return Err(format!(
            "variant {name:?}: counters = \"emulated\" runs gapscope's own worker under \
             valgrind; a workload binary ([workload] worker) is not run under it: use \
             counters = \"hardware\" or false, or remove worker"
        ));
    }
    if r.profile.is_some() {
        return Err(format!(
            "variant {name:?}: profile samples gapscope's own process; a workload binary \
             ([workload] worker) is not sampled: remove profile, or remove worker"
        ));
    }
    Ok(())
}

#[cfg(test)]
#[path = "spec_profile_tests.rs"]
mod profile_tests;

#[cfg(test)]
#[path = "spec_counters_tests.rs"]
mod counters_tests;

#[cfg(test)]
#[path = "spec_tests.rs"]
mod tests;
