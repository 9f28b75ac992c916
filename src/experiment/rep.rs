//! One rep of an in-process workload, in whichever process runs it: the workload's
//! inputs made ([`gapscope_workload::Workload::prepare`]; the prover's in
//! `Groth16Rep`), then one lifecycle for every such workload ([`run_prepared`]): its
//! run with spans and GPU telemetry on, what it left running awaited, its check outside
//! the spans, and the rows the store writes. The runner calls it in its own process; a
//! `__worker` child calls it for `process = "per_rep"` and `"per_variant"`.

use std::collections::BTreeMap;

#[cfg(feature = "groth16")]
use anyhow::Context;
use anyhow::Result;
use gapscope_workload::{Checked, Rep, Workload as _};

use super::debug::DebugHooks;
use super::schedule::Slot;
use super::setup::ParamsByGadget;
use super::spec::{Experiment, ResolvedVariant};
#[cfg(feature = "groth16")]
use crate::prover::{self, CircuitInstance};
use crate::store::{self, RepStatus, RunRow, SpanRow};
use crate::telemetry::{self, RepTelemetry, Telemetry, TelemetryParts};
use crate::trace;

/// Everything one rep needs that is shared across reps.
pub struct RepContext<'a> {
    pub exp: &'a Experiment,
    pub params: &'a ParamsByGadget,
    /// GPU telemetry of this process (begun and ended around each rep's proving).
    pub telemetry: Option<&'a Telemetry>,
    pub debug: &'a DebugHooks,
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
    /// Sampled stacks, where the variant asked for them.
    pub profile: Option<crate::profile::RepProfile>,
}

impl RepOutput {
    /// A rep that did not run, or whose result could not be had: a failed row with
    /// `why`, and nothing else.
    pub fn failed(v: &ResolvedVariant, slot: Slot, why: String) -> RepOutput {
        RepOutput {
            run: failed_row(v, slot, why),
            spans: Vec::new(),
            gpu: RepTelemetry::default(),
            setup_ns: BTreeMap::new(),
            profile: None,
        }
    }
}

/// Runs one rep of the experiment's in-process workload in this process: its inputs made
/// by the workload outside every window, then [`run_prepared`].
pub fn run_rep_here(ctx: &RepContext, v: &ResolvedVariant, slot: Slot) -> Result<RepOutput> {
    ctx.debug.release_late();
    let rep = match &ctx.exp.workload.hash {
        Some(h) => h
            .prepare(&v.workload_knobs, u64::from(slot.rep))
            .map_err(anyhow::Error::msg)?,
        None => groth16_rep(ctx, v)?,
    };
    run_prepared(ctx, v, slot, rep)
}

/// One rep of a workload, its inputs made, in the order it must happen: telemetry, the
/// emulator's window and the sampler opened, the workload's run, what it left running
/// awaited, the windows closed, then spans, telemetry and the workload's check into the
/// rep's rows. The windows bracket the run, so their opening and closing stay in one
/// function; every in-process workload goes through it.
pub fn run_prepared(
    ctx: &RepContext,
    v: &ResolvedVariant,
    slot: Slot,
    mut rep: Box<dyn Rep>,
) -> Result<RepOutput> {
    if ctx.exp.run.heap_trim {
        crate::counters::heap::trim();
    }
    let heap = crate::counters::heap::HeapStats::read();
    // --- GPU telemetry: on for exactly the run and what it left running.
    let window = TelemetryWindow::open(ctx.telemetry, v.telemetry, v, slot);
    // Under callgrind (an emulated worker): instrumented from here to the last drop.
    let emulation = crate::counters::emulated::RepWindow::open();
    // Sampled stacks: every thread, from here to the last drop.
    let sampling = v
        .profile
        .map(|hz| crate::profile::RepSampling::begin(hz, ctx.debug.profile_opener()));
    let trace_id = rep.run();
    rep.settle();
    drop(emulation);
    let (gpu, started_utc) = window.close();
    ctx.debug.leak();
    let mut spans = trace::drain_trace(trace_id);
    // `tracing` spans of the code the rep ran (the layer installed at start-up).
    crate::capture::tracing_sink::drain_into(trace_id, &mut spans);
    let late = late_spans(trace_id, slot.rep, &v.name);
    ctx.debug.leave_late_span(trace_id);
    let profile = sampling.map(|s| {
        let iv: Vec<_> = spans
            .iter()
            .map(crate::profile::SpanInterval::from)
            .collect();
        s.finish(slot.rep, &v.name, &iv, trace_id)
    });
    let mut rows = store::span_rows(slot.rep, &v.name, &spans);
    if let (Some(h), Some(root)) = (heap, rows.iter_mut().find(|r| r.span_id == trace_id)) {
        root.attrs = store::merge_attrs(&root.attrs, &h).into();
    }
    if let (Some(l), Some(root)) = (late, rows.iter_mut().find(|r| r.span_id == trace_id)) {
        root.attrs = store::merge_attrs(&root.attrs, &l).into();
    }
    // --- end GPU telemetry.
    let checked = rep.check();
    let answer = Answer {
        trace_id,
        checked,
        started_utc,
        pid: std::process::id(),
        rss_end_bytes: crate::store::envinfo::rss_bytes(),
    };
    let row = finish_rows(ctx.telemetry, v, slot, &mut rows, &gpu, answer);
    Ok(RepOutput {
        run: row,
        spans: rows,
        gpu,
        setup_ns: BTreeMap::new(),
        profile,
    })
}

