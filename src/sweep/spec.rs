//! The sweep file: an experiment and the axes that vary it. Expanding the axes gives the
//! cells, each an experiment of its own (the base experiment with one value per axis),
//! validated by the experiment reader before anything runs or is submitted.
//!
//! ```toml
//! name = "sizes"
//! experiment = "../experiments/quickstart.toml"   # relative to this file
//! results_root = "/shared/gapscope"                # default: results/sweeps
//! [axes]
//! log2_constraints = [10, 12]          # shorthand for workload.log2_constraints
//! rev = ["HEAD~1", "HEAD"]             # shorthand: every variant's rev
//! "variant.candidate.drop" = ["async", "sync"]
//! "run.reps" = [6]
//! [slurm]                              # optional: sbatch options
//! partition = "gpu"
//! throttle = 4                         # --array=0-N%4
//! [k8s]                                # optional: the Indexed Job's image and volume
//! image = "registry.example/gapscope:1"
//! claim = "gapscope-results"
//! ```

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::SweepError;
use crate::experiment::Experiment;

/// Most cells one sweep may expand to (a typo in an axis should not plan a million jobs).
pub const MAX_CELLS: usize = 100_000;
/// Largest sweep file read.
const MAX_FILE_BYTES: u64 = 1 << 20;

/// Axis names that stand for a key of the workload.
const WORKLOAD_SHORTHANDS: &[&str] = &["circuit", "log2_constraints", "batch", "backend"];
/// Axis names that stand for a key of every variant.
const VARIANT_SHORTHANDS: &[&str] = &["rev", "repo", "gpus"];

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SweepToml {
    name: String,
    experiment: PathBuf,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    results_root: Option<PathBuf>,
    axes: toml::Table,
    #[serde(default)]
    slurm: SlurmOptions,
    #[serde(default)]
    k8s: K8sOptions,
}

/// `[slurm]`: what the job-array script asks of the scheduler.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SlurmOptions {
    pub partition: Option<String>,
    pub account: Option<String>,
    /// `--time`, e.g. "01:00:00".
    pub time: Option<String>,
    pub cpus_per_task: Option<u32>,
    /// `--mem`, e.g. "64G".
    pub mem: Option<String>,
    /// At most this many cells run at once (`--array=0-N%K`).
    pub throttle: Option<u32>,
    /// The params cache on each node (default: node-local /tmp/gapscope-params), so
    /// that params are made once per size per node, not once per cell.
    pub params_dir: Option<PathBuf>,
    /// The gapscope binary on the nodes (default: this binary's path).
    pub gapscope: Option<PathBuf>,
    /// Further `#SBATCH` lines, verbatim (e.g. "--constraint=h200").
    #[serde(default)]
    pub extra: Vec<String>,
}

/// `[k8s]`: what the Indexed Job runs and where its results go.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct K8sOptions {
    pub image: Option<String>,
    pub namespace: Option<String>,
    /// The PersistentVolumeClaim mounted at the results root.
    pub claim: Option<String>,
    /// Pods at once (default: every cell).
    pub parallelism: Option<u32>,
    /// Retries per cell (`backoffLimitPerIndex`, default 2).
    pub retries: Option<u32>,
    /// The GPU resource name (default "nvidia.com/gpu").
    pub gpu_resource: Option<String>,
    /// gapscope inside the image (default "gapscope").
    pub gapscope: Option<String>,
}

/// Where one axis value goes in the experiment.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    Workload(String),
    Run(String),
    /// A key of the variant of this name, or of every variant (`None`).
    Variant(Option<String>, String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    /// As written in `[axes]`.
    pub key: String,
    pub target: Target,
    pub values: Vec<toml::Value>,
}

/// A parsed sweep file.
#[derive(Debug, Clone)]
pub struct SweepSpec {
    pub name: String,
    pub description: Option<String>,
    pub path: PathBuf,
    pub experiment_path: PathBuf,
    pub experiment_text: String,
    pub results_root: Option<PathBuf>,
    pub axes: Vec<Axis>,
    pub slurm: SlurmOptions,
    pub k8s: K8sOptions,
}

/// One point of the product of the axes.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    pub index: usize,
    /// `key=value` per axis, in axis order.
    pub values: Vec<(String, String)>,
    /// The cell's experiment file.
    pub experiment_text: String,
    /// GPUs one run of the cell needs (0 for the CPU backend).
    pub gpus: u32,
    pub backend: String,
    pub workload: String,
    pub reps: u32,
    pub variants: usize,
}

impl Cell {
    /// `log2_constraints=12,rev=HEAD`: what tells this cell from the others.
    pub fn label(&self) -> String {
        self.values
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    }
}

