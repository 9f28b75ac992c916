//! The span clock checked against CLOCK_MONOTONIC over a long run (`benches/clock_check.rs`
//! drives it; ten minutes is the claim in docs/span-cost.md): every period, on each CPU
//! in turn (the TSC of every core is read, not only the keeper's), the span clock is
//! read between two `clock_gettime(CLOCK_MONOTONIC)` calls; its error is its distance
//! from the middle of that bracket, less half the bracket (what the reads themselves
//! cannot resolve).

use std::time::Duration;

use super::clock;

/// What the check found.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ClockCheck {
    pub seconds: f64,
    pub period_ms: u64,
    pub samples: u64,
    /// CPUs the reads were spread over.
    pub cpus: usize,
    /// "tsc" or "clock_gettime".
    pub clock: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tsc_khz: Option<u64>,
    /// Largest |span clock − CLOCK_MONOTONIC| beyond the bracket of the reads, ns.
    pub max_error_ns: u64,
    pub p99_error_ns: u64,
    pub median_error_ns: u64,
    /// Largest bracket of two CLOCK_MONOTONIC reads (the resolution of a sample), ns.
    pub max_bracket_ns: u64,
    /// Largest error of each minute of the run, ns.
    pub per_minute_max_error_ns: Vec<u64>,
    /// The largest drift the keeper's own re-anchors measured in the process, ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keeper_max_error_ns: Option<u64>,
    pub keeper_checks: u64,
    pub limit_ns: u64,
    pub passed: bool,
}

/// The claim: the span clock within 1 µs of CLOCK_MONOTONIC.
pub const LIMIT_NS: u64 = 1_000;

/// One sample's error beyond its bracket, and the bracket (best of three tries).
fn sample() -> (u64, u64) {
    (0..3)
        .map(|_| {
            let a = clock::monotonic_ns();
            let t = super::now_ns();
            let b = clock::monotonic_ns();
            let bracket = b.saturating_sub(a);
            let mid = a + bracket / 2;
            (t.abs_diff(mid).saturating_sub(bracket / 2), bracket)
        })
        .min_by_key(|&(_, bracket)| bracket)
        .expect("three tries")
}

fn allowed_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; the call fills it for this thread.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is valid and its size is passed.
    let rc = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
    if rc != 0 {
        return Vec::new();
    }
    // SAFETY: CPU_ISSET reads the set filled above.
    (0..libc::CPU_SETSIZE as usize)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect()
}

fn pin(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET adds one CPU of range.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is valid; failing to pin only leaves this thread where it is.
    unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
}

/// Runs the check for `seconds` on the calling thread (whose CPU affinity it changes
/// and restores), calling `progress` after each minute with the result so far.
pub fn run(seconds: f64, period: Duration, mut progress: impl FnMut(&ClockCheck)) -> ClockCheck {
    let info = super::clock_info(1_000);
    let cpus = allowed_cpus();
    let start = clock::monotonic_ns();
    let end = start + (seconds * 1e9) as u64;
    let mut errors: Vec<u64> = Vec::new();
    let mut out = ClockCheck {
        seconds,
        period_ms: period.as_millis() as u64,
        cpus: cpus.len().max(1),
        limit_ns: LIMIT_NS,
        ..Default::default()
    };
    let mut next = start;
    let mut minute_max = 0u64;
    let mut minute = 0u64;
    let mut i = 0usize;
    loop {
        let now = clock::monotonic_ns();
        if now >= end {
            break;
        }
        if let Some(&c) = cpus.get(i % cpus.len().max(1)) {
            pin(c);
        }
        let (err, bracket) = sample();
        errors.push(err);
        out.max_bracket_ns = out.max_bracket_ns.max(bracket);
        minute_max = minute_max.max(err);
        i += 1;
        if (now - start) / 60_000_000_000 > minute {
            minute += 1;
            out.per_minute_max_error_ns.push(minute_max);
            minute_max = 0;
            fill(&mut out, &errors);
            progress(&out);
        }
        next += period.as_nanos() as u64;
        let wait = next.saturating_sub(clock::monotonic_ns());
        std::thread::sleep(Duration::from_nanos(wait));
    }
    out.per_minute_max_error_ns.push(minute_max);
    let restore = libc_cpuset(&cpus);
    if let Some(set) = restore {
        // SAFETY: `set` is valid: the affinity this thread had before the check.
        unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
    }
    fill(&mut out, &errors);
    let after = clock::info_now();
    out.clock = after.source.to_string();
    out.clock_reason = after.reason.or(info.reason);
    out.tsc_khz = after.tsc_khz;
    out.keeper_max_error_ns = after.max_error_ns;
    out.keeper_checks = after.checks;
    out.passed = out.samples > 0 && out.max_error_ns <= LIMIT_NS;
    out
}

fn libc_cpuset(cpus: &[usize]) -> Option<libc::cpu_set_t> {
    if cpus.is_empty() {
        return None;
    }
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET adds CPUs of range.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    Some(set)
}

fn fill(out: &mut ClockCheck, errors: &[u64]) {
    let mut sorted = errors.to_vec();
    sorted.sort_unstable();
    out.samples = sorted.len() as u64;
    let q = |p: f64| {
        sorted
            .get(((sorted.len() as f64 - 1.0) * p).round() as usize)
            .copied()
            .unwrap_or(0)
    };
    out.max_error_ns = sorted.last().copied().unwrap_or(0);
    out.p99_error_ns = q(0.99);
    out.median_error_ns = q(0.5);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_check_samples_every_cpu_and_finds_the_clock_within_its_limit() {
        let c = run(0.5, Duration::from_millis(5), |_| {});
        assert!(c.samples >= 20, "{c:?}");
        assert!(c.cpus >= 1);
        assert_eq!(c.per_minute_max_error_ns.len(), 1);
        assert!(c.median_error_ns <= c.p99_error_ns && c.p99_error_ns <= c.max_error_ns);
        // On a shared VM a sample can be preempted between its reads; the bracket then
        // grows and absorbs it, so the error beyond the bracket stays small.
        assert!(c.max_error_ns < 100_000, "{c:?}");
    }
}
