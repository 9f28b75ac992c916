//! `backend = "supraseal"`: the unmodified upstream prover (crate `supraseal-c2`, CUDA
//! over sppark) called on our assignments the way bellperson 0.27's `cuda-supraseal`
//! wrapper calls it: pointers to each circuit's a/b/c evaluations, input and aux
//! assignments and density bitmaps, one `generate_groth16_proofs` call for the batch.
//!
//! Spans under `gpu_prove`:
//! - `entry`: our lock, the GPU check, the SRS lookup, the shape checks upstream would
//!   otherwise `assert` (aborting the process), the pointer table;
//! - `supraseal_c2`: the upstream call. It does its own prep, NTT, MSMs, the B-G2 MSM on
//!   the CPU and assembly inside, and none of that is visible from here, so no inner phase
//!   is invented: GPU detail comes from CUPTI activity;
//! - `drop`: our side buffers (upstream frees its own inside its call).
//!
//! Upstream reads its SRS from the params file ([`super::params`] writes it in
//! bellperson's `Parameters::write` layout, the one upstream reads). The first call of a
//! process pays for driver and module load, the SRS read into pinned memory and sppark's
//! GPU enumeration, so [`setup`] does that once, with a warm-up proof, before measured
//! reps, and reports how long it took. [`SuprasealBackend::prove`] finds the loaded SRS by
//! the verifying key of the params it is given, so no path travels through `ProveOptions`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bellperson::groth16::{Proof, VerifyingKey};
use blstrs::{Bls12, G1Affine, G2Affine, Scalar};
use group::prime::PrimeCurveAffine;

use super::gpu_probe::{self, GpuDevice, GpuError};
use super::spans;
use super::{
    dropper, Assignment, Backend, BackendKind, CircuitInstance, Groth16Params, ProveOptions,
    ProverError,
};
use crate::trace::Span;

// Upstream writes proofs as three affine points, G1 (96 bytes), G2 (192), G1, without an
// infinity flag; bellperson's Proof is #[repr(C)] over blst's affine types, which match.
const _: () = assert!(std::mem::size_of::<Proof<Bls12>>() == 96 + 192 + 96);
const _: () =
    assert!(std::mem::size_of::<G1Affine>() == 96 && std::mem::size_of::<G2Affine>() == 192);
// Scalars cross as blst's Montgomery-form fr (sppark's fr_t).
const _: () = assert!(std::mem::size_of::<Scalar>() == 32);
// Density bitmaps cross as 64-bit words (upstream's CHUNK_BITS).
const _: () = assert!(std::mem::size_of::<usize>() == 8);

fn err(message: impl std::fmt::Display) -> ProverError {
    ProverError::Backend {
        backend: "supraseal",
        message: message.to_string(),
    }
}

fn gpu_err(e: GpuError) -> ProverError {
    err(format!("cannot use the GPU: {e}"))
}

/// An SRS loaded by upstream, with what we know of the file it came from.
struct Loaded {
    path: PathBuf,
    header: SrsHeader,
    srs: supraseal_c2::SRS,
    /// The GPUs setup found usable (upstream uses all of them).
    devices: Vec<GpuDevice>,
}

/// SRSs loaded in this process (upstream keeps them in pinned host memory), and the reason
/// of the last failed setup, which `prove` reports instead of a bare "not loaded".
struct Registry {
    loaded: Vec<Arc<Loaded>>,
    last_failure: Option<String>,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    loaded: Vec::new(),
    last_failure: None,
});
/// Serialises setups, so that two never load the same SRS at once.
static SETUP_LOCK: Mutex<()> = Mutex::new(());
/// Serialises proofs (upstream does too, inside; here the wait is charged to `entry`).
static PROVE_LOCK: Mutex<()> = Mutex::new(());

fn registry() -> std::sync::MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

fn find_loaded(vk: &VerifyingKey<Bls12>) -> Option<Arc<Loaded>> {
    registry()
        .loaded
        .iter()
        .find(|l| &l.header.vk == vk)
        .cloned()
}

