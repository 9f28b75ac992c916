//! Per-rep metric values of a run folder, as the history stores them: for every span
//! name of each measured rep (not a warm-up, status ok, verified), `NAME.total` (sum of
//! its durations), `NAME.self`, `NAME.critical_self` (self time of its occurrences on the
//! rep's critical path, by the diff's rule: [`SpanRow::on_critical_path`]), `NAME.process_cpu` and `NAME.COUNTER` for each
//! spans.csv counter column, the last two only where every occurrence has a value.

use std::collections::BTreeMap;

use crate::store::{RepStatus, RunData, SpanRow};

/// spans.csv's counter columns.
pub const COUNTER_COLUMNS: [&str; 6] = [
    "instructions",
    "branches",
    "cycles",
    "task_clock_ns",
    "page_faults",
    "context_switches",
];

/// Measures a metric name may end with (besides a counter column).
pub const MEASURES: [&str; 4] = ["total", "self", "critical_self", "process_cpu"];

/// Checks `SPAN.MEASURE`; the error says what to write.
pub fn check_metric(metric: &str) -> Result<(), String> {
    let ok = metric.rsplit_once('.').is_some_and(|(span, m)| {
        !span.is_empty() && (MEASURES.contains(&m) || COUNTER_COLUMNS.contains(&m))
    });
    if ok {
        Ok(())
    } else {
        Err(format!(
            "metric {metric:?}: write SPAN.MEASURE with MEASURE one of {}, {} (e.g. prove.total, gpu_prove.self)",
            MEASURES.join(", "),
            COUNTER_COLUMNS.join(", ")
        ))
    }
}

/// One measured rep of one variant: metric → value.
#[derive(Debug, Clone, PartialEq)]
pub struct RepValues {
    pub variant: String,
    pub rep: u32,
    pub values: BTreeMap<String, f64>,
}

fn add(slot: &mut Option<Option<f64>>, v: Option<u64>) {
    // None: not seen yet; Some(None): an occurrence without a value.
    *slot = Some(match (*slot, v) {
        (None, v) => v.map(|x| x as f64),
        (Some(Some(a)), Some(b)) => Some(a + b as f64),
        _ => None,
    });
}

/// The values of every measured rep of `run`.
pub fn of_run(run: &RunData) -> Vec<RepValues> {
    let mut by_rep: BTreeMap<(u32, &str), Vec<&SpanRow>> = BTreeMap::new();
    for s in &run.spans {
        by_rep
            .entry((s.rep, s.variant.as_str()))
            .or_default()
            .push(s);
    }
    let mut out = Vec::new();
    for r in &run.runs {
        if r.warmup || r.status != RepStatus::Ok || !r.checked {
            continue;
        }
        let Some(spans) = by_rep.get(&(r.rep, r.variant.as_str())) else {
            continue;
        };
        let by_id: std::collections::HashMap<u64, &SpanRow> =
            spans.iter().map(|s| (s.span_id, *s)).collect();
        let mut total: BTreeMap<&str, (f64, f64, f64)> = BTreeMap::new();
        let mut optional: BTreeMap<(&str, &str), Option<Option<f64>>> = BTreeMap::new();
        let mut critical = std::collections::HashMap::new();
        for s in spans {
            let t = total.entry(s.name.as_str()).or_default();
            t.0 += s.duration_ns as f64;
            t.1 += s.self_ns as f64;
            if s.on_critical_path_memo(|id| by_id.get(&id).copied(), spans.len(), &mut critical) {
                t.2 += s.self_ns as f64;
            }
            add(
                optional
                    .entry((s.name.as_str(), "process_cpu"))
                    .or_default(),
                s.process_cpu_ns.get(),
            );
            for c in COUNTER_COLUMNS {
                add(
                    optional.entry((s.name.as_str(), c)).or_default(),
                    s.counter(c),
                );
            }
        }
        let mut values = BTreeMap::new();
        for (name, (tot, slf, crit)) in total {
            values.insert(format!("{name}.total"), tot);
            values.insert(format!("{name}.self"), slf);
            values.insert(format!("{name}.critical_self"), crit);
        }
        for ((name, m), v) in optional {
            if let Some(Some(v)) = v {
                values.insert(format!("{name}.{m}"), v);
            }
        }
        out.push(RepValues {
            variant: r.variant.clone(),
            rep: r.rep,
            values,
        });
    }
    out
}
