//! Groth16 proof assembly from the five MSM results of a circuit, shared by the backends
//! that compute the MSMs themselves (cpu, cuda):
//! A = α + Σa + rδ, B = β + Σb + sδ, C = s·A_msm + r·B1_msm + rsδ + sα + rβ + H + L.

use bellperson::groth16::{Proof, VerifyingKey};
use blstrs::{Bls12, G1Projective, G2Projective, Scalar};
use group::{prime::PrimeCurveAffine, Curve};

/// One circuit's MSM results.
#[derive(Debug, Clone, Copy)]
pub struct MsmParts {
    pub h: G1Projective,
    pub l: G1Projective,
    pub a: G1Projective,
    pub b_g1: G1Projective,
    pub b_g2: G2Projective,
}

/// Refuses a verifying key whose δ is the identity (a subverted CRS).
pub fn check_delta(vk: &VerifyingKey<Bls12>) -> Result<(), String> {
    if bool::from(vk.delta_g1.is_identity() | vk.delta_g2.is_identity()) {
        return Err("verifying key has an identity delta (subverted CRS)".into());
    }
    Ok(())
}

/// The terms of a proof that depend only on the verifying key and the randomisers:
/// computed while the MSMs run (they are 5 of the 7 scalar multiplications of a proof).
#[derive(Debug, Clone, Copy)]
pub struct Blinding {
    r: Scalar,
    s: Scalar,
    /// α + rδ (G1)
    a: G1Projective,
    /// β + sδ (G2)
    b: G2Projective,
    /// rsδ + sα + rβ (G1)
    c: G1Projective,
}

impl Blinding {
    pub fn new(vk: &VerifyingKey<Bls12>, r: Scalar, s: Scalar) -> Blinding {
        Blinding {
            r,
            s,
            a: vk.delta_g1 * r + vk.alpha_g1,
            b: vk.delta_g2 * s + vk.beta_g2,
            c: vk.delta_g1 * (r * s) + vk.alpha_g1 * s + vk.beta_g1 * r,
        }
    }

    /// The proof, from this circuit's MSM results.
    pub fn proof(&self, m: &MsmParts) -> Proof<Bls12> {
        let g_a = self.a + m.a;
        let g_b = self.b + m.b_g2;
        let g_c = m.a * self.s + m.b_g1 * self.r + self.c + m.h + m.l;
        Proof {
            a: g_a.to_affine(),
            b: g_b.to_affine(),
            c: g_c.to_affine(),
        }
    }
}

/// The proof for randomisers `r`, `s`.
pub fn assemble(vk: &VerifyingKey<Bls12>, r: Scalar, s: Scalar, m: &MsmParts) -> Proof<Bls12> {
    Blinding::new(vk, r, s).proof(m)
}
