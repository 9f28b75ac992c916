//! The first lines of a diff: the end-to-end change with its interval and verdict, the
//! largest significant changes (each with its measure), and the net of what the
//! candidate moved on and off the critical path. Built from the comparisons the diff
//! already holds ([`super::compare`], [`super::gaps`]); nothing here is measured anew.

use std::fmt::Write;

use serde::{Deserialize, Serialize};

use super::compare::{Comparison, Measure, Unit, SPAN_THREADS, THREADS_WITH_SPANS};
use super::family::Family;
use super::fmt::{delta_cell, fmt_test, measure_label, opt_value, reason, signed};
use super::gaps::{Contributions, OnPath};
use crate::counters::CounterKind;

/// How many significant changes the headline names (the tables below list all).
pub const HEADLINE_CHANGES: usize = 3;

/// What the headline says; [`super::Diff::headline`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Headline {
    /// The end-to-end time (the root span's duration).
    pub end_to_end: Comparison,
    /// The largest significant changes other than the end-to-end time, at most
    /// [`HEADLINE_CHANGES`]: time measures by the size of their change first, then
    /// counters by their relative change. One per span and direction: a span whose total
    /// and self time moved the same way is named once, with the larger of the two.
    pub changes: Vec<Comparison>,
    /// Significant changes left out of `changes`.
    pub more_changes: usize,
    /// Spans whose time on the critical path changed significantly.
    pub critical_path: Vec<CriticalMove>,
    /// Sum of `critical_path`'s changes, ns.
    pub critical_net_ns: f64,
    /// The family of comparisons the verdicts were judged over (false-discovery
    /// control): how many, and how many would pass by chance alone.
    #[serde(default)]
    pub family: Family,
    /// With too few reps a side for a claim: the span times whose two sides separated in
    /// every rep, most spreads apart first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub separated: Vec<SeparatedSpan>,
    /// The run's level swung between its pairs by more than the end-to-end change (a
    /// verdict whose sign a swing inside one pair could have set), in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swing: Option<String>,
    /// The run's load beyond its cores (one run's variants), in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<String>,
}

/// A span time whose sides separated in every rep (every candidate rep above every
/// baseline rep, or below), with too few reps for a claim of significance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeparatedSpan {
    pub span: String,
    pub measure: Measure,
    /// The gap between the sides in MAD-based spreads, signed (+: the candidate slower).
    pub spreads: f64,
    pub relative: Option<f64>,
}

/// How a span's self time on the critical path changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CriticalMove {
    pub span: String,
    pub delta_ns: f64,
    pub kind: MoveKind,
    /// Named for the structure alone: the span is on the critical path in every rep of
    /// one side and in none of the other's ([`super::gaps::OnPath::moved`]), while its
    /// change in time did not pass the verdict rule (under the floors, say). Not in
    /// [`Headline::critical_net_ns`]. It holds the span's reps on the critical path per
    /// side.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structural: Option<OnPath>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MoveKind {
    /// On the critical path in the baseline, off it in the candidate (median 0).
    Left,
    /// Off the critical path in the baseline (median 0), on it in the candidate.
    Joined,
    /// On it on both sides, shorter or longer.
    Changed,
}

/// A span name without its per-circuit index ("synthesis[1]" → "synthesis"), so that a
/// phase and its per-circuit parts count as one change.
fn family(span: &str) -> &str {
    match span.rfind('[') {
        Some(i)
            if span.ends_with(']')
                && span[i + 1..span.len() - 1]
                    .bytes()
                    .all(|b| b.is_ascii_digit()) =>
        {
            &span[..i]
        }
        _ => span,
    }
}

/// A span's own time (total, self, gaps, GPU busy): not a count, and not the process
/// CPU time, which like a CPU-time counter restates the time's change across cores.
fn is_time(c: &Comparison) -> bool {
    c.unit == Unit::Ns && !matches!(c.measure, Measure::Counter(_) | Measure::ProcessCpu)
}

