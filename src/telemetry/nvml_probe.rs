//! The real [`GpuProbe`]: NVML through nvml-wrapper (`libnvidia-ml.so.1`, opened at run
//! time), and the device information meta.json keeps.

use std::collections::BTreeMap;

use nvml_wrapper::enum_wrappers::device::{Clock, PcieUtilCounter, Sampling, TemperatureSensor};
use nvml_wrapper::enums::device::{SampleValue, UsedGpuMemory};
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::Nvml;

use super::nvml::{DriverSample, FastReading, GpuProbe, PcieReading};

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

    /// Each GPU's SM and memory clocks and its current throttle reasons (meta.json's
    /// `drift`).
    pub fn clock_states(&self) -> Vec<crate::store::envinfo::GpuClockState> {
        (0..self.gpus)
            .filter_map(|i| {
                let d = self.nvml.device_by_index(i).ok()?;
                let throttle_reasons = d
                    .current_throttle_reasons()
                    .map(|r| {
                        r.iter_names()
                            .map(|(name, _)| name.to_lowercase())
                            .collect::<Vec<_>>()
                    })
                    .unwrap_or_default();
                Some(crate::store::envinfo::GpuClockState {
                    index: i,
                    sm_clock_mhz: d.clock_info(Clock::SM).ok(),
                    mem_clock_mhz: d.clock_info(Clock::Memory).ok(),
                    throttle_reasons,
                })
            })
            .collect()
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

    fn util_samples(&self, gpu: u32, since_us: u64) -> Result<Vec<DriverSample>, String> {
        let d = self
            .nvml
            .device_by_index(gpu)
            .map_err(|e| format!("device {gpu}: {e}"))?;
        let get = |kind| match d.samples(kind, since_us) {
            Ok(v) => Ok(v),
            // The buffer holds nothing newer yet.
            Err(NvmlError::NotFound) => Ok(Vec::new()),
            Err(e) => Err(format!("nvmlDeviceGetSamples: {e}")),
        };
        let mut by_ts: BTreeMap<u64, DriverSample> = BTreeMap::new();
        for s in get(Sampling::GpuUtilization)? {
            let e = by_ts.entry(s.timestamp).or_default();
            e.ts_us = s.timestamp;
            e.sm_util_pct = pct(&s.value);
        }
        // Memory utilisation is drawn faintly; its absence does not stop the SM line.
        for s in get(Sampling::MemoryUtilization).unwrap_or_default() {
            let e = by_ts.entry(s.timestamp).or_default();
            e.ts_us = s.timestamp;
            e.mem_util_pct = pct(&s.value);
        }
        Ok(by_ts.into_values().collect())
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

/// A utilisation sample's value as a percentage (NVML returns it as unsigned int).
fn pct(v: &SampleValue) -> Option<u32> {
    match *v {
        SampleValue::U32(x) => Some(x),
        SampleValue::U64(x) => u32::try_from(x).ok(),
        SampleValue::I64(x) => u32::try_from(x).ok(),
        SampleValue::F64(x) if x.is_finite() && x >= 0.0 => Some(x.round() as u32),
        SampleValue::F64(_) => None,
    }
}
