//! The recorder's storage: each thread's stack of open spans, its finished spans, and
//! the per-thread buffers that [`super::drain_trace`] empties.
//!
//! The layout serves the hot path ([`super::open`], [`super::exit`]): a span's 80-byte
//! record is appended once, when it opens, to a vector that keeps its capacity across
//! publications, and finished in place when it closes; the stack of open spans holds 24
//! bytes per span (its id, trace and the record's place), and draining removes a trace's
//! spans in place, so that a thread that records steadily stops allocating (and stops
//! touching fresh pages) after its first traces. Absent values are sentinels rather than
//! `Option`s (ids start at [`ID_BLOCK`], so 0 is never a span), attributes and counter
//! starts live behind one pointer each, since most spans have neither.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use super::AttrValue;
use crate::counters::CounterValues;

/// No parent (span ids start at [`ID_BLOCK`]).
pub(super) const NO_PARENT: u64 = 0;
/// No process CPU reading.
pub(super) const NO_CPU: u64 = u64::MAX;

pub(super) type Attrs = Option<Box<Vec<(&'static str, AttrValue)>>>;

/// An open span on a thread's stack: where its record is in [`ThreadState::local`]. The
/// record itself is written once, when the span opens, and finished in place.
#[derive(Clone, Copy)]
pub(super) struct OpenSpan {
    pub id: u64,
    pub trace: u64,
    pub slot: usize,
}

/// `end_ns` of a record whose span is still open.
pub(super) const OPEN: u64 = u64::MAX;

/// A span's record, written when it opens and finished in place when it closes; thread
/// information is attached at drain time.
pub(super) struct Finished {
    pub id: u64,
    pub parent: u64,
    pub trace: u64,
    pub name: &'static str,
    pub start_ns: u64,
    /// [`OPEN`] while the span is open.
    pub end_ns: u64,
    pub attrs: Attrs,
    /// While open: the counters at the start (counters on); then their delta.
    pub counters: Option<Box<CounterValues>>,
    /// Exact mode only, while open: the reading at the start; then the two reads'
    /// difference. [`NO_CPU`] otherwise.
    pub process_cpu_ns: u64,
}

/// Finished spans of one thread, visible to [`super::drain_trace`].
pub(super) struct SharedBuffer {
    pub thread_id: u64,
    pub thread_name: Arc<str>,
    pub spans: Mutex<Vec<Finished>>,
}

pub(super) type Buffer = Arc<SharedBuffer>;

pub(super) struct ThreadState {
    /// Open spans, innermost last; their `slot`s increase from bottom to top.
    pub stack: Vec<OpenSpan>,
    /// Records of this thread's spans not yet published, open ones included; moved to
    /// `shared` whenever the stack empties, so the hot path takes no lock while spans
    /// are nested.
    pub local: Vec<Finished>,
    pub shared: Buffer,
    next_id: u64,
    id_limit: u64,
}

/// Ids are handed to threads in blocks, so opening a span touches no shared cache line.
pub(super) const ID_BLOCK: u64 = 4096;
static NEXT_BLOCK: AtomicU64 = AtomicU64::new(1);

pub(super) fn registry() -> &'static Mutex<Vec<Buffer>> {
    static REG: OnceLock<Mutex<Vec<Buffer>>> = OnceLock::new();
    REG.get_or_init(|| Mutex::new(Vec::new()))
}

thread_local! {
    pub(super) static STATE: RefCell<ThreadState> = RefCell::new(ThreadState::new());
}

impl ThreadState {
    fn new() -> Self {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::syscall(libc::SYS_gettid) } as u64;
        let name = std::thread::current()
            .name()
            .map(str::to_string)
            .unwrap_or_else(|| format!("thread-{tid}"));
        let shared: Buffer = Arc::new(SharedBuffer {
            thread_id: tid,
            thread_name: Arc::from(name),
            spans: Mutex::new(Vec::new()),
        });
        registry()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(shared.clone());
        ThreadState {
            stack: Vec::with_capacity(32),
            local: Vec::with_capacity(1024),
            shared,
            next_id: 0,
            id_limit: 0,
        }
    }

    #[inline]
    pub fn new_id(&mut self) -> u64 {
        if self.next_id == self.id_limit {
            let block = NEXT_BLOCK.fetch_add(1, Ordering::Relaxed);
            self.next_id = block * ID_BLOCK;
            self.id_limit = self.next_id + ID_BLOCK;
        }
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// Moves the finished spans to the shared buffer (both keep their capacity). With
    /// spans still open (a drain under an open outer span), their records stay, in
    /// order, and the stack is pointed at their new places.
    pub fn publish(&mut self) {
        if self.local.is_empty() {
            return;
        }
        let mut shared = self.shared.spans.lock().unwrap_or_else(|e| e.into_inner());
        if self.stack.is_empty() {
            shared.append(&mut self.local);
            return;
        }
        shared.extend(self.local.extract_if(.., |f| f.end_ns != OPEN));
        // Every record left is open and has one stack entry; both are in opening order.
        debug_assert_eq!(self.local.len(), self.stack.len());
        for (k, o) in self.stack.iter_mut().enumerate() {
            o.slot = k;
        }
    }
}

/// Removes `trace`'s spans from one thread's buffer, keeping the others in order and the
/// buffer's capacity.
pub(super) fn take_trace(buf: &SharedBuffer, trace: u64) -> Vec<Finished> {
    let mut b = buf.spans.lock().unwrap_or_else(|e| e.into_inner());
    // One pass: with no span of `trace` nothing moves and the empty result allocates
    // nothing.
    b.extract_if(.., |r| r.trace == trace).collect()
}
