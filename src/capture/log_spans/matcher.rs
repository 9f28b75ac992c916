//! Lines of a program's output against `[workload.log_spans]`: each line comes with the
//! time it was read (as close to its writing as gapscope's readers get:
//! `experiment::command::child`), and every entry it matches is applied. At the end of
//! the rep ([`LogMatcher::finish`]) the spans are put into the rep's window and nested.
//!
//! Precision. Every time a line gives is known to some precision: a duration printed as a
//! whole number of its unit, one unit (programs truncate); one printed with k decimals,
//! half a unit of its last digit; a `ts`, one unit of its last digit (log libraries
//! truncate); the time a line was read, exactly (0). A span's start carries its end's
//! precision plus its duration's. A span with a `parent` nests under a span of that name
//! whose interval holds it, each end within the sum of the two spans' precisions at that
//! end; the parent is then widened, within those precisions, to hold it. A span that lies
//! outside the rep by no more than its precision is moved inside; a line read after the
//! program exited was written before it, and is taken at the exit.

use std::collections::HashMap;
use std::sync::Arc;

use super::{attrs_of, duration_ns, ts, Kind, LogPatterns, Rule};
use crate::protocol::{LineCounts, ParsedSpan};
use crate::trace::AttrValue;
use crate::units::fmt_ns;

/// The attribute giving a span its id, and the one naming its parent's, in span lines
/// and log spans: spans carrying them nest by id, not by time
/// (`experiment::command::rows`).
pub const GS_ID: &str = "gs.id";
pub const GS_PARENT: &str = "gs.parent";
/// The attribute marking a log span, with how it was timed (`line` or `ts`); the rows
/// drop it once the rep's notes are made.
pub const GS_TIMED: &str = "gs.log_timed";
/// Ids of log spans (apart from those the program's own lines carry).
const LOG_ID_BASE: u64 = 1 << 61;
/// Examples of badly matching lines kept.
const SAMPLES: usize = 3;

/// A span's attributes, as the protocol's parser gives them.
type Attrs = Vec<(String, AttrValue)>;

/// A time a line gives, on the span clock.
#[derive(Debug, Clone, Copy)]
struct Stamp {
    t: u64,
    /// How far the instant may lie from `t` (see the module doc).
    precision_ns: u64,
    /// Taken from the line's reading, not a `ts` group.
    read: bool,
}

/// A span found, with what nesting and the window need to know of it.
struct Found {
    rule: usize,
    span: ParsedSpan,
    start_precision_ns: u64,
    end_precision_ns: u64,
    /// The line(s) were timed when read; `duration`: a duration-form span.
    read: bool,
    duration: bool,
}

/// What the log lines of one rep gave.
#[derive(Debug, Default)]
pub struct LogOutcome {
    pub spans: Vec<ParsedSpan>,
    pub counts: LineCounts,
    pub samples: Vec<String>,
    /// Lines that matched an entry, and spans kept of them.
    pub matched: u64,
    pub kept: u64,
    /// Why spans were dropped (the first reason), for the rep's notes.
    pub dropped: Option<String>,
    /// What matching the lines cost where a line took the patterns long
    /// ([`MatchTime`]): the matcher's time, said as such, for the rep's notes.
    pub slow: Option<String>,
}

/// A line whose matching takes longer than this is slow.
pub const SLOW_LINE_NS: u64 = 1_000_000;
/// Matching time of slow lines a rep spends at most: past it the rep's later lines are
/// not matched (and counted), so that a costly pattern cannot hold the rep (and its
/// timeout, which would blame the program) for the reading of every line.
pub const SLOW_LINES_BUDGET_NS: u64 = 2_000_000_000;

/// The time the patterns took on the lines that were slow to match.
#[derive(Debug, Clone)]
pub struct MatchTime {
    /// What makes a line slow, and the most such lines may take in all (ns).
    pub slow_line_ns: u64,
    pub budget_ns: u64,
    /// Slow lines, their matching time in all, the slowest and its entry.
    pub lines: u64,
    pub ns: u64,
    pub slowest_ns: u64,
    pub slowest_entry: String,
    /// Lines read once the budget was spent, not matched.
    pub skipped: u64,
}

impl Default for MatchTime {
    fn default() -> Self {
        MatchTime {
            slow_line_ns: SLOW_LINE_NS,
            budget_ns: SLOW_LINES_BUDGET_NS,
            lines: 0,
            ns: 0,
            slowest_ns: 0,
            slowest_entry: String::new(),
            skipped: 0,
        }
    }
}

