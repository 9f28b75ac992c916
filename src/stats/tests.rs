use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;

fn s(v: &[f64]) -> Sample {
    Sample::new(v.to_vec()).unwrap()
}

#[test]
fn free_median_and_quantile_skip_non_finite_values() {
    assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
    assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
    assert_eq!(median(&[7.0]), Some(7.0));
    assert_eq!(median(&[f64::NAN, 5.0, 1.0]), Some(3.0));
    assert_eq!(median(&[]), None);
    assert_eq!(quantile(&[1.0, 2.0, 3.0, 4.0, 5.0], 0.25), Some(2.0));
    assert_eq!(quantile(&[1.0, 2.0], 0.75), Some(1.75));
    assert_eq!(quantile(&[f64::NAN], 0.5), None);
}

#[test]
fn sample_refuses_too_few_and_non_finite_values() {
    assert_eq!(Sample::new(vec![]), Err(SampleError::TooFew(0)));
    assert_eq!(Sample::new(vec![1.0]), Err(SampleError::TooFew(1)));
    assert!(matches!(
        Sample::new(vec![1.0, f64::NAN]),
        Err(SampleError::NotFinite { index: 1, .. })
    ));
    assert!(matches!(
        Sample::new(vec![f64::INFINITY, 1.0]),
        Err(SampleError::NotFinite { index: 0, .. })
    ));
    assert!(Sample::new(vec![2.0, 1.0]).is_ok());
}

#[test]
fn median_mad_and_quantiles_of_known_samples() {
    let a = s(&[5.0, 1.0, 3.0]);
    assert_eq!(a.sorted(), &[1.0, 3.0, 5.0]);
    assert_eq!(a.median(), 3.0);
    assert_eq!(a.mad(), 2.0);
    let b = s(&[1.0, 2.0, 3.0, 4.0, 100.0, 7.0]);
    assert_eq!(b.median(), 3.5);
    // |x - 3.5| = 2.5 1.5 0.5 0.5 96.5 3.5 → sorted 0.5 0.5 1.5 2.5 3.5 96.5
    assert_eq!(b.mad(), 2.0);
    assert_eq!(b.quantile(0.0), 1.0);
    assert_eq!(b.quantile(1.0), 100.0);
    assert_eq!(b.quantile(0.5), 3.5);
}

/// Exhaustive bootstrap: every one of the n^n resamples of 0..n, as a distribution of
/// resample medians (values are distinct powers of two, so a median identifies the pair
/// of order statistics it came from).
fn exhaustive_median_distribution(x: &[f64]) -> std::collections::BTreeMap<u64, f64> {
    let n = x.len();
    let total = n.pow(n as u32);
    let mut out = std::collections::BTreeMap::new();
    let mut idx = vec![0usize; n];
    for code in 0..total {
        let mut c = code;
        for slot in idx.iter_mut() {
            *slot = c % n;
            c /= n;
        }
        let mut v: Vec<f64> = idx.iter().map(|&i| x[i]).collect();
        v.sort_unstable_by(f64::total_cmp);
        *out.entry(median_sorted(&v).to_bits()).or_insert(0.0) += 1.0 / total as f64;
    }
    out
}

#[test]
fn resampled_median_follows_the_exact_bootstrap_distribution() {
    for n in [2usize, 3, 4, 5, 6] {
        let x: Vec<f64> = (0..n).map(|i| (1u64 << i) as f64).collect();
        let exact = exhaustive_median_distribution(&x);
        let r = MedianResampler::new(&x);
        let mut rng = Xoshiro::seed(7);
        let draws = 200_000;
        let mut seen = std::collections::BTreeMap::new();
        for _ in 0..draws {
            *seen.entry(r.draw(&mut rng).to_bits()).or_insert(0.0) += 1.0 / draws as f64;
        }
        for (k, p) in &exact {
            let q = seen.get(k).copied().unwrap_or(0.0);
            assert!(
                (p - q).abs() < 0.005,
                "n={n} median {}: exact {p:.4}, drawn {q:.4}",
                f64::from_bits(*k)
            );
        }
        assert!(
            seen.keys().all(|k| exact.contains_key(k)),
            "n={n}: drew a median no resample has"
        );
    }
}

