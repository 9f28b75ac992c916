//! Simulation tests of the verdict rule, and diffs of synthetic runs with known effects.
//! One file past 600 lines because the cases share the synthetic runs and helpers below,
//! and each test reads best next to the run it diffs.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::compare::{compare, Measure, Unit, Verdict};
use super::synthetic::{SyntheticRun, SyntheticVariant};
use super::*;
use crate::store::RunData;

/// Standard normal by Box–Muller.
fn normal(rng: &mut StdRng) -> f64 {
    let (u1, u2): (f64, f64) = (rng.gen_range(f64::EPSILON..1.0), rng.gen());
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// n timings around `center` with relative noise `noise`, normal or log-normal.
fn timings(rng: &mut StdRng, n: usize, center: f64, noise: f64, lognormal: bool) -> Vec<f64> {
    (0..n)
        .map(|_| {
            let z = normal(rng);
            if lognormal {
                center * (noise * z).exp()
            } else {
                center * (1.0 + noise * z)
            }
        })
        .collect()
}

fn run(trials: u64, f: impl Fn(&mut StdRng) -> bool) -> f64 {
    (0..trials)
        .filter(|&t| f(&mut StdRng::seed_from_u64(1000 + t)))
        .count() as f64
        / trials as f64
}

#[test]
fn interval_covers_a_known_shift_in_at_least_93_percent_of_trials() {
    let opts = DiffOptions::default();
    // (reps per side, relative noise, true relative shift, log-normal)
    for (n, noise, shift, lognormal) in [
        (10, 0.02, 0.03, false),
        (30, 0.05, -0.04, true),
        (20, 0.01, 0.0, false),
    ] {
        let coverage = run(300, |rng| {
            let a = timings(rng, n, 1e9, noise, lognormal);
            let b = timings(rng, n, 1e9 * (1.0 + shift), noise, lognormal);
            compare("x", Measure::Total, Unit::Ns, &a, &b, None, &opts)
                .ci
                .unwrap()
                .contains(shift)
        });
        eprintln!(
            "coverage n={n} noise={noise} shift={shift} lognormal={lognormal}: {coverage:.3}"
        );
        // Not vacuous: an interval so wide it always covers would also fail the power test.
        assert!(
            (0.93..=0.995).contains(&coverage),
            "n={n} noise={noise} shift={shift}: coverage {coverage:.3}"
        );
    }
}

#[test]
fn same_distribution_gives_at_most_5_percent_false_verdicts() {
    let strict = DiffOptions {
        noise_floor: 0.0,
        ..DiffOptions::default()
    };
    for opts in [strict, DiffOptions::default()] {
        for (n, noise, lognormal) in [(10, 0.005, false), (30, 0.03, true)] {
            let false_rate = run(400, |rng| {
                let a = timings(rng, n, 1e9, noise, lognormal);
                let b = timings(rng, n, 1e9, noise, lognormal);
                compare("x", Measure::Total, Unit::Ns, &a, &b, None, &opts)
                    .verdict
                    .is_change()
            });
            eprintln!(
                "A/A floor={} n={n} noise={noise}: {false_rate:.3} false verdicts",
                opts.noise_floor
            );
            // Without a floor the t test's level is exactly alpha: 5 % of 400 trials,
            // give or take sampling (sd 1.1 %); the default floor keeps it under 5 %.
            let limit = if opts.noise_floor == 0.0 { 0.085 } else { 0.05 };
            assert!(
                false_rate <= limit,
                "floor {} n={n} noise={noise}: {false_rate:.3} false verdicts",
                opts.noise_floor
            );
        }
    }
}

#[test]
fn a_2_percent_shift_is_detected_with_10_reps_at_half_percent_noise() {
    let opts = DiffOptions::default();
    for (shift, want) in [(0.02, Verdict::Regressed), (-0.02, Verdict::Improved)] {
        let rate = run(200, |rng| {
            let a = timings(rng, 10, 1e9, 0.005, false);
            let b = timings(rng, 10, 1e9 * (1.0 + shift), 0.005, false);
            compare("x", Measure::Total, Unit::Ns, &a, &b, None, &opts).verdict == want
        });
        eprintln!("shift {shift}, 10 reps, 0.5% noise: detected in {rate:.3}");
        assert!(
            rate >= 0.9,
            "shift {shift}: detected in {rate:.3} of trials"
        );
    }
}

#[test]
fn a_shift_inside_the_noise_floor_is_unchanged() {
    let opts = DiffOptions::default();
    let rate = run(100, |rng| {
        let a = timings(rng, 30, 1e9, 0.001, false);
        let b = timings(rng, 30, 1e9 * 1.004, 0.001, false);
        let c = compare("x", Measure::Total, Unit::Ns, &a, &b, None, &opts);
        c.p_value.unwrap() < 0.05 && c.verdict == Verdict::Equivalent
    });
    assert!(
        rate >= 0.95,
        "significant but small shifts shown equivalent in {rate:.3}"
    );
}

#[test]
fn verdict_edge_cases() {
    let opts = DiffOptions::default();
    let c =
        |a: &[f64], b: &[f64]| compare("x", Measure::Total, Unit::Ns, a, b, None, &opts).verdict;
    // Three reps a side: no claim, however large the change.
    assert_eq!(
        c(&[1.0, 2.0, 3.0], &[10.0, 20.0, 30.0]),
        Verdict::Inconclusive
    );
    assert_eq!(
        c(&[1.0], &[10.0, 20.0, 30.0, 40.0, 50.0]),
        Verdict::Inconclusive
    );
    assert_eq!(c(&[1.0, 2.0], &[]), Verdict::Gone);
    assert_eq!(c(&[], &[1.0, 2.0]), Verdict::New);
    assert_eq!(c(&[0.0; 8], &[0.0; 8]), Verdict::Equivalent);
    // From nothing to something: no relative change exists, but it is a regression
    // (here of several µs, above the absolute floor of 1 µs).
    assert_eq!(
        c(&[0.0; 8], &[5e3, 6e3, 7e3, 5e3, 6e3, 7e3, 5e3, 6e3]),
        Verdict::Regressed
    );
    // A few ns from nothing: under the absolute floor, shown too small to matter.
    assert_eq!(
        c(&[0.0; 8], &[5.0, 6.0, 7.0, 5.0, 6.0, 7.0, 5.0, 6.0]),
        Verdict::Equivalent
    );
    // Halving 100 µs: far above both floors.
    let up: Vec<f64> = (0..8).map(|i| 100e3 + 1e3 * i as f64).collect();
    let down: Vec<f64> = up.iter().map(|x| x * 0.5).collect();
    assert_eq!(c(&up, &down), Verdict::Improved);
    assert_eq!(c(&down, &up), Verdict::Regressed);
}

fn diff_of(run: &SyntheticRun) -> Diff {
    diff_with(run, &DiffOptions::default())
}

fn diff_with(run: &SyntheticRun, opts: &DiffOptions) -> Diff {
    let data = run.build();
    diff_runs(&data, "baseline", &data, "candidate", opts).unwrap()
}

/// `baseline` of `base` against `candidate` of `cand`, default options.
fn diff_data(base: &RunData, cand: &RunData) -> Diff {
    diff_runs(base, "baseline", cand, "candidate", &DiffOptions::default()).unwrap()
}

fn unpaired() -> DiffOptions {
    DiffOptions {
        paired: false,
        ..DiffOptions::default()
    }
}

fn metric<'a>(d: &'a Diff, span: &str, m: Measure) -> &'a Comparison {
    d.metrics
        .iter()
        .find(|c| c.span == span && c.measure == m)
        .unwrap()
}

