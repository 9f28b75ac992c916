//! `gapscope upstream-reference`: bellperson's own supraseal wrapper on our circuit and
//! params, the control that tells upstream's behaviour from ours.

use std::path::PathBuf;

use anyhow::Result;

use crate::{CircuitKind, Gadget};

#[derive(clap::Args, Debug)]
pub struct UpstreamArgs {
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
}

pub fn run(a: UpstreamArgs) -> Result<()> {
    let kind: CircuitKind = super::parse_name("circuit", &a.circuit)?;
    let gadget: Gadget = super::parse_name("gadget", &a.gadget)?;
    anyhow::ensure!(
        a.batch >= 1 && a.calls >= 1,
        "--batch and --calls must be at least 1"
    );
    let params_dir = a.params_dir.unwrap_or_else(super::default_params_dir);
    reference(
        kind,
        a.log2_constraints,
        gadget,
        a.batch,
        a.calls,
        &params_dir,
    )
}

#[cfg(feature = "supraseal")]
fn reference(
    kind: CircuitKind,
    log2: u32,
    gadget: Gadget,
    batch: usize,
    calls: u32,
    params_dir: &std::path::Path,
) -> Result<()> {
    let r = crate::reference::run(kind, log2, gadget, batch, calls, params_dir, &mut |m| {
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
    _kind: CircuitKind,
    _log2: u32,
    _gadget: Gadget,
    _batch: usize,
    _calls: u32,
    _params_dir: &std::path::Path,
) -> Result<()> {
    anyhow::bail!(
        "upstream-reference needs the upstream prover: rebuild with `--features supraseal` after \
         `eval \"$(scripts/cuda-toolkit.sh)\"` (docs/gpu.md)"
    )
}
