//! Paired comparison: the baseline and candidate reps of one iteration of an interleaved
//! run form a pair, and the statistics work on the per-pair differences. Drift of the
//! machine that is slow compared with one iteration (a CPU whose memory got slower for a
//! second, a neighbour's burst) moves both reps of a pair alike and cancels in their
//! difference, where a comparison of two independent samples counts it as noise.
//!
//! - location: the median of the differences (candidate − baseline).
//! - interval: percentile bootstrap of that median over resampled pairs, drawn from the
//!   exact bootstrap distribution of a median as in the unpaired case
//!   ([`bootstrap_median`]); with its relative twin, [`bootstrap_pairs`] resamples whole
//!   pairs and divides each resample's median difference by the same resample's
//!   baseline median, which keeps the relative interval at or above −100% (see there).
//! - test: Wilcoxon signed-rank, two-sided (Wilcoxon, "Individual comparisons by ranking
//!   methods", Biometrics Bulletin 1 (1945)); zero differences are dropped, ties get
//!   average ranks; exact null distribution up to 20 non-zero differences, otherwise
//!   the normal approximation with tie and continuity corrections (Lehmann,
//!   *Nonparametrics*, 1975, §3.2).

use serde::{Deserialize, Serialize};

use super::{
    erfc, median_unsorted, quantile_sorted, quantile_with_undefined, two_sided_tail, Interval,
    MedianResampler, Sample, Xoshiro,
};

/// Result of a two-sided Wilcoxon signed-rank test of differences against 0.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SignedRankTest {
    /// Sum of the ranks of |d| over the positive differences.
    pub w_plus: f64,
    /// Non-zero differences (the zeros are dropped).
    pub n: usize,
    pub p_value: f64,
    /// The exact null distribution was used.
    pub exact: bool,
}

/// Largest number of non-zero differences for which the exact null distribution is used.
const EXACT_MAX_N: usize = 20;

/// Two-sided Wilcoxon signed-rank test of `d` (see the module doc). With no non-zero
/// difference the p-value is 1.
pub fn signed_rank(d: &[f64]) -> SignedRankTest {
    let mut abs: Vec<(f64, bool)> = d
        .iter()
        .filter(|x| **x != 0.0 && x.is_finite())
        .map(|&x| (x.abs(), x > 0.0))
        .collect();
    abs.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
    let n = abs.len();
    if n == 0 {
        return SignedRankTest {
            w_plus: 0.0,
            n,
            p_value: 1.0,
            exact: true,
        };
    }
    // Doubled average ranks (integers), and the tie term Σ(t³ − t).
    let mut ranks2 = vec![0usize; n];
    let mut tie_term = 0.0;
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && abs[j + 1].0 == abs[i].0 {
            j += 1;
        }
        // Ranks i+1 ..= j+1 share their mean (i + j + 2) / 2, doubled: i + j + 2.
        for r in &mut ranks2[i..=j] {
            *r = i + j + 2;
        }
        let t = (j - i + 1) as f64;
        tie_term += t * t * t - t;
        i = j + 1;
    }
    let w2: usize = ranks2
        .iter()
        .zip(&abs)
        .filter(|(_, a)| a.1)
        .map(|(r, _)| r)
        .sum();
    let w_plus = w2 as f64 / 2.0;
    if n <= EXACT_MAX_N {
        return SignedRankTest {
            w_plus,
            n,
            p_value: exact_p(&ranks2, w2),
            exact: true,
        };
    }
    SignedRankTest {
        w_plus,
        n,
        p_value: normal_p(w_plus, n, tie_term),
        exact: false,
    }
}

/// Normal approximation: mean n(n+1)/4, variance n(n+1)(2n+1)/24 − Σ(t³ − t)/48 over tie
/// groups of size t, continuity correction ½.
fn normal_p(w_plus: f64, n: usize, tie_term: f64) -> f64 {
    let nf = n as f64;
    let mean = nf * (nf + 1.0) / 4.0;
    let var = nf * (nf + 1.0) * (2.0 * nf + 1.0) / 24.0 - tie_term / 48.0;
    if var <= 0.0 {
        return 1.0;
    }
    let z = ((w_plus - mean).abs() - 0.5).max(0.0) / var.sqrt();
    erfc(z / std::f64::consts::SQRT_2).min(1.0)
}

