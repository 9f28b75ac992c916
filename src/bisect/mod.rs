//! `gapscope bisect`: the first commit on a first-parent history where a metric (a
//! span's total or self time, or one of its counters) grew.
//!
//! - [`search`]: the binary search, with skips (pure).
//! - [`judge`]: one commit's label from a run of the good end, the commit and the bad
//!   end that stops when decided ([`sequential`]: anytime-valid confidence sequences),
//!   with the diff's statistics against each end beside it.
//! - `steps`: the real [`judge::Measurer`]: an experiment per step with `rev` variants,
//!   its run folder under results/ (reused by a re-run).
//! - `render`: the text output (the JSON is [`BisectReport`] itself).
//!
//! First one rep of the good end checks the metric, before any other commit is built.
//! Then the ends are measured against each other: bisecting needs the bad end's metric
//! to be `regressed` against the good end's, past half the threshold. Their distance
//! and spread set the cap on reps per step ([`sequential::cap_for`]) unless `--reps`
//! gives it, and their slowest rep the rep timeout ([`sequential::rep_timeout_s`])
//! unless the experiment gives one. Each step is then judged, and the first bad commit
//! is measured against its parent for the answer's diff.

pub mod judge;
mod render;
pub mod search;
pub mod sequential;
mod steps;

use std::path::PathBuf;

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

use crate::analysis::{Comparison, Diff, Measure, Verdict};
pub use judge::{Limits, Measurer, PairRun, StepLabel, StepReport};
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
    /// The most reps per variant of a step (each stops when decided), and how it was
    /// chosen: "derived: …", "capped: …" or "given: …".
    pub reps: u32,
    pub reps_reason: String,
    /// Each rep's timeout in the steps, and where it came from.
    #[serde(default)]
    pub rep_timeout_s: Option<u64>,
    #[serde(default)]
    pub rep_timeout_reason: String,
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
        /// The sequence the run against the parent stopped on: its verdict is the
        /// answer's (the diff's tests beside it may need more pairs than it took).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sequence: Option<sequential::PairSequence>,
        run_dir: PathBuf,
    },
    /// Commits that could not be judged leave more than one candidate.
    Candidates {
        last_good: String,
        commits: Vec<String>,
    },
}

/// How the cap on reps per step is chosen.
#[derive(Debug, Clone, Copy)]
pub enum Reps {
    Given(u32),
    /// From the ends' distance and spread (see [`sequential::cap_for`]).
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
    // The search in the order it runs: the metric checked on the good end, the ends
    // measured and their distance checked, the halving steps, the first bad commit against
    // its parent. Each stage reads the ends' figures and the reps' rule, so they stay here.
    if commits.len() < 2 {
        bail!("the good and bad revisions are the same commit: nothing to bisect");
    }
    let first = sequential::first_decidable(sequential::ALPHA) as u32;
    match reps {
        Reps::Given(k) if k < first => bail!(
            "--reps {k}: no step can be labelled before {first} reps (the confidence \
             sequence bounds nothing sooner); give --reps {first} or more"
        ),
        _ => {}
    }
    let (good, bad) = (&commits[0], &commits[commits.len() - 1]);
    progress(&format!(
        "checking the metric on one rep of the good end {} before building anything else",
        search_short(good)
    ));
    m.probe(good)?;
    let ends_cap = match reps {
        Reps::Given(k) => 2 * k,
        // Twice the pilot (9 reps resolve 5% at 1.5% per rep), at least a step's floor.
        Reps::Derived => {
            (2 * judge::reps_for(threshold, judge::ASSUMED_CV)).max(sequential::MIN_CAP)
        }
    };
    progress(&format!(
        "ends: good {} against bad {}, at most {ends_cap} reps each (stops when decided)",
        search_short(good),
        search_short(bad),
    ));
    let limits = Limits {
        max_reps: ends_cap,
        rep_timeout_s: None,
        half_gap: None,
        known_spread: None,
    };
    let ends = m.measure_pair(good, bad, &limits)?;
    check_ends(&ends.comparison, good, bad, threshold)?;
    let (k, reps_reason) = step_cap(reps, &ends.comparison, threshold);
    let (timeout, rep_timeout_reason) = rep_timeout(m.given_rep_timeout(), &ends);
    progress(&format!("reps per step: at most {k} ({reps_reason})"));
    progress(&format!("rep timeout: {timeout} s ({rep_timeout_reason})"));
    let half_gap = sequential::good_end_only(&ends.comparison);
    let limits = Limits {
        max_reps: k,
        rep_timeout_s: Some(timeout),
        half_gap,
        // From the first iteration only where a stalled rep cannot cross half the gap.
        known_spread: sequential::KnownSpread::from_ends(&ends.comparison)
            .map(|k| k.judging_from(if half_gap.is_some() { 1 } else { 2 })),
    };
    if let Some(k) = &limits.known_spread {
        progress(&format!(
            "steps are also judged with the ends' spread taken as known: {:.1}% per \
             iteration in their {} iterations, at most {:.1}% (97.5% bound)",
            k.ends_sd * 100.0,
            k.ends_iterations,
            k.sd * 100.0
        ));
    }
    let (steps, found) = run_steps(commits, m, &limits, progress)?;
    let outcome = answer(commits, m, &found, &limits, progress)?;
    Ok(BisectReport {
        metric: format!("{}.{}", ends.comparison.span, ends.comparison.measure),
        threshold,
        commits: commits.to_vec(),
        ends: ends.comparison,
        ends_run_dirs: vec![ends.run_dir],
        reps: k,
        reps_reason,
        rep_timeout_s: Some(timeout),
        rep_timeout_reason,
        steps,
        outcome,
    })
}

