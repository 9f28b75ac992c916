use bellperson::groth16::{generate_parameters, Parameters};
use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::{Bls12, G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::Field;
use group::prime::PrimeCurveAffine;
use group::{Curve, Group};

use super::*;
use crate as prover;
use crate::{CircuitInstance, CircuitKind, Gadget};

fn bellperson_params<C: Circuit<Scalar>>(
    c: C,
    t: &Toxic,
) -> Result<Parameters<Bls12>, SynthesisError> {
    generate_parameters::<Bls12, _>(c, t.g1, t.g2, t.alpha, t.beta, t.gamma, t.delta, t.tau)
}

/// Point for point, naming the first query that differs.
fn assert_same(ours: &Parameters<Bls12>, theirs: &Parameters<Bls12>) {
    assert_eq!(ours.vk, theirs.vk, "verifying key");
    let g1 = [
        ("h", &ours.h, &theirs.h),
        ("l", &ours.l, &theirs.l),
        ("a", &ours.a, &theirs.a),
        ("b_g1", &ours.b_g1, &theirs.b_g1),
    ];
    for (name, o, t) in g1 {
        assert_eq!(o.len(), t.len(), "{name}: length");
        if let Some(i) = o.iter().zip(t.iter()).position(|(x, y)| x != y) {
            panic!("{name}[{i}] differs");
        }
    }
    assert_eq!(ours.b_g2.len(), theirs.b_g2.len(), "b_g2: length");
    assert!(ours.b_g2 == theirs.b_g2, "b_g2 differs");
    assert!(ours == theirs);
}

fn check_against_bellperson(kind: CircuitKind, log2: u32, seed: u64) {
    let c = CircuitInstance::new(kind, log2, Gadget::Lc, 0).unwrap();
    let t = Toxic::from_seed(seed);
    let (ours, report) = generate(c.blank(), t.clone(), &CpuFixedBase::new()).unwrap();
    let theirs = bellperson_params(c.blank(), &t).unwrap();
    assert_same(&ours, &theirs);
    assert_eq!(report.domain_size, 1 << log2);
    assert_eq!(report.queries.len(), 6);
    assert_eq!(report.queries[0].points, (1 << log2) - 1, "h");
    // Proofs made with them verify with bellperson's verifier.
    let inputs = vec![c.public_inputs()];
    let out = prover::prove_batch(
        prover::backend(prover::BackendKind::Cpu).unwrap().as_ref(),
        &ours,
        vec![c],
        prover::ProveOptions::default(),
        &mut rand::rngs::OsRng,
    );
    prover::dropper::wait_idle();
    crate::trace::drain_trace(out.trace);
    prover::verify_all(&ours, &out.result.unwrap(), &inputs).unwrap();
}

#[test]
fn porep_params_equal_bellpersons_and_prove() {
    // 2^10 is porep's smallest size (one challenge: bits, XORs, packing, x^5).
    check_against_bellperson(CircuitKind::Porep, 10, 1);
}

#[test]
fn chain_params_equal_bellpersons_and_prove() {
    check_against_bellperson(CircuitKind::Chain, 8, 2);
    check_against_bellperson(CircuitKind::Chain, 6, 3);
}

#[test]
fn seeded_generators_agree_through_param_gen() {
    let c = CircuitInstance::new(CircuitKind::Chain, 5, Gadget::Lc, 0).unwrap();
    let ours = ParamGen::Cpu.generate(c.blank(), Some(7)).unwrap();
    let theirs = ParamGen::Bellperson.generate(c.blank(), Some(7)).unwrap();
    assert!(ours.params == theirs.params);
    assert!(
        ours.generator.starts_with("paramgen, fixed base cpu ("),
        "{}",
        ours.generator
    );
    assert_eq!(theirs.generator, BELLPERSON);
    assert!(ours.report.is_some() && theirs.report.is_none());
    // Another seed, other parameters.
    let other = ParamGen::Cpu.generate(c.blank(), Some(8)).unwrap();
    assert!(other.params != ours.params);
}

/// An aux variable in no constraint: bellperson refuses it (L would hold the identity).
struct Unconstrained;

impl Circuit<Scalar> for Unconstrained {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let x = cs.alloc(|| "x", || Ok(Scalar::ONE))?;
        cs.alloc(|| "free", || Ok(Scalar::ONE))?;
        cs.enforce(|| "x*x=x", |l| l + x, |l| l + x, |l| l + x);
        Ok(())
    }
}

