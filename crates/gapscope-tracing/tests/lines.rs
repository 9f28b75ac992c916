//! Span-line mode end to end: the layer writes `X` lines (and a `T` line per thread) to
//! the descriptor named by `GAPSCOPE_SPAN_FD`, in batches; what a thread still keeps
//! when the process exits is written then.

use std::io::{Read, Seek};
use std::os::fd::AsRawFd;

use tracing_subscriber::prelude::*;

/// `flush()` writes every thread's batch: the tests that watch when a batch is written
/// run one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn spans_become_complete_lines_with_ids_parents_fields_and_thread_names() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut file = tempfile_in_target();
    // SAFETY: the test sets the variable before any thread reads it.
    unsafe { std::env::set_var("GAPSCOPE_SPAN_FD", file.as_raw_fd().to_string()) };
    let layer = gapscope_tracing::layer();
    assert!(layer.is_active());
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        let outer = tracing::info_span!("gpu prove", bytes = 4096u64, what = ?vec![1, 2]).entered();
        let p = outer.clone();
        let dispatch = tracing::dispatcher::get_default(|d| d.clone());
        std::thread::Builder::new()
            .name("tokio-runtime-worker".into())
            .spawn(move || {
                tracing::dispatcher::with_default(&dispatch, || {
                    let _c = tracing::info_span!(parent: &p, "kernels").entered();
                })
            })
            .unwrap()
            .join()
            .unwrap();
        drop(outer);
    });
    // The worker wrote its lines when it exited; this thread's wait for a flush.
    let text = read_all(&mut file);
    assert!(!text.contains(" gpu_prove "), "not written yet: {text}");
    gapscope_tracing::flush();
    let text = read_all(&mut file);
    let lines: Vec<&str> = text.lines().collect();
    let spans: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.contains(" X "))
        .collect();
    assert_eq!(spans.len(), 2, "{text}");
    let k = spans.iter().find(|l| l.contains(" kernels ")).unwrap();
    let o = spans.iter().find(|l| l.contains(" gpu_prove ")).unwrap();
    assert!(o.starts_with("@gapscope1 X "), "{o}");
    assert!(
        o.contains(" bytes=4096") && o.contains(" what=[1,_2]"),
        "{o}"
    );
    assert!(!o.contains("process_cpu_ns"), "off unless asked: {o}");
    let id = o.split(' ').find_map(|w| w.strip_prefix("gs.id=")).unwrap();
    assert!(k.contains(&format!(" gs.parent={id}")), "{k} under {o}");
    let tid = |l: &str| l.split(' ').nth(2).unwrap().to_string();
    assert_ne!(tid(k), tid(o));
    let pid = std::process::id();
    assert!(
        lines.contains(&format!("@gapscope1 T {} {pid} tokio-runtime-worker", tid(k)).as_str()),
        "{text}"
    );
}

#[test]
fn a_batch_older_than_its_age_is_written_at_the_threads_next_span() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let file: &'static std::fs::File = Box::leak(Box::new(tempfile_in_target()));
    let layer = gapscope_tracing::GapscopeLayer::lines_to_file_for_tests(file);
    let count = |f: &mut std::fs::File| read_all(f).matches(" X ").count();
    // A thread of its own: this test's batch is not shared with the other tests'.
    std::thread::spawn(move || {
        tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
            drop(tracing::info_span!("first").entered());
            // The same file, read through another handle.
            let mut f = file.try_clone().unwrap();
            assert_eq!(count(&mut f), 0, "kept, not written");
            std::thread::sleep(std::time::Duration::from_nanos(
                gapscope_tracing::batch::BATCH_AGE_NS + 5_000_000,
            ));
            drop(tracing::info_span!("second").entered());
            assert_eq!(
                count(&mut f),
                2,
                "the old batch went out with the new span: {}",
                read_all(&mut f)
            );
        })
    })
    .join()
    .unwrap();
}

/// The child of [`lines_kept_at_exit_are_written_by_the_exit`]: spans on this thread
/// and on a thread still running, then `std::process::exit`.
#[test]
#[ignore = "run by lines_kept_at_exit_are_written_by_the_exit"]
fn child_exits_with_lines_kept() {
    let sub = tracing_subscriber::registry().with(gapscope_tracing::layer());
    tracing::subscriber::set_global_default(sub).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for i in 0..100u64 {
            let _s = tracing::info_span!("on_worker", i).entered();
        }
        tx.send(()).unwrap();
        std::thread::park();
    });
    rx.recv().unwrap();
    for i in 0..100u64 {
        let _s = tracing::info_span!("on_main", i).entered();
    }
    std::process::exit(0);
}

#[test]
fn lines_kept_at_exit_are_written_by_the_exit() {
    use std::os::unix::process::CommandExt;
    extern "C" {
        fn fcntl(fd: i32, cmd: i32, arg: i32) -> i32;
    }
    const F_SETFD: i32 = 2;
    let mut file = tempfile_in_target();
    let fd = file.as_raw_fd();
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "child_exits_with_lines_kept",
        "--ignored",
        "--nocapture",
    ])
    .env("GAPSCOPE_SPAN_FD", fd.to_string());
    // SAFETY: fcntl is async-signal-safe; it only lets the child inherit the file.
    unsafe {
        cmd.pre_exec(move || match fcntl(fd, F_SETFD, 0) {
            0 => Ok(()),
            _ => Err(std::io::Error::last_os_error()),
        })
    };
    let status = cmd.status().unwrap();
    assert!(status.success());
    let text = read_all(&mut file);
    let count = |n: &str| text.lines().filter(|l| l.contains(n)).count();
    assert_eq!(count(" on_worker "), 100, "{text}");
    assert_eq!(count(" on_main "), 100, "{text}");
}

fn read_all(file: &mut std::fs::File) -> String {
    let mut text = String::new();
    file.rewind().unwrap();
    file.read_to_string(&mut text).unwrap();
    text
}

fn tempfile_in_target() -> std::fs::File {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let p = std::env::temp_dir().join(format!("gapscope-tracing-lines-{}-{n}", std::process::id()));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&p)
        .unwrap();
    let _ = std::fs::remove_file(&p);
    f
}
