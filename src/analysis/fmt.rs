//! How the text formats of a diff write values, changes, p-values and measures, so that
//! the headline, the tables and the report say each the same way.

use std::fmt::Write;

use super::compare::{Comparison, Measure, Unit};
use crate::units::{fmt_ns, sig4};

pub(super) fn fmt_count(c: f64) -> String {
    let a = c.abs();
    if a >= 1e9 {
        format!("{} G", sig4(c / 1e9))
    } else if a >= 1e6 {
        format!("{} M", sig4(c / 1e6))
    } else if a >= 1e4 {
        format!("{} k", sig4(c / 1e3))
    } else if c.fract() == 0.0 {
        format!("{c:.0}")
    } else {
        format!("{c:.1}")
    }
}

pub(super) fn fmt_value(unit: Unit, v: f64) -> String {
    match unit {
        Unit::Ns => fmt_ns(v),
        Unit::Count => fmt_count(v),
        Unit::Bytes => format!("{} MiB", sig4(v / (1u64 << 20) as f64)),
        Unit::Cores => format!("{v:.2} cores"),
    }
}

pub(super) fn signed(unit: Unit, v: f64) -> String {
    let s = fmt_value(unit, v);
    if v > 0.0 {
        format!("+{s}")
    } else {
        s
    }
}

pub(super) fn pct(r: f64) -> String {
    format!("{:+.1}%", r * 100.0)
}

pub(super) fn opt_value(unit: Unit, v: Option<f64>) -> String {
    v.map(|v| fmt_value(unit, v)).unwrap_or_else(|| "-".into())
}

/// A p-value as every output writes it: `p<0.001` below a thousandth, else `p=0.042`
/// (three decimals); empty when there is none. The diff, the report and the bisect use
/// this one, so that a p-value reads the same wherever it appears.
pub fn fmt_p(p: Option<f64>) -> String {
    match p {
        Some(p) if p < 0.001 => "p<0.001".into(),
        Some(p) => format!("p={p:.3}"),
        None => String::new(),
    }
}

/// "q=0.012" (a q-value of the diff's family), or the p-value where no q-value exists.
pub(super) fn fmt_test(c: &Comparison) -> String {
    match (c.q_value, c.p_value) {
        (Some(q), Some(p)) if q != p => match q {
            q if q < 0.001 => "q<0.001".into(),
            q => format!("q={q:.3}"),
        },
        _ => fmt_p(c.p_value),
    }
}

/// What the relative change of `c` reads: "new" from a zero baseline, "gone" to a zero
/// candidate, else the percentage with its interval.
fn relative_part(c: &Comparison) -> Option<String> {
    match (c.baseline.median, c.candidate.median) {
        (Some(b), Some(k)) if b == 0.0 && k > 0.0 => return Some("new".into()),
        (Some(b), Some(k)) if b > 0.0 && k == 0.0 => return Some("gone".into()),
        _ => {}
    }
    let r = c.relative?;
    let mut s = pct(r);
    if let Some(ci) = c.ci {
        let bound = |b: Option<f64>| b.map(pct).unwrap_or_else(|| "n/a".into());
        let _ = write!(s, " [{}, {}]", bound(ci.lo), bound(ci.hi));
    }
    Some(s)
}

/// "+5.15 ms +42.8% [+30.1%, +55.0%]": the change statistic ([`Comparison::statistic`])
/// and its relative size; "new" or "gone" where a side's median is 0.
pub(super) fn delta_cell(c: &Comparison) -> String {
    let mut s = c
        .delta
        .map(|d| signed(c.unit, d))
        .unwrap_or_else(|| "-".into());
    if let Some(r) = relative_part(c) {
        let _ = write!(s, " {r}");
    }
    s
}

