//! Mapping CUPTI timestamps onto the span clock (CLOCK_MONOTONIC ns).
//!
//! gapscope registers a CUPTI timestamp callback that returns CLOCK_MONOTONIC, so records
//! normally arrive on the span clock already. The mapping is still measured every rep: a
//! pair (CUPTI timestamp, monotonic time) is sampled at the rep's start and end, and the
//! two offsets give the rate difference (drift) between the clocks. Where the callback
//! could not be registered, records are converted with the linear map through the two
//! pairs.

use crate::store::ClockCalibration;

/// One simultaneous reading of both clocks. `mono_ns` is the midpoint of the host window
/// `[mono_before, mono_after]` around the CUPTI read; `window_ns` is its width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockPair {
    pub cupti_ns: u64,
    pub mono_ns: u64,
    pub window_ns: u64,
}

impl ClockPair {
    /// Offset `mono − cupti`, signed.
    pub fn offset_ns(&self) -> i64 {
        (self.mono_ns as i128 - self.cupti_ns as i128) as i64
    }

    /// Reads both clocks `tries` times and keeps the pair with the narrowest host window
    /// (the least disturbed by preemption).
    pub fn measure(
        tries: usize,
        mut read_cupti: impl FnMut() -> Option<u64>,
        mut mono: impl FnMut() -> u64,
    ) -> Option<ClockPair> {
        let mut best: Option<ClockPair> = None;
        for _ in 0..tries.max(1) {
            let before = mono();
            let c = read_cupti()?;
            let after = mono();
            let window = after.saturating_sub(before);
            let pair = ClockPair {
                cupti_ns: c,
                mono_ns: before + window / 2,
                window_ns: window,
            };
            if best.is_none_or(|b| pair.window_ns < b.window_ns) {
                best = Some(pair);
            }
        }
        best
    }
}

/// The linear map from CUPTI time to span time through two pairs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClockMap {
    pub begin: ClockPair,
    pub end: ClockPair,
}

impl ClockMap {
    /// A map through one pair only (constant offset), for a rep whose end pair is not
    /// yet known.
    pub fn offset_only(p: ClockPair) -> Self {
        ClockMap { begin: p, end: p }
    }

    /// CUPTI time `ts` on the span clock. Interpolates (or extrapolates) linearly; with
    /// equal CUPTI times at both ends it applies the begin offset.
    pub fn to_span_ns(&self, ts: u64) -> u64 {
        let (c0, m0) = (self.begin.cupti_ns as i128, self.begin.mono_ns as i128);
        let (c1, m1) = (self.end.cupti_ns as i128, self.end.mono_ns as i128);
        let t = ts as i128;
        let mapped = if c1 == c0 {
            t + (m0 - c0)
        } else {
            // Round to nearest: m0 + (t − c0)·(m1 − m0)/(c1 − c0).
            let num = (t - c0) * (m1 - m0);
            let den = c1 - c0;
            let q = num.div_euclid(den);
            let r = num.rem_euclid(den);
            m0 + q + if 2 * r >= den { 1 } else { 0 }
        };
        mapped.clamp(0, u64::MAX as i128) as u64
    }

    /// Rate difference in parts per million: how much faster the monotonic clock ran
    /// than CUPTI's between the pairs (0 when they are the same clock).
    pub fn drift_ppm(&self) -> f64 {
        let dc = self.end.cupti_ns as f64 - self.begin.cupti_ns as f64;
        let dm = self.end.mono_ns as f64 - self.begin.mono_ns as f64;
        if dc <= 0.0 {
            return 0.0;
        }
        (dm / dc - 1.0) * 1e6
    }

