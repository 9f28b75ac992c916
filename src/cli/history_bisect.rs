//! `gapscope history bisect STEP`: the step's commit range handed to `gapscope bisect`,
//! with the metric and the stored experiment it was found on; the bisect's run folders
//! join the history.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::{open_existing, pct, Db, Format, Place};
use crate::bisect::{self, ExperimentMeasurer, Metric, Reps, StepSettings};
use crate::history::{import, schema, series, DetectOptions, Imported};
use crate::revisions;

fn first_variant(text: &str, name: &str) -> Result<String> {
    let mut doc: toml::Table =
        toml::from_str(text).context("the stored experiment does not parse")?;
    if let Some(toml::Value::Array(vs)) = doc.get_mut("variant") {
        if let Some(i) = vs
            .iter()
            .position(|v| v.get("name").and_then(|n| n.as_str()) == Some(name))
        {
            let v = vs.remove(i);
            vs.insert(0, v);
        }
    }
    Ok(toml::to_string(&doc)?)
}

#[allow(clippy::too_many_arguments)]
pub(super) fn bisect_step(
    db: &Db,
    id: &str,
    opts: &DetectOptions,
    experiment: Option<&Path>,
    threshold: Option<f64>,
    reps: Option<u32>,
    repo: &Path,
    results_dir: &Path,
    params_dir: Option<PathBuf>,
    format: Format,
) -> Result<()> {
    // The steps of `history bisect` in order, each using the ones before: the stored step,
    // the experiment and threshold to judge it by, the first-parent commits between its
    // sides, the bisect itself, then its runs into the history. Split, every part would
    // take the same ten arguments.
    let conn = open_existing(db)?;
    let step = series::find_step(&conn, id, opts)?;
    let metric = Metric::parse(&step.key.metric).map_err(|e| {
        anyhow::anyhow!(
            "{e}; bisect measures these, so step {id} on {} cannot be bisected",
            step.key.metric
        )
    })?;
    let (name, text) = match experiment {
        Some(p) => {
            let (exp, text) = crate::experiment::Experiment::load(p)?;
            super::super::note_params_dir(params_dir.is_some(), &exp);
            (exp.name, text)
        }
        None => {
            let (name, text, variant) = series::experiment_of(&conn, &step.key, &step.first_after)?
                .with_context(|| {
                    format!(
                        "no stored experiment copy for {}: pass --experiment FILE",
                        revisions::short(&step.first_after)
                    )
                })?;
            (name, first_variant(&text, &variant)?)
        }
    };
    let threshold = threshold.unwrap_or_else(|| (step.step.change.abs() * 50.0).min(5.0));
    let repo = revisions::toplevel(repo)?;
    // The database's commits reach git: only commit ids, never a name git would read as
    // something else (a branch, `HEAD~1`, an option).
    for (end, sha) in [
        ("last good", &step.last_before),
        ("first bad", &step.first_after),
    ] {
        if !crate::history::commits::is_commit_id(sha) {
            anyhow::bail!(
                "step {id}'s {end} commit in the history database is {:?}, not a commit id \
                 (7 to 64 hex digits): the database was edited or damaged; rebuild it with \
                 `gapscope history import`",
                crate::markup::terminal_safe(sha)
            );
        }
    }
    let good = revisions::resolve(&repo, &step.last_before)?;
    let bad = revisions::resolve(&repo, &step.first_after)?;
    let commits = revisions::first_parent_path(&repo, &good, &bad)?;
    eprintln!(
        "step {id}: {} {} between {} and {} ({} first-parent commits); bisecting with {name}",
        step.key.metric,
        pct(step.step.change),
        revisions::short(&good),
        revisions::short(&bad),
        commits.len()
    );
    let settings = StepSettings {
        experiment_text: text,
        experiment_name: name.clone(),
        repo,
        good: good.clone(),
        bad: bad.clone(),
        metric,
        threshold: threshold / 100.0,
        results_dir: std::path::absolute(results_dir).context("the results directory")?,
        params_dir: std::path::absolute(
            params_dir.unwrap_or_else(super::super::default_params_dir),
        )
        .context("the params directory")?,
        command: super::super::command_line(),
        patch: None,
        quiet: false,
        retry_timeouts: false,
    };
    let folder = settings.results_dir.join(format!(
        "{}-bisect-{}-{}",
        name.chars().take(40).collect::<String>(),
        &good[..8],
        &bad[..8]
    ));
    let mut m = ExperimentMeasurer::new(settings);
    let reps = reps.map_or(Reps::Derived, Reps::Given);
    let report = bisect::bisect(&commits, &mut m, threshold / 100.0, reps, &mut |line| {
        eprintln!("{line}")
    })?;
    match format {
        Format::Text => print!("{}", bisect::render_text(&report)),
        Format::Json => println!("{}", serde_json::to_string_pretty(&report)?),
    }
    // The bisect's measurements join the history.
    let dirs = import::run_folders(&folder);
    if !dirs.is_empty() {
        let place = Place {
            repo: m.s.repo.clone(),
            branch: None,
        };
        let mut conn = schema::open(&db.path())?;
        let out = import::import_all(&mut conn, &dirs, &place.context(), Default::default())?;
        let n = out
            .iter()
            .filter(|o| matches!(o, Imported::Stored { .. }))
            .count();
        eprintln!("{n} bisect run folders stored in {}", db.path().display());
    }
    Ok(())
}
