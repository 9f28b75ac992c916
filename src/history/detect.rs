//! Change points of one series: the points are commits in first-parent order, each with
//! the values of its reps (one or more runs). Pure: no store, no I/O.
//!
//! The method, and why (docs/history.md, "The detector"):
//!
//! 1. **Noise between runs.** Each commit is summarised by the median of its reps. The
//!    noise σ is the spread *between* commits, taken from successive differences of the
//!    medians (a step or a slow drift barely moves them): the root mean square of the
//!    90% smallest |Δ|, divided by √2 and corrected for the trim (×1.267 for normal
//!    noise); under 20 commits, where one step is past the trim, the median |Δ|. It is never smaller than the spread within commits (1.4826·MAD/√k of the
//!    reps, scaled for a median). asv weights each point by its own interval; when the
//!    runs of one commit agree more than runs of different commits do (a reboot, another
//!    CPU placement, a bimodal allocator), those weights make every wobble a step.
//! 2. **Weak pass.** An L1 Potts fit (as asv's), unweighted and in units of σ: the
//!    segmentation minimising Σ|y − segment median|/σ + β per segment, by dynamic
//!    programming, with segments of at least `min_segment` points, so that a single
//!    spike, or two, can never be a segment of its own. β is small: this pass is meant to
//!    find every candidate.
//! 3. **Strict pass.** Each candidate is tested with the medians of the points around it,
//!    at most `window` on each side and never past its neighbouring candidates:
//!    z = |median(after) − median(before)| / (σ·√(π/2)·√(1/n₁ + 1/n₂)). The weakest
//!    candidate under `strict_z` is dropped and its neighbours are tested again with the
//!    wider windows, until every one left clears it (Otava's weak-then-strict scheme, with
//!    a robust z instead of its t-test and permutations). A dropped candidate whose final
//!    z still reaches `suspect_z` is reported as suspected.
//!
//! Each step carries its relative change with a bootstrap interval of the ratio of the
//! two windows' medians (stats::bootstrap_relative_change over the commits' medians, so
//! the interval is between runs too) and its verdict; a larger value is worse (times and
//! counts).

use serde::{Deserialize, Serialize};

use crate::stats::{self, Sample};

/// Tuning of the detector. The defaults are the ones measured in
/// evidence/history_detector/.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DetectOptions {
    /// Fewest points of a segment (on each side of a step): 5, so that two spikes
    /// side by side are still outvoted inside any segment.
    pub min_segment: usize,
    /// Most points on each side that the strict test looks at.
    pub window: usize,
    /// Penalty of a segment in the weak pass, in units of σ.
    pub weak_penalty: f64,
    /// z a step must reach to be confirmed.
    pub strict_z: f64,
    /// z a dropped candidate must reach to be reported as suspected.
    pub suspect_z: f64,
    /// Smallest relative change reported at all (0: any that clears the tests).
    pub min_change: f64,
}

impl Default for DetectOptions {
    fn default() -> Self {
        DetectOptions {
            min_segment: 5,
            window: 30,
            weak_penalty: 3.0,
            strict_z: 4.0,
            suspect_z: 3.0,
            min_change: 0.0,
        }
    }
}

/// How a step was judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepVerdict {
    /// Confirmed, the metric grew (worse).
    Regressed,
    /// Confirmed, the metric fell.
    Improved,
    /// A candidate of the weak pass that the strict test did not confirm.
    Suspected,
}

impl std::fmt::Display for StepVerdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StepVerdict::Regressed => "regressed",
            StepVerdict::Improved => "improved",
            StepVerdict::Suspected => "suspected",
        })
    }
}

/// One change point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// Index of the first point after the step (the step lies between `index - 1` and
    /// `index`).
    pub index: usize,
    /// Medians of the windows before and after.
    pub before: f64,
    pub after: f64,
    /// after / before − 1.
    pub change: f64,
    /// 95% bootstrap interval of `change`, where both windows have two points or more.
    pub interval: Option<(f64, f64)>,
    pub z: f64,
    /// Points in the windows before and after.
    pub n_before: usize,
    pub n_after: usize,
    pub verdict: StepVerdict,
}

/// What the detector found in one series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Detection {
    /// Median of each point's values.
    pub medians: Vec<f64>,
    /// Noise between points (σ, in the values' unit).
    pub noise: f64,
    /// Where σ came from: "between commits" or "within commits".
    pub noise_source: String,
    /// Steps, in index order: confirmed and suspected.
    pub steps: Vec<Step>,
}

