//! The `profile` and `profile_hz` knobs of experiment specs.

use std::path::Path;

use super::Experiment;

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

fn p(s: &str) -> Result<Experiment, String> {
    Experiment::parse(s, Path::new("exp.toml")).map_err(|e| e.to_string())
}

#[test]
fn profile_is_off_by_default_and_set_per_run_or_variant() {
    let v = p(GOOD).unwrap().resolved_variants();
    assert_eq!((v[0].profile, v[1].profile), (None, None));
    assert!(!v[0].knobs().contains_key("profile"));
    let v = p(&GOOD.replace("reps = 3", "reps = 3\nprofile = true"))
        .unwrap()
        .resolved_variants();
    assert_eq!((v[0].profile, v[1].profile), (Some(1000), Some(1000)));
    assert_eq!(v[0].knobs()["profile"], "1000 Hz");
    let v = p(&GOOD.replace(
        "gadget = \"lc\"",
        "gadget = \"lc\"\nprofile = true\nprofile_hz = 250",
    ))
    .unwrap()
    .resolved_variants();
    assert_eq!((v[0].profile, v[1].profile), (None, Some(250)));
    // A run-wide rate applies where a variant turns sampling on; a variant can opt out.
    let v = p(&GOOD
        .replace("reps = 3", "reps = 3\nprofile = true\nprofile_hz = 99")
        .replace("gadget = \"lc\"", "gadget = \"lc\"\nprofile = false"))
    .unwrap()
    .resolved_variants();
    assert_eq!((v[0].profile, v[1].profile), (Some(99), None));
}

#[test]
fn bad_profile_values_say_what_to_use() {
    for (edit, says) in [
        ("profile = \"yes\"", "invalid type"),
        (
            "profile = true\nprofile_hz = 0",
            "profile_hz = 0 is out of range: use 1..=10000",
        ),
        ("profile = true\nprofile_hz = 20000", "use 1..=10000"),
        ("profile_hz = 100", "sampling is off: add profile = true"),
        ("profile_hz = -5", "profile_hz"),
        ("profile_rate = 5", "unknown field `profile_rate`"),
    ] {
        let e =
            p(&GOOD.replace("gadget = \"lc\"", &format!("gadget = \"lc\"\n{edit}"))).unwrap_err();
        assert!(e.contains(says), "{edit}: {e}");
    }
    let e = p(&GOOD.replace("reps = 3", "reps = 3\nprofile_hz = 0")).unwrap_err();
    assert!(e.contains("run.profile_hz = 0 is out of range"), "{e}");
}
