//! CPU backend: bellperson's public FFT (`domain`) and multiexp, arranged in the same
//! phases as the GPU backends so that its span tree can stand in for them in tests.

use std::sync::{Arc, Mutex};

use bellperson::domain::EvaluationDomain;
use bellperson::gpu::{LockedFftKernel, LockedMultiexpKernel};
use bellperson::groth16::Proof;
use bellperson::multiexp::{multiexp, DensityTracker};
use blstrs::{Bls12, G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ec_gpu_gen::multiexp_cpu::FullDensity;
use ec_gpu_gen::threadpool::Worker;
use ff::PrimeField;
use rayon::prelude::*;

use super::spans;
use super::{
    assemble, dropper, Assignment, Backend, BackendKind, Groth16Params, ProveOptions, ProverError,
};
use crate::trace::Span;

type Repr = <Scalar as PrimeField>::Repr;

pub struct CpuBackend {
    worker: Worker,
    /// Serialises calls, like the GPU lock of the GPU provers (taken in `entry`).
    lock: Mutex<()>,
}

impl Default for CpuBackend {
    fn default() -> Self {
        Self::new()
    }
}

impl CpuBackend {
    pub fn new() -> Self {
        CpuBackend {
            worker: Worker::new(),
            lock: Mutex::new(()),
        }
    }
}

fn err(message: impl std::fmt::Display) -> ProverError {
    ProverError::Backend {
        backend: "cpu",
        message: message.to_string(),
    }
}

/// The backend-side copies of one circuit's data (what a GPU prover keeps in C++).
struct Split {
    inputs: Arc<Vec<Repr>>,
    aux: Arc<Vec<Repr>>,
    a_aux_density: Arc<DensityTracker>,
    b_input_density: Arc<DensityTracker>,
    b_aux_density: Arc<DensityTracker>,
    /// a, b, c evaluation domains; after the NTT, b and c (spent, freed in `drop`).
    domains: Vec<EvaluationDomain<Scalar>>,
    /// The NTT's output coefficients (H before conversion), kept until `drop`.
    h_coeffs: Vec<Scalar>,
    h: Arc<Vec<Repr>>,
}

impl Split {
    fn heap_bytes(&self) -> u64 {
        let r = std::mem::size_of::<Repr>() as u64;
        let d: u64 = self.domains.iter().map(|d| d.as_ref().len() as u64).sum();
        (self.inputs.len() + self.aux.len() + self.h.len()) as u64 * r
            + (d + self.h_coeffs.capacity() as u64) * std::mem::size_of::<Scalar>() as u64
    }
}

fn g1_msm(
    w: &Worker,
    bases: (Arc<Vec<G1Affine>>, usize),
    exps: Arc<Vec<Repr>>,
    density: Option<Arc<DensityTracker>>,
) -> Result<G1Projective, ProverError> {
    let mut k = LockedMultiexpKernel::<G1Affine>::new(false);
    match density {
        Some(d) => multiexp(w, bases, d, exps, &mut k).wait(),
        None => multiexp(w, bases, FullDensity, exps, &mut k).wait(),
    }
    .map_err(err)
}

fn g2_msm(
    w: &Worker,
    bases: (Arc<Vec<G2Affine>>, usize),
    exps: Arc<Vec<Repr>>,
    density: Arc<DensityTracker>,
) -> Result<G2Projective, ProverError> {
    let mut k = LockedMultiexpKernel::<G2Affine>::new(false);
    multiexp(w, bases, density, exps, &mut k)
        .wait()
        .map_err(err)
}

fn g1_msm_dense(
    w: &Worker,
    bases: (Arc<Vec<G1Affine>>, usize),
    exps: Arc<Vec<Repr>>,
    density: Arc<DensityTracker>,
) -> Result<G1Projective, ProverError> {
    g1_msm(w, bases, exps, Some(density))
}

/// A B-query MSM (G1 or G2): inputs by the input density, then aux by the aux density
/// over the bases that follow the inputs' set bits.
fn b_query<G, P>(
    w: &Worker,
    bases: &Arc<Vec<G>>,
    sp: &Split,
    msm: impl Fn(
        &Worker,
        (Arc<Vec<G>>, usize),
        Arc<Vec<Repr>>,
        Arc<DensityTracker>,
    ) -> Result<P, ProverError>,
) -> Result<P, ProverError>
where
    P: std::ops::Add<Output = P>,
{
    let i = msm(
        w,
        (bases.clone(), 0),
        sp.inputs.clone(),
        sp.b_input_density.clone(),
    )?;
    let skip = sp.b_input_density.get_total_density();
    let x = msm(
        w,
        (bases.clone(), skip),
        sp.aux.clone(),
        sp.b_aux_density.clone(),
    )?;
    Ok(i + x)
}

impl Backend for CpuBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Cpu
    }

    fn prove(
        &self,
        params: &Groth16Params,
        assignments: &[Assignment],
        r_s: &[Scalar],
        s_s: &[Scalar],
        opts: ProveOptions,
    ) -> Result<Vec<Proof<Bls12>>, ProverError> {
        // The proof in its phases, each under its span (entry, prep, split_vectors_alloc,
        // the kernels: NTTs and MSMs, then assembly and the drop): one function, so that
        // the spans nest as the phases run and each phase's buffers pass straight to the
        // next.
        let w = &self.worker;
        // entry: lock, argument checks, SRS slices.
        let (_guard, vk, n) = {
            let s = Span::enter(spans::ENTRY);
            let guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
            let first = assignments.first().ok_or_else(|| err("no circuits"))?;
            let n = first.a.len().next_power_of_two();
            for (i, a) in assignments.iter().enumerate() {
                if a.a.len() != first.a.len()
                    || a.aux_assignment.len() != first.aux_assignment.len()
                {
                    return Err(err(format!("circuit {i} differs in shape from circuit 0")));
                }
            }
            if params.h.len() != n - 1
                || params.l.len() != first.aux_assignment.len()
                || params.vk.ic.len() != first.input_assignment.len()
            {
                return Err(err(format!(
                    "params do not fit the circuit (h {} vs {}, l {} vs {}, ic {} vs {})",
                    params.h.len(),
                    n - 1,
                    params.l.len(),
                    first.aux_assignment.len(),
                    params.vk.ic.len(),
                    first.input_assignment.len()
                )));
            }
            if r_s.len() != assignments.len() || s_s.len() != assignments.len() {
                return Err(err("one (r, s) pair per circuit is required"));
            }
            s.set_attr("domain", n);
            s.set_attr("circuits", assignments.len());
            (guard, params.vk.clone(), n)
        };

        // prep: scalars to canonical form, density bitmaps copied out, 0/1 census.
        let mut splits: Vec<Split> = {
            let s = Span::enter(spans::PREP);
            let (mut zeros, mut ones) = (0u64, 0u64);
            for a in assignments {
                for x in &a.aux_assignment {
                    zeros += bool::from(ff::Field::is_zero(x)) as u64;
                    ones += (*x == <Scalar as ff::Field>::ONE) as u64;
                }
            }
            s.set_attr("aux_zero_scalars", zeros);
            s.set_attr("aux_one_scalars", ones);
            assignments
                .par_iter()
                .map(|a| Split {
                    inputs: Arc::new(a.input_assignment.iter().map(|x| x.to_repr()).collect()),
                    aux: Arc::new(a.aux_assignment.par_iter().map(|x| x.to_repr()).collect()),
                    a_aux_density: Arc::new(a.a_aux_density.clone()),
                    b_input_density: Arc::new(a.b_input_density.clone()),
                    b_aux_density: Arc::new(a.b_aux_density.clone()),
                    domains: Vec::new(),
                    h_coeffs: Vec::new(),
                    h: Arc::new(Vec::new()),
                })
                .collect()
        };

        // split_vectors_alloc: the evaluation-domain vectors (a, b, c padded to 2^k).
        {
            let s = Span::enter(spans::SPLIT_VECTORS_ALLOC);
            for (sp, a) in splits.iter_mut().zip(assignments) {
                let mk = |v: &Vec<Scalar>| {
                    let mut c = Vec::with_capacity(n);
                    c.extend_from_slice(v);
                    EvaluationDomain::from_coeffs(c).map_err(err)
                };
                sp.domains = vec![mk(&a.a)?, mk(&a.b)?, mk(&a.c)?];
            }
            s.set_attr("bytes", (3 * n * 32 * assignments.len()) as u64);
        }

        let kernels = Span::enter(spans::KERNELS);
        {
            let s = Span::enter("ntt_h");
            s.set_attr("n", n);
            let mut fft: Option<LockedFftKernel<Scalar>> = None;
            for sp in splits.iter_mut() {
                let mut c = sp.domains.pop().expect("allocated above");
                let mut b = sp.domains.pop().expect("allocated above");
                let mut a = sp.domains.pop().expect("allocated above");
                EvaluationDomain::ifft_many(&mut [&mut a, &mut b, &mut c], w, &mut fft)
                    .map_err(err)?;
                EvaluationDomain::coset_fft_many(&mut [&mut a, &mut b, &mut c], w, &mut fft)
                    .map_err(err)?;
                a.mul_assign(w, &b);
                a.sub_assign(w, &c);
                a.divide_by_z_on_coset(w);
                a.icoset_fft(w, &mut fft).map_err(err)?;
                sp.h_coeffs = a.into_coeffs();
                sp.h = Arc::new(
                    sp.h_coeffs[..n - 1]
                        .par_iter()
                        .map(|x| x.to_repr())
                        .collect(),
                );
                sp.domains = vec![b, c];
            }
        }
        let h_s = {
            let _s = Span::enter("msm_h");
            splits
                .iter()
                .map(|sp| g1_msm(w, (params.h.clone(), 0), sp.h.clone(), None))
                .collect::<Result<Vec<_>, _>>()?
        };
        let l_s = {
            let _s = Span::enter("msm_l");
            splits
                .iter()
                .map(|sp| g1_msm(w, (params.l.clone(), 0), sp.aux.clone(), None))
                .collect::<Result<Vec<_>, _>>()?
        };
        // Input part (dense) + aux part (density-filtered, bases after the inputs').
        let a_s = {
            let _s = Span::enter("msm_a");
            splits
                .iter()
                .map(|sp| {
                    let i = g1_msm(w, (params.a.clone(), 0), sp.inputs.clone(), None)?;
                    let x = g1_msm(
                        w,
                        (params.a.clone(), sp.inputs.len()),
                        sp.aux.clone(),
                        Some(sp.a_aux_density.clone()),
                    )?;
                    Ok(i + x)
                })
                .collect::<Result<Vec<_>, ProverError>>()?
        };
        let b1_s = {
            let _s = Span::enter("msm_b_g1");
            splits
                .iter()
                .map(|sp| b_query(w, &params.b_g1, sp, g1_msm_dense))
                .collect::<Result<Vec<_>, ProverError>>()?
        };
        drop(kernels);
        let b2_s = {
            let _s = Span::enter(spans::B_G2_MSM);
            splits
                .iter()
                .map(|sp| b_query(w, &params.b_g2, sp, g2_msm))
                .collect::<Result<Vec<_>, ProverError>>()?
        };

        let proofs = {
            let _s = Span::enter(spans::ASSEMBLE);
            assemble::check_delta(&vk).map_err(err)?;
            (0..splits.len())
                .map(|i| {
                    let m = assemble::MsmParts {
                        h: h_s[i],
                        l: l_s[i],
                        a: a_s[i],
                        b_g1: b1_s[i],
                        b_g2: b2_s[i],
                    };
                    assemble::assemble(&vk, r_s[i], s_s[i], &m)
                })
                .collect::<Vec<_>>()
        };

        let bytes: u64 = splits.iter().map(Split::heap_bytes).sum();
        dropper::dispose(opts.drop, spans::DROP, bytes, splits);
        Ok(proofs)
    }
}
