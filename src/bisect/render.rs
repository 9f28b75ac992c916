//! The text of a bisect: the answer first, then the ends and every step's measurement.

use std::fmt::Write;

use super::sequential::PairSequence;
use super::{BisectReport, Outcome, StepLabel, StepReport};
use crate::analysis::{Comparison, Unit};
use crate::revisions::short;

/// A value of a comparison's unit for people.
fn value(unit: Unit, v: f64) -> String {
    match unit {
        Unit::Ns => crate::units::fmt_ns(v),
        Unit::Cores => format!("{v:.2} cores"),
        Unit::Count | Unit::Bytes => format!("{v:.0}"),
    }
}

/// `medians 1.234 ms → 1.296 ms`: a comparison's two medians in its unit.
fn medians(c: &Comparison) -> String {
    let med = |m: Option<f64>| m.map_or("-".to_string(), |v| value(c.unit, v));
    format!(
        "medians {} → {}",
        med(c.baseline.median),
        med(c.candidate.median)
    )
}

/// `medians 1.234 ms → 1.296 ms; geometric mean of per-pair ratios +5.0% [+3.9%,
/// +6.1%] regressed (p=0.004, 9 pairs)`, with a note when the medians moved the other
/// way than the change statistic (as the diff's headline says it).
pub fn change(c: &Comparison) -> String {
    let mut s = medians(c);
    if let Some(r) = c.relative {
        let _ = write!(s, "; {} {:+.1}%", c.statistic(), r * 100.0);
    }
    if let Some(i) = c.ci {
        let b = |x: Option<f64>| x.map_or("?".to_string(), |v| format!("{:+.1}%", v * 100.0));
        let _ = write!(s, " [{}, {}]", b(i.lo), b(i.hi));
    }
    let _ = write!(s, " {}", c.verdict);
    let mut extra = Vec::new();
    if c.p_value.is_some() {
        extra.push(crate::analysis::fmt_p(c.p_value));
    }
    if let Some(n) = c.pairs {
        extra.push(format!("{n} pairs"));
    }
    if !extra.is_empty() {
        let _ = write!(s, " ({})", extra.join(", "));
    }
    if c.medians_disagree() {
        let _ = write!(
            s,
            " — note: the medians moved the other way; the verdict is on the {}",
            c.statistic()
        );
    }
    s
}

/// `medians 4.4 ms → 900 ms; per-iteration log ratio +20278.2% [+19792.1%, +20776.2%]
/// (the ends' spread) regressed (anytime p<0.001, 1 iteration)`: the verdict of the
/// sequence a pair run stopped on, against half the threshold.
fn pair_line(c: &Comparison, seq: &PairSequence, threshold: f64) -> String {
    let verdict = seq
        .verdict(threshold / 2.0)
        .map_or("not decided".to_string(), |v| v.to_string());
    let mut extra = Vec::new();
    if seq.p_value.is_some() {
        extra.push(format!("anytime {}", crate::analysis::fmt_p(seq.p_value)));
    }
    let n = seq.ratios.iterations;
    extra.push(format!("{n} iteration{}", if n == 1 { "" } else { "s" }));
    format!(
        "{}; per-iteration log ratio {} {verdict} ({})",
        medians(c),
        seq.describe(),
        extra.join(", ")
    )
}

/// "5 reps, decided (at most 10)", "10 reps, the cap: not decided".
fn reps_cell(r: &StepReport) -> String {
    match r.label {
        StepLabel::Good | StepLabel::Bad if r.max_reps > 0 => {
            format!("{} reps, decided (at most {})", r.reps, r.max_reps)
        }
        StepLabel::CannotTell if r.max_reps > 0 && r.reps >= r.max_reps => {
            format!("{} reps, the cap: not decided", r.reps)
        }
        _ => format!("{} reps", r.reps),
    }
}

