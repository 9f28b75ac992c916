//! False-discovery control over one diff's family of comparisons.
//!
//! Method: Benjamini & Hochberg, "Controlling the false discovery rate: a practical and
//! powerful approach to multiple testing", JRSS B 57 (1995), step-up procedure, with
//! adjusted p-values ("q-values" in the diff's output) as in Wright, "Adjusted p-values
//! for simultaneous inference", Biometrics 48 (1992):
//! q(i) = min over j ≥ i of m·p(j)/j, for the p-values sorted ascending.
//!
//! Why BH and not Benjamini–Yekutieli: BH controls the FDR when the test statistics are
//! positively regression dependent (Benjamini & Yekutieli, Ann. Stat. 29 (2001),
//! Theorem 1.2). A diff's comparisons are mostly positively dependent: a span's total,
//! its self time, its task-clock and its parent's time move together, and a slower
//! machine moves every time up at once. BY holds under any dependence but divides α by
//! Σ 1/i (5.4 for 130 comparisons): at 10 pairs the smallest signed-rank p-value is
//! 2/2¹⁰ = 0.002, and BY's first threshold, 0.05 / (130 · 5.4) = 7·10⁻⁵, could never be
//! reached, so a diff could never name a phase. With discrete rank-test p-values BH is
//! conservative besides. The end-to-end time is not in the family: it is the primary
//! comparison and keeps its own α.

/// Benjamini–Hochberg adjusted p-values of `p`, in the order given; NaN is treated as 1.
/// Each is at most 1 and at least its own p-value.
pub fn bh_q_values(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let clean = |x: f64| if x.is_nan() { 1.0 } else { x.clamp(0.0, 1.0) };
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| clean(p[a]).total_cmp(&clean(p[b])));
    let mut q = vec![1.0; m];
    let mut running = 1.0f64;
    for (rank0, &i) in order.iter().enumerate().rev() {
        let v = clean(p[i]) * m as f64 / (rank0 + 1) as f64;
        running = running.min(v);
        q[i] = running.min(1.0);
    }
    q
}

/// How many of `p` the BH procedure at level `alpha` rejects: the largest k with
/// p(k) ≤ k·α/m. The same as the count of q-values ≤ α.
pub fn bh_rejections(p: &[f64], alpha: f64) -> usize {
    let mut s: Vec<f64> = p
        .iter()
        .map(|&x| if x.is_nan() { 1.0 } else { x })
        .collect();
    s.sort_by(f64::total_cmp);
    let m = s.len() as f64;
    s.iter()
        .enumerate()
        .filter(|(k, &x)| x <= (*k + 1) as f64 * alpha / m)
        .map(|(k, _)| k + 1)
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The definition, directly: q_i = min over j with p_j ≥ p_i of m·p_j / rank_j.
    fn reference(p: &[f64]) -> Vec<f64> {
        let m = p.len();
        let mut sorted: Vec<f64> = p.to_vec();
        sorted.sort_by(f64::total_cmp);
        p.iter()
            .map(|&pi| {
                sorted
                    .iter()
                    .enumerate()
                    .filter(|(_, &pj)| pj >= pi)
                    .map(|(j, &pj)| m as f64 * pj / (j + 1) as f64)
                    .fold(1.0f64, f64::min)
            })
            .collect()
    }

    #[test]
    fn worked_example() {
        // Benjamini & Hochberg (1995) §4: 15 p-values, 4 rejected at 0.05.
        let p = [
            0.0001, 0.0004, 0.0019, 0.0095, 0.0201, 0.0278, 0.0298, 0.0344, 0.0459, 0.3240, 0.4262,
            0.5719, 0.6528, 0.7590, 1.0,
        ];
        assert_eq!(bh_rejections(&p, 0.05), 4);
        let q = bh_q_values(&p);
        assert_eq!(q.iter().filter(|&&x| x <= 0.05).count(), 4);
        assert!((q[0] - 0.0015).abs() < 1e-12, "{}", q[0]);
        assert!((q[3] - 0.035625).abs() < 1e-12, "{}", q[3]);
        assert_eq!(bh_q_values(&[]), Vec::<f64>::new());
        assert_eq!(bh_q_values(&[f64::NAN]), vec![1.0]);
    }

    proptest! {
        #[test]
        fn q_values_match_the_definition(p in proptest::collection::vec(0.0f64..=1.0, 1..60)) {
            let q = bh_q_values(&p);
            let r = reference(&p);
            for ((a, b), pi) in q.iter().zip(&r).zip(&p) {
                prop_assert!((a - b).abs() < 1e-12, "{} vs {}", a, b);
                prop_assert!(*a >= *pi - 1e-15 && *a <= 1.0);
            }
            for alpha in [0.01, 0.05, 0.2] {
                prop_assert_eq!(bh_rejections(&p, alpha), q.iter().filter(|&&x| x <= alpha).count());
            }
        }
    }
}
