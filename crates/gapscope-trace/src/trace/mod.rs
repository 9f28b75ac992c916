//! Span recorder: the bottom of the pipeline (ARCHITECTURE.md). The prover, telemetry
//! and C++/CUDA code (through [`ffi`]) record spans here; the store turns a drained trace
//! into rows.
//!
//! Spans nest per thread through a thread-local stack; a span started on another thread
//! names its parent explicitly ([`SpanContext`]). Every span belongs to a *trace* (the id
//! of its root span), so several traces can be recorded at once in one process (parallel
//! tests, a prover and its background drops) and each is drained on its own.
//!
//! Timestamps are CLOCK_MONOTONIC nanoseconds, the clock `std::time::Instant` reads on
//! Linux, so GPU activity converted to that clock lands on the same axis. They are read
//! from the TSC where it is invariant, on a line calibrated against CLOCK_MONOTONIC
//! ([`clock`]), kept by the recorder's background thread ([`keeper`]).
//!
//! A span without counters makes no system call: two clock reads, a push and a pop on
//! a thread-local stack. Its process CPU time is interpolated at drain time from the
//! keeper's 1 kHz samples ([`process_cpu`]), or read at both ends in exact mode.
//! Finished spans go to a per-thread buffer behind an uncontended mutex; the only shared
//! write on the hot path is the id counter, once per 4096 spans. Counter reads (one
//! `read(2)` of a perf-event group) happen only when counters are switched on. Under
//! callgrind (`counters = "emulated"`) every span start and end is also a dump request
//! to the emulator ([`crate::counters::emulated`]). What a span costs is measured at
//! start-up ([`cost`]) and written to meta.json.

mod buffer;
pub mod clock;
pub mod clock_check;
pub mod cost;
pub mod ffi;
mod keeper;
pub mod owned;
pub mod process_cpu;
pub mod selftime;

use std::marker::PhantomData;
use std::sync::{Arc, Mutex, OnceLock};

use buffer::{with_state, Extra, Finished, OpenSpan, NO_CPU, NO_PARENT};

use crate::counters::{self, emulated, CounterValues};
use crate::hot;
pub use process_cpu::{CpuSource, ProcessCpuMode};

/// The span clock for a span's hot path, which has read [`hot`]'s word already: the TSC
/// straight away where it is the clock.
#[inline(always)]
fn span_now(hot: u8) -> u64 {
    if hot & hot::CLOCK_NOT_TSC == 0 {
        clock::tsc_now()
    } else {
        now_ns()
    }
}

/// Nanoseconds on CLOCK_MONOTONIC (the clock behind `Instant`), from the TSC where it
/// is calibrated ([`clock`]).
#[inline]
pub fn now_ns() -> u64 {
    match clock::read() {
        Some(t) => t,
        None => {
            keeper::start();
            clock::monotonic_ns()
        }
    }
}

/// What the span clock knows about itself, after waiting for its start-up calibration
/// (at most `wait_ms`) so that a run's meta.json names the clock its spans use.
pub fn clock_info(wait_ms: u64) -> clock::ClockInfo {
    now_ns();
    let deadline = clock::monotonic_ns() + wait_ms * 1_000_000;
    while !keeper::calibrated() && clock::monotonic_ns() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    clock::info_now()
}

/// CPU time of the whole process so far (CLOCK_PROCESS_CPUTIME_ID: every thread,
/// including those a C/C++ library started), in nanoseconds; `None` where the clock
/// cannot be read.
#[inline]
pub fn process_cpu_ns() -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    (rc == 0).then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// CPU time so far of process `pid` (every thread, also those that ended; not its own
/// child processes), in nanoseconds: the same clock as [`process_cpu_ns`], read from
/// outside. Readable until the process is reaped; `None` after, or where unreadable.
pub fn process_cpu_ns_of(pid: i32) -> Option<u64> {
    let mut clock: libc::clockid_t = 0;
    // SAFETY: `clock` is a valid, writable clockid_t.
    if unsafe { libc::clock_getcpuclockid(pid, &mut clock) } != 0 {
        return None;
    }
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    (rc == 0).then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// A value attached to a span (sizes, byte counts, GPU-event milliseconds, labels).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(untagged)]
pub enum AttrValue {
    U64(u64),
    I64(i64),
    F64(f64),
    Str(String),
}

impl std::fmt::Display for AttrValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AttrValue::U64(v) => write!(f, "{v}"),
            AttrValue::I64(v) => write!(f, "{v}"),
            AttrValue::F64(v) => write!(f, "{v}"),
            AttrValue::Str(v) => write!(f, "{v}"),
        }
    }
}

