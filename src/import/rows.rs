//! One rep of a trace as run-folder rows: its spans with parents, self time and the
//! GPU-busy time of the rep's kernels, its GPU intervals, and its runs.csv row. The
//! root row is named as meta.json's `phases.root` says; a span of the file named like
//! the root is recorded as "`root` (span of the trace)" so the two are never summed.

use std::borrow::Cow;
use std::collections::HashMap;

use rayon::prelude::*;
use serde_json::{Map, Value};

use super::model::{GpuKind, Span, Trace};
use super::reps::{Rep, Root};
use super::tree::{self, ROOT};
use crate::capture::names::NameMap;
use crate::store::{Count, GpuActivityRow, GpuLine, RepStatus, RunRow, SpanLine, SpanRow};
use crate::trace::selftime::Coverage;

/// The rows' thread ids and names of a trace's threads.
pub struct Threads {
    pub ids: Vec<u64>,
    pub names: Vec<String>,
    pids: Vec<u32>,
}

/// Synthetic thread ids (a tid that is not a number, or one tid in two processes) start
/// here, far above any real thread id.
const SYNTHETIC_TID: u64 = 1 << 40;

impl Threads {
    /// A numeric tid is kept where no other process has it; names say the pid where the
    /// trace has several processes.
    pub fn of(trace: &Trace) -> Threads {
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for t in &trace.threads {
            *seen.entry(t.tid.as_str()).or_default() += 1;
        }
        let mut pids: Vec<&str> = trace.threads.iter().map(|t| t.pid.as_str()).collect();
        pids.sort_unstable();
        pids.dedup();
        let several = pids.len() > 1;
        let mut out = Threads {
            ids: Vec::new(),
            names: Vec::new(),
            pids: Vec::new(),
        };
        for (i, t) in trace.threads.iter().enumerate() {
            let id = t
                .tid
                .parse::<u64>()
                .ok()
                .filter(|n| *n < SYNTHETIC_TID && seen[t.tid.as_str()] == 1)
                .unwrap_or(SYNTHETIC_TID + i as u64);
            let base = t.name.clone().unwrap_or_else(|| format!("tid {}", t.tid));
            let name = if several {
                match trace.process_names.get(&t.pid) {
                    Some(p) => format!("{base} (pid {}: {p})", t.pid),
                    None => format!("{base} (pid {})", t.pid),
                }
            } else {
                base
            };
            out.ids.push(id);
            out.names.push(name);
            out.pids.push(t.pid.parse().unwrap_or(0));
        }
        out
    }
}

/// A name as imported, and the attributes its name map keeps.
pub type MappedName = (Box<str>, Vec<(String, String)>);

/// Every name of the trace as imported, with the attributes its rule keeps (the regex's
/// named groups: `step` of `ProfilerStep#3`): `--name-map` and the defaults applied once
/// per distinct name.
pub fn mapped_names(trace: &Trace, map: &NameMap) -> Vec<MappedName> {
    (0..trace.names.len() as u32)
        .map(|i| {
            let name = trace.names.name(i);
            match map.apply(name) {
                Some((n, attrs)) => (n.into(), attrs),
                None => (name.into(), Vec::new()),
            }
        })
        .collect()
}

/// What the rows of one rep need to know.
pub struct RepCtx<'a> {
    pub trace: &'a Trace,
    pub threads: &'a Threads,
    /// Each name as imported, with the attributes its name map keeps.
    pub names: &'a [MappedName],
    pub rep: u32,
    pub variant: &'a str,
    pub iteration: u32,
    /// meta.json's `phases.root`.
    pub root: &'a str,
}

/// A rep's span rows, made one at a time into a row that is reused ([`Rows::fill`]):
/// an imported trace of millions of spans is never held as rows all at once, and its
/// rows are made on every core.
pub struct Rows<'a> {
    ctx: &'a RepCtx<'a>,
    members: Vec<&'a Span>,
    tree: tree::Tree,
    busy: Option<Coverage>,
    root_attrs: String,
}

