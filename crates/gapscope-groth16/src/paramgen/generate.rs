//! [`generate`]: a circuit and its toxic waste to Groth16 parameters, point for point
//! what bellperson 0.27's `generate_parameters` makes of the same inputs, with the
//! fixed-base multiplications handed to a [`FixedBase`] and every stage timed.

use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use bellperson::groth16::{Parameters, VerifyingKey};
use bellperson::Circuit;
use blstrs::{Bls12, G1Affine, G2Affine, Scalar};
use group::Curve;

use super::fixed_base::FixedBase;
use super::keygen::KeygenCs;
use super::qap;
use super::toxic::Toxic;

/// One query's multiplication.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct QueryTiming {
    /// `h`, `ic`, `l`, `a`, `b_g1` or `b_g2`.
    pub query: String,
    pub points: usize,
    pub ns: u64,
}

/// Where one generation's time went.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GenReport {
    /// [`FixedBase::describe`] of the generator that multiplied.
    pub fixed_base: String,
    pub num_inputs: usize,
    pub num_aux: usize,
    pub num_constraints: usize,
    pub domain_size: usize,
    /// Synthesis into the key-generation constraint system.
    pub synthesis_ns: u64,
    /// Lagrange basis at τ, QAP evaluation and every query's scalars (CPU).
    pub qap_ns: u64,
    /// The fixed-base multiplications, one per query, in the order run.
    pub queries: Vec<QueryTiming>,
    /// Verifying key and the parameters' assembly.
    pub assembly_ns: u64,
    pub total_ns: u64,
}

impl GenReport {
    /// All fixed-base multiplication time.
    pub fn multiplication_ns(&self) -> u64 {
        self.queries.iter().map(|q| q.ns).sum()
    }
}

impl fmt::Display for GenReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use crate::units::fmt_ns;
        writeln!(
            f,
            "params: {} constraints (domain {}), {} inputs, {} aux; fixed base: {}",
            self.num_constraints, self.domain_size, self.num_inputs, self.num_aux, self.fixed_base
        )?;
        let row = |f: &mut fmt::Formatter<'_>, name: &str, points: Option<usize>, ns: u64| {
            let points = points.map(|p| p.to_string()).unwrap_or_default();
            writeln!(f, "  {name:<12} {points:>10}  {:>10}", fmt_ns(ns as f64))
        };
        row(f, "synthesis", None, self.synthesis_ns)?;
        row(f, "qap", None, self.qap_ns)?;
        for q in &self.queries {
            row(f, &format!("mul {}", q.query), Some(q.points), q.ns)?;
        }
        row(f, "assembly", None, self.assembly_ns)?;
        row(f, "total", None, self.total_ns)
    }
}

fn since(t: Instant) -> u64 {
    t.elapsed().as_nanos() as u64
}

fn checked<T>(query: &str, want: usize, got: anyhow::Result<Vec<T>>) -> anyhow::Result<Vec<T>> {
    let got = got.with_context(|| format!("fixed-base multiplication of the {query} query"))?;
    anyhow::ensure!(
        got.len() == want,
        "fixed-base multiplication of the {query} query returned {} points for {want} scalars",
        got.len()
    );
    Ok(got)
}

/// Groth16 parameters for `circuit` under `toxic`, the multiplications done by `fb`.
pub fn generate<C: Circuit<Scalar>>(
    circuit: C,
    toxic: Toxic,
    fb: &dyn FixedBase,
) -> anyhow::Result<(Parameters<Bls12>, GenReport)> {
    let t0 = Instant::now();
    toxic.check()?;
    let cs = KeygenCs::synthesize(circuit).context("synthesis for parameter generation")?;
    let synthesis_ns = since(t0);
    let (num_inputs, num_aux, num_constraints) = (cs.num_inputs, cs.num_aux, cs.num_constraints);

    let t = Instant::now();
    let s = qap::scalars(cs, &toxic).context("evaluating the QAP at τ")?;
    let qap_ns = since(t);

    let g1 = toxic.g1.to_affine();
    let g2 = toxic.g2.to_affine();
    let mut queries = Vec::new();
    let mut g1_query = |name: &str, scalars: Vec<Scalar>| -> anyhow::Result<Vec<G1Affine>> {
        let t = Instant::now();
        let p = checked(name, scalars.len(), fb.mul_g1(&g1, &scalars))?;
        queries.push(QueryTiming {
            query: name.into(),
            points: p.len(),
            ns: since(t),
        });
        Ok(p)
    };
    let h = g1_query("h", s.h)?;
    let ic = g1_query("ic", s.ic)?;
    let l = g1_query("l", s.l)?;
    let a = g1_query("a", s.a)?;
    let b_g1 = g1_query("b_g1", s.b.clone())?;
    let t = Instant::now();
    let b_g2: Vec<G2Affine> = checked("b_g2", s.b.len(), fb.mul_g2(&g2, &s.b))?;
    queries.push(QueryTiming {
        query: "b_g2".into(),
        points: b_g2.len(),
        ns: since(t),
    });
    drop(s.b);

    let t = Instant::now();
    let vk = VerifyingKey::<Bls12> {
        alpha_g1: (g1 * toxic.alpha).to_affine(),
        beta_g1: (g1 * toxic.beta).to_affine(),
        beta_g2: (g2 * toxic.beta).to_affine(),
        gamma_g2: (g2 * toxic.gamma).to_affine(),
        delta_g1: (g1 * toxic.delta).to_affine(),
        delta_g2: (g2 * toxic.delta).to_affine(),
        ic,
    };
    let params = Parameters {
        vk,
        h: Arc::new(h),
        l: Arc::new(l),
        a: Arc::new(a),
        b_g1: Arc::new(b_g1),
        b_g2: Arc::new(b_g2),
    };
    let assembly_ns = since(t);
    let report = GenReport {
        fixed_base: fb.describe(),
        num_inputs,
        num_aux,
        num_constraints,
        domain_size: s.domain_size,
        synthesis_ns,
        qap_ns,
        queries,
        assembly_ns,
        total_ns: since(t0),
    };
    Ok((params, report))
}
