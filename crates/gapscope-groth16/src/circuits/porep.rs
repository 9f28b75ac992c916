//! PoRep-shaped circuit: per challenge, two parent labels are decomposed into bits
//! (boolean constraints + a packing constraint), XOR-mixed bit by bit, re-packed into a
//! new label and compressed as label^5; the compressed labels are summed into the one
//! public input. Bit decomposition and packing dominate, as in a real PoRep circuit,
//! and both go through the selectable [`Gadget`].

use bellperson::gadgets::boolean::AllocatedBit;
use bellperson::{ConstraintSystem, LinearCombination, SynthesisError};
use blstrs::Scalar;
use ff::{Field, PrimeField};

use super::gadgets::{self, Gadget};

/// 2 × (255 bits + pack) + 254 XORs + pack + 3 for x^5.
const PER_CHALLENGE: usize = 2 * 256 + 254 + 1 + 3;
/// Inputs: ONE and the sum; constraints: the sum check + one per input.
const FIXED: usize = 1 + 2;
#[derive(Debug, Clone)]
pub struct PorepCircuit {
    log2: u32,
    gadget: Gadget,
    challenges: usize,
    filler: usize,
    parents: Option<Vec<(Scalar, Scalar)>>,
    chain_seed: Option<Scalar>,
}

impl PorepCircuit {
    pub fn new(log2: u32, gadget: Gadget, index: u64) -> Self {
        let total = 1usize << log2;
        let challenges = (total - FIXED) / PER_CHALLENGE;
        let filler = total - FIXED - challenges * PER_CHALLENGE;
        let mut rng = super::instance_rng("porep", index);
        let parents = (0..challenges)
            .map(|_| (Scalar::random(&mut rng), Scalar::random(&mut rng)))
            .collect();
        PorepCircuit {
            log2,
            gadget,
            challenges,
            filler,
            parents: Some(parents),
            chain_seed: Some(Scalar::random(&mut rng)),
        }
    }

    pub fn blank(&self) -> Self {
        PorepCircuit {
            parents: None,
            chain_seed: None,
            ..self.clone()
        }
    }

    pub fn log2(&self) -> u32 {
        self.log2
    }

    fn label(p0: &Scalar, p1: &Scalar) -> Scalar {
        let (r0, r1) = (p0.to_repr(), p1.to_repr());
        let pw = gadgets::powers_of_two();
        let mut acc = Scalar::ZERO;
        for (i, p) in pw.iter().enumerate().take(Scalar::NUM_BITS as usize - 1) {
            let b0 = (r0.as_ref()[i / 8] >> (i % 8)) & 1;
            let b1 = (r1.as_ref()[i / 8] >> (i % 8)) & 1;
            if b0 ^ b1 == 1 {
                acc += p;
            }
        }
        acc
    }

    pub fn public_inputs(&self) -> Vec<Scalar> {
        let parents = self.parents.as_ref().expect("public inputs need a witness");
        let sum = parents.iter().fold(Scalar::ZERO, |acc, (a, b)| {
            let l = Self::label(a, b);
            acc + l.square().square() * l
        });
        vec![sum]
    }
}

impl bellperson::Circuit<Scalar> for PorepCircuit {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let missing = || SynthesisError::AssignmentMissing;
        let mut sum_lc = LinearCombination::<Scalar>::zero();
        let mut sum_val = Some(Scalar::ZERO);
        for c in 0..self.challenges {
            let mut cs = cs.namespace(|| format!("challenge {c}"));
            let pv = self.parents.as_ref().map(|p| p[c]);
            let p0 = cs.alloc(|| "parent 0", || pv.map(|p| p.0).ok_or_else(missing))?;
            let p1 = cs.alloc(|| "parent 1", || pv.map(|p| p.1).ok_or_else(missing))?;
            let b0 =
                gadgets::decompose(cs.namespace(|| "bits 0"), self.gadget, pv.map(|p| p.0), p0)?;
            let b1 =
                gadgets::decompose(cs.namespace(|| "bits 1"), self.gadget, pv.map(|p| p.1), p1)?;
            let mixed: Vec<AllocatedBit> = b0
                .iter()
                .zip(&b1)
                .take(Scalar::NUM_BITS as usize - 1)
                .enumerate()
                .map(|(i, (x, y))| AllocatedBit::xor(cs.namespace(|| format!("xor {i}")), x, y))
                .collect::<Result<_, _>>()?;
            let (label, lv) = gadgets::pack(cs.namespace(|| "label"), self.gadget, &mixed)?;
            // label^5 with three multiplications.
            let sq_v = lv.map(|l| l.square());
            let sq = cs.alloc(|| "l^2", || sq_v.ok_or_else(missing))?;
            cs.enforce(|| "square", |l| l + label, |l| l + label, |l| l + sq);
            let q_v = sq_v.map(|s| s.square());
            let q = cs.alloc(|| "l^4", || q_v.ok_or_else(missing))?;
            cs.enforce(|| "fourth", |l| l + sq, |l| l + sq, |l| l + q);
            let f_v = q_v.zip(lv).map(|(q, l)| q * l);
            let f = cs.alloc(|| "l^5", || f_v.ok_or_else(missing))?;
            cs.enforce(|| "fifth", |l| l + q, |l| l + label, |l| l + f);
            sum_lc = sum_lc + f;
            sum_val = sum_val.zip(f_v).map(|(s, f)| s + f);
        }
        let out = cs.alloc_input(|| "sum", || sum_val.ok_or_else(missing))?;
        cs.enforce(|| "sum check", |_| sum_lc, |l| l + CS::one(), |l| l + out);
        super::squaring_chain(&mut cs.namespace(|| "filler"), self.filler, self.chain_seed)
            .map(|_| ())
    }
}
