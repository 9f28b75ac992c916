//! `gapscope gpu-selftest`: real GPU work through cudarc (NVRTC-compiled kernels, copies,
//! a memset) inside the canonical span names, recorded with full telemetry into an
//! ordinary run folder, then checked: every kernel and copy seen by CUPTI, kernels inside
//! the host window that launched and awaited them, busy/idle consistent with the
//! spans, CUDA-event time attached, NVML sampled. It needs no prover backend, so it
//! verifies telemetry on a GPU machine on its own.
//!
//! With `--nvtx` the span mirror's ranges go to CUPTI (the NVTX tool when no profiler
//! is attached, [`super::nvtx`]), and [`check_nvtx`] compares CUPTI's record of them with
//! the spans: a real NVTX tool's view of the mirror, without Nsight Systems.
//!
//! The checks ([`check_rep`], [`check_nvtx`]) are plain functions over rows, tested here
//! on synthetic reps; only [`run`] needs a GPU.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use crate::store::{
    self, GpuActivityRow, Meta, NewRun, RepStatus, RunRow, RunWriter, SpanRow, VariantMeta,
    WorkloadMeta,
};
use crate::trace::{self, Span};

use super::{activity, dylib, RepTelemetry, Telemetry, TelemetryConfig};
use crate::prover::spans;

/// Options of a self-test run.
#[derive(Debug, Clone)]
pub struct SelftestOptions {
    /// Run folders go to `<results_dir>/gpu-selftest/<run id>/`.
    pub results_dir: PathBuf,
    /// Measured reps (one warm-up rep comes first).
    pub reps: u32,
    /// Elements (f32) per buffer.
    pub elements: u32,
    /// saxpy + spin kernel pairs per rep.
    pub launches: u32,
    /// Inner iterations of the spin kernel (sets how long each kernel runs).
    pub spin_iters: u32,
    /// Host-only pause inside `gpu_prove`, which must show as GPU-idle time.
    pub host_gap: Duration,
    pub period: Duration,
    /// Mirror spans as NVTX ranges and check CUPTI's record of them ([`check_nvtx`]).
    pub nvtx: bool,
    pub command: Vec<String>,
}

impl Default for SelftestOptions {
    fn default() -> Self {
        SelftestOptions {
            results_dir: PathBuf::from("results"),
            reps: 3,
            elements: 1 << 24,
            launches: 4,
            spin_iters: 100_000,
            host_gap: Duration::from_millis(20),
            period: Duration::from_millis(super::DEFAULT_PERIOD_MS),
            nvtx: false,
            command: Vec::new(),
        }
    }
}

/// One verified property.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    pub rep: u32,
    pub name: &'static str,
    pub ok: bool,
    pub detail: String,
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} rep {} {}: {}",
            if self.ok { "PASS" } else { "FAIL" },
            self.rep,
            self.name,
            self.detail
        )
    }
}

/// What a rep of the self-test launched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expected {
    pub kernels: usize,
    pub htod: usize,
    pub dtoh: usize,
    pub memsets: usize,
    pub host_gap_ns: u64,
}