/// Checks everything upstream asserts (an assert there aborts the process) or silently
/// assumes (reading past a short vector), against the SRS it will use.
pub fn check_shapes(
    srs: &SrsCounts,
    assignments: &[Assignment],
    r_s: &[Scalar],
    s_s: &[Scalar],
) -> Result<(), ProverError> {
    let first = assignments.first().ok_or_else(|| err("no circuits"))?;
    if r_s.len() != assignments.len() || s_s.len() != assignments.len() {
        return Err(err("one (r, s) pair per circuit is required"));
    }
    let abc = first.a.len();
    let domain = srs.h + 1;
    if !domain.is_power_of_two() || abc == 0 || abc > domain || abc.next_power_of_two() != domain {
        return Err(err(format!(
            "params do not fit the circuit: {abc} constraints need a domain of {}, the params \
             file has {} h points (a domain of {domain}); it was made for another circuit size",
            abc.next_power_of_two(),
            srs.h
        )));
    }
    for (i, a) in assignments.iter().enumerate() {
        let mismatch = |what: &str, got: usize, want: usize| {
            err(format!(
                "circuit {i}: {what} is {got}, the params file needs {want}; params and circuit \
                 differ (another circuit, gadget or size)"
            ))
        };
        let inp = a.input_assignment.len();
        let aux = a.aux_assignment.len();
        for (what, got) in [("a", a.a.len()), ("b", a.b.len()), ("c", a.c.len())] {
            if got != abc {
                return Err(mismatch(&format!("the length of {what}"), got, abc));
            }
        }
        if inp != srs.ic {
            return Err(mismatch("the number of inputs", inp, srs.ic));
        }
        if aux != srs.l {
            return Err(mismatch("the number of aux variables (l)", aux, srs.l));
        }
        for (what, d, want) in [
            ("the A aux density length", &a.a_aux_density, aux),
            ("the B aux density length", &a.b_aux_density, aux),
            ("the B input density length", &a.b_input_density, inp),
        ] {
            if d.bv.len() != want {
                return Err(mismatch(what, d.bv.len(), want));
            }
        }
        let a_points = inp + a.a_aux_density.get_total_density();
        if a_points != srs.a {
            return Err(mismatch(
                "inputs + A aux density (a points)",
                a_points,
                srs.a,
            ));
        }
        let b_points = a.b_input_density.get_total_density() + a.b_aux_density.get_total_density();
        if b_points != srs.b_g1 || b_points != srs.b_g2 {
            return Err(mismatch(
                "the B density (b_g1/b_g2 points)",
                b_points,
                srs.b_g1,
            ));
        }
    }
    Ok(())
}

/// The pointer view of one assignment that upstream reads, as bellperson builds it.
fn c2_assignment(a: &Assignment) -> supraseal_c2::Assignment<Scalar> {
    supraseal_c2::Assignment {
        a_aux_density: a.a_aux_density.bv.as_raw_slice().as_ptr(),
        a_aux_bit_len: a.a_aux_density.bv.len(),
        a_aux_popcount: a.a_aux_density.get_total_density(),
        b_inp_density: a.b_input_density.bv.as_raw_slice().as_ptr(),
        b_inp_bit_len: a.b_input_density.bv.len(),
        b_inp_popcount: a.b_input_density.get_total_density(),
        b_aux_density: a.b_aux_density.bv.as_raw_slice().as_ptr(),
        b_aux_bit_len: a.b_aux_density.bv.len(),
        b_aux_popcount: a.b_aux_density.get_total_density(),
        a: a.a.as_ptr(),
        b: a.b.as_ptr(),
        c: a.c.as_ptr(),
        abc_size: a.a.len(),
        inp_assignment_data: a.input_assignment.as_ptr(),
        inp_assignment_size: a.input_assignment.len(),
        aux_assignment_data: a.aux_assignment.as_ptr(),
        aux_assignment_size: a.aux_assignment.len(),
    }
}

/// Our side buffers of one call: the pointer table and the proof buffer upstream wrote.
struct SideBuffers(Vec<supraseal_c2::Assignment<Scalar>>);

// SAFETY: the table's raw pointers are never dereferenced after the upstream call; the
// buffer is only freed, possibly on the background drop thread.
unsafe impl Send for SideBuffers {}

impl SideBuffers {
    fn heap_bytes(&self) -> u64 {
        (self.0.capacity() * std::mem::size_of::<supraseal_c2::Assignment<Scalar>>()) as u64
    }
}

/// Turns upstream's panic (it panics with sppark's error text when its call fails) into an
/// error that names the cause.
fn upstream_failure(payload: Box<dyn std::any::Any + Send>, before: &[GpuDevice]) -> ProverError {
    let msg = payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "no message".into());
    describe_upstream_error(&msg, before)
}

fn describe_upstream_error(msg: &str, before: &[GpuDevice]) -> ProverError {
    let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
    let mem: Vec<String> = before
        .iter()
        .map(|d| {
            format!(
                "GPU {} had {:.1} of {:.1} GiB free",
                d.index,
                gib(d.free_bytes),
                gib(d.total_bytes)
            )
        })
        .collect();
    let lower = msg.to_ascii_lowercase();
    if lower.contains("out of memory") || lower.contains("memoryallocation") {
        err(format!(
            "out of GPU memory in the upstream prover ({msg}); before the call {}; lower batch or \
             log2_constraints",
            mem.join(", ")
        ))
    } else if lower.contains("no cuda devices") {
        err(format!("the upstream prover found no usable GPU ({msg})"))
    } else {
        err(format!("the upstream prover failed: {msg}"))
    }
}

