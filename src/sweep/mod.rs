//! Sweeps: an experiment expanded over axes (revisions, sizes, knobs, GPU counts) into
//! cells, each an independent experiment run that an existing scheduler can take. Where
//! it sits: `cli::sweep` → here → `experiment` (a cell is an experiment run), `store`
//! (a cell's state is its run folder's). Nothing below points back.
//!
//! - [`spec`]: the sweep file and the expansion into [`Cell`]s.
//! - this file: the sweep folder under a (shared) results root — `sweep.json`, one
//!   `cell-NNNN/` per cell with its `cell.toml` and its run folder — and one cell's run,
//!   which resumes the cell's folder where an earlier attempt (preempted, requeued)
//!   stopped, and does nothing for a finished cell, so no rep is measured twice.
//! - [`slurm`]: the sbatch job-array script, submission and `squeue`/`scontrol` state.
//! - [`k8s`]: the Indexed Job manifest.
//! - [`status`]: every cell's state, from its folder and the scheduler.

pub mod k8s;
pub mod slurm;
pub mod spec;
pub mod status;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

pub use spec::{Cell, SweepSpec};

use crate::experiment::{self, RunOptions};

#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

/// The default results root: under the working directory, as run folders are.
pub const DEFAULT_ROOT: &str = "results/sweeps";
const MANIFEST: &str = "sweep.json";
const CELL_TOML: &str = "cell.toml";

/// Where in a sweep folder a [`SweepFile`] lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SweepAt {
    /// The sweep folder itself.
    Sweep,
    /// Each cell's folder (`cell-NNNN/`).
    Cell,
}

/// A file gapscope writes into a sweep folder (besides the cells' run folders, which are
/// the store's: [`crate::store::RUN_FILES`], and the scheduler's logs under `logs/`).
#[derive(Debug, Clone, Copy)]
pub struct SweepFile {
    /// Its name; `{gpus}` stands for a GPU count.
    pub name: &'static str,
    pub at: SweepAt,
    /// Whether gapscope reads it back (through [`spec::read_state`]: no link, no FIFO or
    /// device, capped); a file only written is handed to the scheduler.
    pub read_back: bool,
}

/// Every file gapscope writes into a sweep folder: the hostile-input tests plant a link,
/// a FIFO, a device and an oversized file under each name read back, and a sweep's
/// run is checked to write no file missing here.
pub const SWEEP_FILES: &[SweepFile] = &[
    SweepFile {
        name: MANIFEST,
        at: SweepAt::Sweep,
        read_back: true,
    },
    SweepFile {
        name: CELL_TOML,
        at: SweepAt::Cell,
        read_back: true,
    },
    SweepFile {
        name: slurm::JOBS,
        at: SweepAt::Sweep,
        read_back: true,
    },
    SweepFile {
        name: slurm::SCRIPT,
        at: SweepAt::Sweep,
        read_back: false,
    },
];

/// What `sweep.json` holds: the cells as they were materialised, so that every job
/// (on any node) runs the same cell for the same index, and a changed sweep file cannot
/// silently reuse folders of other cells.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Manifest {
    pub name: String,
    pub sweep_file: String,
    pub experiment_file: String,
    pub cells: Vec<ManifestCell>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ManifestCell {
    pub index: usize,
    pub label: String,
    pub gpus: u32,
    pub experiment_sha256: String,
}

/// The sweep's folder under a results root.
#[derive(Debug, Clone)]
pub struct SweepDir {
    pub dir: PathBuf,
}

impl SweepDir {
    pub fn new(root: &Path, name: &str) -> SweepDir {
        SweepDir {
            dir: root.join(name),
        }
    }

    pub fn cell_dir(&self, index: usize) -> PathBuf {
        self.dir.join(format!("cell-{index:04}"))
    }

    pub fn logs_dir(&self) -> PathBuf {
        self.dir.join("logs")
    }

    pub fn manifest(&self) -> Result<Manifest> {
        let p = self.dir.join(MANIFEST);
        let text = spec::read_state(&p).with_context(|| {
            format!(
                "{} is not a sweep folder (no readable {MANIFEST}): materialise it with \
                 `gapscope sweep run SWEEP.toml` first",
                self.dir.display()
            )
        })?;
        serde_json::from_str(&text)
            .with_context(|| format!("{} is not a sweep manifest", p.display()))
    }

    /// Writes `sweep.json` and every cell's `cell.toml`, or checks that those already
    /// there are the same cells (a re-submission resumes them; other cells are refused).
    pub fn materialise(&self, spec: &SweepSpec, cells: &[Cell]) -> Result<Manifest> {
        let manifest = Manifest {
            name: spec.name.clone(),
            sweep_file: spec.path.display().to_string(),
            experiment_file: spec.experiment_path.display().to_string(),
            cells: cells
                .iter()
                .map(|c| ManifestCell {
                    index: c.index,
                    label: c.label(),
                    gpus: c.gpus,
                    experiment_sha256: crate::store::experiment_sha256(&c.experiment_text),
                })
                .collect(),
        };
        std::fs::create_dir_all(self.logs_dir()).with_context(|| {
            format!(
                "the results root {} is not writable: pass --root with a folder every node can write",
                self.dir.display()
            )
        })?;
        probe_writable(&self.dir)?;
        // A manifest there is read (a damaged or planted one is an error, not absent).
        if std::fs::symlink_metadata(self.dir.join(MANIFEST)).is_ok() {
            let old = self.manifest()?;
            if old.cells != manifest.cells {
                anyhow::bail!(
                    "{} already holds a sweep named {:?} with other cells (its file or its \
                     experiment changed): give the sweep another name or pass another --root",
                    self.dir.display(),
                    spec.name
                );
            }
        } else {
            write_new(
                &self.dir.join(MANIFEST),
                &serde_json::to_vec_pretty(&manifest)?,
            )?;
        }
        for c in cells {
            let d = self.cell_dir(c.index);
            std::fs::create_dir_all(&d)
                .with_context(|| format!("cannot create {}", d.display()))?;
            let p = d.join(CELL_TOML);
            if std::fs::symlink_metadata(&p).is_err() {
                write_new(&p, c.experiment_text.as_bytes())?;
            } else if spec::read_state(&p)? != c.experiment_text {
                anyhow::bail!(
                    "{} differs from the sweep's cell {}: remove the sweep folder or rename the sweep",
                    p.display(),
                    c.index
                );
            }
        }
        Ok(manifest)
    }
}

