//! `gapscope gpu-selftest` (hidden): GPU telemetry checked with real kernels and copies.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;

use crate::telemetry::selftest::{self, SelftestOptions};

#[derive(clap::Args, Debug)]
pub struct SelftestArgs {
    /// Where the run folder goes (`<DIR>/gpu-selftest/<run>/`), as `gapscope run`'s.
    #[arg(long, value_name = "DIR", default_value = "results", alias = "out")]
    results_dir: PathBuf,
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
    /// NVML sampling period, as an experiment's `[run] telemetry_period_ms`.
    #[arg(long, value_name = "MS", default_value_t = crate::telemetry::DEFAULT_PERIOD_MS, alias = "period-ms")]
    telemetry_period_ms: u64,
    /// Mirror spans as NVTX ranges into CUPTI and check CUPTI's record of them
    /// against the spans (names, times, nesting).
    #[arg(long)]
    nvtx: bool,
}

impl SelftestArgs {
    fn options(self) -> Result<SelftestOptions> {
        anyhow::ensure!(
            self.reps >= 1
                && self.launches >= 1
                && self.elements >= 1024
                && self.telemetry_period_ms >= 1,
            "need --reps ≥ 1, --launches ≥ 1, --elements ≥ 1024 and --telemetry-period-ms ≥ 1"
        );
        Ok(SelftestOptions {
            results_dir: self.results_dir,
            reps: self.reps,
            elements: self.elements,
            launches: self.launches,
            spin_iters: self.spin_iters,
            period: Duration::from_millis(self.telemetry_period_ms),
            nvtx: self.nvtx,
            command: super::command_line(),
            ..Default::default()
        })
    }
}

pub fn run(a: SelftestArgs) -> Result<()> {
    let r = selftest::run(&a.options()?)?;
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