/// The headline of a diff whose metrics and contributions are computed; `leaves` are the
/// spans without children.
///
/// A wrapper's total time moves with every child inside it (`gpu_prove` and `kernels`
/// with `msm_h`), so wrappers' totals are named only when no self time, leaf or counter
/// changed: the headline names where the change is, the phase table below the
/// containers it shows up in.
pub(crate) fn headline(
    metrics: &[Comparison],
    contributions: &Contributions,
    leaves: &[String],
    min_reps: usize,
) -> Headline {
    // The three headline facts (end to end, the named changes, the critical path's moves)
    // are chosen from one sorted view of the comparisons; one function keeps that order
    // and the rules that break ties in one place.
    let total = &contributions.total;
    let all: Vec<&Comparison> = metrics
        .iter()
        .chain(contributions.items.iter().map(|i| &i.comparison))
        .filter(|c| c.verdict.is_change() && c.span != total.span)
        .collect();
    // A set, not the slice: a run of many span names has as many leaves as comparisons.
    let leaves: std::collections::HashSet<&str> = leaves.iter().map(String::as_str).collect();
    let wrapper_total =
        |c: &&Comparison| c.measure == Measure::Total && !leaves.contains(c.span.as_str());
    let mut significant: Vec<&Comparison> =
        all.iter().copied().filter(|c| !wrapper_total(c)).collect();
    if significant.is_empty() {
        significant = all;
    }
    let size = |c: &Comparison| c.delta.unwrap_or(0.0).abs();
    let rel = |c: &Comparison| c.relative.unwrap_or(f64::INFINITY).abs();
    significant.sort_by(|a, b| {
        is_time(b)
            .cmp(&is_time(a))
            .then_with(|| {
                if is_time(a) {
                    size(b).total_cmp(&size(a))
                } else {
                    rel(b).total_cmp(&rel(a))
                }
            })
            .then_with(|| a.span.cmp(&b.span))
    });
    // One per (span family, direction, time or which counter).
    let mut seen: Vec<(&str, bool, String)> = Vec::new();
    let mut distinct: Vec<Comparison> = Vec::new();
    for c in significant {
        // CPU time of a span restates its time's change in the same direction.
        let cpu_time = Measure::Counter(CounterKind::TaskClockNs.column().into());
        let kind = if is_time(c) || c.measure == cpu_time || c.measure == Measure::ProcessCpu {
            "time".to_string()
        } else {
            c.measure.to_string()
        };
        let key = (family(&c.span), c.delta.unwrap_or(0.0) > 0.0, kind);
        if !seen.contains(&key) {
            seen.push(key);
            distinct.push(c.clone());
        }
    }
    let more_changes = distinct.len().saturating_sub(HEADLINE_CHANGES);
    distinct.truncate(HEADLINE_CHANGES);

    let mut critical_path: Vec<CriticalMove> = contributions
        .items
        .iter()
        .map(|i| &i.comparison)
        .filter(|c| c.verdict.is_change())
        .map(|c| CriticalMove {
            span: c.span.clone(),
            delta_ns: c.delta.unwrap_or(0.0),
            kind: match (c.baseline.median, c.candidate.median) {
                (Some(b), Some(k)) if b > 0.0 && k == 0.0 => MoveKind::Left,
                (Some(b), Some(k)) if b == 0.0 && k > 0.0 => MoveKind::Joined,
                _ => MoveKind::Changed,
            },
            structural: None,
        })
        .collect();
    let critical_net_ns = critical_path.iter().map(|m| m.delta_ns).sum();
    // Spans the rep stopped (or started) waiting for at all: named however small their
    // time, after the significant moves, and outside the net.
    for i in &contributions.items {
        let c = &i.comparison;
        let (Some(on), false) = (i.on_path, c.verdict.is_change()) else {
            continue;
        };
        if let Some(left) = on.moved(min_reps) {
            critical_path.push(CriticalMove {
                span: c.span.clone(),
                delta_ns: c.delta.unwrap_or(0.0),
                kind: if left {
                    MoveKind::Left
                } else {
                    MoveKind::Joined
                },
                structural: Some(on),
            });
        }
    }
    let mut separated: Vec<SeparatedSpan> = metrics
        .iter()
        .filter(|c| {
            is_time(c)
                && (c.baseline.reps < min_reps || c.candidate.reps < min_reps)
                && matches!(c.measure, Measure::Total | Measure::SelfTime)
        })
        .filter_map(|c| {
            let sep = c.separation?;
            Some(SeparatedSpan {
                span: c.span.clone(),
                measure: c.measure.clone(),
                spreads: sep.spreads * sep.direction as f64,
                relative: c.relative,
            })
        })
        .collect();
    separated.sort_by(|a, b| b.spreads.abs().total_cmp(&a.spreads.abs()));
    // A span whose total and self separated is named once.
    let mut named: Vec<String> = Vec::new();
    separated.retain(|s| {
        let fresh = !named.contains(&s.span);
        named.push(s.span.clone());
        fresh
    });
    Headline {
        end_to_end: total.clone(),
        changes: distinct,
        more_changes,
        critical_net_ns,
        critical_path,
        family: Family::default(),
        separated,
        swing: None,
        load: None,
    }
}