#[test]
fn a_faster_phase_is_found_where_it_happened() {
    let mut run = SyntheticRun::new();
    *run.variant_mut("candidate") = SyntheticVariant::new("candidate").scaled("msm_h", 0.9);
    let d = diff_of(&run);
    assert_eq!(
        metric(&d, "msm_h", Measure::Total).verdict,
        Verdict::Improved
    );
    assert_eq!(
        metric(&d, "kernels", Measure::Total).verdict,
        Verdict::Improved
    );
    assert_eq!(
        metric(&d, "kernels", Measure::SelfTime).verdict,
        Verdict::Equivalent
    );
    assert_eq!(
        metric(&d, "b_g2_msm", Measure::Total).verdict,
        Verdict::Equivalent
    );
    let top = &d.contributions.items[0].comparison;
    assert_eq!(top.span, "msm_h");
    let rel = top.relative.unwrap();
    assert!((rel + 0.1).abs() < 0.01, "msm_h change {rel}");
    // Phase table: synthesis, the CPU prover call, kernels, drop, total, busy cores of
    // the call and of the whole prove, then software counters.
    let phases: Vec<&str> = d.phase_table.iter().map(|r| r.phase.as_str()).collect();
    assert_eq!(
        phases,
        [
            "synthesis",
            "CPU prover call (gpu_prove)",
            "NTT and MSMs (kernels)",
            "drop",
            "end to end (prove)",
            "CPU prover call (gpu_prove) busy cores",
            "end to end (prove) busy cores",
            "task_clock_ns (threads with spans)",
            "page_faults (threads with spans)",
            "context_switches (threads with spans)"
        ]
    );
    assert_eq!(d.phase_table[4].comparison.verdict, Verdict::Improved);
}

#[test]
fn contributions_add_up_to_the_total_change() {
    let mut run = SyntheticRun::new();
    let mut cand = SyntheticVariant::new("candidate")
        .scaled("synthesis[0]", 0.7)
        .scaled("synthesis[1]", 0.7);
    cand.gpu_gap_ns = 200_000_000;
    *run.variant_mut("candidate") = cand;
    let d = diff_of(&run);
    let c = &d.contributions;
    let total = c.total.delta.unwrap();
    assert!((c.explained_ns + c.unexplained_ns - total).abs() < 1e-6);
    // Medians do not add exactly, but the parts explain nearly all of it here.
    assert!(
        c.unexplained_ns.abs() < 0.05 * total.abs().max(1e6),
        "unexplained {} of {total}",
        c.unexplained_ns
    );
    let find = |s: &str| c.items.iter().find(|i| i.comparison.span == s).unwrap();
    // The wrapper's own time grew by the gap; synthesis (waiting for workers) shrank.
    assert!((find("gpu_prove").comparison.delta.unwrap() - 200e6).abs() < 5e6);
    assert!(find("synthesis").comparison.delta.unwrap() < -3e6);
    assert_eq!(c.items[0].comparison.span, "gpu_prove");
}

#[test]
fn a_small_span_s_cost_is_bounded_as_a_share_of_the_total() {
    // 5 % noise on every span: the end-to-end interval is wide, but a 10 % slowdown of
    // one small span is resolved as a share of the whole.
    let mut run = SyntheticRun::new();
    run.noise = 0.05;
    run.reps = 30;
    *run.variant_mut("candidate") = SyntheticVariant::new("candidate").scaled("b_g2_msm", 1.1);
    let d = diff_of(&run);
    let c = &d.contributions;
    let whole = c.total.baseline.median.unwrap();
    let item = c
        .items
        .iter()
        .find(|i| i.comparison.span == "b_g2_msm")
        .unwrap();
    let own = item.comparison.baseline.median.unwrap();
    let expected = 0.1 * own / whole;
    let got = item.of_total.unwrap();
    assert!(
        (got - expected).abs() < 0.3 * expected,
        "{got} vs {expected}"
    );
    let ci = item.of_total_ci.unwrap();
    let (lo, hi) = (ci.lo.unwrap(), ci.hi.unwrap());
    assert!(
        0.0 < lo && lo <= got && got <= hi,
        "[{lo}, {hi}] around {got}"
    );
    // The end-to-end interval is wider than the whole effect.
    let t = c.total.ci.unwrap();
    assert!(t.hi.unwrap() - t.lo.unwrap() > hi - lo);
    // Every item: the share is its change over the baseline's total median.
    for i in &c.items {
        let want = i.comparison.delta.unwrap() / whole;
        assert!((i.of_total.unwrap() - want).abs() < 1e-12);
    }
    let md = render(&d, Format::Markdown);
    assert!(md.contains("Of total [95% CI]"), "{md}");
}