#[test]
fn resampled_median_matches_naive_resampling_for_a_large_sample() {
    // n = 101 and 100: compare quantiles of the exact-distribution draws with naive
    // resample-and-take-the-median.
    for n in [101usize, 100] {
        let mut rng = StdRng::seed_from_u64(3);
        let x = s(&(0..n).map(|_| rng.gen::<f64>() * 100.0).collect::<Vec<_>>());
        let r = MedianResampler::new(x.sorted());
        let mut xs = Xoshiro::seed(4);
        let fast: Vec<f64> = (0..20_000).map(|_| r.draw(&mut xs)).collect();
        let naive: Vec<f64> = (0..5_000)
            .map(|_| {
                let mut v: Vec<f64> = (0..n).map(|_| x.sorted()[rng.gen_range(0..n)]).collect();
                median_unsorted(&mut v)
            })
            .collect();
        let (f, nv) = (s(&fast), s(&naive));
        for q in [0.025, 0.25, 0.5, 0.75, 0.975] {
            let (a, b) = (f.quantile(q), nv.quantile(q));
            assert!(
                (a - b).abs() < 1.0,
                "n={n} q={q}: exact {a:.3} naive {b:.3}"
            );
        }
    }
}

#[test]
fn uniform_draws_are_uniform_and_seeded() {
    let mut a = Xoshiro::seed(1);
    let v: Vec<f64> = (0..100_000).map(|_| a.next_f64()).collect();
    assert!(v.iter().all(|x| (0.0..1.0).contains(x)));
    for k in 0..10 {
        let share = v.iter().filter(|&&x| (x * 10.0) as usize == k).count() as f64 / v.len() as f64;
        assert!((share - 0.1).abs() < 0.005, "decile {k}: {share}");
    }
    assert_eq!(Xoshiro::seed(1).next_u64(), Xoshiro::seed(1).next_u64());
    assert_ne!(Xoshiro::seed(1).next_u64(), Xoshiro::seed(2).next_u64());
}

#[test]
fn binomial_tail_matches_direct_summation() {
    let n = 40;
    let lf = ln_factorials(n);
    for m in [1usize, 5, 20, 21, 39, 40] {
        for p in [0.01, 0.3, 0.5, 0.77, 0.99] {
            let direct: f64 = (m..=n).map(|k| binomial_pmf(n, k, p, &lf)).sum();
            let tail = binomial_upper_tail(n, m, p, &lf);
            assert!(
                (direct - tail).abs() < 1e-12,
                "n={n} m={m} p={p}: {direct} vs {tail}"
            );
        }
    }
}

#[test]
fn mann_whitney_reproduces_a_textbook_exact_value() {
    // R: wilcox.test(x, y, alternative = "greater") gives W = 35, p = 0.1272 (exact).
    let x = s(&[0.80, 0.83, 1.89, 1.04, 1.45, 1.38, 1.91, 1.64, 0.73, 1.46]);
    let y = s(&[1.15, 0.88, 0.90, 0.74, 1.21]);
    let t = mann_whitney(&x, &y);
    assert_eq!(t.u, 35.0);
    assert!(t.exact);
    assert!((t.p_value - 2.0 * 0.1272).abs() < 5e-4, "p = {}", t.p_value);
    // Complete separation of 5 vs 5: p = 2 / C(10, 5).
    let t = mann_whitney(
        &s(&[1.0, 2.0, 3.0, 4.0, 5.0]),
        &s(&[6.0, 7.0, 8.0, 9.0, 10.0]),
    );
    assert_eq!(t.u, 0.0);
    assert!((t.p_value - 2.0 / 252.0).abs() < 1e-12);
}

