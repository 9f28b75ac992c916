//! Cost of one span (created, entered, exited, closed; two fields) under: no subscriber,
//! tracing-subscriber's registry alone (a no-op layer stack), the registry with this
//! layer in span-line mode (lines to /dev/null) and in host mode (a sink that adds up
//! durations), and the registry with tracing-chrome's layer (events to a file).
//! Results: evidence/tracing_overhead/README.md.

use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};

use criterion::{criterion_group, criterion_main, Criterion};
use tracing_subscriber::prelude::*;

fn one_span(i: u64) {
    let s = tracing::info_span!("phase", i, label = "msm");
    let _e = s.enter();
    std::hint::black_box(i);
}

fn bench_with(c: &mut Criterion, name: &str, dispatch: tracing::Dispatch) {
    tracing::dispatcher::with_default(&dispatch, || {
        let mut i = 0u64;
        c.bench_function(name, |b| {
            b.iter(|| {
                i += 1;
                one_span(i)
            })
        });
    });
}

static SUM_NS: AtomicU64 = AtomicU64::new(0);
fn no_host_span() -> Option<gapscope_tracing::HostContext> {
    None
}
fn add_up(f: &gapscope_tracing::Finished<'_>) {
    SUM_NS.fetch_add(f.end_ns - f.start_ns, Ordering::Relaxed);
}
static SINK: gapscope_tracing::HostSink = gapscope_tracing::HostSink {
    current: no_host_span,
    finished: add_up,
};

fn spans(c: &mut Criterion) {
    let null = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/null")
        .expect("/dev/null");
    // SAFETY: set before any other thread of the benchmark reads the environment.
    unsafe { std::env::set_var("GAPSCOPE_SPAN_FD", null.as_raw_fd().to_string()) };

    bench_with(
        c,
        "span/no_subscriber",
        tracing::Dispatch::new(tracing::subscriber::NoSubscriber::default()),
    );
    bench_with(
        c,
        "span/registry_only",
        tracing::Dispatch::new(tracing_subscriber::registry()),
    );
    let lines = gapscope_tracing::layer();
    assert!(lines.is_active());
    bench_with(
        c,
        "span/gapscope_lines",
        tracing::Dispatch::new(tracing_subscriber::registry().with(lines)),
    );
    bench_with(
        c,
        "span/gapscope_host",
        tracing::Dispatch::new(
            tracing_subscriber::registry()
                .with(gapscope_tracing::GapscopeLayer::host_for_tests(&SINK)),
        ),
    );
    let dir = std::env::temp_dir().join(format!("gapscope-bench-chrome-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let (chrome, guard) = tracing_chrome::ChromeLayerBuilder::new()
        .file(dir.join("trace.json"))
        .build();
    bench_with(
        c,
        "span/tracing_chrome",
        tracing::Dispatch::new(tracing_subscriber::registry().with(chrome)),
    );
    drop(guard);
    let _ = std::fs::remove_dir_all(&dir);
    drop(null);
}

criterion_group!(benches, spans);
criterion_main!(benches);