/// The build log named in the failure of a step that did not build: "the log (PATH)
/// ends" (a `rev` variant of gapscope) or "log PATH ends" (a command workload's build).
fn unbuilt_log(failure: &str) -> Option<&str> {
    if !failure.contains("did not build") {
        return None;
    }
    let after = |pat: &str, stop: char| -> Option<&str> {
        let i = failure.find(pat)? + pat.len();
        let rest = &failure[i..];
        Some(&rest[..rest.find(stop)?])
    };
    after("the log (", ')').or_else(|| after("; log ", ' '))
}

fn step_line(out: &mut String, r: &StepReport) {
    let log = (r.label == StepLabel::Failed)
        .then(|| r.failure.as_deref().and_then(unbuilt_log))
        .flatten();
    match log {
        // Nothing was measured: its reps never ran.
        Some(log) => {
            let _ = writeln!(
                out,
                "  #{:<3} {}  did not build (log: {log})",
                r.index,
                short(&r.commit),
            );
        }
        None => {
            let _ = writeln!(
                out,
                "  #{:<3} {}  {:<12} {}",
                r.index,
                short(&r.commit),
                r.label.to_string(),
                reps_cell(r)
            );
        }
    }
    if let Some(p) = &r.position {
        let _ = writeln!(out, "         place: {}", p.describe());
    }
    if let Some(g) = &r.vs_good {
        let _ = writeln!(out, "         against good: {}", change(g));
    }
    if let Some(b) = &r.vs_bad {
        let _ = writeln!(out, "         against bad:  {}", change(b));
    }
    if let Some(n) = &r.note {
        let _ = writeln!(out, "         note: {n}");
    }
    if r.label == StepLabel::Failed {
        let why = r.failure.as_deref().unwrap_or("");
        let lines: Vec<&str> = why.lines().filter(|l| !l.trim().is_empty()).collect();
        let _ = writeln!(out, "         why: {}", lines.first().unwrap_or(&""));
        if lines.len() > 1 {
            let last = lines[lines.len().saturating_sub(2).max(1)..].join(" | ");
            let _ = writeln!(out, "         …    {}", clip(&last, 200));
        }
    }
    for d in &r.run_dirs {
        let _ = writeln!(out, "         run: {}", d.display());
    }
}