macro_rules! attr_from {
    ($($t:ty => $variant:ident as $cast:ty),*) => {$(
        impl From<$t> for AttrValue {
            fn from(v: $t) -> Self { AttrValue::$variant(v as $cast) }
        }
    )*};
}
attr_from!(u64 => U64 as u64, usize => U64 as u64, u32 => U64 as u64, i64 => I64 as i64, i32 => I64 as i64, f64 => F64 as f64);
impl From<&str> for AttrValue {
    fn from(v: &str) -> Self {
        AttrValue::Str(v.to_string())
    }
}
impl From<String> for AttrValue {
    fn from(v: String) -> Self {
        AttrValue::Str(v)
    }
}

/// One finished span.
#[derive(Debug, Clone)]
pub struct SpanRecord {
    pub id: u64,
    pub parent: Option<u64>,
    /// Id of the root span of the trace this span belongs to.
    pub trace: u64,
    pub name: &'static str,
    pub thread_id: u64,
    pub thread_name: Arc<str>,
    pub start_ns: u64,
    pub end_ns: u64,
    pub attrs: Vec<(&'static str, AttrValue)>,
    /// Counter deltas over the span, on the span's own thread; `None` when counters were off.
    pub counters: Option<CounterValues>,
    /// CPU time of the whole process (all threads) over the span; `None` where the
    /// process clock could not be read (or, interpolated, the samples did not reach).
    pub process_cpu_ns: Option<u64>,
    /// How `process_cpu_ns` was obtained; `None` with it.
    pub process_cpu_source: Option<CpuSource>,
    /// Exact mode: the interpolated value beside the exact one, to compare the two on
    /// the same span (spans.csv attribute `process_cpu_interpolated_ns`).
    pub process_cpu_interpolated_ns: Option<u64>,
}

impl SpanRecord {
    pub fn duration_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }
}

/// What another thread needs to open a child span of this one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpanContext {
    pub id: u64,
    pub trace: u64,
}

/// Mirrors span enters and exits into an outside tool (NVTX ranges for Nsight Systems).
/// Called on the span's own thread, after the span opens and after it closes.
pub trait SpanMirror: Send + Sync {
    fn enter(&self, name: &'static str);
    fn exit(&self, name: &'static str);
}

static MIRROR: OnceLock<Box<dyn SpanMirror>> = OnceLock::new();

/// Installs the process's span mirror (once; a second call is refused and returns
/// false) and switches it on. With no mirror on, it costs a span nothing (its bit in the
/// word the hot path reads anyway, [`crate::hot`]).
pub fn set_mirror(mirror: Box<dyn SpanMirror>) -> bool {
    let installed = MIRROR.set(mirror).is_ok();
    if installed {
        hot::set(hot::MIRROR, true);
    }
    installed
}

/// Pauses or resumes the installed mirror.
pub fn set_mirror_enabled(on: bool) {
    hot::set(hot::MIRROR, on && MIRROR.get().is_some());
}

/// Sends one range named `name` to the mirror, if it is on, without recording a span
/// (e.g. to let an NVTX tool do its first-range setup outside the measured spans).
pub fn mirror_mark(name: &'static str) {
    if let Some(m) = mirror() {
        m.enter(name);
        m.exit(name);
    }
}

#[inline]
fn mirror() -> Option<&'static dyn SpanMirror> {
    if hot::get() & hot::MIRROR != 0 {
        MIRROR.get().map(|m| m.as_ref())
    } else {
        None
    }
}

/// Switch per-span counter collection on or off for the whole process.
pub fn set_counters_enabled(on: bool) {
    hot::set(hot::COUNTERS, on);
}

pub fn counters_enabled() -> bool {
    hot::get() & hot::COUNTERS != 0
}

/// Interns a name so that spans can hold `&'static str` (names are few: span and
/// attribute names, plus `synthesis[i]` per circuit index).
pub fn intern(name: &str) -> &'static str {
    static NAMES: OnceLock<Mutex<std::collections::HashSet<&'static str>>> = OnceLock::new();
    let mut set = NAMES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(s) = set.get(name) {
        return s;
    }
    let leaked: &'static str = Box::leak(name.to_string().into_boxed_str());
    set.insert(leaked);
    leaked
}

