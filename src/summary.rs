//! The end-of-run table: median phase times per variant (measured, verified reps only).

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::store::{RepStatus, RunData};

/// Phases shown, with the column each reads (total or self time).
const PHASES: &[(&str, &str, bool)] = &[
    ("prove", "total (prove)", false),
    ("synthesis", "synthesis", false),
    ("gpu_prove", "gpu_prove", false),
    ("gpu_prove", "  unattributed", true),
    ("kernels", "  kernels", false),
    ("b_g2_msm", "  b_g2_msm", false),
    ("drop", "  drop", false),
    ("drop_assignments", "drop_assignments", false),
];

fn median(v: &mut [u64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_unstable();
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2] as f64
    } else {
        (v[n / 2 - 1] as f64 + v[n / 2] as f64) / 2.0
    })
}

/// Median over reps of the per-rep sum of `name`'s time on the thread of `prove`
/// (for `drop`, whichever thread it ran on).
pub fn phase_medians(data: &RunData, variant: &str) -> BTreeMap<(String, bool), f64> {
    let ok: std::collections::HashSet<u32> = data
        .runs
        .iter()
        .filter(|r| r.variant == variant && !r.warmup && r.status == RepStatus::Ok)
        .map(|r| r.rep)
        .collect();
    let mut out = BTreeMap::new();
    for &(name, _, selft) in PHASES {
        let mut per_rep: BTreeMap<u32, u64> = BTreeMap::new();
        for s in data
            .spans
            .iter()
            .filter(|s| ok.contains(&s.rep) && s.name == name)
        {
            *per_rep.entry(s.rep).or_default() += if selft { s.self_ns } else { s.duration_ns };
        }
        let mut v: Vec<u64> = per_rep.into_values().collect();
        if let Some(m) = median(&mut v) {
            out.insert((name.to_string(), selft), m);
        }
    }
    out
}

/// Phase medians in ms, one column per variant, plus rep counts.
pub fn phase_table(data: &RunData) -> String {
    let variants: Vec<String> = data.meta.variants.iter().map(|v| v.name.clone()).collect();
    let cols: Vec<_> = variants.iter().map(|v| phase_medians(data, v)).collect();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} — {} 2^{} × {} on {}",
        data.meta.experiment,
        data.meta.workload.circuit,
        data.meta.workload.log2_constraints,
        data.meta.workload.batch,
        data.meta.workload.backend
    );
    let _ = write!(s, "{:<20}", "phase (median ms)");
    for v in &variants {
        let _ = write!(s, " {:>14}", v);
    }
    s.push('\n');
    for &(name, label, selft) in PHASES {
        if cols
            .iter()
            .all(|c| !c.contains_key(&(name.to_string(), selft)))
        {
            continue;
        }
        let _ = write!(s, "{label:<20}");
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
    let _ = write!(s, "{:<20}", "reps ok/failed");
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
    s
}
