//! The recorder's storage: each thread's stack of open spans, its finished spans, and
//! the per-thread buffers that [`super::drain_trace`] empties.
//!
//! The layout serves the hot path ([`super::open`], [`super::exit`]): a span's 64-byte
//! record is appended once, when it opens, to a vector that keeps its capacity across
//! publications, and finished in place when it closes; the stack of open spans holds
//! each one's place in that vector, and draining removes a trace's spans in place, so
//! that a thread that records steadily stops allocating (and stops touching fresh pages)
//! after its first traces. Absent values are sentinels rather than `Option`s (ids start
//! at [`ID_BLOCK`], so 0 is never a span); attributes, counters and exact process CPU
//! live behind one pointer ([`Extra`]), null for the spans that have none.

use std::cell::{Cell, UnsafeCell};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use super::AttrValue;
use crate::counters::CounterValues;

/// No parent (span ids start at [`ID_BLOCK`]).
pub(super) const NO_PARENT: u64 = 0;
/// No process CPU reading.
pub(super) const NO_CPU: u64 = u64::MAX;

/// `end_ns` of a record whose span is still open.
pub(super) const OPEN: u64 = u64::MAX;

/// An open span on a thread's stack (what a child and the span's exit need without
/// reading its record).
#[derive(Clone, Copy)]
pub(super) struct OpenSpan {
    pub id: u64,
    pub trace: u64,
    pub slot: usize,
}

/// What a span carries beyond its times: attributes, counters, exact process CPU. Most
/// spans have none of it, so it lives behind one pointer that stays null for them.
pub(super) struct Extra {
    pub attrs: Vec<(&'static str, AttrValue)>,
    /// While open: the counters at the start (counters on); then their delta.
    pub counters: Option<CounterValues>,
    /// Exact mode only, while open: the reading at the start; then the two reads'
    /// difference. [`NO_CPU`] otherwise.
    pub process_cpu_ns: u64,
}

impl Extra {
    pub fn empty() -> Extra {
        Extra {
            attrs: Vec::new(),
            counters: None,
            process_cpu_ns: NO_CPU,
        }
    }
}

/// A span's 64-byte record, written when it opens and finished in place when it closes;
/// thread information is attached at drain time.
pub(super) struct Finished {
    pub id: u64,
    pub parent: u64,
    pub trace: u64,
    pub name: &'static str,
    pub start_ns: u64,
    /// [`OPEN`] while the span is open.
    pub end_ns: u64,
    pub extra: Option<Box<Extra>>,
}

impl Finished {
    /// The span's extras, made on first use.
    pub fn extra_mut(&mut self) -> &mut Extra {
        self.extra.get_or_insert_with(|| Box::new(Extra::empty()))
    }
}

/// Finished spans of one thread, visible to [`super::drain_trace`].
pub(super) struct SharedBuffer {
    pub thread_id: u64,
    pub thread_name: Arc<str>,
    pub spans: Mutex<Vec<Finished>>,
}

pub(super) type Buffer = Arc<SharedBuffer>;

pub(super) struct ThreadState {
    /// The open spans, innermost last: their ids, traces and where their records are in
    /// `local` (increasing).
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
    static STATE: UnsafeCell<ThreadState> = UnsafeCell::new(ThreadState::new());
    /// Where this thread's [`STATE`] lives once it exists: read with no lazy-init check
    /// and no call (a constant-initialised thread-local without a destructor is a plain
    /// load from the thread's block), so a span's two visits to its thread's state cost
    /// what a minimal recorder's one does. Cleared when the state is destroyed.
    static STATE_PTR: Cell<*mut ThreadState> = const { Cell::new(std::ptr::null_mut()) };
    /// Set while [`with_state`] runs (debug builds): a nested call is a bug.
    static IN_STATE: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` on this thread's recorder state. `f` must not call back into the recorder
/// (no span, no drain): nothing in this module does, and debug builds check it.
///
/// # Panics
/// During or after the destruction of the thread's locals, like any thread-local.
#[inline(always)]
pub(super) fn with_state<R>(f: impl FnOnce(&mut ThreadState) -> R) -> R {
    let mut p = STATE_PTR.get();
    if p.is_null() {
        p = state_slow();
    }
    debug_assert!(
        !IN_STATE.replace(true),
        "the recorder's state entered twice"
    );
    // SAFETY: a non-null STATE_PTR points at this thread's STATE, which lives until the
    // thread's locals are destroyed; its Drop clears STATE_PTR first. Only this thread
    // reaches it, and never twice at once: `f` does not call back into the recorder
    // (checked above in debug builds), and the recorder's callbacks (mirror, emulator)
    // run outside this function.
    let r = f(unsafe { &mut *p });
    #[cfg(debug_assertions)]
    IN_STATE.set(false);
    r
}

#[cold]
#[inline(never)]
fn state_slow() -> *mut ThreadState {
    STATE.with(|s| {
        let p = s.get();
        STATE_PTR.set(p);
        p
    })
}

impl Drop for ThreadState {
    fn drop(&mut self) {
        STATE_PTR.set(std::ptr::null_mut());
    }
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