/// Checks one rep's spans (already annotated with GPU-busy time) and telemetry.
/// `slack_ns` widens host windows for clock-pairing uncertainty.
pub fn check_rep(
    rep: u32,
    spans: &[SpanRow],
    t: &RepTelemetry,
    exp: &Expected,
    slack_ns: u64,
) -> Vec<Check> {
    let mut out = Vec::new();
    let mut check = |name: &'static str, ok: bool, detail: String| {
        out.push(Check {
            rep,
            name,
            ok,
            detail,
        })
    };
    let span = |n: &str| spans.iter().find(|s| s.name == n);
    let count = |kind: &str, name: Option<&str>| {
        t.activity
            .iter()
            .filter(|a| a.kind == kind && name.is_none_or(|n| a.name == n))
            .count()
    };
    check(
        "activity collected",
        t.collected,
        format!("CUPTI: {}", t.cupti_status.as_deref().unwrap_or("?")),
    );
    let k = count("kernel", None);
    check(
        "kernels recorded",
        k == exp.kernels,
        format!("{k} of {} launched", exp.kernels),
    );
    let (h, d) = (count("memcpy", Some("HtoD")), count("memcpy", Some("DtoH")));
    check(
        "copies recorded",
        h == exp.htod && d == exp.dtoh,
        format!("HtoD {h} of {}, DtoH {d} of {}", exp.htod, exp.dtoh),
    );
    let m = count("memset", None);
    check(
        "memsets recorded",
        m == exp.memsets,
        format!("{m} of {}", exp.memsets),
    );
    check(
        "no records dropped",
        t.dropped_records == 0,
        format!("{} dropped", t.dropped_records),
    );

    match span(spans::KERNELS) {
        Some(ks) => {
            let outside: Vec<String> = t
                .activity
                .iter()
                .filter(|a| a.kind == "kernel")
                .filter(|a| a.start_ns + slack_ns < ks.start_ns || a.end_ns > ks.end_ns + slack_ns)
                .map(|a| format!("{}..{}", a.start_ns, a.end_ns))
                .collect();
            check(
                "kernels inside their host window",
                outside.is_empty() && k > 0,
                if outside.is_empty() {
                    format!(
                        "window {}..{} ns, slack {slack_ns} ns",
                        ks.start_ns, ks.end_ns
                    )
                } else {
                    format!(
                        "{} outside {}..{}: {}",
                        outside.len(),
                        ks.start_ns,
                        ks.end_ns,
                        outside.join(", ")
                    )
                },
            );
            let busy = ks.gpu_busy_ns.unwrap_or(0);
            check(
                "kernels span busy",
                busy > 0 && busy <= ks.duration_ns,
                format!("busy {busy} of {} ns", ks.duration_ns),
            );
            let gpu_ms = serde_json::from_str::<serde_json::Value>(&ks.attrs)
                .ok()
                .and_then(|a| a.get("gpu_ms").and_then(|v| v.as_f64()));
            let ok = gpu_ms.is_some_and(|ms| {
                let ns = ms * 1e6;
                // Events bracket the launches: at least the kernels' busy time (less
                // timer resolution), at most the host window.
                ns >= busy as f64 * 0.95 - 10_000.0 && ns <= ks.duration_ns as f64 * 1.01 + 10_000.0
            });
            check(
                "CUDA-event gpu_ms attached",
                ok,
                format!("gpu_ms {gpu_ms:?}, busy {busy} ns"),
            );
        }
        None => check(
            "kernels inside their host window",
            false,
            "no `kernels` span".into(),
        ),
    }
    match span(spans::GPU_PROVE) {
        Some(g) => {
            let idle = g.gpu_idle_ns().unwrap_or(0);
            check(
                "gpu_prove idle covers the host gap",
                idle >= exp.host_gap_ns,
                format!("idle {idle} ns ≥ host gap {} ns", exp.host_gap_ns),
            );
        }
        None => check(
            "gpu_prove idle covers the host gap",
            false,
            "no `gpu_prove` span".into(),
        ),
    }
    let fast: Vec<_> = t.samples.iter().filter(|s| s.source == "nvml").collect();
    check(
        "NVML sampled",
        !fast.is_empty()
            && fast
                .iter()
                .any(|s| s.sm_util_pct.is_some() && s.mem_used_bytes.is_some()),
        format!(
            "{} samples, max SM util {:?} %, max power {:?} mW",
            fast.len(),
            fast.iter().filter_map(|s| s.sm_util_pct).max(),
            fast.iter().filter_map(|s| s.power_mw).max()
        ),
    );
    check(
        "leak-watch GPU memory read",
        t.gpu_mem_used_end_bytes.is_some(),
        format!("{:?} bytes", t.gpu_mem_used_end_bytes),
    );
    out
}

