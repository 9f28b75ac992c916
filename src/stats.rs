//! Statistics, the one home of medians and quantiles: the free [`median`] and
//! [`quantile`] for tables and charts, and behind a verdict robust location and spread of
//! repeated measurements, a bootstrap confidence interval of the relative change of
//! medians and a rank test. It depends on no other module of the crate, so the store,
//! the analysis and the charts all use it.
//!
//! The verdict's statistics work on [`Sample`], a sorted set of at least two finite
//! values, so the callers cannot feed it an empty column or a NaN by mistake.
//!
//! Methods:
//! - median and median absolute deviation (MAD, unscaled): Hampel, "The influence curve
//!   and its role in robust estimation", JASA 69 (1974).
//! - percentile bootstrap interval: Efron & Tibshirani, *An Introduction to the
//!   Bootstrap* (1993), ch. 13. Resample medians are drawn from their exact bootstrap
//!   distribution (Maritz & Jarrett, "A note on estimating the variance of the sample
//!   median", JASA 73 (1978); Efron, *The Jackknife, the Bootstrap and Other Resampling
//!   Plans* (1982), §10.2), which is the distribution naive resampling draws from, at
//!   O(log n) per resample instead of O(n).
//! - Mann–Whitney U test, two-sided: Mann & Whitney, "On a test of whether one of two
//!   random variables is stochastically larger than the other", Ann. Math. Stat. 18
//!   (1947); exact null distribution for small samples without ties, otherwise the
//!   normal approximation with tie and continuity corrections (Lehmann,
//!   *Nonparametrics*, 1975, §1.4).
//! - paired differences (reps of one iteration of an interleaved run): median of the
//!   differences, its bootstrap interval ([`bootstrap_median`]), Wilcoxon signed-rank test
//!   ([`signed_rank`]).
//! - false-discovery control over a diff's comparisons: Benjamini–Hochberg q-values
//!   ([`bh_q_values`]; why BH and not Benjamini–Yekutieli is in `fdr`).
//! - Student's t: its distribution, the one-sample and Welch tests and an anytime-valid
//!   confidence sequence for a mean ([`welch_t`], [`one_sample_t`],
//!   [`mean_confidence_sequence`]; references in `student`).
//! - two groups among the reps ([`bimodal`], a screening rule).
//! - random numbers: xoshiro256++ seeded through SplitMix64 (Blackman & Vigna,
//!   "Scrambled linear pseudorandom number generators", ACM TOMS 47 (2021)), written out
//!   here so that a seed gives the same interval whatever version of `rand` is linked.

use serde::{Deserialize, Serialize};

/// Why a set of values cannot be a [`Sample`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SampleError {
    #[error("a sample needs at least 2 values, got {0}: record more reps")]
    TooFew(usize),
    #[error("value #{index} of the sample is {value}, not a finite number")]
    NotFinite { index: usize, value: f64 },
}

/// At least two finite measurements, kept sorted.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample(Vec<f64>);

