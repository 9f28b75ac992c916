//! `gapscope sweep`: plan, run (locally, as a Slurm job array, or as a Kubernetes
//! Indexed Job), one cell (what a scheduler's task runs), status and collect.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::sweep::{self, k8s, slurm, status, CellOptions, CellOutcome, SweepDir, SweepSpec};

#[derive(clap::Args, Debug)]
pub struct SweepArgs {
    #[command(subcommand)]
    pub command: SweepCommand,
}

#[derive(clap::Subcommand, Debug)]
pub enum SweepCommand {
    /// Print the cells a sweep file expands to (axes, workload, GPUs, variants × reps);
    /// runs and submits nothing.
    Plan(PlanArgs),
    /// Materialise the sweep's cells under the results root and run them: one after
    /// another here (--local, the default), as a Slurm job array (--slurm), or write a
    /// Kubernetes Indexed Job manifest (--k8s). Running it again resumes: finished
    /// cells are skipped, interrupted ones continue their folder.
    Run(SweepRunArgs),
    /// Run one cell of a materialised sweep folder (what each scheduler task runs):
    /// resumes the cell's run folder where an earlier attempt stopped, does nothing for
    /// a finished cell.
    Cell(CellArgs),
    /// Every cell's state: its folder (reps measured of scheduled) and its scheduler
    /// task (squeue, sacct where accounting is kept).
    Status(StatusArgs),
    /// List the finished cells' run folders (the ones a history import takes) and check
    /// that each reads back; exits 1 while any cell is unfinished, unless --partial.
    Collect(CollectArgs),
}

