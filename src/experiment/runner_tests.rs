//! Tests of the runner's helpers, kept beside runner.rs.

use super::*;
use crate::experiment::rep::failed_row;
use crate::store::Meta;
use crate::telemetry::TelemetryConfig;

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
    super::super::executor::record_timed_out(&Mutex::new(w), &row).unwrap();
    let (_, rows) = RunWriter::open_resume(&dir).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].rep, 4);
    assert_eq!(rows[0].status, RepStatus::Failed);
    assert!(rows[0].error.contains("7 s"), "{}", rows[0].error);
}

/// An executor that runs nothing: it notes each slot it is given and returns a rep of
/// one root span (failed where the test says).
struct Mock {
    calls: Vec<(String, u32, bool)>,
    fail_rep: Option<u32>,
}

impl Executor for Mock {
    fn run_rep(
        &mut self,
        v: &ResolvedVariant,
        slot: Slot,
        _meta: &mut store::Meta,
        _say: &dyn Fn(&str),
    ) -> Result<RepOutput> {
        self.calls.push((v.name.clone(), slot.rep, slot.warmup));
        if self.fail_rep == Some(slot.rep) {
            return Ok(RepOutput::failed(v, slot, "the mock's failure".into()));
        }
        let run = RunRow {
            rep: slot.rep,
            variant: v.name.clone(),
            iteration: slot.iteration,
            warmup: slot.warmup,
            wall_ns: 1_000 + u64::from(slot.rep),
            outputs: 1,
            ..RunRow::sample()
        };
        let root = store::SpanRow {
            rep: slot.rep,
            variant: v.name.as_str().into(),
            span_id: 1,
            name: "hash".into(),
            end_ns: run.wall_ns,
            duration_ns: run.wall_ns,
            self_ns: run.wall_ns,
            ..store::SpanRow::sample()
        };
        Ok(RepOutput {
            run,
            spans: vec![root],
            gpu: Default::default(),
            setup_ns: Default::default(),
            profile: None,
        })
    }
}

const TWO: &str = "name = \"x\"\n[workload]\nkind = \"hash\"\nbytes = 64\n[run]\nreps = 3\n\
                   warmups = 1\n[[variant]]\nname = \"a\"\n[[variant]]\nname = \"b\"\n";

/// Drives [`rep_loop`] over `todo` with `mock` in a fresh run folder; returns the loop's
/// end and the rows runs.csv holds afterwards.
fn drive(
    mock: &mut Mock,
    todo: Vec<Slot>,
    done: Vec<RunRow>,
    stop_after: Option<usize>,
    interrupt_after: Option<usize>,
) -> (LoopEnd, Vec<RunRow>) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let exp = Experiment::parse(TWO, std::path::Path::new("x.toml")).unwrap();
    let variants = exp.resolved_variants();
    let mut meta = Meta::sample();
    let w = RunWriter::create(&dir, &meta, TWO).unwrap();
    let telemetry = Telemetry::start(TelemetryConfig {
        nvml: false,
        ..TelemetryConfig::default()
    });
    let mut rec = Recorder {
        dir: dir.clone(),
        writer: Arc::new(Mutex::new(w)),
        meta: &mut meta,
        telemetry: &telemetry,
        process: ProcessPolicy::Shared,
        command: false,
        progress: false,
        bar: indicatif::ProgressBar::hidden(),
    };
    let stop = stop_after.map(|n| {
        StopWhen(Arc::new(move |_: &Path, rows: &[RunRow]| {
            rows.iter().filter(|r| !r.warmup).count() >= n
        }))
    });
    let calls = std::cell::Cell::new(0usize);
    let interrupted = || {
        calls.set(calls.get() + 1);
        interrupt_after.is_some_and(|n| calls.get() > n)
    };
    let ends = Ends {
        until: None,
        stop_when: stop.as_ref(),
        interrupted: &interrupted,
    };
    let end = rep_loop(&mut rec, mock, &variants, todo, done, ends).unwrap();
    drop(rec); // the writer's lock on the folder
    let (_, rows) = RunWriter::open_resume(&dir).unwrap();
    (end, rows)
}

fn slots() -> Vec<Slot> {
    let exp = Experiment::parse(TWO, std::path::Path::new("x.toml")).unwrap();
    schedule(
        2,
        exp.run.warmups,
        exp.run.reps,
        exp.run.order,
        exp.run.block_size(),
    )
}

#[test]
fn the_loop_runs_the_schedule_in_its_order_and_writes_every_rep() {
    let mut mock = Mock {
        calls: Vec::new(),
        fail_rep: Some(4),
    };
    let todo = slots();
    let (end, rows) = drive(&mut mock, todo.clone(), Vec::new(), None, None);
    // Warm-ups first, then interleaved measured reps: the schedule's order, untouched.
    let want: Vec<(String, u32, bool)> = todo
        .iter()
        .map(|s| (["a", "b"][s.variant].to_string(), s.rep, s.warmup))
        .collect();
    assert_eq!(mock.calls, want);
    assert_eq!(
        &mock.calls[..2],
        &[("a".into(), 0, true), ("b".into(), 1, true)]
    );
    assert!(!end.interrupted);
    assert_eq!(end.rows.len(), 8);
    assert_eq!(rows.len(), 8, "runs.csv holds every rep");
    let failed: Vec<u32> = rows
        .iter()
        .filter(|r| r.status == RepStatus::Failed)
        .map(|r| r.rep)
        .collect();
    assert_eq!(
        failed,
        [4],
        "the failed rep is recorded failed, the run goes on"
    );
}

#[test]
fn an_interrupt_stops_before_the_next_rep_and_keeps_every_finished_one() {
    let mut mock = Mock {
        calls: Vec::new(),
        fail_rep: None,
    };
    let (end, rows) = drive(&mut mock, slots(), Vec::new(), None, Some(3));
    assert!(end.interrupted);
    assert_eq!(mock.calls.len(), 3);
    assert_eq!(end.rows.len(), 3);
    assert_eq!(rows.len(), 3, "the three finished reps are on disk");
}

#[test]
fn a_resumed_loop_runs_only_what_is_left() {
    // The first run: stopped by an interrupt after three reps.
    let mut first = Mock {
        calls: Vec::new(),
        fail_rep: None,
    };
    let (_, done) = drive(&mut first, slots(), Vec::new(), None, Some(3));
    let names = ["a".to_string(), "b".to_string()];
    let todo = resume::remaining(&slots(), &done, &names, false);
    let mut second = Mock {
        calls: Vec::new(),
        fail_rep: None,
    };
    let (end, _) = drive(&mut second, todo, done.clone(), None, None);
    assert_eq!(second.calls.len(), 5, "{:?}", second.calls);
    for c in &second.calls {
        assert!(!first.calls.contains(c), "{c:?} ran twice");
    }
    assert_eq!(end.rows.len(), 8, "the resumed rows and the new ones");
}

#[test]
fn a_callers_rule_ends_the_run_complete() {
    let mut mock = Mock {
        calls: Vec::new(),
        fail_rep: None,
    };
    let (end, rows) = drive(&mut mock, slots(), Vec::new(), Some(2), None);
    assert!(!end.interrupted);
    assert_eq!(rows.iter().filter(|r| !r.warmup).count(), 2);
    assert_eq!(mock.calls.len(), 4, "two warm-ups, two measured reps");
}
