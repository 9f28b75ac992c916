//! Command line: parses arguments into options and calls the library.

use std::path::PathBuf;

use anyhow::{Context, Result};
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
        /// Mirror every span as an NVTX range, so that Nsight Systems shows the phases
        /// (needs libnvToolsExt.so.1; meta.json says when it is unavailable).
        #[arg(long)]
        nvtx: bool,
    },
    /// Print the phase summary of a run folder.
    Summary { run_dir: PathBuf },
    /// Write a review report (report.md, SVG/PNG charts, Chrome trace) of a run folder.
    Report {
        run_dir: PathBuf,
        /// Report folder (default: reports/<experiment>-<run id>).
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
    /// Export a run folder's spans, GPU intervals and NVML samples for another tool.
    Export {
        run_dir: PathBuf,
        /// Chrome trace-event JSON (opens in Perfetto and chrome://tracing).
        #[arg(long, required = true)]
        chrome: bool,
        /// Only this rep (the `rep` column of runs.csv); default: every rep.
        #[arg(long, value_name = "N")]
        rep: Option<u32>,
        /// Output file (default: trace.json, or trace-rep<N>.json, in the run folder).
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
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
        #[arg(long)]
        nvtx: bool,
    },
    /// Check GPU telemetry on this machine with real kernels and copies (no prover
    /// backend needed); writes <out>/gpu-selftest/<run>/ and prints PASS/FAIL per check.
    #[command(name = "gpu-selftest", hide = true)]
    GpuSelftest {
        /// Where the run folder goes.
        #[arg(long, default_value = "results")]
        out: PathBuf,
        /// Measured reps (after one warm-up).
        #[arg(long, default_value_t = 3)]
        reps: u32,
        /// saxpy + spin kernel pairs per rep.
        #[arg(long, default_value_t = 4)]
        launches: u32,
        /// Iterations of the spin kernel (longer kernels: more NVML utilisation).
        #[arg(long, default_value_t = 100_000)]
        spin_iters: u32,
        /// f32 elements per buffer.
        #[arg(long, default_value_t = 1 << 24)]
        elements: u32,
        /// NVML sampling period.
        #[arg(long, default_value_t = crate::telemetry::DEFAULT_PERIOD_MS)]
        period_ms: u64,
        /// Mirror spans as NVTX ranges.
        #[arg(long)]
        nvtx: bool,
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
            nvtx,
        } => {
            let opts = experiment::RunOptions {
                results_dir,
                params_dir: params_dir.unwrap_or_else(default_params_dir),
                resume,
                progress: !quiet,
                command: std::env::args().collect(),
                nvtx,
            };
            let out = experiment::run(experiment.as_deref(), &opts)?;
            let data = crate::store::RunData::load(&out.dir)?;
            if !quiet {
                print!("{}", crate::summary::phase_table(&data));
            }
            for f in crate::telemetry::leak_flags(&data) {
                eprintln!("leak watch: {f}");
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
        Command::Report { run_dir, out } => {
            let input = crate::plot::PlotInput::load(&run_dir)?;
            let out = out.unwrap_or_else(|| crate::report::default_out_dir(&input));
            let done =
                crate::report::write_report(&input, &out, &std::env::args().collect::<Vec<_>>())
                    .with_context(|| format!("writing the report into {}", out.display()))?;
            for f in &done.chart_failures {
                eprintln!("warning: {f}");
            }
            println!("{}", done.report.display());
            Ok(())
        }
        Command::Export {
            run_dir,
            chrome: _,
            rep,
            out,
        } => {
            let input = crate::plot::PlotInput::load(&run_dir)?;
            let selection = rep.map_or(
                crate::export::RepSelection::All,
                crate::export::RepSelection::One,
            );
            let path = crate::export::export_to_file(
                &crate::export::chrome::ChromeTrace,
                &input,
                selection,
                out.as_deref(),
            )?;
            println!("{}", path.display());
            Ok(())
        }
        Command::Worker {
            run_dir,
            params_dir,
            variant,
            rep,
            iteration,
            warmup,
            nvtx,
        } => worker::worker_main(&worker::WorkerArgs {
            run_dir,
            params_dir,
            variant,
            rep,
            iteration,
            warmup,
            nvtx,
        }),
        Command::GpuSelftest {
            out,
            reps,
            launches,
            spin_iters,
            elements,
            period_ms,
            nvtx,
        } => {
            anyhow::ensure!(
                reps >= 1 && launches >= 1 && elements >= 1024 && period_ms >= 1,
                "need --reps ≥ 1, --launches ≥ 1, --elements ≥ 1024 and --period-ms ≥ 1"
            );
            let o = crate::telemetry::selftest::SelftestOptions {
                results_dir: out,
                reps,
                elements,
                launches,
                spin_iters,
                period: std::time::Duration::from_millis(period_ms),
                nvtx,
                command: std::env::args().collect(),
                ..Default::default()
            };
            let r = crate::telemetry::selftest::run(&o)?;
            for c in &r.checks {
                println!("{c}");
            }
            println!("{}", r.dir.display());
            anyhow::ensure!(
                r.passed(),
                "gpu-selftest: some checks failed (see the FAIL lines; the run folder keeps every row)"
            );
            Ok(())
        }
    }
}