/// "synthesis (total) −1.20 ms −9.1% [−12.0%, −6.1%] improved (p=0.004)".
fn change(c: &Comparison) -> String {
    let mut s = if c.span == SPAN_THREADS {
        format!(
            "{} ({THREADS_WITH_SPANS}) {}",
            measure_label(&c.measure),
            delta_cell(c)
        )
    } else {
        format!(
            "{} ({}) {}",
            c.span,
            measure_label(&c.measure),
            delta_cell(c)
        )
    };
    let p = fmt_test(c);
    let _ = write!(s, " {}", c.verdict);
    if !p.is_empty() {
        let _ = write!(s, " ({p})");
    }
    s
}

/// "(q < 0.05 over 124 comparisons; 6.2 would pass p < 0.05 by chance alone, 9 did)".
fn family_words(f: &Family) -> String {
    if f.controlled {
        format!(
            "q < {} over {} comparisons; {:.1} would pass p < {} by chance alone, {} did",
            f.alpha, f.comparisons, f.expected_by_chance, f.alpha, f.uncorrected
        )
    } else {
        format!(
            "p < {} each, no false-discovery control, {} comparisons; {:.1} expected by chance alone",
            f.alpha, f.comparisons, f.expected_by_chance
        )
    }
}

/// How many critical-path moves the headline names before "… N more".
const MOVES_NAMED: usize = 4;

