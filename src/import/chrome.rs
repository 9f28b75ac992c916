//! Chrome trace event JSON (the format of `chrome://tracing`, PyTorch's profiler
//! (Kineto), `tracing-chrome` and Perfetto's JSON export), one event at a time: complete
//! events (`X`), begin/end pairs (`B`/`E`) per thread, async begin/end (`b`/`e`, and
//! the legacy `S`/`F`) on a track of their own per id, thread and process names (`M`).
//! Instants, flows and counters are counted, not imported: Kineto's `ac2g` flows link a
//! launch to its kernel, and both carry the same `correlation` argument, which is what
//! [`super::reps`] follows. Kineto's GPU events (`cat` kernel, gpu_memcpy, gpu_memset)
//! become GPU intervals on their device and stream.
//!
//! Times are `ts`/`dur` in microseconds (fractions allowed), kept in ns on the file's
//! own clock. An event the format forbids (a negative duration, an `E` with no open `B`)
//! is left out with a warning that names it; a `B` never closed is closed at the last
//! time the file reached, marked `unclosed`.

use std::collections::HashMap;
use std::fmt;

use serde::de::{self, Visitor};
use serde::Deserialize;

use super::chrome_args::{Args, Text};
use super::model::{GpuKind, GpuRecord, Interner, Span, Trace};

/// A pid, tid or async id: a number or a string, as producers write them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Id {
    Num(i64),
    Str(String),
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Id::Num(n) => write!(f, "{n}"),
            Id::Str(s) => f.write_str(s),
        }
    }
}

impl Id {
    fn num(&self) -> Option<i64> {
        match self {
            Id::Num(n) => Some(*n),
            Id::Str(s) => s.parse().ok(),
        }
    }
}

