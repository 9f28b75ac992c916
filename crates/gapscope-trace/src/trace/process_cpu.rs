//! CPU time of the whole process per span, without a system call at every boundary.
//!
//! CLOCK_PROCESS_CPUTIME_ID is not served by the vDSO: every read is a system call in
//! which the kernel sums the time of every thread (0.5–1 µs, more with many threads).
//! Read at both ends of every span, it was most of a span's cost. By default
//! ([`ProcessCpuMode::Interpolated`]) the keeper thread reads it every millisecond into
//! a series of (span clock, CPU) samples, and a drained span gets the series'
//! value at its end minus its value at its start, each interpolated linearly between
//! the two samples around it. The error of one end is at most the CPU the process spent
//! within that millisecond (samples are exact; only the CPU between two of them is
//! spread evenly), which is why the value is labelled `interpolated`. In
//! [`ProcessCpuMode::Exact`] (`[run] process_cpu = "exact"`) every span reads the clock
//! at both ends, as before, and also carries the interpolated value as the attribute
//! `process_cpu_interpolated_ns`, so the two can be compared on the same spans.
//!
//! The keeper can be late: on a machine whose cores are all busy it waits for a core,
//! and a span end between two samples 10 ms apart would spread 10 ms of the process's
//! CPU evenly. So a span boundary that finds the last sample older than [`STALE_NS`]
//! takes one itself ([`refresh_if_stale`]: one atomic load on the span's path, the
//! system call only then, and by one thread at a time), and no boundary is ever
//! further than that from a sample.
//!
//! The series keeps at most [`MAX_SAMPLES`] (35 minutes at 1 kHz; 32 MiB at most), and
//! folds runs of equal CPU values (an idle process) into their two ends, which changes
//! no interpolated value. A span whose start fell out of it gets no value.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::hot;
use std::sync::Mutex;

/// A span boundary this long after the last sample takes a sample itself: twice the
/// keeper's period ([`super::keeper::TICK_NS`]).
pub const STALE_NS: u64 = 2_000_000;

/// Span clock of the newest sample (or of a claim to take one, see [`refresh_if_stale`]).
static LAST_NS: AtomicU64 = AtomicU64::new(0);
/// Samples taken by span boundaries because the keeper was late.
static REFRESHES: AtomicU64 = AtomicU64::new(0);

/// How spans get their process CPU time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProcessCpuMode {
    /// From the keeper's 1 kHz samples (no system call in a span).
    #[default]
    Interpolated,
    /// Two CLOCK_PROCESS_CPUTIME_ID reads per span.
    Exact,
}

impl ProcessCpuMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ProcessCpuMode::Interpolated => "interpolated",
            ProcessCpuMode::Exact => "exact",
        }
    }
}

/// Where one span's process CPU time came from (spans.csv attribute `process_cpu`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CpuSource {
    Exact,
    Interpolated,
}

impl CpuSource {
    pub fn as_str(self) -> &'static str {
        match self {
            CpuSource::Exact => "exact",
            CpuSource::Interpolated => "interpolated",
        }
    }
}

/// Samples kept: 35 minutes at 1 kHz.
pub const MAX_SAMPLES: usize = 1 << 21;

/// (span clock ns, process CPU ns), both non-decreasing.
static SERIES: Mutex<VecDeque<(u64, u64)>> = Mutex::new(VecDeque::new());

/// Chooses how spans opened from now on get their process CPU time.
pub fn set_mode(mode: ProcessCpuMode) {
    hot::set(hot::EXACT_CPU, mode == ProcessCpuMode::Exact);
}

/// The mode spans opened now use.
pub fn mode() -> ProcessCpuMode {
    if exact() {
        ProcessCpuMode::Exact
    } else {
        ProcessCpuMode::Interpolated
    }
}

#[inline]
pub(super) fn exact() -> bool {
    hot::get() & (hot::EXACT_CPU | hot::NO_SAMPLES) != 0
}

pub(super) fn keeper_missing() {
    hot::set(hot::NO_SAMPLES, true);
}

/// Reads the process CPU clock once into the series, at the midpoint of two span-clock
/// reads around it.
pub(super) fn sample_now() {
    let t0 = super::now_ns();
    let Some(cpu) = super::process_cpu_ns() else {
        return;
    };
    let t1 = super::now_ns();
    push(
        &mut SERIES.lock().unwrap_or_else(|e| e.into_inner()),
        t0 + (t1.saturating_sub(t0)) / 2,
        cpu,
    );
}

/// At a span boundary at `now_ns`: when the newest sample is older than [`STALE_NS`],
/// the one thread that claims the refresh samples now. Exact mode does it too, so that
/// the interpolated values it carries beside the exact ones are those interpolated mode
/// would have recorded.
#[inline]
pub(super) fn refresh_if_stale(now_ns: u64) {
    let last = LAST_NS.load(Ordering::Relaxed);
    if now_ns.saturating_sub(last) > STALE_NS {
        refresh(last, now_ns);
    }
}

#[cold]
#[inline(never)]
fn refresh(last: u64, now_ns: u64) {
    if LAST_NS
        .compare_exchange(last, now_ns, Ordering::Relaxed, Ordering::Relaxed)
        .is_ok()
    {
        REFRESHES.fetch_add(1, Ordering::Relaxed);
        sample_now();
    }
}

/// Samples span boundaries took because the keeper was late, in this process.
pub fn stale_refreshes() -> u64 {
    REFRESHES.load(Ordering::Relaxed)
}

