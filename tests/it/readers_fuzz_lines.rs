//! Readers of lines a program or a tool writes: the span-line protocol's parser (random
//! streams, lines run together, threads interleaved, cut into chunks anywhere as a pipe
//! hands them over), the log-line span matcher (random lines against a fixed valid
//! `[workload.log_spans]`) and callgrind's dumps (headers of any values, edited or
//! random files). Each answers with a value or counted problems, never a panic, within
//! the time limit of crate::fuzz; the protocol's properties also keep every well-formed
//! span.

use std::collections::BTreeMap;
use std::sync::Arc;

use gapscope::capture::log_spans::LogMatcher;
use gapscope::capture::{LogPatterns, LogSpanRule};
use gapscope::counters::emulated;
use gapscope::protocol::reader::{LineSplitter, ReadLine};
use gapscope::protocol::{LineCounts, ParsedSpan, Parser, MAX_LINE, PREFIX};
use proptest::prelude::*;

use crate::fuzz::{bytes, fuzz, raw, Bytes, Raw};

/// Cases per target in a plain `cargo test` (the protocol's were 256 as unit tests).
const QUICK: u32 = 256;

/// `input` through the line splitter in chunks cut at `cuts` (as reads of a pipe come),
/// then the parser.
fn parse_all(input: &[u8], cuts: &[usize]) -> (Vec<ParsedSpan>, LineCounts, Vec<String>) {
    let mut p = Parser::new();
    {
        let mut lines = LineSplitter::new(MAX_LINE);
        let mut on_line = |l: ReadLine<'_>| match l {
            ReadLine::Whole(b) => {
                p.feed(b);
            }
            ReadLine::Overlong(b) => {
                p.feed_overlong(b);
            }
        };
        let mut rest = input;
        for &c in cuts {
            let (chunk, after) = rest.split_at(c.min(rest.len()));
            lines.push(chunk, &mut on_line);
            rest = after;
        }
        lines.push(rest, &mut on_line);
        lines.finish(&mut on_line);
    }
    p.finish(u64::MAX)
}

/// A well-formed span and the lines that report it (B/E or X) on one thread; whether
/// they run on into the next line where they may.
#[derive(Debug, Clone)]
struct Good {
    tid: u64,
    name: String,
    start: u64,
    dur: u64,
    complete: bool,
    run_on: bool,
}

fn good() -> impl Strategy<Value = Good> {
    (
        1u64..4,
        "[a-z_]{1,12}",
        0u64..1_000_000,
        0u64..1_000_000,
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(tid, name, start, dur, complete, run_on)| Good {
            tid,
            name,
            start,
            dur,
            complete,
            run_on,
        })
}

/// A line of a stream: its bytes (no newline), whether it is junk, and whether it runs
/// on into the next line without a newline (as two threads writing a line and its
/// newline apart leave them) where that loses nothing.
#[derive(Debug, Clone)]
struct Piece {
    bytes: Raw,
    junk: bool,
    run_on: bool,
}

fn well_formed(line: String, run_on: bool) -> Piece {
    Piece {
        bytes: Raw(line.into_bytes()),
        junk: false,
        run_on,
    }
}

fn junk() -> impl Strategy<Value = Piece> {
    let line = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..200),
        // Junk after the prefix: must be counted, not break the stream.
        prop::collection::vec(any::<u8>(), 0..60).prop_map(|mut v| {
            let mut l = PREFIX.to_vec();
            l.append(&mut v);
            l
        }),
        "[ -~]{0,80}".prop_map(|s| format!("@gapscope1 {s}").into_bytes()),
    ];
    (line, any::<bool>()).prop_map(|(v, run_on)| Piece {
        bytes: Raw(v.into_iter().filter(|&b| b != b'\n').collect()),
        junk: true,
        run_on,
    })
}

