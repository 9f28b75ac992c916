//! The measured batch: synthesis of every circuit, the backend's proof behind the
//! `gpu_prove` wrapper, the assignments' drop; its backends, their one-time setup, and the
//! verification of what they made.

use bellperson::groth16::{prepare_verifying_key, verify_proof, Proof};
use blstrs::{Bls12, Scalar};
use ff::Field;
use rayon::prelude::*;

use crate::circuits::CircuitInstance;
use crate::cs::Assignment;
#[cfg(feature = "cuda")]
use crate::cuda;
use crate::knobs::{BackendKind, ProveOptions};
use crate::params::Groth16Params;
#[cfg(feature = "supraseal")]
use crate::supraseal;
use crate::trace::{intern, Span};
use crate::{cpu, dropper, spans};

/// A proof as the prover makes and verifies it.
pub type Groth16Proof = Proof<Bls12>;

#[derive(Debug, thiserror::Error)]
pub enum ProverError {
    #[error("synthesis of circuit {index} failed: {source}")]
    Synthesis {
        index: usize,
        source: bellperson::SynthesisError,
    },
    #[error("backend {backend}: {message}")]
    Backend {
        backend: &'static str,
        message: String,
    },
    #[error("backend {0} is not compiled into this build: {1}")]
    Unavailable(&'static str, String),
}

/// A Groth16 backend: everything after synthesis. Implementations open the children of
/// `gpu_prove` (entry, prep, split_vectors_alloc, kernels, b_g2_msm, assemble, drop)
/// with these exact names so backends can be diffed against each other.
pub trait Backend: Send + Sync {
    fn kind(&self) -> BackendKind;

    /// Proves every assignment with randomisers `r_s[i]`, `s_s[i]`. Runs inside the
    /// `gpu_prove` span opened by the caller; must not free `assignments` (the caller
    /// does, under the drop policy, in `drop_assignments`).
    fn prove(
        &self,
        params: &Groth16Params,
        assignments: &[Assignment],
        r_s: &[Scalar],
        s_s: &[Scalar],
        opts: ProveOptions,
    ) -> Result<Vec<Proof<Bls12>>, ProverError>;
}

/// Builds the backend of `kind`, or says why this build has none.
pub fn backend(kind: BackendKind) -> Result<Box<dyn Backend>, ProverError> {
    match kind {
        BackendKind::Cpu => Ok(Box::new(cpu::CpuBackend::new())),
        BackendKind::Cuda => cuda_backend(),
        BackendKind::Supraseal => supraseal_backend(),
    }
}

#[cfg(feature = "cuda")]
fn cuda_backend() -> Result<Box<dyn Backend>, ProverError> {
    Ok(Box::new(cuda::CudaBackend::new()))
}

#[cfg(not(feature = "cuda"))]
fn cuda_backend() -> Result<Box<dyn Backend>, ProverError> {
    Err(ProverError::Unavailable(
        "cuda",
        "rebuild with `--features cuda` after `eval \"$(scripts/cuda-toolkit.sh)\"` \
         (docs/gpu.md)"
            .into(),
    ))
}

#[cfg(feature = "supraseal")]
fn supraseal_backend() -> Result<Box<dyn Backend>, ProverError> {
    // No GPU check here: the runner builds every variant's backend before params are made,
    // and a missing GPU must fail that variant's reps, not the run.
    Ok(Box::new(supraseal::SuprasealBackend::new()))
}

#[cfg(not(feature = "supraseal"))]
fn supraseal_backend() -> Result<Box<dyn Backend>, ProverError> {
    Err(ProverError::Unavailable(
        "supraseal",
        "rebuild with `--features supraseal` after `eval \"$(scripts/cuda-toolkit.sh)\"` \
         (docs/gpu.md)"
            .into(),
    ))
}

/// What a backend's one-time setup took (SRS load, warm-up proof), outside measured reps.
#[derive(Debug, Clone)]
pub struct SetupSummary {
    pub total_ns: u64,
    /// Human-readable breakdown for the progress line.
    pub text: String,
    /// True when this process had done it before (nothing was measured).
    pub reused: bool,
}

/// One-time setup of backend `kind` for `params` (read from one of `params_files`), with
/// `warmup` proved once and verified: `None` for backends that need none.
pub fn setup(
    kind: BackendKind,
    params_files: &[std::path::PathBuf],
    params: &Groth16Params,
    warmup: CircuitInstance,
) -> Result<Option<SetupSummary>, ProverError> {
    match kind {
        BackendKind::Cpu => Ok(None),
        BackendKind::Cuda => cuda_setup(params, warmup),
        BackendKind::Supraseal => supraseal_setup(params_files, params, warmup),
    }
}

#[cfg(feature = "cuda")]
fn cuda_setup(
    params: &Groth16Params,
    warmup: CircuitInstance,
) -> Result<Option<SetupSummary>, ProverError> {
    let r = cuda::setup(params, warmup)?;
    Ok(Some(SetupSummary {
        total_ns: r.total_ns(),
        text: r.to_string(),
        reused: r.reused,
    }))
}

#[cfg(not(feature = "cuda"))]
fn cuda_setup(_: &Groth16Params, _: CircuitInstance) -> Result<Option<SetupSummary>, ProverError> {
    cuda_backend().map(|_| None)
}

#[cfg(feature = "supraseal")]
fn supraseal_setup(
    files: &[std::path::PathBuf],
    params: &Groth16Params,
    warmup: CircuitInstance,
) -> Result<Option<SetupSummary>, ProverError> {
    let r = supraseal::setup_from(files, params, warmup)?;
    Ok(Some(SetupSummary {
        total_ns: r.total_ns(),
        text: r.to_string(),
        reused: r.reused,
    }))
}

#[cfg(not(feature = "supraseal"))]
fn supraseal_setup(
    _: &[std::path::PathBuf],
    _: &Groth16Params,
    _: CircuitInstance,
) -> Result<Option<SetupSummary>, ProverError> {
    supraseal_backend().map(|_| None)
}

/// The CPU this thread runs on (-1 when the kernel cannot say).
fn current_cpu() -> i64 {
    // SAFETY: no arguments; returns -1 on error.
    i64::from(unsafe { libc::sched_getcpu() })
}

/// Synthesises every circuit in parallel: a `synthesis` span with one `synthesis[i]`
/// child per circuit on the worker thread that ran it, with the CPU it started and ended
/// on (`cpu_start`, `cpu_end`).
pub fn synthesize_all(circuits: Vec<CircuitInstance>) -> Result<Vec<Assignment>, ProverError> {
    let s = Span::enter(spans::SYNTHESIS);
    s.set_attr("circuits", circuits.len());
    let ctx = s.context();
    circuits
        .into_par_iter()
        .enumerate()
        .map(|(i, c)| {
            let g = Span::child_of(intern(&format!("synthesis[{i}]")), ctx);
            // Which CPU ran it: on hosts whose CPUs differ in memory speed, synthesis time
            // follows the placement.
            g.set_attr("cpu_start", current_cpu());
            let a = Assignment::synthesize(c)
                .map_err(|source| ProverError::Synthesis { index: i, source });
            g.set_attr("cpu_end", current_cpu());
            a
        })
        .collect()
}

/// Outcome of one `prove` call: the trace holding its spans, and the proofs or error.
pub struct BatchOutcome {
    pub trace: u64,
    pub result: Result<Vec<Proof<Bls12>>, ProverError>,
}

/// The whole measured batch: `prove` → synthesis, gpu_prove, drop_assignments.
/// Spans are recorded even when proving fails, so a failed rep shows how far it got.
pub fn prove_batch(
    backend: &dyn Backend,
    params: &Groth16Params,
    circuits: Vec<CircuitInstance>,
    opts: ProveOptions,
    rng: &mut impl rand::RngCore,
) -> BatchOutcome {
    let n = circuits.len();
    let r_s: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut *rng)).collect();
    let s_s: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut *rng)).collect();
    let prove = Span::enter(spans::PROVE);
    prove.set_attr("circuits", n);
    prove.set_attr("backend", backend.kind().as_str());
    let trace = prove.trace();
    let result = synthesize_all(circuits).and_then(|assignments| {
        let proofs = {
            let g = Span::enter(spans::GPU_PROVE);
            g.set_attr("backend", backend.kind().as_str());
            backend.prove(params, &assignments, &r_s, &s_s, opts)
        };
        let bytes: u64 = assignments.iter().map(Assignment::heap_bytes).sum();
        dropper::dispose(opts.drop, spans::DROP_ASSIGNMENTS, bytes, assignments);
        proofs
    });
    drop(prove);
    BatchOutcome { trace, result }
}

