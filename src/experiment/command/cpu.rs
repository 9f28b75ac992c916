//! The CPU time of an external program over each of its spans, for programs that send
//! nothing but their span lines.
//!
//! gapscope's own spans read CLOCK_PROCESS_CPUTIME_ID at both ends. A program's span
//! lines carry no CPU time (unless it adds the attribute `process_cpu_ns`, which then
//! wins), so gapscope reads the program's CPU clock from outside — the same clock,
//! `clock_getcpuclockid(pid)`: every thread of the program, also those that ended — at
//! the spawn (zero), every [`PERIOD`] while it runs, and once it exited (before it is
//! reaped, while its clock still reads). A span's CPU time is that series, linearly
//! interpolated, at its end minus at its start; its error is at most the CPU the
//! program used in one period at each end. The root span's is exact (both ends are
//! readings). The same series, thinned to the telemetry period, is the rep's CPU lane
//! (telemetry rows of source `process_cpu`).
//!
//! Why this clock and not the perf task-clock opened on the program with inherit: it
//! needs no perf permission and no counters (it works with `counters = false` and under
//! `perf_event_paranoid` 3), it reads in nanoseconds where /proc's utime+stime read in
//! 10 ms ticks, and it is the clock an exact per-span value from the emitters reads, so
//! interpolated and exact values mean the same thing. What it leaves out: processes the
//! program starts (a wrapper script's program) — run the program itself, or `exec` it.

use std::time::Duration;

use crate::store::TelemetryRow;
use crate::trace::{now_ns, process_cpu_ns_of};

/// How often the program's CPU clock is read while it runs (also how often gapscope
/// checks whether it exited).
pub const PERIOD: Duration = Duration::from_millis(5);

/// Readings of one program's CPU clock: (span-clock time, CPU ns), in time order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CpuSeries {
    pub points: Vec<(u64, u64)>,
}

impl CpuSeries {
    /// A series that starts at `start_ns` with no CPU used (just before the spawn).
    pub fn starting(start_ns: u64) -> CpuSeries {
        CpuSeries {
            points: vec![(start_ns, 0)],
        }
    }

    /// Reads `pid`'s CPU clock now; false where it cannot be read (reaped, or no such
    /// clock).
    pub fn read(&mut self, pid: i32) -> bool {
        let t = now_ns();
        match process_cpu_ns_of(pid) {
            Some(c) => {
                // Time order, and CPU time never goes back.
                let last = self.points.last().copied().unwrap_or_default();
                self.points.push((t.max(last.0), c.max(last.1)));
                true
            }
            None => false,
        }
    }

    /// Whether the program's clock was read at least once (besides the start).
    pub fn measured(&self) -> bool {
        self.points.len() > 1
    }

    /// The interpolated CPU time at `t`.
    pub fn at(&self, t: u64) -> f64 {
        let p = &self.points;
        let i = p.partition_point(|&(pt, _)| pt <= t);
        match (i.checked_sub(1).map(|j| p[j]), p.get(i)) {
            (Some((t0, c0)), Some(&(t1, c1))) if t1 > t0 => {
                c0 as f64 + (c1 - c0) as f64 * (t - t0) as f64 / (t1 - t0) as f64
            }
            (Some((_, c0)), _) => c0 as f64,
            (None, Some(&(_, c1))) => c1 as f64,
            (None, None) => 0.0,
        }
    }

    /// The CPU time between `start` and `end`, interpolated.
    pub fn over(&self, start: u64, end: u64) -> u64 {
        (self.at(end) - self.at(start)).max(0.0).round() as u64
    }

    /// The rep's CPU-lane rows: readings at least `period_ns` apart, the first and the
    /// last always.
    pub fn lane_rows(&self, rep: u32, variant: &str, period_ns: u64) -> Vec<TelemetryRow> {
        let mut kept: Vec<(u64, u64)> = Vec::new();
        for (i, &pt) in self.points.iter().enumerate() {
            let last = i + 1 == self.points.len();
            match kept.last() {
                Some(&(t0, _)) if !last && pt.0 < t0 + period_ns => {}
                _ => kept.push(pt),
            }
        }
        kept.into_iter()
            .map(|(t_ns, cpu)| TelemetryRow {
                rep,
                variant: variant.to_string(),
                source: crate::store::lanes::series::SOURCE_PROCESS_CPU.into(),
                t_ns,
                process_cpu_ns: Some(cpu),
                ..TelemetryRow::sample()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_get_the_interpolated_cpu_between_their_ends() {
        let s = CpuSeries {
            points: vec![(100, 0), (200, 50), (300, 250), (400, 250)],
        };
        assert_eq!(s.over(100, 400), 250);
        assert_eq!(s.over(150, 250), 150 - 25);
        assert_eq!(s.over(300, 400), 0);
        // Outside the readings: the nearest one.
        assert_eq!(s.over(0, 100), 0);
        assert_eq!(s.over(400, 900), 0);
        assert_eq!(s.at(350), 250.0);
        let rows = s.lane_rows(2, "v", 150);
        let t: Vec<u64> = rows.iter().map(|r| r.t_ns).collect();
        assert_eq!(t, [100, 300, 400]);
        assert!(rows.iter().all(|r| r.source == "process_cpu" && r.rep == 2));
        assert_eq!(rows[1].process_cpu_ns, Some(250));
    }

    #[test]
    fn a_processes_clock_reads_from_outside_and_not_once_it_is_gone() {
        let mut s = CpuSeries::starting(now_ns());
        let mut x = 1u64;
        let t0 = now_ns();
        while now_ns() - t0 < 20_000_000 {
            x = std::hint::black_box(x.wrapping_mul(3));
        }
        assert!(s.read(std::process::id() as i32));
        assert!(s.measured());
        assert!(s.points[1].1 >= 10_000_000, "{s:?}");
        assert!(!s.read(-5));
    }
}
