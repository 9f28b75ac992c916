//! A command workload as the experiment file describes it (`[workload] command = […]`,
//! read through [`super::super::workload_file::WorkloadFile`]): the program, its build,
//! its folder, what is captured besides its span lines, and its checks.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::capture::CaptureSpec;

/// A program gapscope did not build: spawned once per rep in its folder, reporting its
/// spans in the line protocol ([`crate::protocol`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandWorkload {
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

impl CommandWorkload {
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