fn invalid(path: &Path, message: impl Into<String>) -> SweepError {
    SweepError::Invalid {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

fn parse_target(key: &str) -> Result<Target, String> {
    if WORKLOAD_SHORTHANDS.contains(&key) {
        return Ok(Target::Workload(key.into()));
    }
    if VARIANT_SHORTHANDS.contains(&key) {
        return Ok(Target::Variant(None, key.into()));
    }
    let parts: Vec<&str> = key.split('.').collect();
    let ok_part = |p: &str| {
        !p.is_empty()
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || "_-".contains(c))
    };
    match parts.as_slice() {
        ["workload", k] if ok_part(k) => Ok(Target::Workload((*k).into())),
        ["run", k] if ok_part(k) => Ok(Target::Run((*k).into())),
        ["variant", "*", k] if ok_part(k) => Ok(Target::Variant(None, (*k).into())),
        ["variant", v, k] if ok_part(k) && ok_part(v) => {
            Ok(Target::Variant(Some((*v).into()), (*k).into()))
        }
        _ => Err(format!(
            "unknown axis {key:?}: use one of {} (workload keys), {} (every variant's key), \
             or a path: \"workload.KEY\", \"run.KEY\", \"variant.NAME.KEY\", \"variant.*.KEY\"",
            WORKLOAD_SHORTHANDS.join(", "),
            VARIANT_SHORTHANDS.join(", ")
        )),
    }
}

/// A value as a cell label shows it.
fn show(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

impl SweepSpec {
    /// Reads a sweep file and the experiment it names; every cell is expanded and
    /// validated here, so a bad axis fails before anything runs or is submitted.
    pub fn load(path: &Path) -> Result<(SweepSpec, Vec<Cell>), SweepError> {
        let text = read_capped(path)?;
        let raw: SweepToml = toml::from_str(&text).map_err(|e| invalid(path, e.to_string()))?;
        crate::fsx::check_name("name", &raw.name, "it names the sweep's folder")
            .map_err(|m| invalid(path, m))?;
        let base = path.parent().unwrap_or(Path::new("."));
        let experiment_path = if raw.experiment.is_absolute() {
            raw.experiment.clone()
        } else {
            base.join(&raw.experiment)
        };
        let experiment_text = read_capped(&experiment_path).map_err(|e| {
            invalid(
                path,
                format!(
                    "experiment = {:?}: {e}",
                    raw.experiment.display().to_string()
                ),
            )
        })?;
        let mut axes = Vec::new();
        for (key, value) in &raw.axes {
            let target = parse_target(key).map_err(|m| invalid(path, m))?;
            let values = match value {
                toml::Value::Array(a) => a.clone(),
                one => vec![one.clone()],
            };
            if values.is_empty() {
                return Err(invalid(
                    path,
                    format!("axis {key:?} has no values, so the sweep would have no cells: give it at least one"),
                ));
            }
            if let Some(bad) = values.iter().find(|v| v.is_table() || v.is_array()) {
                return Err(invalid(
                    path,
                    format!("axis {key:?}: value {bad} is a table or array; axis values are strings, numbers or booleans"),
                ));
            }
            axes.push(Axis {
                key: key.clone(),
                target,
                values,
            });
        }
        if axes.is_empty() {
            return Err(invalid(
                path,
                "[axes] is empty: a sweep needs at least one axis (for one experiment, use gapscope run)",
            ));
        }
        let spec = SweepSpec {
            name: raw.name,
            description: raw.description,
            path: path.to_path_buf(),
            experiment_path,
            experiment_text,
            results_root: raw
                .results_root
                .map(|r| if r.is_absolute() { r } else { base.join(r) }),
            axes,
            slurm: raw.slurm,
            k8s: raw.k8s,
        };
        let cells = spec.cells()?;
        Ok((spec, cells))
    }

    /// Number of cells: the product of the axes' lengths (checked against
    /// [`MAX_CELLS`] without overflow).
    pub fn cell_count(&self) -> Result<usize, SweepError> {
        self.axes.iter().try_fold(1usize, |n, a| {
            n.checked_mul(a.values.len())
                .filter(|&n| n <= MAX_CELLS)
                .ok_or_else(|| {
                    invalid(
                        &self.path,
                        format!("the axes expand to more than {MAX_CELLS} cells: split the sweep"),
                    )
                })
        })
    }

    /// Every cell, in order: the last axis varies fastest.
    pub fn cells(&self) -> Result<Vec<Cell>, SweepError> {
        let n = self.cell_count()?;
        let base: toml::Table = toml::from_str(&self.experiment_text)
            .map_err(|e| invalid(&self.experiment_path, format!("experiment file: {e}")))?;
        let mut cells = Vec::with_capacity(n);
        for index in 0..n {
            let mut rest = index;
            let mut picks = vec![0usize; self.axes.len()];
            for (i, a) in self.axes.iter().enumerate().rev() {
                picks[i] = rest % a.values.len();
                rest /= a.values.len();
            }
            let mut table = base.clone();
            let mut values = Vec::new();
            for (a, &p) in self.axes.iter().zip(&picks) {
                let v = &a.values[p];
                apply(&mut table, &a.target, v)
                    .map_err(|m| invalid(&self.path, format!("axis {:?}: {m}", a.key)))?;
                values.push((a.key.clone(), show(v)));
            }
            let text = toml::to_string(&table).map_err(|e| invalid(&self.path, e.to_string()))?;
            let label = values
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",");
            let exp = Experiment::parse(&text, &self.path).map_err(|e| {
                invalid(
                    &self.path,
                    format!("cell {index} ({label}) is not a valid experiment: {e}"),
                )
            })?;
            cells.push(describe(index, values, text, &exp));
        }
        Ok(cells)
    }
}

fn describe(index: usize, values: Vec<(String, String)>, text: String, exp: &Experiment) -> Cell {
    let variants = exp.resolved_variants();
    let backend = exp.workload.backend.as_str().to_string();
    let gpu_variants: Vec<_> = variants
        .iter()
        .filter(|v| v.backend.as_str() != "cpu")
        .collect();
    let gpus = if exp.workload.command.is_some() {
        // A program of the user's: the `gpus` axis (or variant key) says what it needs.
        values
            .iter()
            .find(|(k, _)| k == "gpus" || k.ends_with(".gpus"))
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0)
    } else if gpu_variants.is_empty() {
        0
    } else {
        gpu_variants
            .iter()
            .map(|v| v.prove.gpus)
            .max()
            .unwrap_or(1)
            .max(1)
    };
    let workload = if exp.workload.command.is_some() {
        "command".to_string()
    } else {
        format!(
            "{} 2^{} x {}",
            exp.workload.circuit.as_str(),
            exp.workload.log2_constraints,
            exp.workload.batch
        )
    };
    Cell {
        index,
        values,
        experiment_text: text,
        gpus,
        backend,
        workload,
        reps: exp.run.reps + exp.run.warmups,
        variants: variants.len(),
    }
}