impl Rows<'_> {
    pub fn len(&self) -> usize {
        self.members.len()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Sets every field of `row` to span `i`'s (the root first).
    pub fn fill(&self, i: usize, row: &mut SpanRow) {
        self.with_line(i, |line| row.set_from(line));
    }

    /// Appends span `i`'s spans.csv line to `out`.
    pub fn line(&self, i: usize, out: &mut Vec<u8>) {
        self.with_line(i, |line| line.write_csv_line(out));
    }

    /// Span `i`'s row, its texts borrowed (where they need not be made for it), handed
    /// to `f`.
    fn with_line<R>(&self, i: usize, f: impl FnOnce(&SpanLine) -> R) -> R {
        let (ctx, s) = (self.ctx, self.members[i]);
        let (name, attrs) = if i == 0 {
            (
                Cow::Borrowed(ctx.root),
                Cow::Borrowed(self.root_attrs.as_str()),
            )
        } else {
            name_and_attrs(ctx, s)
        };
        let parent = self.tree.parent[i];
        f(&SpanLine {
            rep: ctx.rep,
            variant: ctx.variant,
            span_id: i as u64 + 1,
            parent_id: (parent != ROOT).then(|| parent as u64 + 1),
            name: &name,
            thread_id: ctx.threads.ids[s.thread as usize],
            thread_name: &ctx.threads.names[s.thread as usize],
            start_ns: s.start_ns,
            end_ns: s.end_ns,
            duration_ns: s.end_ns - s.start_ns,
            self_ns: self.tree.self_ns[i],
            counters: [Count::NONE; 6],
            attrs: &attrs,
            gpu_busy_ns: (self.busy.as_ref())
                .map(|c| c.within(s.start_ns, s.end_ns))
                .into(),
            process_cpu_ns: Count::NONE,
        })
    }
}

/// The rep's runs.csv row, its span rows and GPU rows (both made as they are written), and
/// warnings about its tree.
pub fn rep_rows<'a>(
    ctx: &'a RepCtx<'a>,
    rep: &'a Rep,
) -> (RunRow, Rows<'a>, GpuRows<'a>, Vec<String>) {
    let gpu = gpu_rows(ctx, rep);
    let (run, rows, notes) = span_rows(ctx, rep, &gpu);
    (run, rows, gpu, notes)
}

/// The rep's runs.csv row, its span rows (made as they are written; the GPU-busy time
/// of each from the rep's GPU rows `gpu`), and warnings about its tree.
pub fn span_rows<'a>(
    ctx: &'a RepCtx<'a>,
    rep: &'a Rep,
    gpu: &GpuRows,
) -> (RunRow, Rows<'a>, Vec<String>) {
    let trace = ctx.trace;
    let root = rep.root_span(trace);
    let mut members: Vec<&Span> = Vec::with_capacity(rep.spans.len() + 1);
    members.push(root);
    members.extend(rep.spans.iter().map(|&i| &trace.spans[i as usize]));
    let tree = tree::build(&members, 0);
    let notes = tree_notes(ctx.rep, &tree);
    let busy = (!gpu.is_empty()).then(|| {
        Coverage::new(
            gpu.order
                .iter()
                .map(|&g| &trace.gpu[g as usize])
                .filter(|g| g.kind == GpuKind::Kernel)
                .map(|g| (g.start_ns, g.end_ns)),
        )
    });
    let run = run_row(ctx, root);
    let root_attrs = root_attrs(ctx, rep);
    let rows = Rows {
        ctx,
        members,
        tree,
        busy,
        root_attrs,
    };
    (run, rows, notes)
}

/// What the tree of rep `rep` says of its file's parent links.
fn tree_notes(rep: u32, tree: &tree::Tree) -> Vec<String> {
    let mut notes = Vec::new();
    if tree.orphans > 0 {
        notes.push(format!(
            "rep {rep}: {} span(s) name a parent that is not in the rep (another rep, or not \
             in the file): placed under the root",
            tree.orphans
        ));
    }
    if tree.loops > 0 {
        notes.push(format!(
            "rep {rep}: {} parent link(s) made a loop (a damaged file): cut, the span placed \
             under the root",
            tree.loops
        ));
    }
    notes
}

/// The rep's runs.csv row: ok, its window the root's.
fn run_row(ctx: &RepCtx, root: &Span) -> RunRow {
    RunRow {
        rep: ctx.rep,
        variant: ctx.variant.to_string(),
        iteration: ctx.iteration,
        warmup: false,
        status: RepStatus::Ok,
        checked: true,
        outputs: 0,
        start_ns: root.start_ns,
        wall_ns: root.end_ns - root.start_ns,
        started_utc: String::new(),
        pid: ctx
            .threads
            .pids
            .get(root.thread as usize)
            .copied()
            .unwrap_or(0),
        rss_end_bytes: None,
        gpu_mem_used_end_bytes: None,
        error: String::new(),
        span_rows: None,
    }
}