#[test]
fn a_wrapper_gap_is_flagged_with_its_size_and_share() {
    let mut run = SyntheticRun::new();
    run.variant_mut("candidate").gpu_gap_ns = 400_000_000;
    let d = diff_of(&run);
    let g = d.gaps.iter().find(|g| g.span == "gpu_prove").unwrap();
    assert!(!g.baseline.unwrap().flagged);
    let c = g.candidate.unwrap();
    // 400 ms on top of a ~1.12 s wrapper.
    assert!(c.flagged && (c.fraction - 0.263).abs() < 0.01, "{c:?}");
    assert_eq!(g.flags.len(), 1);
    assert!(
        g.flags[0].starts_with("gpu_prove: 400.")
            && g.flags[0].contains("(26%) not covered by children (candidate)"),
        "{}",
        g.flags[0]
    );
    assert_eq!(g.change.verdict, Verdict::Regressed);
    // synthesis waits for its workers: covered by children on other threads, not a gap.
    let s = d.gaps.iter().find(|g| g.span == "synthesis").unwrap();
    assert!(s.candidate.unwrap().fraction < 0.05);
    assert!(d
        .gaps
        .iter()
        .filter(|g| g.span != "gpu_prove")
        .all(|g| g.flags.is_empty()));
}

#[test]
fn async_drop_moves_drop_off_the_critical_path() {
    let mut run = SyntheticRun::new();
    let cand = run.variant_mut("candidate");
    cand.async_drop = true;
    cand.knobs.insert("drop".into(), "async".into());
    let d = diff_of(&run);
    let drop = d
        .contributions
        .items
        .iter()
        .find(|i| i.comparison.span == "drop")
        .unwrap();
    assert_eq!(drop.comparison.candidate.median, Some(0.0));
    // Off the critical path: gone from it, and its few µs are below the floor of 0.1 % of
    // end to end, so not a headline change: shown too small to matter.
    assert_eq!(drop.comparison.verdict, Verdict::Equivalent);
    assert!(drop.comparison.delta.unwrap() < 0.0);
    assert!(drop.comparison.rule.is_some());
    // Same work, on another thread.
    assert_eq!(
        metric(&d, "drop", Measure::Total).verdict,
        Verdict::Equivalent
    );
    assert!(render(&d, Format::Terminal).contains("baseline (drop=sync) vs candidate (drop=async)"));
}

#[test]
fn failed_and_warmup_reps_are_excluded_and_counted() {
    let mut run = SyntheticRun::new();
    run.variant_mut("candidate").failed_reps = 3;
    let d = diff_of(&run);
    assert_eq!(
        d.excluded.baseline,
        RepCounts {
            used: 10,
            failed: 0,
            warmup: 1
        }
    );
    assert_eq!(
        d.excluded.candidate,
        RepCounts {
            used: 7,
            failed: 3,
            warmup: 1
        }
    );
    // Failed reps are 10× slower: had they entered, the total would have regressed.
    assert_eq!(
        metric(&d, "prove", Measure::Total).verdict,
        Verdict::Equivalent
    );
    assert_eq!(metric(&d, "prove", Measure::Total).candidate.reps, 7);
    assert!(d
        .notes
        .iter()
        .any(|n| n.contains("3 failed rep(s) excluded")));
}

#[test]
fn too_few_reps_say_how_many_are_needed() {
    let mut run = SyntheticRun::new();
    run.reps = 3;
    let d = diff_with(&run, &unpaired());
    assert_eq!((d.pairs, d.reps_needed), (None, 4));
    // Every metric with values on both sides (busy cores of short spans are withheld).
    assert!(d
        .metrics
        .iter()
        .filter(|c| c.baseline.reps > 0 && c.candidate.reps > 0)
        .all(|c| c.verdict == Verdict::Inconclusive));
    assert!(
        d.notes
            .iter()
            .any(|n| n.contains("needs at least 4 per side")),
        "{:?}",
        d.notes
    );
    let term = render(&d, Format::Terminal);
    assert!(
        term.contains("inconclusive (3 reps a side: no claim below 4)"),
        "{term}"
    );
    assert!(
        term.contains("no claim of significance at 3 reps a side"),
        "{term}"
    );
    // Too few pairs for a paired verdict (6: all of one sign gives p = 2/64): the default
    // compares them as independent samples, and says so.
    let d = diff_of(&run);
    assert_eq!((d.pairs, d.reps_needed), (None, 4));
    assert!(
        d.notes
            .iter()
            .any(|n| n.contains("independent samples: only 3 iterations")
                && n.contains("at least 4")),
        "{:?}",
        d.notes
    );
    run.reps = 6;
    let d = diff_of(&run);
    assert_eq!((d.pairs, d.reps_needed), (Some(6), 4));
    assert!(d
        .metrics
        .iter()
        .filter(|c| c.baseline.reps > 0 && c.candidate.reps > 0)
        .all(|c| c.pairs == Some(6)));
}

