//! `gapscope __params` (hidden): the child process a run starts to generate params
//! missing from the cache, so that the run itself only ever loads them.

use std::path::PathBuf;

use anyhow::Result;

use crate::prover::{params, CircuitInstance, CircuitKind, Gadget};

#[derive(clap::Args, Debug)]
pub struct ParamsArgs {
    #[arg(long)]
    circuit: String,
    #[arg(long)]
    log2_constraints: u32,
    #[arg(long)]
    gadget: String,
    #[arg(long)]
    params_dir: PathBuf,
}

/// Loads or generates the params of one circuit into the cache and prints how (a
/// [`params::ParamsOrigin`] as JSON) on stdout.
pub fn run(a: ParamsArgs) -> Result<()> {
    let kind: CircuitKind = super::parse_name("circuit", &a.circuit)?;
    let gadget: Gadget = super::parse_name("gadget", &a.gadget)?;
    let c =
        CircuitInstance::new(kind, a.log2_constraints, gadget, 0).map_err(anyhow::Error::msg)?;
    let key = params::ParamsKey::for_circuit(&c, kind.as_str(), a.log2_constraints)?;
    let (_, origin) = params::load_or_generate(&a.params_dir, &c, &key)?;
    println!("{}", serde_json::to_string(&origin)?);
    Ok(())
}