fn read_counters() -> Option<CounterValues> {
    if counters_enabled() {
        counters::read_thread()
    } else {
        None
    }
}

/// Opens a span on this thread; its parent is the innermost open span of this thread.
/// Returns the span id (used by the C ABI, which has no guards).
pub fn enter(name: &'static str) -> u64 {
    enter_with_parent(name, None)
}

/// Opens a span whose parent lives on another thread (or `None` for the current one).
pub fn enter_with_parent(name: &'static str, parent: Option<SpanContext>) -> u64 {
    open(name, parent).id
}

#[inline]
fn open(name: &'static str, parent: Option<SpanContext>) -> SpanContext {
    // Counters and exact process CPU are read before the span's start time, so the
    // span holds as little of their reads as it can.
    let hot = hot::get();
    let extra = if hot & hot::EXTRAS != 0 {
        open_extra()
    } else {
        None
    };
    let (ctx, start_ns) = with_state(|s| {
        let id = s.new_id();
        let (parent, trace) = match parent {
            Some(ctx) => (ctx.id, ctx.trace),
            None => match s.stack.last() {
                Some(top) => (top.id, top.trace),
                None => (NO_PARENT, id),
            },
        };
        let start_ns = span_now(hot);
        s.stack.push(OpenSpan {
            id,
            trace,
            slot: s.local.len(),
        });
        s.local.push(Finished {
            id,
            parent,
            trace,
            name,
            start_ns,
            end_ns: buffer::OPEN,
            extra,
        });
        (SpanContext { id, trace }, start_ns)
    });
    process_cpu::refresh_if_stale(start_ns);
    if hot & (hot::MIRROR | hot::EMULATED) != 0 {
        open_hooks(name, ctx.id);
    }
    ctx
}

/// What a span's opening tells the mirror and the emulator.
#[cold]
#[inline(never)]
fn open_hooks(name: &'static str, id: u64) {
    if let Some(m) = mirror() {
        m.enter(name);
    }
    // Last, so that an emulated count holds as little of the recorder as possible.
    if emulated::active() {
        emulated::boundary(id, emulated::Edge::Start);
    }
}

/// A span's readings at its start, where counters or exact process CPU are on.
#[cold]
#[inline(never)]
fn open_extra() -> Option<Box<Extra>> {
    let counters = read_counters();
    let process_cpu_ns = if process_cpu::exact() {
        process_cpu_ns().unwrap_or(NO_CPU)
    } else {
        NO_CPU
    };
    Some(Box::new(Extra {
        counters,
        process_cpu_ns,
        ..Extra::empty()
    }))
}

/// Closes span `id` on this thread. Spans closed out of order are still closed; an id
/// that is not open on this thread is ignored (and reported as `false`).
#[inline]
pub fn exit(id: u64) -> bool {
    let hot = hot::get();
    if hot & hot::EMULATED != 0 {
        emulated::boundary(id, emulated::Edge::End);
    }
    let end_ns = span_now(hot);
    if hot & hot::EXTRAS != 0 {
        return exit_with_extras(id, end_ns, hot);
    }
    process_cpu::refresh_if_stale(end_ns);
    close(id, end_ns, hot, |_| {})
}

