//! Runs an experiment: validates everything that can fail before measuring, obtains
//! params, then runs the schedule (warm-ups, then interleaved reps), writing each rep as
//! soon as it is verified.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};

use super::debug::DebugHooks;
use super::emulation::{self, Source};
use super::executor::{write_failed, Executor, Executors};
use super::interrupt::{self, Interrupted};
use super::rep::{RepContext, RepOutput};
use super::resume;
use super::revs::RevVariants;
use super::run_meta::{new_run_meta, record_gpu_meta};
use super::schedule::{schedule, Slot};
use super::setup::{obtain_params, setup_backends};
use super::spec::{Experiment, ProcessPolicy, ResolvedVariant};
use super::until_decided::{Plan, Stop, UntilDecided};
use super::watchdog::{self, Watchdog};
#[cfg(feature = "groth16")]
use crate::prover;
use crate::store::{self, RepStatus, RunRow, RunWriter};
use crate::telemetry::{Telemetry, TelemetryConfig};
use crate::trace;

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
    /// Test doubles (hidden flags); none by default.
    pub debug: DebugHooks,
    /// Add pairs until the comparison is decided (`--until-decided`); a resumed run of
    /// that kind continues so without it.
    pub until_decided: Option<UntilDecided>,
    /// A caller's rule for ending the run before its schedule does (`gapscope bisect`
    /// ends a step once its commit is labelled); none: the schedule runs out.
    pub stop_when: Option<StopWhen>,
}

/// Asked before each slot with the run folder and the rows run so far (a resumed
/// run's included); `true` ends the run there, complete, as a run whose schedule ran
/// out. The folder holds every finished rep when it is asked.
#[derive(Clone)]
pub struct StopWhen(pub Arc<StopRule>);

/// The rule a [`StopWhen`] holds.
pub type StopRule = dyn Fn(&Path, &[RunRow]) -> bool + Send + Sync;

impl std::fmt::Debug for StopWhen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StopWhen(..)")
    }
}

/// What a finished run reports. Its spans are in the run folder only: each rep's are
/// written when it ends and dropped, so that a run holds one rep's spans at a time.
#[derive(Debug)]
pub struct RunOutcome {
    pub dir: PathBuf,
    pub rows: Vec<RunRow>,
    pub failed: usize,
    /// Why a run of `--until-decided` stopped.
    pub stopped: Option<Stop>,
}

fn check_writable(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| {
        format!(
            "results directory {} cannot be created; pass --results-dir with a writable path",
            dir.display()
        )
    })?;
    // An exclusive temp file of a random name (removed when dropped): a name known in
    // advance could be a planted link.
    tempfile::Builder::new()
        .prefix(".gapscope-write-probe-")
        .tempfile_in(dir)
        .with_context(|| {
            format!(
                "results directory {} is not writable; pass --results-dir with a writable path",
                dir.display()
            )
        })?;
    Ok(())
}

/// Exit status of `gapscope run` stopped by its watchdog (`rep_timeout_s`, shared process).
pub use super::watchdog::EXIT_TIMED_OUT;

/// The run's progress bar over `total` reps, `done` of them finished; hidden without
/// `progress`.
fn progress_bar(progress: bool, total: usize, done: usize) -> indicatif::ProgressBar {
    if !progress {
        return indicatif::ProgressBar::hidden();
    }
    let b = indicatif::ProgressBar::new(total as u64);
    b.set_style(
        indicatif::ProgressStyle::with_template(
            "{elapsed_precise} [{bar:30}] {pos}/{len} reps  {msg}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    b.set_position(done as u64);
    b
}

/// Whether a run folder holds a variant's build log (`build-<variant>.log`).
fn has_build_log(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries.flatten().any(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.starts_with("build-") && name.ends_with(".log")
        })
    })
}

