//! The recorder's end of the `tracing` layer (`gapscope-tracing`): gapscope registers
//! itself as the layer's host, so that spans of the `tracing` crate in code the harness
//! runs (a patched dependency, say) become spans of the rep beside the prover's own.
//!
//! The layer records a span from its creation to its close, possibly on two threads,
//! while the recorder's spans open and close on one thread's stack; so finished layer
//! spans are kept here, per trace, and [`drain_into`] adds them to the recorder's spans
//! of a rep. A span with no `tracing` parent nests under the recorder's innermost open
//! span of the thread that created it; one created outside any rep is dropped.

use std::sync::{Arc, Mutex, OnceLock};

use gapscope_tracing::{Finished, HostContext, HostSink, Value};

use crate::trace::{self, AttrValue, SpanRecord};

static FINISHED: Mutex<Vec<SpanRecord>> = Mutex::new(Vec::new());

fn current() -> Option<HostContext> {
    trace::current().map(|c| HostContext {
        id: c.id,
        trace: c.trace,
    })
}

fn finished(f: &Finished<'_>) {
    if f.trace == 0 {
        return;
    }
    let attrs = f
        .attrs
        .iter()
        .map(|(k, v)| {
            let v = match v {
                Value::U64(n) => AttrValue::U64(*n),
                Value::I64(n) => AttrValue::I64(*n),
                Value::F64(n) => AttrValue::F64(*n),
                Value::Bool(b) => AttrValue::Str(b.to_string()),
                Value::Str(s) => AttrValue::Str(s.as_str().to_string()),
            };
            (k, v)
        })
        .collect();
    let name = match f.thread_name {
        Some(n) => n.to_string(),
        None => format!("thread-{}", f.tid),
    };
    let rec = SpanRecord {
        id: f.id,
        parent: (f.parent != 0).then_some(f.parent),
        trace: f.trace,
        name: f.name,
        thread_id: f.tid,
        thread_name: Arc::from(name),
        start_ns: f.start_ns,
        end_ns: f.end_ns,
        attrs,
        counters: None,
        // Where the layer read the process CPU clock at both ends of the span.
        process_cpu_ns: f.process_cpu_ns,
        process_cpu_source: f
            .process_cpu_ns
            .map(|_| trace::process_cpu::CpuSource::Exact),
        process_cpu_interpolated_ns: None,
    };
    FINISHED.lock().unwrap_or_else(|e| e.into_inner()).push(rec);
}

static SINK: HostSink = HostSink { current, finished };

/// Makes this process the layer's host and installs the layer as the process's
/// `tracing` subscriber (once; later calls do nothing). Where the program already set a
/// global subscriber, that one stays and `tracing` spans are not recorded: returns false.
pub fn install() -> bool {
    static INSTALLED: OnceLock<bool> = OnceLock::new();
    *INSTALLED.get_or_init(|| {
        use tracing_subscriber::layer::SubscriberExt;
        gapscope_tracing::set_host_sink(&SINK);
        let sub = tracing_subscriber::registry().with(gapscope_tracing::layer());
        tracing::subscriber::set_global_default(sub).is_ok()
    })
}

/// Moves the finished `tracing` spans of `trace` into `spans`, kept in start order.
pub fn drain_into(trace: u64, spans: &mut Vec<SpanRecord>) {
    let mut all = FINISHED.lock().unwrap_or_else(|e| e.into_inner());
    if !all.iter().any(|r| r.trace == trace) {
        return;
    }
    let (mine, rest): (Vec<_>, Vec<_>) = all.drain(..).partition(|r| r.trace == trace);
    *all = rest;
    drop(all);
    spans.extend(mine);
    spans.sort_by_key(|r| (r.start_ns, r.id));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracing_spans_nest_under_the_recorders_span_and_across_threads() {
        assert!(install(), "no other global subscriber in the test binary");
        let root = trace::Span::enter("prove");
        let trace_id = root.trace();
        {
            let wrapper = tracing::info_span!("gpu_prove", bytes = 8u64);
            let p = wrapper.clone();
            drop(wrapper);
            std::thread::spawn(move || {
                let _k = tracing::info_span!(parent: &p, "kernels").entered();
                // The last handle to the wrapper drops here, on another thread.
                drop(p);
            })
            .join()
            .unwrap();
        }
        drop(root);
        let mut spans = trace::drain_trace(trace_id);
        drain_into(trace_id, &mut spans);
        let find = |n: &str| spans.iter().find(|s| s.name == n).unwrap();
        let (prove, wrapper, kernels) = (find("prove"), find("gpu_prove"), find("kernels"));
        // The creator's name, also for a span closed on another thread.
        let here = std::thread::current().name().map(str::to_string);
        assert_eq!(Some(&*wrapper.thread_name), here.as_deref());
        assert_eq!(wrapper.parent, Some(prove.id));
        assert_eq!(kernels.parent, Some(wrapper.id));
        assert_ne!(kernels.thread_id, wrapper.thread_id);
        assert_eq!(wrapper.attrs, vec![("bytes", AttrValue::U64(8))]);
        // Rows come out with the self time of the wrapper less its child's interval
        // only on its own thread (the kernels ran on another).
        let rows = crate::store::span_rows(0, "v", &spans);
        let w = rows.iter().find(|r| r.name == "gpu_prove").unwrap();
        assert_eq!(w.parent_id, Some(prove.id));
    }
}
