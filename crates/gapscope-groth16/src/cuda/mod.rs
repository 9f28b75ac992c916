//! `backend = "cuda"`: gapscope's native Groth16 prover (cuda/prover/gs_prover.cu) over
//! sppark's NTT and MSM, with every phase opened as a span from inside the C++ code:
//!
//! ```text
//! gpu_prove
//! ├─ entry                (C++) lock, shape checks against the SRS, GPU memory
//! ├─ split_vectors_alloc  (C++) split vectors of the L, A, B queries, device buffers for H
//! ├─ prep                 (C++, prep thread; a `pack` span per circuit and query on its
//! │                       workers) scalars split into 0, 1 and the rest (the tail)
//! ├─ blinding             (Rust, its own thread, beside the C++ call) the terms of each
//! │                       proof that need only r, s and the verifying key
//! ├─ kernels              (C++, one per GPU thread) ntt_h (its own thread with
//! │                       ntt = overlap), msm_h (ntt_wait), prep_wait, msm_l, msm_a,
//! │                       msm_b_g1, msm_b_g2, each with `gpu_ms`; the split MSMs also
//! │                       with `ones`, `zeros` and `tail` scalar counts
//! ├─ assemble             (Rust) proofs from the MSM results and the blinding terms
//! └─ drop                 (C++) the call's buffers, sync or on the drop thread
//! ```
//!
//! The SRS is uploaded once per process ([`setup`], outside measured reps) and stays on
//! the GPUs; [`CudaBackend::prove`] finds it by the verifying key of the params it gets.

pub mod check;
pub mod ffi;
mod fixed_base;

pub use fixed_base::fixed_base;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bellperson::groth16::{Proof, VerifyingKey};
use blstrs::{Bls12, Scalar};

use super::assemble::{self, MsmParts};
use super::{
    Assignment, Backend, BackendKind, CircuitInstance, DropPolicy, Groth16Params, HostMemory,
    NttSchedule, ProveOptions, ProverError,
};
use crate::trace::Span;

fn err(message: impl std::fmt::Display) -> ProverError {
    ProverError::Backend {
        backend: "cuda",
        message: message.to_string(),
    }
}

fn native_err(e: ffi::NativeError) -> ProverError {
    if e.is_no_gpu() {
        err(format!(
            "no usable GPU: {e}; the cuda backend needs an NVIDIA GPU and driver (use backend = \"cpu\" here)"
        ))
    } else if e.is_out_of_memory() {
        err(format!("out of memory: {e}"))
    } else {
        err(e)
    }
}

struct Loaded {
    vk: VerifyingKey<Bls12>,
    srs: ffi::Srs,
}

static LOADED: Mutex<Vec<Arc<Loaded>>> = Mutex::new(Vec::new());

fn find_loaded(vk: &VerifyingKey<Bls12>) -> Option<Arc<Loaded>> {
    LOADED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .find(|l| &l.vk == vk)
        .cloned()
}

/// The native backend. Stateless: SRSs live in a process-wide registry, see [`setup`].
#[derive(Debug, Default)]
pub struct CudaBackend;

impl CudaBackend {
    pub fn new() -> Self {
        CudaBackend
    }
}

/// The knobs of one call, as the C++ side takes them.
fn native_options(opts: &ProveOptions) -> ffi::NativeOptions {
    ffi::NativeOptions {
        pinned: (opts.host_memory == HostMemory::Pinned) as u32,
        streams: opts.streams,
        gpus: opts.gpus,
        split_threads: opts.msm_threads,
        ntt_overlap: (opts.ntt == NttSchedule::Overlap) as u32,
        h_threads: opts.h_threads,
        prep_threads: opts.prep_threads,
    }
}

