//! Where a rep runs, behind one seam: [`Executor`] runs one rep of one variant and
//! returns its rows; the runner's loop ([`super::runner`]) owns the schedule, the
//! stopping rules and the writing, and never asks where the rep ran. [`Executors`] is
//! the real one: this process (the in-process workloads, through
//! [`super::rep::run_rep_here`]), a worker per rep, a serving worker per variant, a
//! worker of another revision's build, a workload's own binary, or a program of the
//! user's. Tests put a mock
//! in its place to drive the loop without spawning anything.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};

use super::emulation::Source;
use super::rep::{failed_row, run_rep_here, RepContext, RepOutput};
use super::revs::RevVariants;
use super::schedule::Slot;
use super::served::{Pool, WorkerSource};
use super::spec::{CommandWorkload, ProcessPolicy, ResolvedVariant};
use super::watchdog::{self, Watchdog};
use super::worker;
use super::workload_bin::WorkloadBins;
use crate::store::{self, RunRow, RunWriter};
use crate::trace;

/// Runs one rep of one variant wherever that variant's reps run.
pub trait Executor {
    /// Rep `slot` of variant `v`; `meta` is the run's meta.json, for what an executor
    /// keeps there (a program's line counts); `say` prints a line above the progress bar.
    fn run_rep(
        &mut self,
        v: &ResolvedVariant,
        slot: Slot,
        meta: &mut store::Meta,
        say: &dyn Fn(&str),
    ) -> Result<RepOutput>;
}

/// The real executor: one place that knows every way a rep runs.
pub struct Executors<'a> {
    pub ctx: RepContext<'a>,
    pub process: ProcessPolicy,
    pub command: Option<&'a CommandWorkload>,
    pub sources: &'a [Source],
    pub revs: &'a RevVariants,
    /// The run folder (the experiment copy workers read, the stacks written here).
    pub dir: PathBuf,
    pub writer: Arc<Mutex<RunWriter>>,
    pub params_dir: &'a Path,
    pub nvtx: bool,
    pub rep_timeout: Option<Duration>,
    /// A shared process's watchdog and its limit (`rep_timeout_s`).
    pub watchdog: Option<(Watchdog, Duration)>,
    /// Command workloads: why a variant's subject did not build, by variant.
    pub unbuilt: Vec<Option<String>>,
    /// This build's executable, for its serving workers (`process = "per_variant"`).
    pub own_exe: Option<PathBuf>,
    pub pool: Pool,
    /// `[workload] worker`: the workload binaries serving each variant.
    pub bins: WorkloadBins,
}

impl Executor for Executors<'_> {
    fn run_rep(
        &mut self,
        v: &ResolvedVariant,
        slot: Slot,
        meta: &mut store::Meta,
        say: &dyn Fn(&str),
    ) -> Result<RepOutput> {
        // Long because it is the one match over every way a rep runs (the table this
        // module exists for); each arm is a call, and splitting the arms apart would
        // only scatter that table.
        let i = slot.variant;
        let emulator = self.sources[i].emulator();
        let dir = self.dir.as_path();
        let debug = self.ctx.debug;
        Ok(match (self.command, self.process, emulator) {
            _ if self.revs.failed(i).is_some() => {
                RepOutput::failed(v, slot, self.revs.failed(i).unwrap_or("").into())
            }
            // The in-process workload's own binary (`[workload] worker`), serving the variant.
            _ if self.ctx.exp.workload.worker.is_some() => {
                let cmd = self.ctx.exp.workload.worker.clone().unwrap_or_default();
                self.in_binary(&cmd, v, slot)?
            }
            // A `rev` or `patch` variant whose build is the workload's own binary.
            _ if self.revs.binary(i).is_some() => {
                let exe = self.revs.binary(i).expect("checked");
                self.in_binary(&[exe.to_string_lossy().into_owned()], v, slot)?
            }
            // One serving worker per variant, of this build or of its `rev`/`patch` build;
            // a build too old to serve runs a worker per rep.
            (None, ProcessPolicy::PerVariant, None) => {
                let (exe, run_dir) = match self.revs.worker(i) {
                    Some(w) => w,
                    None => (
                        self.own_exe.as_deref().expect("looked up for per_variant"),
                        dir,
                    ),
                };
                let src = WorkerSource { exe, run_dir };
                self.pool.run(&src, v, slot, debug, |l| say(&l))?
            }
            // A `rev` variant of gapscope: a worker of that revision's gapscope, always.
            (None, _, emulator) if self.revs.worker(i).is_some() => {
                let (exe, exp_dir) = self.revs.worker(i).expect("checked");
                self.in_worker(exe, exp_dir, v, slot, emulator)?
            }
            (Some(ext), _, _) => {
                // The root as the run folder names it (a resumed folder keeps its own).
                let root = meta.phases().root.clone();
                let rep = match &self.unbuilt[i] {
                    Some(why) => super::command::unbuilt_rep(v, slot, why),
                    None => super::command::run_rep(
                        ext,
                        &root,
                        v,
                        slot,
                        self.rep_timeout,
                        self.ctx.telemetry,
                        debug.profile_opener(),
                    ),
                };
                super::command::record_lines(meta.command_workload.as_mut(), v, &rep);
                write_stacks(dir, slot, &rep.out)?;
                rep.out
            }
            (None, ProcessPolicy::Shared, None) => {
                trace::set_counters_enabled(self.sources[i].perf_events());
                let _deadline = self.watchdog.as_ref().map(|(dog, limit)| {
                    dog.arm(*limit, timed_out(&self.writer, dir, v, slot, *limit))
                });
                let out = run_rep_here(&self.ctx, v, slot)?;
                // (A per_rep worker writes its rep's stacks itself.)
                write_stacks(dir, slot, &out)?;
                out
            }
            // An emulated rep always runs in a worker: the emulator wraps a process.
            (None, ProcessPolicy::PerRep | ProcessPolicy::PerVariant, _) | (None, _, Some(_)) => {
                let exe =
                    std::env::current_exe().context("cannot locate the gapscope executable")?;
                self.in_worker(&exe, dir, v, slot, emulator)?
            }
        })
    }
}

