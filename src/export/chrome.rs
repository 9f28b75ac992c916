//! Chrome trace-event JSON (the "JSON Object Format" that Perfetto and chrome://tracing
//! open). Each rep is one process track so reps can be laid side by side:
//!
//! - spans are complete ("X") events, tid = the recorded thread id, named by "M"
//!   thread_name metadata; `ts`/`dur` are microseconds as floats from the rep's first
//!   record, so every rep starts at 0 (the origins are in `otherData`);
//! - GPU intervals are "X" events on one track per GPU lane (NVTX ranges that CUPTI
//!   recorded are not GPU intervals: the spans show those phases already);
//! - NVML samples are counter ("C") events, one track per GPU and series; the driver's
//!   own utilisation samples, where recorded, on tracks of their own ("(driver
//!   samples)") at the middle of their windows;
//! - the process's busy cores (CPU time / wall between the sampler's reads) are the
//!   counter track "process busy cores", on machines without a GPU too.
//!
//! The events are written one by one as they are serialised, a rep at a time (only a
//! small record per event of one rep is held, to sort them), so that a run of millions
//! of spans is exported in the memory of one rep's records rather than a JSON tree of
//! several GB.

use std::collections::BTreeMap;

use std::io::Write;

use serde_json::{json, Map, Value};

use super::{ExportError, Exporter, RepSelection};
use crate::store::lanes::series::{busy_cores, is_gpu_row, util_time, SOURCE_DRIVER_SAMPLES};
use crate::store::lanes::{self, series, GpuLane};
use crate::store::{GpuActivityRow, RunView, SpanRow, TelemetryRow};

pub struct ChromeTrace;

/// Thread ids of GPU lanes start here, above any Linux thread id (pid_max ≤ 2^22).
pub const GPU_LANE_TID_BASE: u64 = 1 << 30;

/// Process id of a rep's track: ids start at 1 because Perfetto reserves 0.
pub fn rep_pid(rep: u32) -> u64 {
    rep as u64 + 1
}

fn us(ns: u64, origin: u64) -> f64 {
    ns.saturating_sub(origin) as f64 / 1000.0
}

/// Where a telemetry row's counters go: a driver sample at the middle of its window
/// (`store::lanes::series`), every other reading where it was read.
fn counter_time(t: &TelemetryRow) -> u64 {
    if t.source == SOURCE_DRIVER_SAMPLES {
        util_time(t)
    } else {
        t.t_ns
    }
}

impl Exporter for ChromeTrace {
    fn default_file_name(&self, selection: RepSelection) -> String {
        match selection {
            RepSelection::All => "trace.json".into(),
            RepSelection::One(rep) => format!("trace-rep{rep}.json"),
        }
    }

    fn write_to(
        &self,
        input: &RunView,
        selection: RepSelection,
        w: &mut dyn Write,
    ) -> Result<(), ExportError> {
        let reps = selection.reps(input)?;
        let t = prepare(input, &reps)?;
        t.write(input, w).map_err(|source| ExportError::Io {
            path: "trace".into(),
            source,
        })
    }
}

/// The trace of `reps` as one JSON value (for tests and small runs; the exporter writes
/// the same text without building it).
pub fn trace(input: &RunView, reps: &[u32]) -> Result<Value, ExportError> {
    let t = prepare(input, reps)?;
    let mut bytes = Vec::new();
    t.write(input, &mut bytes)
        .expect("writing into memory cannot fail");
    Ok(serde_json::from_slice(&bytes).expect("the trace is JSON"))
}

