//! OpenTelemetry's OTLP JSON (what the collector's file exporter and the OTLP/HTTP JSON
//! exporters write): `resourceSpans` → `scopeSpans` → `spans`, each span with its
//! `spanId`, `parentSpanId`, `startTimeUnixNano`/`endTimeUnixNano` (decimal strings, as
//! proto3 JSON writes 64-bit integers, or numbers) and attributes. One resource is read
//! at a time. Spans nest by their parent ids; they sit on the thread their `thread.id`
//! attribute names, else on one lane per service (OTLP has no threads).

use std::collections::HashMap;
use std::fmt;

use serde::de::{self, Visitor};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::model::{Span, Trace};

/// One element of `resourceSpans`: a resource and its spans.
#[derive(Debug, Deserialize)]
pub struct ResourceSpans {
    #[serde(default)]
    resource: Option<Resource>,
    #[serde(default, rename = "scopeSpans", alias = "instrumentationLibrarySpans")]
    scope_spans: Vec<ScopeSpans>,
}

#[derive(Debug, Deserialize)]
struct Resource {
    #[serde(default)]
    attributes: Vec<KeyValue>,
}

#[derive(Debug, Deserialize)]
struct ScopeSpans {
    #[serde(default)]
    spans: Vec<OtlpSpan>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct OtlpSpan {
    #[serde(default)]
    span_id: String,
    #[serde(default)]
    parent_span_id: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    start_time_unix_nano: Option<Nanos>,
    #[serde(default)]
    end_time_unix_nano: Option<Nanos>,
    #[serde(default)]
    attributes: Vec<KeyValue>,
}

#[derive(Debug, Deserialize)]
struct KeyValue {
    key: String,
    #[serde(default)]
    value: AnyValue,
}

/// OTLP's AnyValue: one of its typed fields (64-bit integers as decimal strings).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct AnyValue {
    string_value: Option<String>,
    bool_value: Option<bool>,
    int_value: Option<Nanos>,
    double_value: Option<f64>,
}

impl AnyValue {
    fn json(&self) -> Option<Value> {
        if let Some(s) = &self.string_value {
            return Some(s.clone().into());
        }
        if let Some(b) = self.bool_value {
            return Some(b.into());
        }
        if let Some(n) = &self.int_value {
            return Some(n.0.into());
        }
        self.double_value.map(Value::from)
    }
}

/// A 64-bit unsigned integer written as a number or a decimal string.
#[derive(Debug, Clone, Copy)]
struct Nanos(u64);

impl<'de> Deserialize<'de> for Nanos {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Nanos, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Nanos;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an unsigned integer (number or decimal string)")
            }
            fn visit_u64<E>(self, v: u64) -> Result<Nanos, E> {
                Ok(Nanos(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Nanos, E> {
                u64::try_from(v)
                    .map(Nanos)
                    .map_err(|_| E::custom(format!("{v} is negative")))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Nanos, E> {
                v.parse()
                    .map(Nanos)
                    .map_err(|_| E::custom(format!("{v:?} is not an unsigned integer")))
            }
        }
        d.deserialize_any(V)
    }
}

/// 10^15 ns after the Unix epoch (12 January 1970): no exporter's clock reads less.
const UNIX_NS_FLOOR: u64 = 1_000_000_000_000_000;

/// The state of one OTLP file as its resources stream by.
pub struct OtlpSink {
    pub trace: Trace,
    ids: HashMap<String, u64>,
    resources: u64,
}

impl OtlpSink {
    pub fn new(trace: Trace) -> Self {
        OtlpSink {
            trace,
            ids: HashMap::new(),
            resources: 0,
        }
    }

    /// The number standing for a span id (hex), the same for every mention.
    fn id(&mut self, hex: &str) -> Option<u64> {
        if hex.is_empty() {
            return None;
        }
        let next = self.ids.len() as u64 + 1;
        Some(*self.ids.entry(hex.to_string()).or_insert(next))
    }

    /// Takes one resource's spans.
    pub fn add(&mut self, r: ResourceSpans) {
        self.resources += 1;
        let attr = |k: &str| {
            r.resource
                .as_ref()
                .and_then(|res| res.attributes.iter().find(|a| a.key == k))
                .and_then(|a| a.value.json())
                .map(|v| v.as_str().map_or(v.to_string(), str::to_string))
        };
        let service =
            attr("service.name").unwrap_or_else(|| format!("resource {}", self.resources));
        let pid = attr("process.pid").unwrap_or_else(|| service.clone());
        for s in r.scope_spans.into_iter().flat_map(|s| s.spans) {
            self.span(s, &pid, &service);
        }
    }

    fn span(&mut self, s: OtlpSpan, pid: &str, service: &str) {
        self.trace.counts.events += 1;
        let (Some(start), Some(end)) = (s.start_time_unix_nano, s.end_time_unix_nano) else {
            self.trace.warn(format!(
                "span {:?} (spanId {}): no startTimeUnixNano or endTimeUnixNano; left out",
                s.name, s.span_id
            ));
            return;
        };
        if end.0 < start.0 {
            self.trace.warn(format!(
                "span {:?} (spanId {}): ends before it starts (a negative duration); left out",
                s.name, s.span_id
            ));
            return;
        }
        let mut attrs = Map::new();
        let mut tid = None;
        for kv in &s.attributes {
            if let Some(v) = kv.value.json() {
                if kv.key == "thread.id" {
                    tid = Some(v.to_string());
                }
                attrs.insert(kv.key.clone(), v);
            }
        }
        attrs.insert("service.name".into(), service.into());
        let thread = self.trace.thread(pid, tid.as_deref().unwrap_or(service));
        let attrs = self.trace.attrs.keep(&Value::Object(attrs).to_string());
        let span = Span {
            name: self.trace.names.id(&s.name),
            thread,
            start_ns: start.0,
            end_ns: end.0,
            id: self.id(&s.span_id),
            parent: self.id(&s.parent_span_id),
            correlation: 0,
            attrs: Some(attrs),
        };
        self.trace.spans.push(span);
    }

    /// The trace; a file whose times all lie in the first days of 1970 as Unix ns was
    /// most likely written in µs or ms, and the warning says so (times are kept as
    /// written: durations would be 1,000 or 1,000,000 times too short).
    pub fn finish(mut self) -> Trace {
        let latest = self.trace.spans.iter().map(|s| s.end_ns).max();
        if let Some(t) = latest.filter(|&t| t < UNIX_NS_FLOOR) {
            self.trace.warn(format!(
                "every time is below {UNIX_NS_FLOOR} (the latest end is {t}): as Unix \
                 nanoseconds that is before 12 January 1970; were startTimeUnixNano and \
                 endTimeUnixNano written in µs or ms? They are kept as ns"
            ));
        }
        self.trace
    }
}