#[test]
fn hardware_counters_replace_software_ones_in_the_phase_table() {
    let mut run = SyntheticRun::new();
    run.hardware_counters = true;
    run.variant_mut("candidate")
        .scale
        .insert("msm_h".into(), 1.2);
    let d = diff_of(&run);
    let rows: Vec<&str> = d
        .phase_table
        .iter()
        .skip(7)
        .map(|r| r.phase.as_str())
        .collect();
    assert_eq!(
        rows,
        [
            "instructions (threads with spans)",
            "branches (threads with spans)"
        ]
    );
    assert_eq!(d.phase_table[7].comparison.span, SPAN_THREADS);
    assert_eq!(d.phase_table[7].comparison.verdict, Verdict::Regressed);
    assert!(d.notes.iter().all(|n| !n.contains("counters not compared")));
}

#[test]
fn gpu_busy_time_is_compared_where_recorded() {
    let mut run = SyntheticRun::new();
    assert!(diff_of(&run)
        .metrics
        .iter()
        .all(|c| c.measure != Measure::GpuBusy));
    run.gpu_activity = true;
    run.variant_mut("candidate")
        .scale
        .insert("msm_l".into(), 0.6);
    let d = diff_of(&run);
    let busy = metric(&d, "gpu_prove", Measure::GpuBusy);
    assert_eq!(busy.verdict, Verdict::Improved);
    // msm_l (75 ms of ~977 ms of kernel time) 40% faster.
    let rel = busy.relative.unwrap();
    assert!((rel + 0.4 * 75.0 / 977.0).abs() < 0.005, "{rel}");
    assert_eq!(
        metric(&d, "b_g2_msm", Measure::GpuBusy).baseline.median,
        Some(0.0)
    );
}

#[test]
fn workloads_must_match_unless_forced() {
    let a = SyntheticRun::new().build();
    let mut other = SyntheticRun::new();
    other.workload.log2_constraints = 14;
    other.hostname = "elsewhere".into();
    other.seed = 2;
    let b = other.build();
    let err = diff_runs(&a, "baseline", &b, "baseline", &DiffOptions::default()).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("log2_constraints: 12 (baseline) vs 14 (candidate)"),
        "{msg}"
    );
    // Another hostname alone is the same host (the fingerprint has no hostname).
    assert!(!msg.contains("host:"), "{msg}");
    let mut moved = SyntheticRun::new().build();
    moved.dir = "elsewhere".into();
    moved.meta.host.cpu_model = "another CPU".into();
    let msg = diff_runs(&a, "baseline", &moved, "baseline", &DiffOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("host: ") && msg.contains("cpu_model: ") && msg.contains("another CPU"),
        "{msg}"
    );
    assert!(msg.contains("--force"), "{msg}");
    let forced = DiffOptions {
        force: true,
        ..DiffOptions::default()
    };
    let d = diff_runs(&a, "baseline", &b, "baseline", &forced).unwrap();
    assert_eq!(d.workload_differences.len(), 1);
    assert!(
        d.notes.iter().any(|n| n.contains("different workloads")),
        "{:?}",
        d.notes
    );
}

#[test]
fn runs_with_params_of_different_origin_get_a_note() {
    let with_params = |source: &str, seed| {
        let mut r = SyntheticRun::new();
        r.seed = seed;
        let mut d = r.build();
        d.meta.params = vec![serde_json::json!({ "source": source, "elapsed_ms": 5 })];
        d
    };
    let generated = with_params("generated", 1);
    let loaded = with_params("loaded", 2);
    let opts = DiffOptions::default();
    let d = diff_runs(&generated, "baseline", &loaded, "baseline", &opts).unwrap();
    let note = d.notes.iter().find(|n| n.contains("params were")).unwrap();
    assert!(
        note.contains(
            "generated in the process in the baseline's run and loaded in the candidate's"
        ),
        "{note}"
    );
    let regenerated = with_params("regenerated: sha256 mismatch", 3);
    let d = diff_runs(&generated, "baseline", &regenerated, "baseline", &opts).unwrap();
    assert!(
        !d.notes.iter().any(|n| n.contains("params were")),
        "{:?}",
        d.notes
    );
    let d = diff_runs(
        &loaded,
        "baseline",
        &with_params("generated in a child process", 4),
        "baseline",
        &opts,
    )
    .unwrap();
    assert!(
        !d.notes.iter().any(|n| n.contains("params were")),
        "{:?}",
        d.notes
    );
    let d = diff_runs(&loaded, "baseline", &loaded, "candidate", &opts).unwrap();
    assert!(
        !d.notes.iter().any(|n| n.contains("params were")),
        "{:?}",
        d.notes
    );
}

#[test]
fn variants_are_picked_by_name_then_position() {
    let data = SyntheticRun::new().build();
    assert_eq!(
        pick_variants(&data, None, None, None).unwrap(),
        ("baseline".into(), "candidate".into())
    );
    let mut run = SyntheticRun::new();
    run.variants = vec![
        SyntheticVariant::new("lc"),
        SyntheticVariant::new("add_to_lc"),
        SyntheticVariant::new("baseline"),
    ];
    let data = run.build();
    assert_eq!(
        pick_variants(&data, None, None, None).unwrap(),
        ("baseline".into(), "lc".into())
    );
    assert_eq!(
        pick_variants(&data, None, Some("lc"), None).unwrap(),
        ("lc".into(), "add_to_lc".into())
    );
    let other = SyntheticRun::new().build();
    assert_eq!(
        pick_variants(&data, Some(&other), None, None).unwrap(),
        ("baseline".into(), "baseline".into())
    );
    let err = diff_runs(&data, "nope", &data, "lc", &DiffOptions::default()).unwrap_err();
    assert!(err
        .to_string()
        .contains("no variant named \"nope\"; variants are: lc, add_to_lc, baseline"));
    assert!(matches!(
        diff_runs(&data, "lc", &data, "lc", &DiffOptions::default()),
        Err(DiffError::SameVariant(_))
    ));
    let mut single = SyntheticRun::new();
    single.variants.truncate(1);
    assert!(matches!(
        pick_variants(&single.build(), None, None, None),
        Err(DiffError::OneVariant { .. })
    ));
}

