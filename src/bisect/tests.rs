use std::path::PathBuf;
use std::time::Duration;

use super::judge::StepRun;
use super::sequential::Position;
use super::*;
use crate::analysis::{SideStats, Unit};

/// A history whose metric is `levels[i]` at commit `i` (exactly, so every comparison is
/// decided by the sign of the change); `broken` commits do not build; `noisy` ones
/// cannot be told apart from either end.
struct Model {
    levels: Vec<f64>,
    broken: Vec<usize>,
    noisy: Vec<usize>,
    runs: Vec<String>,
    /// Each step's `Limits::half_gap`.
    half_gaps: Vec<Option<f64>>,
}

fn index(c: &str) -> usize {
    c.trim_start_matches('c').parse().unwrap()
}

fn comparison(base: f64, cand: f64, noisy: bool) -> Comparison {
    let r = cand / base - 1.0;
    let side = |m| SideStats {
        reps: 9,
        median: Some(m),
        mad: Some(m * 0.01),
        gmean: None,
    };
    Comparison {
        span: "gpu_prove".into(),
        measure: Measure::SelfTime,
        unit: Unit::Ns,
        baseline: side(base),
        candidate: side(cand),
        delta: Some(cand - base),
        relative: Some(r),
        ci: None,
        delta_ci: None,
        q_value: None,
        rule: None,
        p_value: Some(if noisy { 0.4 } else { 0.004 }),
        verdict: if noisy || r.abs() < 0.025 {
            Verdict::Inconclusive
        } else if r > 0.0 {
            Verdict::Regressed
        } else {
            Verdict::Improved
        },
        pairs: Some(9),
        exact: false,
        tests: None,
        more_reps: None,
        why: None,
        separation: None,
    }
}

/// `n` iterations of the metric's logs at the ends and at a commit at `level`; a
/// noisy commit alternates between the ends' levels, so that its place is never
/// decided. Against the good end alone and `half_gap` where given.
fn position(
    good: f64,
    level: f64,
    bad: f64,
    noisy: bool,
    n: u32,
    half_gap: Option<f64>,
) -> Option<Position> {
    let wobble = |i: u32| 0.001 * ((i % 3) as f64 - 1.0);
    let logs = |at: &dyn Fn(u32) -> f64| {
        (0..n)
            .map(|i| (i, at(i).ln() + wobble(i)))
            .collect::<Vec<_>>()
    };
    let step = |i: u32| match (noisy, i % 2) {
        (false, _) => level,
        (true, 0) => good,
        (true, _) => bad,
    };
    match half_gap {
        Some(h) => Position::against_good(&logs(&|_| good), &logs(&step), h),
        None => Position::of(&logs(&|_| good), &logs(&step), &logs(&|_| bad)),
    }
}

impl Measurer for Model {
    fn probe(&mut self, good: &str) -> Result<()> {
        self.runs.push(format!("probe {good}"));
        Ok(())
    }
    fn given_rep_timeout(&self) -> Option<u64> {
        None
    }
    fn measure_step(&mut self, commit: &str, limits: &Limits) -> Result<StepRun> {
        let reps = limits.max_reps;
        self.runs.push(format!("{commit}x{reps}"));
        self.half_gaps.push(limits.half_gap);
        let i = index(commit);
        if self.broken.contains(&i) {
            return Ok(StepRun::Failed {
                why: "error: could not compile".into(),
                run_dir: None,
            });
        }
        let (g, b) = (self.levels[0], *self.levels.last().unwrap());
        let noisy = self.noisy.contains(&i);
        let half_gap = limits.half_gap;
        Ok(StepRun::Measured {
            vs_good: comparison(g, self.levels[i], noisy),
            vs_bad: half_gap
                .is_none()
                .then(|| comparison(b, self.levels[i], noisy)),
            position: position(g, self.levels[i], b, noisy, reps, half_gap),
            reps,
            run_dir: PathBuf::from(format!("runs/{commit}-{reps}")),
        })
    }
    fn measure_pair(&mut self, base: &str, cand: &str, limits: &Limits) -> Result<PairRun> {
        self.runs.push(format!("{base}-{cand}x{}", limits.max_reps));
        let (b, c) = (self.levels[index(base)], self.levels[index(cand)]);
        Ok(PairRun {
            comparison: comparison(b, c, false),
            sequence: crate::bisect::sequential::PairSequence::of(
                &[(c / b).ln(); 5],
                limits.known_spread.as_ref(),
            ),
            run_dir: PathBuf::from("runs/pair"),
            slowest_rep: Duration::from_millis(2_500),
        })
    }
}

