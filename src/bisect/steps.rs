//! The real [`Measurer`]: each measurement is an experiment run of `rev` variants. The
//! experiment is the one given, with its `[run] reps` set to the cap (and its
//! `rep_timeout_s`, unless it gives one, to the bisect's), and its variants
//! replaced by one per commit measured (`good`, `step` and `bad`, or `base` and
//! `cand`), each with the knobs of the given experiment's first variant and its
//! `rev` set to the commit. Its run folder is
//! `<results>/<experiment>-bisect-<good>-<bad>/<run id>/`; a re-run finds a finished
//! folder of the same generated experiment (by its hash) there and reuses it. A run
//! stops before its cap once it is decided ([`super::sequential`]), the run folder
//! watched after every rep ([`StopWhen`]), which prints a line per iteration on stderr;
//! a step also stops at its commit's first timed-out rep, or when its first reps failed.
//! Revisions are built once per commit in the revision cache (`<results>/.revs/`).
//! With `--patch CRATE=PATH` the commits are a dependency's, and each variant is a
//! `patch` variant of this gapscope at that commit (its worker cached per commit too).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::judge::{Limits, Measurer, PairRun, StepRun};
use super::sequential::{self, KnownSpread, PairSequence, Position};
use super::Metric;
use crate::analysis::{self, Comparison, DiffOptions};
use crate::experiment::{self, RunOptions, StopWhen};
use crate::revisions::short;
use crate::store::{self, RepStatus, RunData, RunRow};

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
    /// No line per rep on stderr.
    pub quiet: bool,
    /// A timed-out rep of a commit is a failed rep like any other, instead of the end
    /// of its step (`--retry-timeouts`).
    pub retry_timeouts: bool,
}

pub struct ExperimentMeasurer {
    pub s: StepSettings,
    /// Commits measured by this bisect so far (a rep of theirs ran): a run of a command
    /// workload's commits that all ran before needs no warm-up (each rep is a process of
    /// its own; what a warm-up warms, the files and caches of the machine, the earlier
    /// run warmed).
    ran: std::collections::HashSet<String>,
}

impl ExperimentMeasurer {
    pub fn new(s: StepSettings) -> ExperimentMeasurer {
        ExperimentMeasurer {
            s,
            ran: Default::default(),
        }
    }

    /// The experiment measures a command (`[workload] command`), not gapscope's prover.
    fn command_workload(&self) -> bool {
        toml::from_str::<toml::Table>(&self.s.experiment_text)
            .is_ok_and(|doc| doc.get("workload").and_then(|w| w.get("command")).is_some())
    }

    /// Folder of this bisect's run folders.
    fn name(&self) -> String {
        let base: String = self.s.experiment_name.chars().take(40).collect();
        format!("{base}-bisect-{}-{}", &self.s.good[..8], &self.s.bad[..8])
    }