/// The supraseal backend. Stateless: loaded SRSs are process-wide, see [`setup`].
#[derive(Debug, Default)]
pub struct SuprasealBackend;

impl SuprasealBackend {
    pub fn new() -> Self {
        SuprasealBackend
    }
}

impl Backend for SuprasealBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Supraseal
    }

    fn prove(
        &self,
        params: &Groth16Params,
        assignments: &[Assignment],
        r_s: &[Scalar],
        s_s: &[Scalar],
        opts: ProveOptions,
    ) -> Result<Vec<Proof<Bls12>>, ProverError> {
        let (_guard, loaded, table, devices) = {
            let s = Span::enter(spans::ENTRY);
            let guard = PROVE_LOCK.lock().unwrap_or_else(|e| e.into_inner());
            let loaded = match find_loaded(&params.vk) {
                Some(l) => l,
                None => {
                    // A missing GPU is the likelier cause, and the more useful message.
                    gpu_probe::usable_devices().map_err(gpu_err)?;
                    return Err(err(match registry().last_failure.clone() {
                        Some(w) => format!("no SRS loaded for these params: setup failed: {w}"),
                        None => "no SRS loaded for these params: call prover::supraseal::setup \
                                 with their params file before the first rep"
                            .to_string(),
                    }));
                }
            };
            // Upstream aborts the process on some CUDA failures: check that the GPUs setup
            // found still answer (one cheap query each; setup enumerated them).
            let mut devices = loaded.devices.clone();
            for d in devices.iter_mut() {
                (d.free_bytes, d.total_bytes) = gpu_probe::memory(d).map_err(gpu_err)?;
            }
            s.set_attr("gpus", devices.len());
            s.set_attr(
                "gpu_free_bytes",
                devices.iter().map(|d| d.free_bytes).sum::<u64>(),
            );
            if SrsCounts::of(params) != loaded.header.counts {
                return Err(err(format!(
                    "params in memory ({:?}) differ from the params file {} ({:?})",
                    SrsCounts::of(params),
                    loaded.path.display(),
                    loaded.header.counts
                )));
            }
            check_shapes(&loaded.header.counts, assignments, r_s, s_s)?;
            let table = SideBuffers(assignments.iter().map(c2_assignment).collect());
            s.set_attr("circuits", assignments.len());
            s.set_attr("domain", loaded.header.counts.h + 1);
            (guard, loaded, table, devices)
        };

        let proofs = {
            let s = Span::enter("supraseal_c2");
            s.set_attr("circuits", assignments.len());
            let blank = Proof::<Bls12> {
                a: G1Affine::identity(),
                b: G2Affine::identity(),
                c: G1Affine::identity(),
            };
            let mut proofs = vec![blank; assignments.len()];
            // Upstream panics (after its call returned) when the call reports an error;
            // its state is consistent then, so the panic is caught and becomes this rep's
            // error. A C++ assert or std::terminate still aborts the process: the checks in
            // `entry` rule out the asserts we know of, and `process = "per_rep"` confines
            // the rest to one rep.
            let call = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                supraseal_c2::generate_groth16_proofs(&table.0, r_s, s_s, &mut proofs, &loaded.srs)
            }));
            if let Err(payload) = call {
                return Err(upstream_failure(payload, &devices));
            }
            proofs
        };

        let bytes = table.heap_bytes();
        dropper::dispose(opts.drop, spans::DROP, bytes, table);
        Ok(proofs)
    }
}

/// How long the first use of an SRS took, outside any measured rep (meta.json `setup_ns`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct SetupReport {
    pub params_path: PathBuf,
    /// The GPU the warm-up ran on (upstream uses every usable GPU for a batch).
    pub device: String,
    /// Driver load, context creation, our test kernel.
    pub gpu_init: Duration,
    /// `SRS::try_new`: file mapped, pinned host memory allocated, read thread started.
    pub srs_open: Duration,
    /// The warm-up proof: the SRS read finishing, upstream's module load and GPU
    /// enumeration, its first allocations.
    pub first_proof: Duration,
    /// True when this SRS had been set up before in this process (all durations zero).
    pub reused: bool,
}

impl std::fmt::Display for SetupReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.reused {
            return write!(f, "{} already set up", self.params_path.display());
        }
        write!(
            f,
            "{:.2?} on {} (GPU init {:.2?}, SRS open {:.2?}, first proof {:.2?})",
            self.total(),
            self.device,
            self.gpu_init,
            self.srs_open,
            self.first_proof
        )
    }
}

impl SetupReport {
    pub fn total(&self) -> Duration {
        self.gpu_init + self.srs_open + self.first_proof
    }

    pub fn total_ns(&self) -> u64 {
        self.total().as_nanos() as u64
    }
}

