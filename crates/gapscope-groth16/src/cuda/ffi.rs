//! The C ABI of the native prover (`cuda/prover/gs_prover.h`): raw declarations, and the
//! safe types the backend uses. Every unsafe call of the native prover is in this file.
//!
//! Points and scalars cross as blstrs' own types: `G1Affine`, `G2Affine`, `Scalar`,
//! `G1Projective` and `G2Projective` are `#[repr(transparent)]` over blst's structs,
//! whose Montgomery layout sppark's `affine_t`, `fr_t` and `jacobian_t` share.

use std::ffi::{c_char, c_void, CStr};
use std::ptr::NonNull;

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use group::prime::PrimeCurveAffine;
use group::Group;

use crate::{Assignment, Groth16Params};

// sppark is linked for `select_gpu` and `ngpus`, which only the C++ side calls.
extern crate sppark as _;

const _: () = assert!(std::mem::size_of::<Scalar>() == 32);
const _: () = assert!(std::mem::size_of::<G1Affine>() == 96);
const _: () = assert!(std::mem::size_of::<G2Affine>() == 192);
const _: () = assert!(std::mem::size_of::<G1Projective>() == 144);
const _: () = assert!(std::mem::size_of::<G2Projective>() == 288);
// Density bitmaps cross as 64-bit words.
const _: () = assert!(std::mem::size_of::<usize>() == 8);

#[repr(C)]
struct GsStatus {
    code: i32,
    message: *mut c_char,
}

#[repr(C)]
struct GsCircuit {
    a_aux_density: *const u64,
    a_aux_bits: usize,
    a_aux_popcount: usize,
    b_inp_density: *const u64,
    b_inp_bits: usize,
    b_inp_popcount: usize,
    b_aux_density: *const u64,
    b_aux_bits: usize,
    b_aux_popcount: usize,
    a: *const c_void,
    b: *const c_void,
    c: *const c_void,
    abc_len: usize,
    inputs: *const c_void,
    num_inputs: usize,
    aux: *const c_void,
    num_aux: usize,
}

#[repr(C)]
struct GsSrsPoints {
    h: *const c_void,
    h_len: usize,
    l: *const c_void,
    l_len: usize,
    a: *const c_void,
    a_len: usize,
    b_g1: *const c_void,
    b_g1_len: usize,
    b_g2: *const c_void,
    b_g2_len: usize,
}

/// Per-call options (`gs_options`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NativeOptions {
    /// a/b/c staged through pinned host buffers.
    pub pinned: u32,
    /// 1 or 2 streams for the NTTs of a, b and c.
    pub streams: u32,
    /// GPUs to split a batch over; 0 for all.
    pub gpus: u32,
    /// 1: split MSMs one after another; 4: each on its own host thread; 8: two per query.
    pub split_threads: u32,
    /// 1: NTTs on their own host thread, each circuit's H MSM after its own NTTs.
    pub ntt_overlap: u32,
    /// 1: the H MSMs one after another; 2: every other circuit's on a second host thread.
    pub h_threads: u32,
    /// Prep's worker threads; 0 for half the cores.
    pub prep_threads: u32,
}

#[repr(C)]
struct GsResults {
    h: *mut c_void,
    l: *mut c_void,
    a: *mut c_void,
    b_g1: *mut c_void,
    b_g2: *mut c_void,
}

#[repr(C)]
struct GsSrs {
    _opaque: [u8; 0],
}

#[repr(C)]
struct GsBatch {
    _opaque: [u8; 0],
}

