//! NVML: device information and a background sampler started and stopped with each rep.
//!
//! The sampler reads through the [`GpuProbe`] trait, so its threading (period, stop,
//! timestamps on the span clock) is tested with a fake probe on machines without a GPU;
//! [`NvmlProbe`] is the real one (nvml-wrapper, `libnvidia-ml.so.1` opened at run time).
//!
//! Two threads per rep: one reads utilisation, memory, power, SM clock and temperature
//! every period; the other reads PCIe TX/RX throughput, which NVML measures over a 20 ms
//! window inside each call, so it cannot share the fast thread's period.

use std::sync::{Arc, Condvar, Mutex};
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

/// A stop flag the sampling threads sleep on, so that a stop wakes them at once.
#[derive(Default)]
struct StopFlag {
    stopped: Mutex<bool>,
    cv: Condvar,
}

impl StopFlag {
    fn stop(&self) {
        *self.stopped.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.cv.notify_all();
    }

    fn is_stopped(&self) -> bool {
        *self.stopped.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sleeps until `deadline_ns` (span clock) or a stop; true if stopped.
    fn sleep_until(&self, deadline_ns: u64) -> bool {
        let mut g = self.stopped.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if *g {
                return true;
            }
            let now = now_ns();
            if now >= deadline_ns {
                return false;
            }
            g = self
                .cv
                .wait_timeout(g, Duration::from_nanos(deadline_ns - now))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

/// Background sampling of one rep.
pub struct Sampler {
    stop: Arc<StopFlag>,
    threads: Vec<JoinHandle<Vec<Sample>>>,
}

impl Sampler {
    /// Starts sampling every GPU of `probe`: the fast readings every `period` (the first
    /// one at once), PCIe throughput back to back with `period` between rounds.
    pub fn start(
        probe: Arc<dyn GpuProbe>,
        period: Duration,
        pcie: bool,
    ) -> std::io::Result<Sampler> {
        let stop = Arc::new(StopFlag::default());
        let period_ns = period.as_nanos().max(1) as u64;
        let mut threads = Vec::new();
        {
            let (probe, stop) = (probe.clone(), stop.clone());
            threads.push(
                std::thread::Builder::new()
                    .name("gapscope-nvml".into())
                    .spawn(move || {
                        let mut out = Vec::new();
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
                            if stop.sleep_until(tick) {
                                return out;
                            }
                        }
                    })?,
            );
        }
        if pcie {
            let (probe, stop) = (probe.clone(), stop.clone());
            threads.push(
                std::thread::Builder::new()
                    .name("gapscope-nvml-pcie".into())
                    .spawn(move || {
                        let mut out = Vec::new();
                        while !stop.is_stopped() {
                            for gpu in 0..probe.gpus() {
                                if stop.is_stopped() {
                                    break;
                                }
                                out.push(Sample::timed(gpu, || (None, Some(probe.read_pcie(gpu)))));
                            }
                            if stop.sleep_until(now_ns() + period_ns) {
                                break;
                            }
                        }
                        out
                    })?,
            );
        }
        Ok(Sampler { stop, threads })
    }

    /// Stops the threads and returns every sample, by time.
    pub fn stop(self) -> Vec<Sample> {
        self.stop.stop();
        let mut out: Vec<Sample> = self
            .threads
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect();
        out.sort_by_key(|s| (s.t_ns, s.gpu));
        out
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
    use std::sync::atomic::{AtomicU64, Ordering};

    /// Two GPUs; each reading takes `cost`; PCIe reads block like NVML's 20 ms window
    /// (shortened).
    struct Fake {
        reads: AtomicU64,
        cost: Duration,
    }

    impl GpuProbe for Fake {
        fn gpus(&self) -> u32 {
            2
        }
        fn read(&self, gpu: u32) -> FastReading {
            std::thread::sleep(self.cost);
            let n = self.reads.fetch_add(1, Ordering::Relaxed);
            FastReading {
                sm_util_pct: Some(gpu * 10),
                mem_used_bytes: Some(1 << 30),
                power_mw: Some(100_000 + n as u32),
                ..Default::default()
            }
        }
        fn read_pcie(&self, _gpu: u32) -> PcieReading {
            std::thread::sleep(Duration::from_millis(4));
            PcieReading {
                tx_bytes_per_s: Some(2048),
                rx_bytes_per_s: None,
            }
        }
        fn process_mem_used(&self, _pid: u32) -> Option<u64> {
            None
        }
    }

    #[test]
    fn sampler_reads_each_gpu_every_period_inside_the_window() {
        let probe = Arc::new(Fake {
            reads: AtomicU64::new(0),
            cost: Duration::from_micros(100),
        });
        let t0 = now_ns();
        let s = Sampler::start(probe, Duration::from_millis(10), true).unwrap();
        std::thread::sleep(Duration::from_millis(105));
        let stop_at = now_ns();
        let samples = s.stop();
        let stopped = now_ns();
        assert!(
            stopped - stop_at < 50_000_000,
            "stop took {} ns",
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
        let probe = Arc::new(Fake {
            reads: AtomicU64::new(0),
            cost: Duration::from_millis(8),
        });
        let s = Sampler::start(probe, Duration::from_millis(5), false).unwrap();
        std::thread::sleep(Duration::from_millis(80));
        let samples = s.stop();
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

    #[test]
    fn leak_watch_memory_falls_back_to_the_whole_gpu() {
        let probe = Fake {
            reads: AtomicU64::new(0),
            cost: Duration::ZERO,
        };
        assert_eq!(mem_used_for_leak_watch(&probe), Some(2 << 30));
    }
}
