//! The one step of parameter generation that may leave the CPU: k_i·G for one fixed
//! generator G and millions of scalars k_i. [`super::generate`] calls it once per query
//! (H, IC, L, A, B in G1; B in G2); implementations: [`super::CpuFixedBase`] here, a GPU
//! one in `prover::cuda` (GPU builds).

/// Computes k_i·G for one fixed base G and many scalars.
pub trait FixedBase: Send + Sync {
    /// How the run names this generator in meta.json and on the terminal, e.g. "cpu (16 threads)".
    fn describe(&self) -> String;
    fn mul_g1(
        &self,
        base: &blstrs::G1Affine,
        scalars: &[blstrs::Scalar],
    ) -> anyhow::Result<Vec<blstrs::G1Affine>>;
    fn mul_g2(
        &self,
        base: &blstrs::G2Affine,
        scalars: &[blstrs::Scalar],
    ) -> anyhow::Result<Vec<blstrs::G2Affine>>;
}
