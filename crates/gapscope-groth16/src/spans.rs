//! The canonical span names of the prover's span tree. Every backend opens its phases
//! under these names, so that runs of different backends can be diffed. A run folder
//! records them ([`phase_spec`], meta.json's `phases`): the tables, charts and checks
//! that look a phase up by name read them from there.
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

use crate::phases::{PhaseLabel, PhaseSpec, SummaryPhase};

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

/// The prover's phases as meta.json records them (`phases`): the summary's phases in
/// tree order with their depth below `prove`, the phases a diff's phase table compares
/// (the ones an optimization of the wrapper moves; b_g2_msm and drop_assignments are in
/// the contributions instead), their labels, the wrapper and its compute children, the
/// drops. The span names come from the GPU prover; the CPU backend runs no GPU, so there
/// `gpu_prove` is the prover call and `kernels` its NTT and MSMs on the CPU.
pub fn phase_spec() -> PhaseSpec {
    let label = |label: &str, cpu: &str, mixed: &str| PhaseLabel {
        label: label.into(),
        by_backend: [("cpu".to_string(), cpu.to_string())].into(),
        mixed: Some(mixed.into()),
    };
    let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    PhaseSpec {
        root: PROVE.into(),
        summary: [
            (PROVE, 0),
            (SYNTHESIS, 1),
            (GPU_PROVE, 1),
            (KERNELS, 2),
            (B_G2_MSM, 2),
            (DROP, 2),
            (DROP_ASSIGNMENTS, 1),
        ]
        .iter()
        .map(|&(span, depth)| SummaryPhase {
            span: span.into(),
            depth,
        })
        .collect(),
        review: names(&[SYNTHESIS, GPU_PROVE, KERNELS, DROP]),
        labels: [
            (
                GPU_PROVE.to_string(),
                label("GPU wrapper", "CPU prover call", "backend call"),
            ),
            (
                KERNELS.to_string(),
                label("GPU kernels", "NTT and MSMs", "NTT and MSMs"),
            ),
        ]
        .into(),
        wrapper: Some(GPU_PROVE.into()),
        // The backend's compute children of the wrapper: its kernels, and the B-G2 MSM,
        // which the CPU backend (like upstream supraseal) runs outside `kernels`.
        inner: names(&[KERNELS, B_G2_MSM]),
        drops: names(&[DROP, DROP_ASSIGNMENTS]),
        partial: Some(SYNTHESIS.into()),
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
        let spec = phase_spec();
        let summary: Vec<usize> = spec.summary.iter().map(|p| pos(&p.span)).collect();
        assert!(summary.windows(2).all(|w| w[0] < w[1]), "{summary:?}");
        let review: Vec<usize> = spec.review.iter().map(|n| pos(n)).collect();
        assert!(review.windows(2).all(|w| w[0] < w[1]), "{review:?}");
        assert!(spec
            .review
            .iter()
            .all(|p| spec.summary.iter().any(|s| &s.span == p)));
        spec.check().unwrap();
    }

    /// A run folder without `phases` reads as the prover's run with these phases: the
    /// ones it writes today. Changing the prover's phases changes what new folders
    /// record, and this test is then updated to say how they differ.
    #[test]
    fn the_prover_writes_the_phases_old_folders_read_as() {
        assert_eq!(phase_spec(), PhaseSpec::groth16());
    }

    #[test]
    fn no_gpu_in_the_cpu_backends_labels() {
        let spec = phase_spec();
        for span in [GPU_PROVE, KERNELS] {
            let cpu = spec.label(span, Some("cpu"));
            assert!(!cpu.contains("GPU"), "{cpu}");
            assert!(cpu.ends_with(&format!("({span})")), "{cpu}");
            assert!(spec.label(span, Some("cuda")).contains("GPU"));
            assert!(!spec.label(span, None).contains("GPU"));
        }
        assert_eq!(spec.label(SYNTHESIS, Some("cpu")), SYNTHESIS);
    }
}
