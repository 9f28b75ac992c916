//! Slurm: one sbatch job-array script per GPU count, one array task per cell, throttled
//! with `--array=0-N%K`, requeued by Slurm when preempted or failed (`--requeue`), its
//! log per task (`%A_%a`, appended across attempts). A task runs `gapscope sweep cell`,
//! which resumes the cell's folder, so a requeued task continues rather than restarts.
//! Submission records the job ids in `slurm.json`; state comes from `squeue` (and
//! `sacct` where the cluster keeps accounting).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::spec::SlurmOptions;
use super::{by_gpus, Manifest, SweepDir};

/// Where params go on a node when the sweep file does not say: node-local, so that
/// each node makes each size's params once, and cells on it share them.
pub const DEFAULT_NODE_PARAMS: &str = "/tmp/gapscope-params";
/// The jobs submitted so far (read back by `sweep status`).
pub(super) const JOBS: &str = "slurm.json";
/// The batch script of the cells that take `{gpus}` GPUs (written for sbatch, not read).
pub(super) const SCRIPT: &str = "slurm-g{gpus}.sbatch";

/// One submitted job array.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Job {
    pub job_id: String,
    pub gpus: u32,
    /// Cell index of each array task.
    pub cells: Vec<usize>,
    pub script: String,
    pub submitted_utc: String,
}

/// Refuses a value that would end a line of the generated script (a newline, a carriage
/// return) or cut it (a NUL): on an `#SBATCH` line the rest would run as shell code.
fn one_line(what: &str, v: &str) -> Result<()> {
    if let Some(c) = v.chars().find(|c| matches!(c, '\n' | '\r' | '\0')) {
        anyhow::bail!(
            "{what} {v:?} holds a {} character, which would end its line of the sbatch \
             script (the rest would run as shell code): write it on one line",
            match c {
                '\n' => "newline",
                '\r' => "carriage-return",
                _ => "NUL",
            }
        );
    }
    Ok(())
}

/// Every value of the sweep file and the sweep folder that [`script`] writes into a
/// script, each on one line.
pub fn check_values(sweep: &SweepDir, manifest: &Manifest, opts: &SlurmOptions) -> Result<()> {
    one_line("the sweep's name", &manifest.name)?;
    one_line("the sweep folder", &sweep.dir.display().to_string())?;
    for (what, v) in [
        ("[slurm] partition", &opts.partition),
        ("[slurm] account", &opts.account),
        ("[slurm] time", &opts.time),
        ("[slurm] mem", &opts.mem),
    ] {
        if let Some(v) = v {
            one_line(what, v)?;
        }
    }
    for e in &opts.extra {
        one_line("[slurm] extra", e)?;
    }
    if let Some(p) = &opts.params_dir {
        one_line("[slurm] params_dir", &p.display().to_string())?;
    }
    Ok(())
}

/// Single-quotes `s` for bash.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// The job-array script for the cells `cells` (all needing `gpus` GPUs).
pub fn script(
    sweep: &SweepDir,
    manifest: &Manifest,
    opts: &SlurmOptions,
    gapscope: &Path,
    gpus: u32,
    cells: &[usize],
) -> String {
    let mut s = String::from("#!/bin/bash\n");
    let mut sb = |line: String| {
        s.push_str("#SBATCH ");
        s.push_str(&line);
        s.push('\n');
    };
    sb(format!("--job-name=gapscope-{}-g{gpus}", manifest.name));
    let last = cells.len().saturating_sub(1);
    match opts.throttle {
        Some(k) => sb(format!("--array=0-{last}%{k}")),
        None => sb(format!("--array=0-{last}")),
    }
    let logs = sweep.logs_dir();
    sb(format!("--output={}/%A_%a.out", logs.display()));
    sb("--open-mode=append".into());
    sb("--requeue".into());
    if gpus > 0 {
        sb(format!("--gres=gpu:{gpus}"));
    }
    if let Some(p) = &opts.partition {
        sb(format!("--partition={p}"));
    }
    if let Some(a) = &opts.account {
        sb(format!("--account={a}"));
    }
    if let Some(t) = &opts.time {
        sb(format!("--time={t}"));
    }
    if let Some(c) = opts.cpus_per_task {
        sb(format!("--cpus-per-task={c}"));
    }
    if let Some(m) = &opts.mem {
        sb(format!("--mem={m}"));
    }
    for e in &opts.extra {
        sb(e.clone());
    }
    let params = opts
        .params_dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_NODE_PARAMS));
    let map: Vec<String> = cells.iter().map(|c| c.to_string()).collect();
    s.push_str(&format!(
        "# gapscope sweep {:?}: array task i runs cell {{{}}}[i]; a requeued task resumes\n\
         # the cell's run folder (no rep is measured twice).\n\
         set -euo pipefail\n\
         echo \"gapscope sweep: task $SLURM_ARRAY_TASK_ID on $(hostname), attempt $(( ${{SLURM_RESTART_COUNT:-0}} + 1 ))\"\n\
         exec {} sweep cell {} --task \"$SLURM_ARRAY_TASK_ID\" --cells {} --params-dir {}\n",
        manifest.name,
        map.join(","),
        sh_quote(&gapscope.display().to_string()),
        sh_quote(&sweep.dir.display().to_string()),
        map.join(","),
        sh_quote(&params.display().to_string()),
    ));
    s
}

