//! The one word a span's hot path reads to learn whether it has more to do than read
//! the TSC and write its record: counters, exact process CPU, a mirror, the emulator, a
//! span clock that is not the TSC. With every bit clear (the default once the clock is
//! calibrated) a span's enter and exit each test this word once;
//! each feature sets its bit when it is switched on and re-checks its own state on the
//! slow path, so a bit is a hint, never the feature's truth.

use std::sync::atomic::{AtomicU8, Ordering};

/// Per-span counters are on ([`crate::trace::set_counters_enabled`]).
pub const COUNTERS: u8 = 1;
/// Process CPU is read at both ends of every span (exact mode).
pub const EXACT_CPU: u8 = 2;
/// No process-CPU samples come (the keeper could not start): spans read exactly.
pub const NO_SAMPLES: u8 = 4;
/// A span mirror (NVTX, the stderr log) is on.
pub const MIRROR: u8 = 8;
/// Span boundaries go to the emulator (callgrind).
pub const EMULATED: u8 = 16;
/// The span clock is not (yet, or no longer) the calibrated TSC: spans read it through
/// [`crate::trace::now_ns`]'s general path. Set until the start-up calibration ends.
pub const CLOCK_NOT_TSC: u8 = 32;
/// Bits that make a span read more than the clock at its ends.
pub const EXTRAS: u8 = COUNTERS | EXACT_CPU | NO_SAMPLES;

static HOT: AtomicU8 = AtomicU8::new(CLOCK_NOT_TSC);

/// The bits set now.
#[inline(always)]
pub fn get() -> u8 {
    HOT.load(Ordering::Relaxed)
}

/// Sets or clears `bit`.
pub fn set(bit: u8, on: bool) {
    if on {
        HOT.fetch_or(bit, Ordering::Release);
    } else {
        HOT.fetch_and(!bit, Ordering::Release);
    }
}
