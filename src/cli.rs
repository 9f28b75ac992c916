//! Command line: parses arguments into options and calls the library.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

use crate::analysis;
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

/// Output formats of `gapscope diff`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DiffFormat {
    Terminal,
    Markdown,
    Json,
    Csv,
}

impl From<DiffFormat> for analysis::Format {
    fn from(f: DiffFormat) -> Self {
        match f {
            DiffFormat::Terminal => analysis::Format::Terminal,
            DiffFormat::Markdown => analysis::Format::Markdown,
            DiffFormat::Json => analysis::Format::Json,
            DiffFormat::Csv => analysis::Format::Csv,
        }
    }
}

/// "1", "1%" or "0.5 %" → 0.01, 0.01, 0.005.
fn parse_percent(s: &str) -> Result<f64, String> {
    let t = s.trim().trim_end_matches('%').trim();
    match t.parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..100.0).contains(&v) => Ok(v / 100.0),
        _ => Err(format!(
            "{s:?} is not a percentage in [0, 100), e.g. 1 or 0.5%"
        )),
    }
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
        /// (under `nsys profile -t cuda,nvtx`; without a profiler the ranges go to
        /// gapscope's CUPTI, as `nvtx` rows of gpu_activity.csv; meta.json says where, or
        /// why the mirror is unavailable).
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
    /// Compare a baseline against a candidate: phase table, statistics with verdicts,
    /// unattributed time in wrapper spans and where the time went.
    ///
    /// With one run folder, compares two of its variants (`baseline` and `candidate`
    /// when so named, else the first two). With two, compares a variant of the first
    /// (baseline) with one of the second (candidate; by default the same name).
    ///
    /// Exit status: 0 when the diff was printed, 1 on an error, 2 with
    /// --fail-on-regression when a row of the phase table is regressed.
    Diff {
        /// RUN_DIR, or RUN_A RUN_B.
        #[arg(required = true, num_args = 1..=2, value_name = "RUN_DIR")]
        runs: Vec<PathBuf>,
        /// Baseline variant (in the first run).
        #[arg(long)]
        baseline: Option<String>,
        /// Candidate variant (in the last run).
        #[arg(long)]
        candidate: Option<String>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = DiffFormat::Terminal)]
        format: DiffFormat,
        /// Smallest relative change a verdict reports, in percent ("1" or "1%").
        #[arg(long, value_name = "PERCENT", default_value = "1", value_parser = parse_percent)]
        noise_floor: f64,
        /// Significance level of the rank test; the interval has confidence 1 - alpha.
        #[arg(long, default_value_t = 0.05)]
        alpha: f64,
        /// Bootstrap resamples per metric.
        #[arg(long, default_value_t = 2000)]
        resamples: usize,
        /// Flag wrapper spans whose unattributed time exceeds this share, in percent.
        #[arg(long, value_name = "PERCENT", default_value = "5", value_parser = parse_percent)]
        gap_threshold: f64,
        /// Bootstrap seed (the output is reproducible for a given seed).
        #[arg(long)]
        seed: Option<u64>,
        /// Compare even when workloads, hosts or GPUs differ (the differences are listed).
        #[arg(long)]
        force: bool,
        /// Compare the sides as independent samples even when they are variants of one
        /// interleaved run (by default the reps of one iteration are paired, which
        /// cancels the machine's drift between iterations).
        #[arg(long)]
        unpaired: bool,
        /// Exit with status 2 when any row of the phase table is regressed (for CI); the
        /// diff is printed first and the regressed phases are named on stderr.
        #[arg(long)]
        fail_on_regression: bool,
    },
    /// Generates params into the cache (a run's child process: see obtain_params).
    #[command(name = "__params", hide = true)]
    Params {
        #[arg(long)]
        circuit: String,
        #[arg(long)]
        log2_constraints: u32,
        #[arg(long)]
        gadget: String,
        #[arg(long)]
        params_dir: PathBuf,
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
    /// Prove with bellperson's own `cuda-supraseal` wrapper (its synthesis, hand-off and
    /// SRS loader) on the circuit and params file `backend = "supraseal"` uses, and
    /// verify every proof: the control that tells upstream's behaviour from ours. Needs a
    /// build with `--features supraseal` and a GPU.
    #[command(name = "upstream-reference")]
    UpstreamReference {
        /// chain, porep or sha256.
        #[arg(long, default_value = "chain")]
        circuit: String,
        #[arg(long)]
        log2_constraints: u32,
        /// Bit-packing gadget of the porep circuit (lc or add_to_lc).
        #[arg(long, default_value = "lc")]
        gadget: String,
        #[arg(long, default_value_t = 1)]
        batch: usize,
        /// Prover calls (the first includes module load and JIT).
        #[arg(long, default_value_t = 2)]
        calls: u32,
        /// Params cache (defaults to $GAPSCOPE_PARAMS_DIR or ./params).
        #[arg(long)]
        params_dir: Option<PathBuf>,
    },
    /// Check the native prover's GPU MSMs (G1, G2) and NTTs against the CPU on random
    /// inputs and on all-zero, all-one and 0/1 scalars; prints one line per check and the
    /// JSON of all of them (--json). Needs a build with `--features cuda` and a GPU.
    #[command(name = "cuda-check")]
    CudaCheck {
        /// log2 sizes to check (comma-separated).
        #[arg(long, value_delimiter = ',', default_value = "10,16")]
        log2: Vec<u32>,
        /// Seed of the random inputs.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Write every check as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
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
        /// Mirror spans as NVTX ranges into CUPTI and check CUPTI's record of them
        /// against the spans (names, times, nesting).
        #[arg(long)]
        nvtx: bool,
    },
}

