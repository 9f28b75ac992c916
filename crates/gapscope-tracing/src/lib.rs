//! `tracing` spans as gapscope spans: a [`Layer`] for any program that uses the `tracing`
//! crate. One dependency and one line:
//!
//! ```no_run
//! use tracing_subscriber::prelude::*;
//! tracing_subscriber::registry().with(gapscope_tracing::layer()).init();
//! ```
//!
//! The layer has three modes, chosen when [`layer`] is called:
//! - **inside gapscope** (a host registered a [`HostSink`] with [`set_host_sink`]): each
//!   finished span goes to the host, which records it in its span recorder; a span with
//!   no `tracing` parent nests under the host's innermost open span of its thread;
//! - **under gapscope** (`GAPSCOPE_SPAN_FD` names the span pipe): each finished span is
//!   one `X` line of gapscope's line protocol on that pipe;
//! - **anywhere else**: nothing (one branch per span callback).
//!
//! # Which events make a span
//! `tracing` has two pairs of callbacks: *new/close* (a span is created, and closed when
//! its last handle is dropped) and *enter/exit* (a thread starts or stops executing
//! inside it). In sync code the two coincide. In async code they do not: an
//! `#[instrument]`ed future is entered on every poll and exited at every `.await` that
//! yields, possibly on different threads, while new/close brackets the whole operation,
//! waits included. This layer records **new → close**: a span's duration is the wall
//! time of the operation, which is what a gap analysis asks of a wrapper. Its thread is
//! the thread that created it. A future's time between polls is thus inside its span;
//! the self time of the span (gapscope's "unattributed" time) then includes the awaits.
//!
//! Nesting follows `tracing`'s parents (the explicit `parent:` or the contextual
//! current span), also when the parent lives on another thread; spans carry ids
//! (`gs.id`, `gs.parent` in span lines) so that gapscope nests them by parent, not by time.
//! Fields become attributes ([`attrs::MAX_FIELDS`] per span, strings up to
//! [`attrs::MAX_STR`] bytes); `span.record(..)` updates them.
//!
//! The hot path does not allocate: open spans live in slots of a sharded table that
//! are reused ([`table`]), fields are copied inline, span lines are put together on the
//! stack (tests/alloc.rs counts allocations).

pub mod attrs;
pub mod table;

use std::cell::Cell;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use tracing_core::span::{Attributes, Id, Record};
use tracing_core::Subscriber;
use tracing_subscriber::layer::{Context, Layer};

pub use attrs::{Attrs, Value};
use table::{Open, Table};

/// A span the layer finished, as handed to a [`HostSink`].
pub struct Finished<'a> {
    /// The layer's id of the span: `HOST_ID_BASE` and up, never an id of the host's.
    pub id: u64,
    /// The parent's id (the layer's, or the host's from [`HostSink::current`]); 0: none.
    pub parent: u64,
    /// The host's trace (from [`HostSink::current`], inherited by children); 0: none.
    pub trace: u64,
    pub name: &'static str,
    /// The thread (gettid) that created the span.
    pub tid: u64,
    /// CLOCK_MONOTONIC nanoseconds.
    pub start_ns: u64,
    pub end_ns: u64,
    /// CPU time of the whole process over the span (CLOCK_PROCESS_CPUTIME_ID).
    pub process_cpu_ns: u64,
    pub attrs: &'a Attrs,
}

/// The host's innermost open span on the calling thread, as the parent of a span that
/// has no `tracing` parent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostContext {
    pub id: u64,
    pub trace: u64,
}

/// How a host (gapscope's own process) receives the spans: two plain functions, so that
/// this crate needs nothing of the host's.
pub struct HostSink {
    /// The host's innermost open span on this thread, if any.
    pub current: fn() -> Option<HostContext>,
    /// A finished span (called on the thread that closed it).
    pub finished: fn(&Finished<'_>),
}

/// Ids of layer spans in host mode start here, far above any id of gapscope's recorder
/// (which hands out blocks of 4096 from 4096 up).
pub const HOST_ID_BASE: u64 = 1 << 62;

static HOST: OnceLock<&'static HostSink> = OnceLock::new();

/// Registers the host's sink (once per process; a second call is refused with `false`).
/// Call it before [`layer`]: the mode is chosen when the layer is made.
pub fn set_host_sink(sink: &'static HostSink) -> bool {
    HOST.set(sink).is_ok()
}

#[derive(Clone, Copy)]
enum Mode {
    Host(&'static HostSink),
    Lines,
    Off,
}

/// The layer; make it with [`layer`].
pub struct GapscopeLayer {
    mode: Mode,
    open: Table,
    next_id: AtomicU64,
}

/// The layer, in the mode this process calls for (see the crate's documentation).
pub fn layer() -> GapscopeLayer {
    let mode = match HOST.get() {
        Some(h) => Mode::Host(h),
        None if gapscope_emit::span_fd_set() => Mode::Lines,
        None => Mode::Off,
    };
    GapscopeLayer::with_mode(mode)
}

impl GapscopeLayer {
    fn with_mode(mode: Mode) -> Self {
        let first = match mode {
            Mode::Host(_) => HOST_ID_BASE,
            _ => 1,
        };
        GapscopeLayer {
            mode,
            open: Table::new(),
            next_id: AtomicU64::new(first),
        }
    }

    /// Whether spans go anywhere (a host, or the span pipe).
    pub fn is_active(&self) -> bool {
        !matches!(self.mode, Mode::Off)
    }

    /// A layer in span-line mode whatever the environment (tests and benchmarks; lines
    /// go to `GAPSCOPE_SPAN_FD`, else stderr).
    #[doc(hidden)]
    pub fn lines_for_tests() -> Self {
        Self::with_mode(Mode::Lines)
    }

