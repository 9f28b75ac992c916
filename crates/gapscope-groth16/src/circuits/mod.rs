//! Workload circuits, sized by `log2_constraints`: each fills its domain to exactly
//! 2^k constraints (including the prover's per-input constraints) with real work, then
//! pads with a squaring chain, so every size has the FFT/MSM shape of a full domain.

mod chain;
pub mod gadgets;
mod porep;
mod sha256;

use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar;
use ff::Field;

pub use crate::knobs::CircuitKind;
pub use chain::ChainCircuit;
pub use gadgets::Gadget;
pub use porep::PorepCircuit;
pub use sha256::Sha256Circuit;

/// One circuit instance (shape + witness) ready to synthesise.
#[derive(Debug, Clone)]
pub enum CircuitInstance {
    Sha256(Sha256Circuit),
    Porep(PorepCircuit),
    Chain(ChainCircuit),
}

impl CircuitInstance {
    /// Instance `index` of a batch; witnesses differ per index, the shape does not.
    pub fn new(kind: CircuitKind, log2: u32, gadget: Gadget, index: u64) -> Result<Self, String> {
        if log2 < kind.min_log2() || log2 > 28 {
            return Err(format!(
                "circuit {} supports log2_constraints from {} to 28, got {log2}",
                kind.as_str(),
                kind.min_log2()
            ));
        }
        Ok(match kind {
            CircuitKind::Sha256 => CircuitInstance::Sha256(Sha256Circuit::new(log2, index)),
            CircuitKind::Porep => CircuitInstance::Porep(PorepCircuit::new(log2, gadget, index)),
            CircuitKind::Chain => CircuitInstance::Chain(ChainCircuit::new(log2, index)),
        })
    }

    /// The same shape with no witness (for parameter generation and shape digests).
    pub fn blank(&self) -> Self {
        match self {
            CircuitInstance::Sha256(c) => CircuitInstance::Sha256(c.blank()),
            CircuitInstance::Porep(c) => CircuitInstance::Porep(c.blank()),
            CircuitInstance::Chain(c) => CircuitInstance::Chain(c.blank()),
        }
    }

    /// Public inputs computed natively (not by the prover), for verification.
    pub fn public_inputs(&self) -> Vec<Scalar> {
        match self {
            CircuitInstance::Sha256(c) => c.public_inputs(),
            CircuitInstance::Porep(c) => c.public_inputs(),
            CircuitInstance::Chain(c) => c.public_inputs(),
        }
    }
}

impl Circuit<Scalar> for CircuitInstance {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        match self {
            CircuitInstance::Sha256(c) => c.synthesize(cs),
            CircuitInstance::Porep(c) => c.synthesize(cs),
            CircuitInstance::Chain(c) => c.synthesize(cs),
        }
    }
}

/// Pads with `count` constraints x_{i+1} = x_i², starting from `seed`.
pub(crate) fn squaring_chain<CS: ConstraintSystem<Scalar>>(
    cs: &mut CS,
    count: usize,
    seed: Option<Scalar>,
) -> Result<bellperson::Variable, SynthesisError> {
    let mut val = seed;
    let mut var = cs.alloc(
        || "chain 0",
        || val.ok_or(SynthesisError::AssignmentMissing),
    )?;
    for i in 0..count {
        let next = val.map(|v| v.square());
        let nvar = cs.alloc(
            || format!("chain {}", i + 1),
            || next.ok_or(SynthesisError::AssignmentMissing),
        )?;
        cs.enforce(|| format!("sq {i}"), |l| l + var, |l| l + var, |l| l + nvar);
        val = next;
        var = nvar;
    }
    Ok(var)
}

/// Deterministic per-instance randomness (witness values), so runs are reproducible.
pub(crate) fn instance_rng(tag: &str, index: u64) -> rand::rngs::StdRng {
    use rand::SeedableRng;
    use sha2::Digest;
    let d = sha2::Sha256::digest(format!("gapscope/{tag}/{index}").as_bytes());
    rand::rngs::StdRng::from_seed(d.into())
}

#[cfg(test)]
mod tests;
