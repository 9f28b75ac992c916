//! Cost of one span (created, entered, exited, closed; two fields) under: no subscriber,
//! tracing-subscriber's registry alone (a no-op layer stack), the registry with this
//! layer in span-line mode (lines to /dev/null; to a pipe drained by a reader thread, as
//! under gapscope; with the process CPU clock read at both ends, `GAPSCOPE_TRACING_CPU=
//! exact`), in host mode (a sink that adds up durations), and the registry with
//! tracing-chrome's layer (events to a file), all in one run so that they can be
//! compared. Also the cost of one read of each clock the layer uses.
//!
//! Criterion times wall clock, which on a loaded machine holds the time the benchmark
//! waited for a core. The `cpu/` rows time the same spans in CPU time of the whole
//! process (`CLOCK_PROCESS_CPUTIME_ID`, read once per sample of many spans), which also
//! counts work a layer hands to a thread of its own (tracing-chrome's writer).
//! Results: evidence/tracing_overhead/README.md.

use std::io::Read;
use std::sync::atomic::{AtomicU64, Ordering};

use criterion::measurement::{Measurement, ValueFormatter, WallTime};
use criterion::{criterion_group, criterion_main, Criterion};
use tracing_subscriber::prelude::*;

fn one_span(i: u64) {
    let s = tracing::info_span!("phase", i, label = "msm");
    let _e = s.enter();
    std::hint::black_box(i);
}

/// CPU time of the whole process, in ns (formatted as times, like wall time).
struct ProcessCpu;

impl Measurement for ProcessCpu {
    type Intermediate = u64;
    type Value = u64;
    fn start(&self) -> u64 {
        gapscope_emit::process_cpu_ns()
    }
    fn end(&self, i: u64) -> u64 {
        gapscope_emit::process_cpu_ns().saturating_sub(i)
    }
    fn add(&self, a: &u64, b: &u64) -> u64 {
        a + b
    }
    fn zero(&self) -> u64 {
        0
    }
    fn to_f64(&self, v: &u64) -> f64 {
        *v as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        static WALL: WallTime = WallTime;
        WALL.formatter()
    }
}

fn bench_with<M: Measurement + 'static>(
    c: &mut Criterion<M>,
    name: &str,
    dispatch: tracing::Dispatch,
) {
    tracing::dispatcher::with_default(&dispatch, || {
        let mut i = 0u64;
        c.bench_function(name, |b| {
            b.iter(|| {
                i += 1;
                one_span(i)
            })
        });
    });
    gapscope_tracing::flush();
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

fn lines_to(file: &'static std::fs::File) -> gapscope_tracing::GapscopeLayer {
    gapscope_tracing::GapscopeLayer::lines_to_file_for_tests(file)
}

/// Bytes the pipe's reader read.
static PIPED: AtomicU64 = AtomicU64::new(0);

/// A pipe whose read end a thread drains, as gapscope's reader does: the writing end.
fn drained_pipe() -> &'static std::fs::File {
    let (mut r, w) = std::io::pipe().expect("pipe");
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n) = r.read(&mut buf) {
            if n == 0 {
                break;
            }
            PIPED.fetch_add(n as u64, Ordering::Relaxed);
        }
    });
    let w: std::fs::File = std::os::fd::OwnedFd::from(w).into();
    Box::leak(Box::new(w))
}

fn clocks(c: &mut Criterion) {
    c.bench_function("clock/monotonic", |b| b.iter(gapscope_emit::now_ns));
    c.bench_function("clock/process_cpu", |b| {
        b.iter(gapscope_emit::process_cpu_ns)
    });
}

fn spans(c: &mut Criterion) {
    let null: &'static std::fs::File = Box::leak(Box::new(
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/null")
            .expect("/dev/null"),
    ));
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
    bench_with(
        c,
        "span/gapscope_lines",
        tracing::Dispatch::new(tracing_subscriber::registry().with(lines_to(null))),
    );
    let pipe = drained_pipe();
    let piped = tracing::Dispatch::new(tracing_subscriber::registry().with(lines_to(pipe)));
    bench_with(c, "span/gapscope_lines_pipe", piped.clone());
    // One more span, so that the check below holds when a filter skipped the benchmark.
    tracing::dispatcher::with_default(&piped, || one_span(0));
    gapscope_tracing::flush();
    bench_with(
        c,
        "span/gapscope_lines_cpu",
        tracing::Dispatch::new(
            tracing_subscriber::registry().with(lines_to(null).process_cpu(true)),
        ),
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
    // The pipe's reader saw the lines (the pipe case measured real writes).
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert!(PIPED.load(Ordering::Relaxed) > 0);
}

/// The spans of [`spans`] that a comparison needs, in CPU time of the process; and
/// one span of gapscope-emit (`Scope`: a begin and an end line, each with the process
/// CPU clock read, each one `write(2)`), the cost of the protocol path for a Rust
/// program.
fn cpu(c: &mut Criterion<ProcessCpu>) {
    let null: &'static std::fs::File = Box::leak(Box::new(
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/null")
            .expect("/dev/null"),
    ));
    {
        use std::os::fd::AsRawFd;
        // SAFETY: the benchmark reads no environment on another thread meanwhile;
        // gapscope-emit opens its span pipe at its first line, below.
        unsafe { std::env::set_var(gapscope_emit::FD_ENV, null.as_raw_fd().to_string()) };
        c.bench_function("cpu/emit_scope", |b| {
            b.iter(|| drop(gapscope_emit::Scope::new("phase")))
        });
    }
    bench_with(
        c,
        "cpu/registry_only",
        tracing::Dispatch::new(tracing_subscriber::registry()),
    );
    bench_with(
        c,
        "cpu/gapscope_lines",
        tracing::Dispatch::new(tracing_subscriber::registry().with(lines_to(null))),
    );
    let dir =
        std::env::temp_dir().join(format!("gapscope-bench-chrome-cpu-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let (chrome, guard) = tracing_chrome::ChromeLayerBuilder::new()
        .file(dir.join("trace.json"))
        .build();
    bench_with(
        c,
        "cpu/tracing_chrome",
        tracing::Dispatch::new(tracing_subscriber::registry().with(chrome)),
    );
    drop(guard);
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(benches, spans, clocks);
criterion_group! {
    name = cpu_benches;
    config = Criterion::default().with_measurement(ProcessCpu);
    targets = cpu
}
criterion_main!(benches, cpu_benches);