#[test]
fn the_same_data_give_the_same_diff() {
    let run = SyntheticRun::new();
    let (a, b) = (diff_of(&run), diff_of(&run));
    assert_eq!(render(&a, Format::Json), render(&b, Format::Json));
}

#[test]
fn every_format_carries_the_phase_table() {
    let d = diff_of(&SyntheticRun::new());
    let md = render(&d, Format::Markdown);
    assert!(md.contains("| Phase | Measure | Baseline | Candidate | Delta | Verdict |"));
    let term = render(&d, Format::Terminal);
    let first_table = term
        .lines()
        .find(|l| l.split_whitespace().next() == Some("Phase"))
        .unwrap();
    assert!(first_table.split_whitespace().eq([
        "Phase",
        "Measure",
        "Baseline",
        "Candidate",
        "Delta",
        "Verdict"
    ]));
    let json: serde_json::Value = serde_json::from_str(&render(&d, Format::Json)).unwrap();
    for field in [
        "phase_table",
        "metrics",
        "gaps",
        "contributions",
        "excluded",
    ] {
        assert!(json.get(field).is_some(), "json lacks {field}");
    }
    let back: Diff = serde_json::from_value(json).unwrap();
    assert_eq!(back.phase_table.len(), d.phase_table.len());
    let csv = render(&d, Format::Csv);
    let mut rdr = csv::Reader::from_reader(csv.as_bytes());
    let headers = rdr.headers().unwrap().clone();
    assert_eq!(&headers[0], "section");
    let rows: Vec<csv::StringRecord> = rdr.records().map(Result::unwrap).collect();
    assert_eq!(
        rows.iter().filter(|r| &r[0] == "phase").count(),
        d.phase_table.len()
    );
    assert_eq!(
        rows.iter().filter(|r| &r[0] == "metric").count(),
        d.metrics.len()
    );
}

#[test]
fn a_baseline_with_zero_counts_is_compared_through_the_log_offset() {
    // Page faults: three of eight baseline reps saw none. Their logs are taken of the
    // count plus one event (the unit's offset), so the zeros have a place and the
    // relative change is that of the geometric means of count + 1.
    let base = [0.0, 0.0, 0.0, 3.0, 3.0, 4.0, 4.0, 5.0];
    let cand: Vec<f64> = (30..38).map(f64::from).collect();
    let c = compare(
        SPAN_THREADS,
        Measure::Counter("page_faults".into()),
        Unit::Count,
        &base,
        &cand,
        None,
        &DiffOptions::default(),
    );
    assert!(c.p_value.unwrap() < 0.001);
    let gm = |v: &[f64]| (v.iter().map(|x| (x + 1.0).ln()).sum::<f64>() / v.len() as f64).exp();
    let want = gm(&cand) / gm(&base) - 1.0;
    assert!(
        (c.relative.unwrap() - want).abs() < 1e-9,
        "{:?} vs {want}",
        c.relative
    );
    let ci = c.ci.unwrap();
    assert!(ci.is_defined() && ci.contains(want) && ci.lo.unwrap() > 1.0);
    assert_eq!(c.verdict, Verdict::Regressed);

    let mut d = diff_of(&SyntheticRun::new());
    d.phase_table[0].comparison = c;
    let term = render(&d, Format::Terminal);
    let row = term.lines().find(|l| l.starts_with("synthesis")).unwrap();
    assert!(row.contains("regressed (p<0.001)"), "{row}");
    for text in [&term, &render(&d, Format::Markdown)] {
        assert!(!text.contains("NaN") && !text.contains("inf%"));
    }
    let json = render(&d, Format::Json);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let ci = &v["phase_table"][0]["comparison"]["ci"];
    assert!(
        ci["lo"].as_f64().unwrap() > 1.0 && ci["hi"].is_number(),
        "{ci}"
    );
    assert_eq!(ci["level"], 0.95);
    let back: Diff = serde_json::from_str(&json).unwrap();
    let (a, b) = (
        &back.phase_table[0].comparison,
        &d.phase_table[0].comparison,
    );
    assert_eq!(
        (a.verdict, a.ci.map(|i| i.level)),
        (b.verdict, b.ci.map(|i| i.level))
    );
    assert!((a.relative.unwrap() - b.relative.unwrap()).abs() < 1e-12);
    let csv = render(&d, Format::Csv);
    let mut rdr = csv::Reader::from_reader(csv.as_bytes());
    let first = rdr.records().next().unwrap().unwrap();
    assert!(first[13].parse::<f64>().is_ok() && first[14].parse::<f64>().is_ok());
}

/// A host that is 30 % slower in half of the iterations, at random (both variants
/// alike), and a candidate 2 % slower in `msm_h` (about 1 % of the whole).
fn drifting_run(seed: u64, shift: f64) -> SyntheticRun {
    let mut run = SyntheticRun::new();
    run.reps = 40;
    run.drift = 0.3;
    run.seed = seed;
    *run.variant_mut("candidate") = SyntheticVariant::new("candidate").scaled("msm_h", shift);
    run
}

