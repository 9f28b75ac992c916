//! The readers on small traces written here: what each event kind becomes, and what a
//! damaged file keeps and says.

use std::path::{Path, PathBuf};

use super::model::{GpuKind, Trace};
use super::*;

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn read(text: &str) -> Trace {
    let tmp = tempfile::tempdir().unwrap();
    let p = write(tmp.path(), "t.json", text);
    read_trace(&p, 1 << 20).unwrap().0
}

fn names(t: &Trace) -> Vec<&str> {
    t.spans.iter().map(|s| t.names.name(s.name)).collect()
}

#[test]
fn chrome_complete_begin_end_async_and_metadata_events_become_spans() {
    let t = read(
        r#"{"traceEvents": [
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "main"}},
        {"ph": "X", "name": "a", "pid": 1, "tid": 2, "ts": 10.5, "dur": 2, "args": {"k": "v", "deep": [1]}},
        {"ph": "B", "name": "b", "pid": 1, "tid": 2, "ts": 20},
        {"ph": "E", "pid": 1, "tid": 2, "ts": 25},
        {"ph": "b", "name": "req", "cat": "net", "id": "0x1", "pid": 1, "ts": 1},
        {"ph": "e", "name": "req", "cat": "net", "id": "0x1", "pid": 1, "ts": 30},
        {"ph": "i", "name": "mark", "pid": 1, "tid": 2, "ts": 3},
        {"ph": "C", "name": "mem", "pid": 1, "ts": 3, "args": {"v": 1}},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 11, "dur": 1,
         "args": {"device": 3, "stream": 9, "correlation": 5, "grid": [1, 2, 3]}}
    ], "displayTimeUnit": "ns"}"#,
    );
    assert_eq!(names(&t), ["a", "b", "req"]);
    let a = &t.spans[0];
    assert_eq!((a.start_ns, a.end_ns), (10_500, 12_500));
    assert_eq!(t.attrs_of(a), Some(r#"{"k":"v"}"#));
    assert_eq!((t.spans[1].start_ns, t.spans[1].end_ns), (20_000, 25_000));
    assert_ne!(
        t.spans[2].thread, t.spans[0].thread,
        "async spans have a track of their own"
    );
    assert_eq!(t.threads[a.thread as usize].name.as_deref(), Some("main"));
    assert_eq!(t.gpu.len(), 1);
    let k = &t.gpu[0];
    assert_eq!(
        (k.kind, k.device, k.stream, k.correlation),
        (GpuKind::Kernel, 3, 9, 5)
    );
    assert_eq!(k.grid, Some([1, 2, 3]));
    assert_eq!(
        (t.counts.events, t.counts.instants, t.counts.other),
        (9, 1, 1)
    );
    assert_eq!(t.warnings.total(), 0);
}

#[test]
fn a_begin_without_a_name_is_a_span_named_empty_like_a_complete_event_without_one() {
    // (A begin without a name once became a span naming no name, and the rows that
    // import writes panicked on it; found by the trace fuzz target.)
    let t = read(
        r#"{"traceEvents": [
        {"ph": "B", "pid": 1, "tid": 2, "ts": 20},
        {"ph": "E", "pid": 1, "tid": 2, "ts": 25},
        {"ph": "b", "cat": "net", "id": "0x1", "pid": 1, "ts": 1},
        {"ph": "e", "cat": "net", "id": "0x1", "pid": 1, "ts": 30},
        {"ph": "X", "pid": 1, "tid": 2, "ts": 21, "dur": 1}
    ]}"#,
    );
    assert_eq!(names(&t), ["", "", ""]);
}

