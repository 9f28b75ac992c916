//! NVML: device information and a background sampler resumed and paused with each rep.
//!
//! The sampler reads through the [`GpuProbe`] trait, so its threading (period, windows,
//! timestamps on the span clock) is tested with a fake probe on machines without a GPU;
//! [`super::nvml_probe::NvmlProbe`] is the real one (nvml-wrapper, `libnvidia-ml.so.1`
//! opened at run time).
//!
//! Two threads per run, resumed and paused with each rep (they park between reps, so
//! that no thread is created or ends between one rep and the next): one reads
//! utilisation, memory, power, SM clock and temperature every period; the other reads
//! PCIe TX/RX throughput, which NVML measures over a 20 ms window inside each call, so
//! it cannot share the fast thread's period.
//!
//! The fast thread also reads the process's CPU time every period (the timeline's CPU
//! lane; with [`NoGpu`] it runs on machines without one) and, every
//! [`DRIVER_FETCH_NS`] and when a window closes, the driver's own utilisation samples
//! with their timestamps ([`GpuProbe::util_samples`]), which
//! [`super::placement`] places on the span clock. The sample of a window only enters the
//! driver's buffer when the window ends, so after a window closes the thread goes on
//! fetching until each GPU whose samples are in use has the one covering the close
//! ([`super::driver_clock::due`]: at most 1.5 of the driver's windows, 500 ms at most);
//! the rep's spans are closed by then, so only the run grows longer.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use super::driver_clock::{self, DriverStream, EndMark};
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

/// One utilisation sample from the driver's buffer: the share of the driver's sample
/// period, ending at `ts_us`, during which a kernel ran (SM) or memory was read or
/// written. `ts_us` is NVML's "CPU timestamp in microseconds" on a clock NVML does not
/// name ([`super::driver_clock::detect_clock`] finds it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DriverSample {
    pub ts_us: u64,
    pub sm_util_pct: Option<u32>,
    pub mem_util_pct: Option<u32>,
}

/// How often the fast thread fetches the driver's utilisation samples (they wait in the
/// driver's buffer; fetching every period would double NVML's calls).
pub const DRIVER_FETCH_NS: u64 = 100_000_000;

/// A source of GPU readings.
pub trait GpuProbe: Send + Sync + 'static {
    fn gpus(&self) -> u32;
    fn read(&self, gpu: u32) -> FastReading;
    /// May block while the driver measures (NVML: 20 ms per counter).
    fn read_pcie(&self, gpu: u32) -> PcieReading;
    /// GPU memory used by process `pid` over all GPUs, where the driver tells.
    fn process_mem_used(&self, pid: u32) -> Option<u64>;
    /// The driver's utilisation samples of `gpu` newer than `since_us` (0: all it
    /// keeps), by time; an error says why there are none to read.
    fn util_samples(&self, _gpu: u32, _since_us: u64) -> Result<Vec<DriverSample>, String> {
        Err("this probe keeps no driver samples".into())
    }
}

/// The probe of a machine without a GPU: the sampler then reads the process's CPU time
/// only.
pub struct NoGpu;

impl GpuProbe for NoGpu {
    fn gpus(&self) -> u32 {
        0
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
}

/// One reading of one GPU, on the span clock; or of the process's CPU time
/// (`process_cpu_ns`, gpu 0); or one of the driver's samples fetched at `t_ns`
/// (`driver`, its own time not yet on the span clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    pub gpu: u32,
    pub t_ns: u64,
    pub read_ns: u64,
    pub fast: Option<FastReading>,
    pub pcie: Option<PcieReading>,
    pub process_cpu_ns: Option<u64>,
    pub driver: Option<DriverSample>,
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
            process_cpu_ns: None,
            driver: None,
        }
    }

    /// The process's CPU time now (None where the clock cannot be read).
    fn process_cpu() -> Option<Self> {
        let t_ns = now_ns();
        let cpu = crate::trace::process_cpu_ns()?;
        Some(Sample {
            gpu: 0,
            t_ns,
            read_ns: now_ns() - t_ns,
            fast: None,
            pcie: None,
            process_cpu_ns: Some(cpu),
            driver: None,
        })
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
            } else if self.process_cpu_ns.is_some() {
                crate::store::lanes::series::SOURCE_PROCESS_CPU
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
            util_placement: None,
            util_window_ns: None,
            process_cpu_ns: self.process_cpu_ns,
        }
    }
}

