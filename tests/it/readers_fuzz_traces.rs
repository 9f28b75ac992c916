//! The trace importers (`gapscope import`: Chrome/Kineto JSON, OTLP JSON, Nsight Systems'
//! SQLite export, any of them gzipped) fed random bytes, random edits of a small valid
//! trace of each format, and traces of random events (Chrome events of any phase, times
//! and arguments; OTLP spans whose parents repeat and loop; nsys tables with any
//! columns and values of any SQLite type). Each file is imported whole, as
//! `gapscope import` does (read, cut into reps, nested, written as a run folder) beside a
//! valid trace as the other variant: an import answers with a run folder or a clean
//! error, never a panic, within the time limit of crate::fuzz; what it wrote is then
//! read by every reader of run folders.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use gapscope::import::{import, ImportOptions, NameMap, VariantInput};
use proptest::prelude::*;
use rusqlite::types::Value as Sql;
use serde_json::{json, Value};

use crate::fuzz::{bytes, fuzz, gzip, sqlite_to_write, Bytes};
use crate::readers_fuzz::read_everything;

/// Cases per target in a plain `cargo test`.
const QUICK: u32 = 64;

/// A small Kineto-shaped trace: names, a step, CPU ops, B/E, async, a launch and its
/// kernel, a copy and a memset, an instant, a counter, a flow; one event a line.
const CHROME: &str = r#"{"schemaVersion": 1, "traceEvents": [
{"ph": "M", "name": "process_name", "pid": 100, "tid": 0, "args": {"name": "python"}},
{"ph": "M", "name": "thread_name", "pid": 100, "tid": 1, "args": {"name": "MainThread"}},
{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 100, "tid": 1, "ts": 10, "dur": 900},
{"ph": "X", "cat": "cpu_op", "name": "forward", "pid": 100, "tid": 1, "ts": 20, "dur": 300, "args": {"Input Dims": [[64, 64]], "Sequence number": 1}},
{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": 1, "ts": 30.5, "dur": 10, "args": {"correlation": 7}},
{"ph": "X", "cat": "kernel", "name": "sgemm", "pid": 0, "tid": 7, "ts": 45, "dur": 400, "args": {"device": 0, "stream": 7, "correlation": 7, "grid": [64, 2, 1], "block": [256, 1, 1]}},
{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "pid": 0, "tid": 7, "ts": 500, "dur": 30, "args": {"device": 0, "stream": 7, "correlation": 0, "bytes": 1048576}},
{"ph": "X", "cat": "gpu_memset", "name": "Memset", "pid": 0, "tid": 7, "ts": 540, "dur": 5, "args": {"device": 0, "stream": 7, "bytes": 4096}},
{"ph": "B", "name": "backward", "pid": 100, "tid": 1, "ts": 330},
{"ph": "E", "pid": 100, "tid": 1, "ts": 800},
{"ph": "b", "name": "req", "cat": "net", "id": "0x1", "pid": 100, "ts": 15},
{"ph": "e", "name": "req", "cat": "net", "id": "0x1", "pid": 100, "ts": 700},
{"ph": "i", "name": "marker", "pid": 100, "tid": 1, "ts": 810, "s": "t"},
{"ph": "C", "name": "mem", "pid": 100, "ts": 3, "args": {"v": 1}},
{"ph": "s", "id": 7, "cat": "ac2g", "name": "ac2g", "pid": 100, "tid": 1, "ts": 30.5}
], "displayTimeUnit": "ms"}
"#;

