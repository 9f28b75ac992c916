//! A run of an external program as a rep's rows: a root span ([`ROOT`], or the name a
//! resumed run folder has for it) from the spawn to
//! the program's exit (on its main thread, whose id is its pid), carrying the
//! program's perf-event totals and its line counts, with the program's spans nested
//! under it per thread by time, and self time as for the prover's spans. Every span gets
//! the program's CPU time over it ([`super::cpu`]): its own `process_cpu_ns` attribute
//! where it sent one, else interpolated from gapscope's readings of the program's CPU
//! clock (attribute `process_cpu` says so, with the period).
//!
//! A rep keeps at most [`MAX_SPANS_PER_REP`] spans, or the workload's lower
//! `max_spans_per_rep`: the cap applies while the program's lines are read (later spans
//! are counted, not stored: [`crate::protocol::budget`]) and a rep past it fails, saying
//! how many spans it sent and how many were kept; and
//! a program's span named like the root is recorded as "`root` (program span)"
//! ([`renamed`]), never merged with the root.

use std::collections::HashMap;

use crate::capture::log_spans::{GS_ID, GS_PARENT, GS_TIMED};
use crate::counters::CounterKind;
use crate::protocol::{LineCounts, ParsedSpan};
use crate::store::SpanRow;
use crate::trace::selftime::{self_times, Interval};
use crate::trace::AttrValue;

use super::child::{ChildRun, Ending};

/// Id of the root span in every external rep; the program's spans count from 2.
pub const ROOT_ID: u64 = 1;
/// Lines of stderr quoted in a failed rep's error.
const ERROR_TAIL: usize = 10;
/// Most spans one rep keeps: past it the rep is recorded as failed, with its first
/// spans, so that one program cannot fill gapscope's memory, the run folder and the
/// memory of its readers. A workload may set a lower cap (`max_spans_per_rep`).
pub const MAX_SPANS_PER_REP: usize = 2_000_000;
/// The root span of a program's rep: the program's run from spawn to exit. Run folders
/// of meta.json schema 1 named it `prove`, as the Groth16 prover's root.
pub const ROOT: &str = "program";

/// What a program's own span named like the root is recorded as: the root is
/// gapscope's (spawn to exit), and a span of the same name would be summed with it.
pub fn renamed(root: &str) -> String {
    format!("{root} (program span)")
}

/// Parent of every span: the innermost span on the same thread whose interval contains
/// it (ties: the one opened first), else the root; or the span whose `gs.id` it names
/// as `gs.parent` (see [`follow_ids`]). Spans are in any order. Also returns how many
/// spans' ids were refused.
pub fn nest(spans: &[ParsedSpan]) -> (Vec<Option<usize>>, u64) {
    let mut parent = nest_by_time(spans);
    let refused = follow_ids(spans, &mut parent);
    (parent, refused)
}

fn nest_by_time(spans: &[ParsedSpan]) -> Vec<Option<usize>> {
    let mut by_thread: HashMap<u64, Vec<usize>> = HashMap::new();
    for (i, s) in spans.iter().enumerate() {
        by_thread.entry(s.tid).or_default().push(i);
    }
    let mut parent = vec![None; spans.len()];
    for idx in by_thread.values_mut() {
        idx.sort_by_key(|&i| {
            let s = &spans[i];
            (s.start_ns, std::cmp::Reverse(s.end_ns), s.seq)
        });
        let mut stack: Vec<usize> = Vec::new();
        for &i in idx.iter() {
            let s = &spans[i];
            while let Some(&top) = stack.last() {
                if spans[top].end_ns >= s.end_ns {
                    break;
                }
                stack.pop();
            }
            parent[i] = stack.last().copied();
            stack.push(i);
        }
    }
    parent
}

fn id_of(s: &ParsedSpan, key: &str) -> Option<u64> {
    s.attrs.iter().find_map(|(k, v)| match v {
        AttrValue::U64(n) if k == key => Some(*n),
        _ => None,
    })
}

