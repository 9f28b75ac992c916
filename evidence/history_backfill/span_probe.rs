//! Span cost probe of one revision: opens 1,000,000 spans (enter + exit, no counters) on
//! gapscope's recorder, in chunks of 10,000 under a root drained between chunks, and
//! reports the timed loops as one span line, `span_loop`, whose duration is the sum of
//! the loops: its milliseconds read as nanoseconds per span. Every revision of the
//! recorder since the first has the calls used here.
use std::time::Instant;

use gapscope::trace::{self, Span};

const SPANS: u64 = 1_000_000;
const CHUNK: u64 = 10_000;

fn chunk() -> u64 {
    let root = Span::enter("probe_root");
    let t0 = Instant::now();
    for _ in 0..CHUNK {
        let s = Span::enter("probe_span");
        std::hint::black_box(&s);
    }
    let el = t0.elapsed().as_nanos() as u64;
    let t = root.trace();
    drop(root);
    trace::drain_trace(t);
    el
}

fn main() {
    trace::set_counters_enabled(false);
    // Warm-up: the thread's buffers and the clock's vDSO page.
    for _ in 0..5 {
        chunk();
    }
    let start_ns = trace::now_ns();
    let mut loop_ns = 0;
    for _ in 0..SPANS / CHUNK {
        loop_ns += chunk();
    }
    println!(
        "@gapscope1 X {} {start_ns} {loop_ns} span_loop spans={SPANS} ns_per_span={:.1}",
        std::process::id(),
        loop_ns as f64 / SPANS as f64
    );
}