    /// A layer in host mode with `sink`, without registering it process-wide (tests).
    #[doc(hidden)]
    pub fn host_for_tests(sink: &'static HostSink) -> Self {
        Self::with_mode(Mode::Host(sink))
    }
}

thread_local! {
    static TID: Cell<u64> = const { Cell::new(0) };
}

/// This thread's id, read once per thread.
fn thread_id() -> u64 {
    TID.with(|t| {
        if t.get() == 0 {
            t.set(gapscope_emit::thread_id());
        }
        t.get()
    })
}

impl<S: Subscriber> Layer<S> for GapscopeLayer {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if let Mode::Off = self.mode {
            return;
        }
        let parent_id = match attrs.parent() {
            Some(p) => Some(p.clone()),
            None if attrs.is_contextual() => ctx.current_span().id().cloned(),
            None => None,
        };
        let from_layer = parent_id.and_then(|p| self.open.with(p.into_u64(), |o| (o.id, o.trace)));
        let (parent, trace) = match (from_layer, self.mode) {
            (Some(pt), _) => pt,
            // A root of `tracing`'s tree nests under the host's open span on this thread.
            (None, Mode::Host(h)) => (h.current)().map(|c| (c.id, c.trace)).unwrap_or((0, 0)),
            (None, _) => (0, 0),
        };
        let mut fields = Attrs::default();
        attrs.record(&mut fields);
        let open = Open {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            parent,
            trace,
            name: attrs.metadata().name(),
            tid: thread_id(),
            cpu_start_ns: gapscope_emit::process_cpu_ns(),
            start_ns: gapscope_emit::now_ns(),
            attrs: fields,
        };
        self.open.insert(id.into_u64(), open);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _ctx: Context<'_, S>) {
        if let Mode::Off = self.mode {
            return;
        }
        self.open
            .with(id.into_u64(), |o| values.record(&mut o.attrs));
    }

    fn on_close(&self, id: Id, _ctx: Context<'_, S>) {
        if let Mode::Off = self.mode {
            return;
        }
        let end_ns = gapscope_emit::now_ns();
        let cpu_end_ns = gapscope_emit::process_cpu_ns();
        let Some(o) = self.open.remove(id.into_u64()) else {
            return;
        };
        let f = Finished {
            id: o.id,
            parent: o.parent,
            trace: o.trace,
            name: o.name,
            tid: o.tid,
            start_ns: o.start_ns,
            end_ns: end_ns.max(o.start_ns),
            process_cpu_ns: cpu_end_ns.saturating_sub(o.cpu_start_ns),
            attrs: &o.attrs,
        };
        match self.mode {
            Mode::Host(h) => (h.finished)(&f),
            Mode::Lines => write_span_line(&f),
            Mode::Off => {}
        }
    }
}

/// A fixed buffer that `write!` fills; what does not fit marks it overflowed.
struct StackBuf {
    buf: [u8; gapscope_emit::MAX_BODY],
    len: usize,
    overflow: bool,
}

impl std::fmt::Write for StackBuf {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.len + s.len();
        if end > self.buf.len() {
            self.overflow = true;
            return Err(std::fmt::Error);
        }
        self.buf[self.len..end].copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

impl StackBuf {
    /// Writes `s` as one word of a line, at most `max` bytes, with what the protocol
    /// cannot carry replaced by '_': spaces and controls always, '=' in a name, and in
    /// a key anything but `A-Z a-z 0-9 _ .`.
    fn word(&mut self, s: &str, max: usize, kind: Word) {
        let start = self.len;
        for c in s.chars() {
            let ok = match kind {
                Word::Key => c.is_ascii_alphanumeric() || c == '_' || c == '.',
                Word::Name => !(c.is_whitespace() || c.is_control() || c == '='),
                Word::Value => !(c.is_whitespace() || c.is_control()),
            };
            let c = if ok { c } else { '_' };
            if self.len - start + c.len_utf8() > max {
                break;
            }
            let mut b = [0u8; 4];
            if self.write_str(c.encode_utf8(&mut b)).is_err() {
                return;
            }
        }
        if self.len == start {
            let _ = self.write_str("_");
        }
    }
}

#[derive(Clone, Copy)]
enum Word {
    Name,
    Key,
    Value,
}

/// Writes `f` as one `X` line: `X <tid> <start> <duration> <name> gs.id=… gs.parent=…
/// process_cpu_ns=… fields…`. A line that would pass the protocol's limit loses fields
/// from the end rather than the span.
fn write_span_line(f: &Finished<'_>) {
    let mut b = StackBuf {
        buf: [0; gapscope_emit::MAX_BODY],
        len: 0,
        overflow: false,
    };
    let _ = write!(b, "X {} {} {} ", f.tid, f.start_ns, f.end_ns - f.start_ns);
    b.word(f.name, 128, Word::Name);
    let _ = write!(b, " gs.id={}", f.id);
    if f.parent != 0 {
        let _ = write!(b, " gs.parent={}", f.parent);
    }
    let _ = write!(b, " process_cpu_ns={}", f.process_cpu_ns);
    for (k, v) in f.attrs.iter() {
        let keep = b.len;
        let _ = b.write_str(" ");
        b.word(k, 64, Word::Key);
        let _ = b.write_str("=");
        match v {
            Value::Str(s) => b.word(s.as_str(), attrs::MAX_STR, Word::Value),
            v => {
                let _ = write!(b, "{v}");
            }
        }
        if b.overflow {
            b.len = keep;
            break;
        }
    }
    gapscope_emit::write_line_bytes(&b.buf[..b.len]);
}

#[cfg(test)]
mod tests;
