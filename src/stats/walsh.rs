//! The signed-rank test's own estimate and interval: the Hodges–Lehmann estimate of the
//! centre of symmetric differences (the median of their Walsh averages, (dᵢ + dⱼ)/2 for
//! i ≤ j) and the interval of every shift θ that the two-sided signed-rank test of
//! d − θ does not reject (Hodges & Lehmann, Ann. Math. Stat. 34 (1963); Lehmann,
//! *Nonparametrics*, 1975, §4.3). The number of Walsh averages above θ is the signed-rank
//! statistic W⁺ of d − θ, so the interval at level 1 − a is
//! [A₍C₎, A₍M+1−C₎] of the M = n(n+1)/2 sorted averages, where C − 1 is the largest w with
//! P(W⁺ ≤ w) ≤ a/2 under the null (no ties). An outlier moves at most the averages it is
//! in, and those only to one end: the interval stays where the bulk of the differences
//! is, where a t interval widens with the outlier's square.

use super::{signed_rank, student_t_quantile};
use serde::{Deserialize, Serialize};

/// Most differences whose Walsh averages are kept (2,001,000 averages).
pub const WALSH_MAX_N: usize = 2_000;

/// Up to this many differences, the null distribution of W⁺ is counted exactly; above,
/// its normal approximation with continuity correction.
const EXACT_MAX_N: usize = 200;

/// The signed-rank analysis of one set of differences: its p-value, its estimate and
/// the sorted Walsh averages that its interval at any level is read from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SignedRankShift {
    /// Differences (zeros included: they are differences of 0, not missing).
    pub n: usize,
    /// Two-sided p-value of the signed-rank test of the differences against 0
    /// ([`signed_rank`]: exact up to 20 non-zero differences, average ranks for ties).
    pub p_value: f64,
    /// Hodges–Lehmann estimate: the median of the Walsh averages.
    pub estimate: f64,
    /// The Walsh averages, sorted; not written out (an interval is re-derived only from
    /// differences in memory).
    #[serde(skip)]
    walsh: Vec<f64>,
}

impl SignedRankShift {
    /// The analysis of `d`; `None` with fewer than 2 finite differences or more than
    /// [`WALSH_MAX_N`].
    pub fn of(d: &[f64]) -> Option<SignedRankShift> {
        let d: Vec<f64> = d.iter().copied().filter(|x| x.is_finite()).collect();
        let n = d.len();
        if !(2..=WALSH_MAX_N).contains(&n) {
            return None;
        }
        let mut walsh = Vec::with_capacity(n * (n + 1) / 2);
        for i in 0..n {
            for j in i..n {
                walsh.push((d[i] + d[j]) / 2.0);
            }
        }
        walsh.sort_unstable_by(f64::total_cmp);
        let m = walsh.len();
        let estimate = if m % 2 == 1 {
            walsh[m / 2]
        } else {
            (walsh[m / 2 - 1] + walsh[m / 2]) / 2.0
        };
        Some(SignedRankShift {
            n,
            p_value: signed_rank(&d).p_value,
            estimate,
            walsh,
        })
    }

    /// The interval of the shift at `level`; `None` when the averages are not at hand
    /// (read back from a file) or when `n` differences are too few for any bound at
    /// that level (all of one sign is not rare enough: 2⁻ⁿ > (1 − level)/2).
    pub fn interval(&self, level: f64) -> Option<(f64, f64)> {
        let m = self.walsh.len();
        if m == 0 {
            return None;
        }
        let w = lower_critical(self.n, (1.0 - level) / 2.0)?;
        Some((self.walsh[w], self.walsh[m - 1 - w]))
    }
}

