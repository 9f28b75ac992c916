//! NVML: device information and a background sampler resumed and paused with each rep.
//!
//! The sampler reads through the [`GpuProbe`] trait, so its threading (period, windows,
//! timestamps on the span clock) is tested with a fake probe on machines without a GPU;
//! [`NvmlProbe`] is the real one (nvml-wrapper, `libnvidia-ml.so.1` opened at run time).
//!
//! Two threads per run, resumed and paused with each rep (they park between reps, so
//! that no thread is created or ends between one rep and the next): one reads
//! utilisation, memory, power, SM clock and temperature every period; the other reads
//! PCIe TX/RX throughput, which NVML measures over a 20 ms window inside each call, so
//! it cannot share the fast thread's period.

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use nvml_wrapper::enum_wrappers::device::{Clock, PcieUtilCounter, TemperatureSensor};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::Nvml;

use crate::store::TelemetryRow;
use crate::trace::now_ns;

/// The per-period readings of one GPU; `None` where the GPU does not report a value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FastReading {
    pub sm_util_pct: Option<u32>,
    pub mem_util_pct: Option<u32>,
    pub mem_used_bytes: Option<u64>,
    pub power_mw: Option<u32>,
    pub sm_clock_mhz: Option<u32>,
    pub temperature_c: Option<u32>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PcieReading {
    pub tx_bytes_per_s: Option<u64>,
    pub rx_bytes_per_s: Option<u64>,
}

/// A source of GPU readings.
pub trait GpuProbe: Send + Sync + 'static {
    fn gpus(&self) -> u32;
    fn read(&self, gpu: u32) -> FastReading;
    /// May block while the driver measures (NVML: 20 ms per counter).
    fn read_pcie(&self, gpu: u32) -> PcieReading;
    /// GPU memory used by process `pid` over all GPUs, where the driver tells.
    fn process_mem_used(&self, pid: u32) -> Option<u64>;
}

/// One reading of one GPU, on the span clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    pub gpu: u32,
    pub t_ns: u64,
    pub read_ns: u64,
    pub fast: Option<FastReading>,
    pub pcie: Option<PcieReading>,
}

impl Sample {
    /// Takes one reading of `gpu`, stamped with when it began and how long it took.
    fn timed(gpu: u32, read: impl FnOnce() -> (Option<FastReading>, Option<PcieReading>)) -> Self {
        let t_ns = now_ns();
        let (fast, pcie) = read();
        Sample {
            gpu,
            t_ns,
            read_ns: now_ns() - t_ns,
            fast,
            pcie,
        }
    }

    pub fn to_row(&self, rep: u32, variant: &str) -> TelemetryRow {
        let f = self.fast.unwrap_or_default();
        let p = self.pcie.unwrap_or_default();
        TelemetryRow {
            rep,
            variant: variant.to_string(),
            gpu: self.gpu,
            source: if self.pcie.is_some() {
                "nvml_pcie"
            } else {
                "nvml"
            }
            .into(),
            t_ns: self.t_ns,
            read_ns: self.read_ns,
            sm_util_pct: f.sm_util_pct,
            mem_util_pct: f.mem_util_pct,
            mem_used_bytes: f.mem_used_bytes,
            power_mw: f.power_mw,
            sm_clock_mhz: f.sm_clock_mhz,
            temperature_c: f.temperature_c,
            pcie_tx_bytes_per_s: p.tx_bytes_per_s,
            pcie_rx_bytes_per_s: p.rx_bytes_per_s,
        }
    }
}

/// The sampling threads' shared state; `epoch` counts windows (resumes).
struct State {
    epoch: u64,
    /// A window is open: set by resume, cleared by pause.
    running: bool,
    shutdown: bool,
    /// Threads that have handed over their samples of window `epoch` and wait for the
    /// next one.
    parked: usize,
    samples: Vec<Sample>,
}

impl State {
    /// The window `seen` is still open.
    fn open(&self, seen: u64) -> bool {
        self.running && self.epoch == seen && !self.shutdown
    }
}

