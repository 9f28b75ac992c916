//! The verified warm-up proof every GPU backend runs at setup, so that module loading,
//! first allocations and twiddle tables stay out of measured reps, and a GPU that computes
//! wrong results is caught before the first rep.

use std::time::{Duration, Instant};

use bellperson::groth16::Proof;
use blstrs::{Bls12, Scalar};

use super::{Assignment, Groth16Params, ProverError};
use crate::trace::{self, Span};

/// Calls `prove` with fresh randomness (r, s) under a `root` span whose spans are dropped
/// (they belong to no rep), then verifies the proofs against `inputs`. Returns the time it
/// took, and the failure (`backend`'s error, with `context` after a verification failure).
pub fn verified(
    params: &Groth16Params,
    assignment: &Assignment,
    inputs: Vec<Scalar>,
    root: &'static str,
    backend: &'static str,
    context: &str,
    prove: impl FnOnce(&Assignment, Scalar, Scalar) -> Result<Vec<Proof<Bls12>>, ProverError>,
) -> (Duration, Result<(), ProverError>) {
    let t = Instant::now();
    let mut rng = rand::rngs::OsRng;
    let (r, s) = (
        <Scalar as ff::Field>::random(&mut rng),
        <Scalar as ff::Field>::random(&mut rng),
    );
    let span = Span::enter(root);
    let trace_id = span.trace();
    let proved = prove(assignment, r, s);
    drop(span);
    let _ = trace::drain_trace(trace_id);
    let elapsed = t.elapsed();
    let verdict = proved.and_then(|proofs| {
        super::verify_all(params, &proofs, &[inputs]).map_err(|e| ProverError::Backend {
            backend,
            message: format!("the warm-up proof does not verify ({e}){context}"),
        })
    });
    (elapsed, verdict)
}
