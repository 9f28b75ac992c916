//! What the runner writes into meta.json: the meta of a new run (its workload and each
//! variant as it will run), and what each rep adds to it about the GPU.

use std::collections::BTreeMap;

use super::emulation::{self, Source};
use super::spec::{Experiment, ProcessPolicy, ResolvedVariant};
use crate::counters::Availability;
use crate::phases::WorkloadKind;
use crate::store::{self, NewRun, VariantMeta, WorkloadMeta};
use crate::telemetry::RepTelemetry;
use gapscope_workload::Workload as _;

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
    // The one place that tells the kinds apart: each gives its workload fields, its
    // phases and how a variant of it is described.
    type Describe<'a> = Box<dyn Fn(&ResolvedVariant, &Source) -> VariantMeta + 'a>;
    let (workload, phases, describe): (WorkloadMeta, _, Describe) =
        match (exp.workload.command.as_ref(), exp.workload.hash.as_ref()) {
            (Some(ext), _) => (
                WorkloadMeta::command(),
                super::command::phase_spec(exp.workload.gaps.as_ref()),
                Box::new(move |v, s| super::command::variant_meta(v, ext, s.label())),
            ),
            (None, Some(h)) => (
                WorkloadMeta {
                    kind: Some(WorkloadKind::Hash),
                    circuit: None,
                },
                h.phases(),
                Box::new(move |v, s| {
                    in_process_variant(v, s, h.kind().as_str(), v.workload_knob_set(h))
                }),
            ),
            (None, None) => (
                WorkloadMeta::groth16(
                    exp.workload.circuit.as_str(),
                    exp.workload.log2_constraints,
                    exp.workload.batch,
                    exp.workload.backend.as_str(),
                ),
                crate::prover::spans::phase_spec(),
                Box::new(|v, s| in_process_variant(v, s, v.backend.as_str(), v.knobs())),
            ),
        };
    NewRun {
        experiment: exp.name.clone(),
        command: command.to_vec(),
        counters,
        gpu,
        workload,
        phases,
        variants: variants
            .iter()
            .zip(sources)
            .map(|(v, s)| describe(v, s))
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
    .with_absolute_paths(exp.run.absolute_paths)
}

/// A variant of a workload that runs in gapscope's processes, as meta.json records it.
fn in_process_variant(
    v: &ResolvedVariant,
    s: &Source,
    backend: &str,
    knobs: BTreeMap<String, String>,
) -> VariantMeta {
    VariantMeta {
        name: v.name.clone(),
        backend: backend.into(),
        knobs,
        counters: Some(s.label()),
        scope: emulation::synthesis_only(v.backend, s.emulator().is_some())
            .then(|| "synthesis".to_string()),
        revision: None,
        patches: Vec::new(),
        patch_failed: None,
    }
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

#[cfg(test)]
mod phases_tests {
    use std::path::Path;

    use super::*;
    use crate::phases::WorkloadKind;

    fn meta_of(workload: &str) -> store::Meta {
        let text = format!("name = \"e\"\n[workload]\n{workload}\n[[variant]]\nname = \"a\"\n");
        let exp = Experiment::parse(&text, Path::new("e.toml")).unwrap();
        let variants = exp.resolved_variants();
        let sources = vec![Source::Off; variants.len()];
        new_run_meta(
            &exp,
            &variants,
            &sources,
            &[],
            BTreeMap::new(),
            store::GpuMeta::default(),
        )
    }

    fn json(meta: &store::Meta) -> serde_json::Value {
        serde_json::to_value(meta).unwrap()
    }

    #[test]
    fn a_provers_run_records_its_kind_circuit_and_the_provers_phases() {
        let m = meta_of("circuit = \"porep\"\nlog2_constraints = 10\nbatch = 2");
        assert_eq!(m.workload.kind(), WorkloadKind::Groth16);
        assert_eq!(m.phases(), &crate::prover::spans::phase_spec());
        let j = json(&m);
        assert_eq!(j["workload"]["kind"], "groth16");
        assert_eq!(j["workload"]["circuit"], "porep");
        assert_eq!(j["workload"]["batch"], 2);
        assert_eq!(j["phases"]["root"], "prove");
        assert_eq!(j["phases"]["wrapper"], "gpu_prove");
        assert_eq!(j["schema_version"], store::SCHEMA_VERSION);
    }

    #[test]
    fn a_commands_run_has_its_own_root_and_no_circuit_fields() {
        let m = meta_of("command = [\"./bench\"]");
        assert!(m.workload.is_command());
        let j = json(&m);
        assert_eq!(j["workload"], serde_json::json!({"kind": "command"}));
        assert_eq!(j["phases"], serde_json::json!({"root": "program"}));
        // The experiment's gaps name the run's wrapper and inner spans.
        let m = meta_of(
            "command = [\"./bench\"]\ngaps = { wrapper = \"step\", inner = [\"compute\"] }",
        );
        assert_eq!(m.phases().root, "program");
        assert_eq!(m.phases().wrapper.as_deref(), Some("step"));
        assert_eq!(m.phases().inner, ["compute"]);
        // Read back, it is the same meta.
        let text = serde_json::to_string(&m).unwrap();
        assert_eq!(serde_json::from_str::<store::Meta>(&text).unwrap(), m);
    }
}