/// Spans that carry ids (the `tracing` layer's lines, log spans with a parent) nest
/// under the span whose id they name, also one on another thread. What cannot be
/// followed is refused, counted, and the span keeps its parent by time: an id two spans
/// sent (neither is anyone's parent by it), a span naming itself, and a parent that
/// would close a loop. Linear in the spans, whatever the depth.
fn follow_ids(spans: &[ParsedSpan], parent: &mut [Option<usize>]) -> u64 {
    let mut by_id: HashMap<u64, Option<usize>> = HashMap::new();
    let mut refused = 0;
    for (i, s) in spans.iter().enumerate() {
        if let Some(id) = id_of(s, GS_ID) {
            by_id
                .entry(id)
                .and_modify(|e| {
                    refused += 1;
                    *e = None;
                })
                .or_insert(Some(i));
        }
    }
    let by_time = parent.to_vec();
    let mut named = vec![false; spans.len()];
    for (i, s) in spans.iter().enumerate() {
        let Some(pid) = id_of(s, GS_PARENT) else {
            continue;
        };
        match by_id.get(&pid) {
            Some(Some(p)) if *p == i => refused += 1,
            Some(Some(p)) => {
                parent[i] = Some(*p);
                named[i] = true;
            }
            // Sent twice: refused (counted once per span that sent it).
            Some(None) => {}
            // A parent never sent (or not kept): nests by time, as without ids.
            None => {}
        }
    }
    refused + break_loops(parent, &by_time, &named)
}

/// Walks every span's chain once (a span's state: 0 not seen, 1 on the chain being
/// walked, 2 known to reach a root), and where a chain comes back to itself, puts the
/// loop's last named link back to its parent by time (links by time never loop: a
/// parent starts before its child). Returns the links put back.
fn break_loops(parent: &mut [Option<usize>], by_time: &[Option<usize>], named: &[bool]) -> u64 {
    let n = parent.len();
    let (mut state, mut pos) = (vec![0u8; n], vec![0usize; n]);
    let mut named = named.to_vec();
    let mut broken = 0;
    let mut path: Vec<usize> = Vec::new();
    for start in 0..n {
        let mut cur = Some(start);
        while let Some(c) = cur {
            match state[c] {
                2 => break,
                1 => {
                    // The loop is path[pos[c]..]; it holds a named link.
                    let Some(k) = (pos[c]..path.len()).rev().find(|&k| named[path[k]]) else {
                        break;
                    };
                    let x = path[k];
                    parent[x] = by_time[x];
                    named[x] = false;
                    broken += 1;
                    for y in path.drain(k + 1..) {
                        state[y] = 0;
                    }
                    cur = parent[x];
                }
                _ => {
                    state[c] = 1;
                    pos[c] = path.len();
                    path.push(c);
                    cur = parent[c];
                }
            }
        }
        for y in path.drain(..) {
            state[y] = 2;
        }
    }
    broken
}

/// What to say of a program's ending, or `None` when it exited with status 0.
pub fn failure(run: &ChildRun) -> Option<String> {
    let why = match &run.ending {
        Ending::Exited(s) if s.success() => return over_cap(run).or_else(|| all_dropped(run)),
        Ending::Exited(s) => format!("the program exited with {s}"),
        Ending::TimedOut(t) => format!(
            "the program did not finish in {} s (rep_timeout_s); its process group was killed",
            t.as_secs()
        ),
        Ending::NotStarted(why) => return Some(why.clone()),
    };
    let tail = &run.stderr_tail[run.stderr_tail.len().saturating_sub(ERROR_TAIL)..];
    Some(if tail.is_empty() {
        format!("{why}; stderr was empty")
    } else {
        format!("{why}; stderr ends: {}", tail.join(" | "))
    })
}

/// Why a rep that exited well still failed: it sent more spans than a rep keeps.
fn over_cap(run: &ChildRun) -> Option<String> {
    let cap = run.span_cap;
    // The spans are in `spans` until the rep's rows take them, then counted.
    let kept = run.spans.len() + run.spans_read;
    (run.spans_over_cap > 0).then(|| {
        format!(
            "the program sent {} spans in this rep, more than the {cap} a rep keeps: the \
             first {} read were recorded, the other {} were counted as they came and not \
             stored, and the rep counts as failed. Send fewer spans (one per phase or per \
             batch of items rather than per item), or raise workload.max_spans_per_rep \
             (at most {MAX_SPANS_PER_REP})",
            kept as u64 + run.spans_over_cap,
            kept,
            run.spans_over_cap
        )
    })
}

