//! The driver's utilisation sample stream on the host: which host clock its timestamps
//! are on, its period, and whether a rep's last window has arrived.
//!
//! Each of the driver's samples averages one window and only enters its buffer once the
//! window has ended, so the sample covering a rep's end appears after the rep. The NVML
//! sampler ([`super::nvml`]) therefore keeps fetching after a rep's sampling window
//! closes, until every GPU whose samples are in use has one at or past the rep's end on
//! the samples' own clock ([`due`]), each for at most [`wait_budget_ns`] of its window.
//! [`super::placement`] then puts the samples on the span clock.

use std::collections::VecDeque;

use crate::trace::now_ns;

/// The host clocks NVML's sample timestamps may be on, in the order preferred when two
/// agree (CLOCK_BOOTTIME equals CLOCK_MONOTONIC on a machine that never suspended).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostClock {
    Monotonic,
    Boottime,
    Realtime,
}

impl HostClock {
    pub const ALL: [HostClock; 3] = [
        HostClock::Monotonic,
        HostClock::Boottime,
        HostClock::Realtime,
    ];

    pub fn name(self) -> &'static str {
        match self {
            HostClock::Monotonic => "CLOCK_MONOTONIC",
            HostClock::Boottime => "CLOCK_BOOTTIME",
            HostClock::Realtime => "CLOCK_REALTIME",
        }
    }

    /// The clock's time now, ns.
    pub fn now_ns(self) -> Option<u64> {
        let id = match self {
            HostClock::Monotonic => libc::CLOCK_MONOTONIC,
            HostClock::Boottime => libc::CLOCK_BOOTTIME,
            HostClock::Realtime => libc::CLOCK_REALTIME,
        };
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec.
        let rc = unsafe { libc::clock_gettime(id, &mut ts) };
        (rc == 0 && ts.tv_sec >= 0).then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
    }
}

/// How far in the future (ns) a sample may seem on its own clock (µs rounding, pairs).
const FUTURE_SLACK_NS: i128 = 1_000_000_000;
/// How old (ns) the newest sample may be on its own clock: a rep's last fetch is at its
/// end, so anything older is on another clock.
const MAX_LAG_NS: i128 = 120_000_000_000;

/// The clock on which the newest sample, `newest_us`, is the most recent without being
/// in the future, given each clock's time `now` (ns) at one moment after the fetch.
pub fn detect_clock(newest_us: u64, now: &[(HostClock, u64)]) -> Option<HostClock> {
    let ts = newest_us as i128 * 1_000;
    now.iter()
        .filter_map(|&(c, n)| {
            let lag = n as i128 - ts;
            (-FUTURE_SLACK_NS..=MAX_LAG_NS)
                .contains(&lag)
                .then_some((lag.abs(), c))
        })
        .min_by_key(|&(lag, _)| lag)
        .map(|(_, c)| c)
}

/// The median gap between consecutive timestamps (µs in, ns out): the driver's window.
pub fn driver_period_ns(ts_us: &[u64]) -> Option<u64> {
    let mut gaps: Vec<u64> = ts_us
        .windows(2)
        .map(|w| w[1].saturating_sub(w[0]) * 1_000)
        .filter(|&g| g > 0)
        .collect();
    gaps.sort_unstable();
    gaps.get(gaps.len() / 2).copied()
}

/// The longest the sampler waits for a rep's last window after the rep, whatever the
/// window (NVML allows windows up to 1 s; the H200's are 200 ms).
pub const MAX_WAIT_NS: u64 = 500_000_000;
/// How often the driver's buffer is asked while waiting for the last window.
pub const POLL_NS: u64 = 10_000_000;

/// How long after a rep's end to wait for the sample of a `window_ns` window covering
/// it: the window can end up to one window after the rep, and the driver posts it a
/// little later; 1.5 windows, at most [`MAX_WAIT_NS`].
pub fn wait_budget_ns(window_ns: u64) -> u64 {
    window_ns.saturating_mul(3).div_ceil(2).min(MAX_WAIT_NS)
}

/// When a rep's sampling window closed: on the span clock and on each host clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndMark {
    pub span_ns: u64,
    pub clocks: Vec<(HostClock, u64)>,
}

impl EndMark {
    pub fn now() -> Self {
        EndMark {
            span_ns: now_ns(),
            clocks: HostClock::ALL
                .into_iter()
                .filter_map(|c| c.now_ns().map(|n| (c, n)))
                .collect(),
        }
    }
}