#[test]
fn bad_events_are_left_out_with_a_warning_naming_them() {
    let t = read(
        r#"[
        {"ph": "X", "name": "neg", "pid": 1, "tid": 1, "ts": 10, "dur": -5},
        {"ph": "E", "pid": 1, "tid": 1, "ts": 12},
        {"ph": "B", "name": "open", "pid": 1, "tid": 1, "ts": 15},
        {"ph": "X", "name": "late", "pid": 1, "tid": 1, "ts": 40, "dur": 10}
    ]"#,
    );
    let w = t.warnings.kept.join("\n");
    assert!(
        w.contains(r#"X "neg" at ts 10 µs (pid 1, tid 1): negative duration"#),
        "{w}"
    );
    assert!(w.contains("an end with no open begin"), "{w}");
    assert!(
        w.contains(r#"B "open" at ts 15 µs (pid 1, tid 1): never ended"#),
        "{w}"
    );
    // The unclosed B is closed where the file ends (50 µs), marked.
    assert_eq!(names(&t), ["late", "open"]);
    assert_eq!(t.spans[1].end_ns, 50_000);
    assert!(t
        .attrs_of(&t.spans[1])
        .unwrap()
        .contains(r#""unclosed":true"#));
}

#[test]
fn a_cut_file_keeps_its_events_and_garbage_is_an_error_naming_line_and_event() {
    let t = read(
        r#"{"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1}, {"ph": "X", "na"#,
    );
    assert_eq!(names(&t), ["a"]);
    let w = t.warnings.kept.join("\n");
    assert!(
        w.contains("ends in the middle of its JSON at line 1"),
        "{w}"
    );
    assert!(w.contains("the 1 events before the cut are kept"), "{w}");

    let tmp = tempfile::tempdir().unwrap();
    let p = write(
        tmp.path(),
        "bad.json",
        "[{\"ph\": \"X\", \"name\": \"a\", \"ts\": 1, \"dur\": 1},\n {\"ph\": \"X\", \"ts\": \"soon\"}]",
    );
    let e = read_trace(&p, 1 << 20).unwrap_err().to_string();
    assert!(e.contains("bad.json, line 2"), "{e}");
    assert!(e.contains("in trace event 2"), "{e}");
    let p = write(tmp.path(), "x.json", r#"{"hello": 1}"#);
    let e = read_trace(&p, 1 << 20).unwrap_err().to_string();
    assert!(e.contains("neither traceEvents"), "{e}");
    let p = write(tmp.path(), "x.txt", "time,value\n1,2\n");
    let e = read_trace(&p, 1 << 20).unwrap_err().to_string();
    assert!(
        e.contains("x.txt is not a trace gapscope imports: it starts with"),
        "{e}"
    );
}

#[test]
fn events_of_many_batches_and_runs_keep_their_order_and_a_bad_one_is_named() {
    // About 1.3 batches of events, parsed in runs of 1,024 on every core and taken in
    // file order on another thread: spans, kernels and a B/E pair, interleaved.
    let event = |i: usize| match i % 3 {
        0 => format!(
            r#"{{"ph": "X", "cat": "cpu_op", "name": "op{i}", "pid": 1, "tid": {}, "ts": {i}, "dur": 0.5, "args": {{"k": "{}"}}}}"#,
            1 + i % 2,
            "v".repeat(i % 4000)
        ),
        1 => format!(
            r#"{{"ph": "X", "cat": "kernel", "name": "k{i}", "pid": 0, "tid": 7, "ts": {i}, "dur": 0.25, "args": {{"correlation": {i}}}}}"#
        ),
        _ => format!(
            r#"{{"ph": "B", "name": "b{i}", "pid": 1, "tid": 3, "ts": {i}}}, {{"ph": "E", "pid": 1, "tid": 3, "ts": {i}.5}}"#
        ),
    };
    let n = 15_000;
    let body: Vec<String> = (0..n).map(event).collect();
    let tmp = tempfile::tempdir().unwrap();
    let p = write(tmp.path(), "big.json", &format!("[{}]", body.join(",\n")));
    let t = read_trace(&p, 1 << 30).unwrap().0;
    let spans: Vec<String> = (0..n)
        .filter(|i| i % 3 != 1)
        .map(|i| format!("{}{i}", if i % 3 == 0 { "op" } else { "b" }))
        .collect();
    let mut got: Vec<(u64, &str)> = t
        .spans
        .iter()
        .map(|s| (s.start_ns, t.names.name(s.name)))
        .collect();
    got.sort();
    assert_eq!(got.iter().map(|g| g.1).collect::<Vec<_>>(), spans);
    assert_eq!(t.gpu.len(), n / 3);
    assert!(t
        .gpu
        .iter()
        .enumerate()
        .all(|(k, g)| g.correlation == 3 * k as u64 + 1));
    let long = t
        .spans
        .iter()
        .find(|s| t.names.name(s.name) == "op3999")
        .unwrap();
    assert!(
        t.attrs_of(long).unwrap().ends_with("v…\"}"),
        "long values are cut"
    );
    assert_eq!(t.counts.events, (n + n / 3) as u64);

    // Event 14,001 of the file (in its second batch) is garbage: the error names it
    // and its line.
    let mut body: Vec<String> = (0..n).map(|i| event(3 * (i / 3))).collect();
    body[14_000] = r#"{"ph": "X", "ts": "soon"}"#.into();
    let p = write(tmp.path(), "bad.json", &format!("[{}]", body.join(",\n")));
    let e = read_trace(&p, 1 << 30).unwrap_err().to_string();
    assert!(e.contains("bad.json, line 14001"), "{e}");
    assert!(e.contains("in trace event 14001"), "{e}");
}

#[test]
fn otlp_spans_keep_their_ids_attributes_and_one_request_per_line() {
    let line = |id: &str, parent: &str, name: &str, s: u64, e: u64| {
        format!(
            r#"{{"resourceSpans": [{{"resource": {{"attributes": [{{"key": "service.name", "value": {{"stringValue": "svc"}}}}]}},
            "scopeSpans": [{{"spans": [{{"spanId": "{id}", "parentSpanId": "{parent}", "name": "{name}",
            "startTimeUnixNano": "{s}", "endTimeUnixNano": {e},
            "attributes": [{{"key": "n", "value": {{"intValue": "7"}}}}]}}]}}]}}]}}"#
        )
    };
    let text = format!(
        "{}\n{}\n",
        line("bb", "aa", "child", 20, 30),
        line("aa", "", "parent", 10, 40)
    );
    let t = read(&text);
    assert_eq!(names(&t), ["child", "parent"]);
    assert_eq!(t.spans[0].parent, t.spans[1].id);
    assert!(t.spans[1].parent.is_none());
    let a = t.attrs_of(&t.spans[0]).unwrap();
    assert!(
        a.contains(r#""n":7"#) && a.contains(r#""service.name":"svc""#),
        "{a}"
    );
    assert_eq!(t.format, model::Format::Otlp);
    assert!(
        t.warnings.kept[0].contains("written in µs or ms"),
        "times of 10..40 ns after the epoch: {:?}",
        t.warnings.kept
    );
    let ok = read(&line(
        "aa",
        "",
        "p",
        1_700_000_000_000_000_000,
        1_700_000_000_000_000_010,
    ));
    assert_eq!(ok.warnings.total(), 0);
}