/// The pieces as a stream: each ends with a newline, unless it asks to run on into the
/// next and that loses nothing: after junk, or before a protocol line (every prefix
/// starts a protocol line), while the line so made stays within [`MAX_LINE`].
fn stream(pieces: &[Piece]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut line_len = 0;
    for (i, p) in pieces.iter().enumerate() {
        out.extend_from_slice(&p.bytes.0);
        line_len += p.bytes.0.len();
        let run_on = p.run_on
            && pieces.get(i + 1).is_some_and(|next| {
                (p.junk || next.bytes.0.starts_with(PREFIX))
                    && line_len + next.bytes.0.len() < MAX_LINE
            });
        if !run_on {
            out.push(b'\n');
            line_len = 0;
        }
    }
    out
}

/// Random streams never panic the parser, and every well-formed span survives any
/// junk between its lines, lines run together and any cut into chunks. Each good span
/// gets a thread of its own (junk only ever uses E lines of names no good span has, so
/// it cannot close one of them).
#[test]
fn random_streams_never_panic_and_keep_every_well_formed_span() {
    let case = (
        prop::collection::vec(good(), 0..12),
        prop::collection::vec(junk(), 0..40),
        any::<prop::sample::Index>(),
        prop::collection::vec(0usize..600, 0..8),
    );
    fuzz(QUICK, case, |(goods, junks, cut, cuts)| {
        let mut lines: Vec<Piece> = Vec::new();
        let mut ends: Vec<Piece> = Vec::new();
        for (i, g) in goods.iter().enumerate() {
            let tid = 1000 + i as u64 * 10 + g.tid;
            if g.complete {
                let x = format!("@gapscope1 X {tid} {} {} {}", g.start, g.dur, g.name);
                lines.push(well_formed(x, g.run_on));
            } else {
                let b = format!("@gapscope1 B {tid} {} {}", g.start, g.name);
                lines.push(well_formed(b, g.run_on));
                let e = format!("@gapscope1 E {tid} {} {}", g.start + g.dur, g.name);
                ends.push(well_formed(e, g.run_on));
            }
        }
        // Junk lines interleave anywhere; ends come after every begin.
        let at = cut.index(junks.len() + 1);
        let mut all: Vec<Piece> = junks[..at].to_vec();
        all.extend(lines);
        all.extend(junks[at..].iter().cloned());
        all.extend(ends);
        let (spans, _, _) = parse_all(&stream(&all), &cuts);
        for (i, g) in goods.iter().enumerate() {
            let tid = 1000 + i as u64 * 10 + g.tid;
            assert!(
                spans.iter().any(|s| s.tid == tid
                    && *s.name == *g.name
                    && s.start_ns == g.start
                    && s.end_ns == g.start + g.dur
                    && !s.unmatched),
                "lost {g:?}"
            );
        }
    });
}

/// Properly nested B/E spans on three threads (same names inside each other
/// included), the threads' lines interleaved at random and junk in between: every
/// span comes back with its exact times.
#[test]
fn interleaved_nested_threads_lose_no_span() {
    let ops = prop::collection::vec((any::<bool>(), 0usize..3), 0..24);
    let case = (
        prop::collection::vec(ops, 3),
        prop::collection::vec((0usize..3, any::<bool>()), 0..80),
        prop::collection::vec(junk(), 0..10),
        prop::collection::vec(0usize..600, 0..8),
    );
    fuzz(QUICK, case, |(ops, order, junks, cuts)| {
        let names = ["a", "b", "a_b"];
        let mut per_thread: Vec<Vec<String>> = Vec::new();
        let mut expected: Vec<(u64, String, u64, u64)> = Vec::new();
        for (t, seq) in ops.iter().enumerate() {
            let tid = 7 + t as u64;
            let mut stack: Vec<(String, u64)> = Vec::new();
            let mut lines = Vec::new();
            let mut now = 100u64;
            for &(open, n) in seq {
                now += 3;
                if open || stack.is_empty() {
                    lines.push(format!("@gapscope1 B {tid} {now} {}", names[n]));
                    stack.push((names[n].to_string(), now));
                } else {
                    let (name, start) = stack.pop().unwrap();
                    lines.push(format!("@gapscope1 E {tid} {now} {name}"));
                    expected.push((tid, name, start, now));
                }
            }
            while let Some((name, start)) = stack.pop() {
                now += 3;
                lines.push(format!("@gapscope1 E {tid} {now} {name}"));
                expected.push((tid, name, start, now));
            }
            per_thread.push(lines);
        }
        // Interleave: take the next line of the thread `order` names, then the rest.
        let mut next = [0usize; 3];
        let mut all: Vec<Piece> = Vec::new();
        let mut junk_at = junks.iter();
        for &(t, run_on) in &order {
            if let Some(l) = per_thread[t].get(next[t]) {
                all.push(well_formed(l.clone(), run_on));
                next[t] += 1;
            }
            if let Some(j) = junk_at.next() {
                all.push(j.clone());
            }
        }
        for t in 0..3 {
            all.extend(
                per_thread[t][next[t]..]
                    .iter()
                    .map(|l| well_formed(l.clone(), false)),
            );
        }
        let (spans, counts, _) = parse_all(&stream(&all), &cuts);
        assert_eq!(counts.unmatched_begins, 0);
        for (tid, name, start, end) in &expected {
            assert!(
                spans.iter().any(|s| s.tid == *tid
                    && &*s.name == name
                    && s.start_ns == *start
                    && s.end_ns == *end),
                "lost {tid} {name} {start}..{end}"
            );
        }
    });
}