/// How many of a GPU's latest timestamps measure its period.
const KEEP: usize = 16;

/// The latest timestamps fetched from one GPU's buffer, across reps.
#[derive(Debug, Clone, Default)]
pub struct DriverStream {
    recent: VecDeque<u64>,
}

impl DriverStream {
    /// Notes a fetched sample's timestamp (µs, fetched in order).
    pub fn add(&mut self, ts_us: u64) {
        if self.recent.back().is_some_and(|&b| b >= ts_us) {
            return;
        }
        if self.recent.len() == KEEP {
            self.recent.pop_front();
        }
        self.recent.push_back(ts_us);
    }

    pub fn newest_us(&self) -> Option<u64> {
        self.recent.back().copied()
    }

    /// The window, as the median gap between the latest samples.
    pub fn period_ns(&self) -> Option<u64> {
        driver_period_ns(&self.recent.iter().copied().collect::<Vec<_>>())
    }
}

/// How long after the rep's end (`mark`) a GPU's stream still waits for its last window:
/// `Some(budget)` while its newest sample ends before the rep's end, on the clock the
/// samples are on. `None` (no wait) when it already has one, or when its samples cannot
/// say: no period measured yet, or timestamps on no host clock.
pub fn due(stream: &DriverStream, mark: &EndMark) -> Option<u64> {
    let newest = stream.newest_us()?;
    let window = stream.period_ns()?;
    let clock = detect_clock(newest, &mark.clocks)?;
    let end = mark.clocks.iter().find(|(c, _)| *c == clock)?.1;
    (newest.saturating_mul(1_000) < end).then(|| wait_budget_ns(window))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const REALTIME_OFFSET: u64 = 1_764_000_000_000_000_000;

    fn mark(mono: u64) -> EndMark {
        EndMark {
            span_ns: mono,
            clocks: vec![
                (HostClock::Monotonic, mono),
                (HostClock::Boottime, mono),
                (HostClock::Realtime, mono + REALTIME_OFFSET),
            ],
        }
    }

    /// Samples every 200 ms on CLOCK_REALTIME, the last ending at `last` (span clock).
    fn stream(last: u64, n: u64) -> DriverStream {
        let mut s = DriverStream::default();
        for k in (0..n).rev() {
            s.add((last - k * 200 * MS + REALTIME_OFFSET) / 1_000);
        }
        s
    }

    #[test]
    fn the_wait_is_one_and_a_half_windows_capped() {
        assert_eq!(wait_budget_ns(200 * MS), 300 * MS);
        assert_eq!(wait_budget_ns(1_000 * MS), MAX_WAIT_NS);
        assert_eq!(wait_budget_ns(0), 0);
    }

    #[test]
    fn a_stream_waits_until_a_sample_ends_at_or_past_the_rep_end() {
        let end = mark(10_550 * MS);
        // Last sample ends at 10.4 s: the window 10.4–10.6 s is still due.
        assert_eq!(due(&stream(10_400 * MS, 8), &end), Some(300 * MS));
        // Its sample came: nothing more to wait for (also when it ends exactly there).
        assert_eq!(due(&stream(10_600 * MS, 8), &end), None);
        assert_eq!(due(&stream(10_550 * MS, 8), &mark(10_550 * MS)), None);
    }

    #[test]
    fn nothing_waits_without_a_measured_period_or_a_known_clock() {
        let end = mark(10_550 * MS);
        assert_eq!(due(&DriverStream::default(), &end), None);
        assert_eq!(due(&stream(10_400 * MS, 1), &end), None, "one sample");
        // Timestamps on no host clock (an hour in the future on every one).
        let mut odd = DriverStream::default();
        for k in 0..4 {
            odd.add((REALTIME_OFFSET + 20_000_000 * MS + k * 200 * MS) / 1_000);
        }
        assert_eq!(due(&odd, &end), None);
    }

    #[test]
    fn the_stream_keeps_its_latest_samples_in_order() {
        let mut s = DriverStream::default();
        for k in 0..40u64 {
            // A 100 ms period for the first half, 200 ms after.
            let ts = if k < 20 {
                k * 100_000
            } else {
                2_000_000 + (k - 19) * 200_000
            };
            s.add(ts);
            // Fetched again (SM and memory samples merged): ignored.
            s.add(ts);
        }
        assert_eq!(s.recent.len(), KEEP);
        assert_eq!(s.period_ns(), Some(200 * MS));
        assert_eq!(s.newest_us(), Some(2_000_000 + 20 * 200_000));
    }
}