/// Sets one axis value in a copy of the experiment's table.
fn apply(table: &mut toml::Table, target: &Target, value: &toml::Value) -> Result<(), String> {
    match target {
        Target::Workload(k) => {
            let w = table
                .entry("workload")
                .or_insert_with(|| toml::Value::Table(Default::default()));
            let w = w
                .as_table_mut()
                .ok_or("the experiment's workload is not a table")?;
            w.insert(k.clone(), value.clone());
        }
        Target::Run(k) => {
            let r = table
                .entry("run")
                .or_insert_with(|| toml::Value::Table(Default::default()));
            let r = r
                .as_table_mut()
                .ok_or("the experiment's run is not a table")?;
            r.insert(k.clone(), value.clone());
        }
        Target::Variant(name, k) => {
            let vs = table
                .get_mut("variant")
                .and_then(|v| v.as_array_mut())
                .ok_or("the experiment has no [[variant]] tables")?;
            let mut hit = false;
            for v in vs.iter_mut().filter_map(|v| v.as_table_mut()) {
                let this = v.get("name").and_then(|n| n.as_str()).map(str::to_string);
                if name.is_none() || this.as_deref() == name.as_deref() {
                    v.insert(k.clone(), value.clone());
                    hit = true;
                }
            }
            if !hit {
                let names: Vec<String> = vs
                    .iter()
                    .filter_map(|v| v.get("name")?.as_str().map(str::to_string))
                    .collect();
                return Err(format!(
                    "no variant named {:?} in the experiment (it has: {})",
                    name.as_deref().unwrap_or("*"),
                    names.join(", ")
                ));
            }
        }
    }
    Ok(())
}

/// Largest file of a sweep folder read (`sweep.json` of [`MAX_CELLS`] cells, the
/// jobs record).
pub(super) const MAX_STATE_BYTES: u64 = 64 << 20;

/// Reads a file of a sweep folder: gapscope wrote it, but on a shared results root
/// anyone may have replaced it, so it is read as a run folder's files are (never
/// through a link, only a regular file, capped: [`crate::fsx::read_no_follow`]).
pub(super) fn read_state(path: &Path) -> Result<String, SweepError> {
    let bytes = crate::fsx::read_no_follow(path, MAX_STATE_BYTES)
        .map_err(|e| invalid(path, e.to_string()))?;
    String::from_utf8(bytes).map_err(|_| invalid(path, "not UTF-8 text"))
}

/// Reads a small text file through the one capped reader ([`crate::fsx::read_capped`]).
pub(super) fn read_capped(path: &Path) -> Result<String, SweepError> {
    let bytes =
        crate::fsx::read_capped(path, MAX_FILE_BYTES).map_err(|e| invalid(path, e.to_string()))?;
    String::from_utf8(bytes).map_err(|_| invalid(path, "not UTF-8 text"))
}