#[test]
fn an_unconstrained_variable_is_refused_like_bellperson() {
    let t = Toxic::from_seed(4);
    assert!(matches!(
        bellperson_params(Unconstrained, &t),
        Err(SynthesisError::UnconstrainedVariable)
    ));
    let e = generate(Unconstrained, t, &CpuFixedBase::new())
        .err()
        .unwrap();
    assert!(format!("{e:#}").contains("nconstrained"), "{e:#}");
}

#[test]
fn degenerate_toxic_waste_is_refused() {
    let c = CircuitInstance::new(CircuitKind::Chain, 4, Gadget::Lc, 0).unwrap();
    let mut t = Toxic::from_seed(5);
    t.delta = Scalar::ZERO;
    assert!(generate(c.blank(), t, &CpuFixedBase::new()).is_err());
    let mut t = Toxic::from_seed(5);
    t.g1 = G1Projective::identity();
    assert!(generate(c.blank(), t, &CpuFixedBase::new()).is_err());
}

#[test]
fn lagrange_values_match_an_inverse_fft_of_taus_powers() {
    use bellperson::domain::EvaluationDomain;
    use ec_gpu_gen::threadpool::Worker;
    for log2 in [0u32, 1, 3, 6] {
        let m = 1usize << log2;
        let (m2, omega) = qap::domain(m).unwrap();
        assert_eq!(m2, m);
        let tau = Scalar::from(123_456_789u64);
        let mut d = EvaluationDomain::from_coeffs(qap::powers(Scalar::ONE, tau, m)).unwrap();
        d.ifft(&Worker::new(), &mut None).unwrap();
        assert_eq!(qap::lagrange_at(tau, m, omega), d.into_coeffs(), "m = {m}");
        // τ on the domain: the indicator of its point.
        if m > 1 {
            let on = omega.pow_vartime([3u64 % m as u64]);
            let mut d = EvaluationDomain::from_coeffs(qap::powers(Scalar::ONE, on, m)).unwrap();
            d.ifft(&Worker::new(), &mut None).unwrap();
            assert_eq!(
                qap::lagrange_at(on, m, omega),
                d.into_coeffs(),
                "τ = ω^3, m = {m}"
            );
        }
    }
}

/// Scalars that stress the signed-window recoding: 0, ±1, powers of two, all ones in
/// the low bits, r − 1, and random ones.
fn tricky_scalars(n: usize) -> Vec<Scalar> {
    let mut v = vec![Scalar::ZERO, Scalar::ONE, -Scalar::ONE, -Scalar::from(2u64)];
    for k in [1u32, 7, 8, 15, 16, 17, 63, 64, 65, 128, 200, 253, 254] {
        let p = Scalar::from(2u64).pow_vartime([u64::from(k)]);
        v.extend([p, p - Scalar::ONE, -p]);
    }
    v.push(Scalar::from(u64::MAX));
    let mut rng = seeded_rng(9);
    while v.len() < n {
        v.push(Scalar::random(&mut rng));
    }
    v
}