impl<'de> Deserialize<'de> for Id {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Id, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Id;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a number or a string")
            }
            fn visit_i64<E>(self, v: i64) -> Result<Id, E> {
                Ok(Id::Num(v))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Id, E> {
                Ok(i64::try_from(v)
                    .map(Id::Num)
                    .unwrap_or(Id::Str(v.to_string())))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Id, E> {
                Ok(Id::Str(v.to_string()))
            }
            fn visit_str<E>(self, v: &str) -> Result<Id, E> {
                Ok(Id::Str(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

/// One trace event, with the fields gapscope reads (others are skipped unread); its
/// strings borrow from the event's text where they hold no escapes.
#[derive(Debug, Default, Deserialize)]
pub struct Event<'a> {
    #[serde(default, borrow)]
    pub(super) name: Option<Text<'a>>,
    #[serde(default, borrow)]
    pub(super) cat: Option<Text<'a>>,
    #[serde(default, borrow)]
    pub(super) ph: Option<Text<'a>>,
    #[serde(default)]
    pub(super) ts: Option<f64>,
    #[serde(default)]
    pub(super) dur: Option<f64>,
    #[serde(default)]
    pub(super) pid: Option<Id>,
    #[serde(default)]
    pub(super) tid: Option<Id>,
    #[serde(default)]
    pub(super) id: Option<Id>,
    #[serde(default)]
    pub(super) args: Option<Args>,
}

impl Event<'_> {
    /// The event as the parsing threads hand it on, owning what it holds, so that
    /// [`ChromeSink::add_parsed`] can take it on another thread: a complete span or
    /// GPU interval with usable times made whole here (on every core), its name one of
    /// `names` and its attributes' text appended to `block` (the names and texts of the
    /// events parsed with it); any other event as read. The buffer its arguments were
    /// written in goes back to `spare` where they are not needed later.
    pub fn parsed(
        mut self,
        names: &mut Interner,
        block: &mut String,
        spare: &mut String,
    ) -> Parsed {
        let times = complete_times(self.ts, self.dur).filter(|_| self.ph.as_deref() == Some("X"));
        let Some((start_ns, end_ns)) = times else {
            return Parsed::Other(Box::new(self.into_owned()));
        };
        let raw = self.name.as_deref().unwrap_or("");
        if let Some(kind) = self.cat.as_deref().and_then(gpu_kind) {
            let name = names.id(gpu_name(kind, raw));
            let args = self.args.take().unwrap_or_default();
            let times = (start_ns, end_ns);
            return Parsed::Gpu(GpuEvent::new(kind, name, args, &self.pid, &self.tid, times));
        }
        let name = names.id(raw);
        let at = block.len();
        let cat = self.cat.as_deref();
        let (wrote, correlation) = match self.args.as_mut() {
            Some(a) => {
                let wrote = a.write_attrs(cat, block);
                if spare.capacity() == 0 {
                    *spare = a.take_members();
                }
                (wrote, a.correlation)
            }
            None => (Args::default().write_attrs(cat, block), None),
        };
        Parsed::Span(SpanEvent {
            name,
            pid: self.pid,
            tid: self.tid,
            start_ns,
            end_ns,
            correlation: correlation.unwrap_or(0),
            attrs: wrote.then(|| (at as u32, (block.len() - at) as u32)),
        })
    }

    /// The event with its texts its own.
    fn into_owned(self) -> Event<'static> {
        let own = |t: Option<Text>| t.map(|t| Text(std::borrow::Cow::Owned(t.0.into_owned())));
        Event {
            name: own(self.name),
            cat: own(self.cat),
            ph: own(self.ph),
            ts: self.ts,
            dur: self.dur,
            pid: self.pid,
            tid: self.tid,
            id: self.id,
            args: self.args,
        }
    }
}

impl GpuEvent {
    /// A kernel, copy or memset of `kind` named `name`, on its event's `args.device` and
    /// `args.stream` (else its pid and tid), from `times.0` to `times.1` (ns).
    fn new(
        kind: GpuKind,
        name: u32,
        args: Args,
        pid: &Option<Id>,
        tid: &Option<Id>,
        times: (u64, u64),
    ) -> GpuEvent {
        let lane = |v: Option<u64>, id: &Option<Id>| {
            v.or_else(|| id.as_ref().and_then(Id::num).map(|n| n.max(0) as u64))
                .unwrap_or(0) as u32
        };
        GpuEvent {
            kind,
            name,
            device: lane(args.device, pid),
            stream: lane(args.stream, tid),
            correlation: args.correlation.unwrap_or(0),
            start_ns: times.0,
            end_ns: times.1,
            grid: args.grid,
            block: args.block,
            bytes: args.bytes,
        }
    }

    /// Its record in the trace, named by name `name` of the trace.
    fn record(self, name: u32) -> GpuRecord {
        GpuRecord {
            kind: self.kind,
            name,
            device: self.device,
            stream: self.stream,
            correlation: self.correlation,
            start_ns: self.start_ns,
            end_ns: self.end_ns,
            grid: self.grid,
            block: self.block,
            bytes: self.bytes,
        }
    }
}

/// The distinct names of a run of events parsed together, and the number each has in
/// the trace once one of its events is taken.
#[derive(Debug, Default)]
pub struct RunNames {
    names: Interner,
    ids: Vec<u32>,
}

impl RunNames {
    /// The names, none of them numbered in the trace yet.
    pub fn new(names: Interner) -> RunNames {
        RunNames {
            ids: vec![u32::MAX; names.len()],
            names,
        }
    }
}

/// An event as the parsing threads hand it on ([`Event::parsed`]).
#[derive(Debug)]
pub enum Parsed {
    Span(SpanEvent),
    Gpu(GpuEvent),
    Other(Box<Event<'static>>),
}

/// A complete span with usable times, made whole where it was parsed; its name is one
/// of its run of events' names, its attributes a text of theirs (start, length).
#[derive(Debug)]
pub struct SpanEvent {
    name: u32,
    pid: Option<Id>,
    tid: Option<Id>,
    start_ns: u64,
    end_ns: u64,
    correlation: u64,
    attrs: Option<(u32, u32)>,
}

/// A kernel, copy or memset with usable times, made whole where it was parsed: its
/// name (as gpu_activity.csv has it) one of its run of events' names.
#[derive(Debug)]
pub struct GpuEvent {
    kind: GpuKind,
    name: u32,
    device: u32,
    stream: u32,
    correlation: u64,
    start_ns: u64,
    end_ns: u64,
    grid: Option<[u32; 3]>,
    block: Option<[u32; 3]>,
    bytes: Option<u64>,
}

/// A `B`/`E` (or async `b`/`e`) as read: matched per lane once the file ended, in
/// time order (producers need not write events sorted; ties keep the file's order).
struct Mark {
    ns: u64,
    ts_us: f64,
    end: bool,
    /// The name (an `E` may have none: u32::MAX).
    name: u32,
    cat: Option<String>,
    args: Args,
}
/// The state of one file's events as they stream by.
pub struct ChromeSink {
    pub trace: Trace,
    threads: HashMap<(Id, Id), u32>,
    /// The last thread looked up, and its lane.
    last_thread: Option<((Id, Id), u32)>,
    marks: HashMap<u32, Vec<Mark>>,
    /// Latest time any event reached, ns: where an unclosed `B` is closed.
    last_ns: u64,
}

const NO_ID: Id = Id::Num(0);

impl ChromeSink {
    pub fn new(trace: Trace) -> Self {
        ChromeSink {
            trace,
            threads: HashMap::new(),
            last_thread: None,
            marks: HashMap::new(),
            last_ns: 0,
        }
    }

    fn thread(&mut self, pid: &Id, tid: &Id) -> u32 {
        // Most events are on the thread of the one before.
        if let Some(((p, t), lane)) = &self.last_thread {
            if p == pid && t == tid {
                return *lane;
            }
        }
        let key = (pid.clone(), tid.clone());
        let lane = match self.threads.get(&key) {
            Some(&t) => t,
            None => {
                let t = self.trace.thread(&pid.to_string(), &tid.to_string());
                self.threads.insert(key.clone(), t);
                t
            }
        };
        self.last_thread = Some((key, lane));
        lane
    }

    /// Takes one event as the parsing threads made it: `run` holds the names of its run
    /// of events (`run.ids` their numbers in the trace, given at each one's first use,
    /// so in file order) and block number `block` of the trace's attribute texts their
    /// attributes.
    pub fn add_parsed(&mut self, p: Parsed, run: &mut RunNames, block: u32) {
        let mut name = |k: u32, names: &mut Interner| {
            let id = &mut run.ids[k as usize];
            if *id == u32::MAX {
                *id = names.id(run.names.name(k));
            }
            *id
        };
        match p {
            Parsed::Other(ev) => self.add(*ev),
            Parsed::Span(s) => {
                self.trace.counts.events += 1;
                self.last_ns = self.last_ns.max(s.start_ns).max(s.end_ns);
                let thread = self.thread(
                    s.pid.as_ref().unwrap_or(&NO_ID),
                    s.tid.as_ref().unwrap_or(&NO_ID),
                );
                let name = name(s.name, &mut self.trace.names);
                let attrs = s.attrs.map(|(at, len)| self.trace.attrs.at(block, at, len));
                self.trace.spans.push(Span {
                    name,
                    thread,
                    start_ns: s.start_ns,
                    end_ns: s.end_ns,
                    id: None,
                    parent: None,
                    correlation: s.correlation,
                    attrs,
                });
            }
            Parsed::Gpu(g) => {
                self.trace.counts.events += 1;
                self.last_ns = self.last_ns.max(g.start_ns).max(g.end_ns);
                let id = name(g.name, &mut self.trace.names);
                self.trace.gpu.push(g.record(id));
            }
        }
    }

    /// Takes one event as read.
    fn add(&mut self, ev: Event) {
        self.trace.counts.events += 1;
        let ph = ev.ph.as_deref().unwrap_or("");
        match ph {
            "X" => self.complete(ev),
            "B" => self.begin(ev, false),
            "E" => self.end(ev, false),
            "b" | "S" => self.begin(ev, true),
            "e" | "F" => self.end(ev, true),
            "i" | "I" | "n" | "R" => self.trace.counts.instants += 1,
            "s" | "t" | "f" => self.trace.counts.flows += 1,
            "M" => self.metadata(ev),
            _ => self.trace.counts.other += 1,
        }
    }

    /// The event in words, for a warning: `X "forward" at ts 12.5 µs (pid 1, tid 2)`.
    fn describe(ev: &Event) -> String {
        format!(
            "{} {:?} at ts {} µs (pid {}, tid {})",
            ev.ph.as_deref().unwrap_or("?"),
            ev.name.as_deref().unwrap_or(""),
            ev.ts.map_or("?".into(), |t| t.to_string()),
            ev.pid.as_ref().unwrap_or(&NO_ID),
            ev.tid.as_ref().unwrap_or(&NO_ID),
        )
    }

    /// `ts` in ns, or a warning naming the event when it has none usable.
    fn start_ns(&mut self, ev: &Event) -> Option<u64> {
        match ev.ts.and_then(us_to_ns) {
            Some(t) => {
                self.last_ns = self.last_ns.max(t);
                Some(t)
            }
            None => {
                let what = Self::describe(ev);
                self.trace.warn(format!(
                    "{what}: no usable ts (missing, negative or not finite); left out"
                ));
                None
            }
        }
    }

    /// A complete event [`Event::parsed`] could not make whole, its times not usable:
    /// left out with a warning that names it (a usable `ts` still counts toward the
    /// file's last time).
    fn complete(&mut self, ev: Event) {
        debug_assert!(complete_times(ev.ts, ev.dur).is_none());
        if self.start_ns(&ev).is_none() {
            return;
        }
        let what = Self::describe(&ev);
        let why = match ev.dur {
            Some(d) => format!("negative duration (dur = {d} µs)"),
            None => "a complete event without dur".to_string(),
        };
        self.trace.warn(format!("{what}: {why}; left out"));
    }

    /// The thread (or, for async events, the track of its id) an event goes on.
    fn lane_of(&mut self, ev: &Event, is_async: bool) -> u32 {
        let pid = ev.pid.as_ref().unwrap_or(&NO_ID);
        if is_async {
            let id = ev.id.as_ref().map_or(String::new(), Id::to_string);
            let track = Id::Str(format!(
                "async {}{}",
                ev.cat.as_deref().map_or(String::new(), |c| format!("{c} ")),
                id
            ));
            return self.thread(pid, &track);
        }
        self.thread(pid, ev.tid.as_ref().unwrap_or(&NO_ID))
    }

    fn begin(&mut self, ev: Event, is_async: bool) {
        self.mark(ev, is_async, false);
    }

    fn end(&mut self, ev: Event, is_async: bool) {
        self.mark(ev, is_async, true);
    }

    fn mark(&mut self, ev: Event, is_async: bool, end: bool) {
        let Some(ns) = self.start_ns(&ev) else {
            return;
        };
        let lane = self.lane_of(&ev, is_async);
        // An `E` closes the innermost open `B` of its thread whatever its name (u32::MAX:
        // any); an async `e` the innermost of its id with its name. A begin without a
        // name is named "", as an `X` without one is: u32::MAX names no span.
        let name = match ev.name.as_deref() {
            _ if !end => self.trace.names.id(ev.name.as_deref().unwrap_or("")),
            Some(n) if is_async && !n.is_empty() => self.trace.names.id(n),
            _ => u32::MAX,
        };
        self.marks.entry(lane).or_default().push(Mark {
            ns,
            ts_us: ev.ts.unwrap_or(0.0),
            end,
            name,
            cat: ev.cat.filter(|_| !end).map(|c| c.0.into_owned()),
            args: ev.args.unwrap_or_default(),
        });
    }

    /// Matches one lane's begins and ends into spans.
    fn match_lane(&mut self, lane: u32, mut marks: Vec<Mark>) {
        marks.sort_by_key(|m| m.ns);
        let mut open: Vec<Mark> = Vec::new();
        for m in marks {
            if !m.end {
                open.push(m);
                continue;
            }
            let at = if m.name == u32::MAX {
                open.len().checked_sub(1)
            } else {
                open.iter().rposition(|o| o.name == m.name)
            };
            let Some(at) = at else {
                let what = self.lane_words(lane, &m);
                self.trace.warn(format!(
                    "{what}: an end with no open begin on its thread; left out"
                ));
                continue;
            };
            let b = open.remove(at);
            self.push_span(lane, b, m.ns);
        }
        let last = self.last_ns;
        for mut b in open {
            let what = self.lane_words(lane, &b);
            self.trace.warn(format!(
                "{what}: never ended; closed at the file's last time ({} µs) and marked \
                 unclosed",
                last as f64 / 1e3
            ));
            b.args.push("unclosed", "true");
            let end_ns = last.max(b.ns);
            self.push_span(lane, b, end_ns);
        }
    }

    /// A mark in words: `B "forward" at ts 12.5 µs (pid 1, tid 2)`.
    fn lane_words(&self, lane: u32, m: &Mark) -> String {
        let t = &self.trace.threads[lane as usize];
        let name = if m.name == u32::MAX {
            ""
        } else {
            self.trace.names.name(m.name)
        };
        let ph = if m.end { "E" } else { "B" };
        format!(
            "{ph} {name:?} at ts {} µs (pid {}, tid {})",
            m.ts_us, t.pid, t.tid
        )
    }

    fn push_span(&mut self, thread: u32, b: Mark, end_ns: u64) {
        let correlation = b.args.correlation.unwrap_or(0);
        let attrs = b
            .args
            .into_attrs(b.cat.as_deref())
            .map(|t| self.trace.attrs.keep(&t));
        self.trace.spans.push(Span {
            name: b.name,
            thread,
            start_ns: b.ns,
            end_ns,
            id: None,
            parent: None,
            correlation,
            attrs,
        });
    }

    fn metadata(&mut self, ev: Event) {
        let value = ev.args.and_then(|a| a.name);
        let (Some(value), Some(pid)) = (value, ev.pid.as_ref()) else {
            return;
        };
        match ev.name.as_deref() {
            Some("thread_name") => {
                let t = self.thread(pid, ev.tid.as_ref().unwrap_or(&NO_ID));
                self.trace.threads[t as usize].name = Some(value);
            }
            Some("process_name") => {
                self.trace.process_names.insert(pid.to_string(), value);
            }
            _ => {}
        }
    }

    /// The trace, once the events ended: begins and ends matched per lane in time
    /// order; a `B` still open is closed at the latest time the file reached, marked
    /// `unclosed`, and an `E` with no `B` left out, each with a warning naming it.
    pub fn finish(mut self) -> Trace {
        let mut lanes: Vec<(u32, Vec<Mark>)> = self.marks.drain().collect();
        lanes.sort_by_key(|(lane, _)| *lane);
        for (lane, marks) in lanes {
            self.match_lane(lane, marks);
        }
        self.trace
    }
}

/// A complete event's start and end in ns, where its `ts` is usable and its `dur` is
/// neither negative nor missing nor infinite.
fn complete_times(ts: Option<f64>, dur: Option<f64>) -> Option<(u64, u64)> {
    let start_ns = ts.and_then(us_to_ns)?;
    let d = dur.filter(|d| *d >= 0.0 && d.is_finite())?;
    Some((start_ns, start_ns.saturating_add(us_to_ns(d).unwrap_or(0))))
}

/// Microseconds (as Chrome's `ts` and `dur` are) in ns; None when negative or not finite.
pub fn us_to_ns(us: f64) -> Option<u64> {
    let ns = (us * 1000.0).round();
    // Below i64::MAX ns: the run-folder readers refuse later times.
    (0.0..9.2e18).contains(&ns).then_some(ns as u64)
}

/// The GPU interval kind of a Kineto event category.
fn gpu_kind(cat: &str) -> Option<GpuKind> {
    let is = |names: &[&str]| names.iter().any(|n| cat.eq_ignore_ascii_case(n));
    if is(&["kernel"]) {
        Some(GpuKind::Kernel)
    } else if is(&["gpu_memcpy", "memcpy"]) {
        Some(GpuKind::Memcpy)
    } else if is(&["gpu_memset", "memset"]) {
        Some(GpuKind::Memset)
    } else {
        None
    }
}

/// A GPU interval's name as gpu_activity.csv has it: a copy's direction, "memset" for
/// a memset without a name, else as written.
fn gpu_name(kind: GpuKind, raw: &str) -> &str {
    match kind {
        GpuKind::Memcpy => copy_direction(raw).unwrap_or(raw),
        GpuKind::Memset if raw.is_empty() => "memset",
        _ => raw,
    }
}

/// The direction in a copy's name ("Memcpy HtoD (Pageable -> Device)" → "HtoD"), as
/// gpu_activity.csv names copies.
fn copy_direction(name: &str) -> Option<&'static str> {
    [
        "HtoD", "DtoH", "DtoD", "HtoH", "PtoP", "HtoA", "AtoH", "AtoA", "AtoD", "DtoA",
    ]
    .into_iter()
    .find(|d| name.contains(d))
}