/// Runs the detector over points (each with at least one finite value; empty points are
/// the caller's to leave out).
pub fn detect(points: &[Vec<f64>], opts: &DetectOptions) -> Detection {
    let medians: Vec<f64> = points
        .iter()
        .map(|p| stats::median(p).unwrap_or(f64::NAN))
        .collect();
    let (noise, noise_source) = noise(&medians, points);
    let mut steps = Vec::new();
    let m = opts.min_segment.max(2);
    if medians.len() >= 2 * m && noise > 0.0 && medians.iter().all(|v| v.is_finite()) {
        let weak = potts_l1(&medians, noise, opts.weak_penalty, m);
        let (strict, dropped) = strict_pass(&medians, noise, &weak, opts);
        let all: Vec<usize> = strict.to_vec();
        for &t in &strict {
            let s = judge(&medians, noise, &all, t, opts, true);
            if s.change.abs() >= opts.min_change {
                steps.push(s);
            }
        }
        for t in dropped {
            if strict.iter().any(|&s| s.abs_diff(t) < m) {
                continue;
            }
            let s = judge(&medians, noise, &all, t, opts, false);
            if s.z >= opts.suspect_z && s.change.abs() >= opts.min_change {
                steps.push(s);
            }
        }
        steps.sort_by_key(|s| s.index);
    }
    Detection {
        medians,
        noise,
        noise_source,
        steps,
    }
}

/// Correction of the RMS of the 90% smallest |N(0,1)|: 1/√(E[Z² | |Z| < 1.645]).
const TRIM_CORRECTION: f64 = 1.267;
/// Standard error of a median over that of a mean, for normal noise: √(π/2).
const MEDIAN_SE: f64 = 1.2533;

/// σ between points (successive differences), floored by σ within points.
fn noise(medians: &[f64], points: &[Vec<f64>]) -> (f64, String) {
    let within: Vec<f64> = points
        .iter()
        .filter(|p| p.len() >= 2)
        .filter_map(|p| Sample::new(p.clone()).ok())
        .map(|s| 1.4826 * s.mad() * MEDIAN_SE / (s.len() as f64).sqrt())
        .collect();
    let within = stats::median(&within).unwrap_or(0.0);
    let mut diffs: Vec<f64> = medians
        .windows(2)
        .map(|w| (w[1] - w[0]).abs())
        .filter(|d| d.is_finite())
        .collect();
    diffs.sort_by(f64::total_cmp);
    let keep = ((diffs.len() as f64) * 0.9).ceil() as usize;
    // Under 20 differences one step is a tenth of them or more, past the trim: take
    // the median |Δ| (normal-consistent: σ = median|Δ| / (0.6745·√2)) instead.
    let between = if diffs.len() >= 2 && diffs.len() < 20 {
        diffs[diffs.len() / 2] / (0.6745 * std::f64::consts::SQRT_2)
    } else if diffs.len() >= 20 {
        let kept = &diffs[..keep.min(diffs.len())];
        let ms = kept.iter().map(|d| d * d).sum::<f64>() / kept.len() as f64;
        ms.sqrt() / std::f64::consts::SQRT_2 * TRIM_CORRECTION
    } else {
        0.0
    };
    // A floor far below any real noise, so that a constant series has no steps.
    let level = stats::median(medians).unwrap_or(0.0).abs();
    let floor = level * 1e-9;
    if between >= within {
        (between.max(floor), "between commits".into())
    } else {
        (within.max(floor), "within commits".into())
    }
}

/// Longest segment the weak pass considers: longer stretches are cut anyway, and the
/// strict pass joins the pieces again (it keeps the fit O(n·L²)).
const MAX_SEGMENT: usize = 200;

