//! Span lines kept per thread and written in batches: one `write(2)` per
//! [`gapscope_emit::ATOMIC_WRITE`] bytes of lines instead of one per span.
//!
//! A write to gapscope's span pipe costs a system call and wakes gapscope's reader,
//! which then takes the core from the program on a small machine: at one write per
//! span that was most of the layer's cost (evidence/tracing_overhead). Each thread now
//! appends its lines to its own buffer (a lock no other thread takes, except to flush
//! at exit) and writes it out when it holds [`BATCH_BYTES`], when its oldest line is
//! [`BATCH_AGE_NS`] old (checked at the thread's next span), when the thread exits, and
//! when the process exits (`atexit`, which `main`'s return and `std::process::exit`
//! run). [`flush`] writes every thread's lines now. Lines still kept when the process
//! dies of a signal or calls `_exit` are lost.
//!
//! The first time a thread makes a span it announces its name with a `T` line, so that
//! gapscope shows `tokio-runtime-worker`, not a thread id.

use std::cell::RefCell;
use std::fs::File;
use std::sync::{Arc, Mutex, Once, Weak};

/// Bytes a thread keeps before it writes them out.
pub const BATCH_BYTES: usize = 16 * 1024;
/// Age of a thread's oldest kept line past which its next span writes the batch out.
pub const BATCH_AGE_NS: u64 = 50_000_000;

/// Where a thread's lines go.
#[derive(Clone, Copy)]
pub enum Out {
    /// gapscope's span pipe (`GAPSCOPE_SPAN_FD`), else stderr.
    Emit,
    /// A file of the caller's (tests, benchmarks).
    File(&'static File),
}

impl Out {
    fn same(self, o: Out) -> bool {
        match (self, o) {
            (Out::Emit, Out::Emit) => true,
            (Out::File(a), Out::File(b)) => std::ptr::eq(a, b),
            _ => false,
        }
    }

    fn file(self) -> Option<&'static File> {
        match self {
            Out::Emit => None,
            Out::File(f) => Some(f),
        }
    }
}

struct Pending {
    out: Out,
    bytes: Vec<u8>,
    first_ns: u64,
    /// The process the kept lines belong to: a forked child does not write its parent's.
    pid: u32,
}

impl Pending {
    fn write_out(&mut self) {
        if !self.bytes.is_empty() && self.pid == std::process::id() {
            gapscope_emit::write_lines(self.out.file(), &self.bytes);
        }
        self.bytes.clear();
    }
}

type Shared = Arc<Mutex<Pending>>;

/// Every thread's buffer, for the flush at exit.
static ALL: Mutex<Vec<Weak<Mutex<Pending>>>> = Mutex::new(Vec::new());

/// A thread's own buffer; dropping it (the thread exits) writes it out.
struct Local {
    shared: Shared,
    tid: u64,
    /// The thread's name went into some buffer (announced once, to the first output).
    named: bool,
}

impl Drop for Local {
    fn drop(&mut self) {
        lock(&self.shared).write_out();
    }
}

thread_local! {
    static LOCAL: RefCell<Option<Local>> = const { RefCell::new(None) };
}

fn lock(p: &Shared) -> std::sync::MutexGuard<'_, Pending> {
    p.lock().unwrap_or_else(|e| e.into_inner())
}

extern "C" {
    fn atexit(f: extern "C" fn()) -> i32;
}

extern "C" fn flush_at_exit() {
    flush();
}

fn new_local(out: Out) -> Local {
    static AT_EXIT: Once = Once::new();
    AT_EXIT.call_once(|| {
        // SAFETY: `flush_at_exit` is a plain function that stays valid for the whole
        // process; it takes only locks that no exit path holds.
        unsafe { atexit(flush_at_exit) };
    });
    let shared = Arc::new(Mutex::new(Pending {
        out,
        bytes: Vec::with_capacity(BATCH_BYTES + gapscope_emit::ATOMIC_WRITE),
        first_ns: 0,
        pid: std::process::id(),
    }));
    let mut all = ALL.lock().unwrap_or_else(|e| e.into_inner());
    all.retain(|w| w.strong_count() > 0);
    all.push(Arc::downgrade(&shared));
    Local {
        shared,
        tid: gapscope_emit::thread_id(),
        named: false,
    }
}

/// Writes every thread's kept lines now (also run at process exit).
pub fn flush() {
    let all: Vec<Shared> = ALL
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter_map(Weak::upgrade)
        .collect();
    for p in all {
        lock(&p).write_out();
    }
}

/// Runs `f` on the calling thread's buffer for `out` (made on first use, the thread's
/// `T` line first), then writes the batch out if it is due at `now_ns`. Returns the
/// thread's id. Where the thread's buffer is gone (a span closed by another
/// thread-local's destructor), `f`'s lines are written at once.
pub fn append(out: Out, now_ns: u64, f: impl FnOnce(u64, &mut Vec<u8>)) -> u64 {
    let mut f = Some(f);
    let done = LOCAL.try_with(|cell| {
        let Ok(mut slot) = cell.try_borrow_mut() else {
            return None;
        };
        let local = slot.get_or_insert_with(|| new_local(out));
        let tid = local.tid;
        let mut p = lock(&local.shared);
        if !p.out.same(out) {
            p.write_out();
            p.out = out;
        }
        if p.bytes.is_empty() {
            p.first_ns = now_ns;
            p.pid = std::process::id();
        }
        if !local.named {
            local.named = true;
            crate::line::thread_line(&mut p.bytes, tid);
        }
        if let Some(f) = f.take() {
            f(tid, &mut p.bytes);
        }
        if p.bytes.len() >= BATCH_BYTES || now_ns.saturating_sub(p.first_ns) >= BATCH_AGE_NS {
            p.write_out();
        }
        Some(tid)
    });
    match (done, f) {
        (Ok(Some(tid)), _) => tid,
        (_, Some(f)) => {
            let tid = gapscope_emit::thread_id();
            let mut v = Vec::new();
            f(tid, &mut v);
            gapscope_emit::write_lines(out.file(), &v);
            tid
        }
        (_, None) => gapscope_emit::thread_id(),
    }
}

/// The calling thread's id, with its `T` line kept for `out` the first time.
pub fn thread(out: Out, now_ns: u64) -> u64 {
    let known = LOCAL.try_with(|c| {
        c.try_borrow()
            .ok()
            .and_then(|s| s.as_ref().filter(|l| l.named).map(|l| l.tid))
    });
    match known {
        Ok(Some(tid)) => tid,
        _ => append(out, now_ns, |_, _| {}),
    }
}