fn probe_writable(dir: &Path) -> Result<()> {
    let f = tempfile::NamedTempFile::new_in(dir).with_context(|| {
        format!(
            "the results root {} is not writable: pass --root with a folder every node can write",
            dir.display()
        )
    })?;
    drop(f);
    Ok(())
}

/// Writes a file that must not exist yet (a temp file in its folder, then a rename that
/// does not replace).
fn write_new(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("cannot write in {}", dir.display()))?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist_noclobber(path)
        .map_err(|e| e.error)
        .with_context(|| format!("cannot create {}", path.display()))?;
    Ok(())
}

/// The run folder of a cell, if one was started: `cell-NNNN/<experiment>/<run>/`.
pub fn cell_run_folders(cell_dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(exps) = std::fs::read_dir(cell_dir) else {
        return out;
    };
    for e in exps.flatten() {
        let p = e.path();
        if !e.file_type().is_ok_and(|t| t.is_dir())
            || p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        {
            continue;
        }
        if let Ok(runs) = std::fs::read_dir(&p) {
            for r in runs.flatten() {
                if r.file_type().is_ok_and(|t| t.is_dir()) && r.path().join("meta.json").is_file() {
                    out.push(r.path());
                }
            }
        }
    }
    out.sort();
    out
}

/// How running one cell went.
#[derive(Debug, Clone, PartialEq)]
pub enum CellOutcome {
    /// Its folder was already complete: nothing ran.
    AlreadyDone(PathBuf),
    /// Ran from the start.
    Ran { dir: PathBuf, failed: usize },
    /// Continued an earlier attempt's folder.
    Resumed { dir: PathBuf, failed: usize },
}

/// Where cell runs write and which params they use.
#[derive(Debug, Clone)]
pub struct CellOptions {
    pub params_dir: PathBuf,
    pub progress: bool,
    pub command: Vec<String>,
}

/// Runs cell `index` of the sweep folder: resumes its run folder where an earlier
/// attempt stopped, does nothing for a finished one, else starts it.
pub fn run_cell(sweep: &SweepDir, index: usize, opts: &CellOptions) -> Result<CellOutcome> {
    let manifest = sweep.manifest()?;
    let cell = manifest
        .cells
        .iter()
        .find(|c| c.index == index)
        .with_context(|| {
            format!(
                "the sweep {} has cells 0..{}; there is no cell {index}",
                sweep.dir.display(),
                manifest.cells.len()
            )
        })?;
    let dir = sweep.cell_dir(index);
    let toml = dir.join(CELL_TOML);
    let text = spec::read_state(&toml)?;
    if crate::store::experiment_sha256(&text) != cell.experiment_sha256 {
        anyhow::bail!(
            "{} was changed after the sweep was materialised: restore it or start the sweep again under another name",
            toml.display()
        );
    }
    let folders = cell_run_folders(&dir);
    if folders.len() > 1 {
        anyhow::bail!(
            "cell {index} has {} run folders in {} (two jobs ran it at once?): keep one and remove the others",
            folders.len(),
            dir.display()
        );
    }
    let run_opts = |resume: Option<PathBuf>| RunOptions {
        results_dir: dir.clone(),
        params_dir: opts.params_dir.clone(),
        resume,
        progress: opts.progress,
        command: opts.command.clone(),
        nvtx: false,
        debug: Default::default(),
        until_decided: None,
        stop_when: None,
    };
    match folders.into_iter().next() {
        Some(run) => {
            let meta = crate::store::read_meta(&run)?;
            if meta.completed_utc.is_some() {
                return Ok(CellOutcome::AlreadyDone(run));
            }
            let out = experiment::run(None, &run_opts(Some(run.clone()))).with_context(|| {
                format!("cell {index} ({}): resuming {}", cell.label, run.display())
            })?;
            Ok(CellOutcome::Resumed {
                dir: out.dir,
                failed: out.failed,
            })
        }
        None => {
            let out = experiment::run(Some(&toml), &run_opts(None))
                .with_context(|| format!("cell {index} ({})", cell.label))?;
            Ok(CellOutcome::Ran {
                dir: out.dir,
                failed: out.failed,
            })
        }
    }
}

/// The cell a scheduler's task runs: its index through the task → cell map, when the
/// job was written for a subset of the cells (one array per GPU count).
pub fn task_cell(task: usize, cells: Option<&[usize]>) -> Result<usize> {
    match cells {
        None => Ok(task),
        Some(map) => map
            .get(task)
            .copied()
            .with_context(|| format!("task {task} is past the job's {} cells", map.len())),
    }
}

/// Cell indices grouped by the GPUs they need, ascending: one job array per group, so
/// that each asks the scheduler for exactly its GPUs.
pub fn by_gpus(cells: &[ManifestCell]) -> Vec<(u32, Vec<usize>)> {
    let mut groups: std::collections::BTreeMap<u32, Vec<usize>> = Default::default();
    for c in cells {
        groups.entry(c.gpus).or_default().push(c.index);
    }
    groups.into_iter().collect()
}
