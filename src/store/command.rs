//! meta.json's `external` object: a run of a program gapscope did not build
//! (`[workload] command = […]`), with each variant's folder, its build and what the
//! program's span lines held.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::protocol::LineCounts;

/// The program every variant ran, and per variant where and how.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CommandMeta {
    pub command: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<Vec<String>>,
    /// The span line protocol's prefix and the variable naming the span pipe.
    pub protocol: String,
    pub span_fd_env: String,
    pub variants: BTreeMap<String, CommandVariantMeta>,
}

/// One variant of an external run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CommandVariantMeta {
    /// The folder its build and reps ran in.
    pub dir: String,
    /// Its build, where the workload has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<BuildMeta>,
    /// Span lines of its reps so far (measured and warm-up), summed.
    #[serde(default)]
    pub lines: LineCounts,
    /// Reps counted in `lines`: those whose program ran (not those of a failed build).
    #[serde(default)]
    pub reps: u32,
    /// The first few lines that did not parse (shortened), with the reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<String>,
    /// Where the rows of gpu_activity.csv came from (`cupti = true`), as the last rep
    /// said: "cupti: …" with the library and the clock, or "unavailable: <reason>".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_activity: Option<String>,
}

/// How a build went.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BuildMeta {
    pub ok: bool,
    pub wall_ns: u64,
    /// The build's output (stdout and stderr), in the run folder.
    pub log: String,
    /// The exit status, or why it could not run.
    pub status: String,
    /// This run did not build: a revision's worktree was built by an earlier run of the
    /// same gapscope process (a bisect's steps), the same command on the same commit;
    /// `wall_ns`, `status` and the log are that build's.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reused: bool,
}

/// `workload.circuit` and `workload.backend` in meta.json of a command workload in run
/// folders of schema 1 (later ones have `workload.kind` instead).
pub const COMMAND_WORKLOAD: &str = "command";
