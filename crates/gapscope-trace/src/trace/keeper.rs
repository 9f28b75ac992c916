//! The recorder's one background thread ("gapscope-clock"), started by the first read
//! of the span clock: it calibrates the TSC ([`super::clock::calibrate`]), then every
//! [`TICK_NS`] reads the process CPU clock into the series spans are interpolated from
//! ([`super::process_cpu`]), and every [`super::clock::REANCHOR_PERIOD_NS`] measures the
//! TSC line against CLOCK_MONOTONIC again.
//!
//! It wakes on absolute CLOCK_MONOTONIC deadlines with a 1 µs timer slack, so that a late
//! wake-up does not push every later sample back, and it opens no spans.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Once;

use super::clock;
use super::process_cpu;

/// Period of the process CPU samples: 1 kHz.
pub const TICK_NS: u64 = 1_000_000;

static START: Once = Once::new();
static CALIBRATED: AtomicBool = AtomicBool::new(false);

/// Starts the keeper (once per process). The caller's first process CPU sample is taken
/// here, before the thread exists, so that no span opens before the series begins.
pub(super) fn start() {
    START.call_once(|| {
        clock::begin();
        process_cpu::sample_now();
        let spawned = std::thread::Builder::new()
            .name("gapscope-clock".into())
            .spawn(run);
        if spawned.is_err() {
            // No thread: no TSC line can be kept, so stay on clock_gettime; spans get
            // the exact process CPU clock instead of samples that would never come.
            clock::give_up("the clock's keeper thread could not be started".into());
            process_cpu::keeper_missing();
            CALIBRATED.store(true, Ordering::Release);
        }
    });
}

/// Whether the start-up calibration has decided the clock.
pub(super) fn calibrated() -> bool {
    CALIBRATED.load(Ordering::Acquire)
}

fn run() {
    let slack_ns: libc::c_ulong = 1_000;
    // SAFETY: PR_SET_TIMERSLACK takes an unsigned long and changes only this thread's
    // timer slack (wake-ups within 1 µs of the deadline instead of the default 50 µs).
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, slack_ns) };
    clock::calibrate();
    CALIBRATED.store(true, Ordering::Release);
    let mut anchors = clock::Anchors::new();
    let per_reanchor = clock::REANCHOR_PERIOD_NS / TICK_NS;
    let mut next = clock::monotonic_ns();
    let mut tick: u64 = 0;
    loop {
        next += TICK_NS;
        sleep_until(next);
        let now = clock::monotonic_ns();
        if now > next + 100 * TICK_NS {
            // Suspended or starved for a long time: restart the schedule from now
            // rather than catching up with a burst of samples.
            next = now;
        }
        process_cpu::sample_now();
        tick += 1;
        if tick.is_multiple_of(per_reanchor) {
            anchors.reanchor();
        }
    }
}

fn sleep_until(deadline_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: `ts` is a valid timespec; a null remainder is allowed with TIMER_ABSTIME.
    // An interrupted sleep (EINTR) just samples early.
    unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        )
    };
}