impl Sample {
    /// Refuses fewer than two values and any NaN or infinity.
    pub fn new(mut values: Vec<f64>) -> Result<Self, SampleError> {
        if let Some((index, &value)) = values.iter().enumerate().find(|(_, v)| !v.is_finite()) {
            return Err(SampleError::NotFinite { index, value });
        }
        if values.len() < 2 {
            return Err(SampleError::TooFew(values.len()));
        }
        values.sort_unstable_by(f64::total_cmp);
        Ok(Sample(values))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Always false: a sample holds at least two values.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The values in ascending order.
    pub fn sorted(&self) -> &[f64] {
        &self.0
    }

    pub fn median(&self) -> f64 {
        median_sorted(&self.0)
    }

    /// Median absolute deviation from the median (unscaled; multiply by 1.4826 for a
    /// normal-consistent estimate of the standard deviation).
    pub fn mad(&self) -> f64 {
        let m = self.median();
        let mut dev: Vec<f64> = self.0.iter().map(|v| (v - m).abs()).collect();
        median_unsorted(&mut dev)
    }

    /// Quantile `q` in [0, 1], linear between order statistics (Hyndman & Fan type 7).
    pub fn quantile(&self, q: f64) -> f64 {
        quantile_sorted(&self.0, q)
    }
}

/// Median of the finite values (mean of the middle two for an even count); `None` when
/// there are none. For tables and charts of any number of values; the comparisons use
/// [`Sample`], which refuses fewer than 2.
pub fn median(values: &[f64]) -> Option<f64> {
    let v = finite_sorted(values);
    (!v.is_empty()).then(|| median_sorted(&v))
}

/// Quantile `q` in [0, 1] of the finite values, linear between order statistics
/// (Hyndman & Fan type 7, the default of R and numpy); `None` when there are none.
pub fn quantile(values: &[f64], q: f64) -> Option<f64> {
    let v = finite_sorted(values);
    (!v.is_empty()).then(|| quantile_sorted(&v, q))
}

fn finite_sorted(values: &[f64]) -> Vec<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_unstable_by(f64::total_cmp);
    v
}

fn median_sorted(v: &[f64]) -> f64 {
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Median by selection, O(n); reorders `v`. `v` must not be empty.
fn median_unsorted(v: &mut [f64]) -> f64 {
    let n = v.len();
    let (_, &mut hi, _) = v.select_nth_unstable_by(n / 2, f64::total_cmp);
    if n % 2 == 1 {
        hi
    } else {
        let lo = v[..n / 2].iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (lo + hi) / 2.0
    }
}

fn quantile_sorted(v: &[f64], q: f64) -> f64 {
    let h = (v.len() - 1) as f64 * q.clamp(0.0, 1.0);
    let (i, frac) = (h.floor() as usize, h - h.floor());
    match v.get(i + 1) {
        Some(&next) if frac > 0.0 => v[i] + frac * (next - v[i]),
        _ => v[i],
    }
}

/// A confidence interval of a relative change (0.02 = +2 %). A bound is `None` where it
/// is undefined: the relative change against a zero baseline does not exist, and a bound
/// that such resamples could decide has no value (JSON `null`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    pub lo: Option<f64>,
    pub hi: Option<f64>,
    /// Confidence level, e.g. 0.95.
    pub level: f64,
}

impl Interval {
    /// Both bounds exist.
    pub fn is_defined(&self) -> bool {
        self.lo.is_some() && self.hi.is_some()
    }

    /// `x` lies within both bounds; false when a bound is undefined.
    pub fn contains(&self, x: f64) -> bool {
        matches!((self.lo, self.hi), (Some(lo), Some(hi)) if lo <= x && x <= hi)
    }

    /// Both bounds divided by `whole` (an interval of a difference as a share of it).
    pub fn divided_by(self, whole: f64) -> Interval {
        Interval {
            lo: self.lo.map(|x| x / whole),
            hi: self.hi.map(|x| x / whole),
            level: self.level,
        }
    }
}

/// Draws medians of bootstrap resamples of one sample from their exact distribution.
///
/// A resample draws n values with replacement from x(1) ≤ … ≤ x(n). Let C_j be how many
/// draws fall on the j smallest values: C_j ~ Binomial(n, j/n). The m-th smallest value
/// of the resample is x(J) with P(J ≤ j) = P(C_j ≥ m). For odd n the median is x(J) with
/// m = (n+1)/2. For even n it is (x(J) + x(K))/2 with m = n/2: K = J unless exactly m
/// draws fell on the J smallest values, P(J = j, C_j = m) = b(m; n, j/n)·(1 − ((j−1)/j)^m);
/// then the other n − m draws are uniform over the n − j larger values and K − J is the
/// smallest of them.
struct MedianResampler<'a> {
    x: &'a [f64],
    /// cdf[j-1] = P(J ≤ j).
    cdf: Vec<f64>,
    /// Even n: P(K > J | J = j) at index j-1.
    step_up: Vec<f64>,
}

