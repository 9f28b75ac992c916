//! `gapscope __params` (hidden): the child process a run starts to generate params
//! missing from the cache, so that the run itself only ever loads them. With
//! `--time-only` it generates without touching the cache and prints where the time
//! went, so that a device script can time generators against each other.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Result;

use crate::paramgen::{GenReport, ParamGen};
use crate::{params, CircuitInstance, CircuitKind, Gadget};

#[derive(clap::Args, Debug)]
pub struct ParamsArgs {
    #[arg(long)]
    circuit: String,
    #[arg(long)]
    log2_constraints: u32,
    #[arg(long)]
    gadget: String,
    #[arg(long, required_unless_present = "time_only")]
    params_dir: Option<PathBuf>,
    /// auto | cpu | cuda | bellperson (default: $GAPSCOPE_PARAMGEN, else auto).
    #[arg(long)]
    generator: Option<String>,
    /// Generate, print the timing as JSON on stdout, write nothing.
    #[arg(long)]
    time_only: bool,
    /// With --time-only: fixed (insecure) toxic waste, the same for every generator, so
    /// that their params files' digests can be compared (with --digest).
    #[arg(long, requires = "time_only")]
    toxic_seed: Option<u64>,
    /// With --time-only: the SHA-256 the params file would have.
    #[arg(long, requires = "time_only")]
    digest: bool,
}

/// What `--time-only` prints.
#[derive(Debug, serde::Serialize)]
struct Timing {
    key: params::ParamsKey,
    generator: String,
    elapsed_ms: u64,
    report: Option<GenReport>,
    toxic_seed: Option<u64>,
    params_sha256: Option<String>,
}

/// Loads or generates the params of one circuit into the cache and prints how (a
/// [`params::ParamsOrigin`] as JSON) on stdout; or, with `--time-only`, a [`Timing`].
pub fn run(a: ParamsArgs) -> Result<()> {
    let kind: CircuitKind = super::parse_name("circuit", &a.circuit)?;
    let gadget: Gadget = super::parse_name("gadget", &a.gadget)?;
    let generator = match &a.generator {
        Some(g) => ParamGen::parse(g).map_err(|e| anyhow::anyhow!("--generator: {e}"))?,
        None => ParamGen::from_env().map_err(anyhow::Error::msg)?,
    };
    let c =
        CircuitInstance::new(kind, a.log2_constraints, gadget, 0).map_err(anyhow::Error::msg)?;
    let key = params::ParamsKey::for_circuit(&c, kind.as_str(), a.log2_constraints)?;
    if a.time_only {
        let t = Instant::now();
        let g = generator.generate(c.blank(), a.toxic_seed)?;
        let elapsed_ms = t.elapsed().as_millis() as u64;
        eprintln!(
            "params: {} 2^{} by {} in {elapsed_ms} ms",
            key.circuit, key.log2_constraints, g.generator
        );
        if let Some(r) = &g.report {
            eprint!("{r}");
        }
        let timing = Timing {
            params_sha256: a.digest.then(|| params::digest(&g.params)),
            key,
            generator: g.generator,
            elapsed_ms,
            report: g.report,
            toxic_seed: a.toxic_seed,
        };
        println!("{}", serde_json::to_string(&timing)?);
        return Ok(());
    }
    let dir = a
        .params_dir
        .expect("clap requires --params-dir without --time-only");
    let (_, origin) = params::load_or_generate(&dir, &c, &key, generator)?;
    println!("{}", serde_json::to_string(&origin)?);
    Ok(())
}