impl MatchTime {
    /// The rep's note, where a line was slow.
    fn note(&self) -> Option<String> {
        (self.lines > 0).then(|| {
            let ms = |ns: u64| format!("{:.1} ms", ns as f64 / 1e6);
            let mut s = format!(
                "workload.log_spans: {} line(s) took the patterns over {} each to match \
                 ({} in all; the slowest {}, entry `{}`): the matcher's time, not the \
                 program's",
                self.lines,
                ms(self.slow_line_ns),
                ms(self.ns),
                ms(self.slowest_ns),
                self.slowest_entry
            );
            if self.skipped > 0 {
                s.push_str(&format!(
                    "; past {} of it the rep's other {} line(s) were not matched. Make the \
                     pattern cheaper (anchor it, bound its repeats) or match fewer lines",
                    ms(self.budget_ns),
                    self.skipped
                ));
            }
            s
        })
    }
}

/// Reads a program's lines against the patterns (one matcher for all its streams).
pub struct LogMatcher {
    patterns: Arc<LogPatterns>,
    /// The thread log spans are put on (the program's main thread: its pid).
    tid: u64,
    /// Wall clock minus span clock, in ns, at the rep's start.
    wall_offset_ns: i128,
    /// Begins not yet ended, per entry: their time and attributes.
    open: HashMap<usize, Vec<(Stamp, Attrs)>>,
    found: Vec<Found>,
    counts: LineCounts,
    samples: Vec<String>,
    matched: u64,
    seq: u64,
    /// The rep's cap on spans, shared with the protocol parsers
    /// ([`crate::protocol::budget`]).
    budget: Option<Arc<crate::protocol::budget::SpanBudget>>,
    time: MatchTime,
}

/// The offset of the wall clock from the span clock, now, in ns.
pub fn wall_offset_ns() -> i128 {
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i128)
        .unwrap_or(0);
    wall - crate::trace::now_ns() as i128
}

impl LogMatcher {
    pub fn new(patterns: Arc<LogPatterns>, tid: u64, wall_offset_ns: i128) -> Self {
        LogMatcher {
            patterns,
            tid,
            wall_offset_ns,
            open: HashMap::new(),
            found: Vec::new(),
            counts: LineCounts::default(),
            samples: Vec::new(),
            matched: 0,
            seq: 0,
            budget: None,
            time: MatchTime::default(),
        }
    }

    /// Lines slower to match than `slow_line_ns` may take `budget_ns` in all
    /// ([`SLOW_LINE_NS`], [`SLOW_LINES_BUDGET_NS`] by default).
    pub fn with_match_budget(mut self, slow_line_ns: u64, budget_ns: u64) -> Self {
        self.time.slow_line_ns = slow_line_ns;
        self.time.budget_ns = budget_ns;
        self
    }

    /// Its spans take their room from `budget`, as the protocol parsers' do.
    pub fn with_budget(mut self, budget: Arc<crate::protocol::budget::SpanBudget>) -> Self {
        self.budget = Some(budget);
        self
    }

    fn take(&self) -> bool {
        self.budget.as_ref().is_none_or(|b| b.take())
    }

    fn bad(&mut self, line: &str, why: String) {
        self.counts.unparseable += 1;
        self.note(line, why);
    }

    /// Keeps a line as an example of what went wrong (the first few only).
    fn note(&mut self, line: &str, why: String) {
        if self.samples.len() < SAMPLES {
            let head: String = line.chars().take(80).collect();
            self.samples.push(format!("log line: {why}: {head:?}"));
        }
    }

    /// The span-clock time a line stands for: its `ts` group, else its reading.
    fn time_of(&self, rule: &Rule, c: &regex::Captures, read_ns: u64) -> Result<Stamp, String> {
        let Some(ts) = c.name("ts") else {
            return Ok(Stamp {
                t: read_ns,
                precision_ns: 0,
                read: true,
            });
        };
        let near = read_ns as i128 + self.wall_offset_ns;
        let (wall_ns, precision_ns) =
            ts::parse_ts(ts.as_str(), rule.ts_format.as_deref(), rule.tz, near)?;
        let t = u64::try_from(wall_ns - self.wall_offset_ns)
            .map_err(|_| format!("ts {:?} lies before the span clock's zero", ts.as_str()))?;
        Ok(Stamp {
            t,
            precision_ns,
            read: false,
        })
    }