/// Checks one rep's NVTX ranges (gpu_activity rows of kind `nvtx`) against its spans:
/// every span on the rep's main thread (the root span's) has a range of the same name
/// whose start and end lie within `tolerance_ns` of the span's (one clock: CUPTI's
/// timestamps are CLOCK_MONOTONIC, or converted to it), and the ranges nest as the spans
/// do. `tool` is the NVTX tool that recorded them, or why none did: then the check fails
/// with that reason (the mirror was asked for).
pub fn check_nvtx(
    rep: u32,
    tool: Result<&str, &str>,
    spans: &[SpanRow],
    activity: &[GpuActivityRow],
    tolerance_ns: u64,
) -> Check {
    let check = |ok: bool, detail: String| Check {
        rep,
        name: "NVTX ranges match the spans",
        ok,
        detail,
    };
    let tool = match tool {
        Ok(t) => t,
        Err(reason) => return check(false, format!("no NVTX tool recorded the ranges: {reason}")),
    };
    let Some(root) = spans
        .iter()
        .filter(|s| s.parent_id.is_none())
        .min_by_key(|s| s.start_ns)
    else {
        return check(false, "no root span".into());
    };
    let mut main: Vec<&SpanRow> = spans
        .iter()
        .filter(|s| s.thread_id == root.thread_id)
        .collect();
    main.sort_by_key(|s| (s.start_ns, std::cmp::Reverse(s.end_ns)));
    let ranges: Vec<&GpuActivityRow> = activity
        .iter()
        .filter(|a| a.kind == crate::store::ActivityKind::NvtxRange.as_str())
        .collect();
    let diff = |a: u64, b: u64| a as i128 - b as i128;
    let mut used = vec![false; ranges.len()];
    let mut matched: BTreeMap<u64, &GpuActivityRow> = BTreeMap::new();
    let (mut missing, mut shifted) = (Vec::new(), Vec::new());
    let (mut worst_start, mut worst_end) = (0u128, 0u128);
    for s in &main {
        let best = (0..ranges.len())
            .filter(|&i| !used[i] && ranges[i].name == s.name)
            .min_by_key(|&i| diff(ranges[i].start_ns, s.start_ns).unsigned_abs());
        let Some(i) = best else {
            missing.push(s.name.clone());
            continue;
        };
        used[i] = true;
        let r = ranges[i];
        matched.insert(s.span_id, r);
        let (ds, de) = (diff(r.start_ns, s.start_ns), diff(r.end_ns, s.end_ns));
        worst_start = worst_start.max(ds.unsigned_abs());
        worst_end = worst_end.max(de.unsigned_abs());
        if ds.unsigned_abs() > tolerance_ns as u128 || de.unsigned_abs() > tolerance_ns as u128 {
            shifted.push(format!("{} (start {ds:+} ns, end {de:+} ns)", s.name));
        }
    }
    let unnested: Vec<String> = main
        .iter()
        .filter_map(|s| {
            let parent = spans.iter().find(|p| Some(p.span_id) == s.parent_id)?;
            let (c, p) = (matched.get(&s.span_id)?, matched.get(&parent.span_id)?);
            (c.start_ns < p.start_ns || c.end_ns > p.end_ns)
                .then(|| format!("{} outside {}", s.name, parent.name))
        })
        .collect();
    let mut problems = Vec::new();
    if !missing.is_empty() {
        problems.push(format!("no range for {}", missing.join(", ")));
    }
    if !shifted.is_empty() {
        problems.push(format!("beyond ±{tolerance_ns} ns: {}", shifted.join(", ")));
    }
    if !unnested.is_empty() {
        problems.push(format!("not nested as the spans: {}", unnested.join(", ")));
    }
    if problems.is_empty() {
        check(
            true,
            format!(
                "{} spans of thread {} matched by NVTX ranges ({tool}): starts within {worst_start} ns, ends within {worst_end} ns (tolerance {tolerance_ns} ns), nested as the spans",
                main.len(),
                root.thread_id
            ),
        )
    } else {
        check(
            false,
            format!(
                "{} spans of thread {}, {} NVTX ranges ({tool}): {}",
                main.len(),
                root.thread_id,
                ranges.len(),
                problems.join("; ")
            ),
        )
    }
}

/// The NVTX tool of a self-test rep, as [`check_nvtx`] takes it: the mirror's status
/// when CUPTI recorded its ranges this rep, else why not.
fn nvtx_tool(status: &str, to_cupti: bool, collected: bool) -> Result<&str, String> {
    match (to_cupti, collected) {
        (true, true) => Ok(status
            .strip_prefix("available (")
            .and_then(|s| s.strip_suffix(')'))
            .unwrap_or(status)),
        (true, false) => Err("CUPTI collected nothing in this rep".into()),
        (false, _) if status.starts_with("available") => Err(format!(
            "the mirror's tool is not CUPTI ({status}); only CUPTI's record can be checked here"
        )),
        (false, _) => Err(format!("NVTX mirror {status}")),
    }
}

/// CUDA C of the self-test: a copy-bound saxpy and an arithmetic-bound spin.
const KERNELS: &str = r#"
extern "C" __global__ void saxpy(float a, const float *x, float *y, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" __global__ void spin(float *y, unsigned n, unsigned iters) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = y[i];
        for (unsigned k = 0; k < iters; ++k) v = v * 0.999f + 0.001f;
        y[i] = v;
    }
}
"#;

/// Compiles [`KERNELS`] with NVRTC (opened at run time, with its builtins library,
/// which libnvrtc itself only finds on the loader path).
fn compile_kernels() -> Result<cudarc::nvrtc::Ptx, String> {
    let dirs = dylib::cuda_lib_dirs();
    let at = dylib::preload(&["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"], &dirs)
        .map_err(|e| format!("NVRTC: {e}"))?;
    let mut builtins_dirs = dirs.clone();
    if let Some(parent) = Path::new(&at)
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
    {
        builtins_dirs.insert(0, parent.to_path_buf());
    }
    // Its versioned name (libnvrtc-builtins.so.13.0) follows the toolkit's minor version.
    let builtins: Vec<String> = builtins_dirs
        .iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flatten()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("libnvrtc-builtins.so.") && !n.contains(".alt."))
        .collect();
    let names: Vec<&str> = builtins.iter().map(String::as_str).collect();
    // Not fatal: a loader path that has libnvrtc has its builtins too.
    let _ = dylib::preload(&names, &builtins_dirs);
    dylib::guard("NVRTC", || {
        // SAFETY: only probes for the library.
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            return Err("libnvrtc opened but cudarc cannot find it by name".into());
        }
        cudarc::nvrtc::compile_ptx(KERNELS).map_err(|e| format!("NVRTC compile: {e:?}"))
    })
}