/// A small OTLP JSON file: one request per line, children nested by parent id.
const OTLP: &str = r#"{"resourceSpans": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "web"}}]}, "scopeSpans": [{"scope": {"name": "t"}, "spans": [
{"traceId": "01", "spanId": "0000000000000002", "parentSpanId": "0000000000000001", "name": "db_query", "startTimeUnixNano": "1700000000000100000", "endTimeUnixNano": "1700000000002100000", "attributes": [{"key": "rows", "value": {"intValue": "42"}}]},
{"traceId": "01", "spanId": "0000000000000001", "parentSpanId": "", "name": "request", "kind": 2, "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": 1700000000003000000}
]}]}]}
{"resourceSpans": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "web"}}]}, "scopeSpans": [{"spans": [
{"traceId": "02", "spanId": "0000000000000004", "parentSpanId": "", "name": "request", "startTimeUnixNano": "1700000001000000000", "endTimeUnixNano": "1700000001003000000", "attributes": [{"key": "thread.id", "value": {"intValue": 3}}, {"key": "ok", "value": {"boolValue": true}}, {"key": "f", "value": {"doubleValue": 0.5}}]}
]}]}]}
"#;

/// Where a case's file and its import go; the valid trace of the other variant.
struct Case {
    _tmp: tempfile::TempDir,
    file: PathBuf,
    other: PathBuf,
    results: PathBuf,
}

fn case(name: &str, bytes: &[u8], gz: bool, other: &[u8]) -> Case {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    let file = if gz {
        let f = b.join(format!("{name}.gz"));
        std::fs::write(&f, gzip(bytes)).unwrap();
        f
    } else {
        let f = b.join(name);
        std::fs::write(&f, bytes).unwrap();
        f
    };
    let other_file = a.join(name);
    std::fs::write(&other_file, other).unwrap();
    Case {
        results: tmp.path().join("results"),
        file,
        other: other_file,
        _tmp: tmp,
    }
}

/// How the import is asked to cut and show the traces.
#[derive(Debug, Clone)]
struct Asked {
    rep_span: Option<&'static str>,
    gpu_spans: bool,
    paired: bool,
}

fn asked() -> impl Strategy<Value = Asked> {
    let spans = [
        "ProfilerStep#3",
        "request",
        "step",
        "compute",
        "a",
        "not_there",
    ];
    (
        prop::option::of(prop::sample::select(spans.to_vec())),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(rep_span, gpu_spans, paired)| Asked {
            rep_span,
            gpu_spans,
            paired,
        })
}

/// The case's file imported as variant `b` beside the valid trace as `a`: a run
/// folder, which every reader then reads, or an error.
fn import_and_read(c: &Case, asked: &Asked) {
    let _ = try_import(c, asked);
}

/// [`import_and_read`]'s import: the spans of the folder it wrote, or why none was.
fn try_import(c: &Case, asked: &Asked) -> anyhow::Result<usize> {
    let variant = |name: &str, p: &Path| VariantInput {
        name: name.into(),
        patterns: vec![p.display().to_string()],
    };
    let opts = ImportOptions {
        name: "fuzz".into(),
        variants: vec![variant("a", &c.other), variant("b", &c.file)],
        results_dir: c.results.clone(),
        rep_span: asked.rep_span.map(str::to_string),
        paired_by_order: asked.paired,
        names: NameMap::default(),
        max_file_bytes: 1 << 22,
        gpu_spans: asked.gpu_spans,
        command: vec!["gapscope".into(), "import".into()],
        stop: || false,
    };
    let imported = import(&opts)?;
    read_everything(&imported.dir);
    Ok(gapscope::store::RunData::load(&imported.dir)?.spans.len())
}

/// The valid trace imports as both variants, so that cases start from a trace the
/// importer reads through.
fn valid_imports(name: &str, valid: &[u8], asked: &Asked) {
    let c = case(name, valid, true, valid);
    let spans = try_import(&c, asked).expect("the valid trace imports");
    assert!(spans > 0, "the valid trace gives spans");
}

