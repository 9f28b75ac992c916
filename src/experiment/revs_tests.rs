use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::*;

const TEXT: &str = r#"name = "ab"
[workload]
circuit = "chain"
log2_constraints = 4
[run]
reps = 3
[[variant]]
name = "old"
rev = "v1"
repo = "../elsewhere"
drop = "async"
[[variant]]
name = "new"
"#;

#[test]
fn a_revision_worker_reads_its_one_variant_without_rev() {
    let copy = one_variant_copy(TEXT, "old").unwrap();
    let e = Experiment::parse(&copy, Path::new("copy.toml")).unwrap();
    assert_eq!(e.variants.len(), 1);
    let v = &e.variants[0];
    assert_eq!(v.name, "old");
    assert_eq!((v.rev.as_deref(), v.repo.as_deref()), (None, None));
    assert_eq!(v.drop, Some(crate::prover::DropPolicy::Async));
    assert_eq!(e.run.reps, 3);
    // The original's variants resolve with their revision, which is also a knob.
    let e = Experiment::parse(TEXT, Path::new("ab.toml")).unwrap();
    let r = e.resolved_variants();
    assert_eq!(r[0].rev.as_deref(), Some("v1"));
    assert_eq!(r[0].knobs()["rev"], "v1");
    assert!(!r[1].knobs().contains_key("rev"));
}

#[test]
fn rev_and_repo_are_checked_when_the_experiment_is_read() {
    let bad = TEXT.replace("rev = \"v1\"", "rev = \"\"");
    let e = Experiment::parse(&bad, Path::new("x.toml"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("is not a revision"), "{e}");
    let bad = TEXT.replace("rev = \"v1\"\n", "");
    let e = Experiment::parse(&bad, Path::new("x.toml"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("add rev"), "{e}");
}

fn script(dir: &Path, name: &str, body: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

#[test]
fn a_gapscope_older_than_the_worker_protocol_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let now = script(
        tmp.path(),
        "now",
        &format!("[ \"$1\" = __protocol ] && echo '{WORKER_PROTOCOL}'"),
    );
    assert_eq!(probe_protocol(&now), Ok(()));
    // What clap says of a subcommand it does not know, with its usage-error status.
    let old = script(
        tmp.path(),
        "old",
        "echo \"error: unrecognized subcommand '$1'\" >&2; exit 2",
    );
    let e = probe_protocol(&old).unwrap_err();
    assert!(
        e.contains("no `__protocol` command") && e.contains("unrecognized subcommand"),
        "{e}"
    );
    assert!(e.contains("are refused"), "{e}");
    let other = script(tmp.path(), "other", "echo gapscope-worker-protocol 0");
    let e = probe_protocol(&other).unwrap_err();
    assert!(e.contains("answered \"gapscope-worker-protocol 0\""), "{e}");
    let e = probe_protocol(&tmp.path().join("missing")).unwrap_err();
    assert!(e.contains("cannot run"), "{e}");
}

#[test]
fn a_variant_of_another_workload_records_its_revision_among_its_knobs() {
    let text = r#"name = "h"
[workload]
kind = "hash"
bytes = 1048576
[[variant]]
name = "old"
rev = "v1"
repo = "../elsewhere"
[[variant]]
name = "new"
knobs = { algorithm = "sha512" }
"#;
    let e = Experiment::parse(text, Path::new("h.toml")).unwrap();
    let w = gapscope_hash::HashWorkload { bytes: 1 << 20 };
    let r = e.resolved_variants();
    assert_eq!(r[0].workload_knob_set(&w)["rev"], "v1");
    assert!(!r[1].workload_knob_set(&w).contains_key("rev"));
    assert_eq!(r[1].workload_knob_set(&w)["algorithm"], "sha512");
}
