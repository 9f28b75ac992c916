//! Tests of [`super`] (nvml.rs), kept beside it.

use super::*;
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::ThreadId;
use std::time::Instant;

/// Two GPUs; each reading takes `cost`; PCIe reads block like NVML's 20 ms window
/// (shortened). Counts its readings and notes which threads took them.
struct Fake {
    reads: AtomicU64,
    pcie_reads: AtomicU64,
    cost: Duration,
    threads: Mutex<HashSet<(&'static str, ThreadId)>>,
}

impl Fake {
    fn new(cost: Duration) -> Fake {
        Fake {
            reads: AtomicU64::new(0),
            pcie_reads: AtomicU64::new(0),
            cost,
            threads: Mutex::default(),
        }
    }

    fn counts(&self) -> (u64, u64) {
        (
            self.reads.load(Ordering::SeqCst),
            self.pcie_reads.load(Ordering::SeqCst),
        )
    }

    fn note_thread(&self, kind: &'static str) {
        let id = std::thread::current().id();
        self.threads.lock().unwrap().insert((kind, id));
    }
}

impl GpuProbe for Fake {
    fn gpus(&self) -> u32 {
        2
    }
    fn read(&self, gpu: u32) -> FastReading {
        self.note_thread("fast");
        std::thread::sleep(self.cost);
        let n = self.reads.fetch_add(1, Ordering::SeqCst);
        FastReading {
            sm_util_pct: Some(gpu * 10),
            mem_used_bytes: Some(1 << 30),
            power_mw: Some(100_000 + n as u32),
            ..Default::default()
        }
    }
    fn read_pcie(&self, _gpu: u32) -> PcieReading {
        self.note_thread("pcie");
        std::thread::sleep(Duration::from_millis(4));
        self.pcie_reads.fetch_add(1, Ordering::SeqCst);
        PcieReading {
            tx_bytes_per_s: Some(2048),
            rx_bytes_per_s: None,
        }
    }
    fn process_mem_used(&self, _pid: u32) -> Option<u64> {
        None
    }
}

/// Waits (generously: the tests share a loaded machine) until `cond` holds.
fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn kinds(samples: &[Sample]) -> (usize, usize) {
    let fast = samples.iter().filter(|s| s.fast.is_some()).count();
    let pcie = samples.iter().filter(|s| s.pcie.is_some()).count();
    (fast, pcie)
}

#[test]
fn sampler_reads_each_gpu_every_period_inside_the_window() {
    let probe = Arc::new(Fake::new(Duration::from_micros(100)));
    let s = Sampler::spawn(probe, Duration::from_millis(10), true).unwrap();
    let t0 = now_ns();
    s.resume();
    std::thread::sleep(Duration::from_millis(105));
    let stop_at = now_ns();
    let samples = s.pause();
    let stopped = now_ns();
    assert!(
        stopped - stop_at < 50_000_000,
        "pause took {} ns",
        stopped - stop_at
    );
    let fast: Vec<&Sample> = samples.iter().filter(|s| s.fast.is_some()).collect();
    // ~11 rounds of 2 GPUs in 105 ms; a loaded 2-core machine may lose some, and
    // the grid never lets it gain any.
    assert!(
        fast.len() >= 8 && fast.len() <= 24,
        "{} fast samples",
        fast.len()
    );
    assert!(fast.iter().any(|s| s.gpu == 0) && fast.iter().any(|s| s.gpu == 1));
    for w in fast.windows(2) {
        assert!(w[0].t_ns <= w[1].t_ns);
    }
    let gpu0: Vec<u64> = fast.iter().filter(|s| s.gpu == 0).map(|s| s.t_ns).collect();
    let gaps: Vec<u64> = gpu0.windows(2).map(|w| w[1] - w[0]).collect();
    let mut sorted = gaps.clone();
    sorted.sort_unstable();
    let median = sorted[sorted.len() / 2];
    assert!(
        (9_000_000..=25_000_000).contains(&median),
        "median gap {median} ns: {gaps:?}"
    );
    assert!(samples.iter().all(|s| s.t_ns >= t0 && s.t_ns <= stopped));
    assert!(fast.iter().all(|s| s.read_ns >= 100_000));
    let pcie: Vec<&Sample> = samples.iter().filter(|s| s.pcie.is_some()).collect();
    assert!(!pcie.is_empty());
    let row = pcie[0].to_row(3, "on");
    assert_eq!(
        (
            row.source.as_str(),
            row.pcie_tx_bytes_per_s,
            row.sm_util_pct
        ),
        ("nvml_pcie", Some(2048), None)
    );
    let row = fast[1].to_row(3, "on");
    assert_eq!(
        (row.rep, row.source.as_str(), row.mem_used_bytes),
        (3, "nvml", Some(1 << 30))
    );
}

#[test]
fn an_overrunning_probe_skips_ticks_instead_of_bursting() {
    // Each round of 2 GPUs takes 16 ms against a 5 ms period.
    let probe = Arc::new(Fake::new(Duration::from_millis(8)));
    let s = Sampler::spawn(probe, Duration::from_millis(5), false).unwrap();
    s.resume();
    std::thread::sleep(Duration::from_millis(80));
    let samples = s.pause();
    assert!(samples.iter().all(|s| s.pcie.is_none()));
    let gpu0: Vec<u64> = samples
        .iter()
        .filter(|s| s.gpu == 0 && s.fast.is_some())
        .map(|s| s.t_ns)
        .collect();
    for w in gpu0.windows(2) {
        assert!(
            w[1] - w[0] >= 15_000_000,
            "rounds closer than one round's cost: {gpu0:?}"
        );
    }
}

/// The same two threads sample window after window, and each window returns exactly
/// the readings taken inside it.
#[test]
fn windows_reuse_the_threads_and_keep_their_own_samples() {
    let probe = Arc::new(Fake::new(Duration::from_micros(50)));
    let s = Sampler::spawn(probe.clone(), Duration::from_millis(2), true).unwrap();
    for window in 0..6 {
        let (fast0, pcie0) = probe.counts();
        // Parked threads read nothing between windows.
        std::thread::sleep(Duration::from_millis(10));
        assert_eq!(probe.counts(), (fast0, pcie0), "read between windows");
        let begin = now_ns();
        s.resume();
        wait_until("readings", || {
            let (f, p) = probe.counts();
            f >= fast0 + 4 && p >= pcie0 + 2
        });
        let samples = s.pause();
        let end = now_ns();
        let (fast1, pcie1) = probe.counts();
        let (fast, pcie) = kinds(&samples);
        assert_eq!(
            (fast as u64, pcie as u64),
            (fast1 - fast0, pcie1 - pcie0),
            "window {window}: samples against readings"
        );
        assert!(
            samples.iter().all(|s| s.t_ns >= begin && s.t_ns <= end),
            "window {window}: a sample outside [{begin}, {end}]"
        );
        assert!(samples
            .windows(2)
            .all(|w| (w[0].t_ns, w[0].gpu) <= (w[1].t_ns, w[1].gpu)));
    }
    let threads = probe.threads.lock().unwrap().clone();
    assert_eq!(
        threads.len(),
        2,
        "one fast and one PCIe thread: {threads:?}"
    );
    drop(s);
    assert_eq!(Arc::strong_count(&probe), 1, "threads still hold the probe");
}

#[test]
fn a_pause_right_after_a_resume_returns_at_once() {
    let probe = Arc::new(Fake::new(Duration::ZERO));
    // The 10 s period puts each thread to sleep after one round, until the pause.
    let s = Sampler::spawn(probe.clone(), Duration::from_secs(10), true).unwrap();
    assert!(s.pause().is_empty(), "a pause before any resume");
    for i in 0..50 {
        let t = Instant::now();
        s.resume();
        let samples = s.pause();
        assert!(t.elapsed() < Duration::from_secs(5), "window {i}: {t:?}");
        let (fast, pcie) = kinds(&samples);
        assert!(fast <= 2 && pcie <= 2, "window {i}: {fast} + {pcie}");
    }
    assert!(s.pause().is_empty(), "a second pause");
    // A resume without a pause before it starts a new window all the same.
    let t = Instant::now();
    s.resume();
    s.resume();
    let samples = s.pause();
    assert!(t.elapsed() < Duration::from_secs(5), "{t:?}");
    let (fast, pcie) = kinds(&samples);
    assert!(fast <= 2 && pcie <= 2, "{fast} + {pcie}");
    drop(s);
    assert_eq!(Arc::strong_count(&probe), 1);
}

#[test]
fn dropping_the_sampler_ends_its_threads_at_once() {
    let probe = Arc::new(Fake::new(Duration::ZERO));
    let t = Instant::now();
    drop(Sampler::spawn(probe.clone(), Duration::from_secs(10), true).unwrap());
    assert_eq!(Arc::strong_count(&probe), 1, "parked threads not joined");
    // Dropped inside a window, while both threads sleep out a 10 s period.
    let s = Sampler::spawn(probe.clone(), Duration::from_secs(10), true).unwrap();
    s.resume();
    wait_until("readings", || {
        let (f, p) = probe.counts();
        f >= 2 && p >= 2
    });
    drop(s);
    assert!(t.elapsed() < Duration::from_secs(5), "{t:?}");
    assert_eq!(Arc::strong_count(&probe), 1, "sampling threads not joined");
}

/// A probe whose PCIe reading panics.
struct Panicky;

impl GpuProbe for Panicky {
    fn gpus(&self) -> u32 {
        1
    }
    fn read(&self, _gpu: u32) -> FastReading {
        FastReading::default()
    }
    fn read_pcie(&self, _gpu: u32) -> PcieReading {
        panic!("PCIe reading failed");
    }
    fn process_mem_used(&self, _pid: u32) -> Option<u64> {
        None
    }
}

#[test]
fn a_panicking_probe_does_not_hang_the_pause() {
    let s = Sampler::spawn(Arc::new(Panicky), Duration::from_millis(1), true).unwrap();
    for _ in 0..3 {
        s.resume();
        std::thread::sleep(Duration::from_millis(20));
        let samples = s.pause();
        assert!(samples.iter().all(|s| s.pcie.is_none()));
    }
}

#[test]
fn leak_watch_memory_falls_back_to_the_whole_gpu() {
    let probe = Fake::new(Duration::ZERO);
    assert_eq!(mem_used_for_leak_watch(&probe), Some(2 << 30));
}

/// A GPU whose driver keeps a sample every 1 ms of the span clock (µs timestamps on it);
/// GPU 1's buffer cannot be read.
struct Buffered;

impl GpuProbe for Buffered {
    fn gpus(&self) -> u32 {
        2
    }
    fn read(&self, _gpu: u32) -> FastReading {
        FastReading::default()
    }
    fn read_pcie(&self, _gpu: u32) -> PcieReading {
        PcieReading::default()
    }
    fn process_mem_used(&self, _pid: u32) -> Option<u64> {
        None
    }
    fn util_samples(&self, gpu: u32, since_us: u64) -> Result<Vec<DriverSample>, String> {
        if gpu == 1 {
            return Err("Not Supported".into());
        }
        let now_ms = now_ns() / 1_000_000;
        // The driver keeps the last 50 samples.
        let first = (since_us / 1_000 + 1).max(now_ms.saturating_sub(49));
        Ok((first..=now_ms)
            .map(|ms| DriverSample {
                ts_us: ms * 1_000,
                sm_util_pct: Some((ms % 100) as u32),
                mem_util_pct: None,
            })
            .collect())
    }
}

#[test]
fn driver_samples_are_fetched_once_each_and_up_to_the_window_end() {
    let s = Sampler::spawn(Arc::new(Buffered), Duration::from_millis(5), false).unwrap();
    let mut seen: Vec<u64> = Vec::new();
    for _ in 0..3 {
        s.resume();
        std::thread::sleep(Duration::from_millis(30));
        let before_pause_ms = now_ns() / 1_000_000;
        let samples = s.pause();
        let driver: Vec<u64> = samples
            .iter()
            .filter_map(|s| s.driver.map(|d| (s.gpu, d.ts_us)))
            .map(|(gpu, ts)| {
                assert_eq!(gpu, 0, "GPU 1's buffer cannot be read");
                ts
            })
            .collect();
        // Fetched at the window's end (the periodic fetches, every 100 ms, came only at
        // its start): the newest sample is from the pause or after it.
        let newest = driver.iter().max().copied().unwrap() / 1_000;
        assert!(
            newest + 1 >= before_pause_ms,
            "newest {newest} ms, pause at {before_pause_ms} ms"
        );
        seen.extend(driver);
        // The process's CPU time at each period, on gpu 0.
        assert!(
            samples
                .iter()
                .filter(|s| s.process_cpu_ns.is_some())
                .count()
                >= 2
        );
    }
    let n = seen.len();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen.len(), n, "a driver sample fetched twice");
    assert_eq!(
        s.driver_unavailable().get(&1).map(String::as_str),
        Some("Not Supported")
    );
    assert!(!s.driver_unavailable().contains_key(&0));
}