/// Where the fast thread stands in each GPU's driver buffer, across windows.
#[derive(Default)]
struct DriverCursor {
    last_seen_us: Vec<u64>,
    /// The GPU's buffer could not be read; it is not asked again this run.
    off: Vec<bool>,
    /// The GPU's latest timestamps, for its period.
    streams: Vec<DriverStream>,
}

impl DriverCursor {
    /// Fetches every GPU's samples newer than those already fetched.
    fn fetch(&mut self, probe: &dyn GpuProbe, shared: &Shared, out: &mut Vec<Sample>) {
        for gpu in 0..probe.gpus() {
            let i = gpu as usize;
            if i >= self.off.len() {
                self.off.resize(i + 1, false);
                self.last_seen_us.resize(i + 1, 0);
                self.streams.resize(i + 1, DriverStream::default());
            }
            if self.off[i] {
                continue;
            }
            match probe.util_samples(gpu, self.last_seen_us[i]) {
                Ok(samples) => {
                    let t_ns = now_ns();
                    for d in samples {
                        self.last_seen_us[i] = self.last_seen_us[i].max(d.ts_us);
                        self.streams[i].add(d.ts_us);
                        out.push(Sample {
                            gpu,
                            t_ns,
                            read_ns: 0,
                            fast: None,
                            pcie: None,
                            process_cpu_ns: None,
                            driver: Some(d),
                        });
                    }
                }
                Err(e) => {
                    self.off[i] = true;
                    shared.lock().driver_unavailable.insert(gpu, e);
                }
            }
        }
    }