    /// Feeds one line of the program's output (not a protocol line), read at `read_ns`;
    /// every entry it matches is applied.
    pub fn feed(&mut self, line: &[u8], read_ns: u64) {
        let Ok(text) = std::str::from_utf8(line) else {
            return;
        };
        let text = text.strip_suffix('\r').unwrap_or(text);
        if self.time.lines > 0 && self.time.ns >= self.time.budget_ns {
            self.time.skipped += 1;
            return;
        }
        let patterns = self.patterns.clone();
        let mut slow = false;
        for (i, rule) in patterns.rules.iter().enumerate() {
            let t0 = std::time::Instant::now();
            self.match_rule(i, rule, text, read_ns);
            let mut took = t0.elapsed().as_nanos() as u64;
            if took > self.time.slow_line_ns {
                // Timed again on its patterns alone: a match whose thread only waited
                // for a core (a loaded machine) is not a slow one.
                took = took.min(rule.match_ns(text));
            }
            if took > self.time.slow_line_ns {
                slow = true;
                let t = &mut self.time;
                t.ns = t.ns.saturating_add(took);
                if took > t.slowest_ns {
                    t.slowest_ns = took;
                    t.slowest_entry = rule.name.clone();
                }
            }
        }
        self.time.lines += u64::from(slow);
    }

    /// One entry's patterns on one line.
    fn match_rule(&mut self, i: usize, rule: &Rule, text: &str, read_ns: u64) {
        match &rule.kind {
            Kind::Duration(re) => {
                let Some(c) = re.captures(text) else { return };
                self.duration_line(i, rule, re, &c, text, read_ns);
            }
            Kind::Pair(b, e) => {
                if let Some(c) = b.captures(text) {
                    self.matched += 1;
                    self.seq += 1;
                    match self.time_of(rule, &c, read_ns) {
                        Ok(t) => {
                            self.counts.protocol_lines += 1;
                            if self.take() {
                                self.open.entry(i).or_default().push((t, attrs_of(b, &c)));
                            }
                        }
                        Err(why) => self.bad(text, format!("{} begin: {why}", rule.name)),
                    }
                }
                if let Some(c) = e.captures(text) {
                    self.end_line(i, rule, e, &c, text, read_ns);
                }
            }
        }
    }

    fn duration_line(
        &mut self,
        i: usize,
        rule: &Rule,
        re: &regex::Regex,
        c: &regex::Captures,
        text: &str,
        read_ns: u64,
    ) {
        self.matched += 1;
        self.seq += 1;
        let r = (|| {
            let end = self.time_of(rule, c, read_ns)?;
            let (dur, dur_precision) = duration_ns(c)?;
            let start = end
                .t
                .checked_sub(dur)
                .ok_or("duration longer than uptime")?;
            Ok::<_, String>((start, end, dur_precision))
        })();
        match r {
            Ok((start, end, dur_precision)) => {
                self.counts.protocol_lines += 1;
                if self.take() {
                    let span = self.span(rule, start, end.t, attrs_of(re, c));
                    self.found.push(Found {
                        rule: i,
                        span,
                        // A number printed as `0e300` is known to no better than
                        // past u64's range: the sum saturates.
                        start_precision_ns: end.precision_ns.saturating_add(dur_precision),
                        end_precision_ns: end.precision_ns,
                        read: end.read,
                        duration: true,
                    });
                }
            }
            Err(why) => self.bad(text, format!("{}: {why}", rule.name)),
        }
    }

    fn end_line(
        &mut self,
        i: usize,
        rule: &Rule,
        re: &regex::Regex,
        c: &regex::Captures,
        text: &str,
        read_ns: u64,
    ) {
        self.matched += 1;
        self.seq += 1;
        let end = match self.time_of(rule, c, read_ns) {
            Ok(t) => t,
            Err(why) => {
                self.bad(text, format!("{} end: {why}", rule.name));
                return;
            }
        };
        match self.open.get_mut(&i).and_then(Vec::pop) {
            Some((start, mut attrs)) => {
                self.counts.protocol_lines += 1;
                attrs.extend(attrs_of(re, c));
                let span = self.span(rule, start.t, end.t.max(start.t), attrs);
                self.found.push(Found {
                    rule: i,
                    span,
                    start_precision_ns: start.precision_ns,
                    end_precision_ns: end.precision_ns,
                    read: start.read || end.read,
                    duration: false,
                });
            }
            // Past the cap: most likely the end of a begin not kept.
            None if self.budget.as_ref().is_some_and(|b| b.exhausted()) => {
                self.counts.protocol_lines += 1;
            }
            None => {
                self.counts.unmatched_ends += 1;
                self.note(text, format!("{} end with no begin", rule.name));
            }
        }
    }

