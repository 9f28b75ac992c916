//! The parameter generator's fixed-base multiplication on the GPU
//! (cuda/prover/fixed_base.cuh): k_i·G for one generator and millions of scalars, on
//! GPU 0, checked against blstrs by `gapscope cuda-check`.

use blstrs::{G1Affine, G2Affine, Scalar};

use super::ffi;
use crate::paramgen::fixed_base::FixedBase;

/// [`FixedBase`] on GPU 0 of `gpus` usable ones.
pub struct CudaFixedBase {
    gpus: u32,
}

impl FixedBase for CudaFixedBase {
    fn describe(&self) -> String {
        format!("gpu (native cuda kernels, GPU 0 of {})", self.gpus)
    }

    fn mul_g1(&self, base: &G1Affine, scalars: &[Scalar]) -> anyhow::Result<Vec<G1Affine>> {
        Ok(ffi::fixed_base_g1(base, scalars)?)
    }

    fn mul_g2(&self, base: &G2Affine, scalars: &[Scalar]) -> anyhow::Result<Vec<G2Affine>> {
        Ok(ffi::fixed_base_g2(base, scalars)?)
    }
}

/// The GPU's fixed-base multiplication, or `None` where no GPU answers.
pub fn fixed_base() -> Option<Box<dyn FixedBase>> {
    match ffi::device_count() {
        Ok(gpus) if gpus > 0 => Some(Box::new(CudaFixedBase { gpus })),
        _ => None,
    }
}