/// Exit status of `gapscope diff --fail-on-regression` when a phase regressed.
pub const EXIT_REGRESSED: i32 = 2;

/// `gapscope diff --fail-on-regression` found regressed phases: not a failure of the
/// tool, so `main` exits with [`EXIT_REGRESSED`] rather than 1.
#[derive(Debug, thiserror::Error)]
#[error("regressed: {} (phase table; --fail-on-regression)", phases.join(", "))]
pub struct Regressed {
    pub phases: Vec<String>,
}

fn default_params_dir() -> PathBuf {
    std::env::var_os("GAPSCOPE_PARAMS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("params"))
}

pub fn run() -> Result<()> {
    let cli = Cli::parse();
    if std::env::var_os("GAPSCOPE_LOG_SPANS").is_some_and(|v| v != "0") {
        crate::trace::set_mirror(Box::new(crate::trace::StderrSpanLog));
    }
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
        Command::Diff {
            runs,
            baseline,
            candidate,
            format,
            noise_floor,
            alpha,
            resamples,
            gap_threshold,
            seed,
            force,
            unpaired,
            fail_on_regression,
        } => {
            let load = |dir: &PathBuf| {
                crate::store::RunData::load(dir)
                    .with_context(|| format!("cannot read run folder {}", dir.display()))
            };
            let a = load(&runs[0])?;
            let b = runs.get(1).map(load).transpose()?;
            let cand_data = b.as_ref().unwrap_or(&a);
            let (bv, cv) =
                analysis::pick_variants(&a, b.as_ref(), baseline.as_deref(), candidate.as_deref())?;
            let defaults = analysis::DiffOptions::default();
            let opts = analysis::DiffOptions {
                noise_floor,
                alpha,
                bootstrap_resamples: resamples,
                gap_threshold,
                force,
                paired: !unpaired,
                seed: seed.unwrap_or(defaults.seed),
            };
            let diff = analysis::diff_runs(&a, &bv, cand_data, &cv, &opts)?;
            print!("{}", analysis::render(&diff, format.into()));
            let phases: Vec<String> = diff
                .phase_table
                .iter()
                .filter(|r| r.comparison.verdict == analysis::Verdict::Regressed)
                .map(|r| r.phase.clone())
                .collect();
            if fail_on_regression && !phases.is_empty() {
                return Err(Regressed { phases }.into());
            }
            Ok(())
        }
        Command::Params {
            circuit,
            log2_constraints,
            gadget,
            params_dir,
        } => generate_params(&circuit, log2_constraints, &gadget, &params_dir),
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
        Command::UpstreamReference {
            circuit,
            log2_constraints,
            gadget,
            batch,
            calls,
            params_dir,
        } => upstream_reference(
            &circuit,
            log2_constraints,
            &gadget,
            batch,
            calls,
            &params_dir.unwrap_or_else(default_params_dir),
        ),
        Command::CudaCheck { log2, seed, json } => cuda_check(&log2, seed, json.as_deref()),
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

/// An enum value given by its snake_case name; serde's error names the valid ones (as
/// experiment files get them).
fn parse_name<T: serde::de::DeserializeOwned>(flag: &str, s: &str) -> Result<T> {
    serde_json::from_value(serde_json::Value::String(s.to_string()))
        .map_err(|e| anyhow::anyhow!("--{flag} {s:?}: {e}"))
}

/// `gapscope __params`: loads or generates the params of one circuit into the cache and
/// prints how (a [`crate::prover::params::ParamsOrigin`] as JSON) on stdout.
fn generate_params(
    circuit: &str,
    log2: u32,
    gadget: &str,
    params_dir: &std::path::Path,
) -> Result<()> {
    use crate::prover::{params, CircuitInstance};
    let kind: crate::prover::CircuitKind = parse_name("circuit", circuit)?;
    let c = CircuitInstance::new(kind, log2, parse_name("gadget", gadget)?, 0)
        .map_err(anyhow::Error::msg)?;
    let key = params::ParamsKey::for_circuit(&c, kind.as_str(), log2)?;
    let (_, origin) = params::load_or_generate(params_dir, &c, &key)?;
    println!("{}", serde_json::to_string(&origin)?);
    Ok(())
}

fn upstream_reference(
    circuit: &str,
    log2: u32,
    gadget: &str,
    batch: usize,
    calls: u32,
    params_dir: &std::path::Path,
) -> Result<()> {
    let kind = parse_name("circuit", circuit)?;
    let gadget = parse_name("gadget", gadget)?;
    anyhow::ensure!(
        batch >= 1 && calls >= 1,
        "--batch and --calls must be at least 1"
    );
    reference(kind, log2, gadget, batch, calls, params_dir)
}

#[cfg(feature = "cuda")]
fn cuda_check(sizes: &[u32], seed: u64, json: Option<&std::path::Path>) -> Result<()> {
    use crate::prover::cuda::check;
    anyhow::ensure!(
        sizes.iter().all(|&l| (1..=24).contains(&l)),
        "--log2 sizes must be within 1..=24"
    );
    let mut all = Vec::new();
    for &lg in sizes {
        all.extend(check::msm_checks(lg, seed)?);
        all.extend(check::ntt_checks(lg, seed)?);
    }
    for c in &all {
        let pattern = c
            .pattern
            .map(|p| format!("{p:?}").to_lowercase())
            .unwrap_or_default();
        println!(
            "{}  {:<10} 2^{:<2} {:<8} gpu call {:>10}",
            if c.equal { "PASS" } else { "FAIL" },
            c.what,
            c.log2,
            pattern,
            format!("{:.3} ms", c.gpu_call_ns as f64 / 1e6)
        );
    }
    if let Some(p) = json {
        std::fs::write(p, serde_json::to_string_pretty(&all)?)
            .with_context(|| format!("cannot write {}", p.display()))?;
    }
    let failed = all.iter().filter(|c| !c.equal).count();
    anyhow::ensure!(
        failed == 0,
        "{failed} of {} checks differ from the CPU",
        all.len()
    );
    println!("all {} checks equal the CPU", all.len());
    Ok(())
}

#[cfg(not(feature = "cuda"))]
fn cuda_check(_: &[u32], _: u64, _: Option<&std::path::Path>) -> Result<()> {
    anyhow::bail!(
        "cuda-check needs the native prover: rebuild with `--features cuda` after \
         `eval \"$(scripts/cuda-toolkit.sh)\"` (README.md, GPU build)"
    )
}

#[cfg(feature = "supraseal")]
fn reference(
    kind: crate::prover::CircuitKind,
    log2: u32,
    gadget: crate::prover::Gadget,
    batch: usize,
    calls: u32,
    params_dir: &std::path::Path,
) -> Result<()> {
    let r =
        crate::prover::reference::run(kind, log2, gadget, batch, calls, params_dir, &mut |m| {
            eprintln!("upstream-reference: {m}")
        })?;
    println!("{}", serde_json::to_string_pretty(&r)?);
    let failed: Vec<String> = r
        .calls
        .iter()
        .filter_map(|c| c.failure.as_ref().map(|f| format!("call {}: {f}", c.call)))
        .collect();
    anyhow::ensure!(
        failed.is_empty(),
        "proofs did not verify: {}",
        failed.join("; ")
    );
    Ok(())
}

#[cfg(not(feature = "supraseal"))]
fn reference(
    _kind: crate::prover::CircuitKind,
    _log2: u32,
    _gadget: crate::prover::Gadget,
    _batch: usize,
    _calls: u32,
    _params_dir: &std::path::Path,
) -> Result<()> {
    anyhow::bail!(
        "upstream-reference needs the upstream prover: rebuild with `--features supraseal` after \
         `eval \"$(scripts/cuda-toolkit.sh)\"` (README.md, GPU build)"
    )
}
