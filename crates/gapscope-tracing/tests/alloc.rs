//! The layer's hot path makes no allocation per span: a counting global allocator
//! counts the allocations of many spans with fields, after a warm-up that lets the
//! registry's pool and the layer's table grow.

use std::alloc::{GlobalAlloc, Layout, System};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tracing_subscriber::prelude::*;

struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: the caller's contract is the system allocator's.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: as above.
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn spans(n: u64) {
    for i in 0..n {
        let outer = tracing::info_span!("outer", i, label = "phase", ok = true).entered();
        let inner = tracing::info_span!("inner", bytes = i * 8, dbg = ?(i, "x"));
        inner.in_scope(|| std::hint::black_box(i));
        drop(inner);
        drop(outer);
    }
}

/// Allocations while `n` nested spans with fields open and close, after a warm-up.
fn allocations_of(layer: gapscope_tracing::GapscopeLayer, n: u64) -> u64 {
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        spans(1000);
        ALLOCS.store(0, Ordering::Relaxed);
        COUNTING.store(true, Ordering::Relaxed);
        spans(n);
        COUNTING.store(false, Ordering::Relaxed);
    });
    ALLOCS.load(Ordering::Relaxed)
}

/// The counter is process-wide: one test at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
static HOST_NS: AtomicU64 = AtomicU64::new(0);

fn no_host_span() -> Option<gapscope_tracing::HostContext> {
    None
}
fn sum_durations(f: &gapscope_tracing::Finished<'_>) {
    HOST_NS.fetch_add(f.end_ns - f.start_ns, Ordering::Relaxed);
}
static SUMMING: gapscope_tracing::HostSink = gapscope_tracing::HostSink {
    current: no_host_span,
    finished: sum_durations,
};

#[test]
fn spans_in_host_mode_allocate_nothing_in_the_layer() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let layer = gapscope_tracing::GapscopeLayer::host_for_tests(&SUMMING);
    let n = allocations_of(layer, 10_000);
    assert_eq!(n, 0, "{n} allocations over 20000 spans");
    assert!(HOST_NS.load(Ordering::Relaxed) > 0);
}

#[test]
fn spans_in_line_mode_allocate_nothing() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let null = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/null")
        .unwrap();
    // SAFETY: set before any thread of this test binary reads the environment.
    unsafe { std::env::set_var("GAPSCOPE_SPAN_FD", null.as_raw_fd().to_string()) };
    let layer = gapscope_tracing::layer();
    assert!(layer.is_active(), "GAPSCOPE_SPAN_FD is set: span-line mode");
    let n = allocations_of(layer, 10_000);
    assert_eq!(n, 0, "{n} allocations over 20000 spans");
    // The check can fail: a layer that boxes per span is seen.
    let boxing = tracing_subscriber::registry().with(Boxing);
    tracing::subscriber::with_default(boxing, || {
        ALLOCS.store(0, Ordering::Relaxed);
        COUNTING.store(true, Ordering::Relaxed);
        spans(100);
        COUNTING.store(false, Ordering::Relaxed);
    });
    assert!(ALLOCS.load(Ordering::Relaxed) >= 200);
    drop(null);
}

/// A layer that keeps a boxed value per span in the registry's extensions.
struct Boxing;
impl<S> tracing_subscriber::Layer<S> for Boxing
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_new_span(
        &self,
        _: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        if let Some(s) = ctx.span(id) {
            s.extensions_mut().insert(id.into_u64());
        }
    }
}
