//! `gapscope track EXPERIMENT`, for CI: run the experiment at HEAD, store the run in the
//! history, and judge HEAD against the last N measured commits on this host. A HEAD
//! that stands out (z ≥ the detector's suspect level against the commits since the
//! last step) is only suspected: it is measured again against its parent, both as `rev`
//! variants in one interleaved run on this host, and only a regression there is
//! confirmed (exit 4). Prints a Markdown summary for a pull-request comment.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::history::{step_line, Db, Place};
use crate::bisect::{Measurer, Metric, StepSettings};
use crate::experiment::{self, Experiment, RunOptions};
use crate::history::{self, schema, series, DetectOptions, Filter, StepVerdict};
use crate::revisions;
use crate::stats;

#[derive(clap::Args, Debug)]
pub struct TrackArgs {
    /// The experiment file run at HEAD.
    experiment: PathBuf,
    /// Metrics judged (SPAN.total, SPAN.self, SPAN.process_cpu or SPAN.COUNTER); default:
    /// the root's total, prove.total for the prover, program.total for a program.
    #[arg(long)]
    metric: Vec<String>,
    /// Measured commits of this host HEAD is compared with.
    #[arg(long, default_value_t = 20)]
    last: usize,
    /// Reps per side of the interleaved re-run of a suspected step.
    #[arg(long, default_value_t = 10)]
    confirm_reps: u32,
    /// Smallest change that counts, in percent (the re-run's verdict clears half).
    #[arg(long, default_value_t = 5.0)]
    threshold: f64,
    #[command(flatten)]
    db: Db,
    #[command(flatten)]
    place: Place,
    #[arg(long, default_value = "results")]
    results_dir: PathBuf,
    #[arg(long)]
    params_dir: Option<PathBuf>,
    /// Write the Markdown summary to this file too.
    #[arg(long)]
    summary: Option<PathBuf>,
}

/// What became of one metric at HEAD.
enum Judged {
    /// Too few measured commits before HEAD to judge.
    TooFew(usize),
    Steady {
        z: f64,
        n: usize,
    },
    /// Suspected, then measured against the parent.
    ReRun {
        z: f64,
        verdict: String,
        change: Option<f64>,
        dir: PathBuf,
        confirmed: bool,
    },
    /// Suspected, but no parent to measure against (or it could not be measured).
    Unconfirmed {
        z: f64,
        why: String,
    },
}

/// The metric judged when none is named: the total of the root the experiment's runs
/// record (the prover's `prove`, a program's `program`).
fn default_metric(exp: &Experiment) -> String {
    let root = match exp.workload.command {
        Some(_) => crate::experiment::command::rows::ROOT,
        None => crate::prover::spans::PROVE,
    };
    format!("{root}.total")
}

