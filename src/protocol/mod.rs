//! The span line protocol: how a program gapscope did not build reports its spans.
//!
//! A protocol line starts with [`PREFIX`]; every other line is the program's own output
//! and is ignored (not counted as garbage). Fields are separated by spaces:
//!
//! ```text
//! @gapscope1 B <tid> <t_ns> <name> [key=value …]            begin
//! @gapscope1 E <tid> <t_ns> <name> [key=value …]            end (of <name>, on <tid>)
//! @gapscope1 X <tid> <start_ns> <duration_ns> <name> [key=value …]   complete span
//! @gapscope1 A <tid> key=value [key=value …]                attributes of <tid>'s innermost open span
//! @gapscope1 G <kind> <device> <stream> <correlation_id> <start_ns> <end_ns> <grid> <block> <bytes> <name…>
//!                                                            an interval of GPU work
//! @gapscope1 S <source> <state> [<text…>]                    a collector's status
//! @gapscope1 T <tid> <pid> [<name…>]                         a thread of process <pid>, named <name>
//! ```
//!
//! - `<tid>` is the emitting thread's id (`gettid()`); spans nest per thread, so threads
//!   may interleave their lines freely.
//! - Times are CLOCK_MONOTONIC nanoseconds, the clock of gapscope's own spans.
//! - `<name>` is 1 to [`MAX_NAME`] bytes of UTF-8 without spaces; `key` is 1 to 64 of
//!   `A-Z a-z 0-9 _ .`; a value is the rest of its word (no spaces): an integer, a
//!   decimal number, or else a string.
//! - An `E` closes the innermost open span of that name on that thread. An `E` with no
//!   such span is dropped and counted (`unmatched_ends`); a `B` never ended is closed
//!   at the end of the rep and counted (`unmatched_begins`).
//! - A prefixed line that does not parse (a wrong field, non-UTF-8 bytes, or longer than
//!   [`MAX_LINE`] bytes) is counted (`unparseable`) and skipped; it is never fatal.
//!
//! - `G`: a kernel, copy or memset (`<kind>` = `kernel` | `memcpy` | `memset`) on the
//!   span clock, as gapscope's CUPTI injection library writes them; `<grid>` and
//!   `<block>` are `XxYxZ` or `-`, `<bytes>` a number or `-`, and `<name>` (1 to
//!   [`MAX_GPU_NAME`] bytes) is the rest of the line, spaces included. `S`: what such a
//!   collector says of itself (`S cupti started …`, `S cupti unavailable <why>`); the
//!   text is the rest of the line. Neither is a span; both count as protocol lines, and a
//!   malformed one is unparseable like any other.
//! - `T`: names a thread (the rest of the line, spaces included, up to [`MAX_NAME`]
//!   bytes; none for a thread without a name) and says which process it belongs to, so
//!   that its spans show `tokio-runtime-worker` rather than a thread id, also when the
//!   thread was gone before its lines were read. The `tracing` layer writes one per
//!   thread; the last one read for a thread id wins.
//!
//! The parser holds at most one line ([`MAX_LINE`] bytes) plus the spans it returns;
//! with a [`budget::SpanBudget`] it keeps no more spans than the budget's cap (begins
//! still open included), counting the rest. Past the cap, an `E` or `A` with no open
//! span is taken as one of a begin that was not kept, and is not counted as a problem.

pub mod budget;
pub mod reader;

use std::collections::HashMap;

use crate::trace::AttrValue;

/// The start of every protocol line (version 1).
pub const PREFIX: &[u8] = b"@gapscope1 ";
/// Longest protocol line, in bytes (newline excluded); longer ones are unparseable.
pub const MAX_LINE: usize = 4096;
/// Longest span name, in bytes.
pub const MAX_NAME: usize = 128;
/// Longest attribute key, in bytes.
pub const MAX_KEY: usize = 64;
/// Longest name of a `G` line, in bytes.
pub const MAX_GPU_NAME: usize = 1024;
/// Unparseable lines kept (shortened) as examples for the user.
const SAMPLES: usize = 3;

