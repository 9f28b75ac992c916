//! Timing lines of a program's log as spans (`[workload.log_spans]`): each entry names a
//! span and gives regular expressions (the `regex` crate's syntax) with named groups.
//!
//! - `duration = '…'`: a line printed when a phase ends, with its length in a group
//!   named `s`, `ms`, `us` or `ns` (a decimal number). The span ends when the line
//!   arrives, or at the time in a group named `ts`; it starts that long before.
//! - `begin = '…'` and `end = '…'`: the span runs from a begin line to the next end
//!   line (pairs nest: an end closes the latest open begin), each at its arrival or its
//!   `ts`.
//! - `parent = "name"`: the span nests under the latest span of that name whose
//!   interval holds it, whatever the time order of their lines; without it, log spans
//!   nest by time on the program's main thread.
//!
//! A `ts` group holds seconds since the Unix epoch (`1714550400.123`) or an RFC 3339
//! time (`2024-05-01T08:00:00.123Z`); gapscope moves it onto its span clock with the
//! offset between the wall clock and CLOCK_MONOTONIC read at the rep's start. Any other
//! named group becomes an attribute of the span. Lines still pass through as the
//! program's output. A line that matches but cannot become a span (a duration that is
//! not a number, an end with no begin, a parent never found) is counted with the
//! unparseable protocol lines, and a few are kept as examples.

use std::collections::{BTreeMap, HashMap};

use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::protocol::{self, LineCounts, ParsedSpan};
use crate::trace::AttrValue;

/// One entry of `[workload.log_spans]`, as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogSpanRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub begin: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
}

/// Why `[workload.log_spans]` cannot be used; each says what to write instead.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum LogSpanError {
    #[error("workload.log_spans.{span}.{which}: {why}")]
    BadRegex {
        span: String,
        which: &'static str,
        why: String,
    },
    #[error(
        "workload.log_spans.{span}: give duration = '…(?P<ms>[0-9.]+)…' or both begin = '…' \
         and end = '…'"
    )]
    NoPattern { span: String },
    #[error(
        "workload.log_spans.{span}.duration has no group named s, ms, us or ns: write e.g. \
         'took (?P<ms>[0-9.]+) ms'"
    )]
    NoDurationGroup { span: String },
    #[error("workload.log_spans.{span}.parent = {parent:?} names no other entry of log_spans")]
    UnknownParent { span: String, parent: String },
}

const UNITS: [(&str, f64); 4] = [("s", 1e9), ("ms", 1e6), ("us", 1e3), ("ns", 1.0)];
/// Group names that are not attributes.
const RESERVED: [&str; 5] = ["s", "ms", "us", "ns", "ts"];

enum Kind {
    Duration(Regex),
    Pair(Regex, Regex),
}

struct Rule {
    name: String,
    kind: Kind,
    parent: Option<String>,
}

/// The compiled `[workload.log_spans]`.
pub struct LogPatterns {
    rules: Vec<Rule>,
}

fn compile(span: &str, which: &'static str, re: &str) -> Result<Regex, LogSpanError> {
    Regex::new(re).map_err(|e| LogSpanError::BadRegex {
        span: span.to_string(),
        which,
        why: e.to_string().replace('\n', " "),
    })
}

impl LogPatterns {
    /// Compiles every entry; the first problem is the error.
    pub fn new(rules: &BTreeMap<String, LogSpanRule>) -> Result<Self, LogSpanError> {
        let mut out = Vec::new();
        for (name, r) in rules {
            let kind = match (&r.duration, &r.begin, &r.end) {
                (Some(d), None, None) => {
                    let re = compile(name, "duration", d)?;
                    if !re
                        .capture_names()
                        .flatten()
                        .any(|g| UNITS.iter().any(|(u, _)| *u == g))
                    {
                        return Err(LogSpanError::NoDurationGroup { span: name.clone() });
                    }
                    Kind::Duration(re)
                }
                (None, Some(b), Some(e)) => {
                    Kind::Pair(compile(name, "begin", b)?, compile(name, "end", e)?)
                }
                _ => return Err(LogSpanError::NoPattern { span: name.clone() }),
            };
            if let Some(p) = &r.parent {
                if p == name || !rules.contains_key(p) {
                    return Err(LogSpanError::UnknownParent {
                        span: name.clone(),
                        parent: p.clone(),
                    });
                }
            }
            out.push(Rule {
                name: name.clone(),
                kind,
                parent: r.parent.clone(),
            });
        }
        Ok(LogPatterns { rules: out })
    }

