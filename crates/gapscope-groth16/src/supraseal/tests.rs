//! What can be checked without a GPU: the params-file header upstream will read, the shape
//! checks that stand in for upstream's asserts, the pointer table, error wording, and that
//! a machine without a GPU gets an error (not an abort) from every entry point.

use std::path::PathBuf;
use std::sync::OnceLock;

use super::*;
use crate::paramgen::ParamGen;
use crate::params::{self, ParamsKey};
use crate::trace;
use crate::{CircuitKind, Gadget};

/// Params for the smallest PoRep circuit, generated once per test process.
fn small() -> &'static (tempfile::TempDir, Groth16Params, PathBuf) {
    static P: OnceLock<(tempfile::TempDir, Groth16Params, PathBuf)> = OnceLock::new();
    P.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let c = circuit(10, 0);
        let key = ParamsKey::for_circuit(&c, "porep", 10).unwrap();
        let (p, origin) = params::load_or_generate(dir.path(), &c, &key, ParamGen::Cpu).unwrap();
        (dir, p, origin.path)
    })
}

fn circuit(log2: u32, index: u64) -> CircuitInstance {
    CircuitInstance::new(CircuitKind::Porep, log2, Gadget::AddToLc, index).unwrap()
}

fn assignment(log2: u32) -> Assignment {
    Assignment::synthesize(circuit(log2, 1)).unwrap()
}

fn no_gpu_here() -> bool {
    !std::path::Path::new("/dev/nvidiactl").exists()
}

#[test]
fn header_matches_the_params_it_was_written_from() {
    let (_, p, path) = small();
    let h = read_header(path).unwrap();
    assert_eq!(h.counts, SrsCounts::of(p));
    assert!(h.vk == p.vk);
    assert_eq!(h.file_bytes, std::fs::metadata(path).unwrap().len());
    assert_eq!(h.counts.h, 1023);
}

#[test]
fn missing_short_or_long_params_files_are_named() {
    let (dir, _, path) = small();
    let e = read_header(&dir.path().join("nope.params"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("nope.params") && e.contains("cannot be opened"),
        "{e}"
    );

    let bytes = std::fs::read(path).unwrap();
    let short = dir.path().join("short.params");
    std::fs::write(&short, &bytes[..bytes.len() - 100]).unwrap();
    let e = read_header(&short).unwrap_err().to_string();
    assert!(
        e.contains("short.params") && e.contains("not a complete params file"),
        "{e}"
    );

    let long = dir.path().join("long.params");
    let mut more = bytes.clone();
    more.extend_from_slice(&[0u8; 7]);
    std::fs::write(&long, &more).unwrap();
    let e = read_header(&long).unwrap_err().to_string();
    assert!(e.contains(&format!("the file has {}", more.len())), "{e}");

    let garbage = dir.path().join("garbage.params");
    std::fs::write(&garbage, vec![0xa5u8; 4096]).unwrap();
    let e = read_header(&garbage).unwrap_err().to_string();
    assert!(e.contains("verifying key"), "{e}");
}

#[test]
fn shapes_that_fit_pass_and_each_mismatch_is_explained() {
    let (_, p, _) = small();
    let counts = SrsCounts::of(p);
    let a = assignment(10);
    let one = [Scalar::from(1u64)];
    check_shapes(&counts, std::slice::from_ref(&a), &one, &one).unwrap();

    let big = assignment(11);
    let e = check_shapes(&counts, std::slice::from_ref(&big), &one, &one)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("another circuit size") && e.contains("2048"),
        "{e}"
    );

    let e = check_shapes(&counts, std::slice::from_ref(&a), &[], &one)
        .unwrap_err()
        .to_string();
    assert!(e.contains("(r, s)"), "{e}");
    assert!(check_shapes(&counts, &[], &[], &[])
        .unwrap_err()
        .to_string()
        .contains("no circuits"));

    let mut short_b = assignment(10);
    short_b.b.pop();
    let e = check_shapes(&counts, &[a, short_b], &[one[0]; 2], &[one[0]; 2])
        .unwrap_err()
        .to_string();
    assert!(e.contains("circuit 1") && e.contains("length of b"), "{e}");

    let mut other = counts;
    other.a += 1;
    let e = check_shapes(&other, &[assignment(10)], &one, &one)
        .unwrap_err()
        .to_string();
    assert!(e.contains("a points"), "{e}");
    let mut other = counts;
    other.b_g2 += 1;
    let e = check_shapes(&other, &[assignment(10)], &one, &one)
        .unwrap_err()
        .to_string();
    assert!(e.contains("B density"), "{e}");
    let mut other = counts;
    other.l -= 1;
    let e = check_shapes(&other, &[assignment(10)], &one, &one)
        .unwrap_err()
        .to_string();
    assert!(e.contains("aux variables"), "{e}");
}

