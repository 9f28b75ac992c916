//! Groth16 parameter generation for gapscope's circuits, with the heavy part (fixed-base
//! multiplication of the two generators, [`FixedBase`]) on the GPU where the build has
//! one and on every CPU core otherwise. The params cache ([`super::params`]) calls
//! [`ParamGen::generate`]; nothing here knows about the cache.
//!
//! ```text
//! generate ─ synthesis (keygen) ─ qap (Lagrange at τ, query scalars) ─ mul per query ─ assembly
//! ```
//!
//! The output equals bellperson 0.27's `generate_parameters` for the same toxic waste
//! point for point (tests.rs). bellperson's generator stays selectable
//! (`GAPSCOPE_PARAMGEN=bellperson`) so that both can be timed on one host.

mod cpu;
pub mod fixed_base;
mod generate;
mod keygen;
mod normalize;
mod qap;
mod toxic;

pub use cpu::CpuFixedBase;
pub use fixed_base::FixedBase;
pub use generate::{generate, GenReport, QueryTiming};
pub use toxic::{seeded_rng, Toxic};

use bellperson::groth16::Parameters;
use bellperson::Circuit;
use blstrs::{Bls12, Scalar};

/// The environment variable that picks the generator ([`ParamGen::from_env`]).
pub const ENV: &str = "GAPSCOPE_PARAMGEN";

/// The fixed-base multiplication this build runs best: the GPU's where the build has
/// CUDA code and a GPU answers, else [`CpuFixedBase`] (said on stderr).
pub fn default_fixed_base() -> Box<dyn FixedBase> {
    #[cfg(gapscope_prover)]
    {
        if let Some(fb) = crate::cuda::fixed_base() {
            return fb;
        }
        eprintln!("no GPU: params generated on the CPU");
    }
    #[cfg(not(gapscope_prover))]
    eprintln!("no GPU: params generated on the CPU (this build has no GPU code)");
    Box::new(CpuFixedBase::new())
}

/// Which generator makes parameters that are not cached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ParamGen {
    /// The GPU's fixed-base multiplication where there is one, else the CPU's.
    #[default]
    Auto,
    /// [`CpuFixedBase`] even where a GPU is.
    Cpu,
    /// The GPU's, or an error.
    Cuda,
    /// bellperson 0.27's `generate_random_parameters` (the reference, for timing).
    Bellperson,
}

/// Parameters and how they were made.
pub struct Generated {
    pub params: Parameters<Bls12>,
    /// What made them: `bellperson 0.27` or `paramgen, fixed base <describe>`.
    pub generator: String,
    /// Stage timings (not for bellperson's generator, which is one call).
    pub report: Option<GenReport>,
}

impl ParamGen {
    pub const CHOICES: &'static str = "auto, cpu, cuda, bellperson";

    pub fn as_str(self) -> &'static str {
        match self {
            ParamGen::Auto => "auto",
            ParamGen::Cpu => "cpu",
            ParamGen::Cuda => "cuda",
            ParamGen::Bellperson => "bellperson",
        }
    }

    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(ParamGen::Auto),
            "cpu" => Ok(ParamGen::Cpu),
            "cuda" => Ok(ParamGen::Cuda),
            "bellperson" => Ok(ParamGen::Bellperson),
            other => Err(format!(
                "unknown params generator {other:?}: choose one of {}",
                Self::CHOICES
            )),
        }
    }

    /// `GAPSCOPE_PARAMGEN` if set (and not empty), else [`ParamGen::Auto`].
    pub fn from_env() -> Result<Self, String> {
        match std::env::var(ENV) {
            Ok(v) if !v.is_empty() => Self::parse(&v).map_err(|e| format!("{ENV}: {e}")),
            _ => Ok(ParamGen::Auto),
        }
    }

    /// The fixed-base multiplication this choice runs (None: bellperson's generator).
    fn fixed_base(self) -> anyhow::Result<Option<Box<dyn FixedBase>>> {
        Ok(match self {
            ParamGen::Auto => Some(default_fixed_base()),
            ParamGen::Cpu => Some(Box::new(CpuFixedBase::new())),
            ParamGen::Cuda => Some(cuda_fixed_base()?),
            ParamGen::Bellperson => None,
        })
    }

    /// Parameters for `circuit` with fresh toxic waste from the OS, or with the toxic
    /// waste of `seed` (insecure; for cross-checks: every generator then makes the same
    /// parameters).
    pub fn generate<C: Circuit<Scalar>>(
        self,
        circuit: C,
        seed: Option<u64>,
    ) -> anyhow::Result<Generated> {
        match self.fixed_base()? {
            Some(fb) => {
                let toxic = match seed {
                    Some(s) => Toxic::from_seed(s),
                    None => Toxic::from_os_rng(),
                };
                let (params, report) = generate(circuit, toxic, fb.as_ref())?;
                Ok(Generated {
                    params,
                    generator: format!("paramgen, fixed base {}", fb.describe()),
                    report: Some(report),
                })
            }
            None => {
                use bellperson::groth16::generate_random_parameters;
                let params = match seed {
                    Some(s) => {
                        generate_random_parameters::<Bls12, _, _>(circuit, &mut seeded_rng(s))
                    }
                    None => {
                        generate_random_parameters::<Bls12, _, _>(circuit, &mut rand::rngs::OsRng)
                    }
                }?;
                Ok(Generated {
                    params,
                    generator: BELLPERSON.into(),
                    report: None,
                })
            }
        }
    }
}

/// How a params file made by bellperson's generator is described.
pub const BELLPERSON: &str = "bellperson 0.27 generate_random_parameters";

#[cfg(gapscope_prover)]
fn cuda_fixed_base() -> anyhow::Result<Box<dyn FixedBase>> {
    crate::cuda::fixed_base().ok_or_else(|| {
        anyhow::anyhow!("no usable GPU for params generation: use {ENV}=cpu or auto")
    })
}

#[cfg(not(gapscope_prover))]
fn cuda_fixed_base() -> anyhow::Result<Box<dyn FixedBase>> {
    anyhow::bail!(
        "this build has no GPU params generation: rebuild with `--features cuda` \
         (docs/gpu.md), or use {ENV}=cpu or auto"
    )
}

#[cfg(test)]
mod tests;
