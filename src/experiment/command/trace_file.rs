//! `[workload] trace_file`: a trace the program writes in each rep (Chrome trace JSON as
//! PyTorch's profiler or tracing-chrome write it, OTLP JSON, an Nsight Systems SQLite
//! export, or gzip of any; the format found from the content, as `gapscope import`
//! finds it), read after the rep and filed under it: its spans under a span `trace`
//! below the rep's root, its GPU kernels and copies as the rep's GPU activity. So a
//! program instrumented for its own profiler runs under `run`, `--until-decided`,
//! `bisect`, `track` and sweeps unchanged.
//!
//! Clocks: a trace whose times are wall-clock (Unix epoch; PyTorch's profiler) is placed
//! by the offset between the wall clock and the span clock; one already on the span
//! clock (CLOCK_MONOTONIC) as it is; one on a clock of its own (tracing-chrome counts
//! from its own start) with its first event at the program's start, and the rep's root
//! says so.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::capture::names::NameMap;
use crate::import::{model::Trace, reps, rows as import_rows, source};
use crate::store::{GpuActivityRow, SpanRow};
use crate::trace::selftime::{self_times, Interval};

/// A trace whose first event lies within the rep's window, give or take this (2 s),
/// once on a clock, is taken to be on that clock: the program wrote it during the rep,
/// so its profiler started after the program did. (CLOCK_MONOTONIC counts from boot, so
/// on a machine up for minutes a trace counting from 0 lies within an hour of it.)
const SAME_CLOCK_NS: i128 = 2_000_000_000;

/// The root of a trace's spans under the rep's root.
pub const TRACE_ROOT: &str = reps::FILE_ROOT;

/// Where a rep's trace file is, and what it was before the rep.
#[derive(Debug, Clone)]
pub struct Before {
    pub path: PathBuf,
    /// Its modification time before the rep, where it existed.
    pub modified: Option<SystemTime>,
}

/// Notes the file as it is before a rep: `path` relative to the subject's folder `dir`.
pub fn before(dir: &Path, path: &Path) -> Before {
    let path = dir.join(path);
    let modified = std::fs::symlink_metadata(&path)
        .and_then(|m| m.modified())
        .ok();
    Before { path, modified }
}

/// A trace's rows for one rep, and what to note on the rep's root.
#[derive(Debug, Default)]
pub struct TraceRows {
    pub spans: Vec<SpanRow>,
    pub gpu: Vec<GpuActivityRow>,
    pub note: Option<String>,
}

/// What the rows need to know of the rep.
pub struct RepPlace<'a> {
    pub rep: u32,
    pub variant: &'a str,
    pub iteration: u32,
    /// The program's run on the span clock.
    pub start_ns: u64,
    pub end_ns: u64,
    /// CLOCK_REALTIME − CLOCK_MONOTONIC, ns.
    pub realtime_offset_ns: i128,
    /// The thread and the id of the rep's root span, and the largest span id in use.
    pub root_thread: u64,
    pub root_id: u64,
    pub last_id: u64,
}

