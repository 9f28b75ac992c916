//! Command line: parses arguments into options and calls the library.

use std::path::PathBuf;

use anyhow::Result;
use clap::{Parser, Subcommand};

use crate::experiment::{self, worker};

#[derive(Parser, Debug)]
#[command(
    name = "gapscope",
    version,
    about = "Find where a Groth16 prover's time went: run, diff, report."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run an experiment (variants × reps) and write results/<experiment>/<run>/.
    Run {
        /// Experiment TOML (omit with --resume).
        experiment: Option<PathBuf>,
        /// Continue a killed run in this folder; finished reps are kept.
        #[arg(long, value_name = "RUN_DIR")]
        resume: Option<PathBuf>,
        /// Where run folders go.
        #[arg(long, default_value = "results")]
        results_dir: PathBuf,
        /// Params cache (defaults to $GAPSCOPE_PARAMS_DIR or ./params).
        #[arg(long)]
        params_dir: Option<PathBuf>,
        /// No progress bar or summary table.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Print the phase summary of a run folder.
    Summary { run_dir: PathBuf },
    #[command(name = "__worker", hide = true)]
    Worker {
        #[arg(long)]
        run_dir: PathBuf,
        #[arg(long)]
        params_dir: PathBuf,
        #[arg(long)]
        variant: String,
        #[arg(long)]
        rep: u32,
        #[arg(long)]
        iteration: u32,
        #[arg(long)]
        warmup: bool,
    },
}

fn default_params_dir() -> PathBuf {
    std::env::var_os("GAPSCOPE_PARAMS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("params"))
}

pub fn run() -> Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Run {
            experiment,
            resume,
            results_dir,
            params_dir,
            quiet,
        } => {
            let opts = experiment::RunOptions {
                results_dir,
                params_dir: params_dir.unwrap_or_else(default_params_dir),
                resume,
                progress: !quiet,
                command: std::env::args().collect(),
            };
            let out = experiment::run(experiment.as_deref(), &opts)?;
            let data = crate::store::RunData::load(&out.dir)?;
            if !quiet {
                print!("{}", crate::summary::phase_table(&data));
            }
            println!("{}", out.dir.display());
            if out.failed > 0 {
                eprintln!(
                    "warning: {} rep(s) failed; see error column of runs.csv",
                    out.failed
                );
            }
            Ok(())
        }
        Command::Summary { run_dir } => {
            let data = crate::store::RunData::load(&run_dir)?;
            print!("{}", crate::summary::phase_table(&data));
            Ok(())
        }
        Command::Worker {
            run_dir,
            params_dir,
            variant,
            rep,
            iteration,
            warmup,
        } => worker::worker_main(&worker::WorkerArgs {
            run_dir,
            params_dir,
            variant,
            rep,
            iteration,
            warmup,
        }),
    }
}