/// The sampling threads and the sampler meet here; every change is announced on `cv`,
/// so that a parked thread wakes for a window and a sleeping one wakes when it ends.
struct Shared {
    state: Mutex<State>,
    cv: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn wait<'a>(&self, g: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        self.cv.wait(g).unwrap_or_else(|e| e.into_inner())
    }

    fn is_open(&self, seen: u64) -> bool {
        self.lock().open(seen)
    }

    /// Sleeps until `deadline_ns` (span clock) or the end of window `seen`; true if the
    /// window is still open.
    fn sleep_in_window(&self, seen: u64, deadline_ns: u64) -> bool {
        let mut g = self.lock();
        loop {
            if !g.open(seen) {
                return false;
            }
            let now = now_ns();
            if now >= deadline_ns {
                return true;
            }
            g = self
                .cv
                .wait_timeout(g, Duration::from_nanos(deadline_ns - now))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

/// A sampling thread's life: parked until a window opens, `window` samples it into a
/// buffer kept across windows, then the samples are handed over and the thread parks
/// again, until the sampler is dropped.
fn worker(shared: &Shared, mut window: impl FnMut(&Shared, u64, &mut Vec<Sample>)) {
    let mut local = Vec::new();
    let mut seen = 0;
    let mut g = shared.lock();
    loop {
        while !g.shutdown && g.epoch == seen {
            g = shared.wait(g);
        }
        if g.shutdown {
            return;
        }
        seen = g.epoch;
        // A pause that came before this thread woke leaves nothing to sample, but the
        // thread still parks for the window.
        let running = g.running;
        drop(g);
        if running {
            // A panicking probe must not leave the pause waiting for this thread.
            let _ = std::panic::catch_unwind(AssertUnwindSafe(|| window(shared, seen, &mut local)));
        }
        g = shared.lock();
        if g.epoch == seen {
            g.samples.append(&mut local);
            g.parked += 1;
            shared.cv.notify_all();
        } else {
            // A newer window was opened without a pause: this one's samples go.
            local.clear();
        }
    }
}

fn spawn_worker(
    name: &str,
    shared: Arc<Shared>,
    window: impl FnMut(&Shared, u64, &mut Vec<Sample>) + Send + 'static,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || worker(&shared, window))
}

/// Background sampling for a whole run: the threads are spawned once, parked between
/// reps, and sample only inside the windows between [`Sampler::resume`] and
/// [`Sampler::pause`]; dropping the sampler ends and joins them.
pub struct Sampler {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl Sampler {
    /// Spawns the threads that sample every GPU of `probe` inside each window: the fast
    /// readings every `period` (the first one at once), PCIe throughput (with `pcie`)
    /// back to back with `period` between rounds. They start parked.
    pub fn spawn(
        probe: Arc<dyn GpuProbe>,
        period: Duration,
        pcie: bool,
    ) -> std::io::Result<Sampler> {
        let n = 1 + usize::from(pcie);
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                epoch: 0,
                running: false,
                shutdown: false,
                parked: n,
                samples: Vec::new(),
            }),
            cv: Condvar::new(),
        });
        let period_ns = period.as_nanos().max(1) as u64;
        // Should a spawn fail, dropping this ends the threads already spawned.
        let mut sampler = Sampler {
            shared: shared.clone(),
            threads: Vec::with_capacity(n),
        };
        {
            let probe = probe.clone();
            sampler.threads.push(spawn_worker(
                "gapscope-nvml",
                shared.clone(),
                move |shared, seen, out| {
                    let mut tick = now_ns();
                    loop {
                        for gpu in 0..probe.gpus() {
                            out.push(Sample::timed(gpu, || (Some(probe.read(gpu)), None)));
                        }
                        // Next tick on the grid; if a round overran, skip the missed ticks
                        // rather than sampling in a burst.
                        let now = now_ns();
                        tick += period_ns;
                        if tick < now {
                            tick += (now - tick).div_ceil(period_ns) * period_ns;
                        }
                        if !shared.sleep_in_window(seen, tick) {
                            return;
                        }
                    }
                },
            )?);
        }
        if pcie {
            sampler.threads.push(spawn_worker(
                "gapscope-nvml-pcie",
                shared,
                move |shared, seen, out| loop {
                    for gpu in 0..probe.gpus() {
                        if !shared.is_open(seen) {
                            return;
                        }
                        out.push(Sample::timed(gpu, || (None, Some(probe.read_pcie(gpu)))));
                    }
                    if !shared.sleep_in_window(seen, now_ns() + period_ns) {
                        return;
                    }
                },
            )?);
        }
        Ok(sampler)
    }

    /// Opens a sampling window.
    pub fn resume(&self) {
        let mut g = self.shared.lock();
        g.epoch += 1;
        g.running = true;
        g.parked = 0;
        g.samples.clear();
        self.shared.cv.notify_all();
    }

    /// Closes the window, waits until every thread has parked, and returns the window's
    /// samples by time.
    pub fn pause(&self) -> Vec<Sample> {
        let mut g = self.shared.lock();
        g.running = false;
        self.shared.cv.notify_all();
        while g.parked < self.threads.len() {
            g = self.shared.wait(g);
        }
        let mut out: Vec<Sample> = g.samples.drain(..).collect();
        drop(g);
        out.sort_by_key(|s| (s.t_ns, s.gpu));
        out
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.shared.lock().shutdown = true;
        self.shared.cv.notify_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// NVML through nvml-wrapper.
pub struct NvmlProbe {
    nvml: Nvml,
    gpus: u32,
}

impl NvmlProbe {
    /// Opens NVML (`libnvidia-ml.so.1`, from the driver); an error says why not.
    pub fn open() -> Result<NvmlProbe, String> {
        let nvml = super::dylib::guard("NVML", || {
            Nvml::init().map_err(|e| format!("NVML init failed: {e}"))
        })?;
        let gpus = nvml
            .device_count()
            .map_err(|e| format!("NVML device count: {e}"))?;
        if gpus == 0 {
            return Err("NVML sees no GPU".into());
        }
        Ok(NvmlProbe { nvml, gpus })
    }

    pub fn nvml(&self) -> &Nvml {
        &self.nvml
    }

    /// meta.json's device entries and versions.
    pub fn device_info(&self) -> DeviceInfo {
        let n = &self.nvml;
        let cuda_driver_version = n.sys_cuda_driver_version().ok().map(|v| {
            format!(
                "{}.{}",
                nvml_wrapper::cuda_driver_version_major(v),
                nvml_wrapper::cuda_driver_version_minor(v)
            )
        });
        let devices = (0..self.gpus)
            .map(|i| match n.device_by_index(i) {
                Ok(d) => serde_json::json!({
                    "index": i,
                    "name": d.name().ok(),
                    "uuid": d.uuid().ok(),
                    "pci_bus_id": d.pci_info().ok().map(|p| p.bus_id),
                    "memory_total_bytes": d.memory_info().ok().map(|m| m.total),
                    "pcie_gen_max": d.max_pcie_link_gen().ok(),
                    "pcie_width_max": d.max_pcie_link_width().ok(),
                    "pcie_gen_current": d.current_pcie_link_gen().ok(),
                    "pcie_width_current": d.current_pcie_link_width().ok(),
                    "max_sm_clock_mhz": d.max_clock_info(Clock::SM).ok(),
                    "max_graphics_clock_mhz": d.max_clock_info(Clock::Graphics).ok(),
                    "max_memory_clock_mhz": d.max_clock_info(Clock::Memory).ok(),
                    "power_limit_mw": d.enforced_power_limit().ok(),
                }),
                Err(e) => serde_json::json!({ "index": i, "error": e.to_string() }),
            })
            .collect();
        DeviceInfo {
            driver_version: n.sys_driver_version().ok(),
            cuda_driver_version,
            devices,
            count: self.gpus,
        }
    }
}

/// What NVML says about the machine's GPUs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeviceInfo {
    pub driver_version: Option<String>,
    pub cuda_driver_version: Option<String>,
    pub devices: Vec<serde_json::Value>,
    pub count: u32,
}

