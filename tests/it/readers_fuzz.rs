//! Every reader of a run folder fed random bytes and random edits of real results files
//! (runs.csv, spans.csv, telemetry.csv, gpu_activity.csv, meta.json) and of an
//! experiment file: each answers with a value or a clean error, never a panic. What the
//! readers hand on (the phase table, the leak watch, the charts' view and the Chrome
//! export) is run on whatever they accept, since a reader that accepts nonsense must not
//! make the next step panic either. Every case runs under a time limit, so a reader
//! that hangs (a parent loop walked forever, a table read without end) fails its case
//! instead of stalling the suite; crafted span trees (repeated ids, loops, impossible
//! times) are a property of their own, and so are GPU tables of any values (only rows a
//! run could write are kept, every other is named by its line). crate::fuzz runs the
//! cases: a few seconds of them in `cargo test`, or `GAPSCOPE_FUZZ_SECONDS` of them.

use crate::fixture;
use crate::fuzz::{apply, edit, fuzz, raw, Edit};

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use gapscope::experiment::Experiment;
use gapscope::export::{ExportFormat, RepSelection};
use gapscope::store::{self, RunData, RunView};
use proptest::prelude::*;

const FILES: [&str; 5] = [
    "runs.csv",
    "spans.csv",
    "telemetry.csv",
    "gpu_activity.csv",
    "meta.json",
];

/// A real run folder with GPU files, written once; each case edits a copy.
pub fn original() -> &'static (tempfile::TempDir, PathBuf) {
    static DIR: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    DIR.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        let dir = fixture::write(
            tmp.path(),
            &fixture::Options {
                gpu: true,
                all_failed: false,
            },
        );
        (tmp, dir)
    })
}

/// A copy of the original folder with `edits` applied to `file`.
fn edited(file: &str, edits: &[Edit], replace: Option<&[u8]>) -> (tempfile::TempDir, PathBuf) {
    let (_, orig) = original();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    std::fs::create_dir(&dir).unwrap();
    for e in std::fs::read_dir(orig).unwrap().flatten() {
        std::fs::copy(e.path(), dir.join(e.file_name())).unwrap();
    }
    let path = dir.join(file);
    let mut bytes = match replace {
        Some(b) => b.to_vec(),
        None => std::fs::read(&path).unwrap(),
    };
    for e in edits {
        apply(&mut bytes, e);
    }
    std::fs::write(&path, bytes).unwrap();
    (tmp, dir)
}

/// Every reader, and what they hand on; errors are fine, panics fail the case.
pub fn read_everything(dir: &Path) {
    let _ = store::read_meta(dir);
    // The end of a run's reading, a rep at a time (also of folders a whole load refuses).
    if let Ok(by_rep) = RunData::load_spans_by_rep(dir) {
        let _ = gapscope::summary::phase_table_and(&by_rep, |_| {});
    }
    let Ok(data) = RunData::load(dir) else {
        return;
    };
    let _ = data.load_telemetry();
    let _ = data.load_gpu_activity();
    let _ = gapscope::summary::phase_table(&data);
    let _ = gapscope::telemetry::leak_flags(&data);
    let view = RunView::new(data);
    let _ = ExportFormat::Chrome
        .exporter()
        .serialize(&view, RepSelection::All);
    let _ = gapscope::report::sections::spans_section(&view, &Default::default());
    let _ = gapscope::report::sections::counters_section(&view);
    let _ = gapscope::report::phase_section(&gapscope::report::diffs(&view.data));
}

/// A copy of the original folder whose spans.csv has, per row, its span id and parent
/// replaced by small numbers (so that ids repeat and parents form loops) and, where
/// asked, its times set past the clock or reversed.
fn crafted_tree(edits: &[(u8, Option<u8>, u8)]) -> (tempfile::TempDir, PathBuf) {
    let (tmp, dir) = edited("spans.csv", &[], None);
    let path = dir.join("spans.csv");
    let mut rows: Vec<store::SpanRow> = store::read_csv(&path).unwrap();
    for (row, (id, parent, time)) in rows.iter_mut().zip(edits) {
        row.span_id = u64::from(*id);
        row.parent_id = parent.map(u64::from);
        match time % 4 {
            1 => row.end_ns = u64::MAX,
            2 => std::mem::swap(&mut row.start_ns, &mut row.end_ns),
            3 => row.self_ns = u64::MAX,
            _ => {}
        }
    }
    let mut w = csv::Writer::from_path(&path).unwrap();
    for r in &rows {
        w.serialize(r).unwrap();
    }
    w.flush().unwrap();
    (tmp, dir)
}

