//! Every reader of a run folder fed random bytes and random edits of real results files
//! (runs.csv, spans.csv, telemetry.csv, gpu_activity.csv, meta.json) and of an
//! experiment file: each answers with a value or a clean error, never a panic. What the
//! readers hand on (the phase table, the leak watch, the charts' view and the Chrome
//! export) is run on whatever they accept, since a reader that accepts nonsense must not
//! make the next step panic either. Every case runs under a time limit, so a reader
//! that hangs (a parent loop walked forever, a table read without end) fails its case
//! instead of stalling the suite; crafted span trees (repeated ids, loops, impossible
//! times) are a property of their own, and so are GPU tables of any values (only rows a
//! run could write are kept, every other is named by its line).

use crate::fixture;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

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
fn original() -> &'static (tempfile::TempDir, PathBuf) {
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

/// One edit of a file's bytes.
#[derive(Debug, Clone)]
enum Edit {
    /// Keep this share (per mille) of the file.
    Truncate(u16),
    /// Overwrite bytes at a position (per mille of the length).
    Overwrite(u16, Vec<u8>),
    /// Insert bytes at a position.
    Insert(u16, Vec<u8>),
    /// Remove line `i` (modulo the line count).
    DeleteLine(usize),
    /// Repeat line `i`.
    DuplicateLine(usize),
    /// Replace field `j` of line `i` (CSV: between commas; JSON: a value) with a string.
    Field(usize, usize, String),
}

/// Values a field may be replaced with: empty, signs, overflow, floats, quotes, brackets
/// (span families), separators and line breaks.
fn odd_value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("-1".to_string()),
        Just("18446744073709551615".to_string()),
        Just("18446744073709551616".to_string()),
        Just("9223372036854775808".to_string()),
        Just("4294967296".to_string()),
        Just("1e400".to_string()),
        Just("NaN".to_string()),
        Just("\"".to_string()),
        Just("x[".to_string()),
        Just("[".to_string()),
        Just("]".to_string()),
        Just("a[]".to_string()),
        Just("true".to_string()),
        Just("null".to_string()),
        Just("ok".to_string()),
        Just("failed".to_string()),
        Just("{".to_string()),
        Just(",".to_string()),
        Just("\n".to_string()),
        Just("0".to_string()),
        "[0-9]{1,20}",
        any::<String>(),
    ]
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (0u16..=1000).prop_map(Edit::Truncate),
        (0u16..=1000, prop::collection::vec(any::<u8>(), 1..16))
            .prop_map(|(p, b)| Edit::Overwrite(p, b)),
        (0u16..=1000, prop::collection::vec(any::<u8>(), 1..16))
            .prop_map(|(p, b)| Edit::Insert(p, b)),
        any::<usize>().prop_map(Edit::DeleteLine),
        any::<usize>().prop_map(Edit::DuplicateLine),
        (any::<usize>(), any::<usize>(), odd_value()).prop_map(|(i, j, v)| Edit::Field(i, j, v)),
        (any::<usize>(), any::<usize>(), odd_value()).prop_map(|(i, j, v)| Edit::Field(i, j, v)),
    ]
}

fn at(len: usize, per_mille: u16) -> usize {
    len * per_mille as usize / 1000
}