extern "C" {
    fn gs_device_count(count: *mut u32) -> GsStatus;
    fn gs_srs_load(points: *const GsSrsPoints, max_gpus: u32, out: *mut *mut GsSrs) -> GsStatus;
    fn gs_srs_free(srs: *mut GsSrs);
    fn gs_srs_gpus(srs: *const GsSrs) -> u32;
    fn gs_prove(
        srs: *mut GsSrs,
        circuits: *const GsCircuit,
        n: usize,
        opts: *const NativeOptions,
        out: *mut GsResults,
        batch: *mut *mut GsBatch,
    ) -> GsStatus;
    fn gs_batch_drop(batch: *mut GsBatch, async_: i32);
    fn gs_drop_wait();
    fn gs_msm_g1(
        points: *const c_void,
        scalars: *const c_void,
        n: usize,
        out: *mut c_void,
    ) -> GsStatus;
    fn gs_msm_g2(
        points: *const c_void,
        scalars: *const c_void,
        n: usize,
        out: *mut c_void,
    ) -> GsStatus;
    fn gs_ntt(scalars: *mut c_void, lg: u32, inverse: i32, coset: i32) -> GsStatus;
    fn gs_fixed_base_g1(
        base: *const c_void,
        scalars: *const c_void,
        n: usize,
        out: *mut c_void,
    ) -> GsStatus;
    fn gs_fixed_base_g2(
        base: *const c_void,
        scalars: *const c_void,
        n: usize,
        out: *mut c_void,
    ) -> GsStatus;
}

/// An error the native prover returned: a CUDA error code or one of its own (`GS_E_*`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} (code {code})")]
pub struct NativeError {
    pub code: i32,
    pub message: String,
}

impl NativeError {
    /// `GS_E_NO_GPU`, or a CUDA error that means there is no usable driver or device.
    pub fn is_no_gpu(&self) -> bool {
        // 1003: GS_E_NO_GPU; 35: cudaErrorInsufficientDriver; 100: cudaErrorNoDevice.
        matches!(self.code, 1003 | 35 | 100)
    }

    /// cudaErrorMemoryAllocation (2) or GS_E_HOST_MEMORY (1002).
    pub fn is_out_of_memory(&self) -> bool {
        matches!(self.code, 2 | 1002)
    }
}

fn status(st: GsStatus) -> Result<(), NativeError> {
    if st.code == 0 {
        return Ok(());
    }
    let message = if st.message.is_null() {
        "no message".to_string()
    } else {
        // SAFETY: non-null messages are strdup'd, NUL-terminated, owned by us from here.
        let m = unsafe { CStr::from_ptr(st.message) }
            .to_string_lossy()
            .into_owned();
        // SAFETY: allocated with malloc (strdup) by the C++ side, freed once here.
        unsafe { libc::free(st.message.cast()) };
        m
    };
    Err(NativeError {
        code: st.code,
        message,
    })
}

/// Usable CUDA devices, or why there are none.
pub fn device_count() -> Result<u32, NativeError> {
    let mut n = 0u32;
    // SAFETY: `n` is a valid out-pointer for the call.
    status(unsafe { gs_device_count(&mut n) })?;
    Ok(n)
}

/// An SRS resident on one or more GPUs.
pub struct Srs(NonNull<GsSrs>);

// SAFETY: the C++ object is only read after construction, and `gs_prove` serialises
// calls on its own lock.
unsafe impl Send for Srs {}
// SAFETY: as above.
unsafe impl Sync for Srs {}

impl Srs {
    /// Uploads the points of `params` to `max_gpus` GPUs (0: all).
    pub fn load(params: &Groth16Params, max_gpus: u32) -> Result<Srs, NativeError> {
        let p = GsSrsPoints {
            h: params.h.as_ptr().cast(),
            h_len: params.h.len(),
            l: params.l.as_ptr().cast(),
            l_len: params.l.len(),
            a: params.a.as_ptr().cast(),
            a_len: params.a.len(),
            b_g1: params.b_g1.as_ptr().cast(),
            b_g1_len: params.b_g1.len(),
            b_g2: params.b_g2.as_ptr().cast(),
            b_g2_len: params.b_g2.len(),
        };
        let mut out = std::ptr::null_mut();
        // SAFETY: the point slices outlive the call (they are copied to the GPUs inside);
        // `out` is a valid out-pointer.
        status(unsafe { gs_srs_load(&p, max_gpus, &mut out) })?;
        NonNull::new(out).map(Srs).ok_or_else(|| NativeError {
            code: 1004,
            message: "gs_srs_load returned no SRS".into(),
        })
    }

