//! SHA-256 circuit on bellperson's gadget: `blocks` compressions over a preimage of
//! 64·blocks − 9 bytes (the largest that pads into that many blocks), digest packed
//! into two public inputs. As many blocks as fit in 2^k constraints, then filler.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use bellperson::gadgets::boolean::{AllocatedBit, Boolean};
use bellperson::gadgets::{multipack, sha256::sha256};
use bellperson::util_cs::bench_cs::BenchCS;
use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar;
use ff::Field;
use rand::RngCore;

pub(super) const MIN_LOG2: u32 = crate::knobs::CircuitKind::Sha256.min_log2();
/// ONE + two digest inputs; each input also costs the prover one constraint.
const INPUTS: usize = 3;

#[derive(Debug, Clone)]
pub struct Sha256Circuit {
    blocks: usize,
    filler: usize,
    preimage: Option<Vec<u8>>,
    chain_seed: Option<Scalar>,
}

/// Constraints of the hashing part (preimage bits, compressions, packing) for `blocks`.
fn hashing_constraints(blocks: usize) -> usize {
    static CACHE: OnceLock<Mutex<HashMap<usize, usize>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(&n) = cache.lock().unwrap().get(&blocks) {
        return n;
    }
    let mut cs = BenchCS::<Scalar>::new();
    hash_part(&mut cs, blocks, None).expect("blank synthesis cannot fail");
    let n = cs.num_constraints();
    cache.lock().unwrap().insert(blocks, n);
    n
}

fn preimage_len(blocks: usize) -> usize {
    64 * blocks - 9
}

fn hash_part<CS: ConstraintSystem<Scalar>>(
    cs: &mut CS,
    blocks: usize,
    preimage: Option<&[u8]>,
) -> Result<(), SynthesisError> {
    let nbits = preimage_len(blocks) * 8;
    let bits: Vec<Option<bool>> = match preimage {
        Some(p) => multipack::bytes_to_bits(p).into_iter().map(Some).collect(),
        None => vec![None; nbits],
    };
    let input: Vec<Boolean> = bits
        .into_iter()
        .enumerate()
        .map(|(i, b)| {
            AllocatedBit::alloc(cs.namespace(|| format!("preimage bit {i}")), b).map(Boolean::from)
        })
        .collect::<Result<_, _>>()?;
    let digest = sha256(cs.namespace(|| "sha256"), &input)?;
    multipack::pack_into_inputs(cs.namespace(|| "digest"), &digest)
}

impl Sha256Circuit {
    pub fn new(log2: u32, index: u64) -> Self {
        let total = 1usize << log2;
        let per_block = hashing_constraints(2) - hashing_constraints(1);
        let budget = total - INPUTS;
        let mut blocks = 1 + budget.saturating_sub(hashing_constraints(1)) / per_block;
        while blocks > 1 && hashing_constraints(blocks) > budget {
            blocks -= 1;
        }
        let used = hashing_constraints(blocks);
        assert!(
            used <= budget,
            "sha256 needs log2_constraints >= {MIN_LOG2}"
        );
        let mut rng = super::instance_rng("sha256", index);
        let mut preimage = vec![0u8; preimage_len(blocks)];
        rng.fill_bytes(&mut preimage);
        Sha256Circuit {
            blocks,
            filler: budget - used,
            preimage: Some(preimage),
            chain_seed: Some(Scalar::random(&mut rng)),
        }
    }

    pub fn blank(&self) -> Self {
        Sha256Circuit {
            preimage: None,
            chain_seed: None,
            ..self.clone()
        }
    }

    pub fn blocks(&self) -> usize {
        self.blocks
    }

    pub fn public_inputs(&self) -> Vec<Scalar> {
        use sha2::Digest;
        let p = self
            .preimage
            .as_ref()
            .expect("public inputs need a witness");
        let digest = sha2::Sha256::digest(p);
        multipack::compute_multipacking(&multipack::bytes_to_bits(&digest))
    }
}

impl Circuit<Scalar> for Sha256Circuit {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        hash_part(cs, self.blocks, self.preimage.as_deref())?;
        // The filler chain has one constraint per step; `count` steps.
        super::squaring_chain(&mut cs.namespace(|| "filler"), self.filler, self.chain_seed)
            .map(|_| ())
    }
}
