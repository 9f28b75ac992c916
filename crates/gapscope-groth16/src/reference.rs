//! `gapscope upstream-reference`: the upstream prover through bellperson's own
//! `cuda-supraseal` wrapper, end to end (bellperson's synthesis, its hand-off, its SRS
//! loader), on the same circuit and params file the `supraseal` backend uses.
//!
//! It is the control for the `supraseal` backend: when both fail the same way the cause is
//! upstream (or the machine), not our hand-off; when only ours fails it is ours. Every
//! proof is verified with bellperson's verifier. No spans: this path is bellperson's, and
//! what it does inside is not ours to split.

use std::path::{Path, PathBuf};
use std::time::Instant;

use bellperson::groth16::{create_random_proof_batch, SuprasealParameters};
use blstrs::Bls12;

use super::circuits::{CircuitInstance, CircuitKind, Gadget};
use super::gpu_probe;
use super::params::{self, ParamsKey};

/// One call of bellperson's batch prover.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ReferenceCall {
    /// 0 is the first call of the process (module load, JIT, SRS pinning included).
    pub call: u32,
    pub prove_ms: f64,
    pub proofs: usize,
    /// Why verification failed (the first failing proof); `None`: every proof verified.
    pub failure: Option<String>,
}

/// What a reference run did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ReferenceReport {
    pub circuit: String,
    pub log2_constraints: u32,
    pub num_constraints: usize,
    pub batch: usize,
    pub params_path: PathBuf,
    pub srs_load_ms: f64,
    pub calls: Vec<ReferenceCall>,
}

/// Proves `batch` instances of the circuit `calls` times with bellperson's wrapper and
/// verifies every proof. `progress` is told each step as it starts, so that a call that
/// never returns shows where it stopped.
pub fn run(
    kind: CircuitKind,
    log2: u32,
    gadget: Gadget,
    batch: usize,
    calls: u32,
    params_dir: &Path,
    progress: &mut dyn FnMut(&str),
) -> anyhow::Result<ReferenceReport> {
    anyhow::ensure!(
        batch >= 1 && calls >= 1,
        "batch and calls must be at least 1"
    );
    let (_, devices) = gpu_probe::usable_devices()
        .map_err(|e| anyhow::anyhow!("the upstream prover needs a GPU: {e}"))?;
    progress(&format!("{} usable GPU(s)", devices.len()));
    let make = |i: u64| CircuitInstance::new(kind, log2, gadget, i).map_err(anyhow::Error::msg);
    let first = make(0)?;
    let key = ParamsKey::for_circuit(&first, kind.as_str(), log2)?;
    progress(&format!(
        "params for {} 2^{} ({} constraints) in {}",
        kind.as_str(),
        log2,
        key.num_constraints,
        params_dir.display()
    ));
    let generator = super::paramgen::ParamGen::from_env().map_err(anyhow::Error::msg)?;
    let (p, origin) = params::load_or_generate(params_dir, &first, &key, generator)?;
    drop(first);

    progress(&format!("SRS from {}", origin.path.display()));
    let t = Instant::now();
    let srs = SuprasealParameters::<Bls12>::new(origin.path.clone()).map_err(|e| {
        anyhow::anyhow!(
            "upstream could not load {} as an SRS: {e}",
            origin.path.display()
        )
    })?;
    let srs_load_ms = t.elapsed().as_secs_f64() * 1e3;

    let mut rng = rand::rngs::OsRng;
    let mut out = Vec::new();
    for call in 0..calls {
        let circuits = (0..batch as u64)
            .map(make)
            .collect::<anyhow::Result<Vec<_>>>()?;
        let inputs: Vec<_> = circuits.iter().map(|c| c.public_inputs()).collect();
        progress(&format!(
            "call {call}: create_random_proof_batch of {batch}"
        ));
        let t = Instant::now();
        let proofs = create_random_proof_batch(circuits, &srs, &mut rng)
            .map_err(|e| anyhow::anyhow!("bellperson's prover failed: {e}"))?;
        let prove_ms = t.elapsed().as_secs_f64() * 1e3;
        let failure = super::verify_all(&p, &proofs, &inputs).err();
        progress(&format!(
            "call {call}: {prove_ms:.1} ms, {} proof(s), {}",
            proofs.len(),
            failure.as_deref().unwrap_or("all verified")
        ));
        out.push(ReferenceCall {
            call,
            prove_ms,
            proofs: proofs.len(),
            failure,
        });
    }
    Ok(ReferenceReport {
        circuit: kind.as_str().into(),
        log2_constraints: log2,
        num_constraints: key.num_constraints,
        batch,
        params_path: origin.path,
        srs_load_ms,
        calls: out,
    })
}
