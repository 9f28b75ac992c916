//! GPU results against the CPU: the native prover's MSMs (G1, G2) against blstrs'
//! `multi_exp`, its NTTs against bellperson's `EvaluationDomain`, on random inputs and on
//! the scalar patterns a circuit produces (all zero, all one, mixed 0/1, mixed 0/1/random).
//! The parameter generator's fixed-base multiplications (G1, G2) are checked against
//! blstrs' scalar multiplication on random scalars and on 0, 1, −1 and powers of two.
//! Used by the unit tests and by `gapscope cuda-check`, whose output is committed from the
//! GPU host.

use std::time::Instant;

use bellperson::domain::EvaluationDomain;
use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ec_gpu_gen::threadpool::Worker;
use ff::Field;
use group::{Curve, Group};
use rand::rngs::StdRng as ChaCha8Rng;
use rand::{Rng, SeedableRng};

use super::ffi::{self, NativeError};

/// Scalar patterns of the MSM checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Pattern {
    Random,
    AllZero,
    AllOne,
    /// Each scalar 0 or 1 with probability ½.
    Bits,
    /// A third each of 0, 1 and random: what the A/B queries of a circuit hold.
    Mixed,
}

impl Pattern {
    pub const ALL: [Pattern; 5] = [
        Pattern::Random,
        Pattern::AllZero,
        Pattern::AllOne,
        Pattern::Bits,
        Pattern::Mixed,
    ];

    fn scalars(self, n: usize, rng: &mut ChaCha8Rng) -> Vec<Scalar> {
        (0..n)
            .map(|_| match self {
                Pattern::Random => Scalar::random(&mut *rng),
                Pattern::AllZero => Scalar::ZERO,
                Pattern::AllOne => Scalar::ONE,
                Pattern::Bits => {
                    if rng.gen::<bool>() {
                        Scalar::ONE
                    } else {
                        Scalar::ZERO
                    }
                }
                Pattern::Mixed => match rng.gen_range(0..3) {
                    0 => Scalar::ZERO,
                    1 => Scalar::ONE,
                    _ => Scalar::random(&mut *rng),
                },
            })
            .collect()
    }
}

/// One comparison.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Check {
    /// `msm_g1`, `msm_g2`, `ntt`, `intt`, `coset_ntt`, `coset_intt`, `fixed_base_g1`,
    /// `fixed_base_g2`.
    pub what: &'static str,
    pub pattern: Option<Pattern>,
    pub log2: u32,
    pub equal: bool,
    /// Wall time of the GPU call (including uploads), for orientation only.
    pub gpu_call_ns: u64,
}

/// Points P, P+Q, P+2Q, … for random P, Q: distinct, cheap to make, in affine form.
fn points<G: Group + Curve>(n: usize, rng: &mut ChaCha8Rng) -> Vec<G::AffineRepr> {
    let q = G::random(&mut *rng);
    let mut p = G::random(&mut *rng);
    let proj: Vec<G> = (0..n)
        .map(|_| {
            let cur = p;
            p += q;
            cur
        })
        .collect();
    proj.iter().map(|p| p.to_affine()).collect()
}

fn timed<T>(f: impl FnOnce() -> Result<T, NativeError>) -> Result<(T, u64), NativeError> {
    let t = Instant::now();
    let r = f()?;
    Ok((r, t.elapsed().as_nanos() as u64))
}

