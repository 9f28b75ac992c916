use std::path::PathBuf;

use super::judge::StepRun;
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

impl Measurer for Model {
    fn measure_step(&mut self, commit: &str, reps: u32) -> Result<StepRun> {
        self.runs.push(format!("{commit}x{reps}"));
        let i = index(commit);
        if self.broken.contains(&i) {
            return Ok(StepRun::Failed {
                why: "error: could not compile".into(),
            });
        }
        let (g, b) = (self.levels[0], *self.levels.last().unwrap());
        let noisy = self.noisy.contains(&i);
        Ok(StepRun::Measured {
            vs_good: comparison(g, self.levels[i], noisy),
            vs_bad: comparison(b, self.levels[i], noisy),
            run_dir: PathBuf::from(format!("runs/{commit}-{reps}")),
        })
    }
    fn measure_pair(&mut self, base: &str, cand: &str, reps: u32) -> Result<(Comparison, PathBuf)> {
        self.runs.push(format!("{base}-{cand}x{reps}"));
        let (b, c) = (self.levels[index(base)], self.levels[index(cand)]);
        Ok((comparison(b, c, false), PathBuf::from("runs/pair")))
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
    assert_eq!(m.runs[0], "c0-c9x7");
    assert_eq!(m.runs.last().unwrap(), "c5-c6x7");
    let text = render_text(&r);
    assert!(text.starts_with("first bad commit: c6\n"), "{text}");
    assert!(
        text.contains("against its parent c5: 100 ns → 105 ns, +5.0% regressed"),
        "{text}"
    );
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
    // The noisy commit was measured at both levels of reps, the broken one once.
    assert!(m.runs.contains(&"c6x12".to_string()), "{:?}", m.runs);
    assert!(!m.runs.contains(&"c4x12".to_string()), "{:?}", m.runs);
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
    // Measured at the pilot's K, then at twice that.
    assert_eq!(m.runs, ["c0-c4x9", "c0-c4x18"]);
    let (commits, mut m) = history(5, 2);
    let r = bisect(&commits, &mut m, 0.05, Reps::Derived, &mut |_| {}).unwrap();
    // The model's sides spread by 1.4826 %: 9 reps.
    assert_eq!(r.reps, 9);
    assert!(
        r.reps_reason
            .starts_with("derived: the ends spread by 1.48%"),
        "{}",
        r.reps_reason
    );
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