/// `[workload.log_spans]` as a user may write it: durations in each unit (one of any
/// printed number), begin/end pairs, parents, times from `ts` groups in the default
/// formats and in a `ts_format`, in UTC and at an offset.
fn log_rules() -> Arc<LogPatterns> {
    let rule =
        |duration: Option<&str>, pair: Option<(&str, &str)>, parent: Option<&str>| LogSpanRule {
            duration: duration.map(str::to_string),
            begin: pair.map(|p| p.0.to_string()),
            end: pair.map(|p| p.1.to_string()),
            parent: parent.map(str::to_string),
            ..LogSpanRule::default()
        };
    let mut r = BTreeMap::new();
    r.insert(
        "gpu_prove".to_string(),
        rule(Some(r"GPU prove complete gpu_ms=(?P<ms>\d+)"), None, None),
    );
    r.insert(
        "kernels".to_string(),
        rule(
            Some(r"GPU prove time: (?P<s>[0-9.]+)s"),
            None,
            Some("gpu_prove"),
        ),
    );
    let step = (
        r"^(?P<ts>\S+ \S+) step (?P<n>\d+) begin",
        r"^(?P<ts>\S+ \S+) step (?P<n>\d+) end",
    );
    r.insert(
        "step".to_string(),
        LogSpanRule {
            tz: Some("UTC".into()),
            ..rule(None, Some(step), None)
        },
    );
    let load = (r"load start (?P<what>\w+)", r"load done (?P<bytes>\S+)");
    r.insert("load".to_string(), rule(None, Some(load), Some("step")));
    r.insert(
        "batch".to_string(),
        LogSpanRule {
            tz: Some("+02:00".into()),
            ..rule(
                Some(r"^\[(?P<ts>[^\]]*)\] batch took (?P<us>\S+)us"),
                None,
                Some("step"),
            )
        },
    );
    r.insert(
        "io".to_string(),
        LogSpanRule {
            ts_format: Some("%d/%m/%Y %H:%M:%S%.f".into()),
            tz: Some("UTC".into()),
            ..rule(Some(r"^(?P<ts>\S+ \S+) io (?P<ns>\S+)ns"), None, None)
        },
    );
    Arc::new(LogPatterns::new(&r).expect("a valid [workload.log_spans]"))
}

/// A printed number: whole, decimal, huge, in exponent form, negative, not a number.
fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "0",
            "1",
            "35961",
            "25.786289234",
            "18446744073709551615",
            "99999999999999999999999",
            "1e300",
            "0e300",
            "1e-300",
            "-1",
            "NaN",
            "inf",
            ".",
            "5.",
            "0.000000001",
        ])
        .prop_map(str::to_string),
        "[0-9]{1,25}",
        "[0-9]{1,5}\\.[0-9]{0,12}",
    ]
}