/// A span as the program reported it, on its CLOCK_MONOTONIC.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedSpan {
    /// Shared by the spans of one name a parser made (a program sends a million spans
    /// under a few names: one text each, not a million).
    pub name: std::sync::Arc<str>,
    pub tid: u64,
    pub start_ns: u64,
    pub end_ns: u64,
    pub attrs: Vec<(String, AttrValue)>,
    /// Order of the line that opened it (its `B`, or its `X`) within its stream.
    pub seq: u64,
    /// A `B` never ended, closed at the end of the rep.
    pub unmatched: bool,
    /// The capture path it came through (the row's `via` attribute), once known: a
    /// static word rather than an attribute of its own, which would cost each of a
    /// million spans two allocations.
    pub via: Option<&'static str>,
}

/// What a stream of lines held besides spans.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LineCounts {
    /// Protocol lines that became (part of) a span.
    pub protocol_lines: u64,
    /// Prefixed lines that did not parse (too long and non-UTF-8 included).
    pub unparseable: u64,
    /// Begins never ended (closed at the rep's end).
    pub unmatched_begins: u64,
    /// Ends with no open begin of that name on that thread (dropped).
    pub unmatched_ends: u64,
    /// Spans whose times lie outside the rep (not CLOCK_MONOTONIC?): dropped.
    #[serde(default)]
    pub outside_rep: u64,
    /// `G` lines (intervals of GPU work) read; they are not spans.
    #[serde(default)]
    pub gpu_records: u64,
    /// Spans whose `gs.id` / `gs.parent` could not be followed: an id sent twice, a span
    /// naming itself as parent, a parent that would close a loop. They nest by time.
    #[serde(default)]
    pub refused_ids: u64,
}

impl LineCounts {
    pub fn add(&mut self, o: &LineCounts) {
        self.protocol_lines += o.protocol_lines;
        self.unparseable += o.unparseable;
        self.unmatched_begins += o.unmatched_begins;
        self.unmatched_ends += o.unmatched_ends;
        self.outside_rep += o.outside_rep;
        self.gpu_records += o.gpu_records;
        self.refused_ids += o.refused_ids;
    }

    /// Whether anything went wrong.
    pub fn any_problem(&self) -> bool {
        self.unparseable
            + self.unmatched_begins
            + self.unmatched_ends
            + self.outside_rep
            + self.refused_ids
            > 0
    }
}

/// An interval of GPU work from a `G` line, on the program's CLOCK_MONOTONIC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedActivity {
    /// `kernel`, `memcpy` or `memset`.
    pub kind: String,
    pub device: u32,
    pub stream: u32,
    pub correlation_id: u32,
    pub start_ns: u64,
    pub end_ns: u64,
    pub grid: Option<[u32; 3]>,
    pub block: Option<[u32; 3]>,
    pub bytes: Option<u64>,
    pub name: String,
}

/// What a collector in the program said of itself (an `S` line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedStatus {
    /// Who: `cupti` for gapscope's injection library.
    pub source: String,
    /// `started`, `unavailable`, `flushed`, … (one word).
    pub state: String,
    pub text: String,
}

/// The `G` and `S` lines of one stream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GpuLines {
    pub activity: Vec<ParsedActivity>,
    pub status: Vec<ParsedStatus>,
}

impl GpuLines {
    pub fn extend(&mut self, o: GpuLines) {
        self.activity.extend(o.activity);
        self.status.extend(o.status);
    }
}

struct Open {
    name: std::sync::Arc<str>,
    start_ns: u64,
    attrs: Vec<(String, AttrValue)>,
    seq: u64,
}

/// Parses one stream of lines (each stream keeps its own begin/end matching).
#[derive(Default)]
pub struct Parser {
    open: HashMap<u64, Vec<Open>>,
    spans: Vec<ParsedSpan>,
    counts: LineCounts,
    seq: u64,
    samples: Vec<String>,
    gpu: GpuLines,
    threads: ThreadNames,
    budget: Option<std::sync::Arc<budget::SpanBudget>>,
    /// The span names met so far, each text once (up to [`MAX_SHARED_NAMES`]).
    names: std::collections::HashSet<std::sync::Arc<str>>,
}