/// What [`run`] produced.
#[derive(Debug)]
pub struct SelftestOutcome {
    pub dir: PathBuf,
    pub checks: Vec<Check>,
}

impl SelftestOutcome {
    pub fn passed(&self) -> bool {
        !self.checks.is_empty() && self.checks.iter().all(|c| c.ok)
    }
}

/// The host-side reference of one element after `launches` saxpy+spin pairs.
fn expected_value(x: f32, launches: u32, iters: u32) -> f32 {
    let mut y = 1.0f32;
    for _ in 0..launches {
        y += 2.0 * x;
        for _ in 0..iters {
            y = y * 0.999 + 0.001;
        }
    }
    y
}

fn x_of(i: usize) -> f32 {
    (i % 7) as f32
}

/// GPU side of the self-test (cudarc: driver + NVRTC).
struct Gpu {
    stream: Arc<cudarc::driver::CudaStream>,
    ctx: Arc<cudarc::driver::CudaContext>,
    saxpy: cudarc::driver::CudaFunction,
    spin: cudarc::driver::CudaFunction,
}

fn open_gpu() -> Result<Gpu, String> {
    dylib::guard("CUDA driver", || {
        // SAFETY: only probes for the library.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err("libcuda.so.1 not found: no NVIDIA driver".into());
        }
        Ok(())
    })?;
    let ptx = compile_kernels()?;
    dylib::guard("CUDA setup", || {
        let ctx =
            cudarc::driver::CudaContext::new(0).map_err(|e| format!("CUDA context: {e:?}"))?;
        let module = ctx
            .load_module(ptx)
            .map_err(|e| format!("module load: {e:?}"))?;
        let saxpy = module
            .load_function("saxpy")
            .map_err(|e| format!("{e:?}"))?;
        let spin = module.load_function("spin").map_err(|e| format!("{e:?}"))?;
        Ok(Gpu {
            stream: ctx.default_stream(),
            ctx,
            saxpy,
            spin,
        })
    })
}

/// One rep of GPU work in the canonical span names; returns the prove trace (also when
/// the GPU failed midway) and whether the result matched the host reference.
fn gpu_rep(gpu: &Gpu, o: &SelftestOptions) -> (u64, Result<bool, String>) {
    use cudarc::driver::{LaunchConfig, PushKernelArg};
    let e = |what: &'static str| move |err: cudarc::driver::DriverError| format!("{what}: {err:?}");
    let n = o.elements;
    let x: Vec<f32> = (0..n as usize).map(x_of).collect();
    let ones = vec![1.0f32; n as usize];
    let prove = Span::enter(spans::PROVE);
    let trace = prove.trace();
    let result = (|| -> Result<Vec<f32>, String> {
        let _g = Span::enter(spans::GPU_PROVE);
        let (x_dev, mut y_dev) = {
            let s = Span::enter("h2d");
            s.set_attr("bytes", 2 * n as u64 * 4);
            let x_dev = gpu.stream.clone_htod(&x).map_err(e("HtoD"))?;
            let y_dev = gpu.stream.clone_htod(&ones).map_err(e("HtoD"))?;
            gpu.stream.synchronize().map_err(e("sync"))?;
            (x_dev, y_dev)
        };
        {
            let s = Span::enter("memset");
            // alloc, not alloc_zeros: that would add a second memset record.
            // SAFETY: the buffer is only written (by the memset) before it is freed.
            let mut scratch = unsafe { gpu.stream.alloc::<f32>(n as usize) }.map_err(e("alloc"))?;
            gpu.stream.memset_zeros(&mut scratch).map_err(e("memset"))?;
            gpu.stream.synchronize().map_err(e("sync"))?;
            s.set_attr("bytes", n as u64 * 4);
        }
        {
            let s = Span::enter(spans::KERNELS);
            let timing = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
            let start = gpu.ctx.new_event(timing).map_err(e("event"))?;
            let stop = gpu.ctx.new_event(timing).map_err(e("event"))?;
            start.record(&gpu.stream).map_err(e("event record"))?;
            let cfg = LaunchConfig::for_num_elems(n);
            let a = 2.0f32;
            for _ in 0..o.launches {
                let mut b = gpu.stream.launch_builder(&gpu.saxpy);
                b.arg(&a).arg(&x_dev).arg(&mut y_dev).arg(&n);
                // SAFETY: argument types match the kernel's signature; buffers hold n floats.
                unsafe { b.launch(cfg) }.map_err(e("launch saxpy"))?;
                let mut b = gpu.stream.launch_builder(&gpu.spin);
                b.arg(&mut y_dev).arg(&n).arg(&o.spin_iters);
                // SAFETY: as above.
                unsafe { b.launch(cfg) }.map_err(e("launch spin"))?;
            }
            stop.record(&gpu.stream).map_err(e("event record"))?;
            let ms = start.elapsed_ms(&stop).map_err(e("event elapsed"))?;
            s.set_attr("gpu_ms", ms as f64);
            s.set_attr("launches", 2 * o.launches);
        }
        {
            let _s = Span::enter("host_gap");
            std::thread::sleep(o.host_gap);
        }
        let y = {
            let _s = Span::enter("d2h");
            gpu.stream.clone_dtoh(&y_dev).map_err(e("DtoH"))?
        };
        let _d = Span::enter(spans::DROP);
        drop((x_dev, y_dev));
        Ok(y)
    })();
    drop(prove);
    let ok = result.map(|y| {
        [0usize, 1, 2, 3, 4, 5, 6, n as usize / 2, n as usize - 1]
            .iter()
            .all(|&i| {
                let want = expected_value(x_of(i), o.launches, o.spin_iters);
                (y[i] - want).abs() <= 1e-3 * want.abs().max(1.0)
            })
    });
    (trace, ok)
}

