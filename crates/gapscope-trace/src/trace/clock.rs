//! The span clock: CLOCK_MONOTONIC nanoseconds (the clock `Instant` and CUPTI's
//! timestamp callback use), read from the CPU's time-stamp counter where the TSC is
//! invariant, else from `clock_gettime`.
//!
//! A `clock_gettime` through the vDSO costs 20–40 ns, and two of them bound what a span
//! can cost. `rdtsc` costs a few nanoseconds, but counts ticks, not CLOCK_MONOTONIC
//! nanoseconds: CLOCK_MONOTONIC is slewed by NTP (up to 500 ppm) and the TSC is not. So
//! ticks are mapped onto CLOCK_MONOTONIC by a line (base tick, base ns, ns per tick) that
//! the keeper thread ([`super::keeper`]) measures again every [`REANCHOR_PERIOD_NS`]: it
//! reads a (tick, CLOCK_MONOTONIC) pair, notes how far the line has drifted (the clock's
//! measured error, written to meta.json), and starts a new line from where the old one
//! stands now, steered to cancel that error by the next measurement. The clock therefore
//! never steps backwards at a re-anchor, and stays within a few hundred nanoseconds of
//! CLOCK_MONOTONIC (checked over ten minutes by `clock_check`).
//!
//! The TSC is used only where it is invariant (`constant_tsc` and `nonstop_tsc` in
//! /proc/cpuinfo, the kernel's reading of CPUID 0x80000007), the kernel still lists it
//! as a clock source (it removes a TSC it found unsynchronised between CPUs), and a
//! start-up calibration predicts CLOCK_MONOTONIC within [`CALIBRATION_TOLERANCE_NS`];
//! elsewhere, or after a re-anchor finds it more than [`FALLBACK_ERROR_NS`] off, the
//! clock is `clock_gettime` and [`ClockInfo::reason`] says why. Until the calibration
//! has finished (about 20 ms after the first read) the clock is `clock_gettime` too.
//! `GAPSCOPE_CLOCK=clock_gettime` forces the fallback.