fn history(n: usize, first_bad: usize) -> (Vec<String>, Model) {
    let commits = (0..n).map(|i| format!("c{i}")).collect();
    let levels = (0..n)
        .map(|i| if i >= first_bad { 105.0 } else { 100.0 })
        .collect();
    (
        commits,
        Model {
            levels,
            broken: vec![],
            noisy: vec![],
            runs: vec![],
            half_gaps: vec![],
        },
    )
}

#[test]
fn the_first_bad_commit_is_named_with_its_change_against_its_parent() {
    let (commits, mut m) = history(10, 6);
    let r = bisect(&commits, &mut m, 0.05, Reps::Given(7), &mut |_| {}).unwrap();
    match &r.outcome {
        Outcome::FirstBad {
            commit,
            parent,
            diff,
            ..
        } => {
            assert_eq!((commit.as_str(), parent.as_str()), ("c6", "c5"));
            assert_eq!(diff.verdict, Verdict::Regressed);
        }
        o => panic!("{o:?}"),
    }
    assert_eq!(r.reps, 7);
    // The metric checked on the good end first, then the ends at twice the cap.
    assert_eq!(m.runs[..2], ["probe c0", "c0-c9x14"]);
    assert_eq!(m.runs.last().unwrap(), "c5-c6x7");
    let text = render_text(&r);
    assert!(text.starts_with("first bad commit: c6\n"), "{text}");
    // The answer is the sequence's the run stopped on; the diff's tests beside it.
    assert!(
        text.contains(
            "against its parent c5: medians 100 ns → 105 ns; per-iteration log ratio +5.0% \
             [+5.0%, +5.0%] regressed (anytime p=0.028, 5 iterations)\n  the diff's tests on \
             its reps: medians 100 ns → 105 ns; geometric mean of per-pair ratios +5.0% \
             regressed"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "reps per step: at most 7, each step stopping once decided (given: --reps 7;"
        ),
        "{text}"
    );
    // No timeout in the experiment: ten times the ends' slowest rep (2.5 s).
    assert_eq!(r.rep_timeout_s, Some(25));
    assert!(
        text.contains("rep timeout: 25 s (derived: 10× the ends' slowest rep (2.500 s)"),
        "{text}"
    );
    assert!(text.contains("7 reps, decided (at most 7)"), "{text}");
    // Every step is in the output and in the JSON.
    for s in &r.steps {
        assert!(
            text.contains(&format!("#{:<3} {}", s.index, s.commit)),
            "{text}"
        );
    }
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["outcome"]["kind"], "first_bad");
    assert_eq!(json["steps"].as_array().unwrap().len(), r.steps.len());
}

#[test]
fn unbuildable_and_unjudgeable_commits_are_skipped_and_may_leave_candidates() {
    let (commits, mut m) = history(10, 6);
    m.broken = vec![4];
    m.noisy = vec![6];
    let r = bisect(&commits, &mut m, 0.05, Reps::Given(6), &mut |_| {}).unwrap();
    let labels: Vec<(usize, StepLabel)> = r.steps.iter().map(|s| (s.index, s.label)).collect();
    assert!(labels.contains(&(4, StepLabel::Failed)), "{labels:?}");
    assert!(labels.contains(&(6, StepLabel::CannotTell)), "{labels:?}");
    // Each measured once, the noisy one to the cap.
    assert_eq!(
        m.runs.iter().filter(|r| *r == "c6x6").count(),
        1,
        "{:?}",
        m.runs
    );
    assert!(render_text(&r).contains("6 reps, the cap: not decided"));
    match &r.outcome {
        Outcome::Candidates { last_good, commits } => {
            assert_eq!(last_good, "c5");
            assert_eq!(commits, &["c6", "c7"]);
        }
        o => panic!("{o:?}"),
    }
    assert!(render_text(&r).starts_with("cannot name one first bad commit"));
}