/// Why a rep that exited well still failed: lines matched `[workload.log_spans]` and not
/// one of them became a span (a run without the spans asked for must not pass for one
/// with them).
fn all_dropped(run: &ChildRun) -> Option<String> {
    let log = run.log.as_ref()?;
    if log.matched == 0 || log.kept > 0 {
        return None;
    }
    let why = log
        .dropped
        .clone()
        .or_else(|| log.first_problem.clone())
        .unwrap_or_else(|| "no begin line was ever ended".into());
    Some(format!(
        "every one of the {} line(s) that matched workload.log_spans was dropped, so this \
         rep has none of the spans asked for and counts as failed; the first: {why}",
        log.matched
    ))
}

/// The rows of one rep of variant `variant` from a run of the program `program`, under
/// a root span named `root`.
pub fn rep_rows(
    run: &mut ChildRun,
    program: &str,
    root: &str,
    rep: u32,
    variant: &str,
) -> (Vec<SpanRow>, LineCounts) {
    // Two passes over the same kept spans: their nesting and self times, then the rows (the
    // root's, with the rep's counts and counters, and one per span). The second pass reads
    // what the first found, so both stay here.
    let mut counts = run.counts;
    // The program's clock is the span clock (both CLOCK_MONOTONIC): a span outside the
    // rep's window was timed on another clock, and is dropped with a count. The spans
    // are within the cap already: it applied while they were read.
    // Taken from the run, not copied: a rep's spans are its largest list while its rows
    // are made, and each is dropped once its row is.
    let mut kept = std::mem::take(&mut run.spans);
    run.spans_read = kept.len();
    let (start_ns, end_ns) = (run.start_ns, run.end_ns);
    let sent = kept.len();
    kept.retain(|s| s.start_ns >= start_ns && s.end_ns <= end_ns);
    counts.outside_rep += (sent - kept.len()) as u64;
    let (parents, refused) = nest(&kept);
    counts.refused_ids += refused;
    let main_tid = run.pid as u64;
    // The main thread is the program; another thread by the name it gave itself (a
    // `T` line, else `/proc`), else its id.
    let thread_name = |tid: u64| match run.thread_names.get(&tid) {
        _ if tid == main_tid => program.to_string(),
        Some(n) => n.clone(),
        None => format!("thread {tid}"),
    };
    let mut ivs = Vec::with_capacity(kept.len() + 1);
    ivs.push(Interval {
        id: ROOT_ID,
        parent: None,
        thread_id: main_tid,
        start_ns: run.start_ns,
        end_ns: run.end_ns,
    });
    for (i, s) in kept.iter().enumerate() {
        ivs.push(Interval {
            id: i as u64 + 2,
            parent: Some(parents[i].map(|p| p as u64 + 2).unwrap_or(ROOT_ID)),
            thread_id: s.tid,
            start_ns: s.start_ns,
            end_ns: s.end_ns,
        });
    }
    let selfs = self_times(&ivs);
    let interpolated = format!(
        "interpolated (the program's CPU clock read every {} ms)",
        super::cpu::PERIOD.as_millis()
    );
    let outsider = format!(
        "not measured: its thread was not one of the program's (pid {}) when its first line \
         was read (a process the program started?)",
        run.pid
    );
    let c = |k: CounterKind| run.counters.and_then(|v| v.get(k));
    let mut root_attrs = serde_json::Map::new();
    root_attrs.insert("program".into(), program.into());
    root_attrs.insert("exit".into(), ending_text(&run.ending).into());
    if let Some(timed) = run.log.as_ref().and_then(|l| l.timed) {
        root_attrs.insert("log_lines".into(), timed.into());
    }
    for (k, v) in ROOT_COUNTS.iter().zip(count_values(&counts)) {
        // Written where there were any, so that a rep without ids reads as before.
        if v > 0 || *k != "refused_span_ids" {
            root_attrs.insert(k.to_string(), v.into());
        }
    }
    let mut rows = Vec::with_capacity(kept.len() + 1);
    rows.push(SpanRow {
        rep,
        variant: variant.to_string().into(),
        span_id: ROOT_ID,
        parent_id: None,
        name: root.to_string().into(),
        thread_id: main_tid,
        thread_name: program.to_string().into(),
        start_ns: run.start_ns,
        end_ns: run.end_ns,
        duration_ns: run.end_ns - run.start_ns,
        self_ns: selfs[0],
        instructions: c(CounterKind::Instructions).into(),
        branches: c(CounterKind::Branches).into(),
        cycles: c(CounterKind::Cycles).into(),
        task_clock_ns: c(CounterKind::TaskClockNs).into(),
        page_faults: c(CounterKind::PageFaults).into(),
        context_switches: c(CounterKind::ContextSwitches).into(),
        attrs: serde_json::Value::Object(root_attrs).to_string().into(),
        gpu_busy_ns: None.into(),
        // Both ends are readings: exact.
        process_cpu_ns: run
            .cpu
            .measured()
            .then(|| run.cpu.over(run.start_ns, run.end_ns))
            .into(),
    });
    drop(parents);
    for (i, s) in kept.into_iter().enumerate() {
        let mut attrs: serde_json::Map<String, serde_json::Value> = s
            .attrs
            .iter()
            .map(|(k, v)| (k.clone(), serde_json::to_value(v).unwrap_or_default()))
            .collect();
        if let Some(via) = s.via {
            attrs.insert(super::child::VIA.into(), via.into());
        }
        if s.unmatched {
            attrs.insert("unmatched_begin".into(), true.into());
        }
        let name = if *s.name == *root {
            attrs.insert("name_sent".into(), root.into());
            renamed(root).into()
        } else {
            crate::store::Shared::from(&*s.name)
        };
        // CPU time of the whole program over the span: where the program reports it,
        // that; else the difference of the readings on its begin and end lines (the
        // emitters' `process_cpu_at_ns`); else interpolated from the readings of its CPU
        // clock.
        let reported = s
            .attrs
            .iter()
            .rev()
            .find_map(|(k, v)| match (k.as_str(), v) {
                ("process_cpu_ns", AttrValue::U64(n)) => Some(*n),
                _ => None,
            });
        let at: Vec<u64> = s
            .attrs
            .iter()
            .filter_map(|(k, v)| match (k.as_str(), v) {
                (crate::emit::CPU_AT, AttrValue::U64(n)) => Some(*n),
                _ => None,
            })
            .collect();
        attrs.remove(crate::emit::CPU_AT);
        // Ids only say who nests under whom (see `nest`).
        attrs.remove(GS_ID);
        attrs.remove(GS_PARENT);
        attrs.remove(GS_TIMED);
        let exact = reported.or(match at[..] {
            [first, .., last] => Some(last.saturating_sub(first)),
            _ => None,
        });
        let process_cpu_ns = exact.or_else(|| {
            if run.outsiders.contains(&s.tid) {
                attrs.insert("process_cpu".into(), outsider.clone().into());
                return None;
            }
            run.cpu.measured().then(|| {
                attrs.insert("process_cpu".into(), interpolated.clone().into());
                run.cpu.over(s.start_ns, s.end_ns)
            })
        });
        let mut row = crate::store::SpanRow::sample();
        row.rep = rep;
        row.variant = variant.to_string().into();
        row.span_id = ivs[i + 1].id;
        row.parent_id = ivs[i + 1].parent;
        row.name = name;
        row.thread_id = s.tid;
        row.thread_name = thread_name(s.tid).into();
        row.start_ns = s.start_ns;
        row.end_ns = s.end_ns;
        row.duration_ns = s.end_ns - s.start_ns;
        row.self_ns = selfs[i + 1];
        row.attrs = serde_json::Value::Object(attrs).to_string().into();
        row.process_cpu_ns = process_cpu_ns.into();
        rows.push(row);
    }
    (rows, counts)
}

