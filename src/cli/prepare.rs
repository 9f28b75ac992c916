//! `gapscope build-workers EXPERIMENT` (formerly `prepare`, a name `run --prepare` also
//! used for something else): builds every `rev` and `patch` variant's worker into
//! the revision cache, so that `gapscope run` on a host without cargo (a GPU host) runs
//! them. Prints one line per variant; exits 1 when any has no worker.

use std::path::PathBuf;

use anyhow::Result;

#[derive(clap::Args, Debug)]
pub struct PrepareArgs {
    /// Experiment TOML.
    experiment: PathBuf,
    /// The results folder whose cache (`<results>/.revs`, or $GAPSCOPE_REV_CACHE) gets
    /// the workers: the one the later run uses.
    #[arg(long, default_value = "results")]
    results_dir: PathBuf,
    /// Cargo features of the patch variants' workers (comma-separated; default: this
    /// build's). They must be those of the gapscope that will run them (e.g. supraseal).
    #[arg(long, value_delimiter = ',')]
    features: Option<Vec<String>>,
    /// No progress on stderr.
    #[arg(long, short)]
    quiet: bool,
}

pub fn run(a: PrepareArgs) -> Result<()> {
    let workers = crate::experiment::revs::prepare_workers(
        &a.experiment,
        &a.results_dir,
        a.features.as_deref(),
        !a.quiet,
    )?;
    if workers.is_empty() {
        println!(
            "{}: no rev or patch variant: its variants run in gapscope itself",
            a.experiment.display()
        );
        return Ok(());
    }
    let mut failed = 0;
    for w in &workers {
        match (&w.worker, &w.failed) {
            (Some(exe), None) => println!(
                "{}\t{}\t{}",
                w.variant,
                if w.reused { "cached" } else { "built" },
                exe.display()
            ),
            (_, why) => {
                failed += 1;
                println!(
                    "{}\tfailed\t{}",
                    w.variant,
                    why.as_deref()
                        .unwrap_or("no worker")
                        .replace('\n', "\n\t\t")
                );
            }
        }
    }
    if failed > 0 {
        anyhow::bail!(
            "{failed} of {} variants have no worker (reasons above); a run measures the others",
            workers.len()
        );
    }
    Ok(())
}
