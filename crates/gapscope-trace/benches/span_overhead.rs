//! Cost of one span (enter + exit) on the recorder: counters off (process CPU
//! interpolated, the default, and exact), counters on, and through the C ABI; of the
//! clock reads a span is built from; and of a minimal TSC recorder, the floor the
//! recorder's cost is held to (`minimal_tsc_recorder`: a span without counters may cost at
//! most 1.3× it, measured in the same run). Each sample opens `iters` spans under one root; the
//! root is drained outside the timed region so buffers never grow across samples.
//!
//! With `GAPSCOPE_BENCH_META=<file>` the recorder's self-description (clock, its
//! measured error, start-up span cost) is written there as JSON before the benchmarks,
//! for `evidence/span_cost/summarize.py`.

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use gapscope_trace::trace::{self, ffi, ProcessCpuMode, Span};

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

fn span() {
    let s = Span::enter("bench_span");
    std::hint::black_box(&s);
}

/// The floor a recorder is held to: the least a TSC span recorder can do. `rdtsc` at
/// enter and at exit, and at exit one (name, start tick, end tick) record pushed onto a
/// thread-local vector; no ids, no parents, ticks left unconverted. Nesting would have to
/// be recovered from times afterwards.
mod minimal {
    use std::cell::RefCell;

    thread_local! {
        static RECORDS: RefCell<Vec<(&'static str, u64, u64)>> = RefCell::new(Vec::with_capacity(1024));
    }

    #[inline]
    fn tick() -> u64 {
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: rdtsc exists on every x86_64 CPU and has no memory effects.
            unsafe { core::arch::x86_64::_rdtsc() }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            0
        }
    }

    pub struct Guard {
        name: &'static str,
        start: u64,
    }

    #[inline]
    pub fn enter(name: &'static str) -> Guard {
        Guard {
            name,
            start: tick(),
        }
    }

    impl Drop for Guard {
        #[inline]
        fn drop(&mut self) {
            let end = tick();
            RECORDS.with(|r| r.borrow_mut().push((self.name, self.start, end)));
        }
    }

    /// What the recorder holds, emptied (outside the timed region, like a drain).
    pub fn drain() -> usize {
        RECORDS.with(|r| {
            let mut r = r.borrow_mut();
            let n = r.len();
            r.clear();
            n
        })
    }
}

fn minimal_span() {
    let s = minimal::enter("bench_span");
    std::hint::black_box(&s);
}

fn bench(c: &mut Criterion) {
    // The clock's calibration runs on the keeper thread for ~20 ms after the first read;
    // wait for it so that every benchmark times the clock spans will use.
    let meta = trace::cost::recorder_meta();
    eprintln!("span recorder: {meta:?}");
    if let Ok(path) = std::env::var("GAPSCOPE_BENCH_META") {
        let json = serde_json::to_string_pretty(&meta).expect("serialisable");
        std::fs::write(&path, json).unwrap_or_else(|e| panic!("writing {path}: {e}"));
    }
    let mut g = c.benchmark_group("span_enter_exit");
    // The floor: a span needs two span-clock reads whatever the recorder does.
    g.bench_function("clock_pair_floor", |b| {
        b.iter_custom(|iters| {
            timed(iters, || {
                std::hint::black_box(trace::now_ns());
                std::hint::black_box(trace::now_ns());
            })
        })
    });
    // The same pair through clock_gettime (the vDSO), the clock spans used before the
    // TSC and still use where it is not invariant.
    g.bench_function("clock_gettime_pair", |b| {
        b.iter_custom(|iters| {
            timed(iters, || {
                std::hint::black_box(trace::clock::monotonic_ns());
                std::hint::black_box(trace::clock::monotonic_ns());
            })
        })
    });
    // What exact process CPU adds: two CLOCK_PROCESS_CPUTIME_ID reads (a real system
    // call; the kernel sums the time of every thread of the process).
    g.bench_function("process_cpu_clock_pair", |b| {
        b.iter_custom(|iters| {
            timed(iters, || {
                std::hint::black_box(trace::process_cpu_ns());
                std::hint::black_box(trace::process_cpu_ns());
            })
        })
    });
    trace::set_counters_enabled(false);
    trace::process_cpu::set_mode(ProcessCpuMode::Interpolated);
    g.bench_function("minimal_tsc_recorder", |b| {
        b.iter_custom(|iters| {
            let el = timed(iters, minimal_span);
            std::hint::black_box(minimal::drain());
            el
        })
    });
    g.bench_function("no_counters", |b| b.iter_custom(|iters| timed(iters, span)));
    trace::process_cpu::set_mode(ProcessCpuMode::Exact);
    g.bench_function("no_counters_exact_cpu", |b| {
        b.iter_custom(|iters| timed(iters, span))
    });
    trace::process_cpu::set_mode(ProcessCpuMode::Interpolated);
    // What counters on add: the perf-event group read at both ends.
    g.bench_function("counter_group_read_pair", |b| {
        b.iter_custom(|iters| {
            timed(iters, || {
                std::hint::black_box(gapscope_trace::counters::read_thread());
                std::hint::black_box(gapscope_trace::counters::read_thread());
            })
        })
    });
    trace::set_counters_enabled(true);
    g.bench_function("with_counters", |b| {
        b.iter_custom(|iters| timed(iters, span))
    });
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
