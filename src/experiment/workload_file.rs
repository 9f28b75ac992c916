//! The `[workload]` table as written in an experiment file, for both kinds of workload:
//! the built-in prover (`circuit`, `log2_constraints`, `batch`, `backend`) or a program
//! gapscope did not build (`command`, `build`, `prepare`, `dir`). `spec::Workload` is made from it
//! (and checks which kind it is); this file knows nothing of experiments.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use std::collections::BTreeMap;

use crate::capture::{LogSpanRule, TracingNames};
use crate::prover::{BackendKind, CircuitKind};

/// `[workload]` of an experiment file, every field optional; `spec::Workload` checks
/// that it names exactly one kind of workload.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadFile {
    /// Which in-process workload: the built-in prover (default, with `circuit`) or
    /// `"hash"` (`gapscope-hash`, with `bytes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<InProcessKind>,
    /// kind = "hash": bytes digested per rep.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub circuit: Option<CircuitKind>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log2_constraints: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<BackendKind>,
    /// The program and its arguments, spawned once per rep.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// Run once, in the subject's folder, before the reps (e.g. `["make"]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<Vec<String>>,
    /// Run in the subject's folder before every rep, outside its measurement (e.g.
    /// `["sh", "-c", "sync"]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prepare: Option<Vec<String>>,
    /// The subject's folder (relative paths: from gapscope's working directory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dir: Option<PathBuf>,
    /// Timing lines of the program's log as spans (`crate::capture::log_spans`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub log_spans: BTreeMap<String, LogSpanRule>,
    /// The program's NVTX ranges as spans (`crate::capture::inject`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub nvtx: bool,
    /// The program's kernels, copies and memsets as the rep's GPU activity (CUPTI's
    /// injection library, `crate::capture::cupti_lib`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cupti: bool,
    /// Span names grouped: regex → name (`crate::capture::names`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub name_map: BTreeMap<String, String>,
    /// How the program's `tracing` layer qualifies span names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracing_names: Option<TracingNames>,
    /// The gaps chart's wrapper and inner spans (either kind of workload).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gaps: Option<crate::store::GapsSpec>,
    /// The most spans a rep keeps (default and most: `rows::MAX_SPANS_PER_REP`); a rep
    /// whose program sends more fails, with its first spans.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_spans_per_rep: Option<u64>,
    /// A trace the program writes in each rep (relative paths: from the subject's
    /// folder), read after the rep and filed under it (`super::trace_file`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_file: Option<PathBuf>,
    /// An in-process workload's reps run in this binary (and its arguments) instead of
    /// gapscope's own process: one built with `gapscope_workload::binary`, serving each
    /// variant's reps (`kind = "hash"`: `gapscope-hash-worker`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<Vec<String>>,
}

/// `[workload] kind`: the in-process workloads gapscope is built with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InProcessKind {
    /// The built-in Groth16 prover (`circuit`, `log2_constraints`, …).
    Groth16,
    /// SHA-2 digests of a buffer (`gapscope-hash`; `bytes`, and knobs per variant).
    Hash,
}