/// One GPU whose driver averages windows of `window_us` on CLOCK_REALTIME, as the H200's
/// does, and posts each sample `delay_us` after its window ends; it keeps the last 10.
/// From `stop_after_us` on it posts none.
struct Late {
    window_us: u64,
    delay_us: u64,
    stop_after_us: AtomicU64,
    fetches: AtomicU64,
}

impl Late {
    fn new(window: Duration, delay: Duration) -> Late {
        Late {
            window_us: window.as_micros() as u64,
            delay_us: delay.as_micros() as u64,
            stop_after_us: AtomicU64::new(u64::MAX),
            fetches: AtomicU64::new(0),
        }
    }

    fn realtime_us() -> u64 {
        crate::telemetry::driver_clock::HostClock::Realtime
            .now_ns()
            .unwrap()
            / 1_000
    }
}

impl GpuProbe for Late {
    fn gpus(&self) -> u32 {
        1
    }
    fn read(&self, _gpu: u32) -> FastReading {
        FastReading::default()
    }
    fn read_pcie(&self, _gpu: u32) -> PcieReading {
        PcieReading::default()
    }
    fn process_mem_used(&self, _pid: u32) -> Option<u64> {
        None
    }
    fn util_samples(&self, _gpu: u32, since_us: u64) -> Result<Vec<DriverSample>, String> {
        self.fetches.fetch_add(1, Ordering::SeqCst);
        let posted = Self::realtime_us()
            .saturating_sub(self.delay_us)
            .min(self.stop_after_us.load(Ordering::SeqCst));
        let last = posted / self.window_us;
        Ok((last.saturating_sub(9)..=last)
            .map(|k| k * self.window_us)
            .filter(|&ts| ts > since_us)
            .map(|ts| DriverSample {
                ts_us: ts,
                sm_util_pct: Some(50),
                mem_util_pct: None,
            })
            .collect())
    }
}

