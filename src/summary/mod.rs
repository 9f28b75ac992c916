//! The end-of-run table: median phase times per variant (measured, verified reps only).

pub mod command;

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;

use crate::phases::PhaseSpec;
use crate::stats::median;
use crate::store::{RepStatus, RunData, Shared, SpanRow, StoreError};
use command::Walks;

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

/// Per variant, per span name, per rep: the summed total and self time.
type Sums = Vec<HashMap<Shared, BTreeMap<u32, (u64, u64)>>>;

/// One reading of the spans, a rep at a time (a folder's spans may be left in it): per
/// variant of `variants`, per span name, per measured ok rep, the summed total and self
/// time of its occurrences, whichever thread they ran on; the walks of the reps in
/// `walk`; and each rep's spans handed to `also`.
fn read_sums(
    data: &RunData,
    variants: &[String],
    walk: &[u32],
    mut also: impl FnMut(&[&SpanRow]),
) -> Result<(Sums, Walks), StoreError> {
    // Per measured ok rep, its variant's column.
    let column: HashMap<u32, usize> = (data.runs.iter())
        .filter(|r| !r.warmup && r.status == RepStatus::Ok)
        .filter_map(|r| Some((r.rep, variants.iter().position(|v| *v == r.variant)?)))
        .collect();
    let mut sums: Sums = vec![HashMap::new(); variants.len()];
    let mut walks = Walks::new();
    data.for_each_rep(|spans| {
        if let Some(rep) = spans.first().map(|s| s.rep).filter(|r| walk.contains(r)) {
            walks.insert(rep, command::walk(spans));
        }
        for s in spans {
            let Some(&c) = column.get(&s.rep) else {
                continue;
            };
            if !sums[c].contains_key(s.name.as_str()) {
                sums[c].insert(s.name.clone(), BTreeMap::new());
            }
            let per_rep = sums[c].get_mut(s.name.as_str()).expect("just added");
            let e = per_rep.entry(s.rep).or_default();
            e.0 = e.0.saturating_add(s.duration_ns);
            e.1 = e.1.saturating_add(s.self_ns);
        }
        also(spans);
    })?;
    Ok((sums, walks))
}

/// Median over reps of the per-rep sum of each row's time (total, or self time).
fn medians_of(
    sums: &HashMap<Shared, BTreeMap<u32, (u64, u64)>>,
    rows: &[(String, String, bool)],
) -> BTreeMap<(String, bool), f64> {
    let mut out = BTreeMap::new();
    for (name, _, selft) in rows {
        let Some(per_rep) = sums.get(name.as_str()) else {
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
    phase_table_and(data, |_| {}).unwrap_or_else(|e| format!("{e}\n"))
}

/// [`phase_table`], each rep's spans also handed to `also` on the way (one reading of a
/// folder whose spans were left in it serves both); the reading's error where it stops.
pub fn phase_table_and(
    data: &RunData,
    also: impl FnMut(&[&SpanRow]),
) -> Result<String, StoreError> {
    // One function for the table: the first reps, the sums read rep by rep, the rows of
    // the workload's kind, their medians and the columns' width all feed the one text,
    // written in the order it prints.
    let variants: Vec<String> = data.meta.variants.iter().map(|v| v.name.clone()).collect();
    let firsts = match &data.meta.command_workload {
        Some(_) => command::first_reps(data),
        None => Vec::new(),
    };
    let (sums, mut walks) = read_sums(data, &variants, &firsts, also)?;
    let rows = match &data.meta.command_workload {
        Some(_) => command::rows(data, &firsts, &mut walks),
        None => rows(data.meta.phases(), backend_of(data)),
    };
    let cols: Vec<_> = sums.iter().map(|c| medians_of(c, &rows)).collect();
    let width = rows
        .iter()
        .map(|(_, l, _)| l.chars().count())
        .max()
        .unwrap_or(0)
        .max(20);
    let mut s = String::new();
    match &data.meta.command_workload {
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
    if let Some(e) = &data.meta.command_workload {
        s.push_str(&command::line_counts(e, &variants, width));
    }
    for l in crate::profile::summary_lines(&data.dir, &data.meta.profile) {
        let _ = writeln!(s, "{l}");
    }
    Ok(s)
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