/// The root span's attributes that hold the rep's line counts, in [`count_values`] order.
const ROOT_COUNTS: [&str; 7] = [
    "protocol_lines",
    "unparseable_lines",
    "unmatched_begins",
    "unmatched_ends",
    "spans_outside_rep",
    "gpu_records",
    "refused_span_ids",
];

fn count_values(c: &LineCounts) -> [u64; 7] {
    [
        c.protocol_lines,
        c.unparseable,
        c.unmatched_begins,
        c.unmatched_ends,
        c.outside_rep,
        c.gpu_records,
        c.refused_ids,
    ]
}

/// A rep's line counts, read back from its root span's attributes (zeros where absent).
pub fn counts_of_root(attrs: &str) -> LineCounts {
    let v: serde_json::Value = serde_json::from_str(attrs).unwrap_or_default();
    let n = |k: &str| v.get(k).and_then(|x| x.as_u64()).unwrap_or(0);
    LineCounts {
        protocol_lines: n(ROOT_COUNTS[0]),
        unparseable: n(ROOT_COUNTS[1]),
        unmatched_begins: n(ROOT_COUNTS[2]),
        unmatched_ends: n(ROOT_COUNTS[3]),
        outside_rep: n(ROOT_COUNTS[4]),
        gpu_records: n(ROOT_COUNTS[5]),
        refused_ids: n(ROOT_COUNTS[6]),
    }
}