    /// The generated experiment: `roles` (variant name, commit), at most
    /// `limits.max_reps` reps; `warmups` replaces the experiment's where given.
    fn experiment_text(
        &self,
        roles: &[(&str, &str)],
        limits: &Limits,
        warmups: Option<u32>,
    ) -> Result<String> {
        let mut doc: toml::Table =
            toml::from_str(&self.s.experiment_text).context("the experiment does not parse")?;
        doc.insert("name".into(), toml::Value::String(self.name()));
        let run = doc
            .entry("run")
            .or_insert_with(|| toml::Value::Table(Default::default()));
        let run = run.as_table_mut().context("[run] is not a table")?;
        run.insert("reps".into(), toml::Value::Integer(limits.max_reps as i64));
        if let Some(t) = limits.rep_timeout_s {
            run.insert("rep_timeout_s".into(), toml::Value::Integer(t as i64));
        }
        if let Some(w) = warmups {
            run.insert("warmups".into(), toml::Value::Integer(w as i64));
        }
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
                            toml::Value::String(store::paths::from_current(dir)),
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
                            toml::Value::String(store::paths::from_current(&self.s.repo)),
                        );
                    }
                }
                toml::Value::Table(t)
            })
            .collect();
        doc.insert("variant".into(), toml::Value::Array(variants));
        Ok(toml::to_string(&doc)?)
    }

    /// The run folder of `text`: a finished one from before, or a new run, ended early
    /// when `stop` says.
    fn run(&self, text: &str, what: &str, stop: Option<StopWhen>) -> Result<PathBuf> {
        let sha = store::experiment_sha256(text);
        let exp_dir = self.s.results_dir.join(self.name());
        if let Some(dir) = finished_run(&exp_dir, &sha) {
            self.say(&format!("  {what}: reusing {}", dir.display()));
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
            stop_when: stop,
        };
        let out = experiment::run(Some(&file), &opts).with_context(|| format!("{what}: run"))?;
        self.say(&format!("  {what}: measured {}", out.dir.display()));
        Ok(out.dir)
    }

    /// A line on stderr, unless quiet.
    fn say(&self, line: &str) {
        if !self.s.quiet {
            eprintln!("{line}");
        }
    }

    /// The metric's per-rep logs of variant `name` in `data`.
    fn logs(&self, data: &RunData, name: &str) -> Vec<(u32, f64)> {
        let m = &self.s.metric;
        analysis::metric_logs(data, name, &m.span, &m.measure)
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
        .command_workload
        .as_ref()?
        .variants
        .get(name)?
        .build
        .as_ref()?;
    (!build.ok).then(|| {
        let commit = v.revision.as_ref().map_or("", |r| short(&r.commit));
        // The log as meta.json names it: relative to the run folder by default.
        let build = store::BuildMeta {
            log: data
                .meta
                .run_file_path(&data.dir, &build.log)
                .display()
                .to_string(),
            ..build.clone()
        };
        format!(
            "revision {commit} did not build\n{}",
            experiment::command::build_failure(&build)
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
    fn probe(&mut self, good: &str) -> Result<()> {
        let limits = Limits {
            max_reps: 1,
            rep_timeout_s: None,
            half_gap: None,
            known_spread: None,
        };
        let text = self.experiment_text(&[("good", good)], &limits, Some(0))?;
        let dir = self.run(
            &text,
            &format!("{} ×1 (the metric's check)", short(good)),
            None,
        )?;
        let data = RunData::load(&dir)?;
        if let Some(why) = variant_failure(&data, "good") {
            bail!("the good end {} cannot be measured: {why}", short(good));
        }
        if self.logs(&data, "good").is_empty() {
            bail!("{}", missing_metric(&data, &self.s.metric));
        }
        self.ran.insert(good.to_string());
        Ok(())
    }

    fn given_rep_timeout(&self) -> Option<u64> {
        let doc: toml::Table = toml::from_str(&self.s.experiment_text).ok()?;
        let t = doc.get("run")?.get("rep_timeout_s")?.as_integer()?;
        u64::try_from(t).ok()
    }

    fn measure_step(&mut self, commit: &str, limits: &Limits) -> Result<StepRun> {
        let (good, bad) = (self.s.good.clone(), self.s.bad.clone());
        let mut roles = vec![("good", good.as_str()), ("step", commit)];
        if limits.half_gap.is_none() {
            roles.push(("bad", bad.as_str()));
        }
        let text = self.experiment_text(&roles, limits, None)?;
        let what = format!("{} (at most {} reps)", short(commit), limits.max_reps);
        let watch = self.step_watch(short(commit), limits);
        let dir = self.run(&text, &what, Some(watch))?;
        let data = RunData::load(&dir)?;
        let ends: Vec<&str> = roles.iter().map(|r| r.0).filter(|r| *r != "step").collect();
        for &end in &ends {
            if let Some(why) = variant_failure(&data, end) {
                bail!("the {end} end cannot be measured: {why}");
            }
        }
        let failed = |why| {
            Ok(StepRun::Failed {
                why,
                run_dir: Some(dir.clone()),
            })
        };
        if let Some(why) = variant_failure(&data, "step") {
            return failed(why);
        }
        if let Some(why) = timed_out(&data.runs, "step").filter(|_| !self.s.retry_timeouts) {
            return failed(why);
        }
        let vs_good = match self.compare(&data, "good", "step") {
            Ok(c) => c,
            Err(why) => return failed(why),
        };
        let vs_bad = match ends
            .contains(&"bad")
            .then(|| self.compare(&data, "bad", "step"))
        {
            Some(Err(why)) => return failed(why),
            Some(Ok(c)) => Some(c),
            None => None,
        };
        let position = self.position(&data, limits);
        self.ran.extend(roles.iter().map(|r| r.1.to_string()));
        let names: Vec<&str> = roles.iter().map(|r| r.0).collect();
        Ok(StepRun::Measured {
            vs_good,
            vs_bad,
            position,
            reps: complete_iterations(&data.runs, &names) as u32,
            run_dir: dir,
        })
    }

    fn measure_pair(&mut self, base: &str, cand: &str, limits: &Limits) -> Result<PairRun> {
        let warm = self.command_workload() && self.ran.contains(base) && self.ran.contains(cand);
        let warmups = warm.then_some(0);
        let text = self.experiment_text(&[("base", base), ("cand", cand)], limits, warmups)?;
        let what = format!(
            "{} → {} (at most {} reps{})",
            short(base),
            short(cand),
            limits.max_reps,
            if warm {
                "; no warm-up: both ran earlier in this bisect"
            } else {
                ""
            }
        );
        let watch = self.pair_watch(&format!("{} → {}", short(base), short(cand)), limits);
        let dir = self.run(&text, &what, Some(watch))?;
        let data = RunData::load(&dir)?;
        for (role, commit) in [("base", base), ("cand", cand)] {
            if let Some(why) = variant_failure(&data, role) {
                bail!("{} cannot be measured: {why}", short(commit));
            }
        }
        let comparison = self
            .compare(&data, "base", "cand")
            .map_err(anyhow::Error::msg)?;
        self.ran.extend([base.to_string(), cand.to_string()]);
        let slowest = (data.runs.iter())
            .filter(|r| r.status == RepStatus::Ok)
            .map(|r| r.wall_ns)
            .max()
            .unwrap_or(0);
        Ok(PairRun {
            comparison,
            sequence: self.pair_sequence(&data, limits.known_spread.as_ref()),
            run_dir: dir,
            slowest_rep: Duration::from_nanos(slowest),
        })
    }
}

/// What a watched run has seen so far.
struct Seen {
    started: Instant,
    iterations: usize,
}

impl ExperimentMeasurer {
    /// Where the step's commit sits: against the good end and `half_gap`, or between
    /// both ends of each iteration.
    fn position(&self, data: &RunData, limits: &Limits) -> Option<Position> {
        let logs = |n| self.logs(data, n);
        let p = match limits.half_gap {
            Some(h) => Position::against_good(&logs("good"), &logs("step"), h),
            None => Position::of(&logs("good"), &logs("step"), &logs("bad")),
        };
        p.map(|p| p.with_known(limits.known_spread.as_ref()))
    }

    /// Ends a step's run once its commit is labelled, at its first timed-out rep
    /// (unless retried), or when its first two reps failed; a line per iteration.
    fn step_watch(&self, commit: &str, limits: &Limits) -> StopWhen {
        let me = self.clone_for_watch();
        let commit = commit.to_string();
        let (max_reps, limits) = (limits.max_reps, *limits);
        let names: &'static [&'static str] = match limits.half_gap {
            Some(_) => &["good", "step"],
            None => &["good", "step", "bad"],
        };
        let seen = Mutex::new(Seen {
            started: Instant::now(),
            iterations: 0,
        });
        StopWhen(Arc::new(move |dir: &Path, rows: &[RunRow]| {
            if let Some(why) = step_failing(rows, me.s.retry_timeouts) {
                me.say(&format!("  {commit}: {why}: stopped"));
                return true;
            }
            let Some((n, elapsed)) = next_iteration(&seen, rows, names) else {
                return false;
            };
            let Ok(data) = RunData::load(dir) else {
                return false;
            };
            let Some(p) = me.position(&data, &limits) else {
                return false;
            };
            let left = p.iterations_to_decide().unwrap_or(max_reps as usize);
            me.say(&format!(
                "  {commit}: {n}/{max_reps} reps: {}{}",
                p.describe(),
                time_left(elapsed, n, left, max_reps)
            ));
            p.label().is_some()
        }))
    }

    /// Ends a run of two commits once the sequence of their log ratios lies beyond the
    /// noise floor or inside it; a line per iteration.
    fn pair_watch(&self, what: &str, limits: &Limits) -> StopWhen {
        let me = self.clone_for_watch();
        let what = what.to_string();
        let (max_reps, known) = (limits.max_reps, limits.known_spread);
        let floor = self.s.threshold / 2.0;
        let seen = Mutex::new(Seen {
            started: Instant::now(),
            iterations: 0,
        });
        StopWhen(Arc::new(move |dir: &Path, rows: &[RunRow]| {
            let Some((n, elapsed)) = next_iteration(&seen, rows, &["base", "cand"]) else {
                return false;
            };
            let Ok(data) = RunData::load(dir) else {
                return false;
            };
            let Some(seq) = me.pair_sequence(&data, known.as_ref()) else {
                return false;
            };
            let left = seq.iterations_to_decide(floor).unwrap_or(max_reps as usize);
            me.say(&format!(
                "  {what}: {n}/{max_reps} reps: {}{}",
                seq.describe(),
                time_left(elapsed, n, left, max_reps)
            ));
            seq.verdict(floor).is_some()
        }))
    }

    /// The sequence of a pair run's per-iteration log ratios (cand − base).
    fn pair_sequence(&self, data: &RunData, known: Option<&KnownSpread>) -> Option<PairSequence> {
        let r = sequential::ratios(&self.logs(data, "base"), &self.logs(data, "cand"));
        PairSequence::of(&r, known)
    }

    /// What a watch needs of the measurer (it outlives no run, but is `'static`).
    fn clone_for_watch(&self) -> ExperimentMeasurer {
        ExperimentMeasurer::new(self.s.clone())
    }
}

/// "; about 12 s left" at the time per iteration so far, to the iteration that would
/// decide (`left`, at most the cap).
fn time_left(elapsed: Duration, n: usize, left: usize, max_reps: u32) -> String {
    let to_go = left.clamp(n, max_reps as usize) - n;
    if to_go == 0 || n == 0 {
        return String::new();
    }
    let secs = elapsed.as_secs_f64() / n as f64 * to_go as f64;
    let time = if secs < 1.0 {
        "under a second".to_string()
    } else {
        format!("about {secs:.0} s")
    };
    let reps = if to_go == 1 { "rep" } else { "reps" };
    format!("; {time} left ({to_go} more {reps} at this spread)")
}

/// The complete iterations now, and the time since the watch began, when one more
/// completed since it last looked.
fn next_iteration(
    seen: &Mutex<Seen>,
    rows: &[RunRow],
    names: &[&str],
) -> Option<(usize, Duration)> {
    let n = complete_iterations(rows, names);
    let mut s = seen.lock().unwrap_or_else(|e| e.into_inner());
    if n <= s.iterations {
        return None;
    }
    s.iterations = n;
    Some((n, s.started.elapsed()))
}

/// Iterations in which every variant of `names` has a measured rep (whatever its
/// status).
fn complete_iterations(rows: &[RunRow], names: &[&str]) -> usize {
    let of = |name: &str| -> std::collections::BTreeSet<u32> {
        (rows.iter())
            .filter(|r| !r.warmup && r.variant == name)
            .map(|r| r.iteration)
            .collect()
    };
    let mut sets = names.iter().map(|n| of(n));
    let Some(first) = sets.next() else { return 0 };
    sets.fold(first, |a, s| a.intersection(&s).copied().collect())
        .len()
}

/// Why a step's run ends before its commit is judged: a rep that timed out (unless
/// `retry`), a commit that did not build, or two failed reps and none that succeeded.
fn step_failing(rows: &[RunRow], retry: bool) -> Option<String> {
    if !retry {
        if let Some(why) = timed_out(rows, "step") {
            return Some(why);
        }
    }
    // A commit that did not build fails every rep, its warm-up first.
    let unbuilt = |e: &str| e.contains("did not build") || e.contains("build failed");
    let of_step = || rows.iter().filter(|r| r.variant == "step");
    if let Some(r) = of_step().find(|r| r.status == RepStatus::Failed && unbuilt(&r.error)) {
        return Some(format!("rep {} failed: it did not build", r.rep));
    }
    let step: Vec<&RunRow> = of_step().filter(|r| !r.warmup).collect();
    let failed = step
        .iter()
        .filter(|r| r.status == RepStatus::Failed)
        .count();
    (failed == step.len() && failed >= 2)
        .then(|| format!("{failed} failed reps and none that succeeded"))
}

/// "timed out after 10 s" with the rep's error, for the first rep of `variant` (warm-up
/// or measured) that outlived rep_timeout_s.
fn timed_out(rows: &[RunRow], variant: &str) -> Option<String> {
    let r = (rows.iter()).find(|r| {
        r.variant == variant && r.status == RepStatus::Failed && r.error.contains("(rep_timeout_s)")
    })?;
    let secs = (r.error.split(" s (rep_timeout_s)").next())
        .and_then(|head| head.rsplit(' ').next())
        .map_or("rep_timeout_s".to_string(), |n| format!("{n} s"));
    Some(format!(
        "timed out after {secs} (rep {}): {}",
        r.rep, r.error
    ))
}

/// The error of a metric that is not in the good end's rep: the spans it has, and the
/// whole-process metric of a program that reports none.
fn missing_metric(data: &RunData, metric: &Metric) -> String {
    let mut names: Vec<&str> = Vec::new();
    for s in data.spans.iter().filter(|s| s.variant == "good") {
        if !names.contains(&s.name.as_str()) {
            names.push(&s.name);
        }
    }
    let root = data.meta.phases().root.clone();
    let failed: Vec<&str> = (data.runs.iter())
        .filter(|r| r.status == RepStatus::Failed)
        .map(|r| r.error.as_str())
        .collect();
    if let Some(e) = failed.first() {
        return format!("the good end's rep failed, so {metric} cannot be checked: {e}");
    }
    format!(
        "metric {metric} is not in the good end's rep ({}): its spans are {} (measures: total, \
         self, process_cpu, or a counter column); the whole run of the program is \
         {root}.total. Checked before any other commit was built",
        data.dir.display(),
        if names.is_empty() {
            "none".to_string()
        } else {
            names.join(", ")
        }
    )
}

#[cfg(test)]
#[path = "steps_tests.rs"]
mod tests;