/// A printed time: in every default format, out of range, impossible, or anything.
fn stamp() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "2024-03-14 01:08:11.57",
            "1970-01-01 00:00:00",
            "9999-12-31 23:59:59.999999999",
            "0000-01-01 00:00:00",
            "2024-02-30 25:61:61",
            "2262-04-12 00:00:00",
            "1710374400.123",
            "999999999999.9",
            "0",
            "01:08:47.53",
            "20240314 01:08:47.530000",
            "0314 01:08:47.53",
            "14/03/2024 01:08:11.5",
            "2024-03-14T01:08:11+14:00",
            "2024-03-14 01:08:11,570",
        ])
        .prop_map(str::to_string),
        "[0-9:./ T,+-]{0,24}",
    ]
}

/// A line of a program's output: one that matches an entry (with any numbers and
/// times in it), or anything.
fn log_line() -> impl Strategy<Value = Raw> {
    let matching = (0usize..8, number(), stamp(), "[a-z]{0,4}").prop_map(|(k, n, ts, w)| match k {
        0 => format!("GPU prove complete gpu_ms={n}"),
        1 => format!("GPU prove time: {n}s"),
        2 => format!("{ts} step {n} begin"),
        3 => format!("{ts} step {n} end"),
        4 => format!("load start {w}"),
        5 => format!("load done {n}"),
        6 => format!("[{ts}] batch took {n}us"),
        _ => format!("{ts} io {n}ns"),
    });
    prop_oneof![
        4 => matching.prop_map(|l| Raw(l.into_bytes())),
        1 => "[ -~]{0,60}".prop_map(|l| Raw(l.into_bytes())),
        1 => raw(80),
    ]
}

/// Wall clock minus span clock: the span clock's zero is 2024-03-14 00:00:00 UTC.
const WALL_OFFSET_NS: i128 = 1_710_374_400_000_000_000;
/// The rep's window on the span clock: a minute from 01:08:00.
const REP_START_NS: u64 = 4_080_000_000_000;
const REP_NS: u64 = 60_000_000_000;

#[test]
fn log_lines_give_spans_inside_the_rep_or_counted_problems() {
    let patterns = log_rules();
    // Lines as the entries expect them give their spans, nested.
    let mut m = LogMatcher::new(patterns.clone(), 1, WALL_OFFSET_NS);
    for (i, l) in [
        "2024-03-14 01:08:01.5 step 1 begin",
        "load start weights",
        "load done 4096",
        "[2024-03-14 03:08:02.25] batch took 1500.5us",
        "GPU prove time: 2.5s",
        "GPU prove complete gpu_ms=3000",
        "14/03/2024 01:08:09.5 io 1000ns",
        "2024-03-14 01:08:10 step 1 end",
    ]
    .iter()
    .enumerate()
    {
        m.feed(
            l.as_bytes(),
            REP_START_NS + 1_000_000_000 + i as u64 * 1_000_000_000,
        );
    }
    let out = m.finish(REP_START_NS, REP_START_NS + REP_NS);
    let mut names: Vec<&str> = out.spans.iter().map(|s| &*s.name).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        ["batch", "gpu_prove", "io", "kernels", "load", "step"],
        "{:?} {:?}",
        out.samples,
        out.spans
    );
    let lines = prop::collection::vec((log_line(), 0u64..2 * REP_NS), 0..40);
    let cap = prop::option::of(0usize..8);
    fuzz(QUICK, (lines, cap), move |(mut lines, cap)| {
        lines.sort_by_key(|l| l.1);
        let mut m = LogMatcher::new(patterns.clone(), 1, WALL_OFFSET_NS);
        if let Some(cap) = cap {
            m = m.with_budget(Arc::new(gapscope::protocol::budget::SpanBudget::new(cap)));
        }
        for (line, at) in &lines {
            m.feed(&line.0, REP_START_NS + at);
        }
        let end = REP_START_NS + REP_NS;
        let out = m.finish(REP_START_NS, end);
        for s in &out.spans {
            assert!(
                REP_START_NS <= s.start_ns && s.start_ns <= s.end_ns && s.end_ns <= end,
                "a span outside the rep's window {REP_START_NS}..{end}: {s:?}"
            );
        }
    });
}

