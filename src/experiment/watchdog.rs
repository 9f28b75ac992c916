//! A deadline for work that may never return, in a process that cannot abandon it.
//!
//! With `process = "per_rep"` a rep that outlives `rep_timeout_s` is a child process, and
//! killing it loses nothing. With `process = "shared"` the rep runs on the runner's own
//! thread, and a GPU call that never returns (a kernel that does not finish) cannot be
//! interrupted: the thread is stuck inside foreign code. The watchdog turns that into a
//! clean stop instead of a silent hang: when an armed deadline passes, its action runs
//! on the watchdog's thread, records what it can (the rep as failed) and ends the process.
//!
//! One deadline at a time; arming returns a guard that disarms on drop, so a rep that
//! finishes (or fails) in time never fires.

use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Exit status of `gapscope run` stopped by its watchdog (`rep_timeout_s`, shared process).
pub const EXIT_TIMED_OUT: i32 = 3;

type Action = Box<dyn FnOnce() + Send>;

struct Pending {
    generation: u64,
    deadline: Instant,
    action: Action,
}

#[derive(Default)]
struct State {
    armed: Option<Pending>,
    generation: u64,
    shutdown: bool,
}

/// A background thread that runs an action when an armed deadline passes.
pub struct Watchdog {
    shared: Arc<(Mutex<State>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

/// Disarms its deadline when dropped (unless it has fired already).
#[must_use = "the deadline is disarmed when the guard is dropped"]
pub struct Deadline<'a> {
    dog: &'a Watchdog,
    generation: u64,
}

impl Watchdog {
    pub fn start() -> Self {
        let shared = Arc::new((Mutex::new(State::default()), Condvar::new()));
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("gapscope-watchdog".into())
            .spawn(move || watch(&s))
            .expect("spawning the watchdog thread");
        Watchdog {
            shared,
            thread: Some(thread),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.shared.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `action` on the watchdog's thread if the returned guard is still alive
    /// `after` from now. A second `arm` replaces the first.
    pub fn arm(&self, after: Duration, action: impl FnOnce() + Send + 'static) -> Deadline<'_> {
        let mut st = self.lock();
        st.generation += 1;
        let generation = st.generation;
        st.armed = Some(Pending {
            generation,
            deadline: Instant::now() + after,
            action: Box::new(action),
        });
        drop(st);
        self.shared.1.notify_all();
        Deadline {
            dog: self,
            generation,
        }
    }
}

impl Drop for Deadline<'_> {
    fn drop(&mut self) {
        let mut st = self.dog.lock();
        if st.armed.as_ref().map(|a| a.generation) == Some(self.generation) {
            st.armed = None;
        }
        drop(st);
        self.dog.shared.1.notify_all();
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.lock().shutdown = true;
        self.shared.1.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn watch(shared: &(Mutex<State>, Condvar)) {
    let (m, cv) = shared;
    let mut st = m.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        if st.shutdown {
            return;
        }
        let now = Instant::now();
        match st.armed.as_ref().map(|a| a.deadline) {
            None => st = cv.wait(st).unwrap_or_else(|e| e.into_inner()),
            Some(d) if d > now => {
                st = cv
                    .wait_timeout(st, d - now)
                    .unwrap_or_else(|e| e.into_inner())
                    .0
            }
            Some(_) => {
                let fired = st.armed.take().expect("armed");
                drop(st);
                (fired.action)();
                st = m.lock().unwrap_or_else(|e| e.into_inner());
            }
        }
    }
}

/// Ends the process at once with `code`, without running exit handlers: static
/// destructors of GPU libraries would wait for the very call that did not return.
pub fn exit_now(code: i32) -> ! {
    use std::io::Write;
    let _ = std::io::stderr().flush();
    let _ = std::io::stdout().flush();
    // SAFETY: _exit only ends the process; nothing runs after it.
    unsafe { libc::_exit(code) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn counter() -> (Arc<AtomicU32>, impl Fn() -> u32) {
        let c = Arc::new(AtomicU32::new(0));
        let r = c.clone();
        (c, move || r.load(Ordering::SeqCst))
    }

    /// Polls until `read` is non-zero (or 10 s pass); returns how long that took.
    fn until_fired(read: &impl Fn() -> u32) -> Duration {
        let t = Instant::now();
        while read() == 0 && t.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(5));
        }
        t.elapsed()
    }

    #[test]
    fn fires_once_after_its_deadline() {
        let dog = Watchdog::start();
        let (c, read) = counter();
        let _g = dog.arm(Duration::from_millis(20), move || {
            c.fetch_add(1, Ordering::SeqCst);
        });
        let waited = until_fired(&read);
        assert_eq!(read(), 1, "the action ran");
        assert!(
            waited >= Duration::from_millis(15),
            "not before the deadline"
        );
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(read(), 1, "and only once");
    }

    #[test]
    fn a_dropped_guard_never_fires() {
        let dog = Watchdog::start();
        let (c, read) = counter();
        {
            let _g = dog.arm(Duration::from_millis(30), move || {
                c.fetch_add(1, Ordering::SeqCst);
            });
        }
        std::thread::sleep(Duration::from_millis(120));
        assert_eq!(read(), 0);
    }

    #[test]
    fn rearming_replaces_the_deadline_and_an_old_guard_does_not_disarm_the_new() {
        let dog = Watchdog::start();
        let (first, read_first) = counter();
        let (second, read_second) = counter();
        let old = dog.arm(Duration::from_secs(3600), move || {
            first.fetch_add(1, Ordering::SeqCst);
        });
        let _new = dog.arm(Duration::from_millis(20), move || {
            second.fetch_add(1, Ordering::SeqCst);
        });
        drop(old);
        until_fired(&read_second);
        assert_eq!((read_first(), read_second()), (0, 1));
    }

    #[test]
    fn dropping_the_watchdog_stops_its_thread() {
        let dog = Watchdog::start();
        let (c, read) = counter();
        let g = dog.arm(Duration::from_secs(3600), move || {
            c.fetch_add(1, Ordering::SeqCst);
        });
        drop(g);
        drop(dog);
        assert_eq!(read(), 0);
    }
}
