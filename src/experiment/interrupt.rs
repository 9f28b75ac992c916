//! Ctrl-C (SIGINT) and SIGTERM during a run, and children that must not outlive it.
//!
//! The first signal asks the runner to stop after the rep in progress: a rep cannot be
//! abandoned halfway in a shared process (the prover's threads are inside it), and a
//! per_rep worker runs in its own process group, so the terminal's Ctrl-C reaches only
//! gapscope, which lets the worker finish its rep. The runner then records that rep,
//! stops, and says how to resume (exit status [`EXIT_INTERRUPTED`]). A second signal
//! abandons the rep at once: the handler writes the resume hint and ends the process;
//! the rep's partial rows are cut by the next `--resume`.
//!
//! Children (`__params`, `__worker`) are started with
//! [`crate::procs::die_with_parent`]: killed together with gapscope, even by SIGKILL,
//! which no handler sees. The second signal
//! also ends the process groups of the programs and steps running
//! ([`crate::procs::lifeline::end_live_groups`]), and what left them for sessions of their
//! own, before the process ends.

use std::ffi::CString;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

/// Exit status of a run stopped by Ctrl-C or SIGTERM (128 + SIGINT, as shells report it).
pub const EXIT_INTERRUPTED: i32 = 130;

static SIGNALS: AtomicU32 = AtomicU32::new(0);
/// What the handler prints when a second signal abandons the rep in progress.
static ABANDON_MESSAGE: OnceLock<CString> = OnceLock::new();

const FIRST: &[u8] = b"\ninterrupted: finishing the rep in progress, then stopping \
(press Ctrl-C again to abandon it)\n";

extern "C" fn on_signal(_sig: libc::c_int) {
    let n = SIGNALS.fetch_add(1, Ordering::SeqCst);
    // Only async-signal-safe calls here: write(2), the groups' end, and _exit(2).
    if n == 0 {
        // SAFETY: FIRST is a static byte string; write(2) is async-signal-safe.
        unsafe { libc::write(2, FIRST.as_ptr().cast(), FIRST.len()) };
    } else {
        if let Some(m) = ABANDON_MESSAGE.get() {
            let b = m.as_bytes();
            // SAFETY: the message was set before the handler was installed and is never
            // freed; write(2) is async-signal-safe.
            unsafe { libc::write(2, b.as_ptr().cast(), b.len()) };
        }
        // Async-signal-safe: system calls only, no allocation nor lock.
        crate::procs::lifeline::end_live_groups();
        // SAFETY: _exit only ends the process; nothing runs after it.
        unsafe { libc::_exit(EXIT_INTERRUPTED) };
    }
}

/// Installs the handler for SIGINT and SIGTERM (once per process; later calls do
/// nothing).
pub fn install() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        for sig in [libc::SIGINT, libc::SIGTERM] {
            // SAFETY: a zeroed sigaction with a handler of the right signature and an
            // empty mask is valid; the handler makes only async-signal-safe calls.
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = on_signal as *const () as libc::sighandler_t;
                libc::sigemptyset(&mut sa.sa_mask);
                sa.sa_flags = libc::SA_RESTART;
                libc::sigaction(sig, &sa, std::ptr::null_mut());
            }
        }
    });
}

/// What a second signal prints before it ends the process (the run folder and how to
/// resume it); set once, when the run folder is known.
pub fn set_abandon_message(text: String) {
    let _ = ABANDON_MESSAGE.set(CString::new(text.replace('\0', " ")).unwrap_or_default());
}

/// Whether a stop was asked for (a signal arrived since [`install`]).
pub fn requested() -> bool {
    SIGNALS.load(Ordering::SeqCst) > 0
}

/// The run was stopped by a signal: after its last finished rep (`dir` is the run
/// folder), or before any rep (`dir` is `None`: nothing was measured).
#[derive(Debug)]
pub struct Interrupted {
    pub dir: Option<String>,
    pub kept: usize,
}

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.dir {
            Some(dir) => write!(
                f,
                "interrupted: {} rep(s) are kept in {dir}; `gapscope run --resume {dir}` \
                 continues the run",
                self.kept
            ),
            None => write!(f, "interrupted before the first rep; nothing was measured"),
        }
    }
}

impl std::error::Error for Interrupted {}
