//! A finished span as it crosses a process boundary: [`OwnedSpan`] holds its names as
//! text, so that a workload binary can send the spans of a rep to the harness that runs
//! it (one line of JSON, `gapscope-workload`'s serving loop), and the harness can take
//! them back as [`SpanRecord`]s, the form its store turns into rows.

use std::sync::Arc;

use super::{intern, AttrValue, CpuSource, SpanRecord};
use crate::counters::CounterValues;

/// Most distinct names (span names and attribute keys) [`OwnedSpan::into_record`] takes
/// into this process's table of names over its life: names are interned for good, so a
/// sender that makes up a name per span is refused past this instead of growing it.
pub const MAX_NAMES: usize = 100_000;

/// [`SpanRecord`] with owned names.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct OwnedSpan {
    pub id: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<u64>,
    pub trace: u64,
    pub name: String,
    pub thread_id: u64,
    pub thread_name: String,
    pub start_ns: u64,
    pub end_ns: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attrs: Vec<(String, AttrValue)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counters: Option<CounterValues>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_cpu_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_cpu_source: Option<CpuSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_cpu_interpolated_ns: Option<u64>,
}

impl From<&SpanRecord> for OwnedSpan {
    fn from(s: &SpanRecord) -> OwnedSpan {
        OwnedSpan {
            id: s.id,
            parent: s.parent,
            trace: s.trace,
            name: s.name.to_string(),
            thread_id: s.thread_id,
            thread_name: s.thread_name.to_string(),
            start_ns: s.start_ns,
            end_ns: s.end_ns,
            attrs: s
                .attrs
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
            counters: s.counters,
            process_cpu_ns: s.process_cpu_ns,
            process_cpu_source: s.process_cpu_source,
            process_cpu_interpolated_ns: s.process_cpu_interpolated_ns,
        }
    }
}

impl OwnedSpan {
    /// The span as this process's [`SpanRecord`], its names interned; refused where the
    /// table of names is full ([`MAX_NAMES`]) and a name is new, or where the span ends
    /// before it starts.
    pub fn into_record(self) -> Result<SpanRecord, String> {
        if self.end_ns < self.start_ns {
            return Err(format!(
                "span {} ({:?}) ends at {} ns, before it starts at {} ns",
                self.id, self.name, self.end_ns, self.start_ns
            ));
        }
        let name = bounded_intern(&self.name)?;
        let attrs = self
            .attrs
            .into_iter()
            .map(|(k, v)| Ok((bounded_intern(&k)?, v)))
            .collect::<Result<Vec<_>, String>>()?;
        Ok(SpanRecord {
            id: self.id,
            parent: self.parent,
            trace: self.trace,
            name,
            thread_id: self.thread_id,
            thread_name: Arc::from(self.thread_name),
            start_ns: self.start_ns,
            end_ns: self.end_ns,
            attrs,
            counters: self.counters,
            process_cpu_ns: self.process_cpu_ns,
            process_cpu_source: self.process_cpu_source,
            process_cpu_interpolated_ns: self.process_cpu_interpolated_ns,
        })
    }
}

/// [`intern`], refusing a new name once [`MAX_NAMES`] were taken through here.
fn bounded_intern(name: &str) -> Result<&'static str, String> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static TAKEN: std::sync::OnceLock<std::sync::Mutex<std::collections::HashSet<String>>> =
        std::sync::OnceLock::new();
    static COUNT: AtomicUsize = AtomicUsize::new(0);
    let mut seen = TAKEN
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if !seen.contains(name) {
        if COUNT.load(Ordering::Relaxed) >= MAX_NAMES {
            return Err(format!(
                "more than {MAX_NAMES} distinct span and attribute names from workload \
                 binaries (new: {name:?}); give spans fixed names and put what varies in \
                 attributes"
            ));
        }
        seen.insert(name.to_string());
        COUNT.fetch_add(1, Ordering::Relaxed);
    }
    Ok(intern(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_span_crosses_as_json_and_comes_back_the_same() {
        let rec = SpanRecord {
            id: 7,
            parent: Some(3),
            trace: 3,
            name: "digest",
            thread_id: 12,
            thread_name: Arc::from("worker-1"),
            start_ns: 100,
            end_ns: 250,
            attrs: vec![("bytes", AttrValue::U64(4096)), ("algo", "sha256".into())],
            counters: Some(CounterValues([Some(5), None, Some(1), None, None, Some(9)])),
            process_cpu_ns: Some(140),
            process_cpu_source: Some(CpuSource::Interpolated),
            process_cpu_interpolated_ns: None,
        };
        let json = serde_json::to_string(&OwnedSpan::from(&rec)).unwrap();
        let back: OwnedSpan = serde_json::from_str(&json).unwrap();
        let again = back.into_record().unwrap();
        assert_eq!(format!("{again:?}"), format!("{rec:?}"));
    }

    #[test]
    fn a_span_that_ends_before_it_starts_is_refused() {
        let mut s = OwnedSpan::from(&SpanRecord {
            id: 1,
            parent: None,
            trace: 1,
            name: "x",
            thread_id: 1,
            thread_name: Arc::from("t"),
            start_ns: 10,
            end_ns: 20,
            attrs: Vec::new(),
            counters: None,
            process_cpu_ns: None,
            process_cpu_source: None,
            process_cpu_interpolated_ns: None,
        });
        s.end_ns = 5;
        let e = s.into_record().unwrap_err();
        assert!(e.contains("before it starts"), "{e}");
    }
}