/// Why an inconclusive comparison whose relative interval excludes 0 is inconclusive,
/// in words: its test over the family did not pass, or its interval did not clear a
/// floor. None for other comparisons.
fn unchanged_because(c: &Comparison) -> Option<String> {
    let (Some(ci), Some(rule)) = (c.ci, c.rule) else {
        return None;
    };
    let (Some(lo), Some(hi)) = (ci.lo, ci.hi) else {
        return None;
    };
    if c.verdict != super::compare::Verdict::Inconclusive || (lo <= 0.0 && hi >= 0.0) {
        return None;
    }
    let test = c.q_value.or(c.p_value).unwrap_or(1.0);
    let which = if c.q_value.is_some() && c.q_value != c.p_value {
        "q"
    } else {
        "p"
    };
    if test >= rule.alpha {
        return Some(format!("{which} ≥ {}", rule.alpha));
    }
    let rel_clear = lo > rule.noise_floor || hi < -rule.noise_floor;
    if !rel_clear {
        return Some(format!(
            "interval reaches inside the ±{}% floor",
            sig(rule.noise_floor * 100.0)
        ));
    }
    Some(format!(
        "change reaches inside the {} floor",
        fmt_value(c.unit, rule.abs_floor)
    ))
}

/// "about 14 more pairs to resolve ±1%": how many more reps a side (pairs, when paired)
/// would resolve an inconclusive comparison at the spread seen.
pub(super) fn more_reps_words(c: &Comparison, n: usize) -> String {
    let what = if c.pairs.is_some() {
        "pair"
    } else {
        "rep a side"
    };
    let what = match (n, c.pairs.is_some()) {
        (1, _) => what.to_string(),
        (_, true) => "pairs".to_string(),
        (_, false) => "reps a side".to_string(),
    };
    let floor = c
        .rule
        .map(|r| format!(" ±{}%", sig(r.noise_floor * 100.0)))
        .unwrap_or_default();
    if n >= 1_000_000 {
        format!("far more {what} to resolve{floor}")
    } else {
        format!("about {n} more {what} to resolve{floor}")
    }
}

fn sig(x: f64) -> String {
    let s = format!("{x:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Which floor an equivalent comparison's 1 − alpha interval lies inside, in words:
/// "inside ±1%", or "inside ±1.123 ms" for the absolute floor.
pub(super) fn equivalent_because(c: &Comparison) -> Option<String> {
    if c.verdict != super::compare::Verdict::Equivalent || c.exact {
        return None;
    }
    let rule = c.rule?;
    let inside = |i: Option<crate::stats::Interval>, f: f64| matches!(i.map(|i| (i.lo, i.hi)), Some((Some(lo), Some(hi))) if lo >= -f && hi <= f);
    if inside(c.ci, rule.noise_floor) {
        Some(format!("inside ±{}%", rule.noise_floor * 100.0))
    } else {
        inside(c.delta_ci, rule.abs_floor)
            .then(|| format!("inside ±{}", fmt_value(c.unit, rule.abs_floor)))
    }
}

/// Why a comparison's verdict is what it is, where words help: the reason the diff
/// recorded (`Comparison::why`), else the floor an equivalent row lies inside or the
/// rule an inconclusive one missed.
pub(super) fn reason(c: &Comparison) -> Option<String> {
    c.why
        .clone()
        .or_else(|| equivalent_because(c))
        .or_else(|| unchanged_because(c))
}

/// "regressed (q=0.004)", "inconclusive (p=0.02; interval reaches inside the ±1% floor)".
pub(super) fn verdict_cell(c: &Comparison) -> String {
    let p = fmt_test(c);
    if c.exact {
        return format!("{} (exact)", c.verdict);
    }
    let mut parts: Vec<String> = Vec::new();
    if !p.is_empty() {
        parts.push(p);
    }
    if let Some(why) = reason(c) {
        parts.push(why);
    }
    if let Some(n) = c.more_reps {
        parts.push(more_reps_words(c, n));
    }
    if parts.is_empty() {
        c.verdict.to_string()
    } else {
        format!("{} ({})", c.verdict, parts.join("; "))
    }
}

/// What a measure is, in the words of the tables' Measure column.
pub(super) fn measure_label(m: &Measure) -> String {
    match m {
        Measure::Total => "total".into(),
        Measure::SelfTime => "self".into(),
        Measure::Unattributed => "unattributed".into(),
        Measure::CriticalSelf => "self on critical path".into(),
        Measure::GpuBusy => "GPU busy".into(),
        Measure::ProcessCpu => "process CPU time".into(),
        Measure::BusyCores => "busy cores (process CPU / wall)".into(),
        Measure::Counter(c) => c.clone(),
    }
}