#[test]
fn gzip_is_read_by_its_magic_and_a_bomb_stops_at_the_cap() {
    use std::io::Write;
    let tmp = tempfile::tempdir().unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(br#"[{"ph": "X", "name": "z", "pid": 1, "tid": 1, "ts": 1, "dur": 1}]"#)
        .unwrap();
    let p = tmp.path().join("t.trace");
    std::fs::write(&p, gz.finish().unwrap()).unwrap();
    let (t, digest) = read_trace(&p, 1 << 20).unwrap();
    assert_eq!(names(&t), ["z"]);
    assert_eq!(digest.bytes, std::fs::metadata(&p).unwrap().len());
    assert_eq!(digest.sha256.len(), 64);

    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(b"[").unwrap();
    gz.write_all(&vec![b' '; 8 << 20]).unwrap();
    let bomb = tmp.path().join("bomb.json.gz");
    std::fs::write(&bomb, gz.finish().unwrap()).unwrap();
    let e = read_trace(&bomb, 1 << 20).unwrap_err().to_string();
    assert!(
        e.contains("bomb.json.gz holds more than 1048576 bytes once decompressed"),
        "{e}"
    );
}

#[test]
fn the_scanner_keeps_brackets_and_quotes_inside_strings_and_skips_other_keys() {
    let t = read(
        r#"{"otherData": {"note": "a ] } [ \" {"}, "trace\u0045vents": [
        {"ph": "X", "name": "x]\"}{[", "pid": 1, "tid": 1, "ts": 1, "dur": 1, "args": {"s": "}"}},
        {"ph":"X","name":"y","pid":1,"tid":1,"ts":3,"dur":1}
    ], "displayTimeUnit": "ms", "n": -1.5e3, "ok": true}"#,
    );
    assert_eq!(names(&t), ["x]\"}{[", "y"]);
    assert_eq!(t.attrs_of(&t.spans[0]), Some(r#"{"s":"}"}"#));
    let tmp = tempfile::tempdir().unwrap();
    let p = write(
        tmp.path(),
        "two.json",
        r#"[{"ph": "X", "ts": 1, "dur": 1}] [1]"#,
    );
    let e = read_trace(&p, 1 << 20).unwrap_err().to_string();
    assert!(e.contains("after the trace's end"), "{e}");
}

#[test]
fn a_kernel_goes_to_the_rep_that_launched_it_even_when_it_runs_in_the_next() {
    let t = read(
        r#"[
        {"ph": "X", "name": "step", "pid": 1, "tid": 1, "ts": 0, "dur": 10},
        {"ph": "X", "name": "launch", "pid": 1, "tid": 1, "ts": 8, "dur": 1, "args": {"correlation": 5}},
        {"ph": "X", "name": "step", "pid": 1, "tid": 1, "ts": 10, "dur": 10},
        {"ph": "X", "name": "late", "pid": 1, "tid": 2, "ts": 15, "dur": 10},
        {"ph": "X", "cat": "kernel", "name": "k5", "pid": 0, "tid": 7, "ts": 12, "dur": 3,
         "args": {"device": 0, "stream": 7, "correlation": 5}},
        {"ph": "X", "cat": "kernel", "name": "k9", "pid": 0, "tid": 7, "ts": 16, "dur": 1,
         "args": {"device": 0, "stream": 7, "correlation": 9}},
        {"ph": "X", "cat": "kernel", "name": "k0", "pid": 0, "tid": 7, "ts": 30, "dur": 1}
    ]"#,
    );
    let step = (0..t.names.len() as u32)
        .find(|&i| t.names.name(i) == "step")
        .unwrap();
    let (reps, left) = reps::by_span(&t, |n| n == step);
    assert_eq!(reps.len(), 2);
    let kernels = |r: &reps::Rep| -> Vec<&str> {
        r.gpu
            .iter()
            .map(|&g| t.names.name(t.gpu[g as usize].name))
            .collect()
    };
    // k5 runs inside the second step but was launched in the first.
    assert_eq!(kernels(&reps[0]), ["k5"]);
    assert_eq!(kernels(&reps[1]), ["k9"]);
    // "late" ends after the second step; k0 starts after both.
    assert_eq!(left, reps::Leftover { spans: 1, gpu: 1 });
    assert_eq!(reps[0].spans.len(), 1, "the launch");
}