/// [`exit`] where counters or exact process CPU are on: their readings at the end, and
/// the span's differences.
#[cold]
#[inline(never)]
fn exit_with_extras(id: u64, end_ns: u64, hot: u8) -> bool {
    let end_counters = read_counters();
    let end_cpu = if process_cpu::exact() {
        process_cpu_ns()
    } else {
        None
    };
    process_cpu::refresh_if_stale(end_ns);
    close(id, end_ns, hot, |x| {
        x.counters = match (x.counters.take(), end_counters) {
            (Some(a), Some(b)) => Some(b.delta_since(&a)),
            _ => None,
        };
        x.process_cpu_ns = match end_cpu {
            Some(b) if x.process_cpu_ns != NO_CPU => b.saturating_sub(x.process_cpu_ns),
            _ => NO_CPU,
        };
    })
}

/// Finishes the record of span `id` at `end_ns` (`finish` completes its extras, if it
/// has any), publishing the thread's records when it was the outermost open span.
#[inline(always)]
fn close(id: u64, end_ns: u64, hot: u8, finish: impl FnOnce(&mut Extra)) -> bool {
    let closed = with_state(
        #[inline(always)]
        |s| {
            let slot = match s.stack.last() {
                Some(top) if top.id == id => {
                    let slot = top.slot;
                    s.stack.pop();
                    slot
                }
                _ => match s.stack.iter().rposition(|o| o.id == id) {
                    Some(p) => s.stack.remove(p).slot,
                    None => return None,
                },
            };
            let f = &mut s.local[slot];
            f.end_ns = end_ns;
            if let Some(x) = f.extra.as_deref_mut() {
                finish(x);
            }
            let name = f.name;
            if s.stack.is_empty() {
                s.publish();
            }
            Some(name)
        },
    );
    match closed {
        Some(name) => {
            if hot & hot::MIRROR != 0 {
                if let Some(m) = mirror() {
                    m.exit(name);
                }
            }
            true
        }
        None => false,
    }
}

/// Sets an attribute on an open span of this thread; `false` if it is not open here.
pub fn set_attr(id: u64, key: &'static str, value: AttrValue) -> bool {
    with_state(
        |s| match s.stack.iter().rev().find(|o| o.id == id).map(|o| o.slot) {
            Some(slot) => {
                let attrs = &mut s.local[slot].extra_mut().attrs;
                match attrs.iter_mut().find(|(k, _)| *k == key) {
                    Some(slot) => slot.1 = value,
                    None => attrs.push((key, value)),
                }
                true
            }
            None => false,
        },
    )
}

/// The innermost open span of this thread.
pub fn current() -> Option<SpanContext> {
    with_state(|s| {
        s.stack.last().map(|o| SpanContext {
            id: o.id,
            trace: o.trace,
        })
    })
}

/// Removes and returns every finished span of `trace`, from all threads, by start time.
/// Spans finished on a thread are visible here once that thread has no span open (a
/// trace's spans are complete once its root has closed and its workers are idle).
pub fn drain_trace(trace: u64) -> Vec<SpanRecord> {
    // This thread may hold unpublished spans under a still-open outer span.
    with_state(|s| s.publish());
    let mut out = Vec::new();
    let mut reg = buffer::registry().lock().unwrap_or_else(|e| e.into_inner());
    for buf in reg.iter() {
        let mine = buffer::take_trace(buf, trace);
        out.extend(mine.into_iter().map(|f| {
            let x = f.extra.map(|x| *x).unwrap_or_else(Extra::empty);
            SpanRecord {
                id: f.id,
                parent: (f.parent != NO_PARENT).then_some(f.parent),
                trace: f.trace,
                name: f.name,
                thread_id: buf.thread_id,
                thread_name: buf.thread_name.clone(),
                start_ns: f.start_ns,
                end_ns: f.end_ns,
                attrs: x.attrs,
                counters: x.counters,
                process_cpu_ns: (x.process_cpu_ns != NO_CPU).then_some(x.process_cpu_ns),
                process_cpu_source: None,
                process_cpu_interpolated_ns: None,
            }
        }));
    }
    // Buffers of exited threads that hold nothing are no longer needed.
    reg.retain(|b| {
        Arc::strong_count(b) > 1 || !b.spans.lock().map(|v| v.is_empty()).unwrap_or(true)
    });
    drop(reg);
    fill_process_cpu(&mut out);
    out.sort_by_key(|r| (r.start_ns, r.id));
    out
}

