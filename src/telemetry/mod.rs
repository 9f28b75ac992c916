//! GPU telemetry: where the runner's reps meet the GPU's own view of them.
//!
//! Pipeline position: the runner ([`crate::experiment`]) creates one [`Telemetry`] per
//! run (per worker process with `process = "per_rep"`), calls [`Telemetry::begin_rep`]
//! right before proving and [`Telemetry::end_rep`] right after, and hands the rows to
//! the store (telemetry.csv, gpu_activity.csv) and the device description to meta.json.
//!
//! - [`nvml`]: background sampling of utilisation, memory, power, clock, temperature and
//!   PCIe throughput (two threads per run, resumed and paused with each rep); device
//!   information. The same sampler reads the process's CPU time each period, with or
//!   without a GPU (the timeline's CPU lane), and the driver's own utilisation samples,
//!   which [`placement`] puts where they belong on the span clock.
//! - [`cupti`]: every kernel, memcpy and memset of the process, on the span clock
//!   ([`clock`] keeps the calibration), from which [`activity`] derives each span's
//!   GPU-busy time.
//! - [`nvtx`]: spans mirrored as NVTX ranges for Nsight Systems (or, with no profiler
//!   attached, for CUPTI, whose marker records then land in gpu_activity.csv as kind
//!   `nvtx`).
//! - [`leak`]: steady memory growth across reps.
//! - [`selftest`]: real kernels and copies through cudarc, to check all of the above on
//!   a GPU machine without a prover backend.
//!
//! Telemetry's own work between reps (CUPTI enable, flush and decode, sample
//! conversion, the runner's GPU rows and meta.json) runs on one thread of its own,
//! `gapscope-telemetry` ([`Telemetry::on_thread`]), for every variant alike. Done on the
//! proving thread, its allocations changed the layout of that thread's heap, and the
//! next reps' synthesis then faulted more pages and ran slower
//! (evidence/telemetry-overhead/telemetry_overhead_gpu/README.md).
//!
//! Every library is opened at run time. Nothing here fails a run: what is missing is
//! reported as "unavailable: <reason>" in meta.json and the run goes on.
//!
//! Knobs: `[run] telemetry_period_ms` (NVML period, default 20) and the variant knob
//! `telemetry = true|false|"nvml"|"cupti"` ([`TelemetryParts`]; default true, both;
//! `false` collects nothing during that variant's reps, which is how
//! experiments/telemetry_overhead.toml and evidence/telemetry-overhead/*.toml measure
//! telemetry's own cost, part by part).
//! `gapscope run --nvtx` adds the NVTX mirror.
//!
//! On a GPU machine: `gapscope gpu-selftest --results-dir results` checks every source against
//! real kernels and copies and prints PASS/FAIL per check (with `--nvtx`, the NVTX
//! mirror too, against CUPTI's record of its ranges).

pub mod activity;
pub mod clock;
pub mod cupti;
pub mod driver_clock;
pub use gapscope_cupti::dylib;
pub mod leak;
pub mod nvml;
pub mod nvml_probe;
pub mod nvtx;
pub mod placement;
pub mod selftest;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::store::lanes;
use crate::store::{ClockCalibration, GpuActivityRow, GpuMeta, TelemetryRow};
use clock::{ClockMap, ClockPair};
use cupti::Cupti;
use nvml::{GpuProbe, NoGpu, Sampler};
use nvml_probe::NvmlProbe;
use placement::{ClockPairs, ReadGaps, RepClocks};

pub use leak::{leak_flags, LeakFlag};

/// Default NVML sampling period.
pub const DEFAULT_PERIOD_MS: u64 = 20;

/// What to collect in this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TelemetryConfig {
    pub period: Duration,
    /// Sample NVML during reps (device information is read whenever NVML opens).
    pub nvml: bool,
    /// Collect CUPTI activity during reps.
    pub cupti: bool,
    /// Mirror spans as NVTX ranges.
    pub nvtx: bool,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        TelemetryConfig {
            period: Duration::from_millis(DEFAULT_PERIOD_MS),
            nvml: true,
            cupti: true,
            nvtx: false,
        }
    }
}