fn push(s: &mut VecDeque<(u64, u64)>, t_ns: u64, cpu_ns: u64) {
    LAST_NS.fetch_max(t_ns, Ordering::Relaxed);
    let (t_ns, cpu_ns) = match s.back() {
        // The clock may move a few ns back when it switches to the TSC line.
        Some(&(lt, lc)) => (t_ns.max(lt), cpu_ns.max(lc)),
        None => (t_ns, cpu_ns),
    };
    let n = s.len();
    if n >= 2 && s[n - 1].1 == cpu_ns && s[n - 2].1 == cpu_ns {
        // A flat run: moving its end changes no interpolated value.
        s[n - 1].0 = t_ns;
        return;
    }
    s.push_back((t_ns, cpu_ns));
    if s.len() > MAX_SAMPLES {
        s.pop_front();
    }
}

/// The process CPU clock at `t_ns`, interpolated; `None` outside the series.
fn at(s: &VecDeque<(u64, u64)>, t_ns: u64) -> Option<u64> {
    let i = s.partition_point(|&(t, _)| t < t_ns);
    if i == s.len() {
        return None;
    }
    let (t1, c1) = s[i];
    if t1 == t_ns {
        return Some(c1);
    }
    let (t0, c0) = *s.get(i.checked_sub(1)?)?;
    let frac = (t_ns - t0) as f64 / (t1 - t0) as f64;
    Some(c0 + ((c1 - c0) as f64 * frac).round() as u64)
}

/// Interpolated process CPU over each (start, end) interval, after a fresh sample so
/// that every span that has already ended lies inside the series.
pub(super) fn over(intervals: impl Iterator<Item = (u64, u64)>) -> Vec<Option<u64>> {
    sample_now();
    let s = SERIES.lock().unwrap_or_else(|e| e.into_inner());
    intervals
        .map(|(a, b)| Some(at(&s, b)?.saturating_sub(at(&s, a)?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(points: &[(u64, u64)]) -> VecDeque<(u64, u64)> {
        let mut s = VecDeque::new();
        for &(t, c) in points {
            push(&mut s, t, c);
        }
        s
    }

    #[test]
    fn values_between_samples_are_linear_and_outside_none() {
        let s = series(&[(1_000, 0), (2_000, 500), (3_000, 2_500)]);
        assert_eq!(at(&s, 1_000), Some(0));
        assert_eq!(at(&s, 1_500), Some(250));
        assert_eq!(at(&s, 2_500), Some(1_500));
        assert_eq!(at(&s, 3_000), Some(2_500));
        assert_eq!(at(&s, 999), None);
        assert_eq!(at(&s, 3_001), None);
    }

    #[test]
    fn a_flat_run_keeps_its_two_ends_and_its_values() {
        let s = series(&[
            (0, 0),
            (10, 100),
            (20, 100),
            (30, 100),
            (40, 100),
            (50, 200),
        ]);
        assert_eq!(
            s.iter().copied().collect::<Vec<_>>(),
            [(0, 0), (10, 100), (40, 100), (50, 200)]
        );
        assert_eq!(at(&s, 25), Some(100));
        assert_eq!(at(&s, 45), Some(150));
    }

    #[test]
    fn a_boundary_long_after_the_last_sample_takes_one_and_only_one_thread_does() {
        // A boundary as if the keeper had not sampled for 3 ms: it claims the refresh
        // and samples; a second boundary at the same moment finds the claim and does not.
        let now = super::super::now_ns();
        let late = LAST_NS.load(Ordering::Relaxed).max(now) + STALE_NS + 1_000_000;
        let (before, len_before) = (stale_refreshes(), SERIES.lock().unwrap().len());
        refresh_if_stale(late);
        assert!(stale_refreshes() > before);
        assert!(LAST_NS.load(Ordering::Relaxed) >= late);
        assert!(SERIES.lock().unwrap().len() >= len_before.min(MAX_SAMPLES - 1));
        let again = stale_refreshes();
        refresh_if_stale(late);
        assert_eq!(stale_refreshes(), again, "the claim is taken once");
    }

    #[test]
    fn a_sample_never_moves_the_series_backwards() {
        let s = series(&[(100, 50), (90, 40), (200, 60)]);
        assert!(s
            .iter()
            .zip(s.iter().skip(1))
            .all(|(a, b)| a.0 <= b.0 && a.1 <= b.1));
    }

    #[test]
    fn a_busy_span_gets_its_cpu_from_the_samples() {
        // Spin until this thread has spent 30 ms of CPU. The interpolated value lies
        // between what this thread spent and what the whole process spent from just
        // before the span to just after it (other tests run alongside), up to the
        // CPU of the samples' windows at the two ends.
        let thread_cpu = || {
            let mut ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: `ts` is a valid, writable timespec.
            unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
            ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
        };
        super::super::now_ns();
        let outer0 = super::super::process_cpu_ns().unwrap();
        let start = super::super::now_ns();
        let t0 = thread_cpu();
        while thread_cpu() - t0 < 30_000_000 {
            std::hint::black_box(0u64);
        }
        let end = super::super::now_ns();
        let outer1 = super::super::process_cpu_ns().unwrap();
        let v = over(std::iter::once((start, end)))[0].expect("inside the series");
        assert!(v >= 15_000_000, "interpolated {v} ns for a 30 ms spin");
        assert!(
            v <= outer1 - outer0 + 10_000_000,
            "interpolated {v} ns > process {} ns",
            outer1 - outer0
        );
    }
}
