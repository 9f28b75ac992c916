use super::*;
use crate::cs::{Assignment, ShapeHasher};
use bellperson::util_cs::test_cs::TestConstraintSystem;

#[test]
fn lc_and_add_to_lc_build_identical_constraint_systems_and_assignments() {
    let a = CircuitInstance::new(CircuitKind::Porep, 11, Gadget::Lc, 3).unwrap();
    let b = CircuitInstance::new(CircuitKind::Porep, 11, Gadget::AddToLc, 3).unwrap();
    let (da, _) = ShapeHasher::digest(a.blank()).unwrap();
    let (db, _) = ShapeHasher::digest(b.blank()).unwrap();
    assert_eq!(da, db, "shape digests differ");
    let aa = Assignment::synthesize(a).unwrap();
    let ab = Assignment::synthesize(b).unwrap();
    assert!(aa == ab, "assignments differ");
    assert!(aa.aux_assignment.len() > 1000);
}

#[test]
fn shape_digest_depends_on_shape_not_witness() {
    let a = CircuitInstance::new(CircuitKind::Porep, 10, Gadget::Lc, 0).unwrap();
    let b = CircuitInstance::new(CircuitKind::Porep, 10, Gadget::Lc, 9).unwrap();
    let c = CircuitInstance::new(CircuitKind::Porep, 11, Gadget::Lc, 0).unwrap();
    let d = |x: &CircuitInstance| ShapeHasher::digest(x.blank()).unwrap().0;
    assert_eq!(d(&a), d(&b), "witness must not change the shape");
    assert_ne!(d(&a), d(&c));
}

#[test]
fn porep_fills_its_domain_exactly_and_is_satisfied() {
    for log2 in [10, 12] {
        let c = CircuitInstance::new(CircuitKind::Porep, log2, Gadget::AddToLc, 1).unwrap();
        let inputs = c.public_inputs();
        let mut cs = TestConstraintSystem::<Scalar>::new();
        c.clone().synthesize(&mut cs).unwrap();
        assert!(
            cs.is_satisfied(),
            "unsatisfied: {:?}",
            cs.which_is_unsatisfied()
        );
        assert_eq!(cs.get_inputs().len(), 1 + inputs.len());
        let asg = Assignment::synthesize(c).unwrap();
        assert_eq!(asg.num_constraints(), 1 << log2);
        assert_eq!(
            asg.input_assignment[1..],
            inputs[..],
            "native public inputs differ"
        );
    }
}

#[test]
fn sha256_fills_its_domain_and_matches_native_sha256() {
    let c = CircuitInstance::new(CircuitKind::Sha256, 15, Gadget::AddToLc, 2).unwrap();
    let inputs = c.public_inputs();
    let asg = Assignment::synthesize(c.clone()).unwrap();
    assert_eq!(asg.num_constraints(), 1 << 15);
    assert_eq!(asg.input_assignment[1..], inputs[..]);
    let mut cs = TestConstraintSystem::<Scalar>::new();
    c.synthesize(&mut cs).unwrap();
    assert!(cs.is_satisfied());
}

#[test]
fn sizes_below_the_minimum_are_refused_with_the_range() {
    let e = CircuitInstance::new(CircuitKind::Sha256, 12, Gadget::Lc, 0).unwrap_err();
    assert!(e.contains("15"), "{e}");
}

#[test]
fn chain_fills_its_domain_and_matches_its_native_output() {
    let c = CircuitInstance::new(CircuitKind::Chain, 10, Gadget::Lc, 4).unwrap();
    let inputs = c.public_inputs();
    let asg = Assignment::synthesize(c.clone()).unwrap();
    assert_eq!(asg.num_constraints(), (1 << 10) - 1);
    assert_eq!(asg.num_constraints().next_power_of_two(), 1 << 10);
    assert_eq!(asg.input_assignment[1..], inputs[..]);
    let mut cs = TestConstraintSystem::<Scalar>::new();
    c.synthesize(&mut cs).unwrap();
    assert!(cs.is_satisfied());
}
