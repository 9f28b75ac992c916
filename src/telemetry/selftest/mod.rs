//! `gapscope gpu-selftest`: real GPU work through cudarc (NVRTC-compiled kernels, copies,
//! a memset) inside the canonical span names, recorded with full telemetry into an
//! ordinary run folder, then checked: every kernel and copy seen by CUPTI, kernels inside
//! the host window that launched and awaited them, busy/idle consistent with the
//! spans, CUDA-event time attached, NVML sampled, each GPU's utilisation placed on the
//! span clock and the process's CPU time sampled (`lanes_check`). It needs no prover
//! backend, so it verifies telemetry on a GPU machine on its own.
//!
//! With `--nvtx` the span mirror's ranges go to CUPTI (the NVTX tool when no profiler
//! is attached, [`super::nvtx`]), and [`check_nvtx`] compares CUPTI's record of them with
//! the spans: a real NVTX tool's view of the mirror, without Nsight Systems.
//!
//! The checks (`checks`: [`check_rep`], [`check_nvtx`]) are plain functions over
//! rows, tested on synthetic reps; the GPU work is in `gpu`, and [`run`] ties the two
//! to telemetry and a run folder.

mod checks;
mod gpu;
mod lanes_check;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use crate::store::{
    self, CircuitMeta, Meta, NewRun, PhaseSpec, RepStatus, RunRow, RunWriter, VariantMeta,
    WorkloadKind, WorkloadMeta,
};
use crate::trace;

use checks::nvtx_tool;
pub use checks::{check_nvtx, check_rep, Check, Expected};
use gpu::{gpu_rep, open_gpu};

use super::{activity, Telemetry, TelemetryConfig};

/// The self-test's span names: the Groth16 prover's root, wrapper, kernels and drop, so
/// that its run folder reads (summary, gaps chart, report) as a run of the prover's
/// tree does; its meta.json records them as its phases ([`phase_spec`]).
pub(crate) mod spans {
    pub const PROVE: &str = "prove";
    pub const GPU_PROVE: &str = "gpu_prove";
    pub const KERNELS: &str = "kernels";
    pub const DROP: &str = "drop";
}

/// meta.json's `phases` of a self-test run: the prover's phases, of which its reps open
/// the root, the wrapper, `kernels` and `drop` ([`spans`]).
fn phase_spec() -> PhaseSpec {
    PhaseSpec::groth16()
}

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
            kind: Some(WorkloadKind::GpuSelftest),
            circuit: Some(CircuitMeta {
                circuit: "gpu-selftest".into(),
                log2_constraints: 32 - o.elements.leading_zeros().min(31) - 1,
                batch: 1,
                backend: "cudarc".into(),
            }),
        },
        phases: phase_spec(),
        variants: vec![VariantMeta {
            name: "selftest".into(),
            backend: "cudarc".into(),
            knobs,
            counters: None,
            scope: None,
            revision: None,
            patches: Vec::new(),
            patch_failed: None,
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
    // The self-test as a run: telemetry and the GPU started, then per rep the proof, its
    // telemetry and rows written, and (after the warm-up) its checks. The rep loop shares
    // the writer, the telemetry and the checks.
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
            checked: verified,
            outputs: 0,
            start_ns: prove.map(|p| p.start_ns).unwrap_or(0),
            wall_ns: prove.map(|p| p.duration_ns).unwrap_or(0),
            started_utc,
            pid: std::process::id(),
            rss_end_bytes: crate::store::envinfo::rss_bytes(),
            gpu_mem_used_end_bytes: t.gpu_mem_used_end_bytes,
            error: error.clone(),
            span_rows: None,
        };
        writer.append_gpu(&t.samples, &t.activity)?;
        writer.append_rep(&row, &rows)?;
        if let Some(c) = t.calibration.clone() {
            meta.gpu.clock_calibration.push(c);
        }
        for line in &t.util_placement {
            if !meta.gpu.util_placement.contains(line) {
                meta.gpu.util_placement.push(line.clone());
            }
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
            let end = prove.map(|p| p.end_ns).unwrap_or(0);
            checks.extend(lanes_check::check_lanes(rep, &t, end));
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

    #[test]
    fn the_selftests_spans_are_phases_of_its_run() {
        let p = phase_spec();
        assert_eq!(p.root, spans::PROVE);
        assert_eq!(p.wrapper.as_deref(), Some(spans::GPU_PROVE));
        assert_eq!(p.main_inner(), Some(spans::KERNELS));
        assert!(p.drops.iter().any(|d| d == spans::DROP));
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
