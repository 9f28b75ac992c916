//! What a new run folder starts from: its id, its meta.json before the first rep
//! ([`NewRun::meta`]), and the spans.csv rows of one rep's drained trace ([`span_rows`]).
//! The experiment runner and the GPU self-test both write run folders through these, so
//! the two agree on every field.

use std::collections::BTreeMap;
use std::path::Path;

use super::envinfo;
use super::schema::{GpuMeta, Meta, SpanRow, VariantMeta, WorkloadMeta, SCHEMA_VERSION};
use crate::counters::{Availability, CounterKind};
use crate::phases::PhaseSpec;
use crate::trace::{self, selftime};

/// A new run's folder name: UTC time and a short nonce.
pub fn run_id() -> String {
    let now = chrono::Utc::now();
    let nonce = (trace::now_ns() ^ ((std::process::id() as u64) << 20)) & 0xff_ffff;
    format!("{}-{nonce:06x}", now.format("%Y%m%dT%H%M%SZ"))
}

/// What a new run says about itself; [`NewRun::meta`] adds this machine, this revision
/// and a fresh run id.
#[derive(Debug, Clone)]
pub struct NewRun {
    pub experiment: String,
    /// The command line that started the run.
    pub command: Vec<String>,
    pub counters: BTreeMap<String, Availability>,
    pub gpu: GpuMeta,
    pub workload: WorkloadMeta,
    /// The names of the workload's span tree the readers look up.
    pub phases: PhaseSpec,
    pub variants: Vec<VariantMeta>,
    pub reps: u32,
    pub warmups: u32,
    pub order: String,
    pub process: String,
}

impl NewRun {
    /// meta.json of a run that has not started: no params, no setup, not completed.
    pub fn meta(self) -> Meta {
        let mut meta = self.meta_unrecorded();
        meta.recorder = Some(trace::cost::recorder_meta());
        meta
    }

    /// [`NewRun::meta`] of a run none of whose spans go through gapscope's recorder (an
    /// import): the recorder's cost is not measured (that takes a fifth of a second)
    /// nor recorded.
    pub fn meta_unrecorded(self) -> Meta {
        Meta {
            schema_version: SCHEMA_VERSION,
            gapscope_version: env!("CARGO_PKG_VERSION").into(),
            experiment: self.experiment,
            run_id: run_id(),
            created_utc: chrono::Utc::now().to_rfc3339(),
            command: self.command,
            host: envinfo::host(),
            git: envinfo::git(Path::new(".")),
            counters: self.counters,
            gpu: self.gpu,
            workload: self.workload,
            variants: self.variants,
            reps: self.reps,
            warmups: self.warmups,
            order: self.order,
            process: self.process,
            params: Vec::new(),
            setup_ns: BTreeMap::new(),
            completed_utc: None,
            experiment_sha256: None,
            command_workload: None,
            profile: Default::default(),
            recorder: None,
            drift: None,
            gaps: None,
            until_decided: None,
            phases: Some(self.phases),
            paths: Some(super::paths::PathsMeta::here()),
        }
    }
}

/// Converts drained spans to rows (with self time) for one rep.
pub fn span_rows(rep: u32, variant: &str, spans: &[trace::SpanRecord]) -> Vec<SpanRow> {
    let ivs: Vec<selftime::Interval> = spans
        .iter()
        .map(|s| selftime::Interval {
            id: s.id,
            parent: s.parent,
            thread_id: s.thread_id,
            start_ns: s.start_ns,
            end_ns: s.end_ns,
        })
        .collect();
    let selfs = selftime::self_times(&ivs);
    spans
        .iter()
        .zip(selfs)
        .map(|(s, self_ns)| {
            let c = |k: CounterKind| s.counters.and_then(|v| v.get(k));
            let mut attrs: serde_json::Map<String, serde_json::Value> = s
                .attrs
                .iter()
                .map(|(k, v)| (k.to_string(), serde_json::to_value(v).unwrap_or_default()))
                .collect();
            // Interpolated from samples or read at both ends (trace::process_cpu).
            if let Some(src) = s.process_cpu_source {
                attrs.insert("process_cpu".into(), src.as_str().into());
            }
            if let Some(v) = s.process_cpu_interpolated_ns {
                attrs.insert("process_cpu_interpolated_ns".into(), v.into());
            }
            SpanRow {
                rep,
                variant: variant.to_string().into(),
                span_id: s.id,
                parent_id: s.parent,
                name: s.name.to_string().into(),
                thread_id: s.thread_id,
                thread_name: s.thread_name.to_string().into(),
                start_ns: s.start_ns,
                end_ns: s.end_ns,
                duration_ns: s.duration_ns(),
                self_ns,
                instructions: c(CounterKind::Instructions).into(),
                branches: c(CounterKind::Branches).into(),
                cycles: c(CounterKind::Cycles).into(),
                task_clock_ns: c(CounterKind::TaskClockNs).into(),
                page_faults: c(CounterKind::PageFaults).into(),
                context_switches: c(CounterKind::ContextSwitches).into(),
                attrs: serde_json::Value::Object(attrs).to_string().into(),
                gpu_busy_ns: None.into(),
                process_cpu_ns: s.process_cpu_ns.into(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_sort_by_time_and_differ() {
        let a = run_id();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = run_id();
        // 20260101T000000Z-abcdef
        assert_eq!(a.len(), 23, "{a}");
        assert_eq!(&a[8..9], "T");
        assert_eq!(&a[15..17], "Z-");
        assert_ne!(a, b);
        assert!(a[..16] <= b[..16]);
    }

    #[test]
    fn span_rows_carry_self_time_and_counters_absent_when_off() {
        let root = trace::Span::enter("nr_root");
        let id = root.trace();
        {
            let _child = trace::Span::enter("nr_child");
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        drop(root);
        let spans = trace::drain_trace(id);
        let rows = span_rows(3, "v", &spans);
        assert_eq!(rows.len(), 2);
        let r = rows.iter().find(|r| r.name == "nr_root").unwrap();
        let c = rows.iter().find(|r| r.name == "nr_child").unwrap();
        assert!(rows.iter().all(|r| r.rep == 3 && r.variant == "v"));
        assert_eq!(c.parent_id, Some(r.span_id));
        assert_eq!(r.self_ns, r.duration_ns - c.duration_ns);
        assert!(c.duration_ns >= 2_000_000);
        // Only the label of the process CPU figure (interpolated unless exact mode).
        assert!(
            r.attrs == r#"{"process_cpu":"interpolated"}"#
                || r.attrs.starts_with(r#"{"process_cpu":"exact""#),
            "{}",
            r.attrs
        );
    }
}