impl GpuProbe for NvmlProbe {
    fn gpus(&self) -> u32 {
        self.gpus
    }

    fn read(&self, gpu: u32) -> FastReading {
        let Ok(d) = self.nvml.device_by_index(gpu) else {
            return FastReading::default();
        };
        let util = d.utilization_rates().ok();
        FastReading {
            sm_util_pct: util.as_ref().map(|u| u.gpu),
            mem_util_pct: util.as_ref().map(|u| u.memory),
            mem_used_bytes: d.memory_info().ok().map(|m| m.used),
            power_mw: d.power_usage().ok(),
            sm_clock_mhz: d.clock_info(Clock::SM).ok(),
            temperature_c: d.temperature(TemperatureSensor::Gpu).ok(),
        }
    }

    fn read_pcie(&self, gpu: u32) -> PcieReading {
        let Ok(d) = self.nvml.device_by_index(gpu) else {
            return PcieReading::default();
        };
        // NVML reports KB/s (1 KB = 1024 bytes).
        let kb = |c| d.pcie_throughput(c).ok().map(|v| v as u64 * 1024);
        PcieReading {
            tx_bytes_per_s: kb(PcieUtilCounter::Send),
            rx_bytes_per_s: kb(PcieUtilCounter::Receive),
        }
    }

    fn process_mem_used(&self, pid: u32) -> Option<u64> {
        let mut total = None;
        for i in 0..self.gpus {
            let Ok(d) = self.nvml.device_by_index(i) else {
                continue;
            };
            for p in d.running_compute_processes().unwrap_or_default() {
                if p.pid == pid {
                    if let UsedGpuMemory::Used(b) = p.used_gpu_memory {
                        *total.get_or_insert(0) += b;
                    }
                }
            }
        }
        total
    }
}

/// GPU memory in use for the leak watch: this process's own where the driver lists it
/// (it does not inside some containers), else the whole of every GPU's.
pub fn mem_used_for_leak_watch(probe: &dyn GpuProbe) -> Option<u64> {
    probe.process_mem_used(std::process::id()).or_else(|| {
        (0..probe.gpus())
            .map(|g| probe.read(g).mem_used_bytes)
            .sum::<Option<u64>>()
    })
}

#[cfg(test)]
mod tests {
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
        (fast, samples.len() - fast)
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
            .filter(|s| s.gpu == 0)
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
}
