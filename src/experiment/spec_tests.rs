//! spec.rs's own tests: parsing, defaults, and the errors bad values get.

use super::*;

const GOOD: &str = r#"
name = "t"
[workload]
circuit = "porep"
log2_constraints = 10
batch = 2
[run]
reps = 3
[[variant]]
name = "a"
drop = "sync"
[[variant]]
name = "b"
drop = "async"
gadget = "lc"
"#;

fn parse(s: &str) -> Result<Experiment, SpecError> {
    Experiment::parse(s, Path::new("exp.toml"))
}

#[test]
fn parses_and_resolves_defaults() {
    let e = parse(GOOD).unwrap();
    let v = e.resolved_variants();
    assert_eq!(v[0].prove.drop, DropPolicy::Sync);
    assert_eq!(v[0].gadget, Gadget::AddToLc);
    assert_eq!(v[1].gadget, Gadget::Lc);
    assert_eq!(v[1].backend, BackendKind::Cpu);
    assert_eq!(e.run.warmups, 1);
    assert_eq!(v[0].telemetry, TelemetryParts::ALL);
    assert_eq!(v[0].knobs()["telemetry"], "true");
    assert_eq!(e.run.telemetry_period_ms, 20);
}

#[test]
fn telemetry_knob_and_period() {
    let text = GOOD
        .replace("gadget = \"lc\"", "gadget = \"lc\"\ntelemetry = false")
        .replace("reps = 3", "reps = 3\ntelemetry_period_ms = 50");
    let e = parse(&text).unwrap();
    let v = e.resolved_variants();
    assert_eq!(
        (v[0].telemetry, v[1].telemetry),
        (TelemetryParts::ALL, TelemetryParts::NONE)
    );
    assert_eq!(v[1].knobs()["telemetry"], "false");
    assert_eq!(e.run.telemetry_period_ms, 50);
    let m = parse(&GOOD.replace("reps = 3", "reps = 3\ntelemetry_period_ms = 0"))
        .unwrap_err()
        .to_string();
    assert!(m.contains("telemetry_period_ms"), "{m}");
}

