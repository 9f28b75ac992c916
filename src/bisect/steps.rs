//! The real [`Measurer`]: each measurement is an experiment run of `rev` variants. The
//! experiment is the one given, with its `[run] reps` set to K and its variants
//! replaced by one per commit measured (`good`, `step` and `bad`, or `base` and
//! `cand`), each with the knobs of the given experiment's first variant and its
//! `rev` set to the commit. Its run folder is
//! `<results>/<experiment>-bisect-<good>-<bad>/<run id>/`; a re-run finds a finished
//! folder of the same generated experiment (by its hash) there and reuses it.
//! Revisions are built once per commit in the revision cache (`<results>/.revs/`).
//! With `--patch CRATE=PATH` the commits are a dependency's, and each variant is a
//! `patch` variant of this gapscope at that commit (its worker cached per commit too).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::judge::{Measurer, StepRun};
use super::Metric;
use crate::analysis::{self, Comparison, DiffOptions};
use crate::experiment::{self, RunOptions};
use crate::revisions::short;
use crate::store::{self, RunData};

/// What every measurement of one bisect shares.
#[derive(Debug, Clone)]
pub struct StepSettings {
    /// The experiment file's text.
    pub experiment_text: String,
    pub experiment_name: String,
    /// The repository of the commits (absolute).
    pub repo: PathBuf,
    pub good: String,
    pub bad: String,
    pub metric: Metric,
    /// A fraction; verdicts use half of it as noise floor.
    pub threshold: f64,
    pub results_dir: PathBuf,
    pub params_dir: PathBuf,
    pub command: Vec<String>,
    /// `--patch CRATE=PATH`: the commits are revisions of that crate's repository, and
    /// each is measured as a `patch` variant of this gapscope (the crate's folder,
    /// absolute) instead of a `rev` variant.
    pub patch: Option<(String, PathBuf)>,
}

pub struct ExperimentMeasurer {
    pub s: StepSettings,
}

impl ExperimentMeasurer {
    /// Folder of this bisect's run folders.
    fn name(&self) -> String {
        let base: String = self.s.experiment_name.chars().take(40).collect();
        format!("{base}-bisect-{}-{}", &self.s.good[..8], &self.s.bad[..8])
    }

    /// The generated experiment: `roles` (variant name, commit), K reps.
    fn experiment_text(&self, roles: &[(&str, &str)], reps: u32) -> Result<String> {
        let mut doc: toml::Table =
            toml::from_str(&self.s.experiment_text).context("the experiment does not parse")?;
        doc.insert("name".into(), toml::Value::String(self.name()));
        let run = doc
            .entry("run")
            .or_insert_with(|| toml::Value::Table(Default::default()));
        let run = run.as_table_mut().context("[run] is not a table")?;
        run.insert("reps".into(), toml::Value::Integer(reps as i64));
        let template = doc
            .get("variant")
            .and_then(toml::Value::as_array)
            .and_then(|v| v.first())
            .and_then(toml::Value::as_table)
            .cloned()
            .unwrap_or_default();
        let variants = roles
            .iter()
            .map(|(name, commit)| {
                let mut t = template.clone();
                t.insert("name".into(), toml::Value::String(name.to_string()));
                match &self.s.patch {
                    Some((krate, dir)) => {
                        let mut src = toml::Table::new();
                        src.insert(
                            "path".into(),
                            toml::Value::String(dir.display().to_string()),
                        );
                        src.insert("rev".into(), toml::Value::String(commit.to_string()));
                        let mut set = match t.remove("patch") {
                            Some(toml::Value::Table(set)) => set,
                            _ => toml::Table::new(),
                        };
                        set.insert(krate.clone(), toml::Value::Table(src));
                        t.insert("patch".into(), toml::Value::Table(set));
                    }
                    None => {
                        t.insert("rev".into(), toml::Value::String(commit.to_string()));
                        t.insert(
                            "repo".into(),
                            toml::Value::String(self.s.repo.display().to_string()),
                        );
                    }
                }
                toml::Value::Table(t)
            })
            .collect();
        doc.insert("variant".into(), toml::Value::Array(variants));
        Ok(toml::to_string(&doc)?)
    }

