//! The layer in host mode, with a sink that keeps what it is handed.

use std::sync::Mutex;

use tracing_subscriber::prelude::*;

use super::*;

#[derive(Debug, Clone)]
struct Got {
    id: u64,
    parent: u64,
    trace: u64,
    name: &'static str,
    tid: u64,
    start_ns: u64,
    end_ns: u64,
    attrs: Vec<(String, String)>,
}

static GOT: Mutex<Vec<Got>> = Mutex::new(Vec::new());
/// The host's "open span" each test thread reports (id, trace), by thread id.
static HOST_OPEN: Mutex<Vec<(u64, HostContext)>> = Mutex::new(Vec::new());
/// Tests share the sink: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn current() -> Option<HostContext> {
    let tid = thread_id();
    HOST_OPEN
        .lock()
        .unwrap()
        .iter()
        .find(|(t, _)| *t == tid)
        .map(|(_, c)| *c)
}

fn finished(f: &Finished<'_>) {
    GOT.lock().unwrap().push(Got {
        id: f.id,
        parent: f.parent,
        trace: f.trace,
        name: f.name,
        tid: f.tid,
        start_ns: f.start_ns,
        end_ns: f.end_ns,
        attrs: f
            .attrs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    });
}

static SINK: HostSink = HostSink { current, finished };

fn run(f: impl FnOnce()) -> Vec<Got> {
    GOT.lock().unwrap().clear();
    let sub = tracing_subscriber::registry().with(GapscopeLayer::host_for_tests(&SINK));
    tracing::subscriber::with_default(sub, f);
    std::mem::take(&mut *GOT.lock().unwrap())
}

fn by_name<'a>(got: &'a [Got], name: &str) -> &'a Got {
    got.iter()
        .find(|g| g.name == name)
        .unwrap_or_else(|| panic!("no {name} in {got:?}"))
}

#[test]
fn children_nest_under_their_parent_on_this_thread_and_on_another() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let got = run(|| {
        let outer = tracing::info_span!("outer", size = 12u64, label = "a b");
        let _e = outer.enter();
        {
            let _inner = tracing::info_span!("inner").entered();
        }
        let dispatch = tracing::dispatcher::get_default(|d| d.clone());
        let parent = outer.clone();
        std::thread::spawn(move || {
            tracing::dispatcher::with_default(&dispatch, || {
                let _w = tracing::info_span!(parent: &parent, "on_worker", i = -3i64).entered();
                // Contextual on the worker: under on_worker.
                let _x = tracing::info_span!("worker_child").entered();
            })
        })
        .join()
        .unwrap();
    });
    assert_eq!(got.len(), 4, "{got:?}");
    let outer = by_name(&got, "outer");
    assert_eq!(outer.parent, 0);
    assert!(outer.id >= HOST_ID_BASE);
    assert_eq!(
        outer.attrs,
        vec![("size".into(), "12".into()), ("label".into(), "a b".into())]
    );
    assert_eq!(by_name(&got, "inner").parent, outer.id);
    let w = by_name(&got, "on_worker");
    assert_eq!(w.parent, outer.id);
    assert_ne!(
        w.tid, outer.tid,
        "the worker span is on the worker's thread"
    );
    assert_eq!(w.attrs, vec![("i".into(), "-3".into())]);
    assert_eq!(by_name(&got, "worker_child").parent, w.id);
    for g in &got {
        assert!(g.start_ns <= g.end_ns && g.start_ns >= outer.start_ns && g.end_ns <= outer.end_ns);
    }
}

#[test]
fn a_root_nests_under_the_hosts_open_span_and_children_inherit_its_trace() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let host = HostContext {
        id: 4096,
        trace: 4096,
    };
    HOST_OPEN.lock().unwrap().push((thread_id(), host));
    let got = run(|| {
        let _a = tracing::info_span!("a").entered();
        let _b = tracing::info_span!("b").entered();
    });
    HOST_OPEN.lock().unwrap().clear();
    let (a, b) = (by_name(&got, "a"), by_name(&got, "b"));
    assert_eq!((a.parent, a.trace), (4096, 4096));
    assert_eq!((b.parent, b.trace), (a.id, 4096));
}

#[test]
fn a_span_lasts_from_new_to_close_across_enters_and_records_update_fields() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let got = run(|| {
        let s = tracing::info_span!("task", polls = tracing::field::Empty);
        s.in_scope(|| {});
        // Not entered here: an await that yielded.
        let t0 = gapscope_emit::now_ns();
        while gapscope_emit::now_ns() - t0 < 2_000_000 {
            std::hint::spin_loop();
        }
        s.in_scope(|| {});
        s.record("polls", 2u64);
    });
    let t = by_name(&got, "task");
    assert!(t.end_ns - t.start_ns >= 2_000_000, "{t:?}");
    assert_eq!(t.attrs, vec![("polls".into(), "2".into())]);
}

#[test]
fn off_records_nothing() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    GOT.lock().unwrap().clear();
    let l = GapscopeLayer::with_mode(Mode::Off);
    assert!(!l.is_active());
    tracing::subscriber::with_default(tracing_subscriber::registry().with(l), || {
        let _a = tracing::info_span!("a").entered();
    });
    assert!(GOT.lock().unwrap().is_empty());
}
