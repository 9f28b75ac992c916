//! The recorder's own cost, measured in the process that records (as Tracy measures its
//! per-zone cost at start-up): spans opened and closed back to back on this thread, in
//! batches, the median batch divided by its spans. A parent span with many children
//! holds about this much of recorder time per child in its self time; `gapscope diff`
//! says so where it matters (`analysis::diff_notes`). Written to meta.json with the
//! clock the spans used ([`RecorderMeta`]).

use std::sync::Mutex;

use super::{counters_enabled, drain_trace, keeper, process_cpu, Span};

/// What meta.json says about the span recorder of the run's process.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RecorderMeta {
    /// "tsc" (calibrated against CLOCK_MONOTONIC) or "clock_gettime".
    pub clock: String,
    /// Why the clock is not the TSC, where it is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tsc_khz: Option<u64>,
    /// Largest |span clock − CLOCK_MONOTONIC| measured so far in this process, ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_error_ns: Option<u64>,
    /// How many comparisons `clock_error_ns` is the largest of.
    #[serde(default)]
    pub clock_checks: u64,
    /// "interpolated" or "exact" (see `trace::process_cpu`).
    pub process_cpu: String,
    /// Period of the process CPU samples spans are interpolated from, ns.
    pub process_cpu_sample_period_ns: u64,
    /// One span opened and closed, counters off, ns.
    pub span_cost_ns: f64,
    /// One span with the perf-event counters read at both ends, ns; absent where this
    /// thread's counters cannot be opened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span_cost_counters_ns: Option<f64>,
}

const BATCHES: usize = 21;
const SPANS_PER_BATCH: u64 = 1_000;

/// Median cost of one span (enter + exit) on this thread, ns, with the recorder's
/// settings as they are (counters as switched, process CPU mode).
pub fn span_cost_ns() -> f64 {
    median_per_op(SPANS_PER_BATCH, || {
        let s = Span::enter("gapscope_recorder_cost");
        std::hint::black_box(&s);
    })
}

/// Median cost of the two counter-group reads a span with counters adds, ns; `None`
/// where this thread's counters cannot be opened.
pub fn counter_pair_cost_ns() -> Option<f64> {
    crate::counters::read_thread()?;
    Some(median_per_op(SPANS_PER_BATCH / 10, || {
        std::hint::black_box(crate::counters::read_thread());
        std::hint::black_box(crate::counters::read_thread());
    }))
}

fn median_per_op(per_batch: u64, op: impl Fn()) -> f64 {
    let root = Span::enter("gapscope_recorder_calibration");
    let mut per: Vec<f64> = (0..BATCHES)
        .map(|_| {
            let t0 = super::now_ns();
            for _ in 0..per_batch {
                op();
            }
            (super::now_ns() - t0) as f64 / per_batch as f64
        })
        .collect();
    let trace = root.trace();
    drop(root);
    drain_trace(trace);
    per.sort_by(f64::total_cmp);
    per[BATCHES / 2]
}

/// Describes the recorder for meta.json: the clock (after its start-up calibration, at
/// most 200 ms), and the span cost, measured once per process and process CPU mode on
/// a thread of its own (so that its spans join no trace of the caller's).
pub fn recorder_meta() -> RecorderMeta {
    let info = super::clock_info(200);
    /// Per process CPU mode: ns per span without counters, and with them where readable.
    type Costs = Option<(f64, Option<f64>)>;
    static MEASURED: Mutex<[Costs; 2]> = Mutex::new([None; 2]);
    let slot = process_cpu::mode() as usize;
    let mut measured = MEASURED.lock().unwrap_or_else(|e| e.into_inner());
    let (span, counters) = *measured[slot].get_or_insert_with(|| {
        let on = counters_enabled();
        std::thread::scope(|s| {
            s.spawn(|| {
                let span = span_cost_ns();
                // With counters on, the span cost above already holds the reads.
                let counters = if on {
                    Some(span)
                } else {
                    counter_pair_cost_ns().map(|c| span + c)
                };
                (span, counters)
            })
            .join()
            .expect("measuring the recorder opens and closes spans only")
        })
    });
    drop(measured);
    let round = |v: f64| (v * 10.0).round() / 10.0;
    RecorderMeta {
        clock: info.source.to_string(),
        clock_reason: info.reason,
        tsc_khz: info.tsc_khz,
        clock_error_ns: info.max_error_ns,
        clock_checks: info.checks,
        process_cpu: process_cpu::mode().as_str().to_string(),
        process_cpu_sample_period_ns: keeper::TICK_NS,
        span_cost_ns: round(span),
        span_cost_counters_ns: counters.map(round),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recorder_measures_a_positive_cost_and_names_its_clock() {
        let m = recorder_meta();
        assert!(m.span_cost_ns > 0.0 && m.span_cost_ns < 1e6, "{m:?}");
        assert!(m.clock == "tsc" || m.clock_reason.is_some(), "{m:?}");
        if let Some(c) = m.span_cost_counters_ns {
            assert!(c >= m.span_cost_ns, "{m:?}");
        }
        let back: RecorderMeta = serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
        assert_eq!(back, m);
    }
}