#[test]
fn the_pointer_table_is_the_assignment() {
    let a = assignment(10);
    let t = c2_assignment(&a);
    assert_eq!(t.a, a.a.as_ptr());
    assert_eq!(t.b, a.b.as_ptr());
    assert_eq!(t.c, a.c.as_ptr());
    assert_eq!(t.abc_size, 1024);
    assert_eq!(t.inp_assignment_data, a.input_assignment.as_ptr());
    assert_eq!(t.inp_assignment_size, a.input_assignment.len());
    assert_eq!(t.aux_assignment_data, a.aux_assignment.as_ptr());
    assert_eq!(t.aux_assignment_size, a.aux_assignment.len());
    assert_eq!(t.a_aux_bit_len, a.aux_assignment.len());
    assert_eq!(t.b_inp_bit_len, a.input_assignment.len());
    assert_eq!(t.a_aux_popcount, a.a_aux_density.bv.count_ones());
    assert_eq!(t.b_aux_popcount, a.b_aux_density.bv.count_ones());
    assert_eq!(t.b_inp_popcount, a.b_input_density.bv.count_ones());
    // Upstream reads the bitmaps as 64-bit words, bit i of the variable order at word
    // i / 64, bit i % 64 (Lsb0).
    // SAFETY: the bitmap holds a_aux_bit_len bits, so ceil(len / 64) words.
    let words =
        unsafe { std::slice::from_raw_parts(t.a_aux_density, t.a_aux_bit_len.div_ceil(64)) };
    for (i, bit) in a.a_aux_density.bv.iter().by_vals().enumerate() {
        assert_eq!(words[i / 64] >> (i % 64) & 1 == 1, bit, "bit {i}");
    }
}

#[test]
fn upstream_errors_are_described() {
    let d = GpuDevice {
        index: 0,
        name: "H200".into(),
        compute_capability: (9, 0),
        cooperative_launch: true,
        multiprocessors: 132,
        total_bytes: 140 << 30,
        free_bytes: 3 << 29,
        pci_bus: 1,
    };
    let e = describe_upstream_error(
        "cudaMalloc(&d_ptr, sz)@sppark/util/gpu_t.cuh:120 failed: \"out of memory\"",
        std::slice::from_ref(&d),
    )
    .to_string();
    assert!(
        e.contains("out of GPU memory")
            && e.contains("1.5 of 140.0 GiB free")
            && e.contains("lower batch"),
        "{e}"
    );
    let e = describe_upstream_error("No CUDA devices available", &[]).to_string();
    assert!(e.contains("no usable GPU"), "{e}");
    let payload: Box<dyn std::any::Any + Send> = Box::new(String::from("sppark::Error #700"));
    let e = upstream_failure(payload, &[]).to_string();
    assert!(
        e.contains("upstream prover failed: sppark::Error #700"),
        "{e}"
    );
}

#[test]
fn without_a_gpu_prove_fails_with_the_cause_and_records_entry() {
    if !no_gpu_here() {
        return; // the GPU host runs the device script instead
    }
    let (_, p, _) = small();
    let a = assignment(10);
    let one = [Scalar::from(1u64)];
    let root = Span::enter("t_root");
    let trace_id = root.trace();
    let opts = ProveOptions::default();
    let r = SuprasealBackend::new().prove(p, std::slice::from_ref(&a), &one, &one, opts);
    drop(root);
    let e = r.unwrap_err().to_string();
    assert!(e.contains("cannot use the GPU"), "{e}");
    assert!(
        e.contains("no NVIDIA driver") || e.contains("no CUDA device"),
        "{e}"
    );
    let spans = trace::drain_trace(trace_id);
    assert!(spans.iter().any(|s| s.name == "entry"), "{spans:?}");
    assert!(!spans.iter().any(|s| s.name == "supraseal_c2"));
}

#[test]
fn setup_checks_the_file_before_the_gpu() {
    let (dir, p, path) = small();
    // A params file of another circuit: same layout, other verifying key.
    let c = circuit(11, 0);
    let key = ParamsKey::for_circuit(&c, "porep", 11).unwrap();
    let (_, other) = params::load_or_generate(dir.path(), &c, &key, ParamGen::Cpu).unwrap();
    let e = setup(&other.path, p, circuit(10, 2))
        .unwrap_err()
        .to_string();
    assert!(e.contains("verifying key differs"), "{e}");
    let e = setup(&dir.path().join("gone.params"), p, circuit(10, 2))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("gone.params") && e.contains("cannot be opened"),
        "{e}"
    );
    let e = setup_from(std::slice::from_ref(&other.path), p, circuit(10, 2))
        .unwrap_err()
        .to_string();
    assert!(e.contains("none of the params files"), "{e}");
    if no_gpu_here() {
        let e = setup(path, p, circuit(10, 2)).unwrap_err().to_string();
        assert!(e.contains("cannot use the GPU"), "{e}");
        let e = setup_from(&[other.path.clone(), path.clone()], p, circuit(10, 2))
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot use the GPU"), "{e}");
    }
}

#[test]
fn the_factory_builds_it() {
    let b = crate::backend(BackendKind::Supraseal).unwrap();
    assert_eq!(b.kind(), BackendKind::Supraseal);
}
