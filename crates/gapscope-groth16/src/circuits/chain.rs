//! Dense "chain" circuit: x_{i+1} = x_i² over the whole domain, the last value public.
//! No booleans and no sparse rows: every A, B and C evaluation is a full field element.
//! It is the opposite extreme of the PoRep-shaped circuit (mostly 0/1 witness values).
//! It stops one row short of 2^k (like real circuits, whose size is rarely a power of
//! two): the domain is still 2^k, with one padding row.

use bellperson::{ConstraintSystem, SynthesisError};
use blstrs::Scalar;
use ff::Field;

#[derive(Debug, Clone)]
pub struct ChainCircuit {
    steps: usize,
    seed: Option<Scalar>,
}

impl ChainCircuit {
    pub fn new(log2: u32, index: u64) -> Self {
        // ONE and the output are inputs (one constraint each), plus the output check,
        // plus one padding row left free.
        let steps = (1usize << log2) - 4;
        let mut rng = super::instance_rng("chain", index);
        ChainCircuit {
            steps,
            seed: Some(Scalar::random(&mut rng)),
        }
    }

    pub fn blank(&self) -> Self {
        ChainCircuit {
            seed: None,
            ..self.clone()
        }
    }

    fn output(&self) -> Option<Scalar> {
        self.seed
            .map(|s| (0..self.steps).fold(s, |x, _| x.square()))
    }

    pub fn public_inputs(&self) -> Vec<Scalar> {
        vec![self.output().expect("public inputs need a witness")]
    }
}

impl bellperson::Circuit<Scalar> for ChainCircuit {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let out = self.output();
        let last = super::squaring_chain(&mut cs.namespace(|| "chain"), self.steps, self.seed)?;
        let input = cs.alloc_input(|| "out", || out.ok_or(SynthesisError::AssignmentMissing))?;
        cs.enforce(
            || "out check",
            |l| l + last,
            |l| l + CS::one(),
            |l| l + input,
        );
        Ok(())
    }
}
