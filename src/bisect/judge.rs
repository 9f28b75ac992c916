//! The judgement of one commit: a run of K reps of the good end, the commit and the bad
//! end, interleaved, compared with `gapscope diff`'s statistics on the metric (paired
//! per iteration; bootstrap interval of the change and a signed-rank test, with the
//! noise floor at half the threshold). How a commit is measured is behind [`Measurer`],
//! so the judgement and the search are tested without building anything.

use std::path::PathBuf;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use crate::analysis::{Comparison, Verdict};

/// One measurement of a commit between the ends.
// A few per bisect: their size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum StepRun {
    /// The commit could not be measured (it did not build, its gapscope is too old, its
    /// reps failed): it is skipped.
    Failed { why: String },
    Measured {
        /// good (baseline) against the commit (candidate).
        vs_good: Comparison,
        /// bad (baseline) against the commit (candidate).
        vs_bad: Comparison,
        run_dir: PathBuf,
    },
}

/// Measures commits: a run folder per (commit, reps), reused when it exists.
pub trait Measurer {
    /// K reps of good, `commit` and bad.
    fn measure_step(&mut self, commit: &str, reps: u32) -> Result<StepRun>;
    /// K reps of two commits: `base` (baseline) against `cand` (candidate) on the
    /// metric. The ends (good against bad), and the first bad commit against its parent.
    fn measure_pair(&mut self, base: &str, cand: &str, reps: u32) -> Result<(Comparison, PathBuf)>;
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
    /// Reps per variant of the run the label rests on.
    pub reps: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vs_good: Option<Comparison>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vs_bad: Option<Comparison>,
    /// Run folders measured for this commit, one per level of reps.
    #[serde(default)]
    pub run_dirs: Vec<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// Good when the commit is faster than the bad end (an `improved` verdict against
/// bad) and not slower than good; bad when it is slower than the good end (a
/// `regressed` verdict against good) and not faster than bad. A commit that differs
/// from both ends sits between them (more than one change): it takes the label of the
/// end it is nearer to, with a note. Neither verdict: cannot tell.
pub fn classify(vs_good: &Comparison, vs_bad: &Comparison) -> (StepLabel, Option<String>) {
    let slower_than_good = vs_good.verdict == Verdict::Regressed;
    let faster_than_bad = vs_bad.verdict == Verdict::Improved;
    match (slower_than_good, faster_than_bad) {
        (true, false) => (StepLabel::Bad, None),
        (false, true) => (StepLabel::Good, None),
        (false, false) => (StepLabel::CannotTell, None),
        (true, true) => {
            let from_good = vs_good.relative.unwrap_or(0.0).abs();
            let from_bad = vs_bad.relative.unwrap_or(0.0).abs();
            let label = if from_good > from_bad {
                StepLabel::Bad
            } else {
                StepLabel::Good
            };
            (
                label,
                Some(format!(
                    "differs from both ends (more than one change between them); nearer the {} end",
                    if label == StepLabel::Bad {
                        "bad"
                    } else {
                        "good"
                    }
                )),
            )
        }
    }
}

/// Judges `commit`: a run of `levels[0]` reps, and, while it cannot tell, a run of each
/// next level. A commit that could not be measured is not measured again.
pub fn judge_step(
    m: &mut dyn Measurer,
    index: usize,
    commit: &str,
    levels: &[u32],
) -> Result<StepReport> {
    let mut report = StepReport {
        commit: commit.to_string(),
        index,
        label: StepLabel::CannotTell,
        reps: 0,
        vs_good: None,
        vs_bad: None,
        run_dirs: Vec::new(),
        failure: None,
        note: None,
    };
    for &reps in levels {
        report.reps = reps;
        match m.measure_step(commit, reps)? {
            StepRun::Failed { why } => {
                report.label = StepLabel::Failed;
                report.failure = Some(why);
                return Ok(report);
            }
            StepRun::Measured {
                vs_good,
                vs_bad,
                run_dir,
            } => {
                let (label, note) = classify(&vs_good, &vs_bad);
                report.label = label;
                report.note = note;
                report.vs_good = Some(vs_good);
                report.vs_bad = Some(vs_bad);
                report.run_dirs.push(run_dir);
                if label != StepLabel::CannotTell {
                    return Ok(report);
                }
            }
        }
    }
    Ok(report)
}

/// The levels of reps a commit is measured with: K, then 2K.
pub fn levels(k: u32) -> [u32; 2] {
    [k, 2 * k]
}

/// Per-rep spread (robust coefficient of variation, 1.4826 · MAD / median) assumed
/// before the ends are measured.
pub const ASSUMED_CV: f64 = 0.015;

/// Most reps [`reps_for`] asks for on its own (a noisier metric gets this many, and
/// its steps may end in "cannot tell"; `--reps` sets any number).
pub const MAX_AUTO_REPS: u32 = 60;

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
