//! The key-generation constraint system: synthesis without a witness that records every
//! term of every constraint's A, B and C linear combinations, flat, with the row it
//! belongs to. [`super::qap`] evaluates them at τ afterwards, when the domain size is
//! known. Synthesis follows the prover's convention ([`synthesize_groth16`]: ONE first,
//! one `input · 0 = 0` constraint per input), which bellperson's generator shares.

use bellperson::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use ff::Field;

use crate::cs::synthesize_groth16;

/// Marks a term's variable as an input (otherwise aux).
const INPUT_BIT: u32 = 1 << 31;

/// One non-zero coefficient of a constraint's linear combination.
#[derive(Clone, Copy, Debug)]
pub struct Term {
    /// Variable index, [`INPUT_BIT`] set for inputs.
    var: u32,
    /// The constraint (row of the QAP) it belongs to.
    pub row: u32,
    pub coeff: Scalar,
}

impl Term {
    /// Index of the variable in the order of the A/B queries: inputs, then aux.
    pub fn column(&self, num_inputs: usize) -> usize {
        if self.var & INPUT_BIT != 0 {
            (self.var & !INPUT_BIT) as usize
        } else {
            num_inputs + self.var as usize
        }
    }
}

/// A circuit's shape as the QAP needs it.
#[derive(Debug, Default)]
pub struct KeygenCs {
    pub num_inputs: usize,
    pub num_aux: usize,
    pub num_constraints: usize,
    /// Terms of A, B and C, in constraint order.
    pub terms: [Vec<Term>; 3],
}

impl KeygenCs {
    /// Synthesises `circuit` as bellperson's generator does (ONE, the circuit, the
    /// per-input constraints).
    pub fn synthesize<C: Circuit<Scalar>>(circuit: C) -> Result<Self, SynthesisError> {
        let mut cs = KeygenCs::default();
        synthesize_groth16(&mut cs, circuit, |cs| cs.num_inputs)?;
        Ok(cs)
    }

    /// Number of variables (inputs + aux), the length of the A/B queries before filtering.
    pub fn num_vars(&self) -> usize {
        self.num_inputs + self.num_aux
    }

    fn record(&mut self, m: usize, lc: &LinearCombination<Scalar>) -> Result<(), SynthesisError> {
        let row = u32::try_from(self.num_constraints)
            .map_err(|_| SynthesisError::PolynomialDegreeTooLarge)?;
        let terms = &mut self.terms[m];
        for (&i, coeff) in lc.iter_inputs() {
            if !bool::from(coeff.is_zero()) {
                terms.push(Term {
                    var: INPUT_BIT | i as u32,
                    row,
                    coeff: *coeff,
                });
            }
        }
        for (&i, coeff) in lc.iter_aux() {
            if !bool::from(coeff.is_zero()) {
                terms.push(Term {
                    var: i as u32,
                    row,
                    coeff: *coeff,
                });
            }
        }
        Ok(())
    }
}

/// Fails synthesis once the variables no longer fit the 31 bits a [`Term`] keeps.
fn checked_index(n: usize) -> Result<usize, SynthesisError> {
    if n >= INPUT_BIT as usize {
        Err(SynthesisError::PolynomialDegreeTooLarge)
    } else {
        Ok(n)
    }
}

impl ConstraintSystem<Scalar> for KeygenCs {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        // No witness: the value closure is never called, as in bellperson's generator.
        let i = checked_index(self.num_aux)?;
        self.num_aux += 1;
        Ok(Variable::new_unchecked(Index::Aux(i)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        let i = checked_index(self.num_inputs)?;
        self.num_inputs += 1;
        Ok(Variable::new_unchecked(Index::Input(i)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        // `enforce` cannot fail; a row past u32 is caught here and reported by the
        // domain check in qap (2^32 rows exceed any domain we can build anyway).
        let lcs = [
            a(LinearCombination::zero()),
            b(LinearCombination::zero()),
            c(LinearCombination::zero()),
        ];
        for (m, lc) in lcs.iter().enumerate() {
            if self.record(m, lc).is_err() {
                break;
            }
        }
        self.num_constraints += 1;
    }

    fn push_namespace<NR, N>(&mut self, _: N)
    where
        NR: Into<String>,
        N: FnOnce() -> NR,
    {
    }

    fn pop_namespace(&mut self) {}

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }
}
