//! `gapscope bisect` and `gapscope bisect-step`: the first commit where a metric grew,
//! by a search of our own or under `git bisect run`.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};

use crate::bisect::{self, judge, ExperimentMeasurer, Metric, Reps, StepLabel, StepSettings};
use crate::experiment::Experiment;
use crate::revisions;

/// What both commands take.
#[derive(clap::Args, Debug)]
pub struct Common {
    /// A revision where the metric is as it should be: on the bad one's first-parent
    /// history (a commit `git log --first-parent BAD` lists).
    #[arg(long)]
    good: String,
    /// A later revision where it grew; the commits searched are its first-parent
    /// history back to --good.
    #[arg(long)]
    bad: String,
    /// The experiment: its workload, run policy and first variant's knobs are measured
    /// at each commit.
    #[arg(long)]
    experiment: PathBuf,
    /// SPAN.total, SPAN.self, SPAN.process_cpu or SPAN.COUNTER, e.g. gpu_prove.self or
    /// synthesis.task_clock_ns; program.total is the whole run of a command workload
    /// (all a program that reports no spans has). Checked on one rep of the good end
    /// before anything else is built.
    #[arg(long)]
    metric: String,
    /// Smallest growth that counts, in percent; verdicts clear half of it.
    #[arg(long, default_value_t = 5.0)]
    threshold: f64,
    /// The most reps per variant of a step; each step stops as soon as its commit is
    /// labelled (default: derived from the ends' distance and spread, 50 to 100;
    /// bisect-step: 50). At least 5: no step is labelled sooner.
    #[arg(long)]
    reps: Option<u32>,
    /// A rep of the commit under test that outlives the rep timeout is a failed rep like
    /// any other, instead of skipping the commit at once (the timeout: the
    /// experiment's run.rep_timeout_s, else 10× the ends' slowest rep, at least 10 s).
    #[arg(long)]
    retry_timeouts: bool,
    /// No line per rep on stderr.
    #[arg(long, short)]
    quiet: bool,
    /// The repository of the revisions (default: the one holding the current folder).
    #[arg(long, default_value = ".")]
    repo: PathBuf,
    /// Bisect a dependency's history instead of gapscope's: CRATE=PATH names a crate of
    /// gapscope's dependency graph and the folder of its git checkout (e.g.
    /// supraseal-c2=../supraseal-c2); --good and --bad are revisions of that repository,
    /// and each commit is measured as a `patch` variant of this gapscope.
    #[arg(long, value_name = "CRATE=PATH")]
    patch: Option<String>,
    /// Where run folders go (each measurement's is kept, and reused by a re-run).
    #[arg(long, default_value = "results")]
    results_dir: PathBuf,
    /// Params cache (defaults to $GAPSCOPE_PARAMS_DIR or ./params).
    #[arg(long)]
    params_dir: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub struct BisectArgs {
    #[command(flatten)]
    common: Common,
    /// text, or json (the whole report).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

#[derive(clap::Args, Debug)]
pub struct StepArgs {
    #[command(flatten)]
    common: Common,
    /// The commit to judge (default HEAD, the one `git bisect` checked out).
    #[arg(long, default_value = "HEAD")]
    rev: String,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
}

/// Exit status of `gapscope bisect-step` for `git bisect run`: 0 good, 1 bad, 125 skip,
/// and 128 for an error, which makes `git bisect run` stop rather than take it for bad.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct StepExit {
    pub code: i32,
    pub message: String,
}

impl Common {
    fn settings(&self) -> Result<(StepSettings, Vec<String>)> {
        if !(self.threshold > 0.0 && self.threshold < 100.0) {
            bail!(
                "--threshold {} must be a percentage in (0, 100), e.g. 5",
                self.threshold
            );
        }
        if self.reps == Some(0) {
            bail!("--reps must be at least 1");
        }
        let max = crate::experiment::spec::MAX_REPS;
        if let Some(r) = self.reps.filter(|&r| r > max) {
            bail!("--reps {r} is more than {max}: use fewer reps per step");
        }
        let metric = Metric::parse(&self.metric).map_err(anyhow::Error::msg)?;
        let (exp, text) = Experiment::load(&self.experiment)?;
        super::note_params_dir(self.params_dir.is_some(), &exp);
        let patch = match &self.patch {
            None => None,
            Some(p) => {
                let Some((krate, path)) = p
                    .split_once('=')
                    .filter(|(k, v)| !k.is_empty() && !v.is_empty())
                else {
                    bail!("--patch {p:?}: write CRATE=PATH, e.g. supraseal-c2=../supraseal-c2");
                };
                let dir = std::path::absolute(path).context("the --patch folder")?;
                Some((krate.to_string(), dir))
            }
        };
        let repo = match &patch {
            Some((_, dir)) => revisions::toplevel(dir)?,
            None => revisions::toplevel(&self.repo)?,
        };
        let good = revisions::resolve(&repo, &self.good)?;
        let bad = revisions::resolve(&repo, &self.bad)?;
        if !revisions::is_ancestor(&repo, &good, &bad)? {
            bail!(
                "--good {} is not an ancestor of --bad {}: give the older, good revision first",
                self.good,
                self.bad
            );
        }
        let commits = revisions::first_parent_path(&repo, &good, &bad)?;
        let settings = StepSettings {
            experiment_text: text,
            experiment_name: exp.name,
            repo,
            good,
            bad,
            metric,
            threshold: self.threshold / 100.0,
            results_dir: std::path::absolute(&self.results_dir).context("the results directory")?,
            params_dir: std::path::absolute(
                self.params_dir
                    .clone()
                    .unwrap_or_else(super::default_params_dir),
            )
            .context("the params directory")?,
            command: super::command_line(),
            patch,
            quiet: self.quiet,
            retry_timeouts: self.retry_timeouts,
        };
        Ok((settings, commits))
    }
}

pub fn run(a: BisectArgs) -> Result<()> {
    let (settings, commits) = a.common.settings()?;
    let reps = a.common.reps.map_or(Reps::Derived, Reps::Given);
    let quiet = a.common.quiet;
    if !quiet {
        eprintln!(
            "bisecting {} over {} first-parent commits",
            settings.metric,
            commits.len()
        );
    }
    let threshold = settings.threshold;
    let mut m = ExperimentMeasurer::new(settings);
    let report = bisect::bisect(&commits, &mut m, threshold, reps, &mut |line| {
        if !quiet {
            eprintln!("{line}")
        }
    })?;
    if m.s.patch.is_none() {
        remove_worktrees(&m.s, &report.commits, quiet);
    }
    match a.format {
        Format::Text => print!("{}", bisect::render_text(&report)),
        Format::Json => println!("{}", serde_json::to_string_pretty(&report)?),
    }
    Ok(())
}

/// Removes the worktrees of `commits` from the revision cache once the bisect is done:
/// a re-run reuses the run folders, and needs none of them. (bisect-step keeps them:
/// the next step of `git bisect run` builds the ends there again.)
fn remove_worktrees(s: &StepSettings, commits: &[String], quiet: bool) {
    let cache = revisions::RevCache::for_results(&s.results_dir);
    let mut removed = 0;
    for c in commits {
        match revisions::remove_worktree(&cache, &s.repo, c) {
            Ok(true) => removed += 1,
            Ok(false) => {}
            Err(e) => eprintln!(
                "warning: the worktree of {} stays: {e}",
                revisions::short(c)
            ),
        }
    }
    if !quiet && removed > 0 {
        eprintln!(
            "removed {removed} worktrees from {} (build logs and records stay)",
            cache.root.display()
        );
    }
}

pub fn run_step(a: StepArgs) -> Result<()> {
    let outcome = step(&a);
    match outcome {
        Ok((label, text)) => {
            println!("{text}");
            let code = match label {
                StepLabel::Good => 0,
                StepLabel::Bad => 1,
                StepLabel::CannotTell | StepLabel::Failed => 125,
            };
            if code == 0 {
                return Ok(());
            }
            Err(StepExit {
                code,
                message: format!("bisect-step: {label} (exit {code})"),
            }
            .into())
        }
        Err(e) => Err(StepExit {
            code: super::EXIT_STEP_ERROR,
            message: format!("Error: {e:#}\n(exit 128: `git bisect run` stops)"),
        }
        .into()),
    }
}

fn step(a: &StepArgs) -> Result<(StepLabel, String)> {
    let (settings, commits) = a.common.settings()?;
    let commit = revisions::resolve(&settings.repo, &a.rev)?;
    let metric = settings.metric.to_string();
    if commit == settings.good || commit == settings.bad {
        let label = if commit == settings.good {
            StepLabel::Good
        } else {
            StepLabel::Bad
        };
        return Ok((
            label,
            format!("{metric}: {} is the {label} end", revisions::short(&commit)),
        ));
    }
    let index = commits.iter().position(|c| *c == commit);
    if index.is_none() {
        eprintln!(
            "warning: {} is not on --bad's first-parent history (git bisect checks out \
             commits of merged branches unless started with `git bisect start \
             --first-parent`); judged all the same",
            revisions::short(&commit)
        );
    }
    // No ends measured to derive a cap from: the floor of a derived one.
    let k = a.common.reps.unwrap_or(bisect::sequential::MIN_CAP);
    let first = bisect::sequential::first_decidable(bisect::sequential::ALPHA) as u32;
    if k < first {
        bail!(
            "--reps {k}: no step can be labelled before {first} reps; give --reps {first} or more"
        );
    }
    // No ends measured beforehand: both run in every iteration.
    let limits = bisect::Limits {
        max_reps: k,
        rep_timeout_s: None,
        half_gap: None,
        known_spread: None,
    };
    let mut m = ExperimentMeasurer::new(settings);
    let mut r = judge::judge_step(&mut m, index.unwrap_or(0), &commit, &limits)?;
    if index.is_none() {
        r.note = Some("not on --bad's first-parent history: its place (#0) is not its own".into());
    }
    Ok((r.label, bisect::render_step(&r, &metric)))
}
