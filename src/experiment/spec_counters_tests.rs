//! The `counters` knob of experiment specs (beside spec.rs's own tests, which fill it).

use std::path::Path;

use super::Experiment;
use crate::counters::CounterMode;

const GOOD: &str = r#"
name = "t"
[workload]
circuit = "porep"
log2_constraints = 10
[run]
reps = 3
[[variant]]
name = "a"
[[variant]]
name = "b"
gadget = "lc"
"#;

fn p(s: &str) -> Result<Experiment, super::SpecError> {
    Experiment::parse(s, Path::new("exp.toml"))
}

#[test]
fn counters_knob_per_run_and_variant_and_emulation_of_gpu_backends_is_synthesis_alone() {
    let e = p(&GOOD.replace("reps = 3", "reps = 3\ncounters = \"emulated\"")).unwrap();
    let v = e.resolved_variants();
    assert_eq!(v[0].counters, CounterMode::Emulated);
    let e = p(&GOOD.replace(
        "gadget = \"lc\"",
        "gadget = \"lc\"\ncounters = \"emulated\"",
    ))
    .unwrap();
    let v = e.resolved_variants();
    assert_eq!(
        (v[0].counters, v[1].counters),
        (CounterMode::Hardware, CounterMode::Emulated)
    );
    let again = p(&toml::to_string(&e).unwrap()).unwrap();
    assert_eq!(again.resolved_variants()[1].counters, CounterMode::Emulated);
    let e = p(&GOOD.replace("reps = 3", "reps = 3\ncounters = false")).unwrap();
    assert_eq!(e.resolved_variants()[0].counters, CounterMode::Off);
    let m = p(&GOOD.replace("reps = 3", "reps = 3\ncounters = \"callgrind\""))
        .unwrap_err()
        .to_string();
    assert!(
        m.contains(r#"true, false, "hardware" or "emulated""#),
        "{m}"
    );
    // A GPU backend under the emulator is accepted: its reps run synthesis alone.
    let e = p(&GOOD.replace(
        "gadget = \"lc\"",
        "gadget = \"lc\"\ncounters = \"emulated\"\nbackend = \"supraseal\"",
    ))
    .unwrap();
    let v = &e.resolved_variants()[1];
    assert_eq!(v.counters, CounterMode::Emulated);
    assert_eq!(v.backend, crate::prover::BackendKind::Supraseal);
    assert!(crate::experiment::emulation::synthesis_only(
        v.backend, true
    ));
    assert!(!crate::experiment::emulation::synthesis_only(
        v.backend, false
    ));
    assert!(!crate::experiment::emulation::synthesis_only(
        crate::prover::BackendKind::Cpu,
        true
    ));
}