#[test]
fn cpu_fixed_base_matches_plain_multiplication_for_every_window() {
    let mut rng = seeded_rng(10);
    let g1 = G1Projective::random(&mut rng).to_affine();
    let g2 = G2Projective::random(&mut rng).to_affine();
    let scalars = tricky_scalars(1100); // more than one normalization chunk
    let want1: Vec<G1Affine> = scalars.iter().map(|k| (g1 * k).to_affine()).collect();
    let want2: Vec<G2Affine> = scalars[..80].iter().map(|k| (g2 * k).to_affine()).collect();
    for w in [2u32, 3, 5, 8, 11, 15, 16] {
        let fb = CpuFixedBase::with_window(w).unwrap();
        assert!(fb.describe().contains(&format!("window {w}")));
        assert_eq!(fb.mul_g1(&g1, &scalars).unwrap(), want1, "G1, window {w}");
        assert_eq!(
            fb.mul_g2(&g2, &scalars[..80]).unwrap(),
            want2,
            "G2, window {w}"
        );
    }
    // The default (per-call window; below the table threshold, plain multiplication).
    let fb = CpuFixedBase::new();
    assert_eq!(fb.mul_g1(&g1, &scalars).unwrap(), want1);
    assert_eq!(fb.mul_g1(&g1, &scalars[..5]).unwrap(), want1[..5]);
    assert_eq!(fb.mul_g2(&g2, &scalars[..80]).unwrap(), want2);
    assert!(fb.mul_g1(&g1, &[]).unwrap().is_empty());
    // A second base: the cached table of the first must not be used.
    let g1b = G1Projective::random(&mut rng).to_affine();
    let want_b: Vec<G1Affine> = scalars.iter().map(|k| (g1b * k).to_affine()).collect();
    assert_eq!(fb.mul_g1(&g1b, &scalars).unwrap(), want_b);
    assert!(CpuFixedBase::with_window(1).is_err());
    assert!(CpuFixedBase::with_window(17).is_err());
}

#[test]
fn batch_normalization_matches_one_point_at_a_time() {
    let mut rng = seeded_rng(11);
    let mut p: Vec<G1Projective> = (0..9).map(|_| G1Projective::random(&mut rng)).collect();
    p[0] = G1Projective::identity();
    p[5] = G1Projective::identity();
    p[6] = p[7].double(); // a Z that is not 1
    let mut out = vec![G1Affine::identity(); p.len()];
    normalize::batch_normalize(&p, &mut out, &mut Vec::new());
    let want: Vec<G1Affine> = p.iter().map(|x| x.to_affine()).collect();
    assert_eq!(out, want);
    let q: Vec<G2Projective> = vec![
        G2Projective::random(&mut rng).double(),
        G2Projective::identity(),
        G2Projective::random(&mut rng),
    ];
    let mut out = vec![G2Affine::identity(); q.len()];
    normalize::batch_normalize(&q, &mut out, &mut Vec::new());
    assert_eq!(out, q.iter().map(|x| x.to_affine()).collect::<Vec<_>>());
    let mut all_identity = vec![G1Affine::generator(); 3];
    normalize::batch_normalize(
        &[G1Projective::identity(); 3],
        &mut all_identity,
        &mut Vec::new(),
    );
    assert!(all_identity.iter().all(|x| bool::from(x.is_identity())));
}

#[test]
fn window_choice_grows_with_the_batch_and_respects_the_table_cap() {
    let w1 = cpu::window_choice(1 << 10, 96);
    let w2 = cpu::window_choice(1 << 20, 96);
    assert!(w1 < w2, "{w1} {w2}");
    // A G2 table of width 16 would take 96 MiB, past the 64 MiB cap; 15 takes 54 MiB.
    assert_eq!(cpu::window_choice(1 << 26, 192), 15);
    assert_eq!(cpu::window_choice(1 << 26, 96), 16);
}

#[test]
fn generator_choices_parse_and_name_the_valid_ones() {
    for g in [
        ParamGen::Auto,
        ParamGen::Cpu,
        ParamGen::Cuda,
        ParamGen::Bellperson,
    ] {
        assert_eq!(ParamGen::parse(g.as_str()), Ok(g));
    }
    let e = ParamGen::parse("gpu").unwrap_err();
    assert!(e.contains("auto, cpu, cuda, bellperson"), "{e}");
    // This build has no GPU code: asking for it says how to get it.
    #[cfg(not(gapscope_prover))]
    {
        let c = CircuitInstance::new(CircuitKind::Chain, 4, Gadget::Lc, 0).unwrap();
        let e = ParamGen::Cuda.generate(c.blank(), None).err().unwrap();
        assert!(format!("{e:#}").contains("--features cuda"), "{e:#}");
    }
}