    /// After window `seen` closed at `end`: fetches, and fetches again every
    /// [`driver_clock::POLL_NS`], until no GPU is still [`driver_clock::due`] its last
    /// window, or the longest due GPU's budget after `end` has passed (then once more at
    /// that moment). Without GPUs or readable buffers nothing is due, so nothing waits.
    fn fetch_last_window(
        &mut self,
        probe: &dyn GpuProbe,
        shared: &Shared,
        seen: u64,
        end: &EndMark,
        out: &mut Vec<Sample>,
    ) {
        loop {
            self.fetch(probe, shared, out);
            let budget = self
                .streams
                .iter()
                .zip(&self.off)
                .filter(|(_, off)| !**off)
                .filter_map(|(s, _)| driver_clock::due(s, end))
                .max();
            let Some(budget) = budget else { return };
            let deadline = end.span_ns + budget;
            let now = now_ns();
            if now >= deadline
                || !shared.sleep_after_window(seen, deadline.min(now + driver_clock::POLL_NS))
            {
                return;
            }
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
    /// Per GPU, why the driver's samples could not be read.
    driver_unavailable: BTreeMap<u32, String>,
    /// When window `epoch` was closed by [`Sampler::close`].
    end: Option<EndMark>,
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

    /// After window `seen` closed: sleeps until `deadline_ns` (span clock); false if the
    /// sampler is dropped or a newer window opened meanwhile.
    fn sleep_after_window(&self, seen: u64, deadline_ns: u64) -> bool {
        self.sleep_while(deadline_ns, |g| !g.shutdown && g.epoch == seen)
    }

    /// Sleeps until `deadline_ns` (span clock) or the end of window `seen`; true if the
    /// window is still open.
    fn sleep_in_window(&self, seen: u64, deadline_ns: u64) -> bool {
        self.sleep_while(deadline_ns, |g| g.open(seen))
    }

    /// Sleeps until `deadline_ns` while `keep` holds; whether it still held at the end.
    fn sleep_while(&self, deadline_ns: u64, keep: impl Fn(&State) -> bool) -> bool {
        let mut g = self.lock();
        loop {
            if !keep(&g) {
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
    /// readings and the process's CPU time every `period` (the first one at once), the
    /// driver's samples every [`DRIVER_FETCH_NS`] and at the window's end, PCIe
    /// throughput (with `pcie`) back to back with `period` between rounds. They start
    /// parked.
    pub fn spawn(
        probe: Arc<dyn GpuProbe>,
        period: Duration,
        pcie: bool,
    ) -> std::io::Result<Sampler> {
        // The sampler's threads, each a loop made here with its own handles: the readings
        // (with the driver's samples), then the PCIe one. Made in one place so that a
        // failed spawn drops the threads spawned before it.
        let n = 1 + usize::from(pcie);
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                epoch: 0,
                running: false,
                shutdown: false,
                parked: n,
                samples: Vec::new(),
                driver_unavailable: BTreeMap::new(),
                end: None,
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
            sampler
                .threads
                .push(spawn_worker("gapscope-nvml", shared.clone(), {
                    let mut cursor = DriverCursor::default();
                    let fetch_every = (DRIVER_FETCH_NS / period_ns).max(1);
                    move |shared, seen, out| {
                        let mut tick = now_ns();
                        let mut round = 0u64;
                        loop {
                            out.extend(Sample::process_cpu());
                            for gpu in 0..probe.gpus() {
                                out.push(Sample::timed(gpu, || (Some(probe.read(gpu)), None)));
                            }
                            if round.is_multiple_of(fetch_every) {
                                cursor.fetch(probe.as_ref(), shared, out);
                            }
                            round += 1;
                            // Next tick on the grid; if a round overran, skip the missed ticks
                            // rather than sampling in a burst.
                            let now = now_ns();
                            tick += period_ns;
                            if tick < now {
                                tick += (now - tick).div_ceil(period_ns) * period_ns;
                            }
                            if !shared.sleep_in_window(seen, tick) {
                                // What the driver sampled since the last fetch, up to the
                                // window covering the close.
                                let end = {
                                    let g = shared.lock();
                                    g.end.clone().filter(|_| g.epoch == seen)
                                };
                                match end {
                                    Some(end) => cursor.fetch_last_window(
                                        probe.as_ref(),
                                        shared,
                                        seen,
                                        &end,
                                        out,
                                    ),
                                    None => cursor.fetch(probe.as_ref(), shared, out),
                                }
                                return;
                            }
                        }
                    }
                })?);
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
        g.end = None;
        self.shared.cv.notify_all();
    }

    /// Closes the window and returns when (span clock): sampling stops, and the driver's
    /// samples are fetched until the one covering this moment has come (or for at most
    /// 1.5 of the driver's windows), while the caller does other work. [`Sampler::pause`]
    /// then collects them; it closes the window itself if this was not called.
    pub fn close(&self) -> u64 {
        let mut g = self.shared.lock();
        if g.running {
            g.running = false;
            g.end = Some(EndMark::now());
            self.shared.cv.notify_all();
        }
        g.end.as_ref().map_or_else(now_ns, |e| e.span_ns)
    }

    /// Closes the window (if [`Sampler::close`] did not), waits until every thread has
    /// parked, and returns the window's samples by time.
    pub fn pause(&self) -> Vec<Sample> {
        self.close();
        let mut g = self.shared.lock();
        while g.parked < self.threads.len() {
            g = self.shared.wait(g);
        }
        let mut out: Vec<Sample> = g.samples.drain(..).collect();
        drop(g);
        out.sort_by_key(|s| (s.t_ns, s.gpu));
        out
    }

    /// Per GPU, why the driver's utilisation samples could not be read (then its
    /// utilisation is placed from the reads).
    pub fn driver_unavailable(&self) -> BTreeMap<u32, String> {
        self.shared.lock().driver_unavailable.clone()
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
#[path = "nvml_tests.rs"]
mod tests;
