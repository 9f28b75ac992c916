//! Comparison of a baseline against a candidate: statistics, verdicts and where the time
//! went.
//!
//! Pipeline position: after the [`crate::store`], before the report (ARCHITECTURE.md).
//! The input is one or two run folders read back with [`crate::store::RunData::load`];
//! the output is a [`Diff`], one serde record that [`render`] prints as a terminal table,
//! markdown, JSON or CSV, and that the report generator consumes directly. The
//! statistics are [`crate::stats`].
//!
//! - `select`: which variants, the workload check, and the measured reps of one
//!   variant as one value per rep and metric.
//! - `compare`: one metric, baseline against candidate, and the verdict rule.
//! - `diff`: assembles the [`Diff`] from comparisons, gaps and contributions.
//! - `gaps`: unattributed time of wrapper spans and the ranked contributions to the
//!   change in end-to-end time.
//! - `headline`: the first lines: the end-to-end change, the largest significant
//!   changes with their measures, and the net change on the critical path.
//! - `render`: the terminal table, markdown and JSON (`fmt`: how values and changes are
//!   written); `csv_rows`: the CSV.
//! - [`sequential`]: the decisions of a run that looks after every pair
//!   (`run --until-decided`), on confidence sequences.
//! - [`synthetic`]: run folders with known effects, for tests and benchmarks.
//!
//! ```no_run
//! use gapscope::analysis::{self, DiffOptions, Format};
//! use gapscope::store::RunData;
//! let run = RunData::load("results/quickstart/20260101T000000Z-abc123".as_ref())?;
//! let diff = analysis::diff_runs(&run, "baseline", &run, "candidate", &DiffOptions::default())?;
//! print!("{}", analysis::render(&diff, Format::Terminal));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod compare;
mod csv_rows;
mod diff;
mod diff_notes;
mod family;
mod fmt;
mod gaps;
mod headline;
mod per_rep;
mod render;
mod select;
pub mod sequential;
mod span_lines;
pub mod synthetic;

#[cfg(test)]
mod emulated_tests;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use crate::stats::Interval;
pub use compare::{Comparison, Measure, Rule, SideStats, Unit, Verdict, SPAN_THREADS};
pub use diff::{diff_runs, CarryOver};
pub use family::{judge_rows, Family, RowInput};
pub use fmt::fmt_p;
pub use gaps::{Contribution, Contributions, Gap, GapSide};
pub use headline::{CriticalMove, Headline, MoveKind, SeparatedSpan, HEADLINE_CHANGES};
pub use per_rep::metric_logs;
pub use render::{markdown_sections, render, render_sections, Format, Section};
pub use select::{pick_variants, RepCounts};
pub use span_lines::span_lines;

use crate::store::WorkloadMeta;
use crate::telemetry::LeakFlag;

/// Knobs of a diff. [`Default`] gives the documented defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiffOptions {
    /// Relative change a verdict must clear on both ends of its interval, as a fraction
    /// (0.01 = 1 %). Default 0.01.
    pub noise_floor: f64,
    /// Significance level of the tests; the intervals have confidence
    /// 1 − alpha. Default 0.05 (a 95 % interval).
    pub alpha: f64,
    /// Bootstrap resamples per metric. Default 2,000.
    pub bootstrap_resamples: usize,
    /// A wrapper span's unattributed time is flagged above this fraction of the span
    /// (and above the noise floor of the end-to-end time). Default 0.05.
    pub gap_threshold: f64,
    /// Compare runs of different workloads anyway (the differences are recorded).
    pub force: bool,
    /// Pair the reps of one iteration when both sides are variants of one interleaved
    /// (or counterbalanced) run, and compare per-pair differences (see
    /// [`crate::stats::signed_rank`]); false compares the two sides as independent samples.
    /// Default true.
    #[serde(default = "yes")]
    pub paired: bool,
    /// Seed of the bootstrap, so the same data give the same intervals.
    pub seed: u64,
    /// Smallest absolute change of a time a verdict reports, ns, whatever the relative
    /// change: the interval of the change must clear it. Default 1,000 (1 µs).
    #[serde(default = "default_time_floor_ns")]
    pub time_floor_ns: f64,
    /// The time floor is at least this share of the baseline's median end-to-end time.
    /// Default 0.001 (0.1 %).
    #[serde(default = "default_time_floor_fraction")]
    pub time_floor_fraction: f64,
    /// Smallest absolute change of a count (page faults, context switches, instructions)
    /// a verdict reports. Default 10 events.
    #[serde(default = "default_count_floor")]
    pub count_floor: f64,
    /// Smallest change of busy cores a verdict reports. Default 0.05 cores.
    #[serde(default = "default_cores_floor")]
    pub cores_floor: f64,
    /// Judge every comparison but the end-to-end time by its Benjamini–Hochberg q-value
    /// over the diff's family ([`crate::stats::bh_q_values`]); false judges each by its
    /// own p-value (a single metric chosen beforehand, as bisect's). Default true.
    #[serde(default = "yes")]
    pub fdr: bool,
    /// Give the rows the family names false-coverage-adjusted intervals (level
    /// 1 − R·alpha/m, Benjamini & Yekutieli 2005) and judge their floors on those.
    /// Default false: the verdict simulation measured what it costs at 5 reps a side
    /// (evidence/verdicts/sim).
    #[serde(default)]
    pub fcr_intervals: bool,
    /// Weight of a derived measure (process CPU, busy cores, counters) against a span's
    /// time in the weighted Benjamini–Hochberg procedure (weights scaled to mean 1).
    /// Default 0.1: in the verdict simulation (10,000 diffs a cell, Student's test at
    /// equal reps) the share of 5-spread changes named at 5 reps a side was 89.5% at
    /// 0.25 and 90.5% at 0.1, the worst A/A rate 3.5% and 3.3% (evidence/verdicts/sim);
    /// 1 weighs every comparison alike.
    #[serde(default = "default_derived_weight")]
    pub derived_weight: f64,
    /// Spread of a run's level between runs of one build (standard deviation of the log
    /// of a span's geometric mean from run to run, beyond what its reps' spread
    /// explains), added twice to the variance of Welch's test when the two sides are
    /// two run folders: the reps of one run share what differs between runs (where the
    /// process landed, clocks, caches, what else ran), which no count of reps averages
    /// away. Variants of one run are not affected. 0 turns it off. Default
    /// [`DEFAULT_BETWEEN_RUNS`].
    #[serde(default = "default_between_runs")]
    pub between_runs: f64,
    /// Compare the two sides by Welch's test even where they have as many reps, instead
    /// of Student's pooled test ([`crate::stats::pooled_t`]): for changes that alter a
    /// span's spread as well as its level. Default false.
    #[serde(default)]
    pub welch: bool,
}