/// The largest w with P(W⁺ ≤ w) ≤ `tail` for n differences under the null, `None` when
/// even P(W⁺ = 0) = 2⁻ⁿ exceeds it.
pub fn lower_critical(n: usize, tail: f64) -> Option<usize> {
    if n == 0 || tail <= 0.0 {
        return None;
    }
    if n > EXACT_MAX_N {
        let nf = n as f64;
        let mean = nf * (nf + 1.0) / 4.0;
        let sd = (nf * (nf + 1.0) * (2.0 * nf + 1.0) / 24.0).sqrt();
        // Normal quantile as Student's at very many degrees of freedom.
        let z = student_t_quantile(tail, 1e9);
        let w = (mean - 0.5 + z * sd).floor();
        return (w >= 0.0).then_some(w as usize);
    }
    // Counts of each sum of a subset of the ranks 1..=n, up to the middle (the lower
    // tail never reaches past it), as fractions of the 2ⁿ subsets.
    let half = n * (n + 1) / 4;
    let mut dist = vec![0.0f64; half + 1];
    dist[0] = 1.0;
    for r in 1..=n {
        for s in (r..=half).rev() {
            dist[s] += dist[s - r];
        }
    }
    let total = 2f64.powi(n as i32);
    let mut cdf = 0.0;
    let mut best = None;
    for (w, c) in dist.iter().enumerate() {
        cdf += c / total;
        if cdf > tail * (1.0 + 1e-12) {
            break;
        }
        best = Some(w);
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Xoshiro;

    /// Critical values of tables of the signed-rank test (two-sided 0.05: reject when
    /// min(W⁺, W⁻) ≤ w): n = 6 → 0, 8 → 3, 10 → 8, 16 → 29, 20 → 52, 25 → 89.
    #[test]
    fn critical_values_match_the_tables() {
        for (n, w) in [(6, 0), (8, 3), (10, 8), (16, 29), (20, 52), (25, 89)] {
            assert_eq!(lower_critical(n, 0.025), Some(w), "n={n}");
        }
        assert_eq!(lower_critical(5, 0.025), None);
        // The normal approximation joins the exact count smoothly.
        let exact = lower_critical(200, 0.025).unwrap() as f64;
        let normal = {
            let nf = 200.0f64;
            let z = student_t_quantile(0.025, 1e9);
            (nf * (nf + 1.0) / 4.0 - 0.5 + z * (nf * (nf + 1.0) * (2.0 * nf + 1.0) / 24.0).sqrt())
                .floor()
        };
        assert!((exact - normal).abs() <= 2.0, "{exact} {normal}");
    }

    /// The interval is the set of shifts the signed-rank test does not reject: just
    /// inside either end the test of d − θ keeps p ≥ 1 − level, just outside p < 1 − level.
    #[test]
    fn interval_inverts_the_signed_rank_test() {
        let mut rng = Xoshiro::seed(11);
        for n in [8usize, 9, 12, 16, 20] {
            for _ in 0..20 {
                let d: Vec<f64> = (0..n).map(|_| rng.next_f64() * 2.0 - 0.6).collect();
                let s = SignedRankShift::of(&d).unwrap();
                for level in [0.95, 0.983] {
                    let (lo, hi) = s.interval(level).unwrap();
                    let a = 1.0 - level;
                    let p = |theta: f64| {
                        let shifted: Vec<f64> = d.iter().map(|x| x - theta).collect();
                        signed_rank(&shifted).p_value
                    };
                    let eps = 1e-9;
                    assert!(p(lo + eps) >= a - 1e-12, "n={n} lo={lo} p={}", p(lo + eps));
                    assert!(p(hi - eps) >= a - 1e-12, "n={n} hi={hi}");
                    assert!(p(lo - eps) < a, "n={n} lo={lo} p={}", p(lo - eps));
                    assert!(p(hi + eps) < a, "n={n} hi={hi}");
                    assert!(lo <= s.estimate && s.estimate <= hi);
                }
            }
        }
    }

    /// One wild difference among 16 moves the t interval by its size and this interval
    /// hardly at all.
    #[test]
    fn an_outlier_does_not_widen_it() {
        let d: Vec<f64> = (0..16)
            .map(|i| 0.08 + 0.01 * ((i * 7 % 16) as f64 - 7.5) / 7.5)
            .collect();
        let clean = SignedRankShift::of(&d).unwrap().interval(0.95).unwrap();
        let mut wild = d.clone();
        wild[3] = 3.0;
        let with = SignedRankShift::of(&wild).unwrap().interval(0.95).unwrap();
        assert!(with.0 > 0.07 && with.1 < 0.095, "{clean:?} {with:?}");
        let t = crate::stats::one_sample_t(&wild).unwrap().interval(0.95);
        assert!(t.0 < 0.0, "{t:?}");
    }
}
