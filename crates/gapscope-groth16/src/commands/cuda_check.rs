//! `gapscope cuda-check`: the native prover's GPU MSMs and NTTs against the CPU.

use std::path::PathBuf;

use anyhow::Result;

#[derive(clap::Args, Debug)]
pub struct CudaCheckArgs {
    /// log2 of the vector sizes to check (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "10,16", alias = "log2")]
    log2_sizes: Vec<u32>,
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write every check as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

pub fn run(a: CudaCheckArgs) -> Result<()> {
    if let Some(p) = &a.json {
        // Before the checks, which take minutes: a path that cannot be written fails now
        // (`-` too: stdout carries the table of checks).
        crate::fsx::check_target(p).map_err(|e| anyhow::anyhow!("--json {e}"))?;
    }
    run_check(&a.log2_sizes, a.seed, a.json.as_deref())
}

#[cfg(feature = "cuda")]
pub fn run_check(sizes: &[u32], seed: u64, json: Option<&std::path::Path>) -> Result<()> {
    use crate::cuda::check;
    anyhow::ensure!(
        sizes.iter().all(|&l| (1..=24).contains(&l)),
        "--log2-sizes must be within 1..=24"
    );
    let mut all = Vec::new();
    // Each group is printed as soon as it is done, so that a GPU call that never returns
    // (killed by a timeout) still shows which group it was in.
    let print = |checks: &[check::Check]| {
        for c in checks {
            let pattern = c
                .pattern
                .map(|p| format!("{p:?}").to_lowercase())
                .unwrap_or_default();
            println!(
                "{}  {:<13} 2^{:<2} {:<8} gpu call {:>10}",
                if c.equal { "PASS" } else { "FAIL" },
                c.what,
                c.log2,
                pattern,
                format!("{:.3} ms", c.gpu_call_ns as f64 / 1e6)
            );
        }
    };
    type Group = fn(u32, u64) -> Result<Vec<check::Check>, crate::cuda::ffi::NativeError>;
    let groups: [(&str, Group); 3] = [
        ("MSM", check::msm_checks),
        ("NTT", check::ntt_checks),
        // The CPU side multiplies one point at a time: at most 2^12 keeps it to seconds.
        ("fixed-base", |lg, seed| {
            check::fixed_base_checks(lg.min(12), seed)
        }),
    ];
    for &lg in sizes {
        for (name, group) in groups {
            eprintln!("cuda-check: {name} 2^{lg} ...");
            let checks = group(lg, seed)?;
            print(&checks);
            all.extend(checks);
        }
    }
    if let Some(p) = json {
        crate::fsx::write_file(p, serde_json::to_string_pretty(&all)?.as_bytes())?;
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
pub fn run_check(_: &[u32], _: u64, _: Option<&std::path::Path>) -> Result<()> {
    anyhow::bail!(
        "cuda-check needs the native prover: rebuild with `--features cuda` after \
         `eval \"$(scripts/cuda-toolkit.sh)\"` (docs/gpu.md)"
    )
}