/// Change points of the penalised L1 fit: indices of the first point of every segment
/// but the first.
fn potts_l1(y: &[f64], sigma: f64, beta: f64, m: usize) -> Vec<usize> {
    let n = y.len();
    let mut best = vec![f64::INFINITY; n + 1];
    let mut from = vec![0usize; n + 1];
    best[0] = 0.0;
    // cost[i][j - i]: the L1 cost of y[i..j]; computed per start i by growing j.
    for i in 0..n {
        if !best[i].is_finite() {
            continue;
        }
        let mut sorted: Vec<f64> = Vec::with_capacity(MAX_SEGMENT);
        let mut sum_sorted = 0.0;
        for (j, &v) in y.iter().enumerate().take(n.min(i + MAX_SEGMENT)).skip(i) {
            let at = sorted.partition_point(|&x| x < v);
            sorted.insert(at, v);
            sum_sorted += v;
            let len = sorted.len();
            if len < m {
                continue;
            }
            // Σ|y − median| = (sum above the median) − (sum below it).
            let half = len / 2;
            let below: f64 = sorted[..half].iter().sum();
            let above = sum_sorted - below - if len % 2 == 1 { sorted[half] } else { 0.0 };
            let cost = (above - below) / sigma;
            let total = best[i] + cost + beta;
            // A segment must end at n or leave room for another of m points.
            let end = j + 1;
            if (end == n || n - end >= m) && total < best[end] {
                best[end] = total;
                from[end] = i;
            }
        }
    }
    let mut cps = Vec::new();
    let mut at = n;
    while at > 0 {
        let start = from[at];
        if start > 0 {
            cps.push(start);
        }
        at = start;
    }
    cps.reverse();
    cps
}

/// The windows around change point `t`, bounded by its neighbours in `cps`.
fn windows<'a>(y: &'a [f64], cps: &[usize], t: usize, window: usize) -> (&'a [f64], &'a [f64]) {
    let prev = cps.iter().copied().filter(|&c| c < t).max().unwrap_or(0);
    let next = cps
        .iter()
        .copied()
        .filter(|&c| c > t)
        .min()
        .unwrap_or(y.len());
    let lo = prev.max(t.saturating_sub(window));
    let hi = next.min(t + window);
    (&y[lo..t], &y[t..hi])
}

fn z_of(before: &[f64], after: &[f64], sigma: f64) -> f64 {
    let (Some(a), Some(b)) = (stats::median(before), stats::median(after)) else {
        return 0.0;
    };
    let se = sigma * MEDIAN_SE * (1.0 / before.len() as f64 + 1.0 / after.len() as f64).sqrt();
    (b - a).abs() / se
}

/// Drops the weakest candidate under `strict_z` until none is left: (kept, dropped).
fn strict_pass(
    y: &[f64],
    sigma: f64,
    weak: &[usize],
    opts: &DetectOptions,
) -> (Vec<usize>, Vec<usize>) {
    let mut kept = weak.to_vec();
    let mut dropped = Vec::new();
    loop {
        let weakest = kept
            .iter()
            .map(|&t| {
                let (b, a) = windows(y, &kept, t, opts.window);
                (t, z_of(b, a, sigma))
            })
            .min_by(|x, y| x.1.total_cmp(&y.1));
        match weakest {
            Some((t, z)) if z < opts.strict_z => {
                kept.retain(|&c| c != t);
                dropped.push(t);
            }
            _ => break,
        }
    }
    (kept, dropped)
}

/// The step at `t`, with windows bounded by the confirmed steps.
fn judge(
    y: &[f64],
    sigma: f64,
    confirmed: &[usize],
    t: usize,
    opts: &DetectOptions,
    strict: bool,
) -> Step {
    let (b, a) = windows(y, confirmed, t, opts.window);
    let before = stats::median(b).unwrap_or(f64::NAN);
    let after = stats::median(a).unwrap_or(f64::NAN);
    let change = if before != 0.0 {
        after / before - 1.0
    } else {
        f64::NAN
    };
    let interval = match (Sample::new(b.to_vec()), Sample::new(a.to_vec())) {
        (Ok(sb), Ok(sa)) => stats::bootstrap_relative_change(&sb, &sa, 2000, 0.95, 0x5eed)
            .and_then(|i| i.lo.zip(i.hi)),
        _ => None,
    };
    let verdict = match (strict, after > before) {
        (false, _) => StepVerdict::Suspected,
        (true, true) => StepVerdict::Regressed,
        (true, false) => StepVerdict::Improved,
    };
    Step {
        index: t,
        before,
        after,
        change,
        interval,
        z: z_of(b, a, sigma),
        n_before: b.len(),
        n_after: a.len(),
        verdict,
    }
}

#[cfg(test)]
#[path = "detect_tests.rs"]
mod tests;