    /// No entries (a matcher of these takes no line).
    pub fn empty() -> Self {
        LogPatterns { rules: Vec::new() }
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
}

/// A span's attributes, as the protocol's parser gives them.
type Attrs = Vec<(String, AttrValue)>;

/// Reads a program's lines against the patterns (one matcher for all its streams).
pub struct LogMatcher {
    patterns: std::sync::Arc<LogPatterns>,
    /// The thread log spans are put on (the program's main thread: its pid).
    tid: u64,
    /// Wall clock minus span clock, in ns, at the rep's start.
    wall_offset_ns: i128,
    /// Begins not yet ended, per entry: their time and attributes.
    open: HashMap<usize, Vec<(u64, Attrs)>>,
    spans: Vec<(usize, ParsedSpan)>,
    counts: LineCounts,
    samples: Vec<String>,
    seq: u64,
    /// The rep's cap on spans, shared with the protocol parsers
    /// ([`crate::protocol::budget`]).
    budget: Option<std::sync::Arc<crate::protocol::budget::SpanBudget>>,
}

/// Examples of badly matching lines kept.
const SAMPLES: usize = 3;

/// The offset of the wall clock from the span clock, now, in ns.
pub fn wall_offset_ns() -> i128 {
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i128)
        .unwrap_or(0);
    wall - crate::trace::now_ns() as i128
}

impl LogMatcher {
    pub fn new(patterns: std::sync::Arc<LogPatterns>, tid: u64, wall_offset_ns: i128) -> Self {
        LogMatcher {
            patterns,
            tid,
            wall_offset_ns,
            open: HashMap::new(),
            spans: Vec::new(),
            counts: LineCounts::default(),
            samples: Vec::new(),
            seq: 0,
            budget: None,
        }
    }