/// Outcome of a synthesis-only batch: the trace and the assignments.
pub struct SynthesisOutcome {
    pub trace: u64,
    pub result: Result<Vec<Assignment>, ProverError>,
}

/// `prove` → synthesis alone, for a GPU backend's reps under the emulator: CUDA does not
/// run under valgrind, and synthesis is the same code on every backend. The root span
/// says so (`scope = synthesis`); no proof is made, so the caller checks the
/// assignments instead ([`Assignment::check_satisfied`]).
pub fn synthesize_batch(backend: BackendKind, circuits: Vec<CircuitInstance>) -> SynthesisOutcome {
    let prove = Span::enter(spans::PROVE);
    prove.set_attr("circuits", circuits.len());
    prove.set_attr("backend", backend.as_str());
    prove.set_attr("scope", "synthesis");
    let trace = prove.trace();
    let result = synthesize_all(circuits);
    drop(prove);
    SynthesisOutcome { trace, result }
}

/// Verifies each proof against natively computed public inputs. Returns the index and
/// reason of the first failure.
pub fn verify_all(
    params: &Groth16Params,
    proofs: &[Proof<Bls12>],
    public_inputs: &[Vec<Scalar>],
) -> Result<(), String> {
    if proofs.len() != public_inputs.len() {
        return Err(format!(
            "{} proofs for {} circuits",
            proofs.len(),
            public_inputs.len()
        ));
    }
    let pvk = prepare_verifying_key(&params.vk);
    for (i, (p, inp)) in proofs.iter().zip(public_inputs).enumerate() {
        match verify_proof(&pvk, p, inp) {
            Ok(true) => {}
            Ok(false) => return Err(format!("proof {i} does not verify")),
            Err(e) => return Err(format!("proof {i}: verifier error: {e}")),
        }
    }
    Ok(())
}
