//! One metric's value in each measured rep of one variant, keyed by the rep's
//! iteration in the schedule: what a caller that judges reps as they arrive (the
//! bisect's steps) reads, with the sides reduced as the diff reduces them
//! ([`super::select`]) and logged as the diff logs them ([`super::compare::log_offset`]).

use super::compare::{log_offset, Measure, Unit};
use super::select::{Side, COUNTERS};
use crate::counters::CounterKind;
use crate::store::RunData;

/// Per measured rep of `variant` (succeeded and checked) that has a value of the metric
/// (`span` with `measure`: total, self, process CPU time or a spans.csv counter
/// column): its iteration and the log of its value plus the unit's offset. Empty when
/// no rep has one, or for a measure that is not one of those.
pub fn metric_logs(
    data: &RunData,
    variant: &str,
    span: &str,
    measure: &Measure,
) -> Vec<(u32, f64)> {
    // Loaded rows (the only ones given here) are read without error.
    let Ok(side) = Side::build(data, variant) else {
        return Vec::new();
    };
    let (values, unit) = match measure {
        Measure::Total => (side.times(span, |a| a.total_ns), Unit::Ns),
        Measure::SelfTime => (side.times(span, |a| a.self_ns), Unit::Ns),
        Measure::ProcessCpu => (side.span_process_cpu(span), Unit::Ns),
        Measure::Counter(c) => match COUNTERS.iter().position(|k| k.column() == c) {
            Some(k) if COUNTERS[k] == CounterKind::TaskClockNs => {
                (side.span_counter(span, k), Unit::Ns)
            }
            Some(k) => (side.span_counter(span, k), Unit::Count),
            None => return Vec::new(),
        },
        _ => return Vec::new(),
    };
    let offset = log_offset(unit);
    side.iterations
        .iter()
        .zip(values)
        .filter_map(|(&it, v)| Some((it, (v?.max(0.0) + offset).ln())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::synthetic::SyntheticRun;

    #[test]
    fn each_rep_with_the_span_gives_its_iteration_and_log() {
        let data = SyntheticRun::new().build();
        let names: Vec<String> = data.meta.variants.iter().map(|v| v.name.clone()).collect();
        let root = data.spans.iter().find(|s| s.parent_id.is_none()).unwrap();
        let v = metric_logs(&data, &names[0], &root.name, &Measure::Total);
        assert!(!v.is_empty());
        let reps = data
            .runs
            .iter()
            .filter(|r| r.variant == names[0] && !r.warmup)
            .count();
        assert_eq!(v.len(), reps);
        // The log of a duration in ns plus 1 µs: a rep of 1 µs to 1 h is 7 to 29.
        assert!(v.iter().all(|&(_, l)| (6.9..29.0).contains(&l)), "{v:?}");
        assert!(metric_logs(&data, &names[0], "no such span", &Measure::Total).is_empty());
        assert!(metric_logs(&data, &names[0], &root.name, &Measure::GpuBusy).is_empty());
    }
}
