//! The canonical span names of the prover's span tree. Every backend opens its phases
//! under these names, so that runs of different backends can be diffed; the tables,
//! charts and checks that look a phase up by name take it from here.
//!
//! ```text
//! prove                   PROVE: the whole batch
//! ├─ synthesis            SYNTHESIS (synthesis[i] per circuit, on worker threads)
//! ├─ gpu_prove            GPU_PROVE: the backend call (the "GPU wrapper")
//! │  ├─ entry             ENTRY
//! │  ├─ prep              PREP
//! │  ├─ split_vectors_alloc  SPLIT_VECTORS_ALLOC
//! │  ├─ kernels           KERNELS (ntt_h, msm_*)
//! │  ├─ b_g2_msm          B_G2_MSM
//! │  ├─ assemble          ASSEMBLE
//! │  └─ drop              DROP: backend-side buffers (background thread when async)
//! └─ drop_assignments     DROP_ASSIGNMENTS: the Rust-side assignments (same policy)
//! ```

/// The whole batch: the outer timer of a rep, whose duration is the rep's wall time.
pub const PROVE: &str = "prove";
/// Circuit synthesis (children `synthesis[i]`, one per circuit).
pub const SYNTHESIS: &str = "synthesis";
/// The backend call: the wrapper whose self time is the unattributed "ghost".
pub const GPU_PROVE: &str = "gpu_prove";
/// Lock, argument checks, SRS slices.
pub const ENTRY: &str = "entry";
/// Scalars to canonical form, density bitmaps, 0/1 census.
pub const PREP: &str = "prep";
/// Allocation of the evaluation-domain vectors.
pub const SPLIT_VECTORS_ALLOC: &str = "split_vectors_alloc";
/// The inner GPU work (NTTs and MSMs).
pub const KERNELS: &str = "kernels";
/// The MSM over G2 for B, where the backend does it.
pub const B_G2_MSM: &str = "b_g2_msm";
/// The randomisers' terms of each proof, on their own thread while the MSMs run (cuda).
pub const BLINDING: &str = "blinding";
/// Proof assembly.
pub const ASSEMBLE: &str = "assemble";
/// Freeing the backend-side buffers.
pub const DROP: &str = "drop";
/// Freeing the Rust-side assignments.
pub const DROP_ASSIGNMENTS: &str = "drop_assignments";

/// The phases the end-of-run summary lists, in tree order, with their depth below
/// `prove` (0 for `prove` itself).
pub const SUMMARY_PHASES: [(&str, usize); 7] = [
    (PROVE, 0),
    (SYNTHESIS, 1),
    (GPU_PROVE, 1),
    (KERNELS, 2),
    (B_G2_MSM, 2),
    (DROP, 2),
    (DROP_ASSIGNMENTS, 1),
];

/// The phases a diff's phase table compares, in tree order: the ones an optimization of
/// the wrapper moves (b_g2_msm and drop_assignments are in the contributions instead).
pub const REVIEW_PHASES: [&str; 4] = [SYNTHESIS, GPU_PROVE, KERNELS, DROP];

/// A phase's label in tables and summaries for runs of `backend` (None: the sides of a
/// comparison ran different backends). The span names come from the GPU prover; the CPU
/// backend runs no GPU, so there `gpu_prove` is the prover call and `kernels` its NTT and
/// MSMs on the CPU.
pub fn phase_label(span: &str, backend: Option<&str>) -> String {
    match (span, backend) {
        (GPU_PROVE, Some("cpu")) => format!("CPU prover call ({span})"),
        (GPU_PROVE, Some(_)) => format!("GPU wrapper ({span})"),
        (GPU_PROVE, None) => format!("backend call ({span})"),
        (KERNELS, Some("cpu")) => format!("NTT and MSMs ({span})"),
        (KERNELS, Some(_)) => format!("GPU kernels ({span})"),
        (KERNELS, None) => format!("NTT and MSMs ({span})"),
        _ => span.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phase_lists_follow_the_tree_order() {
        let tree = [
            PROVE,
            SYNTHESIS,
            GPU_PROVE,
            ENTRY,
            PREP,
            SPLIT_VECTORS_ALLOC,
            KERNELS,
            B_G2_MSM,
            ASSEMBLE,
            DROP,
            DROP_ASSIGNMENTS,
        ];
        let pos = |n: &str| tree.iter().position(|&t| t == n).unwrap();
        let summary: Vec<usize> = SUMMARY_PHASES.iter().map(|&(n, _)| pos(n)).collect();
        assert!(summary.windows(2).all(|w| w[0] < w[1]), "{summary:?}");
        let review: Vec<usize> = REVIEW_PHASES.iter().map(|&n| pos(n)).collect();
        assert!(review.windows(2).all(|w| w[0] < w[1]), "{review:?}");
        assert!(REVIEW_PHASES
            .iter()
            .all(|p| SUMMARY_PHASES.iter().any(|(s, _)| s == p)));
    }

    #[test]
    fn no_gpu_in_the_cpu_backends_labels() {
        for span in [GPU_PROVE, KERNELS] {
            let cpu = phase_label(span, Some("cpu"));
            assert!(!cpu.contains("GPU"), "{cpu}");
            assert!(cpu.ends_with(&format!("({span})")), "{cpu}");
            assert!(phase_label(span, Some("cuda")).contains("GPU"));
            assert!(!phase_label(span, None).contains("GPU"));
        }
        assert_eq!(phase_label(SYNTHESIS, Some("cpu")), SYNTHESIS);
    }
}