    pub fn gpus(&self) -> u32 {
        // SAFETY: a live SRS.
        unsafe { gs_srs_gpus(self.0.as_ptr()) }
    }
}

impl Drop for Srs {
    fn drop(&mut self) {
        // SAFETY: created by gs_srs_load, freed once.
        unsafe { gs_srs_free(self.0.as_ptr()) }
    }
}

/// The buffers one `prove` call allocated on the C++ side.
pub struct Batch(NonNull<GsBatch>);

// SAFETY: the batch is only freed, possibly on the C++ drop thread.
unsafe impl Send for Batch {}

impl Batch {
    /// Frees the buffers inside a C++ `drop` span: on this thread, or (`background`) on
    /// the native prover's drop thread, under the span open here.
    pub fn free(self, background: bool) {
        let p = self.0.as_ptr();
        std::mem::forget(self);
        // SAFETY: created by gs_prove, handed over once.
        unsafe { gs_batch_drop(p, background as i32) }
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        // SAFETY: created by gs_prove, freed once.
        unsafe { gs_batch_drop(self.0.as_ptr(), 0) }
    }
}

/// Waits until the native prover's background drop thread is idle.
pub fn wait_for_drops() {
    // SAFETY: no arguments.
    unsafe { gs_drop_wait() }
}

/// The five MSMs of each circuit, for the host to assemble proofs.
#[derive(Debug, Clone)]
pub struct MsmResults {
    pub h: Vec<G1Projective>,
    pub l: Vec<G1Projective>,
    pub a: Vec<G1Projective>,
    pub b_g1: Vec<G1Projective>,
    pub b_g2: Vec<G2Projective>,
}

fn circuit(a: &Assignment) -> GsCircuit {
    GsCircuit {
        a_aux_density: a.a_aux_density.bv.as_raw_slice().as_ptr().cast(),
        a_aux_bits: a.a_aux_density.bv.len(),
        a_aux_popcount: a.a_aux_density.get_total_density(),
        b_inp_density: a.b_input_density.bv.as_raw_slice().as_ptr().cast(),
        b_inp_bits: a.b_input_density.bv.len(),
        b_inp_popcount: a.b_input_density.get_total_density(),
        b_aux_density: a.b_aux_density.bv.as_raw_slice().as_ptr().cast(),
        b_aux_bits: a.b_aux_density.bv.len(),
        b_aux_popcount: a.b_aux_density.get_total_density(),
        a: a.a.as_ptr().cast(),
        b: a.b.as_ptr().cast(),
        c: a.c.as_ptr().cast(),
        abc_len: a.a.len(),
        inputs: a.input_assignment.as_ptr().cast(),
        num_inputs: a.input_assignment.len(),
        aux: a.aux_assignment.as_ptr().cast(),
        num_aux: a.aux_assignment.len(),
    }
}

/// Runs the native prover's phases (entry … kernels) on `assignments`. The batch of
/// buffers comes back whether or not the call succeeded, for the caller's drop policy.
pub fn prove(
    srs: &Srs,
    assignments: &[Assignment],
    opts: NativeOptions,
) -> (Result<MsmResults, NativeError>, Option<Batch>) {
    let n = assignments.len();
    let table: Vec<GsCircuit> = assignments.iter().map(circuit).collect();
    let mut r = MsmResults {
        h: vec![G1Projective::identity(); n],
        l: vec![G1Projective::identity(); n],
        a: vec![G1Projective::identity(); n],
        b_g1: vec![G1Projective::identity(); n],
        b_g2: vec![G2Projective::identity(); n],
    };
    let mut out = GsResults {
        h: r.h.as_mut_ptr().cast(),
        l: r.l.as_mut_ptr().cast(),
        a: r.a.as_mut_ptr().cast(),
        b_g1: r.b_g1.as_mut_ptr().cast(),
        b_g2: r.b_g2.as_mut_ptr().cast(),
    };
    let mut batch = std::ptr::null_mut();
    // SAFETY: `table` points into `assignments`, which outlive the call (the C++ side
    // keeps no pointer into them after it returns); the result vectors hold `n` points
    // each; `batch` is a valid out-pointer.
    let st = unsafe {
        gs_prove(
            srs.0.as_ptr(),
            table.as_ptr(),
            n,
            &opts,
            &mut out,
            &mut batch,
        )
    };
    (status(st).map(|()| r), NonNull::new(batch).map(Batch))
}