/// Runs the experiment at `exp_path` (or resumes `opts.resume`): everything that can
/// fail cheaply checked first ([`begin`]), params and backends set up ([`set_up`]), the
/// run folder opened and command subjects built ([`open_folder`]), then one loop over
/// the scheduled slots ([`rep_loop`]) that runs each rep through an [`Executor`] and
/// writes its rows ([`record`]), and the end of the run ([`finish`]).
pub fn run(exp_path: Option<&Path>, opts: &RunOptions) -> Result<RunOutcome> {
    let (mut r, writer, done_rows) = begin(exp_path, opts)?;
    let (params, watchdog) = set_up(&mut r, opts)?;
    // Ctrl-C or SIGTERM during setup: stop before a run folder is made.
    if interrupt::requested() {
        return Err(Interrupted {
            dir: r.resume.as_ref().map(|d| d.display().to_string()),
            kept: done_rows.len(),
        }
        .into());
    }
    let slots = schedule(
        r.variants.len(),
        r.exp.run.warmups,
        r.exp.run.reps,
        r.exp.run.order,
        r.exp.run.block_size(),
    );
    let names: Vec<String> = r.variants.iter().map(|v| v.name.clone()).collect();
    let todo: Vec<Slot> = resume::remaining(
        &slots,
        &done_rows,
        &names,
        // Every rep of a command workload is a fresh process: no warm-up to redo.
        r.exp.run.process != ProcessPolicy::PerRep && r.exp.workload.command.is_none(),
    );
    // A finished folder resumed: nothing to build either (its build records stay).
    let (dir, writer, unbuilt) = open_folder(&mut r, writer, opts, !todo.is_empty())?;
    let Run {
        exp,
        text: _,
        resume: _,
        mut until,
        variants,
        sources,
        revs,
        telemetry,
        mut meta,
    } = r;
    let command = exp.workload.command.as_ref();
    let rep_timeout = exp.run.rep_timeout_s.map(Duration::from_secs);
    let mut exec = Executors {
        ctx: RepContext {
            exp: &exp,
            params: &params,
            telemetry: Some(&telemetry),
            debug: &opts.debug,
        },
        process: exp.run.process,
        command,
        sources: &sources,
        revs: &revs,
        dir: dir.clone(),
        writer: writer.clone(),
        params_dir: &opts.params_dir,
        nvtx: opts.nvtx,
        rep_timeout,
        watchdog,
        unbuilt,
        // The worker of this build's variants with process = "per_variant".
        own_exe: (exp.run.process == ProcessPolicy::PerVariant)
            .then(std::env::current_exe)
            .transpose()
            .context("cannot locate the gapscope executable")?,
        pool: super::served::Pool::new(&opts.params_dir, opts.nvtx, rep_timeout)
            .rotate(exp.run.reps_per_worker, exp.run.warmups),
        bins: super::workload_bin::WorkloadBins::new(rep_timeout),
    };
    let mut rec = Recorder {
        dir,
        writer,
        meta: &mut meta,
        telemetry: &telemetry,
        process: exp.run.process,
        command: command.is_some(),
        progress: opts.progress,
        bar: progress_bar(opts.progress, done_rows.len() + todo.len(), done_rows.len()),
    };
    let kept = done_rows.len();
    let ends = Ends {
        until: until.as_mut(),
        stop_when: opts.stop_when.as_ref(),
        interrupted: &interrupt::requested,
    };
    let end = rep_loop(&mut rec, &mut exec, &variants, todo, done_rows, ends)?;
    let (dir, bar) = (rec.dir.clone(), rec.bar.clone());
    drop(exec);
    finish(end, kept, &dir, &bar, &mut meta, &telemetry)
}

/// What [`begin`] settled: the experiment, its variants as they will run, telemetry and
/// meta.json (a new run's, or the resumed folder's).
struct Run {
    exp: Experiment,
    /// The experiment file's text (the run folder's copy).
    text: String,
    /// The folder resumed (none: a new run).
    resume: Option<PathBuf>,
    until: Option<Plan>,
    variants: Vec<ResolvedVariant>,
    sources: Vec<Source>,
    revs: RevVariants,
    telemetry: Telemetry,
    meta: store::Meta,
}