/// A JSON value a field of a trace may hold: numbers of every size and sign, strings,
/// and the wrong kinds.
fn any_json() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => (0i64..2_000).prop_map(Value::from),
        1 => any::<i64>().prop_map(Value::from),
        1 => any::<u64>().prop_map(Value::from),
        1 => any::<f64>().prop_map(Value::from),
        1 => Just(json!(1e300)),
        1 => Just(json!(-0.5)),
        1 => "[a-z0-9#]{0,6}".prop_map(Value::from),
        1 => Just(Value::Null),
        1 => Just(json!(true)),
        1 => Just(json!([64, 2, 1])),
        1 => Just(json!([-1, 4294967296u64, 1])),
        1 => Just(json!({"k": [1]})),
    ]
}

/// A Chrome trace event of any phase with fields from small sets (so that begins,
/// ends, ids and correlations meet) or of any value.
fn chrome_event() -> impl Strategy<Value = Value> {
    let phases = [
        "X", "B", "E", "b", "e", "S", "F", "M", "i", "I", "C", "s", "f", "n", "zz",
    ];
    let names = [
        "a",
        "b",
        "ProfilerStep#3",
        "thread_name",
        "process_name",
        "",
    ];
    let cats = [
        "kernel",
        "gpu_memcpy",
        "gpu_memset",
        "cuda_runtime",
        "cpu_op",
    ];
    let arg_keys = [
        "device",
        "stream",
        "correlation",
        "grid",
        "block",
        "bytes",
        "name",
        "External id",
    ];
    (
        prop::sample::select(phases.to_vec()),
        prop::option::of(prop::sample::select(names.to_vec())),
        prop::option::of(prop::sample::select(cats.to_vec())),
        prop::collection::vec(prop::option::of(any_json()), 5),
        prop::collection::btree_map(prop::sample::select(arg_keys.to_vec()), any_json(), 0..4),
    )
        .prop_map(|(ph, name, cat, fields, args)| {
            let mut e = serde_json::Map::new();
            e.insert("ph".into(), ph.into());
            if let Some(n) = name {
                e.insert("name".into(), n.into());
            }
            if let Some(c) = cat {
                e.insert("cat".into(), c.into());
            }
            for (k, v) in ["ts", "dur", "pid", "tid", "id"].iter().zip(fields) {
                if let Some(v) = v {
                    e.insert(k.to_string(), v);
                }
            }
            if !args.is_empty() {
                e.insert("args".into(), json!(args));
            }
            Value::Object(e)
        })
}

/// An OTLP span with ids from a small set (parents repeat, loop and point at
/// themselves), times of any value or kind, and attributes of every kind.
fn otlp_span() -> impl Strategy<Value = Value> {
    let ids = ["", "01", "02", "03", "0x", "zz"];
    let attr = (
        prop::sample::select(vec!["thread.id", "service.name", "k"]),
        prop::sample::select(vec!["stringValue", "intValue", "boolValue", "doubleValue"]),
        any_json(),
    )
        .prop_map(|(k, kind, v)| json!({"key": k, "value": {kind: v}}));
    (
        prop::sample::select(ids.to_vec()),
        prop::sample::select(ids.to_vec()),
        "[a-z]{0,3}",
        any_json(),
        any_json(),
        prop::collection::vec(attr, 0..3),
    )
        .prop_map(|(id, parent, name, start, end, attrs)| {
            json!({"spanId": id, "parentSpanId": parent, "name": name,
                   "startTimeUnixNano": start, "endTimeUnixNano": end, "attributes": attrs})
        })
}

/// A JSON trace as a case makes it.
#[derive(Debug, Clone)]
enum JsonTrace {
    /// The valid Chrome (`true`) or OTLP file, edited or replaced by random bytes.
    Bytes(bool, Bytes),
    /// Random Chrome events, as an object or a bare array.
    Chrome(Vec<Value>, bool),
    /// Random OTLP spans, one resource a line.
    Otlp(Vec<Vec<Value>>),
}