/// Which sources a variant's reps collect: the variant knob `telemetry`, written `true`
/// (both), `false` (neither), `"nvml"` or `"cupti"` (one of them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TelemetryParts {
    /// NVML sampling during the rep.
    pub nvml: bool,
    /// CUPTI kernel/memcpy/memset activity during the rep.
    pub cupti: bool,
}

impl TelemetryParts {
    pub const ALL: TelemetryParts = TelemetryParts {
        nvml: true,
        cupti: true,
    };
    pub const NONE: TelemetryParts = TelemetryParts {
        nvml: false,
        cupti: false,
    };

    /// The knob's spelling: "true", "false", "nvml" or "cupti".
    pub fn as_str(self) -> &'static str {
        match (self.nvml, self.cupti) {
            (true, true) => "true",
            (false, false) => "false",
            (true, false) => "nvml",
            (false, true) => "cupti",
        }
    }

    pub fn any(self) -> bool {
        self.nvml || self.cupti
    }
}

impl Serialize for TelemetryParts {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match (self.nvml, self.cupti) {
            (a, b) if a == b => s.serialize_bool(a),
            _ => s.serialize_str(self.as_str()),
        }
    }
}

impl<'de> Deserialize<'de> for TelemetryParts {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = TelemetryParts;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(r#"true, false, "nvml" or "cupti""#)
            }
            fn visit_bool<E: serde::de::Error>(self, b: bool) -> Result<Self::Value, E> {
                Ok(if b {
                    TelemetryParts::ALL
                } else {
                    TelemetryParts::NONE
                })
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Self::Value, E> {
                match s {
                    "nvml" => Ok(TelemetryParts {
                        nvml: true,
                        cupti: false,
                    }),
                    "cupti" => Ok(TelemetryParts {
                        nvml: false,
                        cupti: true,
                    }),
                    "true" => Ok(TelemetryParts::ALL),
                    "false" => Ok(TelemetryParts::NONE),
                    _ => Err(E::invalid_value(serde::de::Unexpected::Str(s), &self)),
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// Everything one rep produced, as it travels from a worker process to the parent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RepTelemetry {
    #[serde(default)]
    pub samples: Vec<TelemetryRow>,
    #[serde(default)]
    pub activity: Vec<GpuActivityRow>,
    /// CUPTI activity was collected for this rep (so spans get `gpu_busy_ns`).
    #[serde(default)]
    pub collected: bool,
    #[serde(default)]
    pub calibration: Option<ClockCalibration>,
    #[serde(default)]
    pub gpu_mem_used_end_bytes: Option<u64>,
    /// Records CUPTI dropped for lack of buffer space.
    #[serde(default)]
    pub dropped_records: u64,
    /// CUPTI's status in the process that ran the rep.
    #[serde(default)]
    pub cupti_status: Option<String>,
    /// Problems met during the rep (they do not fail it).
    #[serde(default)]
    pub notes: Vec<String>,
    /// Per GPU, how its utilisation was placed on the span clock (meta.json).
    #[serde(default)]
    pub util_placement: Vec<String>,
}

struct Active {
    /// The NVML sampler was resumed for this rep.
    sampling: bool,
    cupti: bool,
    begin_pair: Option<ClockPair>,
    /// The span clock and the clocks NVML's sample timestamps may be on, at the start.
    begin_ns: u64,
    host_pairs: Option<ClockPairs>,
}

/// GPU telemetry of one process for one run.
pub struct Telemetry {
    cfg: TelemetryConfig,
    /// The NVML sampler of the run, spawned by the first rep that samples and paused
    /// between reps; declared before `nvml` so that its threads are joined first.
    sampler: Mutex<Option<Sampler>>,
    nvml: Result<Arc<NvmlProbe>, String>,
    cupti: Result<&'static Cupti, String>,
    nvtx_status: String,
    /// The NVTX mirror's tool is CUPTI: reps also collect its marker records.
    nvtx_markers: bool,
    runtime_version: Option<String>,
    active: Mutex<Option<Active>>,
    /// The thread telemetry's work runs on; `None` if it could not be spawned (then the
    /// caller's thread does the work).
    thread: Option<rayon::ThreadPool>,
    /// Gaps between changes of the utilisation read, over the run's reps.
    read_gaps: Mutex<ReadGaps>,
}

fn status<T>(r: &Result<T, String>) -> String {
    match r {
        Ok(_) => "available".into(),
        Err(e) if e.starts_with("off") => e.clone(),
        Err(e) => format!("unavailable: {e}"),
    }
}

/// `12040` → "12.4".
fn cuda_version(v: i32) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

/// The CUDA runtime library's version, where one can be opened.
fn runtime_version() -> Option<String> {
    dylib::preload(
        &["libcudart.so.13", "libcudart.so.12", "libcudart.so"],
        &dylib::cuda_lib_dirs(),
    )
    .ok()?;
    dylib::guard("CUDA runtime version", || {
        // SAFETY: only probes for the library.
        if !unsafe { cudarc::runtime::sys::is_culib_present() } {
            return Err("no libcudart".into());
        }
        cudarc::runtime::result::version::get_runtime_version()
            .map(cuda_version)
            .map_err(|e| format!("{e:?}"))
    })
    .ok()
}

impl Telemetry {
    /// Opens what `cfg` asks for; never fails (what is missing is reported in
    /// [`Telemetry::gpu_meta`]).
    pub fn start(cfg: TelemetryConfig) -> Telemetry {
        let nvml = NvmlProbe::open().map(Arc::new);
        let cupti = match (&nvml, cfg.cupti) {
            (_, false) => Err("off (no variant collects activity in this process)".into()),
            (Err(e), true) if lanes::is_no_driver(e) => Err(lanes::NO_GPU.into()),
            (Err(e), true) => Err(format!("no GPU found through NVML ({e})")),
            (Ok(_), true) => Cupti::get(),
        };
        let (nvtx_status, nvtx_markers) = if cfg.nvtx {
            let m = nvtx::enable(cupti.as_ref().ok().map(|c| c.library.as_str()));
            (m.status, m.to_cupti && cupti.is_ok())
        } else {
            ("off (run with --nvtx)".into(), false)
        };
        let runtime_version = if nvml.is_ok() {
            runtime_version()
        } else {
            None
        };
        Telemetry {
            cfg,
            sampler: Mutex::new(None),
            nvml,
            cupti,
            nvtx_status,
            nvtx_markers,
            runtime_version,
            active: Mutex::new(None),
            thread: rayon::ThreadPoolBuilder::new()
                .num_threads(1)
                .thread_name(|_| "gapscope-telemetry".into())
                .build()
                .ok(),
            read_gaps: Mutex::default(),
        }
    }

    /// Each GPU's clocks and throttle reasons now; empty without NVML.
    pub fn gpu_clocks(&self) -> Vec<crate::store::envinfo::GpuClockState> {
        match &self.nvml {
            Ok(p) => p.clock_states(),
            Err(_) => Vec::new(),
        }
    }

    /// meta.json's `gpu` section.
    pub fn gpu_meta(&self) -> GpuMeta {
        let mut m = GpuMeta {
            nvml: Some(status(&self.nvml)),
            cupti: Some(status(&self.cupti)),
            nvtx: Some(self.nvtx_status.clone()),
            sample_period_ms: Some(self.cfg.period.as_millis() as u64),
            cuda_runtime_version: self.runtime_version.clone(),
            ..Default::default()
        };
        match &self.nvml {
            Ok(p) => {
                let d = p.device_info();
                m.available = true;
                m.devices = d.devices;
                m.count = d.count;
                m.driver_version = d.driver_version;
                m.cuda_driver_version = d.cuda_driver_version;
            }
            // The loader's own words stay in `nvml` above; the reason says it plainly.
            Err(e) if lanes::is_no_driver(e) => m.reason = Some(lanes::NO_GPU.into()),
            Err(e) => m.reason = Some(format!("unavailable: {e}")),
        }
        m
    }

    /// The sampling period (`[run] telemetry_period_ms`).
    pub fn period(&self) -> Duration {
        self.cfg.period
    }

    /// CUPTI's status line for meta.json.
    pub fn cupti_status(&self) -> String {
        status(&self.cupti)
    }

    /// Where the NVTX mirror's ranges go (meta.json's `gpu.nvtx`) and whether CUPTI
    /// records them (then reps with CUPTI activity get them as kind `nvtx` rows).
    pub fn nvtx(&self) -> (&str, bool) {
        (&self.nvtx_status, self.nvtx_markers)
    }

    /// Starts a rep's collection of the `parts` the variant asks for (with
    /// [`TelemetryParts::NONE`], a variant with `telemetry = false`, nothing runs during
    /// the rep; sources this process did not open stay off).
    pub fn begin_rep(&self, parts: TelemetryParts) -> Vec<String> {
        let notes = self.on_thread(|| self.begin_rep_here(parts));
        if self.cupti.as_ref().is_ok_and(|c| c.markers_on()) {
            // CUPTI sets itself up on the first NVTX range after markers are enabled, so
            // that range starts late; this range of its own (dropped from the records)
            // takes the delay instead of `prove`'s. Sent from the proving thread, where
            // the spans' ranges will come from.
            crate::trace::mirror_mark(cupti::NVTX_PRIMER);
        }
        notes
    }

    /// Ends the rep begun last: pauses sampling, flushes activity, converts both to rows
    /// of rep `rep` of `variant`, and reads GPU memory for the leak watch.
    pub fn end_rep(&self, rep: u32, variant: &str) -> RepTelemetry {
        self.on_thread(|| self.end_rep_here(rep, variant))
    }

    /// Runs `f` on telemetry's own thread and waits for it: whatever `f` allocates comes
    /// from that thread's heap, not the prover's. Every variant's telemetry calls go
    /// through here, also those that collect nothing, so that the proving thread does
    /// the same work whichever variant ran before.
    pub fn on_thread<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match &self.thread {
            Some(t) => t.install(f),
            None => f(),
        }
    }

    fn begin_rep_here(&self, parts: TelemetryParts) -> Vec<String> {
        let mut notes = Vec::new();
        let mut active = Active {
            sampling: false,
            cupti: false,
            begin_pair: None,
            begin_ns: crate::trace::now_ns(),
            host_pairs: None,
        };
        if let (Ok(c), true) = (&self.cupti, self.cfg.cupti && parts.cupti) {
            match c.start(self.nvtx_markers) {
                Ok(n) => {
                    notes.extend(n);
                    active.cupti = true;
                    active.begin_pair = c.clock_pair();
                }
                Err(e) => notes.push(format!("CUPTI not started: {e}")),
            }
        }
        if self.cfg.nvml && parts.nvml {
            // Without a GPU the sampler still reads the process's CPU time.
            let (probe, pcie): (Arc<dyn GpuProbe>, bool) = match &self.nvml {
                Ok(p) => (p.clone(), true),
                Err(_) => (Arc::new(NoGpu), false),
            };
            if self.nvml.is_ok() {
                active.host_pairs = Some(ClockPairs::measure());
            }
            let mut sampler = self.sampler.lock().unwrap_or_else(|e| e.into_inner());
            if sampler.is_none() {
                // Spawned once for the run; after a failure, the next rep tries again.
                match Sampler::spawn(probe, self.cfg.period, pcie) {
                    Ok(s) => *sampler = Some(s),
                    Err(e) => notes.push(format!("NVML sampler not started: {e}")),
                }
            }
            if let Some(s) = sampler.as_ref() {
                s.resume();
                active.sampling = true;
            }
        }
        *self.active.lock().unwrap_or_else(|e| e.into_inner()) = Some(active);
        notes
    }

    fn sampler(&self) -> std::sync::MutexGuard<'_, Option<Sampler>> {
        self.sampler.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn end_rep_here(&self, rep: u32, variant: &str) -> RepTelemetry {
        let active = self.active.lock().unwrap_or_else(|e| e.into_inner()).take();
        let mut out = RepTelemetry {
            cupti_status: Some(self.cupti_status()),
            ..Default::default()
        };
        let Some(active) = active else {
            out.notes.push("end_rep without begin_rep".into());
            return out;
        };
        // Sampling stops first; the wait for the driver's last window (if its samples are
        // in use) then overlaps CUPTI's flush. The rep's spans are already closed.
        let closed = if active.sampling {
            self.sampler().as_ref().map(Sampler::close)
        } else {
            None
        };
        let end_ns = closed.unwrap_or_else(crate::trace::now_ns);
        if let (true, Ok(c)) = (active.cupti, &self.cupti) {
            let end_pair = c.clock_pair();
            match c.stop() {
                Ok(collected) => {
                    let (map, calibration) =
                        clock_map(c.callback_clock, active.begin_pair, end_pair, rep);
                    out.activity = collected
                        .records
                        .iter()
                        .map(|r| r.to_row(rep, variant, &map))
                        .collect();
                    out.activity.sort_by_key(|a| (a.start_ns, a.correlation_id));
                    out.calibration = calibration;
                    out.dropped_records = collected.dropped;
                    out.collected = true;
                    if collected.dropped > 0 {
                        out.notes
                            .push(format!("CUPTI dropped {} records", collected.dropped));
                    }
                    if collected.unpaired_markers > 0 {
                        out.notes.push(format!(
                            "{} NVTX marker records without their range's other end \
                             (a range open at the rep's start or end)",
                            collected.unpaired_markers
                        ));
                    }
                }
                Err(e) => out.notes.push(format!("CUPTI flush failed: {e}")),
            }
        }
        if active.sampling {
            if let Some(s) = self.sampler().as_ref() {
                let samples = s.pause();
                let unavailable = s.driver_unavailable();
                let clocks = RepClocks {
                    begin_ns: active.begin_ns,
                    end_ns,
                    begin: active.host_pairs,
                    end: ClockPairs::measure(),
                    unavailable: &unavailable,
                };
                let mut gaps = self.read_gaps.lock().unwrap_or_else(|e| e.into_inner());
                let placed = placement::rep_rows(&samples, &clocks, &mut gaps, rep, variant);
                out.samples = placed.rows;
                out.util_placement = placed.lines;
                out.notes.extend(placed.notes);
            }
        }
        if let Ok(p) = &self.nvml {
            out.gpu_mem_used_end_bytes = nvml::mem_used_for_leak_watch(p.as_ref());
        }
        out
    }
}

/// The map from CUPTI time to span time for one rep, and its record for meta.json.
/// With the timestamp callback CUPTI already reads CLOCK_MONOTONIC and records are kept
/// as they are; the pairs then only document the clocks' agreement.
pub fn clock_map(
    callback: bool,
    begin: Option<ClockPair>,
    end: Option<ClockPair>,
    rep: u32,
) -> (ClockMap, Option<ClockCalibration>) {
    let identity = ClockMap::offset_only(ClockPair {
        cupti_ns: 0,
        mono_ns: 0,
        window_ns: 0,
    });
    let measured = match (begin, end) {
        (Some(b), Some(e)) => Some(ClockMap { begin: b, end: e }),
        (Some(p), None) | (None, Some(p)) => Some(ClockMap::offset_only(p)),
        (None, None) => None,
    };
    let calibration = measured.map(|m| m.calibration(rep, callback));
    let map = if callback {
        identity
    } else {
        measured.unwrap_or(identity)
    };
    (map, calibration)
}

#[cfg(test)]
#[path = "mod_tests.rs"]
mod tests;