#[test]
fn ends_that_do_not_differ_are_refused_and_reps_are_derived_from_their_spread() {
    let (commits, mut m) = history(5, 5);
    let e = bisect(&commits, &mut m, 0.05, Reps::Derived, &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("not regressed against the good end"), "{e}");
    // One run of the ends, at most the floor of a derived cap (it stops when decided).
    assert_eq!(m.runs, ["probe c0", "c0-c4x50"]);
    let (commits, mut m) = history(5, 2);
    let r = bisect(&commits, &mut m, 0.05, Reps::Derived, &mut |_| {}).unwrap();
    // The model's ends are 5% apart and spread by 1.4826 %.
    assert_eq!(
        (r.reps, r.reps_reason.clone()),
        sequential::cap_for(1.05, 0.014826)
    );
    assert!(
        r.reps_reason
            .starts_with("derived: the ends differ by ×1.050 and spread by 1.48%"),
        "{}",
        r.reps_reason
    );
    // Too few reps to label anything are refused before anything is measured.
    let mut m = history(5, 2).1;
    let e = bisect(&commits, &mut m, 0.05, Reps::Given(4), &mut |_| {}).unwrap_err();
    assert!(e.to_string().contains("--reps 5 or more"), "{e}");
    assert!(m.runs.is_empty());
    let e = bisect(&commits[..1], &mut m, 0.05, Reps::Derived, &mut |_| {}).unwrap_err();
    assert!(e.to_string().contains("same commit"));
}

#[test]
fn metrics_are_a_span_and_a_measure() {
    let m = Metric::parse("gpu_prove.self").unwrap();
    assert_eq!(
        (m.span.as_str(), &m.measure),
        ("gpu_prove", &Measure::SelfTime)
    );
    let m = Metric::parse("synthesis.task_clock_ns").unwrap();
    assert_eq!(m.measure, Measure::Counter("task_clock_ns".into()));
    assert_eq!(m.to_string(), "synthesis.task_clock_ns");
    let m = Metric::parse("work.process_cpu").unwrap();
    assert_eq!(m.measure, Measure::ProcessCpu);
    let m = Metric::parse("a.b.total").unwrap();
    assert_eq!(m.span, "a.b");
    for bad in ["gpu_prove", ".self", "gpu_prove.wall", "x."] {
        let e = Metric::parse(bad).unwrap_err();
        assert!(e.contains("SPAN.total"), "{e}");
    }
}

#[test]
fn ends_far_apart_leave_the_bad_end_out_of_the_steps() {
    // 5% apart: both ends run in every step.
    let (commits, mut m) = history(8, 3);
    bisect(&commits, &mut m, 0.05, Reps::Given(6), &mut |_| {}).unwrap();
    assert!(m.half_gaps.iter().all(Option::is_none), "{:?}", m.half_gaps);
    // 200 times apart: the steps place their commit against the good end alone.
    let (commits, mut m) = history(8, 3);
    m.levels = (0..8)
        .map(|i| if i >= 3 { 20_000.0 } else { 100.0 })
        .collect();
    let r = bisect(&commits, &mut m, 0.05, Reps::Given(6), &mut |_| {}).unwrap();
    let h = 200f64.ln() / 2.0;
    assert!(
        m.half_gaps
            .iter()
            .all(|g| g.is_some_and(|g| (g - h).abs() < 1e-9)),
        "{:?}",
        m.half_gaps
    );
    assert!(matches!(r.outcome, Outcome::FirstBad { ref commit, .. } if commit == "c3"));
    assert!(r.steps.iter().all(|s| s.vs_bad.is_none()));
}