/// The first bad commit against its parent (a run of its own), or the candidates that
/// skipped commits leave.
fn answer(
    commits: &[String],
    m: &mut dyn Measurer,
    found: &search::SearchOutcome,
    limits: &Limits,
    progress: &mut dyn FnMut(&str),
) -> Result<Outcome> {
    Ok(match found.first_bad {
        Some(i) => {
            let (commit, parent) = (&commits[i], &commits[i - 1]);
            progress(&format!(
                "first bad {}: against its parent (at most {} reps)",
                search_short(commit),
                limits.max_reps
            ));
            let pair = m.measure_pair(parent, commit, limits)?;
            Outcome::FirstBad {
                commit: commit.clone(),
                parent: parent.clone(),
                diff: pair.comparison,
                sequence: pair.sequence,
                run_dir: pair.run_dir,
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
    })
}

/// The cap on reps per step, and where it came from.
fn step_cap(reps: Reps, ends: &Comparison, threshold: f64) -> (u32, String) {
    match reps {
        Reps::Given(k) => (
            k,
            format!("given: --reps {k}; a step stops as soon as its commit is labelled"),
        ),
        Reps::Derived => {
            let cv = judge::spread_of(ends).unwrap_or(judge::ASSUMED_CV);
            let ratio = 1.0 + ends.relative.unwrap_or(threshold);
            sequential::cap_for(ratio, cv)
        }
    }
}

/// The steps' rep timeout, and where it came from.
fn rep_timeout(given: Option<u64>, ends: &PairRun) -> (u64, String) {
    match given {
        Some(s) => (
            s,
            format!("given: the experiment's run.rep_timeout_s = {s}"),
        ),
        None => (
            sequential::rep_timeout_s(ends.slowest_rep),
            format!(
                "derived: {}× the ends' slowest rep ({}), at least {} s",
                sequential::TIMEOUT_FACTOR,
                crate::units::fmt_ns(ends.slowest_rep.as_nanos() as f64),
                sequential::MIN_TIMEOUT_S
            ),
        ),
    }
}

/// Bisecting needs the bad end regressed against the good one.
fn check_ends(ends: &Comparison, good: &str, bad: &str, threshold: f64) -> Result<()> {
    if ends.verdict == Verdict::Regressed {
        return Ok(());
    }
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
        render::change(ends),
        threshold * 50.0
    )
}

/// The search over `commits`, each step judged under `limits`.
fn run_steps(
    commits: &[String],
    m: &mut dyn Measurer,
    limits: &Limits,
    progress: &mut dyn FnMut(&str),
) -> Result<(Vec<StepReport>, search::SearchOutcome)> {
    let mut steps: Vec<StepReport> = Vec::new();
    let started = std::time::Instant::now();
    let found = search::search(commits.len(), |i| {
        let left = steps_left(&steps, commits.len());
        // The time of the steps so far, per step: what the ones left may take.
        let eta = match steps.len() {
            0 => String::new(),
            n => format!(
                ", about {:.0} s left at {:.0} s a step",
                started.elapsed().as_secs_f64() / n as f64 * left as f64,
                started.elapsed().as_secs_f64() / n as f64
            ),
        };
        progress(&format!(
            "step {} of about {}: #{i} {} (at most {} reps{eta})",
            steps.len() + 1,
            steps.len() + left,
            search_short(&commits[i]),
            limits.max_reps
        ));
        let r = judge::judge_step(m, i, &commits[i], limits)?;
        progress(&format!(
            "  #{i} {}: {}",
            search_short(&commits[i]),
            r.label
        ));
        let label = match r.label {
            StepLabel::Good => search::Label::Good,
            StepLabel::Bad => search::Label::Bad,
            StepLabel::CannotTell | StepLabel::Failed => search::Label::Skip,
        };
        steps.push(r);
        Ok::<_, anyhow::Error>(label)
    })?;
    Ok((steps, found))
}

/// About how many steps are left, this one included: log2 of the commits still between
/// the last good and the first bad labelled so far.
fn steps_left(steps: &[StepReport], len: usize) -> usize {
    let lo = (steps.iter())
        .filter(|s| s.label == StepLabel::Good)
        .map(|s| s.index)
        .max()
        .unwrap_or(0);
    let hi = (steps.iter())
        .filter(|s| s.label == StepLabel::Bad)
        .map(|s| s.index)
        .min()
        .unwrap_or(len - 1);
    let between = hi.saturating_sub(lo).max(2);
    (between as f64).log2().ceil() as usize
}

fn search_short(c: &str) -> &str {
    crate::revisions::short(c)
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