#[derive(clap::Args, Debug)]
pub struct PlanArgs {
    /// The sweep file (TOML).
    sweep: PathBuf,
    /// Print the plan as JSON.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq)]
pub enum Format {
    Text,
    Json,
}

#[derive(clap::Args, Debug)]
pub struct SweepRunArgs {
    /// The sweep file (TOML).
    sweep: PathBuf,
    /// Run the cells here, one after another (the default).
    #[arg(long, conflicts_with_all = ["slurm", "k8s"])]
    local: bool,
    /// Submit one sbatch job array per GPU count (`--array=0-N%K`, `--gres=gpu:G`).
    #[arg(long, conflicts_with = "k8s")]
    slurm: bool,
    /// Write Kubernetes Indexed Job manifests (one per GPU count) to stdout, or --out-file.
    #[arg(long)]
    k8s: bool,
    /// With --slurm: write the scripts, submit nothing.
    #[arg(long, requires = "slurm")]
    write_only: bool,
    /// With --slurm: the sbatch to call.
    #[arg(long, default_value = "sbatch")]
    sbatch: String,
    /// With --k8s: write the manifest to this file instead of stdout.
    #[arg(long, value_name = "FILE", requires = "k8s", alias = "out")]
    out_file: Option<PathBuf>,
    /// The results root (shared by every node); default: the sweep file's
    /// `results_root`, else results/sweeps.
    #[arg(long)]
    root: Option<PathBuf>,
    /// Params cache for --local (defaults to $GAPSCOPE_PARAMS_DIR or ./params).
    #[arg(long)]
    params_dir: Option<PathBuf>,
    /// No progress bars.
    #[arg(long, short)]
    quiet: bool,
}

#[derive(clap::Args, Debug)]
pub struct CellArgs {
    /// The materialised sweep folder (ROOT/NAME).
    dir: PathBuf,
    /// The cell to run.
    #[arg(long, conflicts_with_all = ["task", "task_env"])]
    index: Option<usize>,
    /// The scheduler's task number; with --cells, the cell is the task-th of that list.
    #[arg(long, conflicts_with = "task_env")]
    task: Option<usize>,
    /// Read the task number from this environment variable (e.g. JOB_COMPLETION_INDEX).
    #[arg(long, value_name = "VAR")]
    task_env: Option<String>,
    /// The job's cells, comma-separated (task i runs the i-th).
    #[arg(long, value_delimiter = ',')]
    cells: Option<Vec<usize>>,
    /// Params cache (defaults to $GAPSCOPE_PARAMS_DIR or ./params).
    #[arg(long)]
    params_dir: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub struct StatusArgs {
    /// The sweep file (TOML) or its materialised folder (ROOT/NAME).
    sweep: PathBuf,
    /// The results root, when a sweep file is given.
    #[arg(long)]
    root: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
}

#[derive(clap::Args, Debug)]
pub struct CollectArgs {
    /// The sweep file (TOML) or its materialised folder (ROOT/NAME).
    sweep: PathBuf,
    /// The results root, when a sweep file is given.
    #[arg(long)]
    root: Option<PathBuf>,
    /// Succeed with the finished cells even while others are not.
    #[arg(long)]
    partial: bool,
    /// Import the finished cells into the history database (`--db`, default
    /// $GAPSCOPE_HISTORY, else results/history.sqlite), as `gapscope history add` does:
    /// idempotently, one transaction per folder.
    #[arg(long)]
    history: bool,
    #[command(flatten)]
    db: super::history::Db,
    #[command(flatten)]
    place: super::history::Place,
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
}

pub fn run(a: SweepArgs) -> Result<()> {
    match a.command {
        SweepCommand::Plan(p) => plan(p),
        SweepCommand::Run(r) => run_sweep(r),
        SweepCommand::Cell(c) => cell(c),
        SweepCommand::Status(s) => status_cmd(s),
        SweepCommand::Collect(c) => collect(c),
    }
}

fn root_of(spec: &SweepSpec, root: Option<&Path>) -> PathBuf {
    root.map(Path::to_path_buf)
        .or_else(|| spec.results_root.clone())
        .unwrap_or_else(|| PathBuf::from(sweep::DEFAULT_ROOT))
}

/// A sweep file, or a materialised folder (with its sweep.json).
fn sweep_dir_of(path: &Path, root: Option<&Path>) -> Result<SweepDir> {
    if path.is_dir() {
        return Ok(SweepDir {
            dir: absolute(path.to_path_buf())?,
        });
    }
    let (spec, _) = SweepSpec::load(path)?;
    Ok(SweepDir::new(&absolute(root_of(&spec, root))?, &spec.name))
}

fn plan(a: PlanArgs) -> Result<()> {
    let (spec, cells) = SweepSpec::load(&a.sweep)?;
    if a.format == Format::Json {
        let rows: Vec<serde_json::Value> = cells
            .iter()
            .map(|c| {
                serde_json::json!({
                    "index": c.index, "axes": c.label(), "workload": c.workload,
                    "backend": c.backend, "gpus": c.gpus, "variants": c.variants,
                    "reps_per_variant": c.reps,
                })
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({"name": spec.name, "cells": rows}))?
        );
        return Ok(());
    }
    println!(
        "sweep {:?}: {} cells from {} ({} axes)",
        spec.name,
        cells.len(),
        spec.experiment_path.display(),
        spec.axes.len()
    );
    println!(
        "{:>5}  {:<22} {:<9} {:>4} {:>9}  axes",
        "cell", "workload", "backend", "gpus", "reps"
    );
    for c in &cells {
        println!(
            "{:>5}  {:<22} {:<9} {:>4} {:>9}  {}",
            c.index,
            c.workload,
            c.backend,
            c.gpus,
            format!("{}x{}", c.variants, c.reps),
            c.label()
        );
    }
    let gpu_cells: u32 = cells.iter().map(|c| c.gpus).sum();
    println!(
        "{} reps in all; {} GPU-cells ({} need no GPU)",
        cells
            .iter()
            .map(|c| (c.variants as u64) * c.reps as u64)
            .sum::<u64>(),
        gpu_cells,
        cells.iter().filter(|c| c.gpus == 0).count()
    );
    Ok(())
}

fn cell_options(params_dir: Option<PathBuf>, progress: bool) -> CellOptions {
    CellOptions {
        params_dir: params_dir.unwrap_or_else(super::default_params_dir),
        progress,
        command: super::command_line(),
    }
}

fn absolute(p: PathBuf) -> Result<PathBuf> {
    if p.is_absolute() {
        return Ok(p);
    }
    Ok(std::env::current_dir()?.join(p))
}

fn run_sweep(a: SweepRunArgs) -> Result<()> {
    // `sweep run`'s three ways to run the cells, each short: write Kubernetes Jobs, submit
    // (or write) Slurm scripts, or run the cells here one after another. They share the
    // checks and the sweep folder made above them.
    let (spec, cells) = SweepSpec::load(&a.sweep)?;
    if a.k8s {
        let missing = k8s::missing(&spec.k8s);
        if !missing.is_empty() {
            anyhow::bail!(
                "{}: [k8s] needs {} to write a Job",
                spec.path.display(),
                missing.join(" and ")
            );
        }
    }
    if a.slurm && !a.write_only {
        // Before anything is written under the root.
        slurm::check_sbatch(&a.sbatch)?;
    }
    let root = absolute(root_of(&spec, a.root.as_deref()))?;
    let sweep = SweepDir::new(&root, &spec.name);
    let manifest = sweep.materialise(&spec, &cells)?;
    if a.k8s {
        let docs = k8s::manifests(&sweep, &manifest, &spec.k8s);
        let text = docs
            .iter()
            .map(|d| serde_json::to_string_pretty(d).map(|s| format!("---\n{s}\n")))
            .collect::<Result<String, _>>()?;
        match &a.out_file {
            Some(p) => crate::fsx::write_file_or_stdout(p, text.as_bytes())?,
            None => print!("{text}"),
        }
        eprintln!(
            "{} Job(s) for {} cells; results under {} (apply with kubectl apply -f)",
            docs.len(),
            manifest.cells.len(),
            sweep.dir.display()
        );
        return Ok(());
    }
    if a.slurm {
        let gapscope = match &spec.slurm.gapscope {
            Some(p) => p.clone(),
            None => std::env::current_exe().context("cannot find this gapscope binary's path")?,
        };
        let jobs = slurm::submit(
            &sweep,
            &manifest,
            &spec.slurm,
            &gapscope,
            &a.sbatch,
            a.write_only,
        )?;
        for j in &jobs {
            if j.job_id.is_empty() {
                println!(
                    "wrote {} ({} cells, {} GPUs each)",
                    j.script,
                    j.cells.len(),
                    j.gpus
                );
            } else {
                println!(
                    "submitted job {} ({} cells, {} GPUs each): {}",
                    j.job_id,
                    j.cells.len(),
                    j.gpus,
                    j.script
                );
            }
        }
        println!("{}", sweep.dir.display());
        return Ok(());
    }
    let opts = cell_options(a.params_dir.clone(), !a.quiet);
    let mut failed_cells = Vec::new();
    for c in &manifest.cells {
        eprintln!(
            "sweep {}: cell {} of {} ({})",
            spec.name,
            c.index + 1,
            manifest.cells.len(),
            c.label
        );
        match sweep::run_cell(&sweep, c.index, &opts) {
            Ok(o) => report_outcome(c.index, &o),
            Err(e) => {
                if e.downcast_ref::<crate::experiment::Interrupted>().is_some() {
                    return Err(e);
                }
                eprintln!("cell {}: {e:#}", c.index);
                failed_cells.push(c.index);
            }
        }
    }
    println!("{}", sweep.dir.display());
    if !failed_cells.is_empty() {
        anyhow::bail!(
            "{} of {} cells failed ({:?}); `gapscope sweep run` again resumes them",
            failed_cells.len(),
            manifest.cells.len(),
            failed_cells
        );
    }
    Ok(())
}

fn report_outcome(index: usize, o: &CellOutcome) {
    match o {
        CellOutcome::AlreadyDone(d) => {
            eprintln!("cell {index}: already complete in {}", d.display())
        }
        CellOutcome::Ran { dir, failed } => eprintln!(
            "cell {index}: ran, {failed} failed rep(s): {}",
            dir.display()
        ),
        CellOutcome::Resumed { dir, failed } => {
            eprintln!(
                "cell {index}: resumed, {failed} failed rep(s): {}",
                dir.display()
            )
        }
    }
}

fn cell(a: CellArgs) -> Result<()> {
    let task = match (&a.index, a.task, &a.task_env) {
        (Some(i), _, _) => {
            if a.cells.is_some() {
                anyhow::bail!("--cells maps task numbers to cells: use it with --task or --task-env, not --index");
            }
            *i
        }
        (None, Some(t), _) => sweep::task_cell(t, a.cells.as_deref())?,
        (None, None, Some(var)) => {
            let v = std::env::var(var)
                .with_context(|| format!("--task-env {var}: the variable is not set"))?;
            let t: usize = v
                .trim()
                .parse()
                .with_context(|| format!("--task-env {var}: {v:?} is not a task number"))?;
            sweep::task_cell(t, a.cells.as_deref())?
        }
        (None, None, None) => {
            anyhow::bail!("say which cell: --index N, --task N [--cells LIST] or --task-env VAR")
        }
    };
    let sweep = SweepDir { dir: a.dir.clone() };
    let o = sweep::run_cell(&sweep, task, &cell_options(a.params_dir, false))?;
    report_outcome(task, &o);
    match o {
        CellOutcome::AlreadyDone(d)
        | CellOutcome::Ran { dir: d, .. }
        | CellOutcome::Resumed { dir: d, .. } => {
            println!("{}", d.display())
        }
    }
    Ok(())
}

fn states(sweep: &SweepDir) -> Result<(Vec<status::CellStatus>, Vec<String>)> {
    let manifest = sweep.manifest()?;
    let mut states = status::folder_states(sweep, &manifest);
    let (tasks, notes) = slurm::task_states(sweep);
    for t in tasks {
        if let Some(s) = states.iter_mut().find(|s| s.index == t.cell) {
            s.scheduler = Some(if t.reason.is_empty() || t.reason == "None" {
                t.state
            } else {
                format!("{} ({})", t.state, t.reason)
            });
        }
    }
    Ok((states, notes))
}

fn status_cmd(a: StatusArgs) -> Result<()> {
    let sweep = sweep_dir_of(&a.sweep, a.root.as_deref())?;
    let (states, notes) = states(&sweep)?;
    if a.format == Format::Json {
        println!("{}", serde_json::to_string_pretty(&states)?);
    } else {
        // Labels and problems come from the sweep's folders: shown, not obeyed.
        print!("{}", crate::markup::terminal_text(&status::render(&states)));
    }
    for n in notes {
        eprintln!("note: {}", crate::markup::terminal_safe(&n));
    }
    Ok(())
}

fn collect(a: CollectArgs) -> Result<()> {
    let sweep = sweep_dir_of(&a.sweep, a.root.as_deref())?;
    let manifest = sweep.manifest()?;
    let states = status::folder_states(&sweep, &manifest);
    let done: Vec<&status::CellStatus> = states.iter().filter(|s| s.done()).collect();
    let open: Vec<&status::CellStatus> = states.iter().filter(|s| !s.done()).collect();
    if a.format == Format::Json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "finished": done.iter().map(|s| s.run_dir.as_ref().map(|d| d.display().to_string())).collect::<Vec<_>>(),
                "unfinished": open.iter().map(|s| s.index).collect::<Vec<_>>(),
            }))?
        );
    } else {
        for s in &done {
            if let Some(d) = &s.run_dir {
                println!("{}", d.display());
            }
        }
    }
    eprintln!("{} of {} cells finished", done.len(), states.len());
    if a.history {
        let dirs: Vec<PathBuf> = done.iter().filter_map(|s| s.run_dir.clone()).collect();
        super::history::store(&a.db, &a.place, &dirs, None)?;
    }
    if !open.is_empty() && !a.partial {
        anyhow::bail!(
            "{} cell(s) not finished ({}): wait for them (`gapscope sweep status`), or pass --partial",
            open.len(),
            open.iter().map(|s| format!("{} {}", s.index, s.folder)).collect::<Vec<_>>().join(", ")
        );
    }
    Ok(())
}