/// The default of [`DiffOptions::between_runs`], 2%: 20 runs of one program (8 reps
/// each, one after the other) on the idle 16-core H200 host gave a between-runs spread
/// of 2.1% for the whole process and at most 0.01% for its two busy-wait spans; on the
/// 2-core VM at most 1.0% for the spans (evidence/verdicts/between_runs).
pub const DEFAULT_BETWEEN_RUNS: f64 = 0.02;

fn default_between_runs() -> f64 {
    DEFAULT_BETWEEN_RUNS
}

fn default_derived_weight() -> f64 {
    0.1
}

fn default_time_floor_ns() -> f64 {
    1_000.0
}

fn default_time_floor_fraction() -> f64 {
    0.001
}

fn default_count_floor() -> f64 {
    10.0
}

fn default_cores_floor() -> f64 {
    0.05
}

impl Default for DiffOptions {
    fn default() -> Self {
        DiffOptions {
            noise_floor: 0.01,
            alpha: 0.05,
            bootstrap_resamples: 2000,
            gap_threshold: 0.05,
            force: false,
            paired: true,
            seed: 0x6761_7073_636f_7065,
            time_floor_ns: default_time_floor_ns(),
            time_floor_fraction: default_time_floor_fraction(),
            count_floor: default_count_floor(),
            cores_floor: default_cores_floor(),
            fdr: true,
            fcr_intervals: false,
            derived_weight: default_derived_weight(),
            between_runs: DEFAULT_BETWEEN_RUNS,
            welch: false,
        }
    }
}

fn yes() -> bool {
    true
}

impl DiffOptions {
    pub fn validate(&self) -> Result<(), DiffError> {
        let bad = |what: String| Err(DiffError::InvalidOptions(what));
        if !(0.0..1.0).contains(&self.noise_floor) {
            return bad(format!(
                "noise floor {} must be a fraction in [0, 1), e.g. 0.01 for 1 %",
                self.noise_floor
            ));
        }
        if !(self.alpha > 0.0 && self.alpha < 0.5) {
            return bad(format!(
                "alpha {} must be in (0, 0.5), e.g. 0.05",
                self.alpha
            ));
        }
        if self.bootstrap_resamples < 100 {
            return bad(format!(
                "{} bootstrap resamples are too few: use at least 100 (default 2000)",
                self.bootstrap_resamples
            ));
        }
        for (what, v) in [
            ("time floor (ns)", self.time_floor_ns),
            ("count floor", self.count_floor),
            ("cores floor", self.cores_floor),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return bad(format!("{what} {v} must be a number >= 0"));
            }
        }
        if !(self.between_runs.is_finite() && (0.0..1.0).contains(&self.between_runs)) {
            return bad(format!(
                "between-runs spread {} must be in [0, 1) (a standard deviation of log \
                 time, e.g. 0.02 for about 2%; 0 turns it off)",
                self.between_runs
            ));
        }
        if !(self.derived_weight > 0.0 && self.derived_weight <= 1.0) {
            return bad(format!(
                "derived weight {} must be in (0, 1], e.g. 0.25",
                self.derived_weight
            ));
        }
        if !(0.0..1.0).contains(&self.time_floor_fraction) {
            return bad(format!(
                "time floor fraction {} must be in [0, 1), e.g. 0.001 for 0.1 % of end to end",
                self.time_floor_fraction
            ));
        }
        if !(self.gap_threshold > 0.0 && self.gap_threshold < 1.0) {
            return bad(format!(
                "gap threshold {} must be a fraction in (0, 1), e.g. 0.05 for 5 %",
                self.gap_threshold
            ));
        }
        Ok(())
    }
}