impl<'a> MedianResampler<'a> {
    fn new(x: &'a [f64]) -> Self {
        let n = x.len();
        let m = n.div_ceil(2);
        let ln_fact = ln_factorials(n);
        let mut cdf = Vec::with_capacity(n);
        let mut running = 0.0f64;
        for j in 1..=n {
            // Past 1 − 1e-16 the rest of the table is 1 to a 53-bit uniform.
            if running < 1.0 - 1e-16 {
                let p = j as f64 / n as f64;
                running = running.max(binomial_upper_tail(n, m, p, &ln_fact)).min(1.0);
            } else {
                running = 1.0;
            }
            cdf.push(running);
        }
        cdf[n - 1] = 1.0;
        let mut step_up = Vec::new();
        if n.is_multiple_of(2) {
            step_up = (1..=n)
                .map(|j| {
                    let p_j = cdf[j - 1] - if j > 1 { cdf[j - 2] } else { 0.0 };
                    if j == n || p_j <= 0.0 {
                        return 0.0;
                    }
                    let exactly_m = binomial_pmf(n, m, j as f64 / n as f64, &ln_fact)
                        * (1.0 - ((j - 1) as f64 / j as f64).powi(m as i32));
                    (exactly_m / p_j).clamp(0.0, 1.0)
                })
                .collect();
        }
        MedianResampler { x, cdf, step_up }
    }

    fn draw(&self, rng: &mut Xoshiro) -> f64 {
        let n = self.x.len();
        let u = rng.next_f64();
        let j = (self.cdf.partition_point(|&f| f <= u) + 1).min(n);
        if n % 2 == 1 {
            return self.x[j - 1];
        }
        let mut k = j;
        if rng.next_f64() < self.step_up[j - 1] {
            // Smallest of r = n - m uniform draws on {1..L}, L = n - j.
            let (l, r) = ((n - j) as f64, (n - n / 2) as f64);
            let v = rng.next_f64();
            let d = (l * (1.0 - v.powf(1.0 / r))).floor() as usize + 1;
            k = j + d.min(n - j);
        }
        (self.x[j - 1] + self.x[k - 1]) / 2.0
    }
}

fn ln_factorials(n: usize) -> Vec<f64> {
    let mut v = Vec::with_capacity(n + 1);
    v.push(0.0);
    for k in 1..=n {
        v.push(v[k - 1] + (k as f64).ln());
    }
    v
}

fn binomial_pmf(n: usize, k: usize, p: f64, ln_fact: &[f64]) -> f64 {
    if p >= 1.0 {
        return if k == n { 1.0 } else { 0.0 };
    }
    let ln = ln_fact[n] - ln_fact[k] - ln_fact[n - k]
        + k as f64 * p.ln()
        + (n - k) as f64 * (1.0 - p).ln();
    ln.exp()
}

/// Probabilities below this are 0 to the sampler: its uniforms have 53 bits
/// (resolution 1.1e-16), so tails smaller than that are never drawn.
const NEGLIGIBLE: f64 = 1e-20;

/// P(X ≥ m) for X ~ Binomial(n, p), to within [`NEGLIGIBLE`]: sums from m away from the
/// mean, where the terms fall geometrically, until they no longer matter.
fn binomial_upper_tail(n: usize, m: usize, p: f64, ln_fact: &[f64]) -> f64 {
    if p >= 1.0 || m == 0 {
        return 1.0;
    }
    let odds = p / (1.0 - p);
    if m as f64 >= n as f64 * p {
        let mut term = binomial_pmf(n, m, p, ln_fact);
        let mut sum = 0.0;
        for k in m..=n {
            sum += term;
            term *= (n - k) as f64 / (k + 1) as f64 * odds;
            if term <= sum * 1e-17 || term < NEGLIGIBLE {
                break;
            }
        }
        sum.min(1.0)
    } else {
        let mut term = binomial_pmf(n, m - 1, p, ln_fact);
        let mut lower = 0.0;
        for k in (0..m).rev() {
            lower += term;
            if k == 0 {
                break;
            }
            term *= k as f64 / ((n - k + 1) as f64 * odds);
            if term <= lower * 1e-17 || term < NEGLIGIBLE {
                break;
            }
        }
        (1.0 - lower).max(0.0)
    }
}

