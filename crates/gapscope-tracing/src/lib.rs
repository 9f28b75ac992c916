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
//!   one `X` line of gapscope's line protocol, kept in its thread's batch and written to
//!   that pipe a batch at a time ([`batch`]: at 16 KiB, at 50 ms, at thread and process
//!   exit, or on [`flush`]); each thread that makes spans names itself once (`T` line);
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
//! # Names
//! A span's name is `tracing`'s (for `#[instrument]`, the function's), qualified by the
//! module it was made in where that is not the crate's root: `apply` in
//! `mini_redis::cmd::get` is `get::apply`, so that `Get::apply` and `Set::apply` stay
//! apart. `GAPSCOPE_TRACING_NAMES` = `plain` | `module` (the default) | `target` (the
//! whole target, `mini_redis::cmd::get::apply`), or [`GapscopeLayer::names`], chooses.
//!
//! The hot path does not allocate: open spans live in slots of a sharded table that
//! are reused ([`table`]), fields are copied inline, span lines are written into the
//! thread's batch, which keeps its capacity (tests/alloc.rs counts allocations).

pub mod attrs;
pub mod batch;
mod line;
pub mod table;

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
    /// That thread's name, where it has one (host mode; `None` in span lines, which
    /// name each thread once in a `T` line).
    pub thread_name: Option<&'static str>,
    /// CLOCK_MONOTONIC nanoseconds.
    pub start_ns: u64,
    pub end_ns: u64,
    /// CPU time of the whole process over the span (CLOCK_PROCESS_CPUTIME_ID), where
    /// the layer reads that clock ([`CPU_ENV`]).
    pub process_cpu_ns: Option<u64>,
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
    Lines(batch::Out),
    Off,
}

/// How span names are qualified in span lines (see the crate's documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Names {
    /// `tracing`'s name as it is: `apply`.
    Plain,
    /// Prefixed by the last part of the span's target where it has more than one:
    /// `get::apply` in `mini_redis::cmd::get`, `run` in a crate's root.
    Module,
    /// Prefixed by the whole target: `mini_redis::cmd::get::apply`.
    Target,
}

/// The environment variable that chooses [`Names`] (`plain`, `module`, `target`).
pub const NAMES_ENV: &str = "GAPSCOPE_TRACING_NAMES";

impl Names {
    /// From `GAPSCOPE_TRACING_NAMES`; [`Names::Module`] where unset or not understood
    /// (the layer must never stop a program).
    pub fn from_env() -> Names {
        match std::env::var(NAMES_ENV).as_deref() {
            Ok("plain") => Names::Plain,
            Ok("target") => Names::Target,
            _ => Names::Module,
        }
    }
}

/// The environment variable that makes the layer read the process's CPU clock at both
/// ends of every span (`exact`), giving each span its exact CPU time. Off by default: the
/// clock is a system call (1.1 to 1.3 µs on the 2-core VM, `/tmp/clk`-style loop of
/// `clock_gettime(CLOCK_PROCESS_CPUTIME_ID)`), two per span, more than the rest of the
/// layer; gapscope then interpolates each span's CPU time from its own readings of the
/// program's CPU clock (every 5 ms).
pub const CPU_ENV: &str = "GAPSCOPE_TRACING_CPU";

/// The layer; make it with [`layer`].
pub struct GapscopeLayer {
    mode: Mode,
    names: Names,
    /// Read the process CPU clock at both ends of each span.
    cpu: bool,
    open: Table,
    next_id: AtomicU64,
}

/// Writes every thread's kept span lines now. The layer does this by itself when a
/// thread or the process exits; call it before leaving by a way that skips `atexit`
/// (`libc::_exit`, an `exec`).
pub fn flush() {
    batch::flush();
}