pub fn run(a: TrackArgs) -> Result<()> {
    // One function for `track`: HEAD run and stored, then each metric's series that ends at
    // HEAD judged against the commits before it (re-run against the parent where it looks
    // like a step), then the summary. The table's lines, the notes and the confirmed steps
    // grow across the loop over metrics and are written at its end.
    if let Some(p) = &a.summary {
        // Before the runs, which take minutes: a path that cannot be written fails now.
        crate::fsx::check_target(p).map_err(|e| anyhow::anyhow!("--summary {e}"))?;
    }
    let exp = Experiment::load(&a.experiment)?.0;
    super::note_params_dir(a.params_dir.is_some(), &exp);
    let metric_names: Vec<String> = if a.metric.is_empty() {
        vec![default_metric(&exp)]
    } else {
        a.metric.clone()
    };
    let metrics: Vec<Metric> = metric_names
        .iter()
        .map(|m| Metric::parse(m).map_err(anyhow::Error::msg))
        .collect::<Result<_>>()?;
    let params_dir = std::path::absolute(
        a.params_dir
            .clone()
            .unwrap_or_else(super::default_params_dir),
    )?;
    let results_dir = std::path::absolute(&a.results_dir)?;
    let opts = RunOptions {
        results_dir: results_dir.clone(),
        params_dir: params_dir.clone(),
        resume: None,
        progress: true,
        command: super::command_line(),
        nvtx: false,
        debug: Default::default(),
        until_decided: None,
        stop_when: None,
    };
    let out = experiment::run(Some(&a.experiment), &opts).context("the run at HEAD")?;
    super::history::store(&a.db, &a.place, std::slice::from_ref(&out.dir), None)?;
    let data = crate::store::RunData::load(&out.dir)?;
    let head = data
        .meta
        .git
        .revision
        .clone()
        .context("the run names no git revision: run track inside the repository's checkout")?;
    let host = history::host::of(&data.meta);
    let conn = schema::open(&a.db.path())?;
    let (exp, text) = Experiment::load(&a.experiment)?;
    let repo = revisions::toplevel(&a.place_repo())?;
    let detect = DetectOptions::default();
    let mut lines = vec![
        format!("### gapscope track: {} at `{}`", exp.name, revisions::short(&head)),
        String::new(),
        format!(
            "Host `{}` ({}, {}); run `{}`; compared with the last {} measured commits of this host.",
            host.id,
            host.cpu_model,
            host.gpu_model,
            out.dir.display(),
            a.last
        ),
        String::new(),
        "| metric | series | HEAD | before | z | verdict |".into(),
        "|---|---|---|---|---|---|".into(),
    ];
    let mut notes = Vec::new();
    let mut confirmed = Vec::new();
    for metric in &metrics {
        let filter = Filter {
            metric: Some(metric.to_string()),
            host: Some(host.id.clone()),
            last: Some(a.last + 1),
            ..Default::default()
        };
        for s in series::load(&conn, &filter)? {
            if s.points.last().map(|p| p.sha.as_str()) != Some(head.as_str()) {
                continue;
            }
            // The commits before HEAD alone give the noise and the steps, so that HEAD's
            // own jump does not widen the noise it is judged against.
            let mut prior = s.clone();
            let head_point = prior.points.pop().expect("ends at HEAD");
            let head_value = stats::median(&head_point.values).unwrap_or(f64::NAN);
            let analysed = series::analyse(prior, &detect);
            for st in analysed
                .steps
                .iter()
                .filter(|st| st.step.verdict != StepVerdict::Suspected)
            {
                notes.push(format!("- earlier step in this window: {}", step_line(st)));
            }
            let last_step = analysed
                .steps
                .iter()
                .filter(|st| st.step.verdict != StepVerdict::Suspected)
                .map(|st| st.step.index)
                .max()
                .unwrap_or(0);
            let before: Vec<f64> = analysed.detection.medians[last_step..].to_vec();
            let before_median = stats::median(&before).unwrap_or(f64::NAN);
            let judged = if before.len() < detect.min_segment {
                Judged::TooFew(before.len())
            } else {
                let sigma = analysed.detection.noise;
                let se = sigma * (std::f64::consts::FRAC_PI_2 / before.len() as f64 + 1.0).sqrt();
                let z = (head_value - before_median) / se;
                if z < detect.suspect_z {
                    Judged::Steady { z, n: before.len() }
                } else {
                    confirm(
                        &a,
                        metric,
                        &text,
                        &exp.name,
                        &repo,
                        &head,
                        &results_dir,
                        &params_dir,
                        z,
                    )
                }
            };
            let series_label = format!("{} [{}]", s.key.workload, s.key.variant_key);
            let (z_text, verdict) = match &judged {
                Judged::TooFew(k) => (
                    "–".to_string(),
                    format!("{k} commits before HEAD: too few to judge"),
                ),
                Judged::Steady { z, n } => {
                    (format!("{z:.1}"), format!("steady (against {n} commits)"))
                }
                Judged::ReRun {
                    z,
                    verdict,
                    change,
                    dir,
                    confirmed: c,
                } => {
                    notes.push(format!("- re-run against the parent: `{}`", dir.display()));
                    let ch = change
                        .map(|c| format!(" {:+.1}%", c * 100.0))
                        .unwrap_or_default();
                    if *c {
                        confirmed.push(format!("{metric} ({series_label})"));
                        (
                            format!("{z:.1}"),
                            format!("**regressed, confirmed**: parent → HEAD {verdict}{ch}"),
                        )
                    } else {
                        (
                            format!("{z:.1}"),
                            format!("suspected, not confirmed: parent → HEAD {verdict}{ch}"),
                        )
                    }
                }
                Judged::Unconfirmed { z, why } => {
                    (format!("{z:.1}"), format!("suspected, not re-run: {why}"))
                }
            };
            lines.push(format!(
                "| `{metric}` | {series_label} | {head_value:.4} | {before_median:.4} | {z_text} | {verdict} |"
            ));
        }
    }
    if lines.len() == 6 {
        lines.push(format!(
            "| – | – | – | – | – | no stored series of {} on this host ends at HEAD |",
            metric_names.join(", ")
        ));
    }
    if !notes.is_empty() {
        lines.push(String::new());
        lines.extend(notes);
    }
    let md = lines.join("\n") + "\n";
    print!("{md}");
    if let Some(p) = &a.summary {
        crate::fsx::write_file(p, md.as_bytes())?;
    }
    if !confirmed.is_empty() {
        return Err(super::Regressed { phases: confirmed }.into());
    }
    Ok(())
}