/// Percentile bootstrap interval of the relative change of medians,
/// median(candidate)/median(baseline) − 1, from `resamples` independent resamples of each
/// side. Seeded, so the same data and seed give the same interval. `None` when the
/// baseline median is 0 (no relative change exists).
///
/// A resample whose baseline median is 0 has no relative change either. Such resamples
/// have no place in the order of the others, so each bound is taken where they would
/// push it furthest out: below every defined value for the lower bound, above for the
/// upper. A bound that falls on one of them is undefined (`None`), never NaN or ±∞.
pub fn bootstrap_relative_change(
    baseline: &Sample,
    candidate: &Sample,
    resamples: usize,
    level: f64,
    seed: u64,
) -> Option<Interval> {
    if baseline.median() == 0.0 || resamples == 0 {
        return None;
    }
    Some(bootstrap_medians(
        baseline,
        candidate,
        resamples,
        level,
        seed,
        |b, c| (b != 0.0).then(|| c / b - 1.0),
    ))
}

/// Percentile bootstrap interval of the difference of medians,
/// median(candidate) − median(baseline), in the samples' unit; resampled like
/// [`bootstrap_relative_change`] (same seed, same resamples), so both intervals of one
/// comparison come from the same draws. `None` without resamples.
pub fn bootstrap_difference(
    baseline: &Sample,
    candidate: &Sample,
    resamples: usize,
    level: f64,
    seed: u64,
) -> Option<Interval> {
    (resamples > 0).then(|| {
        bootstrap_medians(baseline, candidate, resamples, level, seed, |b, c| {
            Some(c - b)
        })
    })
}

/// The percentile interval of `stat(baseline median, candidate median)` over `resamples`
/// pairs of resampled medians; resamples where `stat` is undefined (`None`) take the
/// outermost places (see [`bootstrap_relative_change`]).
fn bootstrap_medians(
    baseline: &Sample,
    candidate: &Sample,
    resamples: usize,
    level: f64,
    seed: u64,
    stat: impl Fn(f64, f64) -> Option<f64>,
) -> Interval {
    let (rb, rc) = (
        MedianResampler::new(baseline.sorted()),
        MedianResampler::new(candidate.sorted()),
    );
    let mut rng = Xoshiro::seed(seed);
    let mut values = Vec::with_capacity(resamples);
    for _ in 0..resamples {
        let (b, c) = (rb.draw(&mut rng), rc.draw(&mut rng));
        if let Some(v) = stat(b, c) {
            values.push(v);
        }
    }
    values.sort_unstable_by(f64::total_cmp);
    let undefined = resamples - values.len();
    let tail = (1.0 - level) / 2.0;
    Interval {
        lo: quantile_with_undefined(&values, undefined, tail, true),
        hi: quantile_with_undefined(&values, undefined, 1.0 - tail, false),
        level,
    }
}

/// Quantile `q` (type 7) of `defined` (sorted) together with `undefined` values placed
/// below all of them (`below`) or above; `None` when the quantile touches one of those.
fn quantile_with_undefined(defined: &[f64], undefined: usize, q: f64, below: bool) -> Option<f64> {
    let n = defined.len() + undefined;
    let h = (n - 1) as f64 * q.clamp(0.0, 1.0);
    let (i, frac) = (h.floor() as usize, h - h.floor());
    let at = |k: usize| -> Option<f64> {
        if below {
            k.checked_sub(undefined)
                .and_then(|k| defined.get(k).copied())
        } else {
            defined.get(k).copied()
        }
    };
    let lo = at(i)?;
    if frac > 0.0 {
        Some(lo + frac * (at(i + 1)? - lo))
    } else {
        Some(lo)
    }
}

