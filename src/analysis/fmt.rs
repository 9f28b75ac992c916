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

/// "+5.15 ms +42.8% [+30.1%, +55.0%]" (relative part only where defined).
pub(super) fn delta_cell(c: &Comparison) -> String {
    let mut s = c
        .delta
        .map(|d| signed(c.unit, d))
        .unwrap_or_else(|| "-".into());
    if let Some(r) = c.relative {
        let _ = write!(s, " {}", pct(r));
    }
    if let Some(ci) = c.ci {
        let bound = |b: Option<f64>| b.map(pct).unwrap_or_else(|| "n/a".into());
        let _ = write!(s, " [{}, {}]", bound(ci.lo), bound(ci.hi));
    }
    s
}

pub(super) fn verdict_cell(c: &Comparison) -> String {
    let p = fmt_p(c.p_value);
    if c.exact {
        format!("{} (exact)", c.verdict)
    } else if p.is_empty() {
        c.verdict.to_string()
    } else {
        format!("{} ({p})", c.verdict)
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