/// Interpolated process CPU for the drained spans: their value where no exact one was
/// read, else an audit attribute beside the exact value.
fn fill_process_cpu(spans: &mut [SpanRecord]) {
    let interp = process_cpu::over(spans.iter().map(|s| (s.start_ns, s.end_ns)));
    for (s, v) in spans.iter_mut().zip(interp) {
        if s.process_cpu_ns.is_some() {
            s.process_cpu_source = Some(CpuSource::Exact);
            s.process_cpu_interpolated_ns = v;
        } else if let Some(v) = v {
            s.process_cpu_ns = Some(v);
            s.process_cpu_source = Some(CpuSource::Interpolated);
        }
    }
}

/// RAII guard of an open span. Must be dropped on the thread that opened it.
#[must_use = "a span closes when its guard is dropped; bind it to a variable"]
pub struct Span {
    id: u64,
    trace: u64,
    _not_send: PhantomData<*const ()>,
}

impl Span {
    /// Opens a child of this thread's innermost open span (or a new trace's root).
    /// Inlined, like the close in its drop, so that a span costs no call frames.
    #[inline]
    pub fn enter(name: &'static str) -> Span {
        let SpanContext { id, trace } = open(name, None);
        Span {
            id,
            trace,
            _not_send: PhantomData,
        }
    }

    /// Opens a child of `parent`, which may live on another thread.
    pub fn child_of(name: &'static str, parent: SpanContext) -> Span {
        let id = enter_with_parent(name, Some(parent));
        Span {
            id,
            trace: parent.trace,
            _not_send: PhantomData,
        }
    }

    /// Opens a span named at run time (interned once per distinct name).
    pub fn enter_dyn(name: &str) -> Span {
        Span::enter(intern(name))
    }

    pub fn id(&self) -> u64 {
        self.id
    }

    pub fn trace(&self) -> u64 {
        self.trace
    }

    pub fn context(&self) -> SpanContext {
        SpanContext {
            id: self.id,
            trace: self.trace,
        }
    }

    pub fn set_attr(&self, key: &'static str, value: impl Into<AttrValue>) {
        set_attr(self.id, key, value.into());
    }

    /// Runs `f` inside a new span named `name`.
    pub fn in_scope<R>(name: &'static str, f: impl FnOnce() -> R) -> R {
        let _g = Span::enter(name);
        f()
    }
}

impl Drop for Span {
    #[inline]
    fn drop(&mut self) {
        exit(self.id);
    }
}

#[cfg(test)]
mod tests;

/// Logs every span enter/exit to stderr as it happens (set `GAPSCOPE_LOG_SPANS=1`), to
/// see where a run that never finishes is stuck. Uses the mirror slot, so it is not
/// installed when NVTX mirroring is.
pub struct StderrSpanLog;

impl SpanMirror for StderrSpanLog {
    fn enter(&self, name: &'static str) {
        let t = std::thread::current();
        eprintln!(
            "[span {:.3}s {}] > {name}",
            now_ns() as f64 / 1e9,
            t.name().unwrap_or("?")
        );
    }
    fn exit(&self, name: &'static str) {
        let t = std::thread::current();
        eprintln!(
            "[span {:.3}s {}] < {name}",
            now_ns() as f64 / 1e9,
            t.name().unwrap_or("?")
        );
    }
}