/// P(|2W⁺ − E| ≥ |w2 − E|) when each rank's sign is a fair coin: the distribution of the
/// doubled sum by dynamic programming over the ranks.
fn exact_p(ranks2: &[usize], w2: usize) -> f64 {
    let total: usize = ranks2.iter().sum();
    let mut dist = vec![0.0f64; total + 1];
    dist[0] = 1.0;
    let mut reach = 0;
    for &r in ranks2 {
        for s in (0..=reach).rev() {
            if dist[s] != 0.0 {
                dist[s + r] += dist[s];
            }
        }
        reach += r;
    }
    two_sided_tail(&dist, total as f64 / 2.0, w2 as f64)
}

/// Percentile bootstrap interval of the median of `x` (in `x`'s unit), from `resamples`
/// resamples; seeded. Used on paired differences.
pub fn bootstrap_median(x: &Sample, resamples: usize, level: f64, seed: u64) -> Option<Interval> {
    if resamples == 0 {
        return None;
    }
    let r = MedianResampler::new(x.sorted());
    let mut rng = Xoshiro::seed(seed);
    let mut values: Vec<f64> = (0..resamples).map(|_| r.draw(&mut rng)).collect();
    values.sort_unstable_by(f64::total_cmp);
    let tail = (1.0 - level) / 2.0;
    Some(Interval {
        lo: Some(quantile_sorted(&values, tail)),
        hi: Some(quantile_sorted(&values, 1.0 - tail)),
        level,
    })
}

/// The two intervals of a paired change, from the same resampled pairs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PairedIntervals {
    /// Median of the per-pair differences, in the values' unit.
    pub difference: Interval,
    /// The same median over the resample's baseline median; `None` when every baseline
    /// value is 0 (no relative change exists).
    pub relative: Option<Interval>,
}

/// Percentile bootstrap intervals of the paired change from `resamples` resamples of
/// whole pairs (baseline, candidate); seeded. Each resample gives the median of its
/// differences d* and the median of its baseline values b*; the difference interval is
/// that of d*, the relative one that of d*/b* (resamples with b* = 0 take the outermost
/// places, as in [`super::bootstrap_relative_change`]).
///
/// Why it cannot fall below −100%: with candidate values ≥ 0, each difference c − b is at
/// least −b, and order statistics keep that order, so median(c − b) ≥ median(−b) =
/// −median(b) in every resample: d*/b* ≥ −1. Dividing the interval of d* by the whole
/// sample's baseline median, as a resample-free ratio would, has no such bound (−115.7%
/// for a span that a candidate removes). On the log-ratio scale the same interval is
/// that of ln(1 + d*/b*): percentile intervals follow any monotone map, so the bounds are
/// the same numbers and −100% is ln 0, the candidate's time gone.
pub fn bootstrap_pairs(
    pairs: &[(f64, f64)],
    resamples: usize,
    level: f64,
    seed: u64,
) -> Option<PairedIntervals> {
    let n = pairs.len();
    if resamples == 0 || n < 2 {
        return None;
    }
    let mut rng = Xoshiro::seed(seed);
    let (mut diffs, mut rels) = (Vec::with_capacity(resamples), Vec::with_capacity(resamples));
    let (mut d, mut b) = (vec![0.0; n], vec![0.0; n]);
    let mut undefined = 0usize;
    for _ in 0..resamples {
        for k in 0..n {
            let i = ((rng.next_f64() * n as f64) as usize).min(n - 1);
            let (x, y) = pairs[i];
            d[k] = y - x;
            b[k] = x;
        }
        let (dm, bm) = (median_unsorted(&mut d), median_unsorted(&mut b));
        diffs.push(dm);
        if bm != 0.0 {
            rels.push(dm / bm);
        } else {
            undefined += 1;
        }
    }
    diffs.sort_unstable_by(f64::total_cmp);
    rels.sort_unstable_by(f64::total_cmp);
    let tail = (1.0 - level) / 2.0;
    let any_baseline = pairs.iter().any(|p| p.0 != 0.0);
    Some(PairedIntervals {
        difference: Interval {
            lo: Some(quantile_sorted(&diffs, tail)),
            hi: Some(quantile_sorted(&diffs, 1.0 - tail)),
            level,
        },
        relative: any_baseline.then(|| Interval {
            lo: quantile_with_undefined(&rels, undefined, tail, true),
            hi: quantile_with_undefined(&rels, undefined, 1.0 - tail, false),
            level,
        }),
    })
}