/// What one trace event is made of, held until the rep's events are sorted and written.
enum What<'a> {
    Span(&'a SpanRow),
    Gpu(&'a GpuActivityRow),
    /// A counter sample: its track name and value.
    Counter(String, &'static str, f64),
}

/// One trace event before it is written: where it sorts, and what it shows.
struct Event<'a> {
    pid: u64,
    tid: u64,
    ts: f64,
    dur: f64,
    what: What<'a>,
}

/// A trace ready to write: its metadata events and, per rep, where its times count from.
/// The events themselves are made, sorted and written one rep at a time (a rep is one
/// pid and pids grow with the rep, so the file's order is the one a sort of every event
/// would give), so the memory held is one rep's records, not the run's.
struct Prepared {
    meta_events: Vec<Value>,
    /// (rep, the rep's origin), in rep order.
    reps: Vec<(u32, u64)>,
    origins: Map<String, Value>,
}

fn prepare(input: &RunView, reps: &[u32]) -> Result<Prepared, ExportError> {
    // One pass over the reps for what is written before the events: each rep is a process
    // of the trace, with its metadata (name, order, threads, GPU lanes) and its origin
    // (used by every event of the rep).
    let variants = input.variants();
    let mut reps = reps.to_vec();
    reps.sort_unstable();
    reps.dedup();
    let mut meta_events = Vec::new();
    let mut origins = Map::new();
    let mut planned = Vec::with_capacity(reps.len());
    let mut any_span = false;
    for rep in reps {
        let spans = input.spans_of(rep);
        let run = input.run_row(rep);
        let acts = input.gpu.activity_of(rep);
        let telemetry = input.gpu.telemetry_of(rep);
        // The rep's earliest record of any kind, so that no timestamp is negative.
        let origin = spans
            .iter()
            .map(|s| s.start_ns)
            .chain(acts.iter().map(|a| a.start_ns))
            .chain(telemetry.iter().map(|t| counter_time(t)))
            .min()
            .or(run.map(|r| r.start_ns))
            .unwrap_or(0);
        origins.insert(rep.to_string(), Value::String(origin.to_string()));
        planned.push((rep, origin));
        any_span |= !spans.is_empty();
        let pid = rep_pid(rep);
        let (label, sort) = match run {
            Some(r) => {
                let mut l = format!("{} · rep {} (#{}", r.variant, r.rep, r.iteration);
                if r.warmup {
                    l.push_str(", warm-up");
                }
                if r.status != crate::store::RepStatus::Ok {
                    l.push_str(", failed");
                }
                l.push(')');
                let vi = variants
                    .iter()
                    .position(|v| *v == r.variant)
                    .unwrap_or(variants.len());
                (
                    l,
                    vi as u64 * 100_000 + if r.warmup { 0 } else { 50_000 } + r.iteration as u64,
                )
            }
            None => (format!("rep {rep}"), u64::MAX / 2),
        };
        meta_events.push(json!({"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": label}}));
        meta_events.push(json!({"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0, "args": {"sort_index": sort}}));
        // Threads: the critical path first, then by first activity.
        let root = input.root_thread(rep);
        let mut threads: BTreeMap<u64, (&str, u64)> = BTreeMap::new();
        for s in &spans {
            let e = threads
                .entry(s.thread_id)
                .or_insert((s.thread_name.as_str(), s.start_ns));
            e.1 = e.1.min(s.start_ns);
        }
        let mut order: Vec<(u64, &str, u64)> =
            threads.into_iter().map(|(t, (n, f))| (t, n, f)).collect();
        order.sort_by_key(|(t, _, first)| (Some(*t) != root, *first));
        for (i, (tid, name, _)) in order.iter().enumerate() {
            let name = if name.is_empty() {
                format!("thread {tid}")
            } else {
                name.to_string()
            };
            meta_events.push(json!({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}}));
            meta_events.push(json!({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid, "args": {"sort_index": i}}));
        }
        // GPU lanes, after the threads.
        for (i, lane) in gpu_lanes_of(&acts).iter().enumerate() {
            let tid = GPU_LANE_TID_BASE + i as u64;
            meta_events.push(json!({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": lane.to_string()}}));
            meta_events.push(json!({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid, "args": {"sort_index": order.len() + i}}));
        }
    }
    if !any_span {
        return Err(ExportError::NoSpans {
            dir: input.data.dir.clone(),
        });
    }
    Ok(Prepared {
        meta_events,
        reps: planned,
        origins,
    })
}

/// A rep's GPU lanes in track order.
fn gpu_lanes_of(acts: &[&GpuActivityRow]) -> Vec<GpuLane> {
    let mut lanes: Vec<GpuLane> = acts.iter().map(|a| GpuLane::of(a)).collect();
    lanes.sort_unstable();
    lanes.dedup();
    lanes
}

/// The events of one rep (spans, GPU activity, counters), timed from its origin and
/// sorted: by track, then time, parents before children at equal start times so that
/// viewers nest them (a stable sort: equal keys keep the order made here).
fn rep_events<'a>(input: &'a RunView, rep: u32, origin: u64) -> Vec<Event<'a>> {
    let pid = rep_pid(rep);
    let spans = input.spans_of(rep);
    let acts = input.gpu.activity_of(rep);
    let telemetry = input.gpu.telemetry_of(rep);
    let mut events = Vec::with_capacity(spans.len() + acts.len());
    for s in spans {
        events.push(Event {
            pid,
            tid: s.thread_id,
            ts: us(s.start_ns, origin),
            dur: s.end_ns.saturating_sub(s.start_ns) as f64 / 1000.0,
            what: What::Span(s),
        });
    }
    let lanes = gpu_lanes_of(&acts);
    for a in acts {
        let i = lanes.binary_search(&GpuLane::of(a)).unwrap_or(0);
        events.push(Event {
            pid,
            tid: GPU_LANE_TID_BASE + i as u64,
            ts: us(a.start_ns, origin),
            dur: a.end_ns.saturating_sub(a.start_ns) as f64 / 1000.0,
            what: What::Gpu(a),
        });
    }
    for t in telemetry.iter().filter(|t| is_gpu_row(t)) {
        let placed = if t.source == SOURCE_DRIVER_SAMPLES {
            " (driver samples)"
        } else {
            ""
        };
        for (series, v) in series(t) {
            events.push(Event {
                pid,
                tid: 0,
                ts: us(counter_time(t), origin),
                dur: 0.0,
                what: What::Counter(format!("GPU {} {series}{placed}", t.gpu), "nvml", v),
            });
        }
    }
    // The CPU lane: the process's busy cores from each sample to the next.
    for (start, _, cores) in busy_cores(&telemetry) {
        events.push(Event {
            pid,
            tid: 0,
            ts: us(start, origin),
            dur: 0.0,
            what: What::Counter("process busy cores".into(), "cpu", cores),
        });
    }
    events.sort_by(|a, b| {
        a.tid
            .cmp(&b.tid)
            .then(a.ts.total_cmp(&b.ts))
            .then(b.dur.total_cmp(&a.dur))
    });
    events
}

impl Prepared {
    /// Writes the trace: `{"traceEvents": [...], "displayTimeUnit", "otherData"}`.
    fn write(&self, input: &RunView, w: &mut dyn Write) -> std::io::Result<()> {
        w.write_all(b"{\"traceEvents\":[")?;
        let mut first = true;
        let mut sep = |w: &mut dyn Write| -> std::io::Result<()> {
            if !first {
                w.write_all(b",")?;
            }
            first = false;
            Ok(())
        };
        for e in &self.meta_events {
            sep(w)?;
            serde_json::to_writer(&mut *w, e)?;
        }
        for &(rep, origin) in &self.reps {
            for e in &rep_events(input, rep, origin) {
                sep(w)?;
                match &e.what {
                    What::Span(s) => serde_json::to_writer(&mut *w, &SpanEvent { e, s })?,
                    _ => serde_json::to_writer(&mut *w, &event_value(e))?,
                }
            }
        }
        let m = &input.data.meta;
        let other = json!({
            "producer": format!("gapscope {}", m.gapscope_version),
            "experiment": m.experiment,
            "run_id": m.run_id,
            "clock": "CLOCK_MONOTONIC; ts of each rep counted from that rep's first record",
            "rep_origin_ns": self.origins,
        });
        w.write_all(b"],\"displayTimeUnit\":\"ms\",\"otherData\":")?;
        serde_json::to_writer(&mut *w, &other)?;
        w.write_all(b"}")?;
        w.flush()
    }
}

/// A span's event, serialised straight from its row: the text [`event_value`] gives
/// (keys in the order a JSON object map sorts them), without building a tree per span,
/// which a run of millions of spans pays for in time.
struct SpanEvent<'e, 'a> {
    e: &'e Event<'a>,
    s: &'a SpanRow,
}

impl serde::Serialize for SpanEvent<'_, '_> {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = ser.serialize_map(Some(8))?;
        m.serialize_entry("args", &SpanArgs(self.s))?;
        m.serialize_entry("cat", "span")?;
        m.serialize_entry("dur", &Value::from(self.e.dur))?;
        m.serialize_entry("name", self.s.name.as_str())?;
        m.serialize_entry("ph", "X")?;
        m.serialize_entry("pid", &self.e.pid)?;
        m.serialize_entry("tid", &self.e.tid)?;
        m.serialize_entry("ts", &Value::from(self.e.ts))?;
        m.end()
    }
}

/// A span event's `args`, keys sorted as [`event_value`]'s map sorts them.
struct SpanArgs<'a>(&'a SpanRow);

impl serde::Serialize for SpanArgs<'_> {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let s = self.0;
        let attrs = match s.attrs.as_str() {
            "" | "{}" => None,
            text => match serde_json::from_str::<Value>(text) {
                Ok(Value::Object(a)) if !a.is_empty() => Some(a),
                _ => None,
            },
        };
        let mut m = ser.serialize_map(None)?;
        if let Some(a) = &attrs {
            m.serialize_entry("attrs", a)?;
        }
        let counted = |m: &mut S::SerializeMap, key: &str, v: Option<u64>| match v {
            Some(v) => m.serialize_entry(key, &v),
            None => Ok(()),
        };
        counted(&mut m, "branches", s.counter("branches"))?;
        counted(&mut m, "context_switches", s.counter("context_switches"))?;
        counted(&mut m, "cycles", s.counter("cycles"))?;
        counted(&mut m, "instructions", s.counter("instructions"))?;
        counted(&mut m, "page_faults", s.counter("page_faults"))?;
        m.serialize_entry("parent_id", &s.parent_id)?;
        counted(&mut m, "process_cpu_ns", s.process_cpu_ns.get())?;
        m.serialize_entry("self_ns", &s.self_ns)?;
        m.serialize_entry("span_id", &s.span_id)?;
        counted(&mut m, "task_clock_ns", s.counter("task_clock_ns"))?;
        m.end()
    }
}

