//! The judgement of one commit: a run of the good end and the commit (and the bad end
//! where the ends' distance is not known beforehand), interleaved, that stops as soon as the commit's place between the ends is decided
//! ([`super::sequential`]), or at a cap on reps. The run is also compared with
//! `gapscope diff`'s statistics on the metric against each end (shown beside the
//! label). How a commit is measured is behind [`Measurer`], so the judgement and the
//! search are tested without building anything.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use super::sequential::{Nearer, Position, MAX_AUTO_REPS};
use crate::analysis::{Comparison, Verdict};

/// What bounds one run: its most reps per variant, each rep's timeout, and what a
/// step's commit is placed against.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    pub max_reps: u32,
    /// Seconds; `None`: the experiment's own (or none).
    pub rep_timeout_s: Option<u64>,
    /// Half the ends' distance (log units) as their own run measured it: a step then
    /// pairs its commit with the good end alone and places it against good + this
    /// ([`super::sequential::Position::against_good`]), leaving the bad end, for a
    /// regression the slower one, unmeasured. `None`: both ends in every iteration.
    pub half_gap: Option<f64>,
    /// The ends' spread, taken as known for a step's commit where its values spread no
    /// more ([`super::sequential::KnownSpread`]); `None`: the steps' own spread alone.
    pub known_spread: Option<super::sequential::KnownSpread>,
}

/// One measurement of a commit between the ends.
// A few per bisect: their size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum StepRun {
    /// The commit could not be measured (it did not build, its gapscope is too old, a
    /// rep timed out, its reps failed): it is skipped.
    Failed {
        why: String,
        run_dir: Option<PathBuf>,
    },
    Measured {
        /// good (baseline) against the commit (candidate).
        vs_good: Comparison,
        /// bad (baseline) against the commit (candidate), where the bad end ran.
        vs_bad: Option<Comparison>,
        /// Where the commit sits between the ends, as the run stopped.
        position: Option<Position>,
        /// Complete iterations run (one rep of each variant).
        reps: u32,
        run_dir: PathBuf,
    },
}

/// A run of two commits: `base` (baseline) against `cand` (candidate).
#[derive(Debug, Clone)]
pub struct PairRun {
    pub comparison: Comparison,
    /// The sequence it stopped on (see [`super::sequential::PairSequence`]).
    pub sequence: Option<super::sequential::PairSequence>,
    pub run_dir: PathBuf,
    /// The longest measured or warm-up rep of either commit.
    pub slowest_rep: Duration,
}

/// Measures commits: a run folder per (commit, limits), reused when it exists.
pub trait Measurer {
    /// One rep of the good end alone, before any other commit is built: an error when
    /// the metric is not in it (or it cannot be measured).
    fn probe(&mut self, good: &str) -> Result<()>;
    /// The rep timeout the experiment gives, if it does.
    fn given_rep_timeout(&self) -> Option<u64>;
    /// Reps of good, `commit` and bad, until the commit is labelled or `limits` say.
    fn measure_step(&mut self, commit: &str, limits: &Limits) -> Result<StepRun>;
    /// Reps of two commits until their change is decided or `limits` say: the ends
    /// (good against bad), and the first bad commit against its parent.
    fn measure_pair(&mut self, base: &str, cand: &str, limits: &Limits) -> Result<PairRun>;
}

/// What a judged commit is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepLabel {
    Good,
    Bad,
    /// Neither end's verdict was reached, with every level of reps tried.
    CannotTell,
    /// Not measured: did not build, or its reps failed (`failure` says why).
    Failed,
}

impl std::fmt::Display for StepLabel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StepLabel::Good => "good",
            StepLabel::Bad => "bad",
            StepLabel::CannotTell => "cannot tell",
            StepLabel::Failed => "failed",
        })
    }
}