impl TrackArgs {
    fn place_repo(&self) -> PathBuf {
        self.place.repo().to_path_buf()
    }
}

/// Measures HEAD against its parent, interleaved, as `rev` variants of one run (the
/// bisect's own measurement of a pair), and stores that run too.
#[allow(clippy::too_many_arguments)]
fn confirm(
    a: &TrackArgs,
    metric: &Metric,
    text: &str,
    name: &str,
    repo: &Path,
    head: &str,
    results_dir: &Path,
    params_dir: &Path,
    z: f64,
) -> Judged {
    let parent = match revisions::resolve(repo, &format!("{head}^")) {
        Ok(p) => p,
        Err(e) => {
            return Judged::Unconfirmed {
                z,
                why: format!("no parent of HEAD ({e})"),
            }
        }
    };
    let settings = StepSettings {
        experiment_text: text.to_string(),
        experiment_name: name.to_string(),
        repo: repo.to_path_buf(),
        good: parent.clone(),
        bad: head.to_string(),
        metric: metric.clone(),
        threshold: a.threshold / 100.0,
        results_dir: results_dir.to_path_buf(),
        params_dir: params_dir.to_path_buf(),
        command: super::command_line(),
        patch: None,
        quiet: false,
        retry_timeouts: false,
    };
    let mut m = crate::bisect::ExperimentMeasurer::new(settings);
    let limits = crate::bisect::Limits {
        max_reps: a.confirm_reps,
        rep_timeout_s: None,
        half_gap: None,
        known_spread: None,
    };
    match m.measure_pair(&parent, head, &limits) {
        Ok(crate::bisect::PairRun {
            comparison: c,
            run_dir: dir,
            ..
        }) => {
            let _ = super::history::store(&a.db, &a.place, std::slice::from_ref(&dir), None);
            let regressed = c.verdict == crate::analysis::Verdict::Regressed;
            Judged::ReRun {
                z,
                verdict: c.verdict.to_string(),
                change: c.relative,
                dir,
                confirmed: regressed,
            }
        }
        Err(e) => Judged::Unconfirmed {
            z,
            why: format!("{e:#}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn the_default_metric_is_the_total_of_the_root_the_runs_record() {
        let exp = |workload: &str| {
            let text = format!("name = \"e\"\n[workload]\n{workload}\n[[variant]]\nname = \"a\"\n");
            Experiment::parse(&text, Path::new("e.toml")).unwrap()
        };
        assert_eq!(
            default_metric(&exp("circuit = \"porep\"\nlog2_constraints = 10")),
            "prove.total"
        );
        assert_eq!(
            default_metric(&exp("command = [\"./bench\"]")),
            "program.total"
        );
    }
}
