//! Runs an experiment: validates everything that can fail before measuring, obtains
//! params, then runs the schedule (warm-ups, then interleaved reps), writing each rep as
//! soon as it is verified.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context, Result};

use super::spec::{Experiment, Order, ProcessPolicy, ResolvedVariant};
use super::watchdog::{self, Watchdog};
use super::worker;
use crate::prover::{self, params, CircuitInstance, Gadget, Groth16Params, ProveOptions};
use crate::store::{self, Meta, RepStatus, RunRow, RunWriter, SpanRow, VariantMeta, WorkloadMeta};
use crate::telemetry::{self, RepTelemetry, Telemetry, TelemetryConfig};
use crate::trace::{self, selftime};

/// Where and how to run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub results_dir: PathBuf,
    pub params_dir: PathBuf,
    /// Continue this run folder instead of starting a new one.
    pub resume: Option<PathBuf>,
    pub progress: bool,
    pub command: Vec<String>,
    /// Mirror spans as NVTX ranges (Nsight Systems).
    pub nvtx: bool,
}

/// What a finished run reports.
#[derive(Debug)]
pub struct RunOutcome {
    pub dir: PathBuf,
    pub rows: Vec<RunRow>,
    pub spans: Vec<SpanRow>,
    pub failed: usize,
}

/// One slot of the schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    pub rep: u32,
    pub variant: usize,
    pub iteration: u32,
    pub warmup: bool,
}

/// Warm-ups first (each variant, in turn), then measured reps, interleaved (ABAB…),
/// counterbalanced (ABBA…), in blocks of `block` reps (counterbalanced blocks) or
/// sequential (AA…BB…).
pub fn schedule(variants: usize, warmups: u32, reps: u32, order: Order, block: u32) -> Vec<Slot> {
    let mut out = Vec::new();
    let mut push = |variant, iteration, warmup| {
        let rep = out.len() as u32;
        out.push(Slot {
            rep,
            variant,
            iteration,
            warmup,
        })
    };
    for w in 0..warmups {
        for v in 0..variants {
            push(v, w, true);
        }
    }
    match order {
        Order::Interleaved => {
            for i in 0..reps {
                for v in 0..variants {
                    push(v, i, false);
                }
            }
        }
        // Counterbalanced is blocks of one rep.
        Order::Counterbalanced | Order::Blocks => {
            let block = if order == Order::Blocks {
                block.max(1)
            } else {
                1
            };
            for (b, first) in (0..reps).step_by(block as usize).enumerate() {
                for k in 0..variants {
                    let v = if b % 2 == 0 { k } else { variants - 1 - k };
                    for i in first..(first + block).min(reps) {
                        push(v, i, false);
                    }
                }
            }
        }
        Order::Sequential => {
            for v in 0..variants {
                for i in 0..reps {
                    push(v, i, false);
                }
            }
        }
    }
    out
}

/// A new run's folder name: UTC time and a short nonce.
pub fn run_id() -> String {
    let now = chrono::Utc::now();
    let nonce = (trace::now_ns() ^ ((std::process::id() as u64) << 20)) & 0xff_ffff;
    format!("{}-{nonce:06x}", now.format("%Y%m%dT%H%M%SZ"))
}

/// Converts drained spans to rows (with self time) for one rep.
pub fn span_rows(rep: u32, variant: &str, spans: &[trace::SpanRecord]) -> Vec<SpanRow> {
    let ivs: Vec<selftime::Interval> = spans
        .iter()
        .map(|s| selftime::Interval {
            id: s.id,
            parent: s.parent,
            thread_id: s.thread_id,
            start_ns: s.start_ns,
            end_ns: s.end_ns,
        })
        .collect();
    let selfs = selftime::self_times(&ivs);
    spans
        .iter()
        .zip(selfs)
        .map(|(s, self_ns)| {
            let c = |k: crate::counters::CounterKind| s.counters.and_then(|v| v.get(k));
            use crate::counters::CounterKind as K;
            let attrs: serde_json::Map<String, serde_json::Value> = s
                .attrs
                .iter()
                .map(|(k, v)| (k.to_string(), serde_json::to_value(v).unwrap_or_default()))
                .collect();
            SpanRow {
                rep,
                variant: variant.to_string(),
                span_id: s.id,
                parent_id: s.parent,
                name: s.name.to_string(),
                thread_id: s.thread_id,
                thread_name: s.thread_name.to_string(),
                start_ns: s.start_ns,
                end_ns: s.end_ns,
                duration_ns: s.duration_ns(),
                self_ns,
                instructions: c(K::Instructions),
                branches: c(K::Branches),
                cycles: c(K::Cycles),
                task_clock_ns: c(K::TaskClockNs),
                page_faults: c(K::PageFaults),
                context_switches: c(K::ContextSwitches),
                attrs: serde_json::Value::Object(attrs).to_string(),
                gpu_busy_ns: None,
            }
        })
        .collect()
}