fn ending_text(e: &Ending) -> String {
    match e {
        Ending::Exited(s) => s.to_string(),
        Ending::TimedOut(t) => format!("killed after {} s (rep_timeout_s)", t.as_secs()),
        Ending::NotStarted(_) => "not started".into(),
    }
}

/// The rep's check: ok (and "checked", no outputs) when the program exited with status
/// 0 within its span cap, failed with the exit status and the tail of its stderr
/// otherwise.
pub fn checked(run: &ChildRun) -> gapscope_workload::Checked {
    match failure(run) {
        None => gapscope_workload::Checked::passed(0),
        Some(why) => gapscope_workload::Checked::failed(0, why),
    }
}

#[cfg(test)]
mod cap_tests {
    use std::os::unix::process::ExitStatusExt;

    use super::*;

    fn run_of(spans: Vec<ParsedSpan>) -> ChildRun {
        ChildRun {
            pid: 7,
            start_ns: 1_000,
            end_ns: 1_000_000_000,
            ending: Ending::Exited(std::process::ExitStatus::from_raw(0)),
            spans,
            counts: LineCounts::default(),
            samples: Vec::new(),
            counters: None,
            stderr_tail: Vec::new(),
            cpu: Default::default(),
            sampled: None,
            outsiders: Default::default(),
            thread_names: Default::default(),
            gpu: Default::default(),
            span_cap: MAX_SPANS_PER_REP,
            spans_over_cap: 0,
            spans_read: 0,
            log: None,
        }
    }

    fn span(name: &str, start_ns: u64, end_ns: u64, seq: u64) -> ParsedSpan {
        ParsedSpan {
            name: name.into(),
            tid: 7,
            start_ns,
            end_ns,
            attrs: Vec::new(),
            seq,
            unmatched: false,
            via: None,
        }
    }

    #[test]
    fn a_program_span_named_like_the_root_is_kept_apart_from_it() {
        for root in [ROOT, "prove"] {
            let mut run = run_of(vec![span(root, 2_000, 3_000, 0)]);
            let (rows, _) = rep_rows(&mut run, "p", root, 0, "v");
            let roots: Vec<&SpanRow> = rows.iter().filter(|r| r.name == root).collect();
            assert_eq!(roots.len(), 1);
            assert_eq!(roots[0].span_id, ROOT_ID);
            let mine = rows.iter().find(|r| r.name == renamed(root)).unwrap();
            assert_eq!(mine.parent_id, Some(ROOT_ID));
            assert!(
                mine.attrs.contains(&format!("\"name_sent\":\"{root}\"")),
                "{}",
                mine.attrs
            );
            assert!(failure(&run).is_none());
        }
    }

    #[test]
    fn a_rep_past_the_span_cap_fails_saying_so_and_keeps_the_first_spans() {
        let cap = 100;
        let spans = (0..cap as u64)
            .map(|i| span("s", 2_000 + i * 10, 2_005 + i * 10, i))
            .collect();
        let mut run = run_of(spans);
        run.span_cap = cap;
        assert!(failure(&run).is_none(), "at the cap, nothing was dropped");
        run.spans_over_cap = 3;
        let why = failure(&run).expect("the rep fails");
        assert!(why.contains("sent 103 spans"), "{why}");
        assert!(
            why.contains("the first 100 read were recorded, the other 3"),
            "{why}"
        );
        assert!(why.contains("Send fewer spans"), "{why}");
        let (rows, _) = rep_rows(&mut run, "p", ROOT, 0, "v");
        assert_eq!(rows.len(), cap + 1);
    }
}