/// Which run and variant a side of the diff is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SideInfo {
    pub run_dir: PathBuf,
    pub experiment: String,
    pub run_id: String,
    pub variant: String,
    pub backend: String,
    pub knobs: BTreeMap<String, String>,
}

/// Reps left out of the comparison, per side.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Excluded {
    pub baseline: RepCounts,
    pub candidate: RepCounts,
}

/// One way the two sides' workloads or machines differ.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadDifference {
    pub field: String,
    pub baseline: String,
    pub candidate: String,
}

/// Which side of a diff something belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DiffSide {
    Baseline,
    Candidate,
}

impl std::fmt::Display for DiffSide {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DiffSide::Baseline => "baseline",
            DiffSide::Candidate => "candidate",
        })
    }
}

/// A leak-watch flag ([`crate::telemetry::leak_flags`]) of one side's variant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SideLeak {
    pub side: DiffSide,
    pub flag: LeakFlag,
}

/// A row of the phase table: a label and the comparison of its metric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseRow {
    pub phase: String,
    pub comparison: Comparison,
}

/// The whole comparison: what [`diff_runs`] returns and [`render`] prints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Diff {
    pub baseline: SideInfo,
    pub candidate: SideInfo,
    pub options: DiffOptions,
    /// The first lines of the text formats.
    pub headline: Headline,
    /// The baseline's workload.
    pub workload: WorkloadMeta,
    /// Differences between the sides' workloads; non-empty only when forced.
    pub workload_differences: Vec<WorkloadDifference>,
    /// Reps per side that entered the diff, and those left out.
    pub excluded: Excluded,
    /// Reps each side needs for a verdict (pairs, when paired).
    pub reps_needed: usize,
    /// Pairs of reps compared (one iteration of an interleaved run each), when the
    /// comparison is paired; None when the sides were compared as independent samples.
    #[serde(default)]
    pub pairs: Option<usize>,
    /// End-to-end time by the variant of the rep before, for variants of one run in
    /// alternating order.
    #[serde(default)]
    pub carry_over: Option<CarryOver>,
    /// synthesis, the backend call, kernels, drop, total, then whole-rep counters.
    pub phase_table: Vec<PhaseRow>,
    /// Every span name on total and self time, per counter, and whole-rep counters.
    pub metrics: Vec<Comparison>,
    /// Spans with no child on either side: their self time is their total time, and the
    /// text formats print one row for both.
    #[serde(default)]
    pub leaf_spans: Vec<String>,
    /// Wrapper spans and their unattributed time.
    pub gaps: Vec<Gap>,
    /// Where the change in end-to-end time went, ranked.
    pub contributions: Contributions,
    /// Things the reader should know (unavailable counters, forced comparison, …).
    pub notes: Vec<String>,
    /// Steady growth of host RSS or GPU memory across the reps of either side's variant.
    #[serde(default)]
    pub leaks: Vec<SideLeak>,
}

/// Why two runs cannot be compared.
#[derive(Debug, thiserror::Error)]
pub enum DiffError {
    #[error("{run}: no variant named {name:?}; variants are: {}", available.join(", "))]
    UnknownVariant {
        run: PathBuf,
        name: String,
        available: Vec<String>,
    },
    #[error(
        "{run}: only one variant ({name}); compare it with another run: gapscope diff RUN_A RUN_B"
    )]
    OneVariant { run: PathBuf, name: String },
    #[error("baseline and candidate are both variant {0:?} of the same run; choose another with --baseline/--candidate")]
    SameVariant(String),
    #[error(
        "refusing to compare different workloads:\n{}\npass --force to compare anyway",
        differences.iter().map(|d| format!("  {}: {} (baseline) vs {} (candidate)", d.field, d.baseline, d.candidate)).collect::<Vec<_>>().join("\n")
    )]
    WorkloadMismatch {
        differences: Vec<WorkloadDifference>,
    },
    #[error(
        "{run}: variant {variant} has no successful measured rep ({failed} failed, {warmup} warm-up); \
         see the error column of runs.csv, fix the cause and rerun"
    )]
    NoReps {
        run: PathBuf,
        variant: String,
        failed: usize,
        warmup: usize,
    },
    #[error("invalid option: {0}")]
    InvalidOptions(String),
    /// The spans of a folder read a rep at a time ([`crate::store::RunData::for_each_rep`]).
    #[error(transparent)]
    Spans(#[from] crate::store::StoreError),
}