/// Σ scalars[i]·points[i] on GPU 0 (points and scalars uploaded for the call).
pub fn msm_g1(points: &[G1Affine], scalars: &[Scalar]) -> Result<G1Projective, NativeError> {
    let n = points.len().min(scalars.len());
    let mut out = G1Projective::identity();
    // SAFETY: both slices hold at least `n` elements; `out` is one Jacobian point.
    status(unsafe {
        gs_msm_g1(
            points.as_ptr().cast(),
            scalars.as_ptr().cast(),
            n,
            (&mut out as *mut G1Projective).cast(),
        )
    })?;
    Ok(out)
}

/// Σ scalars[i]·points[i] over G2 on GPU 0.
pub fn msm_g2(points: &[G2Affine], scalars: &[Scalar]) -> Result<G2Projective, NativeError> {
    let n = points.len().min(scalars.len());
    let mut out = G2Projective::identity();
    // SAFETY: both slices hold at least `n` elements; `out` is one Jacobian point.
    status(unsafe {
        gs_msm_g2(
            points.as_ptr().cast(),
            scalars.as_ptr().cast(),
            n,
            (&mut out as *mut G2Projective).cast(),
        )
    })?;
    Ok(out)
}

/// In-place NTT on GPU 0 (natural order in and out); `values.len()` must be a power of
/// two. `coset` uses the multiplicative generator 7 as the coset shift.
pub fn ntt(values: &mut [Scalar], inverse: bool, coset: bool) -> Result<(), NativeError> {
    let n = values.len();
    if !n.is_power_of_two() {
        return Err(NativeError {
            code: 1001,
            message: format!("NTT of {n} values: not a power of two"),
        });
    }
    // SAFETY: `values` holds 2^lg scalars, transformed in place.
    status(unsafe {
        gs_ntt(
            values.as_mut_ptr().cast(),
            n.trailing_zeros(),
            inverse as i32,
            coset as i32,
        )
    })
}

/// scalars[i]·base for every i, on GPU 0 (the parameter generator's bulk work).
pub fn fixed_base_g1(base: &G1Affine, scalars: &[Scalar]) -> Result<Vec<G1Affine>, NativeError> {
    let mut out = vec![<G1Affine as PrimeCurveAffine>::identity(); scalars.len()];
    // SAFETY: `out` holds one affine point per scalar; `base` is one affine point.
    status(unsafe {
        gs_fixed_base_g1(
            (base as *const G1Affine).cast(),
            scalars.as_ptr().cast(),
            scalars.len(),
            out.as_mut_ptr().cast(),
        )
    })?;
    Ok(out)
}

/// scalars[i]·base over G2, on GPU 0.
pub fn fixed_base_g2(base: &G2Affine, scalars: &[Scalar]) -> Result<Vec<G2Affine>, NativeError> {
    let mut out = vec![<G2Affine as PrimeCurveAffine>::identity(); scalars.len()];
    // SAFETY: `out` holds one affine point per scalar; `base` is one affine point.
    status(unsafe {
        gs_fixed_base_g2(
            (base as *const G2Affine).cast(),
            scalars.as_ptr().cast(),
            scalars.len(),
            out.as_mut_ptr().cast(),
        )
    })?;
    Ok(out)
}