/// The experiment loaded (or resumed), every check that needs no params, `rev`
/// variants built, telemetry started, and meta.json made (or read back with the resumed
/// folder's writer and rows).
fn begin(
    exp_path: Option<&Path>,
    opts: &RunOptions,
) -> Result<(Run, Option<RunWriter>, Vec<RunRow>)> {
    // Long because every check that can fail before params are made runs here, in the
    // order each needs the one before (the experiment, its variants and backends, the
    // revisions built, telemetry, then meta.json against the resumed folder or a new
    // one): split further, each part would hand most of this state to the next.
    let (mut exp, text, resume) = resume::load_experiment(exp_path, opts.resume.as_deref())?;
    let mut until = Plan::new(&mut exp, opts.until_decided.as_ref(), resume.as_deref())?;
    // `tracing` spans of the code in-process reps run are recorded with their spans.
    crate::capture::tracing_sink::install();
    let mut variants = exp.resolved_variants();
    let counters = crate::counters::probe();
    let sources = emulation::sources(&variants, |w| eprintln!("warning: {w}"));
    super::setup::check_workload_built(&exp)?;
    if let Some((cmd, _, kind)) = exp.workload.binary(&opts.params_dir) {
        super::workload_bin::probe(cmd, kind).map_err(anyhow::Error::msg)?;
    }
    for (v, s) in variants.iter().zip(&sources) {
        if emulation::synthesis_only(v.backend, s.emulator().is_some()) {
            eprintln!(
                "note: {}",
                emulation::synthesis_only_notice(&v.name, v.backend.as_str())
            );
        } else if exp.workload.worker.is_none() {
            // (A workload binary has its own backends, checked when it makes them.)
            #[cfg(feature = "groth16")]
            prover::backend(v.backend).with_context(|| format!("variant {:?}", v.name))?;
        }
    }
    // `rev` variants: checked out and built before anything is measured.
    // (A resumed run's results folder is the one holding it.)
    let results_dir = (resume.as_deref())
        .and_then(|d| d.parent()?.parent())
        .unwrap_or(&opts.results_dir);
    let revs = RevVariants::prepare(&exp, &text, &variants, results_dir, opts.progress)?;
    revs.apply(&mut variants);
    // Ctrl-C or SIGTERM from here on: stop after the rep in progress (see interrupt).
    interrupt::install();
    // --- GPU telemetry for the run. With per_rep processes each worker collects its own
    // CUPTI activity (CUPTI sees only its process); this one describes the devices.
    let telemetry = Telemetry::start(TelemetryConfig {
        period: std::time::Duration::from_millis(exp.run.telemetry_period_ms),
        nvml: true,
        cupti: exp.run.process == ProcessPolicy::Shared
            && exp.workload.command.is_none()
            && variants.iter().any(|v| v.telemetry.cupti),
        nvtx: opts.nvtx,
    });

    // Before meta.json, which measures the recorder as the reps will use it.
    trace::process_cpu::set_mode(exp.run.process_cpu);
    // Everything that can fail cheaply fails before params are made.
    let (writer, done_rows, mut meta) = match &resume {
        Some(dir) => {
            let meta = store::read_meta(dir)?;
            let mut fresh = new_run_meta(
                &exp,
                &variants,
                &sources,
                &opts.command,
                counters,
                Default::default(),
            );
            fresh.experiment_sha256 = Some(store::experiment_sha256(&text));
            revs.fill_meta(&mut fresh.variants);
            revs.check_resume(&meta.variants)?;
            resume::check_experiment(dir, &meta, &fresh)?;
            resume::check_params_cached(dir, &meta, &opts.params_dir)?;
            let (w, rows) = RunWriter::open_resume(dir)?;
            for n in w.resume_notes() {
                eprintln!("resume: {}", crate::markup::terminal_safe(n));
            }
            (Some(w), rows, meta)
        }
        None => {
            let exp_dir = opts.results_dir.join(&exp.name);
            check_writable(&exp_dir)?;
            let mut meta = new_run_meta(
                &exp,
                &variants,
                &sources,
                &opts.command,
                counters,
                telemetry.gpu_meta(),
            );
            meta.experiment_sha256 = Some(store::experiment_sha256(&text));
            meta.drift = Some(store::envinfo::Drift {
                start: store::envinfo::machine_state(telemetry.gpu_clocks()),
                end: None,
            });
            revs.fill_meta(&mut meta.variants);
            (None, Vec::new(), meta)
        }
    };
    if let Some(u) = until.as_mut() {
        u.record(&mut exp, &mut meta, opts.progress);
    }
    let run = Run {
        exp,
        text,
        resume,
        until,
        variants,
        sources,
        revs,
        telemetry,
        meta,
    };
    Ok((run, writer, done_rows))
}

