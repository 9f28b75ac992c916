//! meta.json's `drift`: the machine's load, CPU frequency and governor, and each GPU's
//! clocks and throttle reasons, at the start and the end of a run. The types only:
//! `envinfo` reads the machine, telemetry the GPUs, and the diff prints them.

use serde::{Deserialize, Serialize};

/// The machine at the start of a run and at its end.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Drift {
    pub start: MachineState,
    /// Absent until the run finished its schedule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<MachineState>,
}

/// What may drift between and within runs, read at one moment.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MachineState {
    pub utc: String,
    /// /proc/loadavg: 1, 5 and 15 minute load averages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_avg: Option<[f64; 3]>,
    /// Median, lowest and highest current frequency over the CPUs, MHz (cpufreq's
    /// scaling_cur_freq, else /proc/cpuinfo's "cpu MHz"); absent where neither is readable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_mhz: Option<CpuMhz>,
    /// cpufreq's scaling governor of cpu0 (absent in most VMs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub governor: Option<String>,
    /// Each GPU's clocks and throttle reasons, where NVML answers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<GpuClockState>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuMhz {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub cpus: usize,
}

/// One GPU's clocks at one moment.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuClockState {
    pub index: u32,
    #[serde(default)]
    pub sm_clock_mhz: Option<u32>,
    #[serde(default)]
    pub mem_clock_mhz: Option<u32>,
    /// NVML's current throttle (clock event) reasons, by name; empty when none.
    #[serde(default)]
    pub throttle_reasons: Vec<String>,
}