#[test]
fn pairing_by_iteration_cancels_drift_that_hides_a_shift_unpaired() {
    let run = drifting_run(3, 1.02);
    let paired = diff_of(&run);
    assert_eq!(paired.pairs, Some(40));
    let p = metric(&paired, "msm_h", Measure::Total);
    assert_eq!(p.pairs, Some(40));
    let (lo, hi) = (p.ci.unwrap().lo.unwrap(), p.ci.unwrap().hi.unwrap());
    assert!(lo > 0.01 && hi < 0.03, "paired msm_h [{lo}, {hi}]");
    assert_eq!(p.verdict, Verdict::Regressed);
    assert!(paired
        .notes
        .iter()
        .any(|n| n.starts_with("paired by iteration (40 pairs")));

    let independent = diff_with(&run, &unpaired());
    let u = metric(&independent, "msm_h", Measure::Total);
    assert_eq!(u.pairs, None);
    let (ulo, uhi) = (u.ci.unwrap().lo.unwrap(), u.ci.unwrap().hi.unwrap());
    assert!(
        uhi - ulo > 5.0 * (hi - lo),
        "unpaired [{ulo}, {uhi}] vs paired [{lo}, {hi}]"
    );
    assert_ne!(u.verdict, Verdict::Regressed);
}

#[test]
fn paired_comparisons_of_identical_variants_under_drift_stay_unchanged() {
    // A/A under drift: no span may be called changed in any of 20 runs.
    for seed in 0..20 {
        let d = diff_of(&drifting_run(100 + seed, 1.0));
        let changed: Vec<String> = d
            .metrics
            .iter()
            .filter(|c| c.verdict.is_change())
            .map(|c| format!("{} {}", c.span, c.measure))
            .collect();
        assert!(changed.is_empty(), "seed {seed}: {changed:?}");
    }
}

#[test]
fn only_variants_of_one_alternating_run_are_paired() {
    let run = drifting_run(3, 1.02);
    let data = run.build();
    let mut sequential = run.build();
    sequential.meta.order = "sequential".into();
    let d = diff_data(&sequential, &sequential);
    assert_eq!(d.pairs, None);
    assert!(d.metrics.iter().all(|c| c.pairs.is_none()));
    // Two runs: their iterations did not run side by side.
    let mut other = run.build();
    other.dir = "another run".into();
    let d = diff_data(&data, &other);
    assert_eq!(d.pairs, None);
    let mut counterbalanced = run.build();
    counterbalanced.meta.order = "counterbalanced".into();
    let d = diff_data(&counterbalanced, &counterbalanced);
    assert_eq!(d.pairs, Some(40));
    assert!(!d
        .notes
        .iter()
        .any(|n| n.contains("baseline always runs first")));
}

#[test]
fn failed_reps_leave_their_iteration_unpaired() {
    let mut run = drifting_run(5, 1.0);
    run.variant_mut("candidate").failed_reps = 4;
    let d = diff_of(&run);
    assert_eq!(d.pairs, Some(36));
    assert_eq!(metric(&d, "prove", Measure::Total).pairs, Some(36));
}

/// Counterbalanced, 40 iterations; the candidate makes the rep after it 5 % slower.
fn carrying_run(slows_next_rep: f64) -> SyntheticRun {
    let mut run = SyntheticRun::new();
    run.reps = 40;
    run.counterbalanced = true;
    run.variant_mut("candidate").slows_next_rep = slows_next_rep;
    run
}

#[test]
fn a_variant_that_slows_the_next_rep_shows_in_the_carry_over_not_in_the_paired_change() {
    let d = diff_of(&carrying_run(0.05));
    assert_eq!(d.pairs, Some(40));
    // Each rep's own time is the same for both variants: pairs of one iteration share
    // their predecessor's effect half of the time either way.
    let total = &d.contributions.total;
    assert!(total.relative.unwrap().abs() < 0.02, "{total:?}");
    let c = d
        .carry_over
        .as_ref()
        .expect("carry-over of a counterbalanced run");
    for (what, x) in [("baseline", &c.baseline), ("candidate", &c.candidate)] {
        let r = x.relative.unwrap();
        assert!((0.04..0.06).contains(&r), "{what}: {r}");
        assert_eq!(x.verdict, Verdict::Regressed, "{what}");
    }
    let steady = c.steady.relative.unwrap();
    assert!((0.04..0.06).contains(&steady), "steady {steady}");
    assert_eq!(c.steady.verdict, Verdict::Regressed);
    let term = render(&d, Format::Terminal);
    assert!(term.contains("Carry-over: prove by the variant of the rep before"));
    assert!(term.contains("steady: baseline after baseline → candidate after candidate"));
    let md = render(&d, Format::Markdown);
    assert!(md.contains("| candidate: after baseline → after candidate |"));

    // Without a carry-over nothing is flagged.
    let d = diff_of(&carrying_run(0.0));
    let c = d.carry_over.unwrap();
    for x in [&c.baseline, &c.candidate, &c.steady] {
        assert!(!x.verdict.is_change(), "{x:?}");
    }
}

#[test]
fn carry_over_needs_variants_of_one_alternating_run() {
    let mut data = carrying_run(0.05).build();
    data.meta.order = "sequential".into();
    let d = diff_data(&data, &data);
    assert!(d.carry_over.is_none());
    assert!(!render(&d, Format::Terminal).contains("Carry-over"));
    // Interleaved (ABAB): every candidate rep follows a baseline rep; with a group
    // empty there is nothing to compare.
    let d = diff_of(&SyntheticRun::new());
    assert!(d.carry_over.is_none());
}

