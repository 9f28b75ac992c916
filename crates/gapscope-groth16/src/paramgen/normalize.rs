//! Jacobian → affine for many points with one field inversion (Montgomery's trick).
//! `group::Curve::batch_normalize` as blstrs 0.7 provides it inverts once per point,
//! which costs about as much as the fixed-base multiplication itself.

use std::ops::{AddAssign, SubAssign};

use blstrs::{Fp, Fp2, G1Affine, G1Projective, G2Affine, G2Projective};
use ff::Field;
use group::prime::PrimeCurveAffine;
use group::Curve;

/// A curve group whose projective points are blst's Jacobian (X, Y, Z), i.e. the affine
/// point is (X/Z², Y/Z³), and Z = 0 is the identity.
pub trait Jacobian:
    Curve
    + Copy
    + Send
    + Sync
    + for<'a> AddAssign<&'a <Self as Curve>::AffineRepr>
    + for<'a> SubAssign<&'a <Self as Curve>::AffineRepr>
where
    <Self as Curve>::AffineRepr: PrimeCurveAffine + Copy + Send + Sync,
{
    type Base: Field;
    fn jacobian(&self) -> (Self::Base, Self::Base, Self::Base);
    fn affine_from(x: Self::Base, y: Self::Base) -> <Self as Curve>::AffineRepr;
    /// (x, y) of a point that is not the identity.
    fn affine_xy(a: &<Self as Curve>::AffineRepr) -> (Self::Base, Self::Base);
}

impl Jacobian for G1Projective {
    type Base = Fp;
    fn jacobian(&self) -> (Fp, Fp, Fp) {
        (self.x(), self.y(), self.z())
    }
    fn affine_from(x: Fp, y: Fp) -> G1Affine {
        G1Affine::from_raw_unchecked(x, y, false)
    }
    fn affine_xy(a: &G1Affine) -> (Fp, Fp) {
        (a.x(), a.y())
    }
}

impl Jacobian for G2Projective {
    type Base = Fp2;
    fn jacobian(&self) -> (Fp2, Fp2, Fp2) {
        (self.x(), self.y(), self.z())
    }
    fn affine_from(x: Fp2, y: Fp2) -> G2Affine {
        G2Affine::from_raw_unchecked(x, y, false)
    }
    fn affine_xy(a: &G2Affine) -> (Fp2, Fp2) {
        (a.x(), a.y())
    }
}

/// Writes the affine form of `points[i]` into `out[i]`; `scratch` is reused between
/// calls (one field element per point).
pub fn batch_normalize<G: Jacobian>(
    points: &[G],
    out: &mut [G::AffineRepr],
    scratch: &mut Vec<G::Base>,
) where
    G::AffineRepr: PrimeCurveAffine + Copy + Send + Sync,
{
    assert_eq!(points.len(), out.len());
    scratch.clear();
    // scratch[i] = product of the non-zero Z of points[..i].
    let mut acc = G::Base::ONE;
    for p in points {
        scratch.push(acc);
        let z = p.jacobian().2;
        if !bool::from(z.is_zero()) {
            acc *= z;
        }
    }
    // acc is a product of non-zero elements of a field, hence invertible.
    let mut inv = acc.invert().unwrap();
    for ((p, o), prefix) in points.iter().zip(out.iter_mut()).zip(scratch.iter()).rev() {
        let (x, y, z) = p.jacobian();
        if bool::from(z.is_zero()) {
            *o = G::AffineRepr::identity();
            continue;
        }
        let zinv = inv * prefix;
        inv *= z;
        let zinv2 = zinv.square();
        *o = G::affine_from(x * zinv2, y * zinv2 * zinv);
    }
}

/// Inverts every element of `v` in place (all must be non-zero) with one field inversion;
/// `prefix` is scratch.
pub fn invert_all<F: Field>(v: &mut [F], prefix: &mut Vec<F>) {
    prefix.clear();
    let mut acc = F::ONE;
    for x in v.iter() {
        prefix.push(acc);
        acc *= *x;
    }
    let Some(mut inv) = Option::<F>::from(acc.invert()) else {
        panic!("invert_all: a zero element");
    };
    for (x, p) in v.iter_mut().zip(prefix.iter()).rev() {
        let xi = inv * p;
        inv *= *x;
        *x = xi;
    }
}
