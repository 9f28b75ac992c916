//! What the runner writes into meta.json: the meta of a new run (its workload and each
//! variant as it will run), and what each rep adds to it about the GPU.

use std::collections::BTreeMap;

use super::emulation::{self, Source};
use super::spec::{Experiment, ProcessPolicy, ResolvedVariant};
use crate::counters::Availability;
use crate::store::{self, NewRun, VariantMeta, WorkloadMeta};
use crate::telemetry::RepTelemetry;

/// meta.json of a new run of `exp` started by `command`, before params and setup are
/// known.
pub(super) fn new_run_meta(
    exp: &Experiment,
    variants: &[ResolvedVariant],
    sources: &[Source],
    command: &[String],
    counters: BTreeMap<String, Availability>,
    gpu: store::GpuMeta,
) -> store::Meta {
    let external = exp.workload.external.as_ref();
    NewRun {
        experiment: exp.name.clone(),
        command: command.to_vec(),
        counters,
        gpu,
        workload: match external {
            Some(_) => WorkloadMeta::command(),
            None => WorkloadMeta::groth16(
                exp.workload.circuit.as_str(),
                exp.workload.log2_constraints,
                exp.workload.batch,
                exp.workload.backend.as_str(),
            ),
        },
        phases: match external {
            Some(_) => super::external::phase_spec(),
            None => crate::prover::spans::phase_spec(),
        },
        variants: variants
            .iter()
            .zip(sources)
            .map(|(v, s)| match external {
                Some(ext) => super::external::variant_meta(v, ext, s.label()),
                None => VariantMeta {
                    name: v.name.clone(),
                    backend: v.backend.as_str().into(),
                    knobs: v.knobs(),
                    counters: Some(s.label()),
                    scope: emulation::synthesis_only(v.backend, s.emulator().is_some())
                        .then(|| "synthesis".to_string()),
                    revision: None,
                    patches: Vec::new(),
                    patch_failed: None,
                },
            })
            .collect(),
        reps: exp.run.reps,
        warmups: exp.run.warmups,
        order: format!("{:?}", exp.run.order).to_lowercase(),
        process: match exp.run.process {
            ProcessPolicy::Shared => "shared".into(),
            ProcessPolicy::PerRep => "per_rep".into(),
            ProcessPolicy::PerVariant => "per_variant".into(),
        },
    }
    .meta()
    .with_gaps(exp.workload.gaps.clone())
}

/// Keeps what a rep says about the GPU in meta.json: its clock calibration, and, for
/// worker processes, CUPTI's status there (the parent does not load CUPTI). True when
/// meta.json changed.
pub(super) fn record_gpu_meta(
    g: &mut store::GpuMeta,
    rep: &RepTelemetry,
    process: ProcessPolicy,
    cupti: bool,
) -> bool {
    let before = (
        g.clock_calibration.len(),
        g.cupti.clone(),
        g.util_placement.len(),
    );
    if let Some(c) = &rep.calibration {
        g.clock_calibration.push(c.clone());
    }
    // One line per GPU and way of placing its utilisation, as first met (each rep's
    // rows say their own window).
    let key = |l: &str| l.split_whitespace().take(4).collect::<Vec<_>>().join(" ");
    for line in &rep.util_placement {
        if !g.util_placement.iter().any(|l| key(l) == key(line)) {
            g.util_placement.push(line.clone());
        }
    }
    if process != ProcessPolicy::Shared && cupti {
        if let Some(s) = &rep.cupti_status {
            if g.cupti.as_deref().is_none_or(|c| c.starts_with("off")) {
                g.cupti = Some(format!("{s} (in worker processes)"));
            }
        }
    }
    before
        != (
            g.clock_calibration.len(),
            g.cupti.clone(),
            g.util_placement.len(),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_keeps_one_utilisation_placement_line_per_gpu_and_way() {
        let mut g = store::GpuMeta::default();
        let rep = |lines: &[&str]| RepTelemetry {
            util_placement: lines.iter().map(|l| l.to_string()).collect(),
            ..Default::default()
        };
        let shared = ProcessPolicy::Shared;
        let first = rep(&["GPU 0: driver samples (…)", "GPU 1: at read time (…)"]);
        assert!(record_gpu_meta(&mut g, &first, shared, true));
        // The same ways again, with other windows: nothing new.
        let again = rep(&["GPU 0: driver samples (other)", "GPU 1: at read time"]);
        assert!(!record_gpu_meta(&mut g, &again, shared, true));
        // GPU 1's window became known: a new way, kept beside the first.
        let shifted = rep(&["GPU 1: read values shifted back by the driver's 200 ms window"]);
        assert!(record_gpu_meta(&mut g, &shifted, shared, true));
        assert_eq!(g.util_placement.len(), 3);
        assert_eq!(g.util_placement[0], "GPU 0: driver samples (…)");
    }
}