#[test]
fn process_cpu_time_and_busy_cores_are_compared_and_in_the_phase_table() {
    let mut run = SyntheticRun::new();
    run.variant_mut("candidate")
        .scale
        .insert("msm_l".into(), 0.8);
    let d = diff_of(&run);
    // The fixture's process keeps three cores busy in every span.
    let cores = metric(&d, "gpu_prove", Measure::BusyCores);
    assert_eq!(cores.unit, Unit::Cores);
    let median = cores.baseline.median.unwrap();
    assert!((median - 3.0).abs() < 1e-9, "{median}");
    let cpu = metric(&d, "gpu_prove", Measure::ProcessCpu);
    let total = metric(&d, "gpu_prove", Measure::Total);
    let ratio = cpu.baseline.median.unwrap() / total.baseline.median.unwrap();
    assert!((ratio - 3.0).abs() < 1e-6, "{ratio}");
    // msm_l 20% shorter: the process CPU of gpu_prove falls with it.
    assert!(
        cpu.delta.unwrap() < 0.0 && cpu.relative.unwrap() < -0.01,
        "{cpu:?}"
    );
    assert!(d
        .phase_table
        .iter()
        .any(|r| r.phase.ends_with("busy cores") && r.comparison.span == "gpu_prove"));
}

/// Two run folders whose machines were under different loads: the regression measured
/// across them is not named (it could be the machine's), and the reason is on the
/// headline; under the same load it is.
#[test]
fn two_runs_at_different_loads_name_no_change() {
    use crate::store::drift::{Drift, MachineState};
    let run = {
        let mut r = SyntheticRun::new();
        *r.variant_mut("candidate") = SyntheticVariant::new("candidate").scaled("msm_h", 1.2);
        r
    };
    let state = |load: f64| MachineState {
        utc: "2026-01-01T00:00:00Z".into(),
        load_avg: Some([load, load, load]),
        ..MachineState::default()
    };
    let with_load = |name: &str, start: f64, end: f64| {
        let mut d = run.build();
        d.dir = std::path::PathBuf::from(name);
        d.meta.drift = Some(Drift {
            start: state(start),
            end: Some(state(end)),
        });
        d
    };
    let (a, b) = (with_load("run-a", 0.4, 0.6), with_load("run-b", 3.9, 4.2));
    let d = diff_runs(&a, "baseline", &b, "candidate", &DiffOptions::default()).unwrap();
    let total = &d.headline.end_to_end;
    assert_eq!(total.verdict, Verdict::Inconclusive, "{total:?}");
    assert!(total
        .why
        .as_deref()
        .unwrap()
        .contains("load 0.4–0.6 vs 3.9–4.2"));
    assert!(d.metrics.iter().all(|c| !c.verdict.is_change()));
    let head = render(&d, Format::Terminal);
    let line = head.lines().find(|l| l.starts_with("End to end:")).unwrap();
    assert!(line.contains("the two runs' machines differed"), "{line}");
    // The same load (ranges that overlap): the regression is named.
    let c = with_load("run-c", 0.5, 0.7);
    let d = diff_runs(&a, "baseline", &c, "candidate", &DiffOptions::default()).unwrap();
    assert_eq!(d.headline.end_to_end.verdict, Verdict::Regressed);
    // Two runs at the same load, but more load than cores: what either measured depended
    // on the other work of the moment.
    let (mut e, mut f) = (with_load("run-e", 3.0, 3.2), with_load("run-f", 3.1, 3.3));
    e.meta.host.cpu_cores = 2;
    f.meta.host.cpu_cores = 2;
    let d = diff_runs(&e, "baseline", &f, "candidate", &DiffOptions::default()).unwrap();
    let total = &d.headline.end_to_end;
    assert_eq!(total.verdict, Verdict::Inconclusive);
    let why = total.why.as_deref().unwrap();
    assert!(
        why.contains("the baseline run's load reached 3.2 on 2 cores"),
        "{why}"
    );
}

/// Two run folders at the same load: a change within a few times the between-runs
/// spread is not named (either run's level could hold it), with the reason, while the
/// same data as variants of one run name it; a change far beyond is named across runs.
#[test]
fn two_runs_carry_the_between_runs_spread() {
    let across = |scale: f64, opts: &DiffOptions| {
        let mut r = SyntheticRun::new();
        *r.variant_mut("candidate") = SyntheticVariant::new("candidate").scaled("msm_h", scale);
        let (mut a, mut b) = (r.build(), r.build());
        a.dir = std::path::PathBuf::from("run-a");
        b.dir = std::path::PathBuf::from("run-b");
        let d = diff_runs(&a, "baseline", &b, "candidate", opts).unwrap();
        metric(&d, "msm_h", Measure::SelfTime).clone()
    };
    let off = DiffOptions {
        between_runs: 0.0,
        ..DiffOptions::default()
    };
    let small = across(1.03, &off);
    assert_eq!(small.verdict, Verdict::Regressed, "{small:?}");
    let small = across(1.03, &DiffOptions::default());
    assert_eq!(small.verdict, Verdict::Inconclusive, "{small:?}");
    assert!(small.tests.as_ref().unwrap().between_runs > 0.0);
    let why = small.why.as_deref().unwrap_or_default();
    assert!(why.contains("between-runs spread"), "{small:?}");
    assert!(small.more_reps.is_none(), "{small:?}");
    let large = across(1.5, &DiffOptions::default());
    assert_eq!(large.verdict, Verdict::Regressed, "{large:?}");
    // The options are checked.
    let bad = DiffOptions {
        between_runs: -0.1,
        ..DiffOptions::default()
    };
    assert!(bad.validate().is_err());
}

