//! The text of a bisect: the answer first, then the ends and every step's measurement.

use std::fmt::Write;

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

/// `1.234 ms → 1.296 ms, +5.0% [+3.9%, +6.1%] regressed (p=0.004, 9 pairs)`.
pub fn change(c: &Comparison) -> String {
    let med = |m: Option<f64>| m.map_or("-".to_string(), |v| value(c.unit, v));
    let mut s = format!("{} → {}", med(c.baseline.median), med(c.candidate.median));
    if let Some(r) = c.relative {
        let _ = write!(s, ", {:+.1}%", r * 100.0);
    }
    if let Some(i) = c.ci {
        let b = |x: Option<f64>| x.map_or("?".to_string(), |v| format!("{:+.1}%", v * 100.0));
        let _ = write!(s, " [{}, {}]", b(i.lo), b(i.hi));
    }
    let _ = write!(s, " {}", c.verdict);
    let mut extra = Vec::new();
    if let Some(p) = c.p_value {
        extra.push(format!("p={p:.3}"));
    }
    if let Some(n) = c.pairs {
        extra.push(format!("{n} pairs"));
    }
    if !extra.is_empty() {
        let _ = write!(s, " ({})", extra.join(", "));
    }
    s
}

fn step_line(out: &mut String, r: &StepReport) {
    let _ = writeln!(
        out,
        "  #{:<3} {}  {:<12} {} reps",
        r.index,
        short(&r.commit),
        r.label.to_string(),
        r.reps
    );
    if let (Some(g), Some(b)) = (&r.vs_good, &r.vs_bad) {
        let _ = writeln!(out, "         against good: {}", change(g));
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
            run_dir,
        } => {
            let _ = writeln!(out, "first bad commit: {commit}");
            let _ = writeln!(
                out,
                "  {} against its parent {}: {}",
                r.metric,
                short(parent),
                change(diff)
            );
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
    let _ = writeln!(out, "reps per step: {} ({})", r.reps, r.reps_reason);
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