/// A copy of the original folder whose telemetry.csv and gpu_activity.csv are rows
/// made from `tel` and `act`: each a template row of the fixture with a rep (some not in
/// runs.csv), a time near its rep or anywhere, and values in or out of range.
#[allow(clippy::type_complexity)]
fn gpu_tables(
    tel: &[(u32, u64, bool, Option<u32>, Option<u32>, Option<u32>)],
    act: &[(u32, u64, bool, u64, u64)],
) -> (tempfile::TempDir, PathBuf) {
    let (tmp, dir) = edited("runs.csv", &[], None);
    let data = RunData::load(&dir).unwrap();
    let start = |rep: u32| {
        data.runs
            .iter()
            .find(|r| r.rep == rep)
            .map_or(0, |r| r.start_ns)
    };
    let t0 = data.load_telemetry().unwrap()[0].clone();
    let a0 = data.load_gpu_activity().unwrap()[0].clone();
    let mut w = csv::Writer::from_path(dir.join("telemetry.csv")).unwrap();
    for &(rep, t, near, sm, mem, temp) in tel {
        let mut r = t0.clone();
        r.rep = rep;
        r.t_ns = if near {
            start(rep).wrapping_add(t % 20_000_000_000)
        } else {
            t
        };
        (r.sm_util_pct, r.mem_util_pct, r.temperature_c) = (sm, mem, temp);
        w.serialize(&r).unwrap();
    }
    w.flush().unwrap();
    let mut w = csv::Writer::from_path(dir.join("gpu_activity.csv")).unwrap();
    for &(rep, t, near, len, dur) in act {
        let mut r = a0.clone();
        r.rep = rep;
        r.start_ns = if near {
            start(rep).wrapping_add(t % 20_000_000_000)
        } else {
            t
        };
        r.end_ns = if near {
            r.start_ns.wrapping_add(len % 1_000_000)
        } else {
            len
        };
        r.duration_ns = if near {
            r.end_ns.wrapping_sub(r.start_ns)
        } else {
            dur
        };
        w.serialize(&r).unwrap();
    }
    w.flush().unwrap();
    (tmp, dir)
}

/// Whether every kept row is one a run could write, and every left-out row was named.
fn check_gpu_tables(dir: &Path, n_tel: usize, n_act: usize) {
    let data = RunData::load(dir).unwrap();
    let (tel, why) = data.load_telemetry_checked().unwrap();
    for r in &tel {
        assert!(r.sm_util_pct.is_none_or(|v| v <= 100), "{r:?}");
        assert!(r.mem_util_pct.is_none_or(|v| v <= 100), "{r:?}");
        assert!(r.t_ns <= i64::MAX as u64, "{r:?}");
    }
    assert_eq!(tel.len() < n_tel, !why.is_empty(), "{why:?}");
    assert!(
        why.iter().all(|w| w.starts_with("telemetry.csv, line ")),
        "{why:?}"
    );
    let (act, why) = data.load_gpu_activity_checked().unwrap();
    for r in &act {
        assert!(
            r.start_ns <= r.end_ns && r.end_ns <= i64::MAX as u64,
            "{r:?}"
        );
        assert_eq!(r.duration_ns, r.end_ns - r.start_ns, "{r:?}");
    }
    assert_eq!(act.len() < n_act, !why.is_empty(), "{why:?}");
    assert!(
        why.iter().all(|w| w.starts_with("gpu_activity.csv, line ")),
        "{why:?}"
    );
    // What hands the rows on (the charts' view, the report's sections) copes as well.
    let view = RunView::new(data);
    let _ = ExportFormat::Chrome
        .exporter()
        .serialize(&view, RepSelection::All);
    let _ = gapscope::report::sections::spans_section(&view, &Default::default());
}

/// Cases per target in a plain `cargo test` (a few seconds in a debug build).
const QUICK: u32 = 96;

#[test]
fn edited_results_files_give_values_or_clean_errors() {
    let files = prop::sample::select(FILES.to_vec());
    fuzz(
        QUICK,
        (files, prop::collection::vec(edit(), 1..5)),
        |(file, edits)| {
            let (_tmp, dir) = edited(file, &edits, None);
            read_everything(&dir);
        },
    );
}

#[test]
fn crafted_span_trees_give_values_or_clean_errors() {
    let edit = (0u8..8, prop::option::of(0u8..8), 0u8..12);
    fuzz(QUICK, prop::collection::vec(edit, 1..64), |edits| {
        let (_tmp, dir) = crafted_tree(&edits);
        read_everything(&dir);
    });
}

#[test]
fn random_bytes_as_a_results_file_give_clean_errors() {
    let files = prop::sample::select(FILES.to_vec());
    fuzz(QUICK, (files, raw(512)), |(file, bytes)| {
        let (_tmp, dir) = edited(file, &[], Some(&bytes.0));
        read_everything(&dir);
    });
}

#[test]
fn gpu_rows_with_any_values_are_kept_only_when_possible_and_named_when_not() {
    let percent = || prop::option::of(prop_oneof![0u32..=100, any::<u32>()]);
    let tel = (
        0u32..8,
        any::<u64>(),
        any::<bool>(),
        percent(),
        prop::option::of(0u32..=120),
        percent(),
    );
    let act = (
        0u32..8,
        any::<u64>(),
        any::<bool>(),
        any::<u64>(),
        any::<u64>(),
    );
    fuzz(
        QUICK,
        (
            prop::collection::vec(tel, 1..48),
            prop::collection::vec(act, 1..48),
        ),
        |(tel, act)| {
            let (_tmp, dir) = gpu_tables(&tel, &act);
            check_gpu_tables(&dir, tel.len(), act.len());
        },
    );
}

#[test]
fn edited_or_random_experiment_files_give_clean_errors() {
    let random = prop::option::of(raw(512));
    fuzz(
        QUICK,
        (prop::collection::vec(edit(), 0..5), random),
        |(edits, random)| {
            let mut bytes = random.map(|r| r.0).unwrap_or_else(|| {
                std::fs::read(concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/experiments/quickstart.toml"
                ))
                .unwrap()
            });
            for e in &edits {
                apply(&mut bytes, e);
            }
            let text = String::from_utf8_lossy(&bytes);
            let _ = Experiment::parse(&text, Path::new("fuzz.toml"));
        },
    );
}