#[test]
fn telemetry_knob_takes_one_part_and_refuses_others() {
    // The second variant (gadget = "lc") with `telemetry = <value>`.
    let with_knob = |value: &str| {
        parse(&GOOD.replace(
            "gadget = \"lc\"",
            &format!("gadget = \"lc\"\ntelemetry = {value}"),
        ))
    };
    for (knob, nvml, cupti) in [("\"nvml\"", true, false), ("\"cupti\"", false, true)] {
        let e = with_knob(knob).unwrap();
        let v = &e.resolved_variants()[1];
        assert_eq!(
            (v.telemetry.nvml, v.telemetry.cupti),
            (nvml, cupti),
            "{knob}"
        );
        assert_eq!(v.knobs()["telemetry"], knob.trim_matches('"'));
        // Written back (experiment.toml in the run folder) and read again, unchanged.
        let again = parse(&toml::to_string(&e).unwrap()).unwrap();
        assert_eq!(again.resolved_variants()[1].telemetry, v.telemetry);
    }
    for bad in ["\"nmvl\"", "3"] {
        let m = with_knob(bad).unwrap_err().to_string();
        assert!(
            m.contains(r#"true, false, "nvml" or "cupti""#),
            "{bad}: {m}"
        );
    }
}

#[test]
fn blocks_take_a_block_size_and_other_orders_refuse_one() {
    let e = parse(&GOOD.replace("reps = 3", "reps = 3\norder = \"blocks\"\nblock = 2")).unwrap();
    assert_eq!((e.run.order, e.run.block), (Order::Blocks, Some(2)));
    assert_eq!(e.run.block_size(), 2);
    let e = parse(&GOOD.replace("reps = 3", "reps = 3\norder = \"blocks\"")).unwrap();
    assert_eq!(e.run.block_size(), 5);
    let m = parse(&GOOD.replace("reps = 3", "reps = 3\norder = \"blocks\"\nblock = 0"))
        .unwrap_err()
        .to_string();
    assert!(m.contains("run.block must be at least 1"), "{m}");
    let m = parse(&GOOD.replace("reps = 3", "reps = 3\nblock = 4"))
        .unwrap_err()
        .to_string();
    assert!(m.contains("applies only to order = \"blocks\""), "{m}");
}

#[test]
fn malformed_toml_names_file_line_and_column() {
    let bad = GOOD.replace("batch = 2", "batch = = 2");
    let m = parse(&bad).unwrap_err().to_string();
    assert!(m.contains("exp.toml"), "{m}");
    assert!(m.contains("line 6"), "{m}");
    assert!(m.contains("column"), "{m}");
}

#[test]
fn unknown_knob_lists_the_valid_ones() {
    let bad = GOOD.replace("gadget = \"lc\"", "gadgets = \"lc\"");
    let m = parse(&bad).unwrap_err().to_string();
    assert!(m.contains("gadgets"), "{m}");
    for k in ["drop", "gadget", "host_memory", "backend"] {
        assert!(m.contains(k), "{k} missing in: {m}");
    }
}

#[test]
fn test_doubles_are_not_experiment_knobs() {
    let bad = GOOD.replace("gadget = \"lc\"", "corrupt_proofs = true");
    let m = parse(&bad).unwrap_err().to_string();
    assert!(m.contains("corrupt_proofs"), "{m}");
}

#[test]
fn unknown_backend_and_circuit_list_the_valid_ones() {
    let m = parse(&GOOD.replace("batch = 2", "batch = 2\nbackend = \"opencl\""))
        .unwrap_err()
        .to_string();
    assert!(
        m.contains("opencl") && m.contains("cpu") && m.contains("supraseal"),
        "{m}"
    );
    let m = parse(&GOOD.replace("\"porep\"", "\"poseidon\""))
        .unwrap_err()
        .to_string();
    assert!(
        m.contains("poseidon") && m.contains("sha256") && m.contains("porep"),
        "{m}"
    );
    let m = parse(&GOOD.replace("drop = \"async\"", "drop = \"later\""))
        .unwrap_err()
        .to_string();
    assert!(m.contains("sync") && m.contains("async"), "{m}");
}

#[test]
fn invalid_values_are_explained() {
    let m = parse(&GOOD.replace("log2_constraints = 10", "log2_constraints = 4"))
        .unwrap_err()
        .to_string();
    assert!(m.contains("10..=28"), "{m}");
    let m = parse(&GOOD.replace("name = \"b\"", "name = \"a\""))
        .unwrap_err()
        .to_string();
    assert!(m.contains("twice"), "{m}");
    let m = parse(&GOOD.replace("drop = \"sync\"", "host_memory = \"pinned\""))
        .unwrap_err()
        .to_string();
    assert!(m.contains("GPU backend"), "{m}");
}

#[test]
fn cuda_knobs_are_checked() {
    let cuda = GOOD.replace("batch = 2", "batch = 2\nbackend = \"cuda\"");
    let e = parse(&cuda.replace("drop = \"sync\"", "msm_threads = 4")).unwrap();
    let v = e.resolved_variants();
    assert_eq!((v[0].prove.msm_threads, v[1].prove.msm_threads), (4, 1));
    assert_eq!(v[0].knobs()["msm_threads"], "4");
    let m = parse(&cuda.replace("drop = \"sync\"", "msm_threads = 3"))
        .unwrap_err()
        .to_string();
    assert!(m.contains("use 1, 4 or 8"), "{m}");
    assert_eq!(v[0].knobs()["ntt"], "first");
    let e = parse(&cuda.replace("drop = \"sync\"", "ntt = \"overlap\"")).unwrap();
    assert_eq!(e.resolved_variants()[0].knobs()["ntt"], "overlap");
    let e = parse(&cuda.replace("drop = \"sync\"", "h_threads = 2")).unwrap();
    assert_eq!(e.resolved_variants()[0].knobs()["h_threads"], "2");
    assert_eq!(e.resolved_variants()[1].knobs()["h_threads"], "1");
    let m = parse(&cuda.replace("drop = \"sync\"", "h_threads = 3"))
        .unwrap_err()
        .to_string();
    assert!(m.contains("use 1 or 2"), "{m}");
    assert_eq!(v[0].knobs()["prep_threads"], "half the cores");
    let e = parse(&cuda.replace("drop = \"sync\"", "prep_threads = 3")).unwrap();
    assert_eq!(e.resolved_variants()[0].knobs()["prep_threads"], "3");
    let m = parse(&cuda.replace("drop = \"sync\"", "prep_threads = 0"))
        .unwrap_err()
        .to_string();
    assert!(m.contains("use 1..=256"), "{m}");
    let m = parse(&cuda.replace("drop = \"sync\"", "ntt = \"later\""))
        .unwrap_err()
        .to_string();
    assert!(m.contains("first") && m.contains("overlap"), "{m}");
    let m = parse(&GOOD.replace("drop = \"sync\"", "ntt = \"overlap\""))
        .unwrap_err()
        .to_string();
    assert!(m.contains("knobs of backend = \"cuda\""), "{m}");
    let m = parse(&GOOD.replace("drop = \"sync\"", "msm_threads = 4"))
        .unwrap_err()
        .to_string();
    assert!(m.contains("knobs of backend = \"cuda\""), "{m}");
}

#[test]
fn names_are_limited_to_a_safe_set_and_the_error_names_it() {
    for bad in ["..", ".", ".hidden", "a/b", "a\nb", "a,b", "a b", "-x", ""] {
        let m = parse(&GOOD.replacen("name = \"t\"", &format!("name = {bad:?}"), 1))
            .unwrap_err()
            .to_string();
        assert!(m.contains("A-Z a-z 0-9 - _ ."), "{bad:?}: {m}");
        let m = parse(&GOOD.replace("name = \"b\"", &format!("name = {bad:?}")))
            .unwrap_err()
            .to_string();
        assert!(
            m.contains("variant name") && m.contains("A-Z a-z 0-9 - _ ."),
            "{bad:?}: {m}"
        );
    }
    let long = "a".repeat(65);
    assert!(parse(&GOOD.replace("name = \"b\"", &format!("name = {long:?}"))).is_err());
    parse(&GOOD.replace("name = \"b\"", "name = \"v1.2_x-y\"")).unwrap();
}

/// The supraseal evidence's experiments (run by its device script) still parse as it
/// expects.
#[cfg(feature = "supraseal")]
#[test]
fn gpu_experiments_compare_cpu_and_supraseal_one_process_per_rep() {
    use crate::experiment::spec::ProcessPolicy;
    use crate::experiment::Experiment;
    use crate::prover::BackendKind;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("evidence/supraseal");
    for (file, log2, batch) in [
        ("supraseal_vs_cpu_2e16.toml", 16, 1),
        ("supraseal_vs_cpu_2e20.toml", 20, 4),
    ] {
        let (e, _) = Experiment::load(&root.join(file)).unwrap();
        assert_eq!(
            (e.workload.log2_constraints, e.workload.batch),
            (log2, batch),
            "{file}"
        );
        assert_eq!(e.run.process, ProcessPolicy::PerRep, "{file}");
        let backends: Vec<BackendKind> = e.resolved_variants().iter().map(|v| v.backend).collect();
        assert_eq!(
            backends,
            [BackendKind::Cpu, BackendKind::Supraseal],
            "{file}"
        );
        assert_eq!(
            e.name,
            file.trim_end_matches(".toml"),
            "device-run.sh finds runs by name"
        );
    }
}
