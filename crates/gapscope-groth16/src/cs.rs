//! Our constraint system for proving: records the A/B/C evaluations of every constraint,
//! the density bitmaps of the A and B queries, and the input/aux assignments — what a
//! Groth16 prover needs after synthesis, and what the backends consume.

use bellperson::multiexp::DensityTracker;
use bellperson::{ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use ff::Field;

/// The output of synthesising one circuit.
#[derive(Debug, Default)]
pub struct Assignment {
    pub a_aux_density: DensityTracker,
    pub b_input_density: DensityTracker,
    pub b_aux_density: DensityTracker,
    pub a: Vec<Scalar>,
    pub b: Vec<Scalar>,
    pub c: Vec<Scalar>,
    pub input_assignment: Vec<Scalar>,
    pub aux_assignment: Vec<Scalar>,
}

impl PartialEq for Assignment {
    fn eq(&self, o: &Self) -> bool {
        self.a_aux_density == o.a_aux_density
            && self.b_input_density == o.b_input_density
            && self.b_aux_density == o.b_aux_density
            && self.a == o.a
            && self.b == o.b
            && self.c == o.c
            && self.input_assignment == o.input_assignment
            && self.aux_assignment == o.aux_assignment
    }
}

impl Assignment {
    /// Synthesises `circuit` the way a Groth16 prover does: ONE as input 0, the circuit,
    /// then one `input * 1 = 0`-shaped constraint per input so inputs are in the A query.
    pub fn synthesize<C: bellperson::Circuit<Scalar>>(circuit: C) -> Result<Self, SynthesisError> {
        let mut cs = Assignment::default();
        synthesize_groth16(&mut cs, circuit, |cs| cs.input_assignment.len())?;
        Ok(cs)
    }

    pub fn num_constraints(&self) -> usize {
        self.a.len()
    }

    /// Checks every constraint's evaluations: a·b = c. The check of a rep that made no
    /// proof (synthesis alone); the first failing constraint is named.
    pub fn check_satisfied(&self) -> Result<(), String> {
        if self.a.len() != self.b.len() || self.a.len() != self.c.len() {
            return Err(format!(
                "evaluation vectors differ in length: a {}, b {}, c {}",
                self.a.len(),
                self.b.len(),
                self.c.len()
            ));
        }
        match (0..self.a.len()).find(|&i| self.a[i] * self.b[i] != self.c[i]) {
            None => Ok(()),
            Some(i) => Err(format!("constraint {i} is not satisfied (a·b ≠ c)")),
        }
    }

    /// Heap bytes held (what freeing it releases).
    pub fn heap_bytes(&self) -> u64 {
        let s = std::mem::size_of::<Scalar>() as u64;
        let vecs = (self.a.capacity()
            + self.b.capacity()
            + self.c.capacity()
            + self.input_assignment.capacity()
            + self.aux_assignment.capacity()) as u64;
        vecs * s
            + (self.a_aux_density.bv.capacity()
                + self.b_input_density.bv.capacity()
                + self.b_aux_density.bv.capacity()) as u64
                / 8
    }
}

/// Groth16's synthesis convention, the same in bellperson's prover and generator: ONE as
/// input 0, the circuit, then one `input · 0 = 0` constraint per input (`num_inputs`
/// counts them in `cs`), so that every input is in the A query.
pub fn synthesize_groth16<CS, C>(
    cs: &mut CS,
    circuit: C,
    num_inputs: impl Fn(&CS) -> usize,
) -> Result<(), SynthesisError>
where
    CS: ConstraintSystem<Scalar>,
    C: bellperson::Circuit<Scalar>,
{
    cs.alloc_input(|| "one", || Ok(Scalar::ONE))?;
    circuit.synthesize(cs)?;
    for i in 0..num_inputs(cs) {
        cs.enforce(
            || "input",
            |lc| lc + Variable::new_unchecked(Index::Input(i)),
            |lc| lc,
            |lc| lc,
        );
    }
    Ok(())
}

/// Σ coeff · value over one half (inputs or aux) of a linear combination, marking the
/// variables used in `density`.
fn eval_terms<'a>(
    terms: impl Iterator<Item = (&'a usize, &'a Scalar)>,
    values: &[Scalar],
    mut density: Option<&mut DensityTracker>,
) -> Scalar {
    let mut acc = Scalar::ZERO;
    for (&i, coeff) in terms {
        if coeff.is_zero_vartime() {
            continue;
        }
        acc += if *coeff == Scalar::ONE {
            values[i]
        } else {
            values[i] * coeff
        };
        if let Some(d) = density.as_deref_mut() {
            d.inc(i);
        }
    }
    acc
}