/// Reads the trace the rep wrote. An error says why no span was taken (no file, one the
/// rep did not write, one that does not read as a trace), for the rep's root: the rep
/// itself stands.
pub fn read(
    before: &Before,
    place: &RepPlace,
    names: &NameMap,
    cap: u64,
) -> Result<TraceRows, String> {
    let shown = before.path.display();
    let meta = std::fs::symlink_metadata(&before.path).map_err(|e| {
        format!("trace_file {shown}: not there after the rep ({e}): does the program write it?")
    })?;
    if before.modified.is_some() && meta.modified().ok() == before.modified {
        return Err(format!(
            "trace_file {shown}: not written in this rep (unchanged since before it); \
             its spans were not taken again"
        ));
    }
    let (trace, _) =
        crate::import::read_trace(&before.path, cap).map_err(|e| format!("trace_file: {e}"))?;
    let Some(rep) = reps::whole_file(&trace) else {
        return Err(format!(
            "trace_file {shown}: holds no span and no GPU record"
        ));
    };
    let (shift, clock) = shift_of(&trace, place);
    let threads = import_rows::Threads::of(&trace);
    let mapped = import_rows::mapped_names(&trace, names);
    let ctx = import_rows::RepCtx {
        trace: &trace,
        threads: &threads,
        names: &mapped,
        rep: place.rep,
        variant: place.variant,
        iteration: place.iteration,
        root: TRACE_ROOT,
    };
    let (_, spans, gpu, _) = import_rows::rep_rows(&ctx, &rep);
    let moved = |t: u64| (t as i128 + shift).max(0) as u64;
    let spans = (0..spans.len())
        .map(|i| {
            let mut s = SpanRow::sample();
            spans.fill(i, &mut s);
            s.start_ns = moved(s.start_ns);
            s.end_ns = moved(s.end_ns).max(s.start_ns);
            s.duration_ns = s.end_ns - s.start_ns;
            s.span_id += place.last_id;
            s.parent_id = Some(s.parent_id.map_or(place.root_id, |p| p + place.last_id));
            if s.parent_id == Some(place.root_id) {
                // The trace's extent sits on the program's main thread.
                s.thread_id = place.root_thread;
            }
            s
        })
        .collect();
    let gpu = (0..gpu.len())
        .map(|i| {
            let mut g = gpu.row(i);
            g.start_ns = moved(g.start_ns);
            g.end_ns = moved(g.end_ns).max(g.start_ns);
            g.duration_ns = g.end_ns - g.start_ns;
            g
        })
        .collect();
    let warned = (trace.warnings.kept.iter().take(3))
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join("; ");
    let note = match (clock, warned.is_empty()) {
        (clock, true) => clock,
        (Some(n), false) => Some(format!("{n}; trace_file: {warned}")),
        (None, false) => Some(format!("trace_file: {warned}")),
    };
    Ok(TraceRows { spans, gpu, note })
}

/// The shift (ns) that puts the trace on the span clock, and a note where it had to be
/// guessed.
fn shift_of(trace: &Trace, place: &RepPlace) -> (i128, Option<String>) {
    let first = (trace.spans.iter().map(|s| s.start_ns))
        .chain(trace.gpu.iter().map(|g| g.start_ns))
        .min()
        .unwrap_or(0) as i128;
    let start = place.start_ns as i128;
    let end = place.end_ns as i128;
    let near = |t: i128| t > start - SAME_CLOCK_NS && t < end + SAME_CLOCK_NS;
    if near(first - place.realtime_offset_ns) {
        (-place.realtime_offset_ns, None)
    } else if near(first) {
        (0, None)
    } else {
        (
            start - first,
            Some(
                "trace_file: its times are on a clock of its own (neither the wall clock nor \
                 CLOCK_MONOTONIC): its first event was placed at the program's start"
                    .to_string(),
            ),
        )
    }
}

/// The rep's rows with the trace's appended, and every self time again (the rep's root
/// now has the trace's extent below it).
pub fn merge(rows: &mut Vec<SpanRow>, trace: TraceRows) -> Vec<GpuActivityRow> {
    rows.extend(trace.spans);
    let iv: Vec<Interval> = rows
        .iter()
        .map(|r| Interval {
            id: r.span_id,
            parent: r.parent_id,
            thread_id: r.thread_id,
            start_ns: r.start_ns,
            end_ns: r.end_ns,
        })
        .collect();
    for (r, s) in rows.iter_mut().zip(self_times(&iv)) {
        r.self_ns = s;
    }
    trace.gpu
}

/// The most bytes read from a rep's trace, also once decompressed: the import's cap.
pub const MAX_BYTES: u64 = source::MAX_FILE_BYTES;

#[cfg(test)]
#[path = "trace_file_tests.rs"]
mod tests;