/// Params made (the prover's), recorded in meta.json of a new run and checked against
/// those of a resumed one, and backends set up in a shared process under the watchdog;
/// returns the params and the watchdog the reps of a shared process run under.
fn set_up(
    r: &mut Run,
    opts: &RunOptions,
) -> Result<(super::setup::ParamsByGadget, Option<(Watchdog, Duration)>)> {
    let (exp, meta) = (&r.exp, &mut r.meta);
    let command = exp.workload.command.as_ref();
    // None for a workload other than the prover.
    let (params, origins) = obtain_params(exp, &opts.params_dir, opts.progress, true)?;
    if let Some(dir) = &r.resume {
        resume::check_params_match(dir, meta, &origins)?;
    }
    if r.resume.is_none() {
        meta.params = origins
            .iter()
            .map(|o| serde_json::to_value(o.for_meta(&opts.params_dir)).unwrap_or_default())
            .collect();
    }
    // A shared process cannot abandon a GPU call that never returns: past rep_timeout_s
    // the watchdog records the rep as failed and stops the run (per_rep kills the worker).
    let watchdog = match (exp.run.process, exp.run.rep_timeout_s) {
        (ProcessPolicy::Shared, Some(s)) if command.is_none() => {
            Some((Watchdog::start(), Duration::from_secs(s)))
        }
        _ => None,
    };
    // per_rep, and a workload binary ([workload] worker): each worker sets up for itself.
    if exp.run.process == ProcessPolicy::Shared
        && command.is_none()
        && exp.workload.worker.is_none()
    {
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
        // Synthesis-only variants (emulated, GPU backend) need no backend; `rev` variants
        // run in their own revision's workers, which set up for themselves.
        let local: Vec<ResolvedVariant> = (r.variants.iter().enumerate())
            .zip(&r.sources)
            .filter(|((i, v), s)| {
                !r.revs.is_rev(*i) && !emulation::synthesis_only(v.backend, s.emulator().is_some())
            })
            .map(|((_, v), _)| v.clone())
            .collect();
        let setup = setup_backends(exp, &local, &params, &origins, opts.progress);
        if r.resume.is_none() {
            meta.setup_ns.extend(setup);
        }
    }
    Ok((params, watchdog))
}

/// The run folder made (or the resumed one's writer kept), and a command workload's
/// subjects built, each variant's folder once; returns the folder, its writer and why
/// each variant's subject did not build. A program that does not exist fails here, not
/// once per rep, and a fresh run refused so leaves no folder behind.
fn open_folder(
    r: &mut Run,
    writer: Option<RunWriter>,
    opts: &RunOptions,
    build: bool,
) -> Result<(PathBuf, SharedWriter, Vec<Option<String>>)> {
    let meta = &mut r.meta;
    let writer = match writer {
        Some(w) => w,
        None => {
            let dir = opts.results_dir.join(&r.exp.name).join(&meta.run_id);
            RunWriter::create(&dir, meta, &r.text)?
        }
    };
    let dir = writer.dir.clone();
    let writer = Arc::new(Mutex::new(writer));
    interrupt::set_abandon_message(format!(
        "\ninterrupted again: the rep in progress is abandoned; every finished rep is kept \
         in {dir}; `gapscope run --resume {dir}` continues the run\n",
        dir = dir.display()
    ));
    if opts.progress {
        eprintln!("results: {}", dir.display());
    }
    let Some(ext) = r.exp.workload.command.as_ref().filter(|_| build) else {
        return Ok((dir, writer, Vec::new()));
    };
    let paths = meta
        .paths
        .as_ref()
        .map(|p| store::paths::PathBases::of_meta(&dir, p));
    let (m, unbuilt) =
        super::command::build_subjects(ext, &r.variants, &dir, opts.progress, paths.as_ref());
    let kept = meta.command_workload.take().unwrap_or_default().variants;
    meta.command_workload = Some(m);
    super::command::keep_line_counts(meta.command_workload.as_mut(), kept, &dir);
    store::write_meta(&dir, meta)?;
    if let Err(e) = super::command::check_programs(ext, &r.variants, &unbuilt) {
        let keep = r.resume.is_some() || has_build_log(&dir);
        drop(writer);
        if !keep && std::fs::remove_dir_all(&dir).is_ok() {
            // The experiment's folder too, where this run was its only one.
            if let Some(parent) = dir.parent() {
                let _ = std::fs::remove_dir(parent);
            }
            if opts.progress {
                eprintln!("removed {}: no rep ran", dir.display());
            }
        }
        return Err(e.into());
    }
    Ok((dir, writer, unbuilt))
}