/// Everything one rep needs that is shared across reps.
pub struct RepContext<'a> {
    pub exp: &'a Experiment,
    pub params: &'a ParamsByGadget,
    /// GPU telemetry of this process (begun and ended around each rep's proving).
    pub telemetry: Option<&'a Telemetry>,
}

/// What one rep produced.
#[derive(Debug, Clone, PartialEq)]
pub struct RepOutput {
    pub run: RunRow,
    pub spans: Vec<SpanRow>,
    pub gpu: RepTelemetry,
    /// Backend setup this rep's process did before it (per_rep workers), in ns, keyed as
    /// meta.json `setup_ns` is.
    pub setup_ns: BTreeMap<String, u64>,
}

/// Runs one rep in this process: proves (spans recorded, GPU telemetry collected),
/// waits for background drops, verifies outside the spans.
pub fn run_rep_here(ctx: &RepContext, v: &ResolvedVariant, slot: Slot) -> Result<RepOutput> {
    let w = &ctx.exp.workload;
    let backend = prover::backend(v.backend)?;
    let params = ctx
        .params
        .get(&v.gadget)
        .context("params missing for this gadget")?;
    let circuits: Vec<CircuitInstance> = (0..w.batch as u64)
        .map(|i| CircuitInstance::new(w.circuit, w.log2_constraints, v.gadget, i))
        .collect::<Result<_, _>>()
        .map_err(anyhow::Error::msg)?;
    let inputs: Vec<_> = circuits
        .iter()
        .map(CircuitInstance::public_inputs)
        .collect();
    let started_utc = chrono::Utc::now().to_rfc3339();
    let mut rng = rand::rngs::OsRng;
    if ctx.exp.run.heap_trim {
        crate::counters::heap::trim();
    }
    let heap = crate::counters::heap::HeapStats::read();
    // --- GPU telemetry: on for exactly the proving and its background drops.
    let tel_notes = ctx
        .telemetry
        .map(|t| t.begin_rep(v.telemetry))
        .unwrap_or_default();
    let out = prover::prove_batch(
        backend.as_ref(),
        params,
        circuits,
        ProveOptions {
            drop: v.drop,
            host_memory: v.host_memory,
            streams: v.streams,
            gpus: v.gpus,
        },
        &mut rng,
    );
    prover::dropper::wait_idle();
    let mut gpu = ctx
        .telemetry
        .map(|t| t.end_rep(slot.rep, &v.name))
        .unwrap_or_default();
    gpu.notes.splice(0..0, tel_notes);
    let spans = trace::drain_trace(out.trace);
    let mut rows = span_rows(slot.rep, &v.name, &spans);
    if let (Some(h), Some(root)) = (heap, rows.iter_mut().find(|r| r.span_id == out.trace)) {
        root.attrs = h.add_to_attrs(&root.attrs);
    }
    // Only a rep with telemetry collects activity.
    if let (true, Some(t)) = (gpu.collected, ctx.telemetry) {
        t.on_thread(|| telemetry::activity::annotate_gpu_busy(&mut rows, &gpu.activity));
    }
    // --- end GPU telemetry.
    let prove = spans.iter().find(|s| s.id == out.trace);
    let (status, verified, error, proofs) = match out.result {
        Ok(mut proofs) => {
            if v.corrupt_proofs {
                for p in proofs.iter_mut() {
                    p.a = p.c;
                }
            }
            match prover::verify_all(params, &proofs, &inputs) {
                Ok(()) => (RepStatus::Ok, true, String::new(), proofs.len()),
                Err(e) => (
                    RepStatus::Failed,
                    false,
                    format!("verification failed: {e}"),
                    proofs.len(),
                ),
            }
        }
        Err(e) => (RepStatus::Failed, false, e.to_string(), 0),
    };
    let row = RunRow {
        rep: slot.rep,
        variant: v.name.clone(),
        iteration: slot.iteration,
        warmup: slot.warmup,
        status,
        verified,
        proofs: proofs as u32,
        start_ns: prove.map(|p| p.start_ns).unwrap_or(0),
        wall_ns: if status == RepStatus::Ok {
            prove.map(|p| p.duration_ns()).unwrap_or(0)
        } else {
            0
        },
        started_utc,
        pid: std::process::id(),
        rss_end_bytes: crate::envinfo::rss_bytes(),
        gpu_mem_used_end_bytes: gpu.gpu_mem_used_end_bytes,
        error,
    };
    Ok(RepOutput {
        run: row,
        spans: rows,
        gpu,
        setup_ns: BTreeMap::new(),
    })
}