/// A sequential run's decisions: a 20% slower phase is decided regressed after 10 pairs
/// (with end to end), an A/A run decides nothing wrong, and every decision holds its
/// level at every number of pairs.
#[test]
fn sequential_progress_decides_large_changes_and_names_what_is_open() {
    use super::sequential::progress;
    let opts = DiffOptions::default();
    let slow = candidate_run(|v| v.scaled("msm_h", 1.2));
    let d = diff_of(&slow);
    let p = progress(&d, &opts).expect("paired");
    assert_eq!(p.pairs, 10);
    assert_eq!(p.rows[0].span, "prove");
    assert_eq!(p.rows[0].verdict, Verdict::Regressed, "{}", p.line());
    let msm = p.rows.iter().find(|r| r.span == "msm_h").unwrap();
    assert_eq!(msm.verdict, Verdict::Regressed, "{}", p.line());
    assert!(p.line().starts_with("10 pairs: "), "{}", p.line());
    // A/A: nothing regressed or improved, whatever is still open.
    let mut aa = SyntheticRun::new();
    aa.noise = 0.02;
    let p = progress(&diff_of(&aa), &opts).unwrap();
    assert!(
        p.rows.iter().all(|r| !r.verdict.is_change()),
        "{}",
        p.line()
    );
    // Unpaired diffs have no sequential reading.
    assert!(progress(&diff_with(&slow, &unpaired()), &opts).is_none());
}

fn candidate_run(f: impl FnOnce(SyntheticVariant) -> SyntheticVariant) -> SyntheticRun {
    let mut run = SyntheticRun::new();
    *run.variant_mut("candidate") = f(SyntheticVariant::new("candidate"));
    run
}

/// One rep of ten three times slower (preempted as a whole) hides a change of eight
/// spreads from the two-sample t test on all reps; the same test without the far-out
/// rep, in its place, names it, and its estimate is the typical rep's change.
#[test]
fn a_far_out_rep_does_not_hide_a_change_from_the_two_sample_test() {
    let opts = DiffOptions::default();
    let base = [100.0e6, 102.0e6, 98.0e6, 101.0e6, 300.0e6];
    let cand = [118.0e6, 121.0e6, 119.0e6, 117.0e6, 120.0e6];
    let c = compare("x", Measure::Total, Unit::Ns, &base, &cand, None, &opts);
    let t = c.tests.as_ref().unwrap();
    assert!(t.unpaired.p_value > 0.3, "{:?}", t.unpaired);
    let trimmed = t.trimmed_in_use().expect("the 300 ms rep is far out");
    assert!(trimmed.p_value < 1e-5, "{trimmed:?}");
    assert!(c.p_value.unwrap() < 2e-5, "{:?}", c.p_value);
    assert_eq!(c.verdict, Verdict::Regressed);
    let r = c.relative.unwrap();
    assert!((r - 0.1856).abs() < 0.01, "typical change {r}");
    let note = super::diff_notes::far_out_note(std::slice::from_ref(&c)).unwrap();
    assert!(
        note.starts_with("far-out reps: 1 of the rows named"),
        "{note}"
    );
    assert!(note.ends_with("x (total)"), "{note}");
    // Without the far-out rep the rule has nothing to leave out.
    assert!(super::compare::without_far_out(&base[..4], &cand).is_none());
}

/// Two stalled reps of five are left to the full test: they may be the change.
#[test]
fn several_far_out_reps_on_one_side_are_kept() {
    let l = |v: &[f64]| v.iter().map(|x: &f64| x.ln()).collect::<Vec<_>>();
    let base = l(&[100.0, 102.0, 98.0, 101.0, 99.0]);
    let cand = l(&[100.0, 101.0, 99.0, 300.0, 310.0]);
    assert!(super::compare::without_far_out(&base, &cand).is_none());
    let one = l(&[100.0, 101.0, 99.0, 300.0, 100.5]);
    let (b, c) = super::compare::without_far_out(&base, &one).unwrap();
    assert_eq!((b.len(), c.len()), (5, 4));
    // Equal values (a count that never moves) are not far out from each other.
    let flat = l(&[7.0; 5]);
    assert!(super::compare::without_far_out(&flat, &flat).is_none());
}

/// The share of 4,000 A/A comparisons at 5 reps a side (lognormal reps of spread
/// `noise`, each rep `factor` times slower with probability `share`) whose p < 0.01.
fn aa_rate_with_slow_reps(noise: f64, share: f64, factor: f64) -> f64 {
    let opts = DiffOptions {
        fdr: false,
        ..DiffOptions::default()
    };
    run(4000, |rng| {
        let draw = |rng: &mut StdRng| {
            let mut v = timings(rng, 5, 1e8, noise, true);
            for x in &mut v {
                if rng.gen::<f64>() < share {
                    *x *= factor;
                }
            }
            v
        };
        let (a, b) = (draw(rng), draw(rng));
        let c = compare("x", Measure::Total, Unit::Ns, &a, &b, None, &opts);
        c.p_value.is_some_and(|p| p < 0.01)
    })
}

/// Reps in two modes (35% of them 8% slower, as a machine that is sometimes slow):
/// the minority mode of one side is the other side's typical rep, so it is not left
/// out, and the combined test keeps the two-sample test's level at 5 reps a side.
#[test]
fn a_second_mode_is_not_far_out() {
    let l = |v: &[f64]| v.iter().map(|x: &f64| x.ln()).collect::<Vec<_>>();
    // Four slow reps and one fast against five fast: the fast rep is the baseline's own.
    let slow = l(&[108.0, 108.1, 107.9, 108.05, 100.0]);
    let fast = l(&[100.0, 100.1, 99.9, 100.05, 99.95]);
    assert!(super::compare::without_far_out(&slow, &fast).is_none());
    let rate = aa_rate_with_slow_reps(0.01, 0.35, 1.08);
    // 1.2% with no value ever left out, 2.6% if the second mode were far out.
    assert!(rate < 0.018, "p < 0.01 in {rate:.4} of A/A comparisons");
}

/// Under no change, with one rep in fifty three times slower, the combined test keeps
/// its level at 5 reps a side.
#[test]
fn leaving_out_far_out_reps_keeps_the_level_under_no_change() {
    let rate = aa_rate_with_slow_reps(0.02, 0.02, 3.0);
    assert!(rate < 0.015, "p < 0.01 in {rate:.4} of A/A comparisons");
}