/// Two-sided permutation p-value of U, enumerating every split (conditional on ties).
fn permutation_p(a: &[f64], b: &[f64]) -> f64 {
    let all: Vec<f64> = a.iter().chain(b).copied().collect();
    let n = all.len();
    let u_of = |first: &[f64], second: &[f64]| -> f64 {
        first
            .iter()
            .map(|x| {
                second
                    .iter()
                    .map(|y| {
                        if x > y {
                            1.0
                        } else if x == y {
                            0.5
                        } else {
                            0.0
                        }
                    })
                    .sum::<f64>()
            })
            .sum()
    };
    let mean = (a.len() * b.len()) as f64 / 2.0;
    let observed = (u_of(a, b) - mean).abs();
    let (mut hits, mut total) = (0u64, 0u64);
    for mask in 0u32..(1 << n) {
        if mask.count_ones() as usize != a.len() {
            continue;
        }
        let (f, s2): (Vec<_>, Vec<_>) = (0..n).partition(|&i| mask & (1 << i) != 0);
        let f: Vec<f64> = f.iter().map(|&i| all[i]).collect();
        let s2: Vec<f64> = s2.iter().map(|&i| all[i]).collect();
        total += 1;
        if (u_of(&f, &s2) - mean).abs() >= observed - 1e-9 {
            hits += 1;
        }
    }
    hits as f64 / total as f64
}

#[test]
fn exact_rank_test_equals_the_permutation_test_with_ties() {
    let cases: [(&[f64], &[f64]); 4] = [
        (
            &[1.0, 2.0, 2.0, 3.0, 3.0, 4.0, 5.0],
            &[3.0, 4.0, 4.0, 5.0, 6.0, 6.0, 7.0],
        ),
        (
            &[0.0, 0.0, 0.0, 1.0, 1.0, 2.0, 2.0, 2.0],
            &[0.0, 1.0, 1.0, 2.0, 2.0, 3.0, 3.0],
        ),
        (
            &[5.0, 5.0, 5.0, 6.0, 6.0, 6.0, 7.0],
            &[5.0, 5.0, 6.0, 6.0, 6.0, 7.0, 7.0],
        ),
        (
            &[1.5, 0.2, 3.3, 2.1, 9.0, 4.4],
            &[5.5, 6.1, 2.05, 7.7, 8.8, 10.0, 0.1],
        ),
    ];
    for (a, b) in cases {
        let t = mann_whitney(&s(a), &s(b));
        assert!(t.exact);
        let perm = permutation_p(a, b);
        assert!(
            (t.p_value - perm).abs() < 1e-9,
            "{a:?} vs {b:?}: {:.6} vs permutation {perm:.6}",
            t.p_value
        );
    }
    let same = s(&[3.0, 3.0, 3.0]);
    assert_eq!(mann_whitney(&same, &same).p_value, 1.0);
}

#[test]
fn normal_approximation_is_close_to_exact_at_the_exact_limit() {
    let mut rng = StdRng::seed_from_u64(11);
    let n = EXACT_MAX_N;
    for shift in [0.0, 0.1, 0.2, 0.3] {
        for _ in 0..20 {
            let a: Vec<f64> = (0..n).map(|_| rng.gen::<f64>()).collect();
            let b: Vec<f64> = (0..n).map(|_| rng.gen::<f64>() + shift).collect();
            let t = mann_whitney(&s(&a), &s(&b));
            let approx = normal_p(t.u, n, n, 0.0);
            assert!(
                (t.p_value - approx).abs() < 0.005,
                "U={}: exact {} normal {approx}",
                t.u,
                t.p_value
            );
        }
    }
    // Ties: a heavily tied pair of larger samples against its permutation-free formula.
    let a: Vec<f64> = (0..30).map(|i| (i % 4) as f64).collect();
    let b: Vec<f64> = (0..30).map(|i| (i % 5) as f64).collect();
    let t = mann_whitney(&s(&a), &s(&b));
    assert!(!t.exact && t.p_value > 0.05 && t.p_value < 1.0);
}

#[test]
fn erfc_matches_reference_values() {
    for (x, want) in [
        (0.0, 1.0),
        (0.5, 0.479_500_122),
        (1.0, 0.157_299_207),
        (2.0, 0.004_677_735),
        (-1.0, 1.842_700_793),
    ] {
        assert!(
            (erfc(x) - want).abs() < 1e-7 * want.max(1e-3) * 10.0,
            "erfc({x}) = {}",
            erfc(x)
        );
    }
}

#[test]
fn reps_needed_for_a_verdict() {
    assert_eq!(min_reps_for_verdict(0.05), 5);
    assert_eq!(min_reps_for_verdict(0.01), 5);
    // 2/C(12,6) = 0.0022, 2/C(14,7) = 0.00058
    assert_eq!(min_reps_for_verdict(0.001), 7);
}