/// Keeps what a rep says about the GPU in meta.json: its clock calibration, and, for
/// worker processes, CUPTI's status there (the parent does not load CUPTI). True when
/// meta.json changed.
fn record_gpu_meta(
    g: &mut store::GpuMeta,
    rep: &RepTelemetry,
    process: ProcessPolicy,
    cupti: bool,
) -> bool {
    let before = (g.clock_calibration.len(), g.cupti.clone());
    if let Some(c) = &rep.calibration {
        g.clock_calibration.push(c.clone());
    }
    if process == ProcessPolicy::PerRep && cupti {
        if let Some(s) = &rep.cupti_status {
            if g.cupti.as_deref().is_none_or(|c| c.starts_with("off")) {
                g.cupti = Some(format!("{s} (in worker processes)"));
            }
        }
    }
    before != (g.clock_calibration.len(), g.cupti.clone())
}

/// Params by the gadget a variant uses (gadgets with one shape share one Arc).
pub type ParamsByGadget = HashMap<Gadget, Arc<Groth16Params>>;

/// Loads (or generates) params for every gadget the variants use. With `in_child`,
/// params missing from the cache are generated by a child process (`gapscope __params`)
/// and then loaded here like cached ones: generation leaves this process's heap in
/// another state than a load, and synthesis then faults a different number of pages
/// (results/telemetry_overhead_gpu/README.md), so a first run would not match later ones.
pub fn obtain_params(
    exp: &Experiment,
    params_dir: &Path,
    progress: bool,
    in_child: bool,
) -> Result<(ParamsByGadget, Vec<params::ParamsOrigin>)> {
    let w = &exp.workload;
    let mut by_gadget = HashMap::new();
    let mut by_key: HashMap<String, Arc<Groth16Params>> = HashMap::new();
    let mut origins = Vec::new();
    for v in exp.resolved_variants() {
        if by_gadget.contains_key(&v.gadget) {
            continue;
        }
        let c = CircuitInstance::new(w.circuit, w.log2_constraints, v.gadget, 0)
            .map_err(anyhow::Error::msg)?;
        let key = params::ParamsKey::for_circuit(&c, w.circuit.as_str(), w.log2_constraints)?;
        let p = match by_key.get(&key.shape_digest) {
            Some(p) => p.clone(),
            None => {
                if progress {
                    eprintln!(
                        "params: {} 2^{} ({} constraints) from {}",
                        key.circuit,
                        key.log2_constraints,
                        key.num_constraints,
                        params_dir.display()
                    );
                }
                let child = (in_child && !params::cached(params_dir, &key))
                    .then(|| generate_in_child(w.circuit.as_str(), &key, v.gadget, params_dir))
                    .transpose()?;
                let (p, mut origin) = params::load_or_generate(params_dir, &c, &key)?;
                if let (Some(generated), "loaded") = (child, origin.source.as_str()) {
                    origin.source = "generated in a child process".into();
                    origin.elapsed_ms += generated.elapsed_ms;
                }
                if progress {
                    eprintln!("params: {} in {} ms", origin.source, origin.elapsed_ms);
                }
                origins.push(origin);
                let p = Arc::new(p);
                by_key.insert(key.shape_digest.clone(), p.clone());
                p
            }
        };
        by_gadget.insert(v.gadget, p);
    }
    Ok((by_gadget, origins))
}