/// `sbatch` exists and answers: checked before any script is written.
pub fn check_sbatch(sbatch: &str) -> Result<()> {
    let out = Command::new(sbatch).arg("--version").output();
    match out {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => anyhow::bail!(
            "{sbatch} --version failed ({}): {}; is this a Slurm submit host?",
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => anyhow::bail!(
            "{sbatch} cannot be run ({e}): run on a Slurm submit host, pass --sbatch PATH, \
             or use --local (or --write-only to write the scripts without submitting)"
        ),
    }
}

/// Writes every group's script; submits each unless `write_only`, and records the
/// jobs. Returns the jobs (with empty ids when only written).
pub fn submit(
    sweep: &SweepDir,
    manifest: &Manifest,
    opts: &SlurmOptions,
    gapscope: &Path,
    sbatch: &str,
    write_only: bool,
) -> Result<Vec<Job>> {
    check_values(sweep, manifest, opts)?;
    one_line(
        "the gapscope binary ([slurm] gapscope)",
        &gapscope.display().to_string(),
    )?;
    if !write_only {
        check_sbatch(sbatch)?;
    }
    let mut jobs = Vec::new();
    for (gpus, cells) in by_gpus(&manifest.cells) {
        let text = script(sweep, manifest, opts, gapscope, gpus, &cells);
        let path = sweep.dir.join(SCRIPT.replace("{gpus}", &gpus.to_string()));
        crate::fsx::write_file(&path, text.as_bytes())?;
        let mut job = Job {
            job_id: String::new(),
            gpus,
            cells,
            script: path.display().to_string(),
            submitted_utc: chrono::Utc::now().to_rfc3339(),
        };
        if !write_only {
            let out = Command::new(sbatch)
                .arg("--parsable")
                .arg(&path)
                .output()
                .with_context(|| format!("cannot run {sbatch}"))?;
            if !out.status.success() {
                // Keep what was submitted before this one.
                record(sweep, &jobs)?;
                anyhow::bail!(
                    "sbatch refused {} ({}): {}",
                    path.display(),
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                );
            }
            let id = String::from_utf8_lossy(&out.stdout);
            // --parsable prints "jobid" or "jobid;cluster".
            job.job_id = id.trim().split(';').next().unwrap_or("").to_string();
            if !is_job_id(&job.job_id) {
                record(sweep, &jobs)?;
                anyhow::bail!(
                    "sbatch printed no job id for {}: {:?}",
                    path.display(),
                    id.trim()
                );
            }
        }
        jobs.push(job);
    }
    if !write_only {
        record(sweep, &jobs)?;
    }
    Ok(jobs)
}

fn record(sweep: &SweepDir, jobs: &[Job]) -> Result<()> {
    let (mut all, unread) = recorded(sweep);
    if let Some(why) = unread {
        // The jobs just submitted are recorded all the same: they run.
        eprintln!("warning: {why}; it is replaced by the jobs submitted now");
    }
    all.extend(jobs.iter().cloned());
    let p = sweep.dir.join(JOBS);
    crate::fsx::write_file(&p, &serde_json::to_vec_pretty(&all)?)?;
    Ok(())
}

/// The jobs submitted for this sweep so far, and why none could be read from a
/// [`JOBS`] file that is there (a link, a FIFO or device, past its cap, not the jobs'
/// JSON): none recorded is no file at all.
pub fn recorded(sweep: &SweepDir) -> (Vec<Job>, Option<String>) {
    let p = sweep.dir.join(JOBS);
    if std::fs::symlink_metadata(&p).is_err() {
        return (Vec::new(), None);
    }
    let read = super::spec::read_state(&p)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str(&t).map_err(|e| format!("{}: {e}", p.display())));
    match read {
        Ok(jobs) => (jobs, None),
        Err(e) => (
            Vec::new(),
            Some(format!(
                "the sweep's submitted jobs could not be read ({}): no scheduler state is \
                 asked for; the cells' folders still tell",
                crate::markup::terminal_text(&e)
            )),
        ),
    }
}