    fn span(&self, rule: &Rule, start: u64, end: u64, attrs: Attrs) -> ParsedSpan {
        ParsedSpan {
            name: rule.name.as_str().into(),
            tid: self.tid,
            start_ns: start,
            end_ns: end,
            attrs,
            seq: self.seq,
            unmatched: false,
            via: None,
        }
    }

    /// Closes begins never ended at `end_ns` (counted), puts the spans into the rep's
    /// window `[start_ns, end_ns]` (dropping, with a count and a reason, those outside it
    /// by more than their precision), gives each span with a `parent` its parent (as
    /// `gs.id` / `gs.parent` attributes, which the rows follow) and returns them.
    pub fn finish(mut self, start_ns: u64, end_ns: u64) -> LogOutcome {
        self.close_open(end_ns);
        let mut dropped = None;
        let found = std::mem::take(&mut self.found);
        let mut kept: Vec<Found> = Vec::with_capacity(found.len());
        for mut f in found {
            match into_window(&mut f, start_ns, end_ns) {
                Ok(()) => kept.push(f),
                Err(why) => {
                    self.counts.outside_rep += 1;
                    self.note(&f.span.name.clone(), why.clone());
                    dropped.get_or_insert(why);
                }
            }
        }
        let parents = self.nest(&mut kept);
        let mut spans = Vec::with_capacity(kept.len());
        for (k, f) in kept.into_iter().enumerate() {
            let mut s = f.span;
            s.attrs
                .push((GS_ID.into(), AttrValue::U64(LOG_ID_BASE + k as u64)));
            let how = if f.read { "line" } else { "ts" };
            s.attrs.push((GS_TIMED.into(), AttrValue::Str(how.into())));
            if let Some(j) = parents[k] {
                s.attrs
                    .push((GS_PARENT.into(), AttrValue::U64(LOG_ID_BASE + j as u64)));
            }
            spans.push(s);
        }
        LogOutcome {
            kept: spans.len() as u64,
            spans,
            counts: self.counts,
            samples: self.samples,
            matched: self.matched,
            dropped,
            slow: self.time.note(),
        }
    }

    fn close_open(&mut self, end_ns: u64) {
        let mut open: Vec<(usize, Stamp, Attrs)> = self
            .open
            .drain()
            .flat_map(|(i, v)| v.into_iter().map(move |(t, a)| (i, t, a)))
            .collect();
        open.sort_by_key(|(i, t, _)| (t.t, *i));
        let patterns = self.patterns.clone();
        for (i, start, attrs) in open {
            self.counts.unmatched_begins += 1;
            let mut s = self.span(&patterns.rules[i], start.t, end_ns.max(start.t), attrs);
            s.unmatched = true;
            self.found.push(Found {
                rule: i,
                span: s,
                start_precision_ns: start.precision_ns,
                end_precision_ns: 0,
                read: start.read,
                duration: false,
            });
        }
    }

    /// The parent of each span that names one (an index into `spans`), the parents
    /// widened to hold their children; a span no parent holds is counted and noted.
    fn nest(&mut self, spans: &mut [Found]) -> Vec<Option<usize>> {
        let patterns = self.patterns.clone();
        let mut parents = vec![None; spans.len()];
        let by_name = ByStart::of(spans);
        for k in 0..spans.len() {
            let Some(pname) = &patterns.rules[spans[k].rule].parent else {
                continue;
            };
            let c = &spans[k];
            match by_name.latest_holding(spans, pname, k) {
                Some(j) => parents[k] = Some(j),
                None => {
                    let s = &c.span;
                    let why = format!(
                        "{}: no {pname:?} span holds it ({} to {} after the span clock's zero, \
                         each end known to {} and {}); nested by time",
                        s.name,
                        fmt_ns(s.start_ns as f64),
                        fmt_ns(s.end_ns as f64),
                        fmt_ns(c.start_precision_ns as f64),
                        fmt_ns(c.end_precision_ns as f64),
                    );
                    self.bad(&s.name.clone(), why);
                }
            }
        }
        for (k, p) in parents.iter().enumerate() {
            if let Some(j) = *p {
                let (a, b) = (spans[k].span.start_ns, spans[k].span.end_ns);
                let parent = &mut spans[j].span;
                parent.start_ns = parent.start_ns.min(a);
                parent.end_ns = parent.end_ns.max(b);
            }
        }
        parents
    }
}

