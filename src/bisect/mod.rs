//! `gapscope bisect`: the first commit on a first-parent history where a metric (a
//! span's total or self time, or one of its counters) grew.
//!
//! - [`search`]: the binary search, with skips (pure).
//! - [`judge`]: one commit's label from a run of K reps of the good end, the commit and
//!   the bad end (the diff's statistics), more reps when it cannot tell, and the default K.
//! - `steps`: the real [`judge::Measurer`]: an experiment per step with `rev` variants,
//!   its run folder under results/ (reused by a re-run).
//! - `render`: the text output (the JSON is [`BisectReport`] itself).
//!
//! First the ends are measured against each other: bisecting needs the bad end's metric
//! to be `regressed` against the good end's, past half the threshold. Their spread sets
//! K (see [`judge::reps_for`]) unless `--reps` gives it. Each step is then judged, and the
//! first bad commit is measured against its parent for the answer's diff.

pub mod judge;
mod render;
pub mod search;
mod steps;

use std::path::PathBuf;

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

use crate::analysis::{Comparison, Diff, Measure, Verdict};
pub use judge::{Measurer, StepLabel, StepReport};
pub use render::{render_step, render_text};
pub use steps::{ExperimentMeasurer, StepSettings};

/// A metric: `SPAN.total`, `SPAN.self`, `SPAN.process_cpu` (the process's CPU time over
/// the span) or `SPAN.COUNTER` (a spans.csv counter column, e.g.
/// `synthesis.task_clock_ns`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metric {
    pub span: String,
    pub measure: Measure,
}

impl Metric {
    pub fn parse(s: &str) -> Result<Metric, String> {
        let counters: Vec<&str> = crate::counters::CounterKind::ALL
            .iter()
            .map(|c| c.column())
            .collect();
        let usage = || {
            format!(
                "metric {s:?}: write SPAN.total, SPAN.self, SPAN.process_cpu or SPAN.COUNTER with \
                 COUNTER one of {} (e.g. gpu_prove.self, synthesis.task_clock_ns)",
                counters.join(", ")
            )
        };
        let (span, what) = s.rsplit_once('.').ok_or_else(usage)?;
        if span.is_empty() {
            return Err(usage());
        }
        let measure = match what {
            "total" => Measure::Total,
            "self" => Measure::SelfTime,
            "process_cpu" => Measure::ProcessCpu,
            c if counters.contains(&c) => Measure::Counter(c.into()),
            _ => return Err(usage()),
        };
        Ok(Metric {
            span: span.into(),
            measure,
        })
    }

    /// This metric's comparison in a diff.
    pub fn find<'a>(&self, diff: &'a Diff) -> Option<&'a Comparison> {
        diff.metrics
            .iter()
            .find(|c| c.span == self.span && c.measure == self.measure)
    }
}

impl std::fmt::Display for Metric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.span, self.measure)
    }
}

/// What a bisect found, whole (`--format json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BisectReport {
    pub metric: String,
    /// Smallest change that counts, as a fraction; verdicts use half of it as noise floor.
    pub threshold: f64,
    /// The first-parent history, good end first.
    pub commits: Vec<String>,
    /// Good (baseline) against bad (candidate) on the metric.
    pub ends: Comparison,
    pub ends_run_dirs: Vec<PathBuf>,
    /// Reps per variant of each step's first run, and how it was chosen.
    pub reps: u32,
    pub reps_reason: String,
    pub steps: Vec<StepReport>,
    pub outcome: Outcome,
}

// One per bisect: its size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Outcome {
    /// One commit left: the first bad one, with its parent (baseline) against it.
    FirstBad {
        commit: String,
        parent: String,
        diff: Comparison,
        run_dir: PathBuf,
    },
    /// Commits that could not be judged leave more than one candidate.
    Candidates {
        last_good: String,
        commits: Vec<String>,
    },
}

/// How reps were chosen.
#[derive(Debug, Clone, Copy)]
pub enum Reps {
    Given(u32),
    /// From the ends' spread (see [`judge::reps_for`]).
    Derived,
}