#[test]
fn bootstrap_is_reproducible_and_undefined_for_a_zero_baseline() {
    let a = s(&[10.0, 11.0, 12.0, 10.5, 11.5]);
    let b = s(&[12.0, 12.5, 13.0, 12.2, 12.8]);
    let i1 = bootstrap_relative_change(&a, &b, 2000, 0.95, 42).unwrap();
    let i2 = bootstrap_relative_change(&a, &b, 2000, 0.95, 42).unwrap();
    assert_eq!(i1, i2);
    let (lo, hi) = (i1.lo.unwrap(), i1.hi.unwrap());
    assert!(lo > 0.0 && lo <= hi);
    assert!(bootstrap_relative_change(&s(&[0.0, 0.0, 1.0]), &b, 100, 0.95, 1).is_none());
}

#[test]
fn difference_interval_is_in_the_samples_unit_and_defined_at_zero() {
    let a = s(&[10.0, 11.0, 12.0, 10.5, 11.5]);
    let b = s(&[12.0, 12.5, 13.0, 12.2, 12.8]);
    let d = bootstrap_difference(&a, &b, 2000, 0.95, 42).unwrap();
    let (lo, hi) = (d.lo.unwrap(), d.hi.unwrap());
    // Medians 11 and 12.5: the interval holds the point difference, above 0.
    assert!(0.0 < lo && lo <= 1.5 && 1.5 <= hi, "[{lo}, {hi}]");
    // Same draws as the relative interval: the same resamples, a different statistic.
    let r = bootstrap_relative_change(&a, &b, 2000, 0.95, 42).unwrap();
    assert!(r.lo.unwrap() > 0.0);
    // A zero baseline has a difference, if not a relative change.
    let z = bootstrap_difference(&s(&[0.0, 0.0, 0.0]), &b, 200, 0.95, 1).unwrap();
    assert!(z.is_defined() && z.lo.unwrap() >= 12.0);
    assert!(bootstrap_difference(&a, &b, 0, 0.95, 1).is_none());
}

fn values() -> impl Strategy<Value = Vec<f64>> {
    prop::collection::vec(1.0f64..1e6, 2..40)
}

proptest! {
    #[test]
    fn free_median_agrees_with_the_sample_median(v in prop::collection::vec(-1e12f64..1e12, 2..40)) {
        prop_assert_eq!(median(&v), Some(s(&v).median()));
        prop_assert_eq!(quantile(&v, 0.9), Some(s(&v).quantile(0.9)));
    }

    #[test]
    fn median_and_mad_are_bounded(v in values()) {
        let x = Sample::new(v).unwrap();
        let (lo, hi) = (x.sorted()[0], x.sorted()[x.len() - 1]);
        prop_assert!(lo <= x.median() && x.median() <= hi);
        prop_assert!(x.mad() >= 0.0 && x.mad() <= hi - lo);
    }

    #[test]
    fn interval_is_ordered_and_scale_free(a in values(), b in values(), k in 0.001f64..1000.0, seed in any::<u64>()) {
        let (sa, sb) = (Sample::new(a.clone()).unwrap(), Sample::new(b.clone()).unwrap());
        let i = bootstrap_relative_change(&sa, &sb, 500, 0.95, seed).unwrap();
        // Positive values: every resample's relative change is defined.
        let (ilo, ihi) = (i.lo.unwrap(), i.hi.unwrap());
        prop_assert!(ilo <= ihi);
        // Same seed, both sides rescaled: the same resamples, the same relative change.
        let scale = |v: &[f64]| Sample::new(v.iter().map(|x| x * k).collect()).unwrap();
        let j = bootstrap_relative_change(&scale(&a), &scale(&b), 500, 0.95, seed).unwrap();
        prop_assert!((ilo - j.lo.unwrap()).abs() < 1e-9 * (1.0 + ilo.abs()));
        prop_assert!((ihi - j.hi.unwrap()).abs() < 1e-9 * (1.0 + ihi.abs()));
    }

    #[test]
    fn rank_test_is_symmetric(a in values(), b in values()) {
        let (sa, sb) = (Sample::new(a).unwrap(), Sample::new(b).unwrap());
        let (ab, ba) = (mann_whitney(&sa, &sb), mann_whitney(&sb, &sa));
        prop_assert!((ab.p_value - ba.p_value).abs() < 1e-12);
        prop_assert!(ab.p_value > 0.0 && ab.p_value <= 1.0);
        prop_assert!((ab.u + ba.u - (sa.len() * sb.len()) as f64).abs() < 1e-9);
    }
}