/// `s` cut to `max` characters (with "…" where cut); the JSON keeps it whole.
fn clip(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// The text output of `gapscope bisect`.
pub fn render_text(r: &BisectReport) -> String {
    let mut out = String::new();
    match &r.outcome {
        Outcome::FirstBad {
            commit,
            parent,
            diff,
            sequence,
            run_dir,
        } => {
            let _ = writeln!(out, "first bad commit: {commit}");
            let head = format!("  {} against its parent {}: ", r.metric, short(parent));
            match sequence {
                Some(seq) => {
                    let _ = writeln!(out, "{head}{}", pair_line(diff, seq, r.threshold));
                    let _ = writeln!(out, "  the diff's tests on its reps: {}", change(diff));
                }
                None => {
                    let _ = writeln!(out, "{head}{}", change(diff));
                }
            }
            let _ = writeln!(out, "  run: {}", run_dir.display());
        }
        Outcome::Candidates { last_good, commits } => {
            let _ = writeln!(
                out,
                "cannot name one first bad commit: after the last good {} it is one of {} \
                 (commits between could not be judged; see their steps)",
                short(last_good),
                commits
                    .iter()
                    .map(|c| short(c))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    let _ = writeln!(
        out,
        "\n{} over {} first-parent commits, threshold {:.1}% (verdicts clear {:.1}%)",
        r.metric,
        r.commits.len(),
        r.threshold * 100.0,
        r.threshold * 50.0
    );
    let _ = writeln!(
        out,
        "ends: good {} → bad {}: {}",
        short(&r.commits[0]),
        short(&r.commits[r.commits.len() - 1]),
        change(&r.ends)
    );
    for d in &r.ends_run_dirs {
        let _ = writeln!(out, "  run: {}", d.display());
    }
    let _ = writeln!(
        out,
        "reps per step: at most {}, each step stopping once decided ({})",
        r.reps, r.reps_reason
    );
    if let Some(t) = r.rep_timeout_s {
        let _ = writeln!(out, "rep timeout: {t} s ({})", r.rep_timeout_reason);
    }
    let _ = writeln!(out, "steps:");
    for s in &r.steps {
        step_line(&mut out, s);
    }
    out
}

/// The text output of `gapscope bisect-step` for one commit.
pub fn render_step(r: &StepReport, metric: &str) -> String {
    let mut out = format!("{metric}: ");
    let mut s = String::new();
    step_line(&mut s, r);
    out.push_str(s.trim_start());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(why: &str) -> StepReport {
        StepReport {
            commit: "0123456789abcdef0123456789abcdef01234567".into(),
            index: 3,
            label: StepLabel::Failed,
            reps: 60,
            max_reps: 60,
            position: None,
            vs_good: None,
            vs_bad: None,
            run_dirs: Vec::new(),
            failure: Some(why.into()),
            note: None,
        }
    }

    #[test]
    fn a_step_that_did_not_build_says_so_with_its_log() {
        // As experiment::revs words a `rev` variant's failed build.
        let rev = failed(
            "revision main~2 (0123456) did not build (exit status: 101): the log \
             (/tmp/wt/build.log) ends:\nerror[E0425]: cannot find value",
        );
        let text = render_step(&rev, "prove.total");
        assert!(
            text.contains("did not build (log: /tmp/wt/build.log)"),
            "{text}"
        );
        assert!(!text.contains("60 reps"), "{text}");
        assert!(text.contains("error[E0425]"), "{text}");
        // As bisect::steps words a command workload's failed build.
        let b = crate::store::BuildMeta {
            ok: false,
            wall_ns: 1,
            log: "/r/build-step.log".into(),
            status: "exit status: 2".into(),
            reused: false,
        };
        let ext = failed(&format!(
            "revision 0123456 did not build\n{}",
            crate::experiment::command::build_failure(&b)
        ));
        let text = render_step(&ext, "prove.total");
        assert!(
            text.contains("did not build (log: /r/build-step.log)"),
            "{text}"
        );
        // Reps that ran and failed keep their count.
        let ran = failed("every rep of \"step\" failed: the program exited with 1");
        assert!(render_step(&ran, "m").contains("failed       60 reps"));
    }

    #[test]
    fn p_values_read_as_in_the_diff() {
        use crate::analysis::{Comparison, Measure, SideStats, Unit, Verdict};
        let side = SideStats {
            reps: 9,
            median: Some(100.0),
            mad: Some(1.0),
            gmean: None,
        };
        let mut c = Comparison {
            span: "s".into(),
            measure: Measure::SelfTime,
            unit: Unit::Ns,
            baseline: side,
            candidate: side,
            delta: Some(5.0),
            relative: Some(0.05),
            ci: None,
            delta_ci: None,
            p_value: None,
            q_value: None,
            rule: None,
            verdict: Verdict::Regressed,
            pairs: Some(9),
            exact: false,
            tests: None,
            more_reps: None,
            why: None,
            separation: None,
        };
        c.p_value = Some(0.0001);
        assert!(change(&c).contains("p<0.001"), "{}", change(&c));
        c.p_value = Some(0.0421);
        assert!(change(&c).contains("p=0.042"), "{}", change(&c));
        // The change is labelled with its statistic beside the medians …
        assert!(
            change(&c)
                .starts_with("medians 100 ns → 100 ns; geometric mean of per-pair ratios +5.0%"),
            "{}",
            change(&c)
        );
        assert!(!change(&c).contains("note:"), "{}", change(&c));
        // … and a note says when the medians moved the other way.
        c.candidate.median = Some(98.0);
        assert!(
            change(&c).ends_with(
                "— note: the medians moved the other way; the verdict is on the geometric \
                 mean of per-pair ratios"
            ),
            "{}",
            change(&c)
        );
    }
}