/// The run folder's writer, shared with a shared process's watchdog.
type SharedWriter = Arc<Mutex<RunWriter>>;

/// What the rep loop writes each rep into: the run folder's writer and meta.json, with
/// the progress bar it reports on.
struct Recorder<'a> {
    dir: PathBuf,
    writer: SharedWriter,
    meta: &'a mut store::Meta,
    telemetry: &'a Telemetry,
    process: ProcessPolicy,
    /// A command workload (meta.json changes with every rep: its line counts).
    command: bool,
    progress: bool,
    bar: indicatif::ProgressBar,
}

/// How the rep loop ended.
struct LoopEnd {
    rows: Vec<RunRow>,
    interrupted: bool,
    stopped: Option<Stop>,
}

/// What ends the rep loop besides its schedule.
struct Ends<'a> {
    /// `--until-decided`'s plan.
    until: Option<&'a mut Plan>,
    /// The caller's rule (`gapscope bisect`'s step).
    stop_when: Option<&'a StopWhen>,
    /// Whether Ctrl-C or SIGTERM asked for a stop ([`interrupt::requested`]).
    interrupted: &'a dyn Fn() -> bool,
}

/// The scheduled slots still to run, in order: each one's rep run by `exec` and written
/// by [`record`], until the schedule runs out or one of `ends` ends it. `rows` holds a
/// resumed run's rows on entry.
fn rep_loop(
    rec: &mut Recorder,
    exec: &mut dyn Executor,
    variants: &[ResolvedVariant],
    todo: Vec<Slot>,
    mut rows: Vec<RunRow>,
    ends: Ends,
) -> Result<LoopEnd> {
    let Ends {
        mut until,
        stop_when,
        interrupted,
    } = ends;
    let mut stopped = None;
    for slot in todo {
        if interrupted() {
            return Ok(LoopEnd {
                rows,
                interrupted: true,
                stopped,
            });
        }
        stopped = until
            .as_mut()
            .and_then(|u| u.before_slot(&rows, &rec.dir, &rec.bar));
        if stopped.is_some() || stop_when.is_some_and(|s| (s.0)(&rec.dir, &rows)) {
            break;
        }
        let v = &variants[slot.variant];
        rec.bar.set_message(format!(
            "{}{}",
            v.name,
            if slot.warmup { " (warm-up)" } else { "" }
        ));
        let bar = rec.bar.clone();
        let out = exec.run_rep(v, slot, rec.meta, &|l| bar.suspend(|| eprintln!("{l}")))?;
        rows.push(record(rec, v, slot, out)?);
        if rec.command {
            // The program's rep was read here (its lines, on reader threads) and is now
            // written: its memory goes back to the kernel, so that the next rep's does not
            // come on top of it. The program's own heap is its own; nothing measured moves.
            crate::counters::heap::trim();
        }
        rec.bar.inc(1);
    }
    if let Some(u) = until {
        stopped = stopped.or_else(|| Some(u.at_end(&rows, &rec.dir, &rec.bar)));
    }
    Ok(LoopEnd {
        rows,
        interrupted: false,
        stopped,
    })
}