/// The headline as three lines (markdown: three bullet-less lines in bold labels).
pub(super) fn lines(h: &Headline, md: bool) -> Vec<String> {
    // Every clause of the three lines, in the order a reader meets them, for the terminal
    // and markdown alike: long because each clause is conditional, kept together so the
    // order cannot drift between the two outputs.
    let label = |l: &str| {
        if md {
            format!("**{l}:**")
        } else {
            format!("{l}:")
        }
    };
    let t = &h.end_to_end;
    let mut first = format!(
        "{} {} ({}) medians {} → {}; {} {}",
        label("End to end"),
        t.span,
        measure_label(&t.measure),
        opt_value(t.unit, t.baseline.median),
        opt_value(t.unit, t.candidate.median),
        t.statistic(),
        delta_cell(t)
    );
    let p = fmt_test(t);
    let _ = write!(first, ": {}", t.verdict);
    match (p.is_empty(), reason(t)) {
        (false, Some(why)) => {
            let _ = write!(first, " ({p}; {why})");
        }
        (false, None) => {
            let _ = write!(first, " ({p})");
        }
        (true, Some(why)) => {
            let _ = write!(first, " ({why})");
        }
        (true, None) => {}
    }
    if t.medians_disagree() {
        let (b, k) = (
            t.baseline.median.unwrap_or(0.0),
            t.candidate.median.unwrap_or(0.0),
        );
        let _ = write!(
            first,
            " — note: the medians moved the other way ({}); the verdict is on the {}",
            signed(t.unit, k - b),
            t.statistic()
        );
    }
    if let Some(w) = &h.swing {
        let _ = write!(first, " — note: {w}");
    }
    if let Some(w) = &h.load {
        let _ = write!(first, " — note: {w}");
    }
    // Without enough reps nothing is claimed: say that, and which spans separated anyway.
    let min = crate::stats::MIN_REPS_FOR_CLAIM;
    let n = t.baseline.reps.min(t.candidate.reps);
    if n < min {
        let sep = if n < 2 {
            "one rep a side shows no time apart from the other (every rep apart needs 2)"
                .to_string()
        } else if h.separated.is_empty() {
            "no span time separated in every rep".to_string()
        } else {
            let named: Vec<String> = h
                .separated
                .iter()
                .take(MOVES_NAMED)
                .map(|s| {
                    let rel = s
                        .relative
                        .map(|r| format!(" {:+.1}%", r * 100.0))
                        .unwrap_or_default();
                    let sp = if s.spreads.is_finite() {
                        format!("{:.1} spreads", s.spreads.abs())
                    } else {
                        "no spread".to_string()
                    };
                    format!(
                        "{} ({}){rel}, {} in every rep by {sp}",
                        s.span,
                        measure_label(&s.measure),
                        if s.spreads > 0.0 { "slower" } else { "faster" }
                    )
                })
                .collect();
            let mut w = format!("separated in every rep: {}", named.join("; "));
            if h.separated.len() > MOVES_NAMED {
                let _ = write!(w, "; {} more", h.separated.len() - MOVES_NAMED);
            }
            w
        };
        // Exact counts (emulated) need no reps to decide: their changes are named, and
        // the times, which under the emulator are the emulator's, get no claim.
        let exact: Vec<String> = h.changes.iter().filter(|c| c.exact).map(change).collect();
        let reps = format!("{n} rep{}", if n == 1 { "" } else { "s" });
        let second = if exact.is_empty() {
            format!(
                "{} no claim of significance at {reps} a side (a claim needs {min}); {sep}",
                label("Significant changes"),
            )
        } else {
            let mut s = format!(
                "{} {} (exact counts: one rep a side decides); times: no claim at {reps} a side \
                 (a claim needs {min})",
                label("Significant changes"),
                exact.join("; "),
            );
            if h.more_changes > 0 {
                let _ = write!(s, "; {} more in the tables", h.more_changes);
            }
            s
        };
        return vec![
            first,
            second,
            format!("{} no verdicts for the same reason", label("Critical path")),
        ];
    }
    let fam = family_words(&h.family);
    let second = if h.changes.is_empty() {
        format!("{} none ({fam})", label("Significant changes"))
    } else {
        let mut s = format!(
            "{} {} ({fam})",
            label("Significant changes"),
            h.changes.iter().map(change).collect::<Vec<_>>().join("; ")
        );
        if h.more_changes > 0 {
            let _ = write!(s, "; {} more in the tables", h.more_changes);
        }
        s
    };
    let (timed, structural): (Vec<&CriticalMove>, Vec<&CriticalMove>) =
        h.critical_path.iter().partition(|m| m.structural.is_none());
    let structural_words = structure_words(&structural);
    let third = if timed.is_empty() && structural.is_empty() {
        format!(
            "{} no span's self time on it changed significantly",
            label("Critical path")
        )
    } else if timed.is_empty() {
        format!(
            "{} {structural_words}; no self time on it changed significantly",
            label("Critical path")
        )
    } else {
        let named: Vec<String> = timed
            .iter()
            .take(MOVES_NAMED)
            .map(|m| {
                let d = signed(Unit::Ns, m.delta_ns);
                match m.kind {
                    MoveKind::Left => format!("{} {d} (left it)", m.span),
                    MoveKind::Joined => format!("{} {d} (joined it)", m.span),
                    MoveKind::Changed => format!("{} {d}", m.span),
                }
            })
            .collect();
        let mut s = format!("{} {}", label("Critical path"), named.join(", "));
        if timed.len() > MOVES_NAMED {
            let _ = write!(s, ", {} more", timed.len() - MOVES_NAMED);
        }
        let _ = write!(
            s,
            "; net {} of significant self-time changes on it",
            signed(Unit::Ns, h.critical_net_ns)
        );
        if !structural.is_empty() {
            let _ = write!(s, "; {structural_words}");
        }
        s
    };
    vec![first, second, third]
}

/// "drop left it (on it in 10 of 10 baseline reps, 0 of 10 candidate reps; −12.30 µs
/// of self time, under the verdict rule)", for moves named by structure alone.
fn structure_words(moves: &[&CriticalMove]) -> String {
    let named: Vec<String> = moves
        .iter()
        .take(MOVES_NAMED)
        .filter_map(|m| {
            let st = m.structural.as_ref()?;
            let verb = match m.kind {
                MoveKind::Left => "left it",
                _ => "joined it",
            };
            Some(format!(
                "{} {verb} (on it in {} of {} baseline reps, {} of {} candidate reps; {} of \
                 self time, under the verdict rule)",
                m.span,
                st.baseline.0,
                st.baseline.1,
                st.candidate.0,
                st.candidate.1,
                signed(Unit::Ns, m.delta_ns)
            ))
        })
        .collect();
    let mut s = named.join(", ");
    if moves.len() > MOVES_NAMED {
        let _ = write!(s, ", {} more", moves.len() - MOVES_NAMED);
    }
    s
}