/// What a rep's run answered, wherever it ran: its root span, its check, and its
/// process when it was done.
pub(super) struct Answer {
    pub trace_id: u64,
    pub checked: Checked,
    pub started_utc: String,
    pub pid: u32,
    pub rss_end_bytes: Option<u64>,
}

/// GPU telemetry on for exactly one rep's run, wherever the run happens (this process, a
/// workload binary, a program of the user's): opened just before the run, closed just
/// after it, the opening's notes first among the rep's. A window dropped unclosed (a rep
/// that failed before its run) is closed and what it saw dropped, so that the next rep
/// opens a window of its own.
pub(super) struct TelemetryWindow<'a> {
    telemetry: Option<&'a Telemetry>,
    rep: u32,
    variant: String,
    notes: Vec<String>,
    started_utc: String,
    open: bool,
}

impl<'a> TelemetryWindow<'a> {
    /// Notes the rep's start (UTC) and begins `parts` of `telemetry` for rep `slot` of `v`.
    pub fn open(
        telemetry: Option<&'a Telemetry>,
        parts: TelemetryParts,
        v: &ResolvedVariant,
        slot: Slot,
    ) -> Self {
        let started_utc = chrono::Utc::now().to_rfc3339();
        let notes = telemetry.map(|t| t.begin_rep(parts)).unwrap_or_default();
        TelemetryWindow {
            telemetry,
            rep: slot.rep,
            variant: v.name.clone(),
            notes,
            started_utc,
            open: true,
        }
    }

    /// What the window saw, and when the rep started.
    pub fn close(mut self) -> (RepTelemetry, String) {
        self.open = false;
        let mut gpu = self
            .telemetry
            .map(|t| t.end_rep(self.rep, &self.variant))
            .unwrap_or_default();
        gpu.notes.splice(0..0, std::mem::take(&mut self.notes));
        (gpu, std::mem::take(&mut self.started_utc))
    }
}

impl Drop for TelemetryWindow<'_> {
    fn drop(&mut self) {
        if let (true, Some(t)) = (self.open, self.telemetry) {
            drop(t.end_rep(self.rep, &self.variant));
        }
    }
}

/// The telemetry a rep run by another process gets: NVML as its variant asks; CUPTI
/// never, as it sees only gapscope's own process.
pub(super) fn other_process_parts(v: &ResolvedVariant) -> TelemetryParts {
    TelemetryParts {
        nvml: v.telemetry.nvml,
        cupti: false,
    }
}

/// The last steps of every rep, wherever it ran (this process, a workload binary, a
/// program of the user's): the span rows marked with the GPU's busy time (where activity
/// was collected), and the run's row from the root span (`a.trace_id` among `rows`) and
/// the check.
pub(super) fn finish_rows(
    telemetry: Option<&Telemetry>,
    v: &ResolvedVariant,
    slot: Slot,
    rows: &mut [SpanRow],
    gpu: &RepTelemetry,
    a: Answer,
) -> RunRow {
    if gpu.collected {
        let mut annotate = || telemetry::activity::annotate_gpu_busy(rows, &gpu.activity);
        match telemetry {
            Some(t) => t.on_thread(annotate),
            None => annotate(),
        }
    }
    let root = rows.iter().find(|s| s.span_id == a.trace_id);
    let status = if a.checked.ok {
        RepStatus::Ok
    } else {
        RepStatus::Failed
    };
    RunRow {
        rep: slot.rep,
        variant: v.name.clone(),
        iteration: slot.iteration,
        warmup: slot.warmup,
        status,
        checked: a.checked.checked,
        outputs: a.checked.outputs,
        start_ns: root.map(|p| p.start_ns).unwrap_or(0),
        wall_ns: if status == RepStatus::Ok {
            root.map_or(0, |p| p.duration_ns)
        } else {
            0
        },
        started_utc: a.started_utc,
        pid: a.pid,
        rss_end_bytes: a.rss_end_bytes,
        gpu_mem_used_end_bytes: gpu.gpu_mem_used_end_bytes,
        error: a.checked.error,
        span_rows: None,
    }
}