/// Result of a two-sided Mann–Whitney U test of `a` against `b`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RankTest {
    /// U of the first sample: pairs (x from a, y from b) with x > y, ties counting ½.
    pub u: f64,
    pub p_value: f64,
    /// The exact permutation distribution was used (both samples small).
    pub exact: bool,
}

/// Largest sample size for which the exact null distribution of U is computed.
const EXACT_MAX_N: usize = 20;

/// Two-sided Mann–Whitney U test (see the module doc for the method). Up to
/// 20 values per side the p-value is exact: the permutation distribution of
/// U given the observed tie groups.
pub fn mann_whitney(a: &Sample, b: &Sample) -> RankTest {
    let (n1, n2) = (a.len(), b.len());
    let groups = tie_groups(a.sorted(), b.sorted());
    // U = Σ over values of a of (#b below + ½ #b equal), from the tie groups in order.
    let (mut u, mut b_below) = (0.0, 0usize);
    for &(ca, cb) in &groups {
        u += ca as f64 * (b_below as f64 + cb as f64 / 2.0);
        b_below += cb;
    }
    if n1 <= EXACT_MAX_N && n2 <= EXACT_MAX_N {
        return RankTest {
            u,
            p_value: exact_p(&groups, n1, n2, u),
            exact: true,
        };
    }
    let tie_term: f64 = groups
        .iter()
        .map(|&(ca, cb)| ((ca + cb) as f64).powi(3) - (ca + cb) as f64)
        .sum();
    RankTest {
        u,
        p_value: normal_p(u, n1, n2, tie_term),
        exact: false,
    }
}

/// Walks both sorted samples together: for each distinct value in ascending order, how
/// many times it occurs in `x` and in `y`.
fn tie_groups(x: &[f64], y: &[f64]) -> Vec<(usize, usize)> {
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < x.len() || j < y.len() {
        let v = match (x.get(i), y.get(j)) {
            (Some(&p), Some(&q)) => p.min(q),
            (Some(&p), None) => p,
            (None, Some(&q)) => q,
            (None, None) => unreachable!(),
        };
        let (si, sj) = (i, j);
        while x.get(i) == Some(&v) {
            i += 1;
        }
        while y.get(j) == Some(&v) {
            j += 1;
        }
        out.push((i - si, j - sj));
    }
    out
}

/// Normal approximation: mean n1·n2/2, variance n1·n2/12·((N+1) − Σ(t³−t)/(N(N−1)))
/// over tie groups of size t, continuity correction ½.
fn normal_p(u: f64, n1: usize, n2: usize, tie_term: f64) -> f64 {
    let (n1n2, big_n) = ((n1 * n2) as f64, (n1 + n2) as f64);
    let var = n1n2 / 12.0 * ((big_n + 1.0) - tie_term / (big_n * (big_n - 1.0)));
    if var <= 0.0 {
        return 1.0;
    }
    let z = ((u - n1n2 / 2.0).abs() - 0.5).max(0.0) / var.sqrt();
    erfc(z / std::f64::consts::SQRT_2).min(1.0)
}

