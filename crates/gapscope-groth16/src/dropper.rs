//! Freeing big buffers under a drop policy: `sync` frees on the calling thread inside a
//! span; `async` hands the value to one background thread that frees it inside a span of
//! the same name (parented to the caller's span), off the critical path.

use std::sync::mpsc::{channel, Sender};
use std::sync::{Condvar, Mutex, OnceLock};

use crate::trace::{self, Span};

pub use crate::knobs::DropPolicy;

type Job = Box<dyn FnOnce() + Send>;

struct Dropper {
    tx: Mutex<Sender<Job>>,
    pending: Mutex<usize>,
    idle: Condvar,
}

fn dropper() -> &'static Dropper {
    static D: OnceLock<Dropper> = OnceLock::new();
    D.get_or_init(|| {
        let (tx, rx) = channel::<Job>();
        std::thread::Builder::new()
            .name("gapscope-drop".into())
            .spawn(move || {
                for job in rx {
                    job();
                    let d = dropper();
                    let mut p = d.pending.lock().unwrap_or_else(|e| e.into_inner());
                    *p -= 1;
                    if *p == 0 {
                        d.idle.notify_all();
                    }
                }
            })
            .expect("cannot spawn the background drop thread");
        Dropper {
            tx: Mutex::new(tx),
            pending: Mutex::new(0),
            idle: Condvar::new(),
        }
    })
}

/// Frees `value` under `policy`, inside a span `name` with a `bytes` attribute.
pub fn dispose<T: Send + 'static>(policy: DropPolicy, name: &'static str, bytes: u64, value: T) {
    match policy {
        DropPolicy::Sync => {
            let s = Span::enter(name);
            s.set_attr("bytes", bytes);
            drop(value);
        }
        DropPolicy::Async => {
            let parent = trace::current();
            let d = dropper();
            *d.pending.lock().unwrap_or_else(|e| e.into_inner()) += 1;
            let job: Job = Box::new(move || {
                let s = match parent {
                    Some(p) => Span::child_of(name, p),
                    None => Span::enter(name),
                };
                s.set_attr("bytes", bytes);
                s.set_attr("async", 1u64);
                drop(value);
            });
            if let Err(e) = d.tx.lock().unwrap_or_else(|e| e.into_inner()).send(job) {
                // The thread is gone: free here rather than leak.
                *d.pending.lock().unwrap_or_else(|e| e.into_inner()) -= 1;
                (e.0)();
            }
        }
    }
}

/// Blocks until every asynchronous drop handed over so far has finished.
pub fn wait_idle() {
    let d = dropper();
    let mut p = d.pending.lock().unwrap_or_else(|e| e.into_inner());
    while *p > 0 {
        p = d.idle.wait(p).unwrap_or_else(|e| e.into_inner());
    }
    drop(p);
    // The native prover frees its buffers on a C++ thread of its own.
    #[cfg(feature = "cuda")]
    super::cuda::wait_for_drops();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::drain_trace;

    #[test]
    fn async_drop_runs_on_the_background_thread_under_the_callers_span() {
        let root = Span::enter("dr_root");
        let trace = root.trace();
        let me = std::thread::current().id();
        struct Probe(std::thread::ThreadId, std::sync::mpsc::Sender<bool>);
        impl Drop for Probe {
            fn drop(&mut self) {
                let _ = self.1.send(std::thread::current().id() != self.0);
            }
        }
        let (tx, rx) = channel();
        dispose(DropPolicy::Async, "drop", 7, Probe(me, tx.clone()));
        dispose(DropPolicy::Sync, "drop_sync", 9, Probe(me, tx));
        drop(root);
        wait_idle();
        let mut other_thread: Vec<bool> = rx.try_iter().collect();
        other_thread.sort();
        assert_eq!(other_thread, vec![false, true]);
        let spans = drain_trace(trace);
        let root = spans.iter().find(|s| s.name == "dr_root").unwrap();
        let a = spans.iter().find(|s| s.name == "drop").unwrap();
        let s = spans.iter().find(|s| s.name == "drop_sync").unwrap();
        assert_eq!(a.parent, Some(root.id));
        assert_eq!(&*a.thread_name, "gapscope-drop");
        assert_eq!(s.thread_id, root.thread_id);
    }
}