/// Distinct span names a parser shares between its spans; past it (a program naming
/// every span apart) each span keeps a text of its own.
const MAX_SHARED_NAMES: usize = 65_536;

/// Thread names from `T` lines: thread id → name.
pub type ThreadNames = std::collections::BTreeMap<u64, String>;

/// A parsed line.
#[derive(Debug, PartialEq)]
enum Line<'a> {
    Begin(u64, u64, &'a str, Vec<(String, AttrValue)>),
    End(u64, u64, &'a str, Vec<(String, AttrValue)>),
    Complete(u64, u64, u64, &'a str, Vec<(String, AttrValue)>),
    Attrs(u64, Vec<(String, AttrValue)>),
    Gpu(ParsedActivity),
    Status(ParsedStatus),
    Thread(u64, Option<&'a str>),
}

impl Parser {
    pub fn new() -> Self {
        Self::default()
    }

    /// `name`'s shared text ([`ParsedSpan::name`]).
    fn name(&mut self, name: &str) -> std::sync::Arc<str> {
        if let Some(n) = self.names.get(name) {
            return n.clone();
        }
        let n: std::sync::Arc<str> = name.into();
        if self.names.len() < MAX_SHARED_NAMES {
            self.names.insert(n.clone());
        }
        n
    }

    /// A parser whose spans take their room from `budget` (shared with the parsers of
    /// the rep's other streams).
    pub fn with_budget(budget: std::sync::Arc<budget::SpanBudget>) -> Self {
        Parser {
            budget: Some(budget),
            ..Self::default()
        }
    }

    /// Room for one more span: always without a budget.
    fn take(&self) -> bool {
        self.budget.as_ref().is_none_or(|b| b.take())
    }

    /// Whether the budget's cap was reached (spans were dropped).
    fn over_cap(&self) -> bool {
        self.budget.as_ref().is_some_and(|b| b.exhausted())
    }

    /// Feeds one line (without its newline). Returns whether it held a protocol line
    /// (well-formed or not); other lines are the program's own output.
    ///
    /// Threads that write a line and its newline in two writes (Python's `print` does)
    /// can run two lines together (`@gapscope1 X …a@gapscope1 X …b`), or put one after
    /// output of their own; so every occurrence of [`PREFIX`] starts a protocol line,
    /// ended by the next one or by the newline.
    pub fn feed(&mut self, line: &[u8]) -> bool {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let mut starts = line
            .windows(PREFIX.len())
            .enumerate()
            .filter(|(_, w)| *w == PREFIX)
            .map(|(i, _)| i)
            .peekable();
        let mut any = false;
        while let Some(at) = starts.next() {
            let end = starts.peek().copied().unwrap_or(line.len());
            self.feed_one(&line[at..end]);
            any = true;
        }
        any
    }

    /// One protocol line, [`PREFIX`] first.
    fn feed_one(&mut self, line: &[u8]) {
        let rest = &line[PREFIX.len()..];
        self.seq += 1;
        match std::str::from_utf8(rest)
            .map_err(|_| "not UTF-8".to_string())
            .and_then(parse_fields)
        {
            Ok(l) => self.apply(l),
            Err(why) => self.unparseable(line, &why),
        }
    }

    /// A line longer than [`MAX_LINE`] was cut short; `head` is its beginning.
    pub fn feed_overlong(&mut self, head: &[u8]) -> bool {
        if !head.starts_with(PREFIX) {
            return false;
        }
        self.seq += 1;
        self.unparseable(head, &format!("longer than {MAX_LINE} bytes"));
        true
    }

    fn unparseable(&mut self, line: &[u8], why: &str) {
        self.counts.unparseable += 1;
        if self.samples.len() < SAMPLES {
            let text = String::from_utf8_lossy(&line[..line.len().min(80)]);
            self.samples.push(format!("{why}: {text:?}"));
        }
    }

    fn apply(&mut self, l: Line) {
        // One arm per kind of protocol line, each short: one match keeps the counting of
        // every kind of line in one place.
        let seq = self.seq;
        match l {
            Line::Begin(tid, t, name, attrs) => {
                self.counts.protocol_lines += 1;
                if !self.take() {
                    return;
                }
                let name = self.name(name);
                self.open.entry(tid).or_default().push(Open {
                    name,
                    start_ns: t,
                    attrs,
                    seq,
                });
            }
            Line::End(tid, t, name, attrs) => {
                let stack = self.open.entry(tid).or_default();
                let Some(i) = stack.iter().rposition(|o| *o.name == *name) else {
                    if self.over_cap() {
                        // Most likely the end of a begin past the cap, not kept.
                        self.counts.protocol_lines += 1;
                    } else {
                        self.counts.unmatched_ends += 1;
                    }
                    return;
                };
                if t < stack[i].start_ns {
                    self.unparseable_end(tid, t, name);
                    return;
                }
                let mut o = stack.remove(i);
                o.attrs.extend(attrs);
                self.counts.protocol_lines += 1;
                self.spans.push(ParsedSpan {
                    name: o.name,
                    tid,
                    start_ns: o.start_ns,
                    end_ns: t,
                    attrs: o.attrs,
                    seq: o.seq,
                    unmatched: false,
                    via: None,
                });
            }
            Line::Complete(tid, start, dur, name, attrs) => {
                let Some(end) = start.checked_add(dur) else {
                    self.unparseable(b"", "start + duration overflows");
                    return;
                };
                self.counts.protocol_lines += 1;
                if !self.take() {
                    return;
                }
                let name = self.name(name);
                self.spans.push(ParsedSpan {
                    name,
                    tid,
                    start_ns: start,
                    end_ns: end,
                    attrs,
                    seq,
                    unmatched: false,
                    via: None,
                });
            }
            Line::Gpu(a) => {
                self.counts.protocol_lines += 1;
                self.counts.gpu_records += 1;
                self.gpu.activity.push(a);
            }
            Line::Status(st) => {
                self.counts.protocol_lines += 1;
                self.gpu.status.push(st);
            }
            Line::Thread(tid, name) => {
                self.counts.protocol_lines += 1;
                if let Some(n) = name {
                    self.threads.insert(tid, n.to_string());
                }
            }
            Line::Attrs(tid, attrs) => {
                let over_cap = self.over_cap();
                self.attrs(tid, attrs, over_cap)
            }
        }
    }

    fn attrs(&mut self, tid: u64, attrs: Vec<(String, AttrValue)>, over_cap: bool) {
        match self.open.get_mut(&tid).and_then(|s| s.last_mut()) {
            Some(o) => {
                self.counts.protocol_lines += 1;
                o.attrs.extend(attrs);
            }
            None if over_cap => self.counts.protocol_lines += 1,
            None => self.unparseable(b"", &format!("A with no open span on thread {tid}")),
        }
    }

    fn unparseable_end(&mut self, tid: u64, t: u64, name: &str) {
        self.unparseable(
            format!("E {tid} {t} {name}").as_bytes(),
            "end earlier than its begin",
        );
    }

    /// The thread names read so far (taken: a second call returns only later ones).
    pub fn take_threads(&mut self) -> ThreadNames {
        std::mem::take(&mut self.threads)
    }

    /// The `G` and `S` lines read so far (taken: a second call returns only later ones).
    pub fn take_gpu(&mut self) -> GpuLines {
        std::mem::take(&mut self.gpu)
    }

    /// Closes every begin still open at `end_ns` (counted as unmatched) and returns the
    /// spans, the counts and a few unparseable lines as examples.
    pub fn finish(mut self, end_ns: u64) -> (Vec<ParsedSpan>, LineCounts, Vec<String>) {
        let mut open: Vec<(u64, Open)> = self
            .open
            .drain()
            .flat_map(|(tid, s)| s.into_iter().map(move |o| (tid, o)))
            .collect();
        open.sort_by_key(|(_, o)| o.seq);
        for (tid, o) in open {
            self.counts.unmatched_begins += 1;
            self.spans.push(ParsedSpan {
                name: o.name,
                tid,
                start_ns: o.start_ns,
                end_ns: end_ns.max(o.start_ns),
                attrs: o.attrs,
                seq: o.seq,
                unmatched: true,
                via: None,
            });
        }
        (self.spans, self.counts, self.samples)
    }
}

fn parse_fields(rest: &str) -> Result<Line<'_>, String> {
    match rest.split_once(' ') {
        Some(("G", fields)) => return parse_gpu(fields).map(Line::Gpu),
        Some(("S", fields)) => return parse_status(fields).map(Line::Status),
        Some(("T", fields)) => return parse_thread(fields),
        _ if rest == "G" || rest == "S" || rest == "T" => {
            return Err(format!("{rest} with no fields"))
        }
        _ => {}
    }
    let mut it = rest.split(' ').filter(|w| !w.is_empty());
    let kind = it.next().ok_or("no record kind")?;
    let tid = num(it.next(), "thread id")?;
    let line = match kind {
        "B" | "E" => {
            let t = num(it.next(), "time")?;
            let name = name(it.next())?;
            let attrs = attrs(it)?;
            if kind == "B" {
                Line::Begin(tid, t, name, attrs)
            } else {
                Line::End(tid, t, name, attrs)
            }
        }
        "X" => {
            let start = num(it.next(), "start")?;
            let dur = num(it.next(), "duration")?;
            let name = name(it.next())?;
            Line::Complete(tid, start, dur, name, attrs(it)?)
        }
        "A" => {
            let a = attrs(it)?;
            if a.is_empty() {
                return Err("A without key=value".into());
            }
            Line::Attrs(tid, a)
        }
        k => {
            return Err(format!(
                "unknown record kind {k:?} (use B, E, X, A, G, S or T)"
            ))
        }
    };
    Ok(line)
}

/// Splits off the next space-separated word of `s`: (word, rest after its space).
fn word(s: &str) -> (&str, &str) {
    let s = s.trim_start_matches(' ');
    s.split_once(' ').unwrap_or((s, ""))
}

/// The fields of a `G` line after its kind letter.
fn parse_gpu(fields: &str) -> Result<ParsedActivity, String> {
    let mut rest = fields;
    let mut next = || {
        let (w, r) = word(rest);
        rest = r;
        (!w.is_empty()).then_some(w)
    };
    let kind = next().ok_or("G: missing kind")?;
    if !matches!(kind, "kernel" | "memcpy" | "memset") {
        return Err(format!("G: kind {kind:?} is not kernel, memcpy or memset"));
    }
    let small = |w: Option<&str>, what: &str| -> Result<u32, String> {
        u32::try_from(num(w, what)?).map_err(|_| format!("G: {what} is too large"))
    };
    let device = small(next(), "device")?;
    let stream = small(next(), "stream")?;
    let correlation_id = small(next(), "correlation id")?;
    let start_ns = num(next(), "start")?;
    let end_ns = num(next(), "end")?;
    if end_ns < start_ns {
        return Err("G: end earlier than start".into());
    }
    let grid = dims(next(), "grid")?;
    let block = dims(next(), "block")?;
    let bytes = match next() {
        Some("-") => None,
        w => Some(num(w, "bytes")?),
    };
    let name = rest.trim_start_matches(' ');
    if name.is_empty() {
        return Err("G: missing name".into());
    }
    if name.len() > MAX_GPU_NAME {
        return Err(format!("G: name longer than {MAX_GPU_NAME} bytes"));
    }
    if name.chars().any(char::is_control) {
        return Err("G: name contains control characters".into());
    }
    Ok(ParsedActivity {
        kind: kind.to_string(),
        device,
        stream,
        correlation_id,
        start_ns,
        end_ns,
        grid,
        block,
        bytes,
        name: name.to_string(),
    })
}

/// The fields of a `T` line after its kind letter: `<tid> <pid> [<name…>]`.
fn parse_thread(fields: &str) -> Result<Line<'_>, String> {
    let (tid, rest) = word(fields);
    let (pid, rest) = word(rest);
    let tid = num(Some(tid), "T: thread id")?;
    num(Some(pid), "T: process id")?;
    let name = rest.trim();
    if name.len() > MAX_NAME {
        return Err(format!("T: name longer than {MAX_NAME} bytes"));
    }
    if name.chars().any(char::is_control) {
        return Err("T: name contains control characters".into());
    }
    Ok(Line::Thread(tid, (!name.is_empty()).then_some(name)))
}

/// The process id of a `T` line (`@gapscope1 T <tid> <pid> …`), for telling the
/// program's threads from others'.
pub fn thread_line_pid(line: &[u8]) -> Option<(u64, u32)> {
    let rest = line.strip_prefix(PREFIX)?.strip_prefix(b"T ")?;
    let text = std::str::from_utf8(rest).ok()?;
    let (tid, rest) = word(text);
    let (pid, _) = word(rest);
    Some((tid.parse().ok()?, pid.parse().ok()?))
}

/// `XxYxZ`, or `-` for none.
fn dims(w: Option<&str>, what: &str) -> Result<Option<[u32; 3]>, String> {
    let w = w.ok_or_else(|| format!("G: missing {what}"))?;
    if w == "-" {
        return Ok(None);
    }
    let parts: Vec<&str> = w.split('x').collect();
    let bad = || format!("G: {what} {w:?} is not XxYxZ or -");
    if parts.len() != 3 {
        return Err(bad());
    }
    let mut out = [0u32; 3];
    for (o, p) in out.iter_mut().zip(parts) {
        if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        *o = p.parse().map_err(|_| bad())?;
    }
    Ok(Some(out))
}

/// The fields of an `S` line after its kind letter.
fn parse_status(fields: &str) -> Result<ParsedStatus, String> {
    let (source, rest) = word(fields);
    let (state, text) = word(rest);
    if source.is_empty() || state.is_empty() {
        return Err("S: give a source and a state (S cupti started …)".into());
    }
    let ok = |w: &str| {
        w.len() <= MAX_KEY
            && w.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'-')
    };
    if !ok(source) || !ok(state) {
        return Err(format!(
            "S: source {source:?} and state {state:?}: use 1 to {MAX_KEY} of A-Z a-z 0-9 _ . -"
        ));
    }
    if text.chars().any(char::is_control) {
        return Err("S: text contains control characters".into());
    }
    Ok(ParsedStatus {
        source: source.to_string(),
        state: state.to_string(),
        text: text.trim().to_string(),
    })
}