/// The JSON of one event, built as it is written.
fn event_value(e: &Event) -> Value {
    match &e.what {
        What::Span(s) => {
            let mut args = Map::new();
            args.insert("span_id".into(), json!(s.span_id));
            args.insert("parent_id".into(), json!(s.parent_id));
            args.insert("self_ns".into(), json!(s.self_ns));
            for column in [
                "instructions",
                "branches",
                "cycles",
                "task_clock_ns",
                "page_faults",
                "context_switches",
            ] {
                if let Some(v) = s.counter(column) {
                    args.insert(column.into(), json!(v));
                }
            }
            if let Some(v) = s.process_cpu_ns.get() {
                args.insert("process_cpu_ns".into(), json!(v));
            }
            if let Ok(Value::Object(attrs)) = serde_json::from_str::<Value>(&s.attrs) {
                if !attrs.is_empty() {
                    args.insert("attrs".into(), Value::Object(attrs));
                }
            }
            json!({
                "name": s.name,
                "cat": "span",
                "ph": "X",
                "pid": e.pid,
                "tid": e.tid,
                "ts": e.ts,
                "dur": e.dur,
                "args": args,
            })
        }
        What::Gpu(a) => {
            let mut args = Map::new();
            args.insert("kind".into(), json!(a.kind));
            if let Some(b) = a.bytes {
                args.insert("bytes".into(), json!(b));
            }
            args.insert("stream".into(), json!(a.stream));
            args.insert("correlation_id".into(), json!(a.correlation_id));
            json!({
                "name": lanes::label(a),
                "cat": format!("gpu.{}", if a.kind.is_empty() { "activity" } else { &a.kind }),
                "ph": "X",
                "pid": e.pid,
                "tid": e.tid,
                "ts": e.ts,
                "dur": e.dur,
                "args": args,
            })
        }
        What::Counter(name, cat, v) => json!({
            "name": name,
            "cat": cat,
            "ph": "C",
            "pid": e.pid,
            "ts": e.ts,
            "args": {"value": v},
        }),
    }
}
