//! History across commits: a results database (SQLite), change points over first-parent
//! history, and the steps they find, for `gapscope history …` and `gapscope track`.
//!
//! - [`schema`]: the tables, created and checked on open.
//! - [`host`]: the host fingerprint a series is keyed by.
//! - [`values`]: per-rep metric values of a run folder (read through the store).
//! - [`import`]: run folders into the database, one transaction per folder.
//! - [`commits`]: a branch's first-parent positions from git.
//! - [`detect`]: the change-point detector (pure).
//! - [`series`]: series out of the database, their steps, the regressions list.
//! - [`chart`]: a series drawn with its steps (SVG and PNG).
//!
//! It sits below the command line and above the store and the statistics; nothing
//! below it depends on it. Running experiments and bisecting stay in `experiment` and
//! `bisect`: `cli::track` and `cli::history` hand them what the history found.

pub mod chart;
pub mod commits;
pub mod detect;
pub use crate::store::host;
pub mod import;
pub mod schema;
pub mod series;
pub mod values;

use std::path::{Path, PathBuf};

pub use detect::{DetectOptions, Detection, Step, StepVerdict};
pub use import::{ImportContext, Imported};
pub use series::{Analysed, CommitPoint, Filter, Series, SeriesKey, StepRecord};

/// `$GAPSCOPE_HISTORY` when set, else `<results>/history.sqlite`.
pub fn default_db(results_dir: &Path) -> PathBuf {
    std::env::var_os("GAPSCOPE_HISTORY")
        .map(PathBuf::from)
        .unwrap_or_else(|| results_dir.join("history.sqlite"))
}

#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error("cannot open the history database {path}: {message}")]
    Open { path: PathBuf, message: String },
    #[error("history database, {what}: {message}")]
    Sql { what: String, message: String },
    #[error(
        "no step {0} in the history: `gapscope history regressions` lists the steps with their ids"
    )]
    NoStep(String),
}

#[cfg(test)]
mod tests;