fn selftest_meta(o: &SelftestOptions, tel: &Telemetry) -> Meta {
    let mut knobs = BTreeMap::new();
    knobs.insert("elements".into(), o.elements.to_string());
    knobs.insert("launches".into(), o.launches.to_string());
    knobs.insert("spin_iters".into(), o.spin_iters.to_string());
    knobs.insert("telemetry".into(), "true".into());
    NewRun {
        experiment: "gpu-selftest".into(),
        command: o.command.clone(),
        counters: crate::counters::probe(),
        gpu: tel.gpu_meta(),
        workload: WorkloadMeta {
            circuit: "gpu-selftest".into(),
            log2_constraints: 32 - o.elements.leading_zeros().min(31) - 1,
            batch: 1,
            backend: "cudarc".into(),
        },
        variants: vec![VariantMeta {
            name: "selftest".into(),
            backend: "cudarc".into(),
            knobs,
        }],
        reps: o.reps,
        warmups: 1,
        order: "sequential".into(),
        process: "shared".into(),
    }
    .meta()
}

/// Runs the self-test and writes its run folder. Fails at once, with the reason, where
/// no GPU is usable.
pub fn run(o: &SelftestOptions) -> Result<SelftestOutcome> {
    let tel = Telemetry::start(TelemetryConfig {
        period: o.period,
        nvml: true,
        cupti: true,
        nvtx: o.nvtx,
    });
    let mut meta = selftest_meta(o, &tel);
    if !meta.gpu.available {
        bail!(
            "gpu-selftest needs an NVIDIA GPU and driver: {}",
            meta.gpu.reason.as_deref().unwrap_or("unavailable")
        );
    }
    let gpu = open_gpu()
        .map_err(anyhow::Error::msg)
        .context("gpu-selftest cannot use the GPU")?;
    let dir = o.results_dir.join("gpu-selftest").join(&meta.run_id);
    let text = format!(
        "# gapscope gpu-selftest (no experiment file): {} elements, {} saxpy+spin pairs of {} iterations, {} reps + 1 warm-up\n",
        o.elements, o.launches, o.spin_iters, o.reps
    );
    let mut writer = RunWriter::create(&dir, &meta, &text)?;
    let exp = Expected {
        kernels: 2 * o.launches as usize,
        htod: 2,
        dtoh: 1,
        memsets: 1,
        host_gap_ns: o.host_gap.as_nanos() as u64,
    };
    let mut checks = Vec::new();
    for rep in 0..=o.reps {
        let warmup = rep == 0;
        let started_utc = chrono::Utc::now().to_rfc3339();
        let notes = tel.begin_rep(super::TelemetryParts::ALL);
        let (trace, outcome) = gpu_rep(&gpu, o);
        let t = tel.end_rep(rep, "selftest");
        let (verified, error) = match outcome {
            Ok(true) => (true, String::new()),
            Ok(false) => (false, "result differs from the host reference".into()),
            Err(e) => (false, e),
        };
        let spans = trace::drain_trace(trace);
        let mut rows = store::span_rows(rep, "selftest", &spans);
        if t.collected {
            activity::annotate_gpu_busy(&mut rows, &t.activity);
        }
        let prove = rows.iter().find(|s| s.name == spans::PROVE);
        let row = RunRow {
            rep,
            variant: "selftest".into(),
            iteration: if warmup { 0 } else { rep - 1 },
            warmup,
            status: if verified {
                RepStatus::Ok
            } else {
                RepStatus::Failed
            },
            verified,
            proofs: 0,
            start_ns: prove.map(|p| p.start_ns).unwrap_or(0),
            wall_ns: prove.map(|p| p.duration_ns).unwrap_or(0),
            started_utc,
            pid: std::process::id(),
            rss_end_bytes: crate::store::envinfo::rss_bytes(),
            gpu_mem_used_end_bytes: t.gpu_mem_used_end_bytes,
            error: error.clone(),
        };
        writer.append_gpu(&t.samples, &t.activity)?;
        writer.append_rep(&row, &rows)?;
        if let Some(c) = t.calibration.clone() {
            meta.gpu.clock_calibration.push(c);
        }
        if !warmup {
            checks.push(Check {
                rep,
                name: "result verified",
                ok: verified,
                detail: if verified {
                    "matches the host reference".into()
                } else {
                    error
                },
            });
            let slack = t
                .calibration
                .as_ref()
                .map(|c| c.uncertainty_ns)
                .unwrap_or(0)
                .max(50_000);
            checks.extend(check_rep(rep, &rows, &t, &exp, slack));
            if o.nvtx {
                let (status, to_cupti) = tel.nvtx();
                let tool = nvtx_tool(status, to_cupti, t.collected);
                checks.push(check_nvtx(
                    rep,
                    tool.as_deref().map_err(String::as_str),
                    &rows,
                    &t.activity,
                    slack,
                ));
            }
            if let Some(c) = &t.calibration {
                checks.push(Check {
                    rep,
                    name: "clock",
                    ok: true,
                    detail: format!(
                        "{} mode, CUPTI→monotonic offset {} ns at start, {} ns at end, drift {:.3} ppm, pairing ±{} ns",
                        c.mode, c.offset_begin_ns, c.offset_end_ns, c.drift_ppm, c.uncertainty_ns
                    ),
                });
            }
            for n in notes.iter().chain(&t.notes) {
                checks.push(Check {
                    rep,
                    name: "note",
                    ok: true,
                    detail: n.clone(),
                });
            }
        }
    }
    meta.completed_utc = Some(chrono::Utc::now().to_rfc3339());
    store::write_meta(&dir, &meta)?;
    Ok(SelftestOutcome { dir, checks })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{GpuActivityRow, TelemetryRow};

    fn span(name: &str, start: u64, end: u64, attrs: &str) -> SpanRow {
        let mut s = SpanRow::sample();
        s.name = name.into();
        (s.start_ns, s.end_ns, s.duration_ns) = (start, end, end - start);
        s.attrs = attrs.into();
        s
    }

    fn act(kind: &str, name: &str, start: u64, end: u64) -> GpuActivityRow {
        let mut a = GpuActivityRow::sample();
        a.kind = kind.into();
        a.name = name.into();
        (a.start_ns, a.end_ns, a.duration_ns) = (start, end, end - start);
        a
    }

    const EXP: Expected = Expected {
        kernels: 2,
        htod: 2,
        dtoh: 1,
        memsets: 1,
        host_gap_ns: 300,
    };

    /// A rep as the GPU machine should produce it: gpu_prove 0..2000 with copies,
    /// a memset, two kernels inside `kernels` (1000..1500) and a host gap.
    fn good() -> (Vec<SpanRow>, RepTelemetry) {
        let mut spans = vec![
            span("prove", 0, 2_100, "{}"),
            span("gpu_prove", 0, 2_000, "{}"),
            span("kernels", 1_000, 1_500, r#"{"gpu_ms":0.00045}"#),
        ];
        let mut nvml = TelemetryRow::sample();
        (nvml.source, nvml.sm_util_pct, nvml.mem_used_bytes) =
            ("nvml".into(), Some(90), Some(1 << 30));
        let t = RepTelemetry {
            activity: vec![
                act("memcpy", "HtoD", 100, 200),
                act("memcpy", "HtoD", 200, 300),
                act("memset", "memset", 400, 410),
                act("kernel", "saxpy", 1_010, 1_200),
                act("kernel", "spin", 1_200, 1_450),
                act("memcpy", "DtoH", 1_900, 1_990),
            ],
            collected: true,
            samples: vec![nvml],
            gpu_mem_used_end_bytes: Some(5),
            ..Default::default()
        };
        activity::annotate_gpu_busy(&mut spans, &t.activity);
        (spans, t)
    }

    fn failed(checks: &[Check]) -> Vec<&'static str> {
        checks.iter().filter(|c| !c.ok).map(|c| c.name).collect()
    }

    #[test]
    fn a_good_rep_passes_every_check() {
        let (s, t) = good();
        let c = check_rep(1, &s, &t, &EXP, 0);
        assert!(failed(&c).is_empty(), "{c:#?}");
        assert!(c.len() >= 10);
    }

    #[test]
    fn each_defect_fails_its_own_check() {
        // A kernel CUPTI missed.
        let (s, mut t) = good();
        t.activity.retain(|a| a.name != "spin");
        let mut s2 = s.clone();
        activity::annotate_gpu_busy(&mut s2, &t.activity);
        assert_eq!(
            failed(&check_rep(1, &s2, &t, &EXP, 0)),
            ["kernels recorded"]
        );

        // Clocks misaligned: kernels land 1 µs late, outside the host window.
        let (mut s, mut t) = good();
        for a in t.activity.iter_mut() {
            a.start_ns += 1_000;
            a.end_ns += 1_000;
        }
        activity::annotate_gpu_busy(&mut s, &t.activity);
        let f = failed(&check_rep(1, &s, &t, &EXP, 0));
        assert!(f.contains(&"kernels inside their host window"), "{f:?}");
        // … which a pairing uncertainty of that size excuses.
        let f = failed(&check_rep(1, &s, &t, &EXP, 1_000));
        assert!(!f.contains(&"kernels inside their host window"), "{f:?}");

        // No CUDA-event time on the span, a missing copy, dropped records, no NVML.
        let (mut s, mut t) = good();
        s[2].attrs = "{}".into();
        t.activity.retain(|a| a.name != "DtoH");
        t.dropped_records = 3;
        t.samples.clear();
        assert_eq!(
            failed(&check_rep(1, &s, &t, &EXP, 0)),
            [
                "copies recorded",
                "no records dropped",
                "CUDA-event gpu_ms attached",
                "NVML sampled"
            ]
        );

        // A host gap larger than the idle time measured.
        let (s, t) = good();
        let exp = Expected {
            host_gap_ns: 5_000,
            ..EXP
        };
        assert_eq!(
            failed(&check_rep(1, &s, &t, &exp, 0)),
            ["gpu_prove idle covers the host gap"]
        );

        // Nothing collected at all.
        let (s, _) = good();
        let t = RepTelemetry::default();
        let f = failed(&check_rep(1, &s, &t, &EXP, 0));
        assert!(
            f.contains(&"activity collected") && f.contains(&"kernels recorded"),
            "{f:?}"
        );
    }

    /// A rep's span tree: prove > gpu_prove > (copy, kernels, copy, d2h) on thread 7,
    /// and a helper span on thread 8.
    fn tree() -> Vec<SpanRow> {
        let s = |id: u64, parent: Option<u64>, thread: u64, name: &str, a: u64, b: u64| {
            let mut r = span(name, a, b, "{}");
            (r.span_id, r.parent_id, r.thread_id) = (id, parent, thread);
            r
        };
        vec![
            s(1, None, 7, "prove", 0, 2_100),
            s(2, Some(1), 7, "gpu_prove", 10, 2_000),
            s(3, Some(2), 7, "copy", 20, 200),
            s(4, Some(2), 7, "kernels", 1_000, 1_500),
            s(5, Some(2), 7, "copy", 1_600, 1_700),
            s(6, Some(2), 7, "d2h", 1_900, 2_000),
            s(7, Some(2), 8, "helper", 300, 900),
        ]
    }

    /// The NVTX ranges a tool records for the spans of thread 7: a few ns after each
    /// span's own timestamps (the mirror runs right after the recorder), plus a
    /// kernel record and a range of another thread, which the check ignores.
    fn ranges(spans: &[SpanRow]) -> Vec<GpuActivityRow> {
        let mut out: Vec<GpuActivityRow> = spans
            .iter()
            .filter(|s| s.thread_id == 7)
            .map(|s| act("nvtx", &s.name, s.start_ns + 3, s.end_ns + 5))
            .collect();
        out.push(act("kernel", "spin", 1_010, 1_400));
        out.push(act("nvtx", "other thread", 400, 800));
        out
    }

    const TOOL: Result<&str, &str> = Ok("NVTX 3 injection: libcupti.so.13 (CUPTI markers)");

    #[test]
    fn nvtx_ranges_that_mirror_the_spans_pass() {
        let spans = tree();
        let c = check_nvtx(2, TOOL, &spans, &ranges(&spans), 50);
        assert!(c.ok, "{c}");
        assert_eq!((c.rep, c.name), (2, "NVTX ranges match the spans"));
        assert!(
            c.detail.starts_with("6 spans of thread 7 matched by NVTX ranges (NVTX 3 injection: libcupti.so.13 (CUPTI markers)): starts within 3 ns, ends within 5 ns"),
            "{c}"
        );
        // Delivery order does not matter.
        let mut r = ranges(&spans);
        r.reverse();
        assert!(check_nvtx(2, TOOL, &spans, &r, 50).ok);
    }

    #[test]
    fn each_nvtx_defect_fails_the_check() {
        let spans = tree();
        let fails = |r: &[GpuActivityRow], needle: &str| {
            let c = check_nvtx(2, TOOL, &spans, r, 50);
            assert!(!c.ok, "{c}");
            assert!(c.detail.contains(needle), "{needle:?} not in {c}");
        };
        // A span without its range.
        let mut r = ranges(&spans);
        r.retain(|a| a.name != "kernels");
        fails(&r, "no range for kernels");
        // A range under another name.
        let mut r = ranges(&spans);
        r.iter_mut()
            .filter(|a| a.name == "d2h")
            .for_each(|a| a.name = "D2H".into());
        fails(&r, "no range for d2h");
        // One of two same-named ranges missing.
        let mut r = ranges(&spans);
        let second = r.iter().rposition(|a| a.name == "copy").unwrap();
        r.remove(second);
        fails(&r, "no range for copy");
        // A range 100 ns late (the clocks disagree).
        let mut r = ranges(&spans);
        r.iter_mut().filter(|a| a.name == "kernels").for_each(|a| {
            a.start_ns += 100;
            a.end_ns += 100;
        });
        fails(&r, "beyond ±50 ns: kernels (start +103 ns, end +105 ns)");
        // … which a tolerance of that size excuses.
        assert!(check_nvtx(2, TOOL, &spans, &r, 110).ok);
        // Within tolerance, yet ending after its parent: not nested as the spans.
        let mut r = ranges(&spans);
        r.iter_mut()
            .filter(|a| a.name == "d2h")
            .for_each(|a| a.end_ns += 20);
        fails(&r, "not nested as the spans: d2h outside gpu_prove");
        // No ranges at all, e.g. a tool that dropped them.
        let only_kernels: Vec<_> = ranges(&spans)
            .into_iter()
            .filter(|a| a.kind == "kernel")
            .collect();
        fails(&only_kernels, "no range for prove, gpu_prove, copy");
        // No spans.
        let c = check_nvtx(2, TOOL, &[], &ranges(&spans), 50);
        assert_eq!((c.ok, c.detail.as_str()), (false, "no root span"));
    }

    #[test]
    fn without_an_nvtx_tool_the_check_fails_with_the_reason() {
        let spans = tree();
        let c = check_nvtx(
            1,
            Err("NVTX mirror unavailable: x"),
            &spans,
            &ranges(&spans),
            50,
        );
        assert!(!c.ok);
        assert_eq!(
            c.detail,
            "no NVTX tool recorded the ranges: NVTX mirror unavailable: x"
        );

        let status = "available (NVTX 3 injection: libcupti.so.13 (CUPTI markers))";
        assert_eq!(
            nvtx_tool(status, true, true),
            Ok("NVTX 3 injection: libcupti.so.13 (CUPTI markers)")
        );
        assert!(nvtx_tool(status, true, false)
            .unwrap_err()
            .contains("CUPTI collected nothing"));
        let e = nvtx_tool("available (/usr/lib/libnvToolsExt.so.1)", false, true).unwrap_err();
        assert!(e.contains("not CUPTI"), "{e}");
        let e = nvtx_tool("unavailable: no tool", false, true).unwrap_err();
        assert_eq!(e, "NVTX mirror unavailable: no tool");
    }

    #[test]
    fn the_host_reference_follows_the_kernels() {
        // One pair with no spin: y = 1 + 2x.
        assert_eq!(expected_value(3.0, 1, 0), 7.0);
        // Spinning converges towards 1.
        let v = expected_value(0.0, 1, 10_000);
        assert!((v - 1.0).abs() < 1e-3, "{v}");
    }

    /// NVRTC needs no GPU: wherever a toolkit is found (`CUDA_PATH`, /usr/local/cuda)
    /// the self-test's kernels must compile; elsewhere the reason names libnvrtc.
    #[test]
    fn the_selftest_kernels_compile_where_nvrtc_is_found() {
        match compile_kernels() {
            Ok(ptx) => {
                let src = ptx.to_src();
                assert!(
                    src.contains(".entry saxpy") && src.contains(".entry spin"),
                    "{src}"
                );
            }
            Err(e) => assert!(e.starts_with("NVRTC: libnvrtc.so.13 not found"), "{e}"),
        }
    }

    #[test]
    fn without_a_gpu_the_selftest_says_why() {
        let d = tempfile::tempdir().unwrap();
        let o = SelftestOptions {
            results_dir: d.path().to_path_buf(),
            ..Default::default()
        };
        match run(&o) {
            Err(e) => {
                let m = format!("{e:#}");
                assert!(
                    m.contains("needs an NVIDIA GPU") || m.contains("cannot use the GPU"),
                    "{m}"
                );
                assert!(
                    !d.path().join("gpu-selftest").exists(),
                    "no run folder without a GPU"
                );
            }
            Ok(out) => assert!(out.dir.exists()), // a GPU machine
        }
    }
}
