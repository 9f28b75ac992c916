//! A trace cut into reps: the whole file as one rep under a root span [`FILE_ROOT`]
//! (from its first event to its last, on its main thread), or, with `--rep-span NAME`,
//! one rep per occurrence of that span: the spans of any thread that lie inside its
//! interval, and the GPU work it launched (by the correlation id a launch and its
//! kernel share, else by the kernel's start inside the interval).

use std::collections::HashMap;

use super::model::{Span, Trace};

/// The root span of a rep that is a whole file.
pub const FILE_ROOT: &str = "trace";

/// The root of one rep.
#[derive(Debug, Clone)]
pub enum Root {
    /// An occurrence of the rep span: its index in the trace's spans.
    Span(u32),
    /// The whole file: a span made for it on `thread`.
    File(Span),
}

/// One rep of a trace: its root, its spans (indices into the trace's spans, the root's
/// own not among them) and its GPU records.
#[derive(Debug)]
pub struct Rep {
    pub root: Root,
    pub spans: Vec<u32>,
    pub gpu: Vec<u32>,
}

impl Rep {
    /// The root as a span.
    pub fn root_span<'a>(&'a self, trace: &'a Trace) -> &'a Span {
        match &self.root {
            Root::Span(i) => &trace.spans[*i as usize],
            Root::File(s) => s,
        }
    }
}

/// The whole file as one rep; `None` when it holds neither spans nor GPU records.
pub fn whole_file(trace: &Trace) -> Option<Rep> {
    // One pass over the spans: the first start, the last end, and the thread of the
    // longest span (a program's outermost step or request; the first such), where the
    // file's root goes.
    let (mut start_ns, mut end_ns) = (u64::MAX, 0);
    let (mut longest, mut thread) = (None, 0);
    for s in &trace.spans {
        start_ns = start_ns.min(s.start_ns);
        end_ns = end_ns.max(s.end_ns);
        let d = s.end_ns - s.start_ns;
        if longest.is_none_or(|l| d > l) {
            (longest, thread) = (Some(d), s.thread);
        }
    }
    for g in &trace.gpu {
        start_ns = start_ns.min(g.start_ns);
        end_ns = end_ns.max(g.end_ns);
    }
    if trace.spans.is_empty() && trace.gpu.is_empty() {
        return None;
    }
    Some(Rep {
        // Its rows are named by the import ([`FILE_ROOT`]), not by a name of the file.
        root: Root::File(Span::plain(u32::MAX, thread, start_ns, end_ns)),
        spans: (0..trace.spans.len() as u32).collect(),
        gpu: (0..trace.gpu.len() as u32).collect(),
    })
}

/// What cutting at a rep span left out.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Leftover {
    pub spans: u64,
    pub gpu: u64,
}

/// One rep per span whose name (`is_rep(name id)`) is the rep span's, in time order.
pub fn by_span(trace: &Trace, is_rep: impl Fn(u32) -> bool) -> (Vec<Rep>, Leftover) {
    let mut roots: Vec<u32> = (0..trace.spans.len() as u32)
        .filter(|&i| is_rep(trace.spans[i as usize].name))
        .collect();
    roots.sort_by_key(|&i| (trace.spans[i as usize].start_ns, i));
    let mut by_start: Vec<u32> = (0..trace.spans.len() as u32).collect();
    by_start.sort_unstable_by_key(|&i| trace.spans[i as usize].start_ns);
    let mut used = vec![false; trace.spans.len()];
    let mut reps: Vec<Rep> = Vec::with_capacity(roots.len());
    let mut correlation: HashMap<u64, usize> = HashMap::new();
    for &r in &roots {
        let w = &trace.spans[r as usize];
        let from = by_start.partition_point(|&i| trace.spans[i as usize].start_ns < w.start_ns);
        let mut spans = Vec::new();
        for &i in by_start[from..].iter() {
            let s = &trace.spans[i as usize];
            if s.start_ns > w.end_ns {
                break;
            }
            if i != r && s.end_ns <= w.end_ns {
                spans.push(i);
                used[i as usize] = true;
                if s.correlation != 0 {
                    correlation.insert(s.correlation, reps.len());
                }
            }
        }
        used[r as usize] = true;
        reps.push(Rep {
            root: Root::Span(r),
            spans,
            gpu: Vec::new(),
        });
    }
    let mut left = Leftover {
        spans: used.iter().filter(|u| !**u).count() as u64,
        gpu: 0,
    };
    for (g, rec) in trace.gpu.iter().enumerate() {
        let by_launch = (rec.correlation != 0)
            .then(|| correlation.get(&rec.correlation).copied())
            .flatten();
        // Reps are in time order: the one that starts last before the record.
        let by_time = || {
            let k = reps.partition_point(|rep| rep.root_span(trace).start_ns <= rec.start_ns);
            k.checked_sub(1)
                .filter(|&k| rec.start_ns <= reps[k].root_span(trace).end_ns)
        };
        match by_launch.or_else(by_time) {
            Some(k) => reps[k].gpu.push(g as u32),
            None => left.gpu += 1,
        }
    }
    (reps, left)
}

/// Ids of the spans [`gpu_as_spans`] adds: above the ids OTLP's span ids are numbered
/// with (from 1 up).
const GPU_SPAN_IDS: u64 = 1 << 62;

/// Adds each rep's GPU intervals to it as spans too, on a thread per device and stream
/// ("GPU 0 stream 7"), under the rep's root: the diff then compares kernels, copies and
/// memsets by name (`--gpu-spans`).
pub fn gpu_as_spans(trace: &mut Trace, reps: &mut [Rep]) {
    for rep in reps.iter_mut() {
        for &g in &rep.gpu {
            let r = trace.gpu[g as usize].clone();
            let (pid, tid) = (format!("GPU {}", r.device), format!("stream {}", r.stream));
            let thread = trace.thread(&pid, &tid);
            let lane = &mut trace.threads[thread as usize];
            lane.name.get_or_insert_with(|| format!("{pid} {tid}"));
            let attrs = format!("{{\"gpu_kind\":\"{}\"}}", r.kind.as_str());
            // An id of its own (above any a file has) keeps it out of nesting by time:
            // intervals on a lane are not calls, and one never holds another.
            let id = GPU_SPAN_IDS + trace.spans.len() as u64;
            trace.spans.push(Span {
                name: r.name,
                thread,
                start_ns: r.start_ns,
                end_ns: r.end_ns,
                id: Some(id),
                parent: None,
                correlation: 0,
                attrs: Some(trace.attrs.keep(&attrs)),
            });
            rep.spans.push(trace.spans.len() as u32 - 1);
        }
    }
}
