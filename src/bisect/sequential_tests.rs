use super::*;
use crate::stats::Xoshiro;

/// A standard normal draw (Box–Muller).
fn normal(r: &mut Xoshiro) -> f64 {
    let u = r.next_f64().max(1e-300);
    let v = r.next_f64();
    (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
}

/// Iterations of (good, step, bad) log values: the ends `gap` apart (log units), the
/// commit at `place` (0 good, 1 bad), every rep spread by `sd`.
fn iterations(r: &mut Xoshiro, n: u32, gap: f64, place: f64, sd: f64) -> [Vec<(u32, f64)>; 3] {
    let mut v: [Vec<(u32, f64)>; 3] = Default::default();
    for it in 0..n {
        for (k, at) in [0.0, place, 1.0].into_iter().enumerate() {
            v[k].push((it, 10.0 + gap * at + sd * normal(r)));
        }
    }
    v
}

/// The first iteration at which the commit is labelled, and its label.
fn first_label(v: &[Vec<(u32, f64)>; 3]) -> Option<(usize, Nearer)> {
    (2..=v[0].len()).find_map(|n| {
        let p = Position::of(&v[0][..n], &v[1][..n], &v[2][..n])?;
        Some((n, p.label()?))
    })
}

/// The same against the good end alone, the ends `gap` apart as measured before.
fn first_label_against_good(v: &[Vec<(u32, f64)>; 3], gap: f64) -> Option<(usize, Nearer)> {
    (2..=v[0].len()).find_map(|n| {
        let p = Position::against_good(&v[0][..n], &v[1][..n], gap / 2.0)?;
        Some((n, p.label()?))
    })
}

#[test]
fn no_label_before_the_sequence_bounds_a_mean() {
    let n = first_decidable(ALPHA);
    assert_eq!(n, 5);
    assert!(stats::confidence_sequence_of(0.0, 1.0, n - 1, ALPHA)
        .1
        .is_infinite());
    // Identical values a long way apart are still not labelled before then.
    let v = [
        (0..4).map(|i| (i, 1.0)).collect::<Vec<_>>(),
        (0..4).map(|i| (i, 9.0)).collect(),
        (0..4).map(|i| (i, 9.0)).collect(),
    ];
    assert_eq!(first_label(&v), None);
}

#[test]
fn a_200x_slowdown_is_labelled_at_the_first_iteration_that_can_be() {
    let gap = 200f64.ln();
    let mut r = Xoshiro::seed(7);
    for sd in [0.16, 0.5] {
        for _ in 0..50 {
            // At the bad end, and at the good end.
            for (place, want) in [(1.0, Nearer::Bad), (0.0, Nearer::Good)] {
                let v = iterations(&mut r, 20, gap, place, sd);
                let (n, label) = first_label(&v).unwrap();
                assert_eq!(label, want);
                assert!(n <= first_decidable(ALPHA) + 1, "sd {sd}: {n}");
                // A pair's difference spreads by 2σ² against 1.5σ² for the midpoint of
                // three: at 50% per rep a rep or two more.
                let (n, label) = first_label_against_good(&v, gap).unwrap();
                assert_eq!(label, want);
                let slack = if sd < 0.2 { 1 } else { 3 };
                assert!(n <= first_decidable(ALPHA) + slack, "sd {sd}: {n}");
            }
        }
    }
}

#[test]
fn a_commit_halfway_is_rarely_labelled_however_often_it_is_looked_at() {
    // Looked at after every iteration up to 60: a label is an error here, and the
    // sequence keeps its chance under alpha (a fixed-n interval looked at 56 times
    // would cross far more often).
    let mut r = Xoshiro::seed(11);
    let trials = 400;
    let (mut labelled, mut against_good) = (0, 0);
    for _ in 0..trials {
        let v = iterations(&mut r, 60, 0.08, 0.5, 0.01);
        labelled += first_label(&v).is_some() as usize;
        against_good += first_label_against_good(&v, 0.08).is_some() as usize;
    }
    assert!(labelled < trials / 12, "{labelled} of {trials}");
    assert!(against_good < trials / 12, "{against_good} of {trials}");
}

#[test]
fn the_cap_says_whether_it_was_derived_or_capped() {
    // 200x at 16% per rep: a handful of reps, and the floor of a derived cap.
    let (cap, why) = cap_for(200.0, 0.16);
    assert!(
        why.starts_with("derived: the ends differ by ×200.000"),
        "{why}"
    );
    assert!(
        why.contains("told from their midpoint in about 5 reps"),
        "{why}"
    );
    assert_eq!(cap, MIN_CAP, "{why}");
    // 8% at 0.7%: the demo's.
    let (cap, why) = cap_for(1.08, 0.007);
    assert!(why.starts_with("derived"), "{why}");
    assert_eq!(cap, MIN_CAP, "{why}");
    // A 5% shift at 86% per rep cannot be told in a derived cap: it says so and how
    // many it would need.
    let (cap, why) = cap_for(1.05, 0.86);
    assert_eq!(cap, MAX_AUTO_REPS);
    assert!(why.starts_with("capped: "), "{why}");
    let needed: usize = why
        .split("needs about ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|s| s.replace(',', "").parse().ok())
        .unwrap_or_else(|| panic!("{why}"));
    assert!(needed > 1000, "{why}");
    // Past the floor, the cap grows as the ends come nearer: twice the reps needed.
    let (near, why) = cap_for(1.1, 0.06);
    assert!(near > MIN_CAP && near < MAX_AUTO_REPS, "{why}");
    assert!(why.ends_with("the cap is twice that"), "{why}");
    let (far, why) = cap_for(1.2, 0.06);
    assert!(far < near, "{far} {why}");
}

#[test]
fn pairs_stop_beyond_or_inside_the_floor_and_timeouts_scale_with_the_slowest_end() {
    use crate::analysis::Verdict;
    let verdict = |x: &[f64]| PairSequence::of(x, None).unwrap().verdict(0.025);
    assert_eq!(
        verdict(&[0.10, 0.11, 0.09, 0.10, 0.105]),
        Some(Verdict::Regressed)
    );
    assert_eq!(
        verdict(&[-0.10, -0.11, -0.09, -0.10, -0.105]),
        Some(Verdict::Improved)
    );
    assert_eq!(
        verdict(&[0.001, -0.001, 0.0, 0.0005, -0.0005]),
        Some(Verdict::Equivalent)
    );
    assert_eq!(verdict(&[0.03, -0.01, 0.05, 0.0, 0.02]), None);
    assert_eq!(verdict(&[0.1, 0.1, 0.1]), None);
    assert_eq!(rep_timeout_s(Duration::from_millis(3)), MIN_TIMEOUT_S);
    assert_eq!(rep_timeout_s(Duration::from_millis(3_210)), 33);
    assert_eq!(
        ratios(
            &[(0, 1.0), (1, 2.0), (2, 5.0)],
            &[(1, 2.5), (2, 5.0), (3, 9.0)]
        ),
        vec![0.5, 0.0]
    );
}

#[test]
fn a_stalled_rep_does_not_hold_a_step_open() {
    // The midpoint values of a step of the bisect demo on a loaded 2-core VM (work's
    // CPU time; the commit at the bad end, the ends 8% apart): three reps of the commit
    // stalled by 20-40%. Unclipped, 26 iterations did not decide it.
    let mid = [
        0.0374, 0.0273, 0.0323, 0.013, 0.0417, 0.0069, 0.385, 0.0489, 0.2192, 0.0077, 0.0337,
        -0.0317, -0.0788, -0.0604, 0.0187, 0.057, 0.2004, 0.0168, -0.0151, 0.0251, 0.0322, 0.0193,
        0.0421, 0.0499, 0.0655, 0.028,
    ];
    let unclipped = Sequence::of(&mid).unwrap();
    assert!(!unclipped.above(0.0));
    let ends = |v: f64| (0..mid.len() as u32).map(|i| (i, v)).collect::<Vec<_>>();
    let step: Vec<(u32, f64)> = mid
        .iter()
        .enumerate()
        .map(|(i, m)| (i as u32, *m))
        .collect();
    let half_gap = 0.079 / 2.0;
    let first = (2..=mid.len())
        .find(|&n| {
            let p = Position::of(&ends(-half_gap)[..n], &step[..n], &ends(half_gap)[..n]);
            p.and_then(|p| p.label()) == Some(Nearer::Bad)
        })
        .expect("decided");
    assert!(first <= 8, "{first}");
}

/// The first iteration (from 1) at which the commit is labelled against the good end
/// with the ends' spread `known` taken as known, and its label.
fn first_label_known(
    v: &[Vec<(u32, f64)>; 3],
    gap: f64,
    known: &KnownSpread,
) -> Option<(usize, Nearer)> {
    (1..=v[0].len()).find_map(|n| {
        let p = Position::against_good(&v[0][..n], &v[1][..n], gap / 2.0)?;
        Some((n, p.with_known(Some(known)).label()?))
    })
}

/// The ends' spread as their own run of `n` iterations would measure it: the standard
/// deviation of bad − good per iteration, each rep spread by `sd`.
fn ends_spread(r: &mut Xoshiro, n: u32, gap: f64, sd: f64) -> KnownSpread {
    let v = iterations(r, n, gap, 1.0, sd);
    let d: Vec<f64> = v[0].iter().zip(&v[2]).map(|(g, b)| b.1 - g.1).collect();
    let s = Sequence::of(&d).unwrap();
    KnownSpread::of(s.sd, n as usize).unwrap()
}

#[test]
fn the_known_spread_bounds_the_ends_spread_from_above() {
    assert!(KnownSpread::of(0.1, KNOWN_FROM - 1).is_none());
    assert!(KnownSpread::of(0.0, 10).is_none());
    // Wilson–Hilferty at 4 degrees of freedom: χ²₀.₀₂₅ ≈ 0.449 (exact 0.484).
    let k = KnownSpread::of(0.1, 5).unwrap();
    assert!((k.sd / 0.1 - (4.0f64 / 0.449).sqrt()).abs() < 0.02, "{k:?}");
    // Many iterations: the bound nears the spread.
    let k = KnownSpread::of(0.1, 200).unwrap();
    assert!(k.sd > 0.1 && k.sd < 0.112, "{k:?}");
    // Over many draws of 5 iterations the bound lies below the true spread in about
    // 2.5% of them.
    let mut r = Xoshiro::seed(5);
    let draws = 4000;
    let under = (0..draws)
        .filter(|_| {
            let x: Vec<f64> = (0..5).map(|_| normal(&mut r)).collect();
            KnownSpread::of(Sequence::of(&x).unwrap().sd, 5).unwrap().sd < 1.0
        })
        .count();
    assert!(under < draws * 3 / 100, "{under} of {draws}");
    // Half-widths of the known-spread sequence: 3.26 sd at one value, 2.18 at two.
    assert!((known_sd_half_width(1.0, 1, ALPHA) - 3.26).abs() < 0.01);
    assert!((known_sd_half_width(1.0, 2, ALPHA) - 2.18).abs() < 0.01);
}

#[test]
fn a_200x_slowdown_is_labelled_at_the_first_iteration_with_the_ends_spread_known() {
    let gap = 200f64.ln();
    let mut r = Xoshiro::seed(13);
    let mut at_first = 0;
    for _ in 0..50 {
        // The ends' own run: 5 iterations at 16% per rep.
        let known = ends_spread(&mut r, 5, gap, 0.16);
        for (place, want) in [(1.0, Nearer::Bad), (0.0, Nearer::Good)] {
            let v = iterations(&mut r, 20, gap, place, 0.16);
            let (n, label) = first_label_known(&v, gap, &known).unwrap();
            assert_eq!(label, want);
            // Ends whose 5 iterations happened to spread widely give a wide bound.
            assert!(n <= 3, "{n} iterations ({known:?})");
            at_first += (n == 1) as usize;
        }
    }
    assert!(at_first >= 70, "{at_first} of 100 at the first iteration");
    // Without it, none before the fifth.
    let v = iterations(&mut r, 20, gap, 1.0, 0.16);
    assert!(first_label_against_good(&v, gap).unwrap().0 >= first_decidable(ALPHA));
}

#[test]
fn with_the_ends_spread_known_a_commit_halfway_is_rarely_labelled() {
    // As the test without it: every label of a commit halfway is an error. The known
    // spread comes from the ends' own 5 iterations, so its error is counted too.
    let mut r = Xoshiro::seed(17);
    let trials = 400;
    let mut labelled = 0;
    for _ in 0..trials {
        let known = ends_spread(&mut r, 5, 0.08, 0.01);
        let v = iterations(&mut r, 60, 0.08, 0.5, 0.01);
        labelled += first_label_known(&v, 0.08, &known).is_some() as usize;
    }
    assert!(labelled < trials / 12, "{labelled} of {trials}");
}

#[test]
fn a_commit_that_spreads_more_than_the_ends_is_judged_without_their_spread() {
    let gap = 200f64.ln();
    let mut r = Xoshiro::seed(19);
    let known = ends_spread(&mut r, 5, gap, 0.02);
    // Its reps spread by 100%: from its second iteration its own spread is over the
    // bound, and the known spread is set aside.
    let v = iterations(&mut r, 3, gap, 1.0, 1.0);
    let p = Position::against_good(&v[0], &v[1], gap / 2.0)
        .unwrap()
        .with_known(Some(&known));
    assert!(p.known().is_none(), "{p:?}");
    assert_eq!(p.bounds(), (p.midpoint.lo, p.midpoint.hi));
}

#[test]
fn a_pair_far_apart_is_decided_at_its_first_iteration_with_the_ends_spread_known() {
    use crate::analysis::Verdict;
    let k = KnownSpread::of(0.015, 5).unwrap();
    // 200× slower, one iteration: decided, with a tiny p-value.
    let p = PairSequence::of(&[200f64.ln()], Some(&k)).unwrap();
    assert_eq!(p.verdict(0.025), Some(Verdict::Regressed));
    assert!(p.p_value.unwrap() < 1e-9, "{p:?}");
    assert!(
        p.describe().contains("(the ends' spread)"),
        "{}",
        p.describe()
    );
    // Without the ends' spread one value bounds nothing.
    let alone = PairSequence::of(&[200f64.ln()], None).unwrap();
    assert_eq!(alone.verdict(0.025), None);
    assert_eq!(alone.p_value, None);
    assert!(alone.describe().contains("[no bound yet]"));
    // Values that spread more than the bound are judged without it.
    let wide = PairSequence::of(&[0.5, 0.0, 0.6], Some(&k)).unwrap();
    assert_eq!(wide.known(), None);
    assert_eq!(wide.bounds(), (wide.ratios.lo, wide.ratios.hi));
}

#[test]
fn pair_p_values_fall_below_alpha_where_their_sequences_exclude_zero() {
    // The known spread: p < α exactly where the half-width is below |mean|.
    for n in 1..=8 {
        for step in 1..60 {
            let mean = step as f64 * 0.002;
            let x = vec![mean; n];
            let hw = known_sd_half_width(0.01, n, ALPHA);
            let p = known_sd_p_value(&x, 0.01);
            // The largest ratio may come at an earlier n: p is at most the last one's.
            if hw < mean * 0.999 {
                assert!(p < ALPHA, "n {n} mean {mean} hw {hw} p {p}");
            }
        }
    }
    // The unknown spread: p < α at the n where the sequence first excludes 0.
    let mut r = Xoshiro::seed(7);
    for _ in 0..200 {
        let x: Vec<f64> = (0..8).map(|_| 0.05 + 0.03 * normal(&mut r)).collect();
        let (lo, hi) = stats::mean_confidence_sequence(&x, ALPHA).unwrap();
        if lo > 0.0 || hi < 0.0 {
            assert!(unknown_sd_p_value(&x) < ALPHA, "{x:?}");
        }
    }
}

#[test]
fn pair_p_values_stay_valid_under_no_change_whenever_the_run_stops() {
    // 2,000 runs of 30 iterations with no change; a run "stops" the first time its p
    // falls below α, so the rate at which any look gives p < α is the error of looking
    // after every iteration. It stays below α (with room for the simulation's error).
    let mut r = Xoshiro::seed(11);
    let k = KnownSpread::of(0.02, 30).unwrap();
    let (runs, mut known_false, mut unknown_false) = (2_000, 0, 0);
    for _ in 0..runs {
        let x: Vec<f64> = (0..30).map(|_| 0.02 * normal(&mut r)).collect();
        known_false += (1..=x.len()).any(|n| known_sd_p_value(&x[..n], k.sd) < ALPHA) as u32;
        unknown_false += (2..=x.len()).any(|n| unknown_sd_p_value(&x[..n]) < ALPHA) as u32;
    }
    let rate = |f: u32| f as f64 / runs as f64;
    assert!(rate(known_false) < ALPHA + 0.015, "{}", rate(known_false));
    assert!(
        rate(unknown_false) < ALPHA + 0.015,
        "{}",
        rate(unknown_false)
    );
}

#[test]
fn a_known_spread_judging_from_two_iterations_ignores_one_stalled_rep() {
    // Ends 31% apart at 1.7% per iteration; a good commit's first rep stalled by +48%.
    let k = KnownSpread::of(0.017, 5).unwrap().judging_from(2);
    let half = 1.31f64.ln() / 2.0;
    let p = Position::against_good(&[(0, 0.0)], &[(0, 1.48f64.ln())], half)
        .unwrap()
        .with_known(Some(&k));
    assert_eq!(p.label(), None, "{}", p.describe());
    // From one iteration the same rep would have labelled it bad.
    let eager = Position::against_good(&[(0, 0.0)], &[(0, 1.48f64.ln())], half)
        .unwrap()
        .with_known(Some(&KnownSpread::of(0.017, 5).unwrap()));
    assert_eq!(eager.label(), Some(Nearer::Bad));
    // A second rep at the good end: its own spread exceeds the bound, so the ends'
    // spread does not judge it, and the sequence of its own spread cannot yet.
    let p = Position::against_good(&[(0, 0.0), (1, 0.0)], &[(0, 1.48f64.ln()), (1, 0.0)], half)
        .unwrap()
        .with_known(Some(&k));
    assert_eq!(p.known(), None);
    assert_eq!(p.label(), None);
}