/// Runs `gapscope __params` for `key`, which generates the params into `params_dir`
/// (its progress goes to this process's stderr), and returns how it went.
fn generate_in_child(
    circuit: &str,
    key: &params::ParamsKey,
    gadget: crate::prover::Gadget,
    params_dir: &Path,
) -> Result<params::ParamsOrigin> {
    let exe = std::env::current_exe().context("cannot locate the gapscope executable")?;
    let out = std::process::Command::new(exe)
        .arg("__params")
        .arg("--circuit")
        .arg(circuit)
        .arg("--log2-constraints")
        .arg(key.log2_constraints.to_string())
        .arg("--gadget")
        .arg(gadget.as_str())
        .arg("--params-dir")
        .arg(params_dir)
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit())
        .output()
        .context("cannot start the params generation process")?;
    anyhow::ensure!(
        out.status.success(),
        "generating params for {} 2^{} in a child process failed ({}); its error is above",
        key.circuit,
        key.log2_constraints,
        out.status
    );
    serde_json::from_slice(&out.stdout).with_context(|| {
        format!(
            "the params generation process printed {:?}, not its result",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// One-time backend setup outside the measured reps (GPU backends: SRS load and a
/// warm-up proof), per variant that needs it, in ns for meta.json `setup_ns`. A failed
/// setup is reported here and fails that variant's reps with its cause; the run goes on.
pub fn setup_backends(
    exp: &Experiment,
    variants: &[ResolvedVariant],
    params: &ParamsByGadget,
    origins: &[params::ParamsOrigin],
    progress: bool,
) -> BTreeMap<String, u64> {
    let files: Vec<PathBuf> = origins.iter().map(|o| o.path.clone()).collect();
    let w = &exp.workload;
    let mut out = BTreeMap::new();
    for v in variants
        .iter()
        .filter(|v| v.backend != prover::BackendKind::Cpu)
    {
        let (Some(p), Ok(c)) = (
            params.get(&v.gadget),
            CircuitInstance::new(w.circuit, w.log2_constraints, v.gadget, 0),
        ) else {
            continue;
        };
        match prover::setup(v.backend, &files, p, c) {
            Ok(Some(r)) if !r.reused => {
                if progress {
                    eprintln!("setup: {}: {}", v.name, r.text);
                }
                out.insert(format!("{}/{}", v.backend.as_str(), v.name), r.total_ns);
            }
            Ok(_) => {}
            Err(e) => eprintln!("warning: variant {:?}: {e}; its reps will fail", v.name),
        }
    }
    out
}

fn check_writable(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| {
        format!(
            "results directory {} cannot be created; pass --results-dir with a writable path",
            dir.display()
        )
    })?;
    let probe = dir.join(format!(".gapscope-write-probe-{}", std::process::id()));
    std::fs::write(&probe, b"ok").with_context(|| {
        format!(
            "results directory {} is not writable; pass --results-dir with a writable path",
            dir.display()
        )
    })?;
    let _ = std::fs::remove_file(probe);
    Ok(())
}

/// Exit status of `gapscope run` stopped by its watchdog (`rep_timeout_s`, shared process).
pub const EXIT_TIMED_OUT: i32 = 3;

/// The watchdog's action for a rep of a shared process: the rep is recorded as failed
/// (finished reps are on disk already), then the process ends.
fn timed_out(
    writer: &Arc<Mutex<RunWriter>>,
    dir: &Path,
    v: &ResolvedVariant,
    slot: Slot,
    limit: Duration,
) -> impl FnOnce() + Send + 'static {
    let writer = writer.clone();
    let dir = dir.to_path_buf();
    let row = worker::failed_row(
        v,
        slot,
        format!(
            "rep did not finish in {} s (rep_timeout_s) in a shared process, which cannot \
             abandon the call; the run was stopped",
            limit.as_secs()
        ),
    );
    move || {
        match record_timed_out(&writer, &row) {
            Ok(()) => eprintln!(
                "error: rep {} ({}) did not finish in {} s (run.rep_timeout_s); it is recorded \
                 as failed in {}. gapscope stopped: a call that never returns cannot be abandoned \
                 in a shared process. Every finished rep is kept; `gapscope run --resume {}` goes \
                 on with the next rep, and process = \"per_rep\" kills such a rep and continues.",
                row.rep,
                row.variant,
                limit.as_secs(),
                dir.display(),
                dir.display()
            ),
            Err(e) => eprintln!(
                "error: rep {} ({}) did not finish in {} s (run.rep_timeout_s), and could not be \
                 recorded as failed ({e}); gapscope stopped. Finished reps are kept in {}.",
                row.rep,
                row.variant,
                limit.as_secs(),
                dir.display()
            ),
        }
        watchdog::exit_now(EXIT_TIMED_OUT)
    }
}

/// Appends the failed row of a rep that outlived its limit. The rep's own thread is stuck
/// outside any append, so the lock is free unless it was stuck in the store itself; then
/// the row cannot be written, and the caller says so.
fn record_timed_out(writer: &Mutex<RunWriter>, row: &RunRow) -> Result<(), String> {
    match writer.try_lock() {
        Ok(mut w) => w.append_rep(row, &[]).map_err(|e| e.to_string()),
        Err(std::sync::TryLockError::Poisoned(p)) => p
            .into_inner()
            .append_rep(row, &[])
            .map_err(|e| e.to_string()),
        Err(std::sync::TryLockError::WouldBlock) => {
            Err("the results writer is busy (stuck in a write)".into())
        }
    }
}

/// Runs the experiment at `exp_path` (or resumes `opts.resume`).
pub fn run(exp_path: Option<&Path>, opts: &RunOptions) -> Result<RunOutcome> {
    let (exp, text, resume) = match (&opts.resume, exp_path) {
        (Some(dir), _) => {
            let copy = dir.join(store::EXPERIMENT_COPY);
            if !copy.exists() {
                bail!(
                    "{} is not a run folder to resume (no {})",
                    dir.display(),
                    store::EXPERIMENT_COPY
                );
            }
            let (e, t) = Experiment::load(&copy)?;
            (e, t, Some(dir.clone()))
        }
        (None, Some(p)) => {
            let (e, t) = Experiment::load(p)?;
            (e, t, None)
        }
        (None, None) => bail!("give an experiment file, or --resume RUN_DIR"),
    };
    let variants = exp.resolved_variants();
    for v in &variants {
        prover::backend(v.backend).with_context(|| format!("variant {:?}", v.name))?;
    }
    let counters = crate::counters::probe();
    trace::set_counters_enabled(exp.run.counters);
    // --- GPU telemetry for the run. With per_rep processes each worker collects its own
    // CUPTI activity (CUPTI sees only its process); this one describes the devices.
    let telemetry = Telemetry::start(TelemetryConfig {
        period: std::time::Duration::from_millis(exp.run.telemetry_period_ms),
        nvml: true,
        cupti: exp.run.process == ProcessPolicy::Shared
            && variants.iter().any(|v| v.telemetry.cupti),
        nvtx: opts.nvtx,
    });

    // Everything that can fail cheaply fails before params are made.
    let (mut writer, done_rows, meta) = match &resume {
        Some(dir) => {
            let meta = store::read_meta(dir)?;
            let (w, rows) = RunWriter::open_resume(dir)?;
            (Some(w), rows, meta)
        }
        None => {
            let exp_dir = opts.results_dir.join(&exp.name);
            check_writable(&exp_dir)?;
            let meta = Meta {
                schema_version: store::SCHEMA_VERSION,
                gapscope_version: env!("CARGO_PKG_VERSION").into(),
                experiment: exp.name.clone(),
                run_id: run_id(),
                created_utc: chrono::Utc::now().to_rfc3339(),
                command: opts.command.clone(),
                host: crate::envinfo::host(),
                git: crate::envinfo::git(Path::new(".")),
                counters,
                gpu: telemetry.gpu_meta(),
                workload: WorkloadMeta {
                    circuit: exp.workload.circuit.as_str().into(),
                    log2_constraints: exp.workload.log2_constraints,
                    batch: exp.workload.batch,
                    backend: exp.workload.backend.as_str().into(),
                },
                variants: variants
                    .iter()
                    .map(|v| VariantMeta {
                        name: v.name.clone(),
                        backend: v.backend.as_str().into(),
                        knobs: v.knobs(),
                    })
                    .collect(),
                reps: exp.run.reps,
                warmups: exp.run.warmups,
                order: format!("{:?}", exp.run.order).to_lowercase(),
                process: match exp.run.process {
                    ProcessPolicy::Shared => "shared".into(),
                    ProcessPolicy::PerRep => "per_rep".into(),
                },
                params: Vec::new(),
                setup_ns: BTreeMap::new(),
                completed_utc: None,
            };
            (None, Vec::new(), meta)
        }
    };
    let (params, origins) = obtain_params(&exp, &opts.params_dir, opts.progress, true)?;
    let mut meta = meta;
    if resume.is_none() {
        meta.params = origins
            .iter()
            .map(|o| serde_json::to_value(o).unwrap_or_default())
            .collect();
    }
    // A shared process cannot abandon a GPU call that never returns: past rep_timeout_s
    // the watchdog records the rep as failed and stops the run (per_rep kills the worker).
    let watchdog = match (exp.run.process, exp.run.rep_timeout_s) {
        (ProcessPolicy::Shared, Some(s)) => Some((Watchdog::start(), Duration::from_secs(s))),
        _ => None,
    };
    if exp.run.process == ProcessPolicy::Shared {
        // per_rep: each worker sets up for itself.
        let _deadline = watchdog.as_ref().map(|(dog, limit)| {
            let limit = *limit;
            dog.arm(limit, move || {
                eprintln!(
                    "error: backend setup (its warm-up proof) did not finish in {} s \
                     (run.rep_timeout_s); gapscope stopped: a call that never returns cannot be \
                     abandoned in a shared process. No rep had run and no run folder was made. \
                     Raise rep_timeout_s if setup is merely slow; with process = \"per_rep\" \
                     each rep's own setup is killed at the limit and the run goes on.",
                    limit.as_secs()
                );
                watchdog::exit_now(EXIT_TIMED_OUT)
            })
        });
        let setup = setup_backends(&exp, &variants, &params, &origins, opts.progress);
        if resume.is_none() {
            meta.setup_ns.extend(setup);
        }
    }
    let writer = match writer.take() {
        Some(w) => w,
        None => {
            let dir = opts.results_dir.join(&exp.name).join(&meta.run_id);
            RunWriter::create(&dir, &meta, &text)?
        }
    };
    let dir = writer.dir.clone();
    let writer = Arc::new(Mutex::new(writer));
    if opts.progress {
        eprintln!("results: {}", dir.display());
    }

    let slots = schedule(
        variants.len(),
        exp.run.warmups,
        exp.run.reps,
        exp.run.order,
        exp.run.block_size(),
    );
    let done: std::collections::HashSet<u32> = done_rows.iter().map(|r| r.rep).collect();
    let todo: Vec<Slot> = slots
        .iter()
        .copied()
        .filter(|s| !done.contains(&s.rep))
        .collect();
    let bar = if opts.progress {
        let b = indicatif::ProgressBar::new(slots.len() as u64);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{elapsed_precise} [{bar:30}] {pos}/{len} reps  {msg}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        b.set_position(done.len() as u64);
        b
    } else {
        indicatif::ProgressBar::hidden()
    };
    let ctx = RepContext {
        exp: &exp,
        params: &params,
        telemetry: Some(&telemetry),
    };
    let mut rows = done_rows;
    let mut all_spans = Vec::new();
    for slot in todo {
        let v = &variants[slot.variant];
        bar.set_message(format!(
            "{}{}",
            v.name,
            if slot.warmup { " (warm-up)" } else { "" }
        ));
        let RepOutput {
            run: row,
            spans,
            gpu,
            setup_ns,
        } = match exp.run.process {
            ProcessPolicy::Shared => {
                let _deadline = watchdog
                    .as_ref()
                    .map(|(dog, limit)| dog.arm(*limit, timed_out(&writer, &dir, v, slot, *limit)));
                run_rep_here(&ctx, v, slot)?
            }
            ProcessPolicy::PerRep => worker::run_rep_in_child(
                &dir,
                &opts.params_dir,
                v,
                slot,
                opts.nvtx,
                exp.run.rep_timeout_s.map(std::time::Duration::from_secs),
            )?,
        };
        // Each per_rep worker's own setup, outside its rep: "<backend>/<variant>/rep<N>".
        let mut meta_changed = !setup_ns.is_empty();
        for (k, ns) in setup_ns {
            meta.setup_ns.insert(format!("{k}/rep{}", slot.rep), ns);
        }
        // --- GPU telemetry rows first: the runs.csv row commits the rep. On telemetry's
        // thread, so that only what every variant does runs (and allocates) here.
        telemetry.on_thread(|| -> Result<()> {
            let mut w = writer.lock().unwrap_or_else(|e| e.into_inner());
            w.append_gpu(&gpu.samples, &gpu.activity)?;
            meta_changed |=
                record_gpu_meta(&mut meta.gpu, &gpu, exp.run.process, v.telemetry.cupti);
            if meta_changed {
                // A killed run keeps the calibration and setup times of every finished rep.
                store::write_meta(&dir, &meta)?;
            }
            Ok(())
        })?;
        for n in &gpu.notes {
            bar.println(format!("rep {} ({}): {n}", slot.rep, v.name));
        }
        let mut w = writer.lock().unwrap_or_else(|e| e.into_inner());
        w.append_rep(&row, &spans)?;
        drop(w);
        if row.status == RepStatus::Failed {
            bar.println(format!(
                "rep {} ({}) failed: {}",
                row.rep, row.variant, row.error
            ));
        }
        rows.push(row);
        all_spans.extend(spans);
        bar.inc(1);
    }
    bar.finish_and_clear();
    meta.completed_utc = Some(chrono::Utc::now().to_rfc3339());
    store::write_meta(&dir, &meta)?;
    let failed = rows
        .iter()
        .filter(|r| r.status == RepStatus::Failed)
        .count();
    Ok(RunOutcome {
        dir,
        rows,
        spans: all_spans,
        failed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::spec::Experiment;

    fn order_of(order: Order) -> String {
        let slots = schedule(2, 1, 4, order, 3);
        assert_eq!(slots.len(), 10);
        assert!(slots.iter().enumerate().all(|(i, s)| s.rep == i as u32));
        assert!(slots[..2].iter().all(|s| s.warmup) && slots[2..].iter().all(|s| !s.warmup));
        // Every variant gets each iteration once.
        for v in 0..2 {
            let mut its: Vec<u32> = slots[2..]
                .iter()
                .filter(|s| s.variant == v)
                .map(|s| s.iteration)
                .collect();
            its.sort_unstable();
            assert_eq!(its, [0, 1, 2, 3]);
        }
        slots[2..]
            .iter()
            .map(|s| char::from(b'A' + s.variant as u8))
            .collect()
    }

    #[test]
    fn schedules_interleave_counterbalance_or_run_in_sequence() {
        assert_eq!(order_of(Order::Interleaved), "ABABABAB");
        assert_eq!(order_of(Order::Counterbalanced), "ABBAABBA");
        assert_eq!(order_of(Order::Sequential), "AAAABBBB");
        // Blocks of 3 (the last one shorter), counterbalanced.
        assert_eq!(order_of(Order::Blocks), "AAABBBBA");
        let three: String = schedule(3, 0, 2, Order::Counterbalanced, 1)
            .iter()
            .map(|s| char::from(b'A' + s.variant as u8))
            .collect();
        assert_eq!(three, "ABCCBA");
    }

    #[test]
    fn a_timed_out_rep_is_committed_as_failed_and_resume_skips_it() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("run");
        let w = RunWriter::create(&dir, &Meta::sample(), "name = \"x\"\n").unwrap();
        let text = "name = \"x\"\n[workload]\ncircuit = \"chain\"\nlog2_constraints = 4\n\
                    batch = 1\nbackend = \"cpu\"\n[run]\nreps = 1\nrep_timeout_s = 7\n\
                    [[variant]]\nname = \"a\"\n";
        let exp = Experiment::parse(text, std::path::Path::new("x.toml")).unwrap();
        assert_eq!(exp.run.rep_timeout_s, Some(7));
        let v = &exp.resolved_variants()[0];
        let slot = Slot {
            rep: 4,
            variant: 0,
            iteration: 2,
            warmup: false,
        };
        let row = worker::failed_row(v, slot, "did not finish in 7 s".into());
        record_timed_out(&Mutex::new(w), &row).unwrap();
        let (_, rows) = RunWriter::open_resume(&dir).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].rep, 4);
        assert_eq!(rows[0].status, RepStatus::Failed);
        assert!(rows[0].error.contains("7 s"), "{}", rows[0].error);
    }
}