impl JsonTrace {
    fn text(&self) -> Vec<u8> {
        match self {
            JsonTrace::Bytes(chrome, b) => b.of(if *chrome { CHROME } else { OTLP }.as_bytes()),
            JsonTrace::Chrome(events, true) => json!({ "traceEvents": events }).to_string().into(),
            JsonTrace::Chrome(events, false) => Value::from(events.clone()).to_string().into(),
            JsonTrace::Otlp(resources) => resources
                .iter()
                .map(|spans| {
                    json!({"resourceSpans": [{"resource": {"attributes": []},
                           "scopeSpans": [{"spans": spans}]}]})
                    .to_string()
                        + "\n"
                })
                .collect::<String>()
                .into(),
        }
    }
}

fn json_trace() -> impl Strategy<Value = JsonTrace> {
    prop_oneof![
        (any::<bool>(), bytes(2048)).prop_map(|(c, b)| JsonTrace::Bytes(c, b)),
        (prop::collection::vec(chrome_event(), 0..40), any::<bool>())
            .prop_map(|(e, o)| JsonTrace::Chrome(e, o)),
        prop::collection::vec(prop::collection::vec(otlp_span(), 0..8), 0..4)
            .prop_map(JsonTrace::Otlp),
    ]
}

#[test]
fn chrome_and_otlp_traces_import_or_give_clean_errors() {
    let whole = Asked {
        rep_span: None,
        gpu_spans: true,
        paired: false,
    };
    valid_imports("trace.json", CHROME.as_bytes(), &whole);
    valid_imports("trace.json", OTLP.as_bytes(), &whole);
    fuzz(
        QUICK,
        (json_trace(), any::<bool>(), asked()),
        |(trace, gz, asked)| {
            let c = case("trace.json", &trace.text(), gz, CHROME.as_bytes());
            import_and_read(&c, &asked);
        },
    );
}

/// The tables of an nsys export as gapscope reads them (tests/gen_traces.py writes the
/// same), each column with the name nsys gives it; the GPU tables share their first.
fn nsys_tables() -> [(&'static str, Vec<&'static str>); 7] {
    let gpu = |rest: &[&'static str]| {
        let first = ["start", "end", "deviceId", "streamId", "correlationId"];
        [&first[..], rest].concat()
    };
    let kernel = [
        "demangledName",
        "shortName",
        "gridX",
        "gridY",
        "gridZ",
        "blockX",
        "blockY",
        "blockZ",
    ];
    [
        ("StringIds", vec!["id", "value"]),
        ("ThreadNames", vec!["nameId", "priority", "globalTid"]),
        (
            "NVTX_EVENTS",
            vec!["start", "end", "eventType", "text", "globalTid", "textId"],
        ),
        (
            "CUPTI_ACTIVITY_KIND_RUNTIME",
            vec!["start", "end", "globalTid", "correlationId", "nameId"],
        ),
        ("CUPTI_ACTIVITY_KIND_KERNEL", gpu(&kernel)),
        ("CUPTI_ACTIVITY_KIND_MEMCPY", gpu(&["bytes", "copyKind"])),
        ("CUPTI_ACTIVITY_KIND_MEMSET", gpu(&["bytes"])),
    ]
}

/// A value of any SQLite type; integers mostly small, so that ids, event types (34, 59,
/// 60) and times meet.
fn sql_value() -> impl Strategy<Value = Sql> {
    prop_oneof![
        6 => (0i64..8).prop_map(Sql::Integer),
        2 => prop::sample::select(vec![34i64, 59, 60]).prop_map(Sql::Integer),
        3 => (0i64..2_000_000).prop_map(Sql::Integer),
        2 => any::<i64>().prop_map(Sql::Integer),
        1 => any::<f64>().prop_map(Sql::Real),
        1 => "[a-z]{0,4}".prop_map(Sql::Text),
        1 => prop::collection::vec(any::<u8>(), 0..4).prop_map(Sql::Blob),
        1 => Just(Sql::Null),
    ]
}

/// An nsys table as a case makes it: which columns it has (a bit each) and its rows.
type Table = Option<(u16, Vec<Vec<Sql>>)>;