fn eval(
    lc: &LinearCombination<Scalar>,
    input_density: Option<&mut DensityTracker>,
    aux_density: Option<&mut DensityTracker>,
    inputs: &[Scalar],
    aux: &[Scalar],
) -> Scalar {
    eval_terms(lc.iter_inputs(), inputs, input_density)
        + eval_terms(lc.iter_aux(), aux, aux_density)
}

impl ConstraintSystem<Scalar> for Assignment {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.aux_assignment.push(f()?);
        self.a_aux_density.add_element();
        self.b_aux_density.add_element();
        Ok(Variable::new_unchecked(Index::Aux(
            self.aux_assignment.len() - 1,
        )))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.input_assignment.push(f()?);
        self.b_input_density.add_element();
        Ok(Variable::new_unchecked(Index::Input(
            self.input_assignment.len() - 1,
        )))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        let a = a(LinearCombination::zero());
        let b = b(LinearCombination::zero());
        let c = c(LinearCombination::zero());
        let (inp, aux) = (&self.input_assignment, &self.aux_assignment);
        // Inputs are always dense in A (the per-input constraints), so no input tracker.
        let av = eval(&a, None, Some(&mut self.a_aux_density), inp, aux);
        let bv = eval(
            &b,
            Some(&mut self.b_input_density),
            Some(&mut self.b_aux_density),
            inp,
            aux,
        );
        let cv = eval(&c, None, None, inp, aux);
        self.a.push(av);
        self.b.push(bv);
        self.c.push(cv);
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

/// A constraint system that only digests the *shape* of a circuit (every constraint's
/// terms and coefficients, variable counts), not its witness. Parameters depend on the
/// shape alone, so the digest keys the parameter cache: a change to a gadget that alters
/// constraints yields a new key, one that does not (e.g. `lc` vs `add_to_lc`) does not.
pub struct ShapeHasher {
    hasher: sha2::Sha256,
    pub num_inputs: usize,
    pub num_aux: usize,
    pub num_constraints: usize,
}

impl Default for ShapeHasher {
    fn default() -> Self {
        use sha2::Digest;
        ShapeHasher {
            hasher: sha2::Sha256::new(),
            num_inputs: 1, // ONE
            num_aux: 0,
            num_constraints: 0,
        }
    }
}

impl ShapeHasher {
    /// Digest of `circuit`'s shape, including the per-input constraints a prover adds.
    pub fn digest<C: bellperson::Circuit<Scalar>>(
        circuit: C,
    ) -> Result<(String, ShapeHasher), SynthesisError> {
        use sha2::Digest;
        let mut cs = ShapeHasher::default();
        circuit.synthesize(&mut cs)?;
        cs.num_constraints += cs.num_inputs;
        cs.hasher.update((cs.num_inputs as u64).to_le_bytes());
        cs.hasher.update((cs.num_aux as u64).to_le_bytes());
        cs.hasher.update((cs.num_constraints as u64).to_le_bytes());
        let h = std::mem::take(&mut cs.hasher).finalize();
        let hex: String = h.iter().map(|b| format!("{b:02x}")).collect();
        Ok((hex, cs))
    }

    fn absorb(&mut self, tag: u8, lc: &LinearCombination<Scalar>) {
        use ff::PrimeField;
        use sha2::Digest;
        self.hasher.update([tag]);
        for (v, coeff) in lc.iter() {
            let (kind, idx) = match v.get_unchecked() {
                Index::Input(i) => (0u8, i),
                Index::Aux(i) => (1u8, i),
            };
            self.hasher.update([kind]);
            self.hasher.update((idx as u64).to_le_bytes());
            self.hasher.update(coeff.to_repr());
        }
    }
}

impl ConstraintSystem<Scalar> for ShapeHasher {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.num_aux += 1;
        Ok(Variable::new_unchecked(Index::Aux(self.num_aux - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.num_inputs += 1;
        Ok(Variable::new_unchecked(Index::Input(self.num_inputs - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        self.num_constraints += 1;
        self.absorb(b'a', &a(LinearCombination::zero()));
        self.absorb(b'b', &b(LinearCombination::zero()));
        self.absorb(b'c', &c(LinearCombination::zero()));
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