/// Loads the SRS of `params` from `params_path` (the file they were read from) and proves
/// `warmup` once with it, verifying the proof. Idempotent per file: a second call returns
/// at once with `reused`. Synthesis of `warmup` is not part of the reported time.
///
/// Errors name the cause: no GPU or driver, a driver too old for this binary, a missing,
/// truncated or foreign params file, a failing or wrong warm-up proof. The cause is kept,
/// and a later `prove` with these params reports it.
pub fn setup(
    params_path: &Path,
    params: &Groth16Params,
    warmup: CircuitInstance,
) -> Result<SetupReport, ProverError> {
    let _serial = SETUP_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let r = setup_locked(params_path, params, warmup);
    registry().last_failure = r.as_ref().err().map(|e| e.to_string());
    r
}

fn setup_locked(
    params_path: &Path,
    params: &Groth16Params,
    warmup: CircuitInstance,
) -> Result<SetupReport, ProverError> {
    // The setup in order, under the caller's lock: the params file checked against the
    // params, an SRS already loaded reused, else the warm-up synthesized, the GPUs opened,
    // the SRS read and one proof checked. Each step's time goes into the report made at the
    // end.
    let header = read_header(params_path)?;
    if header.vk != params.vk {
        return Err(err(format!(
            "params file {} holds other params than those loaded (its verifying key differs): \
             another circuit, or regenerated since",
            params_path.display()
        )));
    }
    if header.counts != SrsCounts::of(params) {
        return Err(err(format!(
            "params file {} has sections {:?}, the params loaded have {:?}",
            params_path.display(),
            header.counts,
            SrsCounts::of(params)
        )));
    }
    if let Some(l) = find_loaded(&params.vk) {
        return Ok(SetupReport {
            params_path: l.path.clone(),
            device: String::new(),
            gpu_init: Duration::ZERO,
            srs_open: Duration::ZERO,
            first_proof: Duration::ZERO,
            reused: true,
        });
    }
    // Synthesis first, so that the SRS read (asynchronous upstream) is not hidden behind it.
    let inputs = warmup.public_inputs();
    let assignment = Assignment::synthesize(warmup)
        .map_err(|e| err(format!("warm-up synthesis failed: {e}")))?;

    let t = Instant::now();
    let (_, devices) = gpu_probe::usable_devices().map_err(gpu_err)?;
    for d in &devices {
        gpu_probe::launch_check(d).map_err(gpu_err)?;
    }
    let gpu_init = t.elapsed();
    let device = format!(
        "{} (sm_{}{})",
        devices[0].name, devices[0].compute_capability.0, devices[0].compute_capability.1
    );

    let t = Instant::now();
    let path_str = params_path.to_str().ok_or_else(|| {
        err(format!(
            "params path {} is not UTF-8, which upstream needs",
            params_path.display()
        ))
    })?;
    let srs = supraseal_c2::SRS::try_new(PathBuf::from(path_str), false).map_err(|e| {
        err(format!(
            "upstream could not load the SRS from {}: {e}",
            params_path.display()
        ))
    })?;
    let srs_open = t.elapsed();
    let loaded = Arc::new(Loaded {
        path: params_path.to_path_buf(),
        header,
        srs,
        devices,
    });
    registry().loaded.push(loaded.clone());

    let context = format!(
        ": the GPU computed a wrong result with {}",
        params_path.display()
    );
    let (first_proof, verdict) = super::warmup::verified(
        params,
        &assignment,
        inputs,
        "supraseal_setup",
        "supraseal",
        &context,
        |a, r, s| {
            SuprasealBackend.prove(
                params,
                std::slice::from_ref(a),
                &[r],
                &[s],
                ProveOptions::default(),
            )
        },
    );
    if let Err(e) = verdict {
        registry().loaded.retain(|l| !Arc::ptr_eq(l, &loaded));
        return Err(e);
    }
    Ok(SetupReport {
        params_path: params_path.to_path_buf(),
        device,
        gpu_init,
        srs_open,
        first_proof,
        reused: false,
    })
}

/// Finds which of `files` holds `params` (by verifying key) and [`setup`]s it: for the
/// runner, which knows the params files of a run but not which params each one holds.
pub fn setup_from(
    files: &[PathBuf],
    params: &Groth16Params,
    warmup: CircuitInstance,
) -> Result<SetupReport, ProverError> {
    let file = files
        .iter()
        .find(|f| read_header(f).map(|h| h.vk == params.vk).unwrap_or(false))
        .ok_or_else(|| {
            let e = err(format!(
                "none of the params files {files:?} holds these params (verifying keys differ)"
            ));
            registry().last_failure = Some(e.to_string());
            e
        })?;
    setup(file, params, warmup)
}

mod header;
#[cfg(test)]
mod tests;

pub use header::{read_header, SrsCounts, SrsHeader};