/// The layer, in the mode this process calls for (see the crate's documentation).
pub fn layer() -> GapscopeLayer {
    let mode = match HOST.get() {
        Some(h) => Mode::Host(h),
        None if gapscope_emit::span_fd_set() => Mode::Lines(batch::Out::Emit),
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
            names: Names::from_env(),
            cpu: std::env::var(CPU_ENV).is_ok_and(|v| v == "exact"),
            open: Table::new(),
            next_id: AtomicU64::new(first),
        }
    }

    /// The layer with span names qualified as `names` says (instead of
    /// `GAPSCOPE_TRACING_NAMES`).
    pub fn names(mut self, names: Names) -> Self {
        self.names = names;
        self
    }

    /// The layer reading the process CPU clock at both ends of every span (`true`), or
    /// not (instead of `GAPSCOPE_TRACING_CPU`).
    pub fn process_cpu(mut self, exact: bool) -> Self {
        self.cpu = exact;
        self
    }

    /// Whether spans go anywhere (a host, or the span pipe).
    pub fn is_active(&self) -> bool {
        !matches!(self.mode, Mode::Off)
    }

    /// A layer in span-line mode whatever the environment (tests and benchmarks; lines
    /// go to `GAPSCOPE_SPAN_FD`, else stderr).
    #[doc(hidden)]
    pub fn lines_for_tests() -> Self {
        Self::with_mode(Mode::Lines(batch::Out::Emit))
    }

    /// A layer in span-line mode writing to `file` (tests and benchmarks).
    #[doc(hidden)]
    pub fn lines_to_file_for_tests(file: &'static std::fs::File) -> Self {
        Self::with_mode(Mode::Lines(batch::Out::File(file)))
    }

    /// A layer in host mode with `sink`, without registering it process-wide (tests).
    #[doc(hidden)]
    pub fn host_for_tests(sink: &'static HostSink) -> Self {
        Self::with_mode(Mode::Host(sink))
    }
}

thread_local! {
    static TID: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    static NAME: std::cell::Cell<Option<Option<&'static str>>> = const { std::cell::Cell::new(None) };
}

/// This thread's id, read once per thread (host mode).
fn thread_id() -> u64 {
    TID.with(|t| {
        if t.get() == 0 {
            t.set(gapscope_emit::thread_id());
        }
        t.get()
    })
}

/// This thread's name, copied once per thread that makes spans in host mode (a few
/// bytes kept for the life of the process, so that a span's creator can be named on
/// the thread that closes it).
fn thread_name() -> Option<&'static str> {
    NAME.try_with(|n| match n.get() {
        Some(known) => known,
        None => {
            let name = std::thread::current()
                .name()
                .map(|s| &*Box::leak(s.to_owned().into_boxed_str()));
            n.set(Some(name));
            name
        }
    })
    .ok()
    .flatten()
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
        let start_ns = gapscope_emit::now_ns();
        let tid = match self.mode {
            Mode::Lines(out) => batch::thread(out, start_ns),
            _ => thread_id(),
        };
        let thread_name = match self.mode {
            Mode::Host(_) => thread_name(),
            _ => None,
        };
        let open = Open {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            thread_name,
            parent,
            trace,
            name: attrs.metadata().name(),
            target: attrs.metadata().target(),
            tid,
            cpu_start_ns: if self.cpu {
                gapscope_emit::process_cpu_ns()
            } else {
                0
            },
            start_ns,
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
        let cpu_end_ns = self.cpu.then(gapscope_emit::process_cpu_ns);
        let Some(o) = self.open.remove(id.into_u64()) else {
            return;
        };
        let f = Finished {
            id: o.id,
            parent: o.parent,
            trace: o.trace,
            name: o.name,
            tid: o.tid,
            thread_name: o.thread_name,
            start_ns: o.start_ns,
            end_ns: end_ns.max(o.start_ns),
            process_cpu_ns: cpu_end_ns.map(|c| c.saturating_sub(o.cpu_start_ns)),
            attrs: &o.attrs,
        };
        match self.mode {
            Mode::Host(h) => (h.finished)(&f),
            Mode::Lines(out) => {
                batch::append(out, end_ns, |_, b| {
                    line::span_line(b, &f, self.names, o.target)
                });
            }
            Mode::Off => {}
        }
    }
}

#[cfg(test)]
mod tests;