fn apply(bytes: &mut Vec<u8>, e: &Edit) {
    let lines = || -> Vec<Vec<u8>> { bytes.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect() };
    match e {
        Edit::Truncate(p) => bytes.truncate(at(bytes.len(), *p)),
        Edit::Overwrite(p, b) => {
            let start = at(bytes.len(), *p);
            for (i, x) in b.iter().enumerate() {
                if let Some(slot) = bytes.get_mut(start + i) {
                    *slot = *x;
                }
            }
        }
        Edit::Insert(p, b) => {
            let start = at(bytes.len(), *p);
            bytes.splice(start..start, b.iter().copied());
        }
        Edit::DeleteLine(i) => {
            let mut l = lines();
            let i = i % l.len();
            l.remove(i);
            *bytes = l.join(&b'\n');
        }
        Edit::DuplicateLine(i) => {
            let mut l = lines();
            let i = i % l.len();
            let dup = l[i].clone();
            l.insert(i, dup);
            *bytes = l.join(&b'\n');
        }
        Edit::Field(i, j, v) => {
            let mut l = lines();
            let i = i % l.len();
            let sep = if l[i].contains(&b',') { b',' } else { b':' };
            let mut fields: Vec<Vec<u8>> = l[i].split(|&b| b == sep).map(<[u8]>::to_vec).collect();
            let j = j % fields.len();
            fields[j] = v.as_bytes().to_vec();
            l[i] = fields.join(&sep);
            *bytes = l.join(&b'\n');
        }
    }
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
fn read_everything(dir: &Path) {
    let _ = store::read_meta(dir);
    let Ok(data) = RunData::load(dir) else {
        return;
    };
    let _ = data.load_telemetry();
    let _ = data.load_gpu_activity();
    let _ = gapscope::summary::phase_table(&data);
    let _ = gapscope::telemetry::leak_flags(&data);
    let _ = gapscope::summary_external::rows(&data);
    let view = RunView::new(data);
    let _ = ExportFormat::Chrome
        .exporter()
        .serialize(&view, RepSelection::All);
    let _ = gapscope::report::sections::spans_section(&view, &Default::default());
    let _ = gapscope::report::sections::counters_section(&view);
    let _ = gapscope::report::phase_section(&gapscope::report::diffs(&view.data));
}

/// Longest one case may take (a debug build reads the fixture in well under a second).
const CASE_LIMIT: Duration = Duration::from_secs(30);

/// [`read_everything`] on its own thread, failing the case when it panics or has not
/// returned within [`CASE_LIMIT`] (a hang). The folder lives until the thread is done.
fn read_within_limit(tmp: tempfile::TempDir, dir: PathBuf) {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        read_everything(&dir);
        let _ = tx.send(());
        drop(tmp);
    });
    match rx.recv_timeout(CASE_LIMIT) {
        Ok(()) => {}
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("the readers did not return within {CASE_LIMIT:?}: a hang")
        }
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            panic!("a reader panicked (its message is above)")
        }
    }
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

/// `f` on its own thread, failing the case when it panics or has not returned within
/// [`CASE_LIMIT`].
fn within_limit(f: impl FnOnce() + Send + 'static) {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    match rx.recv_timeout(CASE_LIMIT) {
        Ok(()) => {}
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("the reader did not return within {CASE_LIMIT:?}: a hang")
        }
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            panic!("the reader or a check panicked (its message is above)")
        }
    }
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

/// 96 cases per property (a few seconds in a debug build), or `PROPTEST_CASES`.
fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(96);
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn edited_results_files_give_values_or_clean_errors(
        file in prop::sample::select(FILES.to_vec()),
        edits in prop::collection::vec(edit(), 1..5),
    ) {
        let (tmp, dir) = edited(file, &edits, None);
        read_within_limit(tmp, dir);
    }

    #[test]
    fn crafted_span_trees_give_values_or_clean_errors(
        edits in prop::collection::vec((0u8..8, prop::option::of(0u8..8), 0u8..12), 1..64),
    ) {
        let (tmp, dir) = crafted_tree(&edits);
        read_within_limit(tmp, dir);
    }

    #[test]
    fn random_bytes_as_a_results_file_give_clean_errors(
        file in prop::sample::select(FILES.to_vec()),
        bytes in prop::collection::vec(any::<u8>(), 0..512),
    ) {
        let (tmp, dir) = edited(file, &[], Some(&bytes));
        read_within_limit(tmp, dir);
    }

    #[test]
    fn gpu_rows_with_any_values_are_kept_only_when_possible_and_named_when_not(
        tel in prop::collection::vec(
            (
                0u32..8,
                any::<u64>(),
                any::<bool>(),
                prop::option::of(prop_oneof![0u32..=100, any::<u32>()]),
                prop::option::of(0u32..=120),
                prop::option::of(prop_oneof![0u32..=100, any::<u32>()]),
            ),
            1..48,
        ),
        act in prop::collection::vec(
            (0u32..8, any::<u64>(), any::<bool>(), any::<u64>(), any::<u64>()),
            1..48,
        ),
    ) {
        let (tmp, dir) = gpu_tables(&tel, &act);
        let (n_tel, n_act) = (tel.len(), act.len());
        within_limit(move || {
            check_gpu_tables(&dir, n_tel, n_act);
            drop(tmp);
        });
    }

    #[test]
    fn edited_or_random_experiment_files_give_clean_errors(
        edits in prop::collection::vec(edit(), 0..5),
        random in prop::option::of(prop::collection::vec(any::<u8>(), 0..512)),
    ) {
        let mut bytes = random.unwrap_or_else(|| {
            std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/experiments/quickstart.toml")).unwrap()
        });
        for e in &edits {
            apply(&mut bytes, e);
        }
        let text = String::from_utf8_lossy(&bytes);
        let _ = Experiment::parse(&text, Path::new("fuzz.toml"));
    }
}
