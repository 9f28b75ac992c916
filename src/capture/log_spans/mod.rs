//! Timing lines of a program's log as spans (`[workload.log_spans]`): each entry names a
//! span and gives regular expressions (the `regex` crate's syntax) with named groups.
//!
//! - `duration = '…'`: a line printed when a phase ends, with its length in a group
//!   named `s`, `ms`, `us` or `ns` (a decimal number). The span ends when the line was
//!   written, or at the time in a group named `ts`; it starts that long before.
//! - `begin = '…'` and `end = '…'`: the span runs from a begin line to the next end
//!   line (pairs nest: an end closes the latest open begin), each at its writing or its
//!   `ts`.
//! - `parent = "name"`: the span nests under the latest span of that name whose
//!   interval holds it, within the precision the two lines print ([`matcher`]);
//!   without it, log spans nest by time on the program's main thread.
//!
//! A `ts` group is read by [`ts`]: epoch seconds, RFC 3339, the default formats of common
//! logging libraries, or the entry's `ts_format` in its `tz`; gapscope moves it onto its
//! span clock with the offset between the wall clock and CLOCK_MONOTONIC read at the
//! rep's start. Any other named group becomes an attribute of the span. Lines still pass
//! through as the program's output. A line that matches but cannot become a span (a
//! duration that is not a number, an end with no begin, a parent never found) is counted
//! with the unparseable protocol lines, and a few are kept as examples.

pub mod matcher;
pub mod ts;

use std::collections::BTreeMap;

use regex::Regex;
use serde::{Deserialize, Serialize};

pub use matcher::{wall_offset_ns, LogMatcher, LogOutcome, GS_ID, GS_PARENT, GS_TIMED};

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
    /// How the `ts` group is written (strftime, chrono's dialect: `%Y-%m-%d %H:%M:%S%.f`);
    /// without it, the formats [`ts`] knows are tried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ts_format: Option<String>,
    /// The time zone of a `ts` printed without an offset: `local` (default), `UTC`, or
    /// an offset such as `+02:00`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tz: Option<String>,
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
    #[error("workload.log_spans.{span}.{which}: {why}")]
    BadTime {
        span: String,
        which: &'static str,
        why: String,
    },
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
    ts_format: Option<String>,
    tz: ts::Tz,
}

impl Rule {
    /// The time its patterns take on `text` alone (their captures, no span made): a
    /// line's second timing where the first said it was slow.
    fn match_ns(&self, text: &str) -> u64 {
        let t0 = std::time::Instant::now();
        match &self.kind {
            Kind::Duration(re) => {
                std::hint::black_box(re.captures(text));
            }
            Kind::Pair(b, e) => {
                std::hint::black_box(b.captures(text));
                std::hint::black_box(e.captures(text));
            }
        }
        t0.elapsed().as_nanos() as u64
    }
}

/// The compiled `[workload.log_spans]`.
pub struct LogPatterns {
    rules: Vec<Rule>,
}

fn compile(span: &str, which: &'static str, re: &str) -> Result<Regex, LogSpanError> {
    crate::capture::user_regex(re).map_err(|why| LogSpanError::BadRegex {
        span: span.to_string(),
        which,
        why,
    })
}

/// The entry's `ts_format`, checked: it must read a time of day.
fn check_format(span: &str, f: &str) -> Result<(), LogSpanError> {
    let bad = |why: String| LogSpanError::BadTime {
        span: span.to_string(),
        which: "ts_format",
        why,
    };
    let items: Vec<_> = chrono::format::StrftimeItems::new(f).collect();
    if items
        .iter()
        .any(|i| matches!(i, chrono::format::Item::Error))
    {
        return Err(bad(format!(
            "{f:?} is not a strftime format chrono reads (e.g. '%Y-%m-%d %H:%M:%S%.f')"
        )));
    }
    if !(f.contains("%H") || f.contains("%T") || f.contains("%s") || f.contains("%I")) {
        return Err(bad(format!(
            "{f:?} reads no time of day: give the hours (%H), minutes and seconds, e.g. \
             '%H:%M:%S%.f'"
        )));
    }
    Ok(())
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
            if let Some(f) = &r.ts_format {
                check_format(name, f)?;
            }
            let tz = match &r.tz {
                Some(t) => ts::Tz::parse(t).map_err(|why| LogSpanError::BadTime {
                    span: name.clone(),
                    which: "tz",
                    why,
                })?,
                None => ts::Tz::Local,
            };
            out.push(Rule {
                name: name.clone(),
                kind,
                parent: r.parent.clone(),
                ts_format: r.ts_format.clone(),
                tz,
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

    /// Whether some entry times its lines by when they were written (no `ts` group):
    /// its stamps are only as good as the reading of the program's output.
    pub fn stamps_by_arrival(&self) -> bool {
        self.rules.iter().any(|r| {
            let has_ts = |re: &Regex| re.capture_names().flatten().any(|g| g == "ts");
            match &r.kind {
                Kind::Duration(re) => !has_ts(re),
                Kind::Pair(b, e) => !has_ts(b) || !has_ts(e),
            }
        })
    }
}

/// A duration group's value in ns, and its precision: one unit of a whole number (a
/// program that prints whole ms usually truncates), half a unit of the last digit of a
/// decimal one (printed rounded).
fn duration_ns(c: &regex::Captures) -> Result<(u64, u64), String> {
    for (unit, scale) in UNITS {
        if let Some(m) = c.name(unit) {
            let text = m.as_str().trim();
            let v: f64 = text
                .parse()
                .map_err(|_| format!("duration {:?} is not a number", m.as_str()))?;
            if !v.is_finite() || v < 0.0 {
                return Err(format!("duration {:?} is not a length of time", m.as_str()));
            }
            return Ok(((v * scale).round() as u64, printed_precision(text, scale)));
        }
    }
    Err("no duration group matched".into())
}

/// The precision of a printed number of `scale` ns units: see [`duration_ns`].
fn printed_precision(text: &str, scale: f64) -> u64 {
    let (mantissa, exp) = match text.find(['e', 'E']) {
        Some(i) => (&text[..i], text[i + 1..].parse::<i32>().unwrap_or(0)),
        None => (text, 0),
    };
    let unit = match mantissa.find('.') {
        Some(i) => {
            let k = mantissa[i + 1..].len() as i32;
            0.5 * 10f64.powi(exp - k)
        }
        None => 10f64.powi(exp),
    };
    (unit * scale).ceil() as u64
}

fn attrs_of(re: &Regex, c: &regex::Captures) -> Vec<(String, crate::trace::AttrValue)> {
    re.capture_names()
        .flatten()
        .filter(|g| !RESERVED.contains(g))
        .filter_map(|g| {
            c.name(g)
                .map(|m| (g.to_string(), crate::protocol::value(m.as_str())))
        })
        .collect()
}

#[cfg(test)]
mod tests;
