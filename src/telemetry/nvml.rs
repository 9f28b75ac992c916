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
#[path = "nvml_tests.rs"]
mod tests;