    /// The record kept in meta.json for rep `rep`.
    pub fn calibration(&self, rep: u32, callback: bool) -> ClockCalibration {
        ClockCalibration {
            rep,
            mode: if callback { "callback" } else { "linear" }.into(),
            offset_begin_ns: self.begin.offset_ns(),
            offset_end_ns: self.end.offset_ns(),
            drift_ppm: self.drift_ppm(),
            uncertainty_ns: self.begin.window_ns.max(self.end.window_ns),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pair(c: u64, m: u64) -> ClockPair {
        ClockPair {
            cupti_ns: c,
            mono_ns: m,
            window_ns: 0,
        }
    }

    #[test]
    fn same_clock_maps_to_itself() {
        let m = ClockMap {
            begin: pair(1_000, 1_000),
            end: pair(9_000_000, 9_000_000),
        };
        for t in [0, 1_000, 5_555_555, 9_000_000, 20_000_000] {
            assert_eq!(m.to_span_ns(t), t);
        }
        assert_eq!(m.drift_ppm(), 0.0);
        let c = m.calibration(3, true);
        assert_eq!(
            (c.rep, c.offset_begin_ns, c.offset_end_ns, c.mode.as_str()),
            (3, 0, 0, "callback")
        );
    }

    #[test]
    fn offset_and_drift_are_applied() {
        // CUPTI runs on an epoch 5 s behind and 100 ppm slow: after 1 s of CUPTI time,
        // 1.0001 s of monotonic time have passed.
        let m = ClockMap {
            begin: pair(0, 5_000_000_000),
            end: pair(1_000_000_000, 6_000_100_000),
        };
        assert_eq!(m.to_span_ns(0), 5_000_000_000);
        assert_eq!(m.to_span_ns(500_000_000), 5_500_050_000);
        assert_eq!(m.to_span_ns(1_000_000_000), 6_000_100_000);
        assert!((m.drift_ppm() - 100.0).abs() < 1e-6, "{}", m.drift_ppm());
        let c = m.calibration(0, false);
        assert_eq!(c.offset_begin_ns, 5_000_000_000);
        assert_eq!(c.offset_end_ns, 5_000_100_000);
        assert_eq!(c.mode, "linear");
    }

    #[test]
    fn negative_offsets_and_single_pairs() {
        let m = ClockMap::offset_only(pair(10_000, 4_000));
        assert_eq!(m.begin.offset_ns(), -6_000);
        assert_eq!(m.to_span_ns(10_500), 4_500);
        // Before the epoch of the span clock: clamped, never wrapped.
        assert_eq!(m.to_span_ns(1_000), 0);
        assert_eq!(m.drift_ppm(), 0.0);
    }

    #[test]
    fn measure_keeps_the_narrowest_window() {
        let mono = std::cell::Cell::new(0u64);
        // Windows of 50, 10, 30 ns; CUPTI reads 7 ns after the window opens.
        let widths = [50u64, 10, 30];
        let i = std::cell::Cell::new(0usize);
        let p = ClockPair::measure(
            3,
            || {
                let c = mono.get() + 7;
                mono.set(mono.get() + widths[i.get()]);
                i.set(i.get() + 1);
                Some(c)
            },
            || mono.get(),
        )
        .unwrap();
        assert_eq!(p.window_ns, 10);
        // Second try: the window is 50..60, CUPTI read at 57, midpoint 55.
        assert_eq!(p.cupti_ns, 57);
        assert_eq!(p.mono_ns, 55);
        assert!(ClockPair::measure(3, || None, || 0).is_none());
    }

    proptest! {
        #[test]
        fn map_is_monotonic_and_exact_at_the_pairs(
            c0 in 0u64..1u64 << 50, dc in 1u64..1u64 << 40,
            m0 in 0u64..1u64 << 50, ppm in -1000i64..1000,
            a in 0u64..1u64 << 41, b in 0u64..1u64 << 41,
        ) {
            let dm = (dc as i128 + dc as i128 * ppm as i128 / 1_000_000) as u64;
            let m = ClockMap { begin: pair(c0, m0), end: pair(c0 + dc, m0 + dm) };
            prop_assert_eq!(m.to_span_ns(c0), m0);
            prop_assert_eq!(m.to_span_ns(c0 + dc), m0 + dm);
            let (lo, hi) = (a.min(b), a.max(b));
            prop_assert!(m.to_span_ns(c0 + lo) <= m.to_span_ns(c0 + hi));
            // Durations change by the drift only: |Δspan − Δcupti| ≤ |ppm|·Δ/1e6 + 1.
            let d_span = m.to_span_ns(c0 + hi) - m.to_span_ns(c0 + lo);
            let d = hi - lo;
            let err = (d_span as i128 - d as i128).unsigned_abs();
            prop_assert!(err <= (d as u128 * ppm.unsigned_abs() as u128) / 1_000_000 + 2, "err {}", err);
        }
    }
}
