//! Tests of the runner's helpers, kept beside runner.rs.

use super::*;
use crate::experiment::spec::Experiment;
use crate::store::Meta;

#[test]
fn a_timed_out_rep_is_committed_as_failed_and_resume_skips_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let w = RunWriter::create(&dir, &Meta::sample(), "name = \"x\"\n").unwrap();
    let text = "name = \"x\"\n[workload]\ncircuit = \"chain\"\nlog2_constraints = 4\n\
                batch = 1\nbackend = \"cpu\"\n[run]\nreps = 1\nrep_timeout_s = 7\n\
                [[variant]]\nname = \"a\"\n";
    let exp = Experiment::parse(text, std::path::Path::new("x.toml")).unwrap();
    assert_eq!(exp.run.rep_timeout_s, Some(7));
    let v = &exp.resolved_variants()[0];
    let slot = Slot {
        rep: 4,
        variant: 0,
        iteration: 2,
        warmup: false,
    };
    let row = failed_row(v, slot, "did not finish in 7 s".into());
    record_timed_out(&Mutex::new(w), &row).unwrap();
    let (_, rows) = RunWriter::open_resume(&dir).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].rep, 4);
    assert_eq!(rows[0].status, RepStatus::Failed);
    assert!(rows[0].error.contains("7 s"), "{}", rows[0].error);
}