fn driver_ts(samples: &[Sample]) -> Vec<u64> {
    samples
        .iter()
        .filter_map(|s| s.driver.map(|d| d.ts_us))
        .collect()
}

/// CLOCK_REALTIME − the span clock, µs.
fn realtime_offset_us() -> i64 {
    Late::realtime_us() as i64 - (now_ns() / 1_000) as i64
}

#[test]
fn the_sample_of_the_last_window_is_waited_for_after_the_close() {
    // 100 ms windows, posted 20 ms late: the one covering the close comes up to 120 ms
    // after it, inside the 150 ms the sampler waits.
    let window = Duration::from_millis(100);
    let s = Sampler::spawn(
        Arc::new(Late::new(window, Duration::from_millis(20))),
        Duration::from_millis(5),
        false,
    )
    .unwrap();
    let mut all = Vec::new();
    for (rep, ms) in [230u64, 170, 310].into_iter().enumerate() {
        s.resume();
        std::thread::sleep(Duration::from_millis(ms));
        let closed = s.close();
        let end_real_us = (closed / 1_000) as i64 + realtime_offset_us();
        let samples = s.pause();
        let waited = now_ns() - closed;
        let ts = driver_ts(&samples);
        let newest = *ts.iter().max().unwrap() as i64;
        // At or past the close (µs rounding and the offset's reading allow 1 ms); the
        // first such sample unless the thread woke very late.
        assert!(
            newest + 1_000 >= end_real_us && newest < end_real_us + 300_000,
            "rep {rep}: newest sample {newest} µs, close at {end_real_us} µs"
        );
        assert!(
            waited < 150_000_000 + 350_000_000,
            "rep {rep}: pause took {waited} ns"
        );
        all.extend(ts);
    }
    let n = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), n, "a driver sample fetched in two windows");
}