    /// Its spans take their room from `budget`, as the protocol parsers' do.
    pub fn with_budget(
        mut self,
        budget: std::sync::Arc<crate::protocol::budget::SpanBudget>,
    ) -> Self {
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

    /// The span-clock time a line stands for: its `ts` group, else its arrival.
    fn time_of(&self, c: &regex::Captures, arrival_ns: u64) -> Result<u64, String> {
        let Some(ts) = c.name("ts") else {
            return Ok(arrival_ns);
        };
        let wall_ns = parse_ts(ts.as_str())?;
        u64::try_from(wall_ns - self.wall_offset_ns)
            .map_err(|_| format!("ts {:?} lies before the span clock's zero", ts.as_str()))
    }

    /// Feeds one line of the program's output (not a protocol line), read at
    /// `arrival_ns`; every entry it matches is applied.
    pub fn feed(&mut self, line: &[u8], arrival_ns: u64) {
        let Ok(text) = std::str::from_utf8(line) else {
            return;
        };
        let text = text.strip_suffix('\r').unwrap_or(text);
        let patterns = self.patterns.clone();
        for (i, rule) in patterns.rules.iter().enumerate() {
            match &rule.kind {
                Kind::Duration(re) => {
                    let Some(c) = re.captures(text) else { continue };
                    self.seq += 1;
                    let r = (|| {
                        let end = self.time_of(&c, arrival_ns)?;
                        let dur = duration_ns(&c)?;
                        let start = end.checked_sub(dur).ok_or("duration longer than uptime")?;
                        Ok::<_, String>((start, end))
                    })();
                    match r {
                        Ok((start, end)) => {
                            self.counts.protocol_lines += 1;
                            if self.take() {
                                self.spans
                                    .push((i, self.span(rule, start, end, attrs_of(re, &c))));
                            }
                        }
                        Err(why) => self.bad(text, format!("{}: {why}", rule.name)),
                    }
                }
                Kind::Pair(b, e) => {
                    if let Some(c) = b.captures(text) {
                        self.seq += 1;
                        match self.time_of(&c, arrival_ns) {
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
                        self.seq += 1;
                        let t = match self.time_of(&c, arrival_ns) {
                            Ok(t) => t,
                            Err(why) => {
                                self.bad(text, format!("{} end: {why}", rule.name));
                                continue;
                            }
                        };
                        match self.open.get_mut(&i).and_then(Vec::pop) {
                            Some((start, mut attrs)) => {
                                self.counts.protocol_lines += 1;
                                attrs.extend(attrs_of(e, &c));
                                let s = self.span(rule, start, t.max(start), attrs);
                                self.spans.push((i, s));
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
                }
            }
        }
    }

    fn span(
        &self,
        rule: &Rule,
        start: u64,
        end: u64,
        attrs: Vec<(String, AttrValue)>,
    ) -> ParsedSpan {
        ParsedSpan {
            name: rule.name.clone(),
            tid: self.tid,
            start_ns: start,
            end_ns: end,
            attrs,
            seq: self.seq,
            unmatched: false,
        }
    }

    /// Closes begins never ended at `end_ns` (counted), gives each span with a `parent`
    /// its parent (as `gs.id` / `gs.parent` attributes, which the rows follow) and
    /// returns the spans, the counts and a few examples of bad lines.
    pub fn finish(mut self, end_ns: u64) -> (Vec<ParsedSpan>, LineCounts, Vec<String>) {
        let mut open: Vec<(usize, u64, Attrs)> = self
            .open
            .drain()
            .flat_map(|(i, v)| v.into_iter().map(move |(t, a)| (i, t, a)))
            .collect();
        open.sort_by_key(|(i, t, _)| (*t, *i));
        for (i, start, attrs) in open {
            self.counts.unmatched_begins += 1;
            let rule = &self.patterns.clone().rules[i];
            let mut s = self.span(rule, start, end_ns.max(start), attrs);
            s.unmatched = true;
            self.spans.push((i, s));
        }
        let ids: Vec<u64> = (0..self.spans.len() as u64)
            .map(|k| LOG_ID_BASE + k)
            .collect();
        let mut parents = vec![None; self.spans.len()];
        for (k, (i, s)) in self.spans.iter().enumerate() {
            let Some(pname) = &self.patterns.rules[*i].parent else {
                continue;
            };
            // The latest-starting span of that name whose interval holds this one.
            let found = self
                .spans
                .iter()
                .enumerate()
                .filter(|(j, (_, p))| {
                    *j != k && &p.name == pname && p.start_ns <= s.start_ns && p.end_ns >= s.end_ns
                })
                .max_by_key(|(_, (_, p))| p.start_ns)
                .map(|(j, _)| j);
            parents[k] = Some(found);
        }
        let mut spans = Vec::with_capacity(self.spans.len());
        for (k, (i, mut s)) in std::mem::take(&mut self.spans).into_iter().enumerate() {
            s.attrs.push((GS_ID.into(), AttrValue::U64(ids[k])));
            match parents[k] {
                Some(Some(j)) => s.attrs.push((GS_PARENT.into(), AttrValue::U64(ids[j]))),
                Some(None) => {
                    let p = self.patterns.rules[i].parent.clone().unwrap_or_default();
                    let why = format!(
                        "{}: no {p:?} span holds it ({} ns to {} ns); nested by time",
                        s.name, s.start_ns, s.end_ns
                    );
                    self.bad(&s.name.clone(), why);
                }
                None => {}
            }
            spans.push(s);
        }
        (spans, self.counts, self.samples)
    }
}

/// The attribute giving a span its id, and the one naming its parent's, in span lines
/// and log spans: spans carrying them nest by id, not by time
/// (`experiment::external::rows`).
pub const GS_ID: &str = "gs.id";
pub const GS_PARENT: &str = "gs.parent";
/// Ids of log spans (apart from those the program's own lines carry).
const LOG_ID_BASE: u64 = 1 << 61;

fn duration_ns(c: &regex::Captures) -> Result<u64, String> {
    for (unit, scale) in UNITS {
        if let Some(m) = c.name(unit) {
            let v: f64 = m
                .as_str()
                .trim()
                .parse()
                .map_err(|_| format!("duration {:?} is not a number", m.as_str()))?;
            if !v.is_finite() || v < 0.0 {
                return Err(format!("duration {:?} is not a length of time", m.as_str()));
            }
            return Ok((v * scale).round() as u64);
        }
    }
    Err("no duration group matched".into())
}

/// Seconds since the Unix epoch or an RFC 3339 time, as wall-clock ns.
fn parse_ts(s: &str) -> Result<i128, String> {
    if let Ok(secs) = s.trim().parse::<f64>() {
        if secs.is_finite() && secs >= 0.0 {
            return Ok((secs * 1e9) as i128);
        }
    }
    chrono::DateTime::parse_from_rfc3339(s.trim())
        .map(|t| t.timestamp_nanos_opt().unwrap_or(0) as i128)
        .map_err(|_| {
            format!("ts {s:?} is neither seconds since the Unix epoch nor an RFC 3339 time")
        })
}

fn attrs_of(re: &Regex, c: &regex::Captures) -> Vec<(String, AttrValue)> {
    re.capture_names()
        .flatten()
        .filter(|g| !RESERVED.contains(g))
        .filter_map(|g| {
            c.name(g)
                .map(|m| (g.to_string(), protocol::value(m.as_str())))
        })
        .collect()
}

#[cfg(test)]
mod tests;
