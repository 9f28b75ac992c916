//! The end-of-run table: median phase times per variant (measured, verified reps only).

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::phases::PhaseSpec;
use crate::stats::median;
use crate::store::{RepStatus, RunData};

/// Rows shown: (span, label, self time rather than total). The summary's phases of the
/// run's span tree, indented by depth and labelled for `backend` (None: variants of
/// several backends), with the wrapper's unattributed (self) time under it.
fn rows(phases: &PhaseSpec, backend: Option<&str>) -> Vec<(String, String, bool)> {
    let mut out = Vec::new();
    for p in &phases.summary {
        let name = p.span.clone();
        let label = match p.depth {
            0 => format!("total ({name})"),
            d => format!("{}{}", "  ".repeat(d - 1), phases.label(&name, backend)),
        };
        out.push((name.clone(), label, false));
        if Some(&name) == phases.wrapper.as_ref() {
            out.push((name, "  unattributed".to_string(), true));
        }
    }
    out
}

/// Median over reps of the per-rep sum of each summary phase's time (total, and self
/// time of the wrapper), whichever thread it ran on.
pub fn phase_medians(data: &RunData, variant: &str) -> BTreeMap<(String, bool), f64> {
    medians_of(data, variant, &rows(data.meta.phases(), None))
}

fn medians_of(
    data: &RunData,
    variant: &str,
    rows: &[(String, String, bool)],
) -> BTreeMap<(String, bool), f64> {
    let ok: std::collections::HashSet<u32> = data
        .runs
        .iter()
        .filter(|r| r.variant == variant && !r.warmup && r.status == RepStatus::Ok)
        .map(|r| r.rep)
        .collect();
    // One pass over the spans (a program may send a million, under a hundred names):
    // per name asked for, per rep, the summed total and self time.
    let mut per_name: std::collections::HashMap<&str, BTreeMap<u32, (u64, u64)>> = rows
        .iter()
        .map(|(name, ..)| (name.as_str(), BTreeMap::new()))
        .collect();
    for s in data.spans.iter().filter(|s| ok.contains(&s.rep)) {
        if let Some(per_rep) = per_name.get_mut(s.name.as_str()) {
            let e = per_rep.entry(s.rep).or_default();
            e.0 = e.0.saturating_add(s.duration_ns);
            e.1 = e.1.saturating_add(s.self_ns);
        }
    }
    let mut out = BTreeMap::new();
    for (name, _, selft) in rows {
        let Some(per_rep) = per_name.get(name.as_str()) else {
            continue;
        };
        let v: Vec<f64> = per_rep
            .values()
            .map(|&(total, own)| if *selft { own } else { total } as f64)
            .collect();
        if let Some(m) = median(&v) {
            out.insert((name.to_string(), *selft), m);
        }
    }
    out
}

/// Phase medians in ms, one column per variant, plus rep counts.
pub fn phase_table(data: &RunData) -> String {
    let variants: Vec<String> = data.meta.variants.iter().map(|v| v.name.clone()).collect();
    let rows = match &data.meta.external {
        Some(_) => crate::summary_external::rows(data),
        None => rows(data.meta.phases(), backend_of(data)),
    };
    let cols: Vec<_> = variants
        .iter()
        .map(|v| medians_of(data, v, &rows))
        .collect();
    let width = rows
        .iter()
        .map(|(_, l, _)| l.chars().count())
        .max()
        .unwrap_or(0)
        .max(20);
    let mut s = String::new();
    match &data.meta.external {
        Some(e) => {
            let _ = writeln!(s, "{} — {}", data.meta.experiment, e.command.join(" "));
        }
        None => {
            let _ = writeln!(
                s,
                "{} — {}",
                data.meta.experiment,
                data.meta.workload.describe()
            );
        }
    }
    let _ = write!(s, "{:<width$}", "phase (median ms)");
    for v in &variants {
        let _ = write!(s, " {:>14}", v);
    }
    s.push('\n');
    for (name, label, selft) in &rows {
        let (name, selft) = (name.as_str(), *selft);
        if cols
            .iter()
            .all(|c| !c.contains_key(&(name.to_string(), selft)))
        {
            continue;
        }
        let _ = write!(s, "{label:<width$}");
        for c in &cols {
            match c.get(&(name.to_string(), selft)) {
                Some(ns) => {
                    let _ = write!(s, " {:>14.2}", ns / 1e6);
                }
                None => {
                    let _ = write!(s, " {:>14}", "-");
                }
            }
        }
        s.push('\n');
    }
    let _ = write!(s, "{:<width$}", "reps ok/failed");
    for v in &variants {
        let ok = data
            .runs
            .iter()
            .filter(|r| &r.variant == v && !r.warmup && r.status == RepStatus::Ok)
            .count();
        let bad = data
            .runs
            .iter()
            .filter(|r| &r.variant == v && !r.warmup && r.status == RepStatus::Failed)
            .count();
        let _ = write!(s, " {:>14}", format!("{ok}/{bad}"));
    }
    s.push('\n');
    if let Some(e) = &data.meta.external {
        s.push_str(&crate::summary_external::line_counts(e, &variants, width));
    }
    for l in crate::profile::summary_lines(&data.dir, &data.meta.profile) {
        let _ = writeln!(s, "{l}");
    }
    s
}

/// The backend of every variant, or `None` when they differ.
fn backend_of(data: &RunData) -> Option<&str> {
    let backends: std::collections::BTreeSet<&str> = data
        .meta
        .variants
        .iter()
        .map(|v| v.backend.as_str())
        .collect();
    match backends.len() {
        0 => Some(data.meta.workload.backend()),
        1 => backends.first().copied(),
        _ => None,
    }
}