#[test]
fn the_wait_ends_when_the_driver_never_posts_the_last_window() {
    for (window_ms, bound_ms) in [(100u64, 150u64), (1_000, 500)] {
        let probe = Arc::new(Late::new(
            Duration::from_millis(window_ms),
            Duration::from_millis(1),
        ));
        let s = Sampler::spawn(probe.clone(), Duration::from_millis(5), false).unwrap();
        s.resume();
        // The first fetch brings ten earlier windows: the period is known.
        wait_until("the first fetch", || {
            probe.fetches.load(Ordering::SeqCst) > 0
        });
        let stop = Late::realtime_us();
        probe.stop_after_us.store(stop, Ordering::SeqCst);
        let closed = s.close();
        let samples = s.pause();
        let waited_ms = (now_ns() - closed) / 1_000_000;
        assert!(
            waited_ms + 1 >= bound_ms && waited_ms < bound_ms + 350,
            "window {window_ms} ms: waited {waited_ms} ms, bound {bound_ms} ms"
        );
        let ts = driver_ts(&samples);
        assert!(ts.len() >= 10 && ts.iter().all(|&t| t <= stop), "{ts:?}");
    }
}

#[test]
fn without_driver_samples_nothing_waits_after_the_close() {
    // No GPU at all, and GPUs whose buffer cannot be read.
    let probes: [Arc<dyn GpuProbe>; 2] = [Arc::new(NoGpu), Arc::new(Fake::new(Duration::ZERO))];
    for probe in probes {
        let s = Sampler::spawn(probe, Duration::from_millis(5), false).unwrap();
        for _ in 0..5 {
            s.resume();
            std::thread::sleep(Duration::from_millis(15));
            let t = Instant::now();
            let samples = s.pause();
            assert!(driver_ts(&samples).is_empty());
            // A wait would last at least 1.5 windows; without samples there is none
            // (the bound leaves a loaded machine room to wake the thread).
            assert!(
                t.elapsed() < Duration::from_millis(120),
                "{:?}",
                t.elapsed()
            );
        }
    }
}