impl Backend for CudaBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Cuda
    }

    fn prove(
        &self,
        params: &Groth16Params,
        assignments: &[Assignment],
        r_s: &[Scalar],
        s_s: &[Scalar],
        opts: ProveOptions,
    ) -> Result<Vec<Proof<Bls12>>, ProverError> {
        if r_s.len() != assignments.len() || s_s.len() != assignments.len() {
            return Err(err("one (r, s) pair per circuit is required"));
        }
        assemble::check_delta(&params.vk).map_err(err)?;
        let loaded = find_loaded(&params.vk).ok_or_else(|| {
            err("no SRS on the GPU for these params: prover::cuda::setup runs before the first rep")
        })?;
        let vk = &params.vk;
        let parent = crate::trace::current();
        let (msms, batch, blinding) = std::thread::scope(|sc| {
            let blinding = sc.spawn(move || {
                let s = parent.map(|p| Span::child_of(super::spans::BLINDING, p));
                let b: Vec<_> = (r_s.iter().zip(s_s))
                    .map(|(r, s)| assemble::Blinding::new(vk, *r, *s))
                    .collect();
                drop(s);
                b
            });
            let (msms, batch) = ffi::prove(&loaded.srs, assignments, native_options(&opts));
            (msms, batch, blinding.join())
        });
        let proofs = msms.map_err(native_err).and_then(|m| {
            let blinding = blinding.map_err(|_| err("the blinding thread panicked"))?;
            let _s = Span::enter(super::spans::ASSEMBLE);
            let parts = |i: usize| MsmParts {
                h: m.h[i],
                l: m.l[i],
                a: m.a[i],
                b_g1: m.b_g1[i],
                b_g2: m.b_g2[i],
            };
            // One thread per circuit: each proof is two scalar multiplications and three
            // inversions once the blinding terms are known.
            std::thread::scope(|sc| {
                let handles: Vec<_> = (1..blinding.len())
                    .map(|i| {
                        let (b, p) = (&blinding[i], parts(i));
                        sc.spawn(move || b.proof(&p))
                    })
                    .collect();
                let mut proofs = Vec::with_capacity(blinding.len());
                if let Some(b) = blinding.first() {
                    proofs.push(b.proof(&parts(0)));
                }
                for h in handles {
                    proofs.push(h.join().map_err(|_| err("proof assembly panicked"))?);
                }
                Ok(proofs)
            })
        });
        if let Some(b) = batch {
            b.free(opts.drop == DropPolicy::Async);
        }
        proofs
    }
}

/// How long the SRS upload and the first proof took, outside any measured rep.
#[derive(Debug, Clone)]
pub struct SetupReport {
    pub gpus: u32,
    pub srs_upload: Duration,
    pub first_proof: Duration,
    pub reused: bool,
}

impl SetupReport {
    pub fn total_ns(&self) -> u64 {
        (self.srs_upload + self.first_proof).as_nanos() as u64
    }
}

impl std::fmt::Display for SetupReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.reused {
            return write!(f, "SRS already on the GPU");
        }
        write!(
            f,
            "SRS on {} GPU(s) in {:.2?}, first proof {:.2?}",
            self.gpus, self.srs_upload, self.first_proof
        )
    }
}

/// Uploads the SRS of `params` to every GPU and proves `warmup` once (verified), so
/// that module loading, NTT twiddles and first allocations stay out of measured reps.
/// Idempotent per verifying key.
pub fn setup(params: &Groth16Params, warmup: CircuitInstance) -> Result<SetupReport, ProverError> {
    static SETUP: Mutex<()> = Mutex::new(());
    let _serial = SETUP.lock().unwrap_or_else(|e| e.into_inner());
    if find_loaded(&params.vk).is_some() {
        return Ok(SetupReport {
            gpus: 0,
            srs_upload: Duration::ZERO,
            first_proof: Duration::ZERO,
            reused: true,
        });
    }
    let inputs = warmup.public_inputs();
    let assignment = Assignment::synthesize(warmup)
        .map_err(|e| err(format!("warm-up synthesis failed: {e}")))?;
    ffi::device_count().map_err(native_err)?;
    let t = Instant::now();
    let srs = ffi::Srs::load(params, 0).map_err(native_err)?;
    let srs_upload = t.elapsed();
    let gpus = srs.gpus();
    let loaded = Arc::new(Loaded {
        vk: params.vk.clone(),
        srs,
    });
    LOADED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(loaded.clone());

    // Both staging modes once, so pinned buffers are allocated here and not in a rep.
    let (first_proof, verdict) = super::warmup::verified(
        params,
        &assignment,
        inputs,
        "cuda_setup",
        "cuda",
        "",
        |a, r, s| {
            let mut proved = Ok(Vec::new());
            for host_memory in [HostMemory::Pageable, HostMemory::Pinned] {
                let opts = ProveOptions {
                    host_memory,
                    ..ProveOptions::default()
                };
                proved = CudaBackend.prove(params, std::slice::from_ref(a), &[r], &[s], opts);
                if proved.is_err() {
                    break;
                }
            }
            proved
        },
    );
    if let Err(e) = verdict {
        LOADED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|l| !Arc::ptr_eq(l, &loaded));
        return Err(e);
    }
    Ok(SetupReport {
        gpus,
        srs_upload,
        first_proof,
        reused: false,
    })
}

/// Waits for buffers handed to the native drop thread (end of a run, tests).
pub fn wait_for_drops() {
    ffi::wait_for_drops();
}

#[cfg(test)]
mod tests;
