use std::collections::HashMap;

use super::*;
use crate::analysis::{Measure, SideStats, Unit};

fn cmp(verdict: Verdict, relative: f64) -> Comparison {
    let side = SideStats {
        reps: 9,
        median: Some(100.0),
        mad: Some(1.0),
        gmean: None,
    };
    Comparison {
        span: "s".into(),
        measure: Measure::SelfTime,
        unit: Unit::Ns,
        baseline: side,
        candidate: side,
        delta: Some(relative * 100.0),
        relative: Some(relative),
        ci: None,
        delta_ci: None,
        q_value: None,
        rule: None,
        p_value: Some(0.5),
        verdict,
        pairs: Some(9),
        exact: false,
        tests: None,
        more_reps: None,
        why: None,
        separation: None,
    }
}

/// Answers each commit's run from a script.
struct Scripted(HashMap<String, StepRun>, Vec<(String, u32)>);

impl Measurer for Scripted {
    fn probe(&mut self, _: &str) -> Result<()> {
        Ok(())
    }
    fn given_rep_timeout(&self) -> Option<u64> {
        None
    }
    fn measure_step(&mut self, commit: &str, limits: &Limits) -> Result<StepRun> {
        self.1.push((commit.to_string(), limits.max_reps));
        Ok(self.0.remove(commit).unwrap())
    }
    fn measure_pair(&mut self, _: &str, _: &str, _: &Limits) -> Result<PairRun> {
        Ok(PairRun {
            comparison: cmp(Verdict::Regressed, 0.05),
            sequence: None,
            run_dir: "ends".into(),
            slowest_rep: Duration::ZERO,
        })
    }
}

/// A step measured at `n` iterations whose log midpoint values are `mid`.
fn measured(g: (Verdict, f64), b: (Verdict, f64), mid: &[f64]) -> StepRun {
    let at = |v: f64| {
        mid.iter()
            .enumerate()
            .map(|(i, m)| (i as u32, m + v))
            .collect::<Vec<_>>()
    };
    // good at -1, bad at +1: the step's logs are its midpoint values.
    let zeros = |v: f64| (0..mid.len() as u32).map(|i| (i, v)).collect::<Vec<_>>();
    StepRun::Measured {
        vs_good: cmp(g.0, g.1),
        vs_bad: Some(cmp(b.0, b.1)),
        position: Position::of(&zeros(-1.0), &at(0.0), &zeros(1.0)),
        reps: mid.len() as u32,
        run_dir: "r".into(),
    }
}

#[test]
fn a_commit_is_labelled_by_its_place_between_the_ends_with_a_note_when_it_differs_from_both() {
    use Verdict::*;
    let near_good = [-0.9, -1.0, -1.1, -0.95, -1.05];
    let near_bad = [0.9, 1.0, 1.1, 0.95, 1.05];
    let halfway = [0.5, -0.5, 0.4, -0.6, 0.1, -0.2];
    let mut m = Scripted(
        [
            (
                "a".to_string(),
                measured((Inconclusive, 0.0), (Improved, -0.05), &near_good),
            ),
            (
                "b".to_string(),
                measured((Regressed, 0.05), (Inconclusive, 0.0), &near_bad),
            ),
            (
                "c".to_string(),
                measured((Inconclusive, 0.02), (Inconclusive, -0.02), &halfway),
            ),
            (
                "d".to_string(),
                measured((Regressed, 0.04), (Improved, -0.01), &near_bad),
            ),
            (
                "e".to_string(),
                StepRun::Failed {
                    why: "timed out after 10 s (rep 4): …".into(),
                    run_dir: None,
                },
            ),
        ]
        .into(),
        Vec::new(),
    );
    let limits = Limits {
        max_reps: 6,
        rep_timeout_s: Some(10),
        half_gap: None,
        known_spread: None,
    };
    let judge = |m: &mut Scripted, c: &str| judge_step(m, 1, c, &limits).unwrap();
    let r = judge(&mut m, "a");
    assert_eq!((r.label, r.reps, r.max_reps), (StepLabel::Good, 5, 6));
    assert!(r.note.is_none());
    assert_eq!(judge(&mut m, "b").label, StepLabel::Bad);
    // Halfway at the cap: an honest cannot tell, with both comparisons.
    let r = judge(&mut m, "c");
    assert_eq!((r.label, r.reps), (StepLabel::CannotTell, 6));
    assert_eq!(r.vs_good.unwrap().relative, Some(0.02));
    // Slower than good and faster than bad: labelled by its place, with a note.
    let r = judge(&mut m, "d");
    assert_eq!(r.label, StepLabel::Bad);
    assert!(r.note.unwrap().contains("both ends"));
    let r = judge(&mut m, "e");
    assert_eq!(r.label, StepLabel::Failed);
    assert!(r.failure.unwrap().starts_with("timed out after 10 s"));
    assert_eq!(m.1.len(), 5);
    assert!(m.1.iter().all(|(_, k)| *k == 6));
}

#[test]
fn the_pilot_follows_the_formula_within_its_bounds() {
    assert_eq!(reps_for(0.05, ASSUMED_CV), 9);
    assert_eq!(reps_for(0.05, 0.02), 16);
    assert_eq!(reps_for(0.05, 0.001), 6);
    assert_eq!(reps_for(0.01, 0.05), MAX_AUTO_REPS);
    let c = cmp(Verdict::Inconclusive, 0.0);
    assert!((spread_of(&c).unwrap() - 0.014826).abs() < 1e-9);
}