/// G1 and G2 MSMs of 2^`log2` terms, every pattern.
pub fn msm_checks(log2: u32, seed: u64) -> Result<Vec<Check>, NativeError> {
    let n = 1usize << log2;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let p1: Vec<G1Affine> = points::<G1Projective>(n, &mut rng);
    let p2: Vec<G2Affine> = points::<G2Projective>(n, &mut rng);
    let p1_proj: Vec<G1Projective> = p1.iter().map(|p| p.into()).collect();
    let p2_proj: Vec<G2Projective> = p2.iter().map(|p| p.into()).collect();
    let mut out = Vec::new();
    for pattern in Pattern::ALL {
        let s = pattern.scalars(n, &mut rng);
        let (gpu, ns) = timed(|| ffi::msm_g1(&p1, &s))?;
        out.push(Check {
            what: "msm_g1",
            pattern: Some(pattern),
            log2,
            equal: gpu == G1Projective::multi_exp(&p1_proj, &s),
            gpu_call_ns: ns,
        });
        let (gpu, ns) = timed(|| ffi::msm_g2(&p2, &s))?;
        out.push(Check {
            what: "msm_g2",
            pattern: Some(pattern),
            log2,
            equal: gpu == G2Projective::multi_exp(&p2_proj, &s),
            gpu_call_ns: ns,
        });
    }
    Ok(out)
}

/// Scalars for the fixed-base checks: 0, 1, −1, 2^k for k < 255, then random ones, `n` in all.
fn fixed_base_scalars(n: usize, rng: &mut ChaCha8Rng) -> Vec<Scalar> {
    let mut s = vec![Scalar::ZERO, Scalar::ONE, -Scalar::ONE];
    let mut p = Scalar::ONE;
    for _ in 0..255 {
        p = p.double();
        s.push(p);
    }
    while s.len() < n {
        s.push(Scalar::random(&mut *rng));
    }
    s.truncate(n);
    s
}

/// The fixed-base multiplications of 2^`log2` scalars (G1 and G2) against blstrs.
pub fn fixed_base_checks(log2: u32, seed: u64) -> Result<Vec<Check>, NativeError> {
    let n = 1usize << log2;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let s = fixed_base_scalars(n, &mut rng);
    let g1 = G1Projective::random(&mut rng).to_affine();
    let g2 = G2Projective::random(&mut rng).to_affine();
    let (gpu1, ns1) = timed(|| ffi::fixed_base_g1(&g1, &s))?;
    let cpu1: Vec<G1Affine> = s.iter().map(|k| (g1 * k).to_affine()).collect();
    let (gpu2, ns2) = timed(|| ffi::fixed_base_g2(&g2, &s))?;
    let cpu2: Vec<G2Affine> = s.iter().map(|k| (g2 * k).to_affine()).collect();
    Ok(vec![
        Check {
            what: "fixed_base_g1",
            pattern: None,
            log2,
            equal: gpu1 == cpu1,
            gpu_call_ns: ns1,
        },
        Check {
            what: "fixed_base_g2",
            pattern: None,
            log2,
            equal: gpu2 == cpu2,
            gpu_call_ns: ns2,
        },
    ])
}

/// Forward, inverse, coset and inverse-coset NTTs of 2^`log2` random values.
pub fn ntt_checks(log2: u32, seed: u64) -> Result<Vec<Check>, NativeError> {
    let n = 1usize << log2;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let values: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut rng)).collect();
    let worker = Worker::new();
    let mut out = Vec::new();
    let cases: [(&'static str, bool, bool); 4] = [
        ("ntt", false, false),
        ("intt", true, false),
        ("coset_ntt", false, true),
        ("coset_intt", true, true),
    ];
    for (what, inverse, coset) in cases {
        let mut d = EvaluationDomain::from_coeffs(values.clone()).expect("power of two");
        let mut k = None;
        match (inverse, coset) {
            (false, false) => d.fft(&worker, &mut k),
            (true, false) => d.ifft(&worker, &mut k),
            (false, true) => d.coset_fft(&worker, &mut k),
            (true, true) => d.icoset_fft(&worker, &mut k),
        }
        .expect("CPU FFT");
        let mut gpu = values.clone();
        let ((), ns) = timed(|| ffi::ntt(&mut gpu, inverse, coset))?;
        out.push(Check {
            what,
            pattern: None,
            log2,
            equal: gpu == d.into_coeffs(),
            gpu_call_ns: ns,
        });
    }
    Ok(out)
}
