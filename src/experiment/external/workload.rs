//! The `[workload]` table as written in an experiment file, for both kinds of workload:
//! the built-in prover (`circuit`, `log2_constraints`, `batch`, `backend`) or a program
//! gapscope did not build (`command`, `build`, `prepare`, `dir`). `spec::Workload` is made from it
//! (and checks which kind it is); this file knows nothing of experiments.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use std::collections::BTreeMap;

use crate::capture::{CaptureSpec, LogSpanRule, TracingNames};
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

/// A program gapscope did not build: spawned once per rep in its folder, reporting its
/// spans in the line protocol ([`crate::protocol`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExternalWorkload {
    /// Program and arguments. A program name without a '/' is looked up in PATH; a
    /// relative path (`./bench`) is taken from the subject's folder.
    pub command: Vec<String>,
    /// Run once in the subject's folder before the reps; a failure fails every rep of
    /// the variants that use that folder, with the log's tail.
    pub build: Option<Vec<String>>,
    /// Run in the subject's folder before every rep, outside the rep's window; a
    /// failure fails that rep, with its stderr's tail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prepare: Option<Vec<String>>,
    /// The subject's folder; `None`: gapscope's working directory.
    pub dir: Option<PathBuf>,
    /// What is captured besides span lines: log lines, NVTX ranges.
    #[serde(default)]
    pub capture: CaptureSpec,
    /// The most spans a rep keeps; `None`: [`super::rows::MAX_SPANS_PER_REP`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_spans_per_rep: Option<u64>,
    /// A trace the program writes in each rep, read after it ([`super::trace_file`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_file: Option<PathBuf>,
}

impl ExternalWorkload {
    /// Checks the fields; the error says what to write instead.
    pub fn check(&self) -> Result<(), String> {
        if self.command.first().is_none_or(|p| p.is_empty()) {
            return Err(
                "workload.command must name a program: command = [\"./bench\", \"--size\", \"12\"]"
                    .into(),
            );
        }
        if self
            .build
            .as_ref()
            .is_some_and(|b| b.first().is_none_or(|p| p.is_empty()))
        {
            return Err(
                "workload.build must name a program, e.g. build = [\"make\"], or be left out"
                    .into(),
            );
        }
        if self
            .prepare
            .as_ref()
            .is_some_and(|b| b.first().is_none_or(|p| p.is_empty()))
        {
            return Err(
                "workload.prepare must name a program, e.g. prepare = [\"sh\", \"-c\", \"sync\"], \
                 or be left out"
                    .into(),
            );
        }
        if let Some(n) = self.max_spans_per_rep {
            let max = super::rows::MAX_SPANS_PER_REP as u64;
            if n == 0 || n > max {
                return Err(format!(
                    "workload.max_spans_per_rep = {n} is not within 1..={max}: give a number \
                     of spans a rep keeps (or leave it out for {max})"
                ));
            }
        }
        if self
            .trace_file
            .as_ref()
            .is_some_and(|p| p.as_os_str().is_empty() || p.ends_with(".."))
        {
            return Err(
                "workload.trace_file must name the file the program writes each rep, e.g. \
                 trace_file = \"out/trace.json\", or be left out"
                    .into(),
            );
        }
        self.capture.check()
    }

    /// The most spans a rep keeps.
    pub fn span_cap(&self) -> usize {
        self.max_spans_per_rep
            .map_or(super::rows::MAX_SPANS_PER_REP, |n| n as usize)
    }

    /// The folder a variant's build and reps run in: `subject_dir` when the variant has
    /// one (a worktree of its revision), else `dir`, else the working directory; made
    /// absolute, so that meta.json says where it ran.
    pub fn folder(&self, subject_dir: Option<&Path>) -> PathBuf {
        let d = subject_dir
            .map(Path::to_path_buf)
            .or_else(|| self.dir.clone())
            .unwrap_or_else(|| PathBuf::from("."));
        std::path::absolute(&d).unwrap_or(d)
    }
}