/// A number in a dump's header: small, any, past u64, negative or not a number.
fn dump_number() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => (0u64..5).prop_map(|n| n.to_string()),
        1 => any::<u64>().prop_map(|n| n.to_string()),
        1 => prop::sample::select(vec!["18446744073709551615", "18446744073709551616", "-1", "x", ""])
            .prop_map(str::to_string),
    ]
}

/// A callgrind dump's header: its part, thread, trigger (a span boundary's label, or
/// anything), events and totals (or summary).
#[derive(Debug, Clone)]
struct DumpHead {
    part: String,
    thread: String,
    trigger: String,
    events: &'static str,
    totals: (bool, Vec<String>),
}

fn dump_head() -> impl Strategy<Value = DumpHead> {
    let label = prop_oneof![
        3 => (prop_oneof![0u64..4, any::<u64>()], prop::sample::select(vec!["s", "e", "x"]))
            .prop_map(|(id, edge)| format!("Client Request: gapscope-span {id:020} {edge}")),
        1 => "[ -~]{0,30}",
    ];
    let events = prop::sample::select(vec!["Ir Bc Bcm Bi Bim", "Ir", "Bc Bi Ir", "", "Ir Ir"]);
    (
        dump_number(),
        dump_number(),
        label,
        events,
        (any::<bool>(), prop::collection::vec(dump_number(), 0..6)),
    )
        .prop_map(|(part, thread, trigger, events, totals)| DumpHead {
            part,
            thread,
            trigger,
            events,
            totals,
        })
}

impl DumpHead {
    fn text(&self) -> String {
        let totals = self.totals.1.join(" ");
        let (first, last) = if self.totals.0 {
            (format!("summary: {totals}"), String::new())
        } else {
            (String::new(), format!("totals: {totals}"))
        };
        format!(
            "# callgrind format\nversion: 1\ncreator: callgrind-3.19.0\npid: 7\ncmd: x\n\
             part: {}\n\ndesc: I1 cache: \ndesc: Trigger: {}\n\npositions: line\n\
             events: {}\n{first}\n\nfn=(1) main\n0 1 0 0 0\n\n{last}\nthread: {}\n",
            self.part, self.trigger, self.events, self.thread
        )
    }
}

/// The process whose dumps the case writes.
const DUMP_PID: u32 = 4242;

#[test]
fn callgrind_dumps_give_span_counts_or_clean_errors() {
    let edits = prop_oneof![
        4 => Just(Bytes::Edited(Vec::new())),
        1 => bytes(512),
    ];
    // Dumps as callgrind writes them give a span's count.
    let head = |part: &str, edge: &str, ir: &str| DumpHead {
        part: part.into(),
        thread: "1".into(),
        trigger: format!("Client Request: gapscope-span {:020} {edge}", 5),
        events: "Ir Bc Bcm Bi Bim",
        totals: (false, vec![ir.into(), "1".into()]),
    };
    let valid: Vec<emulated::Dump> = [head("1", "s", "10"), head("2", "e", "32")]
        .iter()
        .map(|h| emulated::parse_dump(&h.text()).unwrap())
        .collect();
    assert_eq!(emulated::span_counts(&valid).unwrap()[&5].instructions, 32);
    let dumps = prop::collection::vec((dump_head(), edits), 0..12);
    fuzz(QUICK, dumps, |dumps| {
        let tmp = tempfile::tempdir().unwrap();
        let mut parsed = Vec::new();
        for (i, (head, b)) in dumps.iter().enumerate() {
            let bytes = b.of(head.text().as_bytes());
            let name = format!("callgrind.out.{DUMP_PID}.{i}-1");
            std::fs::write(tmp.path().join(name), &bytes).unwrap();
            parsed.extend(emulated::parse_dump(&String::from_utf8_lossy(&bytes)));
        }
        let _ = emulated::span_counts(&parsed);
        if let Ok(read) = gapscope::experiment::emulation::read_dumps(tmp.path(), DUMP_PID) {
            let _ = emulated::span_counts(&read);
        }
    });
}
