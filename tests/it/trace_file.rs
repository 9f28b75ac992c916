//! `[workload] trace_file`: a program that writes a Chrome trace in each rep (as
//! PyTorch's profiler or tracing-chrome would) has its spans and GPU records filed
//! under the rep, on the span clock, and diffed like any other span.

use std::path::{Path, PathBuf};

use gapscope::store::{RepStatus, RunData, SpanRow};

use crate::common::{diff_metric, run_ok};

/// A program writing out/trace.json: a `ProfilerStep#N` of 50 ms holding an `aten::mm`
/// of `$1` ms and the kernel it launched; `$2` = `wall` stamps it with the wall clock
/// (µs since the epoch, as PyTorch does), else from 0 (as tracing-chrome does). With
/// `$3` = `once`, it writes the file only in its first run.
const PROGRAM: &str = r#"#!/bin/sh
set -e
mm_us=$(($1 * 1000))
if [ "$3" = once ] && [ -e out/done ]; then exit 0; fi
mkdir -p out
t0=0
if [ "$2" = wall ]; then t0=$(date +%s%6N); fi
cat >out/trace.json <<JSON
{"traceEvents":[
{"ph":"M","name":"thread_name","pid":1,"tid":1,"args":{"name":"python"}},
{"ph":"X","name":"ProfilerStep#7","cat":"user_annotation","ts":$t0,"dur":50000,"pid":1,"tid":1},
{"ph":"X","name":"aten::mm","cat":"cpu_op","ts":$((t0 + 1000)),"dur":$mm_us,"pid":1,"tid":1},
{"ph":"X","name":"sgemm_kernel","cat":"kernel","ts":$((t0 + 2000)),"dur":$((mm_us / 2)),"pid":0,"tid":7,"args":{"device":0,"stream":7,"correlation":1}}
]}
JSON
touch out/done
"#;

fn setup(dir: &Path, variants: &str) -> PathBuf {
    let prog = dir.join("prog.sh");
    std::fs::write(&prog, PROGRAM).unwrap();
    let exp = dir.join("traced.toml");
    std::fs::write(
        &exp,
        format!(
            "name = \"traced\"\n[workload]\ncommand = [\"sh\", \"prog.sh\"]\ndir = \"{}\"\n\
             trace_file = \"out/trace.json\"\n[run]\nreps = 4\nwarmups = 0\n{variants}",
            dir.display()
        ),
    )
    .unwrap();
    exp
}

fn named<'a>(spans: &'a [&'a SpanRow], name: &str) -> &'a SpanRow {
    spans
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no {name} in {spans:?}"))
}

#[test]
fn a_trace_written_each_rep_is_filed_under_it_on_the_span_clock() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = setup(
        tmp.path(),
        "[[variant]]\nname = \"own\"\ncommand = [\"sh\", \"prog.sh\", \"15\", \"own\"]\n\
         [[variant]]\nname = \"wall\"\ncommand = [\"sh\", \"prog.sh\", \"30\", \"wall\"]\n",
    );
    let run = run_ok(tmp.path(), &exp, &[]);
    let d = RunData::load(&run).unwrap();
    let activity = d.load_gpu_activity().unwrap();
    for r in &d.runs {
        assert_eq!(r.status, RepStatus::Ok, "{}", r.error);
        let mine: Vec<&SpanRow> = d
            .spans
            .iter()
            .filter(|s| s.rep == r.rep && s.variant == r.variant)
            .collect();
        let root = mine.iter().find(|s| s.parent_id.is_none()).unwrap();
        let parent = |s: &SpanRow| {
            mine.iter()
                .find(|p| Some(p.span_id) == s.parent_id)
                .unwrap()
        };
        let trace = named(&mine, "trace");
        let step = named(&mine, "ProfilerStep");
        let mm = named(&mine, "aten::mm");
        assert_eq!(trace.parent_id, Some(root.span_id));
        assert_eq!(parent(step).name, "trace");
        assert_eq!(parent(mm).name, "ProfilerStep");
        assert!(step.attrs.contains("\"step\":7"), "{}", step.attrs);
        let want_ms = if r.variant == "own" { 15 } else { 30 };
        assert_eq!(mm.duration_ns, want_ms * 1_000_000, "{mm:?}");
        let note = root.attrs.contains("clock of its own");
        if r.variant == "own" {
            // Counted from 0: its first event is placed at the program's start.
            assert!(note, "{}", root.attrs);
            assert_eq!(trace.start_ns, root.start_ns);
        } else {
            // Wall-clock times land inside the rep, give or take a clock's slack.
            assert!(!note, "{}", root.attrs);
            let slack = 1_000_000_000;
            assert!(
                step.start_ns + slack >= root.start_ns && step.start_ns <= root.end_ns + slack,
                "{step:?} vs {root:?}"
            );
        }
        let kernels: Vec<_> = activity
            .iter()
            .filter(|g| g.rep == r.rep && g.kind == "kernel")
            .collect();
        assert_eq!(kernels.len(), 1, "{activity:?}");
        assert_eq!(kernels[0].name, "sgemm_kernel");
        assert_eq!(kernels[0].duration_ns, want_ms * 500_000);
    }
    // The diff reads the trace's spans as the program's own.
    let mm = diff_metric(tmp.path(), &run, "own", "wall", "aten::mm", "total");
    assert_eq!(mm["verdict"], "regressed", "{mm}");
}

#[test]
fn a_rep_that_writes_no_trace_stands_and_says_why() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = setup(
        tmp.path(),
        "[[variant]]\nname = \"once\"\ncommand = [\"sh\", \"prog.sh\", \"5\", \"own\", \"once\"]\n",
    );
    let run = run_ok(tmp.path(), &exp, &[]);
    let d = RunData::load(&run).unwrap();
    assert!(d.runs.iter().all(|r| r.status == RepStatus::Ok));
    let roots: Vec<&SpanRow> = d.spans.iter().filter(|s| s.parent_id.is_none()).collect();
    assert_eq!(roots.len(), 4);
    let mm = d.spans.iter().filter(|s| s.name == "aten::mm").count();
    assert_eq!(mm, 1, "only the first rep wrote its trace");
    let stale = roots
        .iter()
        .filter(|r| r.attrs.contains("not written in this rep"))
        .count();
    assert_eq!(stale, 3, "{roots:?}");
}

#[test]
fn a_trace_beyond_the_span_cap_is_not_taken_and_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = setup(
        tmp.path(),
        "[[variant]]\nname = \"a\"\ncommand = [\"sh\", \"prog.sh\", \"5\", \"own\"]\n",
    );
    // The program's root and the trace's four spans do not fit in 3.
    let text = std::fs::read_to_string(&exp).unwrap();
    let text = text.replace("[run]", "max_spans_per_rep = 3\n[run]");
    std::fs::write(&exp, text).unwrap();
    let run = run_ok(tmp.path(), &exp, &[]);
    let d = RunData::load(&run).unwrap();
    assert!(d.runs.iter().all(|r| r.status == RepStatus::Ok));
    assert!(!d.spans.iter().any(|s| s.name == "aten::mm"));
    let root = d.spans.iter().find(|s| s.parent_id.is_none()).unwrap();
    assert!(root.attrs.contains("none taken"), "{}", root.attrs);
}