#[test]
fn undefined_resamples_push_each_bound_outwards() {
    let d = [1.0, 2.0, 3.0, 4.0];
    // Five values, one undefined: below the rest for a lower bound, above for an upper.
    assert_eq!(quantile_with_undefined(&d, 1, 0.0, true), None);
    assert_eq!(quantile_with_undefined(&d, 1, 0.0, false), Some(1.0));
    assert_eq!(quantile_with_undefined(&d, 1, 1.0, false), None);
    assert_eq!(quantile_with_undefined(&d, 1, 1.0, true), Some(4.0));
    assert_eq!(quantile_with_undefined(&d, 1, 0.5, true), Some(2.0));
    assert_eq!(quantile_with_undefined(&d, 1, 0.5, false), Some(3.0));
    // Interpolating towards an undefined value is undefined too.
    assert_eq!(quantile_with_undefined(&d, 1, 0.9, false), None);
    let q = quantile_with_undefined(&d, 0, 0.9, false).unwrap();
    assert!((q - 3.7).abs() < 1e-12, "{q}");
    // None undefined: the ordinary quantile.
    assert_eq!(
        quantile_with_undefined(&d, 0, 0.25, true),
        Some(quantile_sorted(&d, 0.25))
    );
}

/// Reference values from scipy.stats 1.17 (`t.sf`, `t.ppf`, `ttest_ind(equal_var=False)`,
/// `ttest_1samp`, their `confidence_interval`).
#[test]
fn student_t_matches_scipy() {
    let close = |a: f64, b: f64, tol: f64| (a - b).abs() <= tol * b.abs().max(1e-300);
    for (t, df, sf) in [
        (2.0, 4.0, 0.05805826175840778),
        (7.9, 4.0, 0.0006943669492187317),
        (0.3, 1.0, 0.4072264209222577),
        (-1.5, 3.0, 0.8847080673775886),
        (5.0, 8.3, 0.00047143863318756523),
        (12.0, 2.0, 0.00343646683857923),
        (1.96, 1000.0, 0.025136592477874368),
    ] {
        assert!(
            close(student_t_sf(t, df), sf, 1e-10),
            "sf({t}, {df}) = {} vs {sf}",
            student_t_sf(t, df)
        );
    }
    for (p, df, q) in [
        (0.975, 4.0, 2.7764451051977934),
        (0.975, 1.0, 12.706204736174694),
        (0.99983, 4.0, 11.380476287613075),
        (0.995, 7.5, 3.421422688124044),
        (0.9, 30.0, 1.3104150253913955),
        (0.999999, 3.0, 103.29946777942898),
        (0.6, 2.0, 0.2886751345948128),
    ] {
        let got = student_t_quantile(p, df);
        assert!(close(got, q, 1e-9), "ppf({p}, {df}) = {got} vs {q}");
        assert!(close(student_t_quantile(1.0 - p, df), -q, 1e-9));
    }
    let a = [1.2, 1.5, 1.1, 1.9, 1.4];
    let b = [2.1, 2.5, 1.8, 2.9, 2.2, 2.4];
    let w = welch_t(&a, &b).unwrap();
    assert!(close(w.estimate / w.se, 4.323552076415723, 1e-12));
    assert!(close(w.df, 8.998411653717689, 1e-12));
    assert!(close(w.p_value, 0.0019239463359987934, 1e-9));
    let (lo, hi) = w.interval(0.95);
    assert!(close(lo, 0.4275025473703098, 1e-9) && close(hi, 1.365830785963024, 1e-9));
    let d = [0.1, -0.05, 0.2, 0.15, 0.12];
    let o = one_sample_t(&d).unwrap();
    assert!(close(o.estimate / o.se, 2.4747879326193347, 1e-12));
    assert!(close(o.p_value, 0.06859341870691231, 1e-9));
    let (lo, hi) = o.interval(0.9);
    assert!(close(lo, 0.014411691096574114, 1e-9) && close(hi, 0.19358830890342585, 1e-9));
    // No spread: certain, or nothing to test.
    assert_eq!(one_sample_t(&[0.5, 0.5]).unwrap().p_value, 0.0);
    assert_eq!(welch_t(&[1.0, 1.0], &[1.0, 1.0]).unwrap().p_value, 1.0);
    assert!(welch_t(&[1.0], &[1.0, 2.0]).is_none());
}