/// One commit's judgement with the measurement it rests on.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StepReport {
    pub commit: String,
    /// Position in the first-parent history (0: the good end).
    pub index: usize,
    pub label: StepLabel,
    /// Complete iterations (a rep of each variant) the label rests on.
    pub reps: u32,
    /// The cap on them.
    #[serde(default)]
    pub max_reps: u32,
    /// Where the commit sat between the ends when its run stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<Position>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vs_good: Option<Comparison>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vs_bad: Option<Comparison>,
    /// The run folder measured for this commit (a list: reports of earlier versions
    /// have one per level of reps).
    #[serde(default)]
    pub run_dirs: Vec<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A note when the commit differs from both ends by the diff's verdicts (slower than
/// good and faster than bad): more than one change lies between them, and the label
/// says only which end it is nearer.
pub fn between_note(vs_good: &Comparison, vs_bad: &Comparison) -> Option<String> {
    (vs_good.verdict == Verdict::Regressed && vs_bad.verdict == Verdict::Improved).then(|| {
        "differs from both ends (more than one change between them); labelled by the nearer end"
            .to_string()
    })
}

/// Judges `commit`: one run, stopped when the commit's place between the ends is
/// decided or at `limits.max_reps`; not decided by then: cannot tell.
pub fn judge_step(
    m: &mut dyn Measurer,
    index: usize,
    commit: &str,
    limits: &Limits,
) -> Result<StepReport> {
    let mut report = StepReport {
        commit: commit.to_string(),
        index,
        label: StepLabel::CannotTell,
        reps: 0,
        max_reps: limits.max_reps,
        position: None,
        vs_good: None,
        vs_bad: None,
        run_dirs: Vec::new(),
        failure: None,
        note: None,
    };
    match m.measure_step(commit, limits)? {
        StepRun::Failed { why, run_dir } => {
            report.label = StepLabel::Failed;
            report.failure = Some(why);
            report.run_dirs.extend(run_dir);
        }
        StepRun::Measured {
            vs_good,
            vs_bad,
            position,
            reps,
            run_dir,
        } => {
            report.label = match position.and_then(|p| p.label()) {
                Some(Nearer::Good) => StepLabel::Good,
                Some(Nearer::Bad) => StepLabel::Bad,
                None => StepLabel::CannotTell,
            };
            report.note = vs_bad.as_ref().and_then(|b| between_note(&vs_good, b));
            report.reps = reps;
            report.position = position;
            report.vs_good = Some(vs_good);
            report.vs_bad = vs_bad;
            report.run_dirs.push(run_dir);
        }
    }
    Ok(report)
}

/// Per-rep spread (robust coefficient of variation, 1.4826 · MAD / median) assumed
/// before the ends are measured: with [`reps_for`] it sets the ends' cap.
pub const ASSUMED_CV: f64 = 0.015;

/// Reps per variant that resolve a shift of `threshold` (a fraction) when reps spread
/// by `cv` (relative, per rep): the number of pairs whose bootstrap interval of the
/// median per-pair difference clears the noise floor (`threshold / 2`) with 80 %
/// power at 95 % confidence:
///
/// n = (z₀.₉₇₅ + z₀.₈)² · (π/2) · 2cv² / (threshold − threshold/2)²
///
/// (a pair's difference has variance 2cv²; the median's variance is π/2 times the
/// mean's for normal data). At least the signed-rank test's minimum (6 pairs at 0.05),
/// at most [`MAX_AUTO_REPS`]. At cv = 1.5 % a 5 % shift needs 9.
pub fn reps_for(threshold: f64, cv: f64) -> u32 {
    const Z: f64 = 1.959_964 + 0.841_621;
    let margin = threshold / 2.0;
    let n = Z * Z * std::f64::consts::FRAC_PI_2 * 2.0 * cv * cv / (margin * margin);
    let min = crate::stats::min_pairs_for_verdict(0.05) as u32;
    (n.ceil() as u32).clamp(min, MAX_AUTO_REPS)
}

/// The robust per-rep spread of a comparison's two sides (the larger), if known.
pub fn spread_of(c: &Comparison) -> Option<f64> {
    [&c.baseline, &c.candidate]
        .iter()
        .filter_map(|s| Some(1.4826 * s.mad? / s.median?.abs()).filter(|v| v.is_finite()))
        .reduce(f64::max)
}

#[cfg(test)]
#[path = "judge_tests.rs"]
mod tests;