use std::sync::atomic::{fence, AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;

/// The clock is not set up yet: the first read starts the keeper.
const UNSET: u8 = 0;
const TSC: u8 = 1;
const GETTIME: u8 = 2;

static SOURCE: AtomicU8 = AtomicU8::new(UNSET);

/// Fixed-point shift of the ns-per-tick multiplier: 2^-40 relative resolution, so the
/// rounding of the slope adds under a nanosecond over an hour of ticks.
const SHIFT: u32 = 40;
/// How often the keeper measures the line against CLOCK_MONOTONIC.
pub const REANCHOR_PERIOD_NS: u64 = 10_000_000;
/// How far the calibration's third pair may sit from the line through the first two.
pub const CALIBRATION_TOLERANCE_NS: u64 = 2_000;
/// A re-anchor finding the TSC line this far off CLOCK_MONOTONIC gives the TSC up.
pub const FALLBACK_ERROR_NS: u64 = 50_000;

/// The tick-to-ns line, behind a sequence lock (one writer: the keeper).
struct Line {
    seq: AtomicU64,
    base_tsc: AtomicU64,
    base_ns: AtomicU64,
    mult: AtomicU64,
}

static LINE: Line = Line {
    seq: AtomicU64::new(0),
    base_tsc: AtomicU64::new(0),
    base_ns: AtomicU64::new(0),
    mult: AtomicU64::new(0),
};

/// What the clock measured about itself, for meta.json.
#[derive(Debug, Clone, Default)]
pub struct ClockInfo {
    /// "tsc" or "clock_gettime".
    pub source: &'static str,
    /// TSC frequency from the calibration, kHz.
    pub tsc_khz: Option<u64>,
    /// Largest |TSC line − CLOCK_MONOTONIC| seen so far (calibration and every
    /// re-anchor), ns; `None` on `clock_gettime`, which is CLOCK_MONOTONIC itself.
    pub max_error_ns: Option<u64>,
    /// Comparisons behind `max_error_ns`.
    pub checks: u64,
    /// Why the clock is not the TSC (or gave it up).
    pub reason: Option<String>,
}

static INFO: Mutex<ClockInfo> = Mutex::new(ClockInfo {
    source: "clock_gettime",
    tsc_khz: None,
    max_error_ns: None,
    checks: 0,
    reason: None,
});

/// CLOCK_MONOTONIC through `clock_gettime`, ns: the reference the TSC line follows.
#[inline]
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The TSC on the current line, in CLOCK_MONOTONIC nanoseconds: what [`read`] returns
/// once the clock is the TSC, for callers that already know it is
/// (`crate::hot::CLOCK_NOT_TSC` clear).
#[inline]
pub(super) fn tsc_now() -> u64 {
    tsc_ns(read_tsc())
}

/// Nanoseconds on CLOCK_MONOTONIC, from the TSC where it is calibrated; `None` before
/// the first read has started the keeper ([`super::now_ns`] does).
#[inline]
pub(super) fn read() -> Option<u64> {
    match SOURCE.load(Ordering::Relaxed) {
        TSC => Some(tsc_ns(read_tsc())),
        GETTIME => Some(monotonic_ns()),
        _ => None,
    }
}

/// Leaves the unset state (clock_gettime until the calibration decides): called once,
/// before the keeper's first sample reads the clock.
pub(super) fn begin() {
    let _ = SOURCE.compare_exchange(UNSET, GETTIME, Ordering::Relaxed, Ordering::Relaxed);
}

/// Whether spans are timed from the TSC now.
pub fn is_tsc() -> bool {
    SOURCE.load(Ordering::Relaxed) == TSC
}

/// What the clock knows about itself now ([`super::clock_info`] waits for the
/// start-up calibration first).
pub(super) fn info_now() -> ClockInfo {
    INFO.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

#[inline]
pub(super) fn read_tsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: rdtsc exists on every x86_64 CPU and has no memory effects.
        #[allow(unused_unsafe)]
        unsafe {
            core::arch::x86_64::_rdtsc()
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        0
    }
}

/// Maps a tick onto the current line. A tick read just before a re-anchor may lie
/// before the new base: the difference is signed.
#[inline]
fn tsc_ns(tsc: u64) -> u64 {
    loop {
        let s = LINE.seq.load(Ordering::Acquire);
        let bt = LINE.base_tsc.load(Ordering::Relaxed);
        let bn = LINE.base_ns.load(Ordering::Relaxed);
        let m = LINE.mult.load(Ordering::Relaxed);
        fence(Ordering::Acquire);
        if s & 1 == 0 && LINE.seq.load(Ordering::Relaxed) == s {
            return on_line(tsc, bt, bn, m);
        }
        std::hint::spin_loop();
    }
}

#[inline]
fn on_line(tsc: u64, base_tsc: u64, base_ns: u64, mult: u64) -> u64 {
    let dt = tsc.wrapping_sub(base_tsc) as i64 as i128;
    base_ns.wrapping_add(((dt * mult as i128) >> SHIFT) as i64 as u64)
}

fn set_line(base_tsc: u64, base_ns: u64, mult: u64) {
    let s = LINE.seq.load(Ordering::Relaxed);
    LINE.seq.store(s + 1, Ordering::Relaxed);
    fence(Ordering::Release);
    LINE.base_tsc.store(base_tsc, Ordering::Relaxed);
    LINE.base_ns.store(base_ns, Ordering::Relaxed);
    LINE.mult.store(mult, Ordering::Relaxed);
    LINE.seq.store(s + 2, Ordering::Release);
}

/// One (tick, CLOCK_MONOTONIC) pair: the tick read between two clock reads, the best
/// of a few tries (the tightest bracket); `gap_ns` is that bracket.
#[derive(Debug, Clone, Copy)]
pub(super) struct Pair {
    pub tsc: u64,
    pub ns: u64,
    pub gap_ns: u64,
}

pub(super) fn pair() -> Pair {
    let mut best: Option<Pair> = None;
    for _ in 0..5 {
        let a = monotonic_ns();
        let t = read_tsc();
        let b = monotonic_ns();
        let p = Pair {
            tsc: t,
            ns: a + (b - a) / 2,
            gap_ns: b - a,
        };
        if best.is_none_or(|q| p.gap_ns < q.gap_ns) {
            best = Some(p);
        }
    }
    best.expect("five tries")
}

/// ns per tick between two pairs, in fixed point.
fn slope(a: Pair, b: Pair) -> Option<u64> {
    let (dt, dn) = (b.tsc.checked_sub(a.tsc)?, b.ns.checked_sub(a.ns)?);
    (dt > 0 && dn > 0).then(|| (((dn as u128) << SHIFT) / dt as u128) as u64)
}

/// Why the TSC cannot be the span clock here, if it cannot.
fn tsc_refused() -> Option<String> {
    if std::env::var("GAPSCOPE_CLOCK").is_ok_and(|v| v == "clock_gettime") {
        return Some("GAPSCOPE_CLOCK=clock_gettime".into());
    }
    if !cfg!(target_arch = "x86_64") {
        return Some("no TSC on this architecture".into());
    }
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let flags: Vec<&str> = cpuinfo
        .lines()
        .find(|l| l.starts_with("flags"))
        .map(|l| l.split_whitespace().collect())
        .unwrap_or_default();
    let missing: Vec<&str> = ["constant_tsc", "nonstop_tsc"]
        .into_iter()
        .filter(|f| !flags.contains(f))
        .collect();
    if !missing.is_empty() {
        return Some(format!(
            "the TSC is not invariant here (/proc/cpuinfo lacks {})",
            missing.join(" and ")
        ));
    }
    let sources = "/sys/devices/system/clocksource/clocksource0/available_clocksource";
    if let Ok(s) = std::fs::read_to_string(sources) {
        if !s.split_whitespace().any(|c| c == "tsc") {
            return Some(format!(
                "the kernel does not list the TSC as a clock source ({sources}: {}): it \
                 found it unstable or unsynchronised between CPUs",
                s.trim()
            ));
        }
    }
    None
}

/// Start-up calibration, on the keeper thread: three pairs 10 ms apart; the line
/// through the first two must predict the third. Sets the clock either way.
pub(super) fn calibrate() {
    if let Some(reason) = tsc_refused() {
        give_up(reason);
        return;
    }
    let wait = || std::thread::sleep(std::time::Duration::from_millis(10));
    let p0 = pair();
    wait();
    let p1 = pair();
    wait();
    let p2 = pair();
    let (Some(m01), Some(m02)) = (slope(p0, p1), slope(p0, p2)) else {
        give_up("the TSC did not advance during calibration".into());
        return;
    };
    let predicted = on_line(p2.tsc, p1.tsc, p1.ns, m01);
    let err = predicted.abs_diff(p2.ns);
    let tolerance = CALIBRATION_TOLERANCE_NS + p1.gap_ns + p2.gap_ns;
    if err > tolerance {
        give_up(format!(
            "TSC calibration failed: the line through two pairs 10 ms apart missed \
             CLOCK_MONOTONIC 10 ms later by {err} ns (tolerance {tolerance} ns)"
        ));
        return;
    }
    let khz = ((p2.tsc - p0.tsc) as u128 * 1_000_000 / (p2.ns - p0.ns) as u128) as u64;
    set_line(p2.tsc, p2.ns, m02);
    {
        let mut i = INFO.lock().unwrap_or_else(|e| e.into_inner());
        i.source = "tsc";
        i.tsc_khz = Some(khz);
        i.max_error_ns = Some(err);
        i.checks = 1;
        i.reason = None;
    }
    SOURCE.store(TSC, Ordering::Relaxed);
    crate::hot::set(crate::hot::CLOCK_NOT_TSC, false);
}

pub(super) fn give_up(reason: String) {
    crate::hot::set(crate::hot::CLOCK_NOT_TSC, true);
    SOURCE.store(GETTIME, Ordering::Relaxed);
    let mut i = INFO.lock().unwrap_or_else(|e| e.into_inner());
    i.source = "clock_gettime";
    i.max_error_ns = None;
    i.reason = Some(reason);
}

/// The keeper's state between re-anchors: a pair from up to a minute ago gives the
/// slope (a long baseline, so the pairs' own jitter hardly moves it).
#[derive(Default)]
pub(super) struct Anchors {
    history: std::collections::VecDeque<Pair>,
}

impl Anchors {
    pub fn new() -> Self {
        Self::default()
    }

    /// Measures the line against CLOCK_MONOTONIC and starts the next one. Returns the
    /// error found, ns (signed: line − CLOCK_MONOTONIC).
    pub fn reanchor(&mut self) -> Option<i64> {
        if SOURCE.load(Ordering::Relaxed) != TSC {
            return None;
        }
        let p = pair();
        let now_line = tsc_ns(p.tsc);
        let err = now_line as i64 - p.ns as i64;
        // Baseline: the oldest pair of the last minute (at least the calibration's).
        self.history.push_back(p);
        while self
            .history
            .front()
            .is_some_and(|q| p.ns - q.ns > 60_000_000_000)
        {
            self.history.pop_front();
        }
        if self.history.len() > 64 {
            // Keep about one pair a second: drop every other one of the oldest half.
            let keep: Vec<Pair> = self
                .history
                .iter()
                .enumerate()
                .filter(|(i, _)| *i >= 32 || i % 2 == 0)
                .map(|(_, q)| *q)
                .collect();
            self.history = keep.into();
        }
        let base_slope = match self.history.front().and_then(|&q| slope(q, p)) {
            Some(m) if self.history.len() > 1 => m,
            _ => LINE.mult.load(Ordering::Relaxed),
        };
        record_error(err.unsigned_abs());
        if err.unsigned_abs() > FALLBACK_ERROR_NS {
            give_up(format!(
                "the TSC line drifted {} ns from CLOCK_MONOTONIC between two re-anchors \
                 {} ms apart",
                err.unsigned_abs(),
                REANCHOR_PERIOD_NS / 1_000_000
            ));
            return Some(err);
        }
        // Steer the next line so that it meets CLOCK_MONOTONIC again one period from
        // now, at most 1000 ppm off the measured slope.
        let period_ticks =
            (((REANCHOR_PERIOD_NS as u128) << SHIFT) / base_slope.max(1) as u128).max(1);
        let correction = ((err as i128) << SHIFT) / period_ticks as i128;
        let limit = base_slope as i128 / 1000;
        let mult = (base_slope as i128 - correction.clamp(-limit, limit)).max(1) as u64;
        set_line(p.tsc, now_line, mult);
        Some(err)
    }
}

fn record_error(err_ns: u64) {
    let mut i = INFO.lock().unwrap_or_else(|e| e.into_inner());
    i.checks += 1;
    i.max_error_ns = Some(i.max_error_ns.unwrap_or(0).max(err_ns));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_maps_ticks_before_and_after_its_base() {
        // 0.5 ns per tick.
        let m = 1u64 << (SHIFT - 1);
        assert_eq!(on_line(1_000, 1_000, 5_000, m), 5_000);
        assert_eq!(on_line(3_000, 1_000, 5_000, m), 6_000);
        assert_eq!(on_line(0, 1_000, 5_000, m), 4_500);
    }

    #[test]
    fn slope_of_two_pairs_is_ns_per_tick() {
        let a = Pair {
            tsc: 0,
            ns: 0,
            gap_ns: 0,
        };
        let b = Pair {
            tsc: 3_000_000,
            ns: 1_000_000,
            gap_ns: 0,
        };
        let m = slope(a, b).unwrap();
        assert_eq!(on_line(3_000_000, 0, 0, m), 999_999);
        assert!(slope(b, a).is_none());
    }

    #[test]
    fn the_span_clock_stays_on_clock_monotonic() {
        let info = super::super::clock_info(2_000);
        // Whichever clock it is, it reads CLOCK_MONOTONIC within the bracket of two
        // reads plus the error the clock measured about itself.
        let slack = info.max_error_ns.unwrap_or(0) + 20_000;
        for _ in 0..1000 {
            let a = monotonic_ns();
            let t = super::super::now_ns();
            let b = monotonic_ns();
            assert!(t + slack >= a && t <= b + slack, "{a} {t} {b} ({info:?})");
        }
        assert!(info.source == "tsc" || info.reason.is_some(), "{info:?}");
    }
}