/// An SQLite file of the nsys tables (each present or not, with some of its columns)
/// holding `tables`' rows.
fn nsys_file(path: &Path, tables: &[Table]) {
    let mut db = sqlite_to_write(path);
    let db = db.transaction().unwrap();
    for ((name, cols), t) in nsys_tables().iter().zip(tables) {
        let Some((mask, rows)) = t else { continue };
        let cols: Vec<&str> = cols
            .iter()
            .enumerate()
            .filter(|(i, _)| *i < 2 || mask & (1 << i) != 0)
            .map(|(_, c)| *c)
            .collect();
        db.execute_batch(&format!("CREATE TABLE {name} ({});", cols.join(", ")))
            .unwrap();
        let marks = vec!["?"; cols.len()].join(", ");
        let mut st = db
            .prepare(&format!("INSERT INTO {name} VALUES ({marks})"))
            .unwrap();
        for r in rows {
            st.execute(rusqlite::params_from_iter(r.iter().take(cols.len())))
                .unwrap();
        }
    }
    db.commit().unwrap();
}

/// An nsys export as a case makes it: random tables, whose file may then be edited.
#[derive(Debug, Clone)]
struct NsysCase {
    tables: Vec<Table>,
    edits: Bytes,
}

fn nsys_case() -> impl Strategy<Value = NsysCase> {
    let row = prop::collection::vec(sql_value(), 13);
    let table = prop::option::weighted(0.8, (any::<u16>(), prop::collection::vec(row, 0..12)));
    let edits = prop_oneof![
        4 => Just(Bytes::Edited(Vec::new())),
        1 => bytes(8192),
    ];
    (prop::collection::vec(table, nsys_tables().len()), edits)
        .prop_map(|(tables, edits)| NsysCase { tables, edits })
}

/// The valid export every case imports beside its own: a named thread, an NVTX range
/// named through StringIds, and one row of each CUDA table.
fn nsys_valid() -> &'static [u8] {
    static VALID: OnceLock<Vec<u8>> = OnceLock::new();
    VALID.get_or_init(|| {
        let int = |v: &[i64]| v.iter().map(|&x| Sql::Integer(x)).collect::<Vec<_>>();
        let tid = (42 << 24) | 42;
        let mut nvtx = int(&[1000, 9000, 59]);
        nvtx.extend([Sql::Null, Sql::Integer(tid), Sql::Integer(1)]);
        let text = |id: i64, s: &str| vec![Sql::Integer(id), Sql::Text(s.into())];
        let tables: Vec<Table> = vec![
            vec![text(1, "step"), text(2, "main")],
            vec![int(&[2, 0, tid])],
            vec![nvtx],
            vec![int(&[1500, 1600, tid, 7, 1])],
            vec![int(&[2000, 3000, 0, 7, 7, 1, 1, 64, 1, 1, 256, 1, 1])],
            vec![int(&[3000, 3100, 0, 7, 0, 4096, 1])],
            vec![int(&[3200, 3300, 0, 7, 0, 4096])],
        ]
        .into_iter()
        .map(|rows| Some((u16::MAX, rows)))
        .collect();
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("valid.sqlite");
        nsys_file(&p, &tables);
        std::fs::read(&p).unwrap()
    })
}

#[test]
fn nsys_exports_import_or_give_clean_errors() {
    let steps = Asked {
        rep_span: Some("step"),
        gpu_spans: false,
        paired: true,
    };
    valid_imports("trace.sqlite", nsys_valid(), &steps);
    fuzz(
        QUICK,
        (nsys_case(), any::<bool>(), asked()),
        |(n, gz, asked)| {
            let tmp = tempfile::tempdir().unwrap();
            let p = tmp.path().join("made.sqlite");
            nsys_file(&p, &n.tables);
            let made = n.edits.of(&std::fs::read(&p).unwrap());
            let c = case("trace.sqlite", &made, gz, nsys_valid());
            import_and_read(&c, &asked);
        },
    );
}
