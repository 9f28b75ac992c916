//! Span-line mode end to end: the layer writes `X` lines to the descriptor named by
//! `GAPSCOPE_SPAN_FD`, which gapscope's parser reads back.

use std::io::{Read, Seek};
use std::os::fd::AsRawFd;

use tracing_subscriber::prelude::*;

#[test]
fn spans_become_complete_lines_with_ids_parents_and_fields() {
    let mut file = tempfile_in_target();
    // SAFETY: the test sets the variable before any thread reads it.
    unsafe { std::env::set_var("GAPSCOPE_SPAN_FD", file.as_raw_fd().to_string()) };
    let layer = gapscope_tracing::layer();
    assert!(layer.is_active());
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        let outer = tracing::info_span!("gpu prove", bytes = 4096u64, what = ?vec![1, 2]).entered();
        let p = outer.clone();
        let dispatch = tracing::dispatcher::get_default(|d| d.clone());
        std::thread::spawn(move || {
            tracing::dispatcher::with_default(&dispatch, || {
                let _c = tracing::info_span!(parent: &p, "kernels").entered();
            })
        })
        .join()
        .unwrap();
        drop(outer);
    });
    let mut text = String::new();
    file.rewind().unwrap();
    file.read_to_string(&mut text).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    let k = lines.iter().find(|l| l.contains(" kernels ")).unwrap();
    let o = lines.iter().find(|l| l.contains(" gpu_prove ")).unwrap();
    assert!(o.starts_with("@gapscope1 X "), "{o}");
    assert!(
        o.contains(" bytes=4096") && o.contains(" what=[1,_2]"),
        "{o}"
    );
    let id = o.split(' ').find_map(|w| w.strip_prefix("gs.id=")).unwrap();
    assert!(k.contains(&format!(" gs.parent={id}")), "{k} under {o}");
    let tid = |l: &str| l.split(' ').nth(2).unwrap().to_string();
    assert_ne!(tid(k), tid(o));
}

fn tempfile_in_target() -> std::fs::File {
    let p = std::env::temp_dir().join(format!("gapscope-tracing-lines-{}", std::process::id()));
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