/// A Slurm job id as `sbatch --parsable` gives it: digits only.
fn is_job_id(s: &str) -> bool {
    (1..=20).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit())
}

/// A cell's scheduler state: `squeue`'s for a task still queued or running, else
/// `sacct`'s where accounting is kept.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskState {
    pub cell: usize,
    pub state: String,
    pub reason: String,
}

/// Asks `squeue` (then `sacct`) for every task of the recorded jobs. A scheduler that
/// does not answer gives no states and a note, never an error: the folders still tell.
pub fn task_states(sweep: &SweepDir) -> (Vec<TaskState>, Vec<String>) {
    let mut states = Vec::new();
    let mut notes = Vec::new();
    let (jobs, unread) = recorded(sweep);
    notes.extend(unread);
    for job in jobs.iter().filter(|j| !j.job_id.is_empty()) {
        // slurm-jobs.json is a file of the sweep folder: what it names reaches squeue and
        // sacct only as a job id (digits), and as the value of their option.
        if !is_job_id(&job.job_id) {
            notes.push(format!(
                "{JOBS} names job {:?}, which is not a Slurm job id (digits): left out; \
                 the file was edited",
                crate::markup::terminal_safe(&job.job_id)
            ));
            continue;
        }
        let q = Command::new("squeue")
            .args([
                "-h",
                "-r",
                &format!("--jobs={}", job.job_id),
                "-o",
                "%i|%T|%r",
            ])
            .output();
        let mut seen = std::collections::BTreeSet::new();
        match q {
            Ok(o) if o.status.success() => {
                for line in String::from_utf8_lossy(&o.stdout).lines() {
                    if let Some(t) = parse_squeue_line(line, job) {
                        seen.insert(t.cell);
                        states.push(t);
                    }
                }
            }
            Ok(o) => notes.push(format!(
                "squeue -j {}: {}",
                job.job_id,
                String::from_utf8_lossy(&o.stderr).trim()
            )),
            Err(e) => notes.push(format!("squeue cannot be run ({e})")),
        }
        let a = Command::new("sacct")
            .args([
                "-n",
                "-P",
                "-X",
                &format!("--jobs={}", job.job_id),
                "-o",
                "JobID,State",
            ])
            .output();
        match a {
            Ok(o) if o.status.success() => {
                for line in String::from_utf8_lossy(&o.stdout).lines() {
                    if let Some(t) = parse_squeue_line(&format!("{line}|"), job) {
                        if !seen.contains(&t.cell) {
                            states.push(t);
                        }
                    }
                }
            }
            Ok(o) => {
                let err = String::from_utf8_lossy(&o.stderr).trim().to_string();
                if !err.is_empty() {
                    notes.push(format!(
                        "sacct: {err} (finished tasks are told by their folders)"
                    ));
                }
            }
            Err(_) => {}
        }
    }
    (states, notes)
}

/// `JOBID_TASK|STATE|REASON` → the cell's state (`None` for the array's summary line or
/// another job's).
pub fn parse_squeue_line(line: &str, job: &Job) -> Option<TaskState> {
    let mut parts = line.split('|');
    let id = parts.next()?.trim();
    let state = parts.next()?.trim().to_string();
    let reason = parts.next().unwrap_or("").trim().to_string();
    let (jid, task) = id.split_once('_')?;
    if jid != job.job_id {
        return None;
    }
    let task: usize = task.parse().ok()?;
    Some(TaskState {
        cell: *job.cells.get(task)?,
        state,
        reason,
    })
}
