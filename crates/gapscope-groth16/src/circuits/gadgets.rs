//! Bit-packing gadgets with two real implementations, selectable per variant.
//!
//! Both enforce `Σ bit_i · 2^i = value`; they differ only in how the linear combination
//! is built during synthesis:
//! - [`Gadget::Lc`]: a fresh `LinearCombination` per bit, then added to the running sum
//!   (one small allocation and a merge per bit);
//! - [`Gadget::AddToLc`]: the bit's term appended to the running combination in place.
//!
//! The resulting constraint systems are identical (tested), so parameters are shared.

use std::sync::OnceLock;

use bellperson::gadgets::boolean::AllocatedBit;
use bellperson::{ConstraintSystem, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use ff::{Field, PrimeField};

pub use crate::knobs::Gadget;

/// 2^i for i < 256, computed once.
pub fn powers_of_two() -> &'static [Scalar] {
    static P: OnceLock<Vec<Scalar>> = OnceLock::new();
    P.get_or_init(|| {
        let mut v = Vec::with_capacity(256);
        let mut x = Scalar::ONE;
        for _ in 0..256 {
            v.push(x);
            x = x.double();
        }
        v
    })
}

/// The linear combination Σ 2^i · bits[i], built the way `gadget` says.
pub fn pack_lc(gadget: Gadget, bits: &[Variable]) -> LinearCombination<Scalar> {
    let pw = powers_of_two();
    let mut acc = LinearCombination::zero();
    match gadget {
        Gadget::Lc => {
            for (i, &v) in bits.iter().enumerate() {
                let term = LinearCombination::zero() + (pw[i], v);
                acc = acc + &term;
            }
        }
        Gadget::AddToLc => {
            for (i, &v) in bits.iter().enumerate() {
                acc = acc + (pw[i], v);
            }
        }
    }
    acc
}

/// Allocates the little-endian bits of `value` (all 255 of them, each constrained
/// boolean) and enforces that they pack back to `value_var`.
pub fn decompose<CS: ConstraintSystem<Scalar>>(
    mut cs: CS,
    gadget: Gadget,
    value: Option<Scalar>,
    value_var: Variable,
) -> Result<Vec<AllocatedBit>, SynthesisError> {
    let bits: Vec<Option<bool>> = match value {
        Some(v) => {
            let repr = v.to_repr();
            (0..Scalar::NUM_BITS as usize)
                .map(|i| Some((repr.as_ref()[i / 8] >> (i % 8)) & 1 == 1))
                .collect()
        }
        None => vec![None; Scalar::NUM_BITS as usize],
    };
    let alloc: Vec<AllocatedBit> = bits
        .into_iter()
        .enumerate()
        .map(|(i, b)| AllocatedBit::alloc(cs.namespace(|| format!("bit {i}")), b))
        .collect::<Result<_, _>>()?;
    let vars: Vec<Variable> = alloc.iter().map(|b| b.get_variable()).collect();
    let lc = pack_lc(gadget, &vars);
    cs.enforce(|| "pack", |_| lc, |l| l + CS::one(), |l| l + value_var);
    Ok(alloc)
}

/// Allocates Σ 2^i · bits[i] as a new variable and enforces it.
pub fn pack<CS: ConstraintSystem<Scalar>>(
    mut cs: CS,
    gadget: Gadget,
    bits: &[AllocatedBit],
) -> Result<(Variable, Option<Scalar>), SynthesisError> {
    let pw = powers_of_two();
    let value = bits
        .iter()
        .enumerate()
        .try_fold(Scalar::ZERO, |acc, (i, b)| {
            b.get_value().map(|v| if v { acc + pw[i] } else { acc })
        });
    let var = cs.alloc(
        || "packed",
        || value.ok_or(SynthesisError::AssignmentMissing),
    )?;
    let vars: Vec<Variable> = bits.iter().map(|b| b.get_variable()).collect();
    let lc = pack_lc(gadget, &vars);
    cs.enforce(|| "pack", |_| lc, |l| l + CS::one(), |l| l + var);
    Ok((var, value))
}
