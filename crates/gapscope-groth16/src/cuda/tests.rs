//! The native prover against the CPU. On a machine without a GPU (CI) each test checks
//! that the absence is reported as an error that names it; on the GPU host they check
//! results.

use super::check::{fixed_base_checks, msm_checks, ntt_checks};
use super::ffi;
use super::*;
use crate::circuits::{CircuitKind, Gadget};
use crate::trace::drain_trace;
use crate::{prove_batch, verify_all};

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

#[test]
fn fixed_base_multiplication_matches_the_cpu() {
    match fixed_base_checks(9, 3) {
        Ok(checks) => {
            assert_eq!(checks.len(), 2);
            for c in &checks {
                assert!(c.equal, "{c:?}");
            }
        }
        Err(e) => {
            assert!(
                gpus().is_none(),
                "GPU present but the multiplication failed: {e}"
            );
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
    // One setup (params and the GPU's) serves both drop policies: for each, prove, verify,
    // then check where every inner span sits.
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
            let batch = circuits.len();
            let inputs: Vec<_> = circuits.iter().map(|c| c.public_inputs()).collect();
            // The concurrent split MSMs and the overlapping NTTs ride along with pinned
            // staging.
            let pinned = host_memory == HostMemory::Pinned;
            let opts = ProveOptions {
                drop,
                host_memory,
                msm_threads: if pinned { 4 } else { 1 },
                h_threads: if pinned { 2 } else { 1 },
                ntt: if pinned {
                    crate::NttSchedule::Overlap
                } else {
                    crate::NttSchedule::First
                },
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
            crate::dropper::wait_idle();
            let spans = drain_trace(out.trace);
            let named = |name: &str| {
                spans
                    .iter()
                    .find(|s| s.name == name)
                    .unwrap_or_else(|| panic!("{name} missing"))
            };
            let gpu_prove = named("gpu_prove");
            for name in [
                "entry",
                "prep",
                "split_vectors_alloc",
                "kernels",
                "assemble",
                "drop",
            ] {
                assert_eq!(named(name).parent, Some(gpu_prove.id), "{name}");
            }
            let kernels = named("kernels");
            for name in ["ntt_h", "msm_h", "msm_l", "msm_a", "msm_b_g1", "msm_b_g2"] {
                let s = named(name);
                assert_eq!(s.parent, Some(kernels.id), "{name}");
                assert!(
                    s.attrs.iter().any(|(k, _)| *k == "gpu_ms"),
                    "{name} has no gpu_ms"
                );
            }
            // The L query is split over every aux scalar of both circuits.
            let attr = |s: &crate::trace::SpanRecord, k: &str| -> u64 {
                match s.attrs.iter().find(|(key, _)| *key == k) {
                    Some((_, crate::trace::AttrValue::U64(v))) => *v,
                    other => panic!("{}: {k} is {other:?}", s.name),
                }
            };
            let l = named("msm_l");
            assert_eq!(
                attr(l, "ones") + attr(l, "zeros") + attr(l, "tail"),
                params.l.len() as u64 * batch as u64
            );
            let prep = named("prep");
            assert_ne!(prep.thread_id, gpu_prove.thread_id);
            let packs: Vec<_> = spans.iter().filter(|s| s.name == "pack").collect();
            assert_eq!(packs.len(), 3 * batch);
            assert!(packs.iter().all(|p| p.parent == Some(prep.id)));
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
