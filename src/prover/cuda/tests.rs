//! The native prover against the CPU. On a machine without a GPU (CI) each test checks
//! that the absence is reported as an error that names it; on the GPU host they check
//! results.

use super::check::{msm_checks, ntt_checks};
use super::ffi;
use super::*;
use crate::prover::circuits::{CircuitKind, Gadget};
use crate::prover::{prove_batch, verify_all};
use crate::trace::drain_trace;

/// `Some(n)` GPUs, or `None` after checking the error says there is no GPU.
fn gpus() -> Option<u32> {
    match ffi::device_count() {
        Ok(n) => Some(n),
        Err(e) => {
            assert!(e.is_no_gpu(), "not a no-GPU error: {e}");
            None
        }
    }
}

#[test]
fn msms_match_the_cpu_for_every_scalar_pattern() {
    match msm_checks(10, 1) {
        Ok(checks) => {
            assert!(gpus().is_some());
            assert_eq!(checks.len(), 10);
            for c in &checks {
                assert!(c.equal, "{c:?}");
            }
        }
        Err(e) => {
            assert!(gpus().is_none(), "GPU present but the MSM failed: {e}");
            assert!(e.is_no_gpu(), "{e}");
        }
    }
}

#[test]
fn ntts_match_bellperson() {
    match ntt_checks(10, 2) {
        Ok(checks) => {
            assert_eq!(checks.len(), 4);
            for c in &checks {
                assert!(c.equal, "{c:?}");
            }
        }
        Err(e) => {
            assert!(gpus().is_none(), "GPU present but the NTT failed: {e}");
            assert!(e.is_no_gpu(), "{e}");
        }
    }
}

fn generate_in_memory(c: &CircuitInstance) -> Result<Groth16Params, bellperson::SynthesisError> {
    bellperson::groth16::generate_random_parameters::<Bls12, _, _>(
        c.blank(),
        &mut rand::rngs::OsRng,
    )
}

fn circuit(seed: u64) -> CircuitInstance {
    CircuitInstance::new(CircuitKind::Porep, 10, Gadget::AddToLc, seed).unwrap()
}

#[test]
fn proofs_verify_with_inner_spans_under_gpu_prove() {
    let params = generate_in_memory(&circuit(0)).unwrap();
    let setup_result = setup(&params, circuit(0));
    if gpus().is_none() {
        let e = setup_result
            .expect_err("no GPU: setup must fail")
            .to_string();
        assert!(e.contains("no usable GPU"), "{e}");
        return;
    }
    setup_result.unwrap();
    for drop in [DropPolicy::Sync, DropPolicy::Async] {
        for host_memory in [HostMemory::Pageable, HostMemory::Pinned] {
            let circuits: Vec<_> = (1..4).map(circuit).collect();
            let inputs: Vec<_> = circuits.iter().map(|c| c.public_inputs()).collect();
            let opts = ProveOptions {
                drop,
                host_memory,
                ..ProveOptions::default()
            };
            let out = prove_batch(
                &CudaBackend,
                &params,
                circuits,
                opts,
                &mut rand::rngs::OsRng,
            );
            let proofs = out.result.unwrap();
            verify_all(&params, &proofs, &inputs).unwrap();
            crate::prover::dropper::wait_idle();
            let spans = drain_trace(out.trace);
            let gpu_prove = spans.iter().find(|s| s.name == "gpu_prove").unwrap();
            for name in [
                "entry",
                "prep",
                "split_vectors_alloc",
                "kernels",
                "assemble",
                "drop",
            ] {
                let s = spans
                    .iter()
                    .find(|s| s.name == name)
                    .unwrap_or_else(|| panic!("{name} missing"));
                assert_eq!(s.parent, Some(gpu_prove.id), "{name}");
            }
            let kernels = spans.iter().find(|s| s.name == "kernels").unwrap();
            for name in ["ntt_h", "msm_h", "msm_l", "msm_a", "msm_b_g1", "msm_b_g2"] {
                let s = spans.iter().find(|s| s.name == name).unwrap();
                assert_eq!(s.parent, Some(kernels.id), "{name}");
                assert!(
                    s.attrs.iter().any(|(k, _)| *k == "gpu_ms"),
                    "{name} has no gpu_ms"
                );
            }
            let prep = spans.iter().find(|s| s.name == "prep").unwrap();
            assert_ne!(prep.thread_id, gpu_prove.thread_id);
            let d = spans.iter().find(|s| s.name == "drop").unwrap();
            assert_eq!(
                d.thread_id != gpu_prove.thread_id,
                drop == DropPolicy::Async
            );
        }
    }
}

#[test]
fn params_of_another_size_fail_the_rep_with_a_message() {
    let params = generate_in_memory(&circuit(0)).unwrap();
    if gpus().is_none() || setup(&params, circuit(0)).is_err() {
        return;
    }
    let big = CircuitInstance::new(CircuitKind::Porep, 11, Gadget::AddToLc, 0).unwrap();
    let a = Assignment::synthesize(big).unwrap();
    let one = [Scalar::ONE];
    let e = CudaBackend
        .prove(
            &params,
            std::slice::from_ref(&a),
            &one,
            &one,
            ProveOptions::default(),
        )
        .expect_err("shapes differ")
        .to_string();
    assert!(e.contains("SRS needs"), "{e}");
}

use ff::Field;
