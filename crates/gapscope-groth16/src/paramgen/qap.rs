//! The QAP at τ, on the CPU: the Lagrange basis of bellperson's evaluation domain at τ,
//! each variable's A, B and C polynomials there, and from them exactly the scalars
//! bellperson 0.27's generator multiplies the generators by (its
//! `groth16/generator.rs`):
//!
//! - H: τ^i · Z(τ)/δ for i < m − 1, m the domain size, Z(τ) = τ^m − 1;
//! - IC: (β·a_i(τ) + α·b_i(τ) + c_i(τ))/γ for inputs, L: the same over δ for aux;
//! - A: a_i(τ), B (G1 and G2): b_i(τ), inputs then aux, zeros left out (bellperson
//!   drops the identity points they give).
//!
//! bellperson gets the Lagrange values by an inverse FFT of τ's powers; here they come
//! in closed form, L_j(τ) = ω^j·Z(τ) / (m·(τ − ω^j)), one batch inversion per chunk.

use blstrs::Scalar;
use ff::{Field, PrimeField};
use rayon::prelude::*;

use super::keygen::{KeygenCs, Term};
use super::normalize::invert_all;
use super::toxic::Toxic;
use bellperson::SynthesisError;

/// Elements per parallel chunk (one pow and one inversion each).
const CHUNK: usize = 1 << 14;

/// The scalars of every query, in the order of the params file.
pub struct QapScalars {
    pub domain_size: usize,
    pub h: Vec<Scalar>,
    pub ic: Vec<Scalar>,
    pub l: Vec<Scalar>,
    /// Non-zero a_i(τ), inputs then aux.
    pub a: Vec<Scalar>,
    /// Non-zero b_i(τ), inputs then aux (the B query in G1 and in G2).
    pub b: Vec<Scalar>,
}

/// bellperson's domain for `n` constraints: size m = 2^exp ≥ n and its generator ω
/// (`EvaluationDomain::from_coeffs`).
pub fn domain(n: usize) -> Result<(usize, Scalar), SynthesisError> {
    let m = n.max(1).next_power_of_two();
    let exp = m.trailing_zeros();
    if exp >= Scalar::S {
        return Err(SynthesisError::PolynomialDegreeTooLarge);
    }
    let mut omega = Scalar::ROOT_OF_UNITY;
    for _ in exp..Scalar::S {
        omega = omega.square();
    }
    Ok((m, omega))
}

/// start·x^i for i < n, in parallel chunks.
pub fn powers(start: Scalar, x: Scalar, n: usize) -> Vec<Scalar> {
    let mut v = vec![Scalar::ZERO; n];
    v.par_chunks_mut(CHUNK).enumerate().for_each(|(c, out)| {
        let mut p = start * x.pow_vartime([(c * CHUNK) as u64]);
        for e in out {
            *e = p;
            p *= x;
        }
    });
    v
}

/// L_j(τ) for the m-point domain of ω, j < m.
pub fn lagrange_at(tau: Scalar, m: usize, omega: Scalar) -> Vec<Scalar> {
    let z = tau.pow_vartime([m as u64]) - Scalar::ONE;
    let mut out = powers(Scalar::ONE, omega, m);
    if bool::from(z.is_zero()) {
        // τ is a point ω^k of the domain: L_j(τ) = [j = k].
        for w in out.iter_mut() {
            *w = Scalar::from(u64::from(*w == tau));
        }
        return out;
    }
    let z_over_m = z * Scalar::from(m as u64).invert().unwrap();
    out.par_chunks_mut(CHUNK)
        .for_each_init(Vec::new, |scratch, ws| {
            let mut d: Vec<Scalar> = ws.iter().map(|w| tau - w).collect();
            invert_all(&mut d, scratch);
            for (w, di) in ws.iter_mut().zip(&d) {
                *w = *w * di * z_over_m;
            }
        });
    out
}

/// Σ coeff · L_row(τ) per variable (column order: inputs, then aux).
fn evaluate(mut terms: Vec<Term>, lagrange: &[Scalar], num_inputs: usize, n: usize) -> Vec<Scalar> {
    terms.par_iter_mut().for_each(|t| {
        let l = lagrange[t.row as usize];
        t.coeff = if t.coeff == Scalar::ONE {
            l
        } else {
            t.coeff * l
        };
    });
    // Summing is one addition per term; the multiplications above were the work.
    let mut out = vec![Scalar::ZERO; n];
    for t in &terms {
        out[t.column(num_inputs)] += t.coeff;
    }
    out
}

fn non_zero(v: &[Scalar]) -> Vec<Scalar> {
    v.par_iter()
        .filter(|x| !bool::from(x.is_zero()))
        .copied()
        .collect()
}

/// Every query's scalars for `cs` under `t` (checked: γ, δ invertible).
pub fn scalars(cs: KeygenCs, t: &Toxic) -> Result<QapScalars, SynthesisError> {
    let (m, omega) = domain(cs.num_constraints)?;
    let gamma_inv =
        Option::<Scalar>::from(t.gamma.invert()).ok_or(SynthesisError::UnexpectedIdentity)?;
    let delta_inv =
        Option::<Scalar>::from(t.delta.invert()).ok_or(SynthesisError::UnexpectedIdentity)?;
    let z = t.tau.pow_vartime([m as u64]) - Scalar::ONE;
    let (h, lagrange) = rayon::join(
        || powers(z * delta_inv, t.tau, m - 1),
        || lagrange_at(t.tau, m, omega),
    );
    let (ni, n) = (cs.num_inputs, cs.num_vars());
    let [ta, tb, tc] = cs.terms;
    let (at, (bt, ct)) = rayon::join(
        || evaluate(ta, &lagrange, ni, n),
        || {
            rayon::join(
                || evaluate(tb, &lagrange, ni, n),
                || evaluate(tc, &lagrange, ni, n),
            )
        },
    );
    drop(lagrange);
    let (alpha, beta) = (t.alpha, t.beta);
    let ext = |i: usize, inv: &Scalar| (at[i] * beta + bt[i] * alpha + ct[i]) * inv;
    let ic: Vec<Scalar> = (0..ni)
        .into_par_iter()
        .map(|i| ext(i, &gamma_inv))
        .collect();
    let l: Vec<Scalar> = (ni..n)
        .into_par_iter()
        .map(|i| ext(i, &delta_inv))
        .collect();
    // bellperson refuses an aux variable in no constraint (its L point would be the
    // identity): the L query must be dense.
    if l.par_iter().any(|x| bool::from(x.is_zero())) {
        return Err(SynthesisError::UnconstrainedVariable);
    }
    let (a, b) = rayon::join(|| non_zero(&at), || non_zero(&bt));
    Ok(QapScalars {
        domain_size: m,
        h,
        ic,
        l,
        a,
        b,
    })
}