/// Bisects `commits` (first-parent history, good end first) on `threshold` (a fraction).
pub fn bisect(
    commits: &[String],
    m: &mut dyn Measurer,
    threshold: f64,
    reps: Reps,
    progress: &mut dyn FnMut(&str),
) -> Result<BisectReport> {
    if commits.len() < 2 {
        bail!("the good and bad revisions are the same commit: nothing to bisect");
    }
    let (good, bad) = (&commits[0], &commits[commits.len() - 1]);
    let pilot = match reps {
        Reps::Given(k) => k,
        Reps::Derived => judge::reps_for(threshold, judge::ASSUMED_CV),
    };
    let mut ends = None;
    let mut ends_run_dirs = Vec::new();
    for k in judge::levels(pilot) {
        progress(&format!("ends: {k} reps each of good and bad"));
        let (c, dir) = m.measure_pair(good, bad, k)?;
        ends_run_dirs.push(dir);
        let regressed = c.verdict == Verdict::Regressed;
        ends = Some(c);
        if regressed {
            break;
        }
    }
    let ends = ends.expect("two levels");
    if ends.verdict != Verdict::Regressed {
        bail!(
            "the bad end ({}) is not regressed against the good end ({}) on {}: {} (noise floor \
             {:.1}%, the threshold's half). Nothing to bisect: check the metric and the ends, \
             lower --threshold, or give more --reps",
            search_short(bad),
            search_short(good),
            Metric {
                span: ends.span.clone(),
                measure: ends.measure.clone()
            },
            render::change(&ends),
            threshold * 50.0
        );
    }
    let (k, reps_reason) = match reps {
        Reps::Given(k) => (k, format!("--reps {k}")),
        Reps::Derived => {
            let cv = judge::spread_of(&ends).unwrap_or(judge::ASSUMED_CV);
            let k = judge::reps_for(threshold, cv);
            (
                k,
                format!(
                    "derived: the ends spread by {:.2}% per rep (1.4826·MAD/median), and {k} \
                     paired reps resolve a {:.1}% shift at that spread (80% power, 95% \
                     interval clearing a {:.1}% floor)",
                    cv * 100.0,
                    threshold * 100.0,
                    threshold * 50.0
                ),
            )
        }
    };
    let mut steps = Vec::new();
    let found = search::search(commits.len(), |i| {
        progress(&format!(
            "step {}: {} ({k} reps)",
            steps.len() + 1,
            search_short(&commits[i])
        ));
        let r = judge::judge_step(m, i, &commits[i], &judge::levels(k))?;
        progress(&format!("  {}: {}", search_short(&commits[i]), r.label));
        let label = match r.label {
            StepLabel::Good => search::Label::Good,
            StepLabel::Bad => search::Label::Bad,
            StepLabel::CannotTell | StepLabel::Failed => search::Label::Skip,
        };
        steps.push(r);
        Ok::<_, anyhow::Error>(label)
    })?;
    let outcome = match found.first_bad {
        Some(i) => {
            let (commit, parent) = (&commits[i], &commits[i - 1]);
            progress(&format!(
                "first bad {}: against its parent ({k} reps)",
                search_short(commit)
            ));
            let (diff, run_dir) = m.measure_pair(parent, commit, k)?;
            Outcome::FirstBad {
                commit: commit.clone(),
                parent: parent.clone(),
                diff,
                run_dir,
            }
        }
        None => Outcome::Candidates {
            last_good: commits[found.last_good].clone(),
            commits: found
                .candidates
                .iter()
                .map(|&i| commits[i].clone())
                .collect(),
        },
    };
    Ok(BisectReport {
        metric: format!("{}.{}", ends.span, ends.measure),
        threshold,
        commits: commits.to_vec(),
        ends,
        ends_run_dirs,
        reps: k,
        reps_reason,
        steps,
        outcome,
    })
}

fn search_short(c: &str) -> &str {
    crate::revisions::short(c)
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