/// A span's row name and attributes: its name as imported, the name it had in the
/// file where the two differ (or where it is named like the root and so renamed).
fn name_and_attrs<'a>(ctx: &RepCtx<'a>, s: &Span) -> (Cow<'a, str>, Cow<'a, str>) {
    let written = ctx.trace.names.name(s.name);
    let (mapped, kept) = &ctx.names[s.name as usize];
    let name = if **mapped == *ctx.root {
        Cow::Owned(format!("{} (span of the trace)", ctx.root))
    } else {
        Cow::Borrowed(&**mapped)
    };
    let attrs = ctx.trace.attrs_of(s).unwrap_or("{}");
    if name == written {
        return (name, Cow::Borrowed(attrs));
    }
    let mut m: Map<String, Value> = serde_json::from_str(attrs).unwrap_or_default();
    m.insert("name_in_trace".into(), written.into());
    for (k, v) in kept {
        let v = match crate::protocol::value(v) {
            crate::trace::AttrValue::U64(n) => Value::from(n),
            crate::trace::AttrValue::I64(n) => Value::from(n),
            _ => Value::from(v.as_str()),
        };
        m.entry(k.clone()).or_insert(v);
    }
    (name, Cow::Owned(Value::Object(m).to_string()))
}

/// The root's attributes: the file it came from and its format (and the rep span's own).
fn root_attrs(ctx: &RepCtx, rep: &Rep) -> String {
    let own = match rep.root {
        Root::Span(i) => ctx.trace.attrs_of(&ctx.trace.spans[i as usize]),
        Root::File(_) => None,
    };
    let mut m: Map<String, Value> = serde_json::from_str(own.unwrap_or("{}")).unwrap_or_default();
    if let Root::Span(i) = rep.root {
        let written = ctx.trace.names.name(ctx.trace.spans[i as usize].name);
        if written != ctx.root {
            m.insert("name_in_trace".into(), written.into());
        }
    }
    m.insert("file".into(), ctx.trace.path.display().to_string().into());
    m.insert("format".into(), ctx.trace.format.as_str().into());
    Value::Object(m).to_string()
}

/// A rep's GPU rows in time order (then correlation id), made as they are written
/// ([`GpuRows::row`]): a trace of millions of kernels is never held as rows.
pub struct GpuRows<'a> {
    ctx: &'a RepCtx<'a>,
    /// The trace's GPU records of the rep, in the rows' order.
    order: Vec<u32>,
}

impl GpuRows<'_> {
    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The `i`-th row.
    pub fn row(&self, i: usize) -> GpuActivityRow {
        self.view(i).to_row()
    }

    /// Appends the `i`-th row's line of gpu_activity.csv to `out`.
    pub fn line(&self, i: usize, out: &mut Vec<u8>) {
        self.view(i).write_csv_line(out);
    }

    fn view(&self, i: usize) -> GpuLine<'_> {
        let ctx = self.ctx;
        let r = &ctx.trace.gpu[self.order[i] as usize];
        GpuLine {
            rep: ctx.rep,
            variant: ctx.variant,
            kind: r.kind.as_str(),
            name: &ctx.names[r.name as usize].0,
            device: r.device,
            stream: r.stream,
            correlation_id: r.correlation as u32,
            start_ns: r.start_ns,
            end_ns: r.end_ns,
            duration_ns: r.end_ns - r.start_ns,
            grid: r.grid,
            block: r.block,
            bytes: r.bytes,
        }
    }
}

/// A rep's GPU rows, in time order (then correlation id).
pub fn gpu_rows<'a>(ctx: &'a RepCtx<'a>, rep: &Rep) -> GpuRows<'a> {
    // Each record's key beside it, sorted on every core; ties keep the rep's order (its
    // place in the rep is the last key).
    let mut keyed: Vec<(u64, u32, u32, u32)> = rep
        .gpu
        .par_iter()
        .enumerate()
        .map(|(at, &g)| {
            let r = &ctx.trace.gpu[g as usize];
            (r.start_ns, r.correlation as u32, at as u32, g)
        })
        .collect();
    keyed.par_sort_unstable();
    let order = keyed.into_iter().map(|(.., g)| g).collect();
    GpuRows { ctx, order }
}
