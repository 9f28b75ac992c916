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

/// The proof for randomisers `r`, `s`.
pub fn assemble(vk: &VerifyingKey<Bls12>, r: Scalar, s: Scalar, m: &MsmParts) -> Proof<Bls12> {
    let g_a = vk.delta_g1 * r + vk.alpha_g1 + m.a;
    let g_b = vk.delta_g2 * s + vk.beta_g2 + m.b_g2;
    let g_c =
        m.a * s + m.b_g1 * r + vk.delta_g1 * (r * s) + vk.alpha_g1 * s + vk.beta_g1 * r + m.h + m.l;
    Proof {
        a: g_a.to_affine(),
        b: g_b.to_affine(),
        c: g_c.to_affine(),
    }
}