#[test]
fn pooled_t_matches_scipy_and_equals_welch_statistic_at_equal_sizes() {
    let close = |a: f64, b: f64, tol: f64| (a - b).abs() <= tol * b.abs().max(1e-300);
    // scipy.stats.ttest_ind(b, a, equal_var=True)
    let a = [1.0, 2.5, 3.1, 4.2, 2.2];
    let b = [3.3, 4.1, 5.9, 4.4, 6.0];
    let p = pooled_t(&a, &b).unwrap();
    assert!(close(p.estimate / p.se, 2.876177818552016, 1e-12));
    assert_eq!(p.df, 8.0);
    assert!(close(p.p_value, 0.02063225456625924, 1e-9));
    // At equal sizes the statistic is Welch's; only the degrees of freedom differ.
    let w = welch_t(&a, &b).unwrap();
    assert!(close(w.estimate / w.se, p.estimate / p.se, 1e-12));
    assert!(w.df < p.df && w.p_value > p.p_value);
    let (a, b) = ([10.0, 11.0, 12.5], [12.0, 13.0, 14.5, 13.1, 12.2]);
    let p = pooled_t(&a, &b).unwrap();
    assert!(close(p.estimate / p.se, 2.2639975126838383, 1e-12));
    assert!(close(p.p_value, 0.06419468505495475, 1e-9));
    assert!(pooled_t(&[1.0], &[1.0, 2.0]).is_none());
    assert!(pooled_t(&[1.0, f64::NAN], &[1.0, 2.0]).is_none());
}

/// The confidence sequence holds its level whenever the run stops: over 300 looks at
/// normal values of mean 0, the share of runs whose interval ever excludes 0 stays
/// below alpha (the fixed-n t interval looked at after every value exceeds it).
#[test]
fn confidence_sequence_covers_under_continuous_monitoring() {
    let mut rng = StdRng::seed_from_u64(7);
    let normal = |rng: &mut StdRng| {
        // Box–Muller.
        let (u, v): (f64, f64) = (rng.gen::<f64>().max(1e-300), rng.gen());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    };
    let (runs, looks) = (400, 300);
    let (mut seq_miss, mut t_miss) = (0, 0);
    for _ in 0..runs {
        let mut x = Vec::with_capacity(looks);
        let (mut seq_out, mut t_out) = (false, false);
        for _ in 0..looks {
            x.push(normal(&mut rng));
            if x.len() < 2 {
                continue;
            }
            let (lo, hi) = mean_confidence_sequence(&x, 0.05).unwrap();
            seq_out |= lo > 0.0 || hi < 0.0;
            let (lo, hi) = one_sample_t(&x).unwrap().interval(0.95);
            t_out |= lo > 0.0 || hi < 0.0;
        }
        seq_miss += seq_out as usize;
        t_miss += t_out as usize;
    }
    assert!(
        seq_miss * 20 <= runs,
        "sequence missed in {seq_miss} of {runs}"
    );
    assert!(
        t_miss * 20 > runs * 4,
        "fixed-n t missed in only {t_miss} of {runs}"
    );
    // Two values bound nothing yet at 5 %; more do, and the bound tightens.
    let w = |n: usize| {
        let x: Vec<f64> = (0..n).map(|i| (i % 3) as f64).collect();
        let (lo, hi) = mean_confidence_sequence(&x, 0.05).unwrap();
        hi - lo
    };
    assert!(w(2).is_infinite() && w(6).is_finite() && w(30) < w(6));
}
