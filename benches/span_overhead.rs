//! Cost of one span (enter + exit) on the recorder: counters off, counters on, and
//! through the C ABI, and of the process CPU clock pair every span reads. Each sample
//! opens `iters` spans under one root; the root is drained outside the timed region so
//! buffers never grow across samples.

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use gapscope::trace::{self, ffi, Span};

fn timed(iters: u64, body: impl Fn()) -> Duration {
    let root = Span::enter("bench_root");
    let t0 = Instant::now();
    for _ in 0..iters {
        body();
    }
    let el = t0.elapsed();
    let t = root.trace();
    drop(root);
    trace::drain_trace(t);
    el
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("span_enter_exit");
    // The floor: a span needs two CLOCK_MONOTONIC reads whatever the recorder does.
    g.bench_function("clock_pair_floor", |b| {
        b.iter_custom(|iters| {
            timed(iters, || {
                std::hint::black_box(trace::now_ns());
                std::hint::black_box(trace::now_ns());
            })
        })
    });
    // What every span adds for the process CPU time: two CLOCK_PROCESS_CPUTIME_ID reads
    // (a real system call; the kernel sums the time of every thread of the process).
    g.bench_function("process_cpu_clock_pair", |b| {
        b.iter_custom(|iters| {
            timed(iters, || {
                std::hint::black_box(trace::process_cpu_ns());
                std::hint::black_box(trace::process_cpu_ns());
            })
        })
    });
    for (label, counters) in [("no_counters", false), ("with_counters", true)] {
        trace::set_counters_enabled(counters);
        g.bench_function(label, |b| {
            b.iter_custom(|iters| {
                timed(iters, || {
                    let s = Span::enter("bench_span");
                    std::hint::black_box(&s);
                })
            })
        });
    }
    trace::set_counters_enabled(false);
    g.bench_function("c_abi_no_counters", |b| {
        b.iter_custom(|iters| {
            timed(iters, || {
                // SAFETY: the literal is NUL-terminated.
                let h = unsafe { ffi::gapscope_span_enter(c"ffi_span".as_ptr()) };
                ffi::gapscope_span_exit(h);
            })
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