/// An import stopped between files (Ctrl-C) ends with an error that says so and leaves
/// nothing under the results folder, not even its hidden unfinished folder.
#[test]
fn a_stopped_import_leaves_no_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let trace =
        r#"{"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 0, "dur": 5}]}"#;
    let a = write(tmp.path(), "a.json", trace);
    let b = write(tmp.path(), "b.json", trace);
    let results = tmp.path().join("results");
    let opts = |stop: fn() -> bool| ImportOptions {
        name: "t".into(),
        variants: vec![
            VariantInput {
                name: "baseline".into(),
                patterns: vec![a.display().to_string()],
            },
            VariantInput {
                name: "candidate".into(),
                patterns: vec![b.display().to_string()],
            },
        ],
        results_dir: results.clone(),
        rep_span: None,
        paired_by_order: false,
        names: crate::capture::names::NameMap::new(&[], false).unwrap(),
        max_file_bytes: 1 << 20,
        gpu_spans: false,
        command: vec!["gapscope".into(), "import".into()],
        stop,
    };
    let e = import(&opts(|| true)).unwrap_err().to_string();
    assert!(e.starts_with("interrupted before "), "{e}");
    let left: Vec<_> = std::fs::read_dir(results.join("t")).map_or(Vec::new(), |d| d.collect());
    assert!(left.is_empty(), "{left:?}");
    // The same import, not stopped, writes its folder.
    let done = import(&opts(|| false)).unwrap();
    assert_eq!(done.reps, 2);
}
