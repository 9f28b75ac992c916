//! The toxic waste of one parameter set: the two generators and the five trapdoors.
//! Real parameters draw them from the OS ([`Toxic::from_os_rng`]) and forget them;
//! tests and cross-checks fix them (seeded).

use blstrs::{G1Projective, G2Projective, Scalar};
use ff::Field;
use group::Group;
use rand_core::RngCore;

/// g1, g2, α, β, γ, δ, τ. Deliberately not `Debug`: it must never reach a log.
#[derive(Clone)]
pub struct Toxic {
    pub g1: G1Projective,
    pub g2: G2Projective,
    pub alpha: Scalar,
    pub beta: Scalar,
    pub gamma: Scalar,
    pub delta: Scalar,
    pub tau: Scalar,
}

impl Toxic {
    /// Draws in the order of bellperson's `generate_random_parameters` (g1, g2, α, β,
    /// γ, δ, τ), so the same seeded RNG gives both generators the same toxic waste.
    pub fn random(rng: &mut impl RngCore) -> Self {
        Toxic {
            g1: G1Projective::random(&mut *rng),
            g2: G2Projective::random(&mut *rng),
            alpha: Scalar::random(&mut *rng),
            beta: Scalar::random(&mut *rng),
            gamma: Scalar::random(&mut *rng),
            delta: Scalar::random(&mut *rng),
            tau: Scalar::random(&mut *rng),
        }
    }

    pub fn from_os_rng() -> Self {
        Self::random(&mut rand::rngs::OsRng)
    }

    /// Deterministic toxic waste from `seed` (tests, cross-checks, benchmarks: such
    /// parameters are insecure).
    pub fn from_seed(seed: u64) -> Self {
        Self::random(&mut seeded_rng(seed))
    }

    /// Refuses what bellperson's generator refuses (γ or δ zero), and identity
    /// generators, with which every query would be the identity.
    pub fn check(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            !bool::from(self.g1.is_identity()) && !bool::from(self.g2.is_identity()),
            "toxic waste has an identity generator: draw it again"
        );
        anyhow::ensure!(
            !bool::from(self.gamma.is_zero()) && !bool::from(self.delta.is_zero()),
            "toxic waste has γ or δ zero (not invertible): draw it again"
        );
        Ok(())
    }
}

/// The RNG [`Toxic::from_seed`] draws from; bellperson's generator given the same one
/// draws the same toxic waste.
pub fn seeded_rng(seed: u64) -> rand::rngs::StdRng {
    use rand::SeedableRng;
    rand::rngs::StdRng::seed_from_u64(seed)
}