/// P(|U − n1·n2/2| ≥ |u − n1·n2/2|) over every split of the pooled values into samples
/// of n1 and n2, counted by dynamic programming over the tie groups: a group of t equal
/// values of which k go to the first sample adds k·(#second-sample values below + (t−k)/2)
/// to U, in C(t, k) ways.
fn exact_p(groups: &[(usize, usize)], n1: usize, n2: usize, u: f64) -> f64 {
    // State: values given to the first sample, 2U (an integer).
    let width = 2 * n1 * n2 + 1;
    let mut dp = vec![vec![0.0f64; width]; n1 + 1];
    dp[0][0] = 1.0;
    let mut seen = 0usize;
    for &(ca, cb) in groups {
        let t = ca + cb;
        let mut next = vec![vec![0.0f64; width]; n1 + 1];
        for (a, row) in dp.iter().enumerate() {
            let Some(b) = seen.checked_sub(a).filter(|&b| b <= n2) else {
                continue;
            };
            let mut ways = 1.0; // C(t, k)
            for k in 0..=t {
                if k > 0 {
                    ways = ways * (t - k + 1) as f64 / k as f64;
                }
                if a + k > n1 || b + t - k > n2 {
                    continue;
                }
                let add = k * (2 * b + t - k);
                // With a and b values placed, 2U is at most 2ab.
                for (u2, &c) in row[..=2 * a * b]
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| **c != 0.0)
                {
                    next[a + k][u2 + add] += c * ways;
                }
            }
        }
        dp = next;
        seen += t;
    }
    two_sided_tail(&dp[n1], (n1 * n2) as f64, 2.0 * u)
}

/// Two-sided exact p-value from a null distribution given as weights by statistic value
/// (index = value): the share of the weight at values at least as far from `center` as
/// `observed`.
fn two_sided_tail(dist: &[f64], center: f64, observed: f64) -> f64 {
    let dev = (observed - center).abs();
    let total: f64 = dist.iter().sum();
    let extreme: f64 = dist
        .iter()
        .enumerate()
        .filter(|&(v, _)| (v as f64 - center).abs() >= dev - 1e-9)
        .map(|(_, c)| c)
        .sum();
    (extreme / total).min(1.0)
}

/// Complementary error function, fractional error < 1.2e-7 (Press et al., *Numerical
/// Recipes*, 3rd ed., §6.2.2, Chebyshev fit).
pub fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * poly.exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

/// Smallest number of reps per side for a verdict at significance `alpha`: the most
/// extreme ordering of two samples of n must reach p < alpha (exact two-sided p =
/// 2 / C(2n, n)), and the resampled median needs at least 5 values to take more than a
/// handful of distinct values.
pub fn min_reps_for_verdict(alpha: f64) -> usize {
    const BOOTSTRAP_MIN: usize = 5;
    let mut n = 2usize;
    let mut choose = 6.0f64; // C(4, 2)
    while 2.0 / choose >= alpha && n < 1000 {
        // C(2n+2, n+1) = C(2n, n) · (2n+1)(2n+2) / (n+1)²
        choose *= ((2 * n + 1) * (2 * n + 2)) as f64 / ((n + 1) * (n + 1)) as f64;
        n += 1;
    }
    n.max(BOOTSTRAP_MIN)
}

/// Fewest reps a side (pairs, when paired) on which a diff makes a claim of significance.
/// The t tests' p-values are continuous, so 4 reps a side can reach any level for a
/// change large against its spread; at 3 the estimate of the spread rests on 2 degrees of
/// freedom a side, and the diff only says whether the sides separated in every rep.
pub const MIN_REPS_FOR_CLAIM: usize = 4;

mod fdr;
mod modes;
mod paired;
mod rng;
mod student;
mod walsh;
pub use fdr::{bh_q_values, bh_rejections};
pub use modes::{bimodal, Modes};
pub use paired::{
    bootstrap_median, bootstrap_pairs, min_pairs_for_verdict, signed_rank, PairedIntervals,
    SignedRankTest,
};
pub use rng::Xoshiro;
pub use student::{
    confidence_sequence_of, incomplete_beta, ln_gamma, mean_confidence_sequence, one_sample_t,
    pooled_t, student_t_quantile, student_t_sf, student_t_two_sided, welch_t, TTest,
    SEQUENCE_MIXTURE,
};
pub use walsh::{lower_critical, SignedRankShift, WALSH_MAX_N};

#[cfg(test)]
mod tests;