/// Writes one rep: its GPU rows and what it adds to meta.json first, then its runs.csv
/// row and spans (the row commits the rep); says a failure above the bar; returns the
/// row as written (a rep past the span cap is recorded failed).
fn record(rec: &mut Recorder, v: &ResolvedVariant, slot: Slot, out: RepOutput) -> Result<RunRow> {
    let RepOutput {
        run: mut row,
        spans,
        gpu,
        setup_ns,
        profile,
    } = out;
    let dir = rec.dir.as_path();
    let meta = &mut *rec.meta;
    // Each per_rep worker's own setup, outside its rep: "<backend>/<variant>/rep<N>".
    let mut meta_changed = !setup_ns.is_empty() || rec.command;
    for (k, ns) in setup_ns {
        meta.setup_ns.insert(format!("{k}/rep{}", slot.rep), ns);
    }
    if let Some(p) = &profile {
        let status = p.status();
        if meta.profile.get(&v.name) != Some(&status) {
            if p.unavailable.is_some() {
                rec.bar
                    .println(format!("rep {} ({}): {}", slot.rep, v.name, p.describe()));
            }
            meta.profile.insert(v.name.clone(), status);
            meta_changed = true;
        }
    }
    // --- GPU telemetry rows first: the runs.csv row commits the rep. On telemetry's
    // thread, so that only what every variant does runs (and allocates) here.
    let process = rec.process;
    rec.telemetry.on_thread(|| -> Result<()> {
        let mut w = rec.writer.lock().unwrap_or_else(|e| e.into_inner());
        w.append_gpu(&gpu.samples, &gpu.activity)
            .with_context(|| write_failed(dir, slot.rep))?;
        meta_changed |= record_gpu_meta(&mut meta.gpu, &gpu, process, v.telemetry.cupti);
        if meta_changed {
            // A killed run keeps the calibration and setup times of every finished rep.
            store::write_meta(dir, meta)?;
        }
        Ok(())
    })?;
    for n in &gpu.notes {
        rec.bar
            .println(format!("rep {} ({}): {n}", slot.rep, v.name));
    }
    let mut w = rec.writer.lock().unwrap_or_else(|e| e.into_inner());
    w.append_rep(&row, &spans)
        .with_context(|| write_failed(dir, slot.rep))?;
    if let Some(why) = w.take_capped() {
        // Recorded failed, without its spans: what runs.csv now says of it.
        row.mark_capped(&why);
    }
    drop(w);
    drop(spans);
    if row.status == RepStatus::Failed {
        let line = format!("rep {} ({}) failed: {}", row.rep, row.variant, row.error);
        if rec.progress && rec.bar.is_hidden() {
            // No bar to print above (stderr is not a terminal): said all the same.
            eprintln!("{line}");
        } else {
            rec.bar.println(line);
        }
    }
    Ok(row)
}

/// The end of a run: an interrupt said with what is kept, else meta.json completed (a
/// resume with nothing left to run leaves it as it was: the run completed when it
/// completed, not when it was looked at again).
fn finish(
    end: LoopEnd,
    kept: usize,
    dir: &Path,
    bar: &indicatif::ProgressBar,
    meta: &mut store::Meta,
    telemetry: &Telemetry,
) -> Result<RunOutcome> {
    let LoopEnd {
        rows,
        interrupted,
        stopped,
    } = end;
    bar.finish_and_clear();
    if interrupted {
        return Err(Interrupted {
            dir: Some(dir.display().to_string()),
            kept: rows.len(),
        }
        .into());
    }
    if !(rows.len() == kept && meta.completed_utc.is_some()) {
        if let (Some(s), Some(u)) = (&stopped, meta.until_decided.as_mut()) {
            u.stopped = Some(s.to_string());
        }
        meta.completed_utc = Some(chrono::Utc::now().to_rfc3339());
        if let Some(d) = meta.drift.as_mut() {
            d.end = Some(store::envinfo::machine_state(telemetry.gpu_clocks()));
        }
        store::write_meta(dir, meta)?;
    }
    let failed = rows
        .iter()
        .filter(|r| r.status == RepStatus::Failed)
        .count();
    Ok(RunOutcome {
        dir: dir.to_path_buf(),
        rows,
        failed,
        stopped,
    })
}

#[cfg(test)]
#[path = "runner_tests.rs"]
mod tests;