fn num(w: Option<&str>, what: &str) -> Result<u64, String> {
    let w = w.ok_or_else(|| format!("missing {what}"))?;
    if w.is_empty() || !w.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{what} {w:?} is not a whole number"));
    }
    w.parse().map_err(|_| format!("{what} {w:?} is too large"))
}

fn name(w: Option<&str>) -> Result<&str, String> {
    let w = w.ok_or("missing name")?;
    if w.len() > MAX_NAME {
        return Err(format!("name longer than {MAX_NAME} bytes"));
    }
    if w.contains('=') {
        return Err(format!(
            "name {w:?} contains '=' (a name comes before the attributes)"
        ));
    }
    if w.chars().any(char::is_control) {
        return Err("name contains control characters".into());
    }
    Ok(w)
}

fn attrs<'a>(it: impl Iterator<Item = &'a str>) -> Result<Vec<(String, AttrValue)>, String> {
    it.map(|w| {
        let (k, v) = w
            .split_once('=')
            .ok_or_else(|| format!("attribute {w:?} is not key=value"))?;
        let key_ok = !k.is_empty()
            && k.len() <= MAX_KEY
            && k.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.');
        if !key_ok {
            return Err(format!(
                "attribute key {k:?}: use 1 to {MAX_KEY} of A-Z a-z 0-9 _ ."
            ));
        }
        Ok((k.to_string(), value(v)))
    })
    .collect()
}

/// An attribute value: an integer, a finite decimal number, or else the text itself.
pub fn value(v: &str) -> AttrValue {
    if let Ok(u) = v.parse::<u64>() {
        return AttrValue::U64(u);
    }
    if let Ok(i) = v.parse::<i64>() {
        return AttrValue::I64(i);
    }
    match v.parse::<f64>() {
        Ok(f) if f.is_finite() && v.bytes().any(|b| b.is_ascii_digit()) => AttrValue::F64(f),
        _ => AttrValue::Str(v.to_string()),
    }
}

#[cfg(test)]
mod tests;