/// The spans of each name in order of start (then of index), with the widest start
/// precision among them: the candidates for a parent of that name are found by a
/// binary search instead of a scan of every span (quadratic in the lines: 69 s for
/// 40,000 lines with `parent =`).
struct ByStart {
    names: HashMap<std::sync::Arc<str>, (Vec<usize>, u64)>,
}

impl ByStart {
    fn of(spans: &[Found]) -> ByStart {
        let mut names: HashMap<std::sync::Arc<str>, (Vec<usize>, u64)> = HashMap::new();
        for (j, f) in spans.iter().enumerate() {
            let e = names.entry(f.span.name.clone()).or_default();
            e.0.push(j);
            e.1 = e.1.max(f.start_precision_ns);
        }
        for (v, _) in names.values_mut() {
            v.sort_by_key(|&j| (spans[j].span.start_ns, j));
        }
        ByStart { names }
    }

    /// The latest-starting span named `name` (other than `k`) that holds span `k`
    /// (ties: the last of them): the spans that may start late enough are found by
    /// their start, then walked back from the latest until one holds. Nested logs find
    /// it at once; only spans of that name that start before the child and end before
    /// it are walked past.
    fn latest_holding(&self, spans: &[Found], name: &str, k: usize) -> Option<usize> {
        let (order, widest) = self.names.get(name)?;
        let c = &spans[k];
        let bound = c
            .span
            .start_ns
            .saturating_add(c.start_precision_ns)
            .saturating_add(*widest);
        let end = order.partition_point(|&j| spans[j].span.start_ns <= bound);
        order[..end]
            .iter()
            .rev()
            .copied()
            .find(|&j| j != k && holds(&spans[j], c))
    }
}

/// Whether `p` holds `c`: each end within the sum of their precisions at that end.
fn holds(p: &Found, c: &Found) -> bool {
    let start_slack = p.start_precision_ns.saturating_add(c.start_precision_ns);
    let end_slack = p.end_precision_ns.saturating_add(c.end_precision_ns);
    p.span.start_ns <= c.span.start_ns.saturating_add(start_slack)
        && p.span.end_ns.saturating_add(end_slack) >= c.span.end_ns
}

/// Puts `f` into the rep's window `[lo, hi]`: a line read after the exit was written
/// before it (taken at the exit, a duration-form span keeping its length), a span outside
/// by no more than its precision is moved in; else why it is dropped.
fn into_window(f: &mut Found, lo: u64, hi: u64) -> Result<(), String> {
    let s = &mut f.span;
    if f.read && s.end_ns > hi {
        let late = s.end_ns - hi;
        s.end_ns = hi;
        s.start_ns = if f.duration {
            s.start_ns.saturating_sub(late)
        } else {
            s.start_ns.min(hi)
        };
    }
    if s.end_ns > hi && s.end_ns - hi <= f.end_precision_ns {
        s.end_ns = hi;
        s.start_ns = s.start_ns.min(hi);
    }
    if s.start_ns < lo && lo - s.start_ns <= f.start_precision_ns {
        s.start_ns = lo;
        s.end_ns = s.end_ns.max(lo);
    }
    if s.start_ns >= lo && s.end_ns <= hi {
        return Ok(());
    }
    let how = if f.read {
        "timed when its line was written"
    } else {
        "timed by its ts group"
    };
    let place = if s.start_ns < lo {
        format!("starts {} before the rep", fmt_ns((lo - s.start_ns) as f64))
    } else {
        format!("ends {} after the rep", fmt_ns((s.end_ns - hi) as f64))
    };
    let fix = match (f.read, f.duration) {
        (true, true) => {
            "its printed duration is longer than the program had run when it printed the \
             line: check the unit group's name (s, ms, us or ns)"
        }
        (true, false) => "its begin line came before the program started",
        (false, _) => {
            "check the entry's ts_format and tz (a time printed without an offset is read \
             in tz, \"local\" by default)"
        }
    };
    Err(format!(
        "log span {:?} ({how}) {place}, beyond the precision its line prints, and was \
         dropped: {fix}",
        s.name
    ))
}