/// Smallest number of pairs for a verdict at significance `alpha`: all differences of
/// one sign must reach p < alpha (exact two-sided p = 2 / 2ⁿ), and the resampled median
/// needs at least 5 values.
pub fn min_pairs_for_verdict(alpha: f64) -> usize {
    const BOOTSTRAP_MIN: usize = 5;
    let mut n = 1usize;
    while 2.0 / 2f64.powi(n as i32) >= alpha && n < 64 {
        n += 1;
    }
    n.max(BOOTSTRAP_MIN)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The exact p-value by enumerating every sign assignment.
    fn brute_p(d: &[f64]) -> f64 {
        let nz: Vec<f64> = d.iter().copied().filter(|x| *x != 0.0).collect();
        let t = signed_rank(&nz);
        let n = nz.len();
        let mut abs: Vec<f64> = nz.iter().map(|x| x.abs()).collect();
        abs.sort_by(f64::total_cmp);
        let rank = |v: f64| {
            let below = abs.iter().filter(|&&a| a < v).count() as f64;
            let eq = abs.iter().filter(|&&a| a == v).count() as f64;
            below + (eq + 1.0) / 2.0
        };
        let ranks: Vec<f64> = nz.iter().map(|x| rank(x.abs())).collect();
        let mean = (n * (n + 1)) as f64 / 4.0;
        let dev = (t.w_plus - mean).abs();
        let mut hits = 0u64;
        for mask in 0u64..(1 << n) {
            let w: f64 = (0..n)
                .filter(|i| mask >> i & 1 == 1)
                .map(|i| ranks[i])
                .sum();
            if (w - mean).abs() >= dev - 1e-9 {
                hits += 1;
            }
        }
        hits as f64 / (1u64 << n) as f64
    }

    #[test]
    fn exact_p_matches_enumeration_with_and_without_ties() {
        for d in [
            vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
            vec![-1.0, 2.0, -3.0, 4.0, 5.0, 6.0, 7.0],
            vec![1.0, -1.0, 2.0, 2.0, -2.0, 3.0, 0.0, 5.0],
            vec![0.5, 0.5, 0.5, -0.5, 1.5, 2.5, -3.5, 4.5, 4.5, 6.0, 7.0],
        ] {
            let t = signed_rank(&d);
            assert!(t.exact);
            assert!(
                (t.p_value - brute_p(&d)).abs() < 1e-12,
                "{d:?}: {}",
                t.p_value
            );
        }
    }

    #[test]
    fn signs_all_one_way_reach_the_smallest_p() {
        let d: Vec<f64> = (1..=6).map(f64::from).collect();
        let t = signed_rank(&d);
        assert_eq!((t.w_plus, t.n), (21.0, 6));
        assert!((t.p_value - 2.0 / 64.0).abs() < 1e-12);
        let neg: Vec<f64> = d.iter().map(|x| -x).collect();
        assert!((signed_rank(&neg).p_value - t.p_value).abs() < 1e-12);
        assert_eq!(signed_rank(&[0.0, 0.0]).p_value, 1.0);
        assert_eq!(min_pairs_for_verdict(0.05), 6);
        assert_eq!(min_pairs_for_verdict(0.01), 8);
    }

    #[test]
    fn normal_approximation_is_close_to_exact_at_the_boundary() {
        // The same 20 differences through the exact distribution and the approximation.
        let d: Vec<f64> = (1..=20)
            .map(|i| if i % 3 == 0 { -(i as f64) } else { i as f64 })
            .collect();
        let t = signed_rank(&d);
        assert!(t.exact);
        let approx = normal_p(t.w_plus, t.n, 0.0);
        assert!(
            (t.p_value - approx).abs() < 0.01,
            "{} vs {approx}",
            t.p_value
        );
        // Past 20 the approximation is used; symmetric differences show no shift.
        let sym: Vec<f64> = (1..=40)
            .map(|i| if i % 2 == 0 { i as f64 } else { -(i as f64) })
            .collect();
        let t = signed_rank(&sym);
        assert!(!t.exact && t.p_value > 0.5, "{t:?}");
    }

    #[test]
    fn paired_relative_interval_never_falls_below_minus_100_percent() {
        // A span the candidate removes (drop, async): baseline reps vary widely, the
        // candidate's are 0. Dividing the difference interval by the full-sample median
        // would reach below -100%; per-resample ratios cannot.
        let pairs: Vec<(f64, f64)> = [3.1, 9.0, 2.5, 7.7, 3.3, 12.0, 2.9, 8.8, 3.0, 11.0]
            .iter()
            .map(|&b| (b, 0.0))
            .collect();
        let i = bootstrap_pairs(&pairs, 4000, 0.95, 3).unwrap();
        let rel = i.relative.unwrap();
        assert_eq!((rel.lo, rel.hi), (Some(-1.0), Some(-1.0)));
        let naive_lo = i.difference.lo.unwrap() / 5.5;
        assert!(naive_lo < -1.0, "{naive_lo}");
        // A candidate that keeps a little of it: the bound stays above -100%.
        let pairs: Vec<(f64, f64)> = pairs.iter().map(|p| (p.0, 0.05 * p.0 + 0.1)).collect();
        let rel = bootstrap_pairs(&pairs, 4000, 0.95, 3)
            .unwrap()
            .relative
            .unwrap();
        assert!(rel.lo.unwrap() >= -1.0 && rel.hi.unwrap() < -0.8, "{rel:?}");
        // A zero baseline has no relative change; some zero baselines leave a bound
        // undefined.
        let z = bootstrap_pairs(&[(0.0, 1.0), (0.0, 2.0), (0.0, 3.0)], 500, 0.95, 1).unwrap();
        assert!(z.relative.is_none() && z.difference.lo.unwrap() > 0.0);
        assert_eq!(bootstrap_pairs(&[(1.0, 2.0)], 500, 0.95, 1), None);
    }

    #[test]
    fn paired_difference_interval_agrees_with_the_exact_median_resampler() {
        // The same differences through whole-pair resampling and the exact distribution
        // of the resampled median: the percentile bounds agree to a few resamples' noise.
        let pairs: Vec<(f64, f64)> = (0..15)
            .map(|i| {
                (
                    100.0 + i as f64,
                    100.0 + i as f64 + ((i * 7) % 11) as f64 - 3.0,
                )
            })
            .collect();
        let a = bootstrap_pairs(&pairs, 20_000, 0.95, 11)
            .unwrap()
            .difference;
        let d = Sample::new(pairs.iter().map(|(x, y)| y - x).collect()).unwrap();
        let b = bootstrap_median(&d, 20_000, 0.95, 11).unwrap();
        for (x, y) in [(a.lo, b.lo), (a.hi, b.hi)] {
            assert!((x.unwrap() - y.unwrap()).abs() <= 1.0, "{a:?} vs {b:?}");
        }
    }

    #[test]
    fn bootstrap_median_interval_covers_the_median_and_is_seeded() {
        let x = Sample::new((0..101).map(|i| (i * 37 % 101) as f64).collect()).unwrap();
        let i = bootstrap_median(&x, 2000, 0.95, 7).unwrap();
        let (lo, hi) = (i.lo.unwrap(), i.hi.unwrap());
        assert!(lo < 50.0 && 50.0 < hi && hi - lo < 30.0, "[{lo}, {hi}]");
        assert_eq!(Some(i), bootstrap_median(&x, 2000, 0.95, 7));
        assert_eq!(bootstrap_median(&x, 0, 0.95, 7), None);
    }
}
