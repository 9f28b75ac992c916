use super::*;
use crate::trace::drain_trace;
use blstrs::{Bls12, Scalar};
use ff::Field;

fn params_for(c: &CircuitInstance) -> Groth16Params {
    let mut rng = rand::rngs::OsRng;
    bellperson::groth16::generate_random_parameters::<Bls12, _, _>(c.blank(), &mut rng).unwrap()
}

fn run(policy: DropPolicy) -> (Vec<crate::trace::SpanRecord>, Result<(), String>) {
    let circuits: Vec<_> = (0..2)
        .map(|i| CircuitInstance::new(CircuitKind::Porep, 10, Gadget::Lc, i).unwrap())
        .collect();
    let params = params_for(&circuits[0]);
    let inputs: Vec<_> = circuits.iter().map(|c| c.public_inputs()).collect();
    let b = backend(BackendKind::Cpu).unwrap();
    let out = prove_batch(
        b.as_ref(),
        &params,
        circuits,
        ProveOptions {
            drop: policy,
            ..ProveOptions::default()
        },
        &mut rand::rngs::OsRng,
    );
    dropper::wait_idle();
    let spans = drain_trace(out.trace);
    let v = out
        .result
        .map_err(|e| e.to_string())
        .and_then(|p| verify_all(&params, &p, &inputs));
    (spans, v)
}

fn parent_name<'a>(
    spans: &'a [crate::trace::SpanRecord],
    s: &crate::trace::SpanRecord,
) -> Option<&'a str> {
    s.parent
        .and_then(|p| spans.iter().find(|x| x.id == p))
        .map(|p| p.name)
}

#[test]
fn cpu_backend_proofs_verify_and_the_span_tree_is_canonical() {
    for policy in [DropPolicy::Sync, DropPolicy::Async] {
        let (spans, verified) = run(policy);
        verified.unwrap();
        let expect = [
            ("synthesis", "prove"),
            ("synthesis[0]", "synthesis"),
            ("synthesis[1]", "synthesis"),
            ("gpu_prove", "prove"),
            ("entry", "gpu_prove"),
            ("prep", "gpu_prove"),
            ("split_vectors_alloc", "gpu_prove"),
            ("kernels", "gpu_prove"),
            ("ntt_h", "kernels"),
            ("msm_h", "kernels"),
            ("msm_l", "kernels"),
            ("msm_a", "kernels"),
            ("msm_b_g1", "kernels"),
            ("b_g2_msm", "gpu_prove"),
            ("assemble", "gpu_prove"),
            ("drop", "gpu_prove"),
            ("drop_assignments", "prove"),
        ];
        for (name, parent) in expect {
            let s = spans
                .iter()
                .find(|s| s.name == name)
                .unwrap_or_else(|| panic!("{policy:?}: span {name} missing"));
            assert_eq!(
                parent_name(&spans, s),
                Some(parent),
                "{policy:?}: parent of {name}"
            );
        }
        let prove = spans.iter().find(|s| s.name == "prove").unwrap();
        let drop_span = spans.iter().find(|s| s.name == "drop").unwrap();
        match policy {
            DropPolicy::Sync => assert_eq!(drop_span.thread_id, prove.thread_id),
            DropPolicy::Async => assert_eq!(&*drop_span.thread_name, "gapscope-drop"),
        }
    }
}

#[test]
fn a_wrong_proof_does_not_verify() {
    let c = CircuitInstance::new(CircuitKind::Porep, 10, Gadget::AddToLc, 0).unwrap();
    let params = params_for(&c);
    let inputs = vec![c.public_inputs()];
    let b = backend(BackendKind::Cpu).unwrap();
    let out = prove_batch(
        b.as_ref(),
        &params,
        vec![c],
        ProveOptions::default(),
        &mut rand::rngs::OsRng,
    );
    let mut proofs = out.result.unwrap();
    verify_all(&params, &proofs, &inputs).unwrap();
    let mut wrong = inputs.clone();
    wrong[0][0] += Scalar::ONE;
    assert!(verify_all(&params, &proofs, &wrong).is_err());
    proofs[0].a = proofs[0].c;
    assert!(verify_all(&params, &proofs, &inputs).is_err());
    drain_trace(out.trace);
}

#[test]
fn params_that_do_not_fit_are_refused_by_the_backend() {
    let small = CircuitInstance::new(CircuitKind::Porep, 10, Gadget::AddToLc, 0).unwrap();
    let big = CircuitInstance::new(CircuitKind::Porep, 11, Gadget::AddToLc, 0).unwrap();
    let params = params_for(&small);
    let b = backend(BackendKind::Cpu).unwrap();
    let out = prove_batch(
        b.as_ref(),
        &params,
        vec![big],
        ProveOptions::default(),
        &mut rand::rngs::OsRng,
    );
    let e = out.result.expect_err("must fail").to_string();
    assert!(e.contains("params do not fit"), "{e}");
    let spans = drain_trace(out.trace);
    assert!(spans.iter().any(|s| s.name == "entry"));
}

#[test]
fn synthesis_alone_opens_prove_and_synthesis_only_and_its_check_catches_a_bad_constraint() {
    let circuits: Vec<_> = (0..2)
        .map(|i| CircuitInstance::new(CircuitKind::Porep, 10, Gadget::Lc, i).unwrap())
        .collect();
    let out = synthesize_batch(BackendKind::Cuda, circuits);
    let spans = drain_trace(out.trace);
    let mut names: Vec<&str> = spans.iter().map(|s| s.name).collect();
    names.sort();
    assert_eq!(
        names,
        ["prove", "synthesis", "synthesis[0]", "synthesis[1]"]
    );
    let mut assignments = out.result.unwrap();
    for a in &assignments {
        a.check_satisfied().unwrap();
    }
    let a = &mut assignments[1];
    a.c[3] += Scalar::ONE;
    let e = a.check_satisfied().unwrap_err();
    assert!(e.contains("constraint 3"), "{e}");
    a.c.pop();
    assert!(a
        .check_satisfied()
        .unwrap_err()
        .contains("differ in length"));
}