    /// The run folder of `text`: a finished one from before, or a new run.
    fn run(&self, text: &str, what: &str) -> Result<PathBuf> {
        let sha = store::experiment_sha256(text);
        let exp_dir = self.s.results_dir.join(self.name());
        if let Some(dir) = finished_run(&exp_dir, &sha) {
            eprintln!("  {what}: reusing {}", dir.display());
            return Ok(dir);
        }
        std::fs::create_dir_all(&exp_dir)
            .with_context(|| format!("cannot create {}", exp_dir.display()))?;
        let file = exp_dir.join(format!(".experiment-{}.toml", &sha[..12]));
        crate::fsx::write_file(&file, text.as_bytes())?;
        let opts = RunOptions {
            results_dir: self.s.results_dir.clone(),
            params_dir: self.s.params_dir.clone(),
            resume: None,
            progress: false,
            command: self.s.command.clone(),
            nvtx: false,
            debug: Default::default(),
            until_decided: None,
        };
        let out = experiment::run(Some(&file), &opts).with_context(|| format!("{what}: run"))?;
        eprintln!("  {what}: measured {}", out.dir.display());
        Ok(out.dir)
    }

    fn compare(&self, data: &RunData, base: &str, cand: &str) -> Result<Comparison, String> {
        // One metric, chosen before the run: judged at its own alpha, not as one of the
        // diff's family of comparisons.
        let opts = DiffOptions {
            noise_floor: self.s.threshold / 2.0,
            fdr: false,
            ..DiffOptions::default()
        };
        let diff = analysis::diff_runs(data, base, data, cand, &opts).map_err(|e| e.to_string())?;
        self.s.metric.find(&diff).cloned().ok_or_else(|| {
            let mut spans: Vec<&str> = diff.metrics.iter().map(|c| c.span.as_str()).collect();
            spans.dedup();
            format!(
                "metric {} is not in the run {} (its spans: {}); give one of them",
                self.s.metric,
                data.dir.display(),
                spans.join(", ")
            )
        })
    }
}

/// Why variant `name` of a run could not run, from meta.json: its revision did not
/// build (or is refused), or, for a command workload, its build in the worktree failed.
fn variant_failure(data: &RunData, name: &str) -> Option<String> {
    let v = data.meta.variants.iter().find(|v| v.name == name)?;
    if let Some(why) = v.revision.as_ref().and_then(|r| r.failed.clone()) {
        return Some(why);
    }
    if let Some(why) = &v.patch_failed {
        return Some(why.clone());
    }
    let build = data
        .meta
        .external
        .as_ref()?
        .variants
        .get(name)?
        .build
        .as_ref()?;
    (!build.ok).then(|| {
        let commit = v.revision.as_ref().map_or("", |r| short(&r.commit));
        format!(
            "revision {commit} did not build\n{}",
            experiment::external::build_failure(build)
        )
    })
}

/// The newest finished run folder of the experiment with hash `sha` in `exp_dir`.
fn finished_run(exp_dir: &Path, sha: &str) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(exp_dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs.into_iter().rev().find(|d| {
        store::read_meta(d)
            .is_ok_and(|m| m.completed_utc.is_some() && m.experiment_sha256.as_deref() == Some(sha))
    })
}

impl Measurer for ExperimentMeasurer {
    fn measure_step(&mut self, commit: &str, reps: u32) -> Result<StepRun> {
        let (good, bad) = (self.s.good.clone(), self.s.bad.clone());
        let text =
            self.experiment_text(&[("good", &good), ("step", commit), ("bad", &bad)], reps)?;
        let dir = self.run(&text, &format!("{} ×{reps}", short(commit)))?;
        let data = RunData::load(&dir)?;
        for end in ["good", "bad"] {
            if let Some(why) = variant_failure(&data, end) {
                bail!("the {end} end cannot be measured: {why}");
            }
        }
        if let Some(why) = variant_failure(&data, "step") {
            return Ok(StepRun::Failed { why });
        }
        let (vs_good, vs_bad) = match (
            self.compare(&data, "good", "step"),
            self.compare(&data, "bad", "step"),
        ) {
            (Ok(g), Ok(b)) => (g, b),
            (Err(why), _) | (_, Err(why)) => return Ok(StepRun::Failed { why }),
        };
        Ok(StepRun::Measured {
            vs_good,
            vs_bad,
            run_dir: dir,
        })
    }

    fn measure_pair(&mut self, base: &str, cand: &str, reps: u32) -> Result<(Comparison, PathBuf)> {
        let text = self.experiment_text(&[("base", base), ("cand", cand)], reps)?;
        let what = format!("{} → {} ×{reps}", short(base), short(cand));
        let dir = self.run(&text, &what)?;
        let data = RunData::load(&dir)?;
        for (role, commit) in [("base", base), ("cand", cand)] {
            if let Some(why) = variant_failure(&data, role) {
                bail!("{} cannot be measured: {why}", short(commit));
            }
        }
        let c = self
            .compare(&data, "base", "cand")
            .map_err(anyhow::Error::msg)?;
        Ok((c, dir))
    }
}