impl Executors<'_> {
    /// Rep `slot` of `v` in the workload's own binary `cmd` (one serving process per
    /// variant), started with the workload's settings and the variant's knobs.
    fn in_binary(&mut self, cmd: &[String], v: &ResolvedVariant, slot: Slot) -> Result<RepOutput> {
        let w = &self.ctx.exp.workload;
        let (settings, _) = w
            .binary_settings(self.params_dir)
            .context("a command workload has no workload binary")?;
        let knobs = w.binary_knobs(v);
        Ok(self
            .bins
            .run(cmd, &settings, &knobs, v, slot, self.ctx.telemetry))
    }

    /// Rep `slot` of `v` in a worker of its own: the executable `exe` (this build's, or
    /// a revision's), reading the experiment copy of `run_dir`, under `emulator` if any.
    fn in_worker(
        &self,
        exe: &Path,
        run_dir: &Path,
        v: &ResolvedVariant,
        slot: Slot,
        emulator: Option<&super::emulation::Emulator>,
    ) -> Result<RepOutput> {
        worker::run_rep_with(
            exe,
            run_dir,
            self.params_dir,
            v,
            slot,
            self.nvtx,
            self.rep_timeout,
            self.ctx.debug,
            emulator,
        )
    }
}

/// The watchdog's action for a rep of a shared process: the rep is recorded as failed
/// (finished reps are on disk already), then the process ends.
pub(super) fn timed_out(
    writer: &Arc<Mutex<RunWriter>>,
    dir: &Path,
    v: &ResolvedVariant,
    slot: Slot,
    limit: Duration,
) -> impl FnOnce() + Send + 'static {
    let writer = writer.clone();
    let dir = dir.to_path_buf();
    let row = failed_row(
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
        watchdog::exit_now(watchdog::EXIT_TIMED_OUT)
    }
}

/// Appends the failed row of a rep that outlived its limit. The rep's own thread is stuck
/// outside any append, so the lock is free unless it was stuck in the store itself; then
/// the row cannot be written, and the caller says so.
pub(super) fn record_timed_out(writer: &Mutex<RunWriter>, row: &RunRow) -> Result<(), String> {
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

/// A rep's sampled stacks into the run folder (`stacks/`), where it has some.
fn write_stacks(dir: &Path, slot: Slot, out: &RepOutput) -> Result<()> {
    if let Some(p) = &out.profile {
        crate::profile::folded::write_rep(dir, p).with_context(|| write_failed(dir, slot.rep))?;
    }
    Ok(())
}

/// What to tell the user when a rep cannot be written (a full disk, most often).
pub(super) fn write_failed(dir: &Path, rep: u32) -> String {
    format!(
        "rep {rep} could not be written to {dir} (is the disk full?); every rep before it is \
         kept: free some space, then `gapscope run --resume {dir}` goes on from there",
        dir = dir.display()
    )
}