/// A build without the prover has no Groth16 rep (the runner has refused a prover
/// experiment before: [`super::setup::check_workload_built`]).
#[cfg(not(feature = "groth16"))]
fn groth16_rep(ctx: &RepContext, _v: &ResolvedVariant) -> Result<Box<dyn Rep>> {
    super::setup::check_workload_built(ctx.exp)?;
    anyhow::bail!("a command workload's reps are not run in this process")
}

/// The prover's rep for variant `v`: its backend (none where a GPU backend runs
/// synthesis alone under the emulator, which CUDA does not run under), params, circuits
/// and their public inputs.
#[cfg(feature = "groth16")]
fn groth16_rep(ctx: &RepContext, v: &ResolvedVariant) -> Result<Box<dyn Rep>> {
    let w = &ctx.exp.workload;
    let synthesis_only =
        super::emulation::synthesis_only(v.backend, crate::counters::emulated::armed());
    let backend = if synthesis_only {
        None
    } else {
        Some(prover::backend(v.backend)?)
    };
    let params = ctx
        .params
        .get(&v.gadget)
        .context("params missing for this gadget")?
        .clone();
    let circuits: Vec<CircuitInstance> = (0..w.batch as u64)
        .map(|i| CircuitInstance::new(w.circuit, w.log2_constraints, v.gadget, i))
        .collect::<Result<_, _>>()
        .map_err(anyhow::Error::msg)?;
    let inputs: Vec<_> = circuits
        .iter()
        .map(CircuitInstance::public_inputs)
        .collect();
    Ok(Box::new(prover::rep::Groth16Rep::new(
        backend,
        v.backend,
        params,
        circuits,
        inputs,
        v.prove,
        ctx.debug.corrupts(&v.name),
    )))
}

/// The row of a rep that never produced one of its own (its worker died or outlived
/// its limit): failed, with the reason.
pub fn failed_row(v: &ResolvedVariant, slot: Slot, error: String) -> RunRow {
    RunRow {
        rep: slot.rep,
        variant: v.name.clone(),
        iteration: slot.iteration,
        warmup: slot.warmup,
        status: RepStatus::Failed,
        checked: false,
        outputs: 0,
        start_ns: 0,
        wall_ns: 0,
        started_utc: chrono::Utc::now().to_rfc3339(),
        pid: 0,
        rss_end_bytes: None,
        gpu_mem_used_end_bytes: None,
        error,
        span_rows: None,
    }
}

/// Spans of the previous rep in this process that closed after it was collected.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LateSpans {
    /// Rep (of runs.csv) they belong to.
    pub late_spans_rep: u32,
    pub late_spans: usize,
    /// Their names, each once, in order.
    pub late_span_names: Vec<String>,
}

/// The trace of the rep before in this process, and which rep it was.
static PREVIOUS: std::sync::Mutex<Option<(u64, u32, String)>> = std::sync::Mutex::new(None);

/// A span of a rep can close after the rep was collected: code the rep ran left a thread
/// behind (a destructor handed to a detached thread, say) whose span ended later. Its
/// record then waits in its thread's buffer under the old rep's trace, where no later
/// drain of another trace looks. So each rep also collects what is left of the rep
/// before in this process: those spans are not added to anyone's rows (the earlier rep
/// is written already), but they are counted on this rep's root span (`late_spans`,
/// `late_spans_rep`, `late_span_names`) and said on stderr, and their memory is freed.
/// Spans closing later than the next rep's end are not looked for.
pub(crate) fn late_spans(trace_id: u64, rep: u32, variant: &str) -> Option<LateSpans> {
    let mut prev = PREVIOUS.lock().unwrap_or_else(|e| e.into_inner());
    let found = prev.take().and_then(|(t, r, v)| {
        let mut late = trace::drain_trace(t);
        crate::capture::tracing_sink::drain_into(t, &mut late);
        if late.is_empty() {
            return None;
        }
        let mut names: Vec<String> = Vec::new();
        for s in &late {
            if !names.iter().any(|n| n == s.name) {
                names.push(s.name.to_string());
            }
        }
        eprintln!(
            "warning: rep {r} ({v}): {} span(s) closed after the rep was collected ({}); \
             they are not in its rows. A thread the rep started outlived it: wait for it \
             inside the rep (or give it a span that ends before the rep does) to measure it",
            late.len(),
            names.join(", ")
        );
        Some(LateSpans {
            late_spans_rep: r,
            late_spans: late.len(),
            late_span_names: names,
        })
    });
    *prev = Some((trace_id, rep, variant.to_string()));
    found
}
