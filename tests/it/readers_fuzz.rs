//! Every reader of a run folder fed random bytes and random edits of real results files
//! (runs.csv, spans.csv, telemetry.csv, gpu_activity.csv, meta.json) and of an
//! experiment file: each answers with a value or a clean error, never a panic. Folders
//! are also laid out as runs and users store them (spans.csv in parts, tables gzipped in
//! one gzip member or several) and then damaged (a part removed, swapped or renamed, a
//! gzip cut short or of garbage, a last line cut as a kill cuts it): undamaged, every
//! reader reads what the folder held; damaged, the readers and the reading of
//! `gapscope run --resume` give a value or an error naming the folder, and a resume
//! never runs again a rep the readers read whole, nor keeps a rep it leaves without all
//! of its rows. What the
//! readers hand on (the phase table, the leak watch, the charts' view and the Chrome
//! export) is run on whatever they accept, since a reader that accepts nonsense must not
//! make the next step panic either. Every case runs under a time limit, so a reader
//! that hangs (a parent loop walked forever, a table read without end) fails its case
//! instead of stalling the suite; crafted span trees (repeated ids, loops, impossible
//! times) are a property of their own, and so are GPU tables of any values (only rows a
//! run could write are kept, every other is named by its line). crate::fuzz runs the
//! cases: a few seconds of them in `cargo test`, or `GAPSCOPE_FUZZ_SECONDS` of them.

use crate::fixture;
use crate::fuzz::{apply, edit, fuzz, gzip, raw, Edit, Raw};

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use gapscope::experiment::Experiment;
use gapscope::export::{ExportFormat, RepSelection};
use gapscope::store::{self, RunData, RunRow, RunView, RunWriter, SpanRow};
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

/// A case of [`edited_results_files_give_values_or_clean_errors`]: one results file
/// edited, or the folder's tables laid out as runs and users store them (spans.csv in
/// parts, tables gzipped) and then damaged.
#[derive(Debug, Clone)]
enum Case {
    Edited(&'static str, Vec<Edit>),
    Laid(Layout, Vec<Damage>),
}

/// The tables a run folder may hold gzipped (`NAME.gz`); meta.json never is.
const GZ_TABLES: [&str; 3] = ["runs.csv", "telemetry.csv", "gpu_activity.csv"];

/// How a case stores the fixture's tables, each way one a reader reads as the folder it
/// came from: spans.csv cut into parts (`spans.2.csv`, …) before the first row of some
/// reps, as a run with a small part size writes them; and some tables gzipped, each in
/// one gzip member or several (cut anywhere, as `cat a.gz b.gz` makes them).
#[derive(Debug, Clone)]
struct Layout {
    /// Reps (by their place among the fixture's reps) whose rows start a part.
    cuts: Vec<usize>,
    /// Parts of spans.csv (by number, modulo the parts) gzipped, with where their text
    /// is cut into members (per mille of its length).
    gz_parts: Vec<(usize, Vec<u16>)>,
    /// Other tables gzipped, in members as above.
    gz_tables: Vec<(&'static str, Vec<u16>)>,
}

fn layout() -> impl Strategy<Value = Layout> {
    let members = || prop::collection::vec(0u16..=1000, 0..3);
    (
        prop::collection::vec(1usize..8, 0..4),
        prop::collection::vec((any::<usize>(), members()), 0..3),
        prop::collection::vec((prop::sample::select(GZ_TABLES.to_vec()), members()), 0..2),
    )
        .prop_map(|(cuts, gz_parts, gz_tables)| Layout {
            cuts,
            gz_parts,
            gz_tables,
        })
}

/// A damage of a laid-out folder; `usize` picks a file (modulo the folder's files, in
/// name order).
#[derive(Debug, Clone)]
enum Damage {
    /// An edit of the file's bytes as stored (a gzipped file's compressed bytes).
    Stored(usize, Edit),
    /// An edit of the file's text, gzipped again where it was gzipped.
    Inside(usize, Edit),
    /// The file's last line cut short by this many bytes (0: its line end only), inside
    /// the gzip where gzipped: what a kill mid-write leaves.
    CutTail(usize, u8),
    /// The file's bytes replaced by these, gzipped where asked (gzip of garbage).
    Replace(usize, Raw, bool),
    /// The file removed.
    Remove(usize),
    /// Two files' bytes swapped (parts reordered).
    Swap(usize, usize),
    /// The file renamed to part `n` of spans.csv (1: spans.csv itself), keeping `.gz`.
    Rename(usize, u8),
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        (any::<usize>(), edit()).prop_map(|(f, e)| Damage::Stored(f, e)),
        (any::<usize>(), edit()).prop_map(|(f, e)| Damage::Inside(f, e)),
        (any::<usize>(), 0u8..12).prop_map(|(f, n)| Damage::CutTail(f, n)),
        (any::<usize>(), raw(256), any::<bool>()).prop_map(|(f, b, gz)| Damage::Replace(f, b, gz)),
        any::<usize>().prop_map(Damage::Remove),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Damage::Swap(a, b)),
        (any::<usize>(), 1u8..7).prop_map(|(f, n)| Damage::Rename(f, n)),
    ]
}

/// The names of the regular files of `dir`, in order.
fn files_of(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// `text` gzipped in members cut at `cuts` (per mille of its length).
fn gzip_members(text: &[u8], cuts: &[u16]) -> Vec<u8> {
    let mut at: Vec<usize> = cuts
        .iter()
        .map(|&c| text.len() * c as usize / 1000)
        .collect();
    at.push(0);
    at.push(text.len());
    at.sort_unstable();
    at.windows(2)
        .flat_map(|w| gzip(&text[w[0]..w[1]]))
        .collect()
}

/// The text of a file of the folder (a gzipped one decompressed; garbage as it is).
fn text_of(path: &Path) -> Vec<u8> {
    let bytes = std::fs::read(path).unwrap();
    if path.extension().is_some_and(|e| e == "gz") {
        let mut out = Vec::new();
        let mut gz = flate2::read::MultiGzDecoder::new(&bytes[..]);
        if std::io::Read::read_to_end(&mut gz, &mut out).is_ok() {
            return out;
        }
    }
    bytes
}

/// Writes `text` as the file at `path` holds it (gzipped where it is `.gz`).
fn put_text(path: &Path, text: &[u8]) {
    let gz = path.extension().is_some_and(|e| e == "gz");
    std::fs::write(path, if gz { gzip(text) } else { text.to_vec() }).unwrap();
}

/// A copy of the original folder laid out as `layout` says, then damaged.
fn laid_out(layout: &Layout, damage: &[Damage]) -> (tempfile::TempDir, PathBuf) {
    let (tmp, dir) = edited("runs.csv", &[], None);
    // spans.csv into parts: the header, then each rep's rows in the part it starts in.
    let text = std::fs::read_to_string(dir.join(store::SPANS)).unwrap();
    let (header, rows) = text.split_once('\n').unwrap();
    let mut reps: Vec<&str> = Vec::new();
    let mut parts: Vec<String> = vec![String::new()];
    for line in rows.lines() {
        let rep = line.split(',').next().unwrap();
        if reps.last() != Some(&rep) {
            reps.push(rep);
            if layout.cuts.contains(&(reps.len() - 1)) && !parts.last().unwrap().is_empty() {
                parts.push(String::new());
            }
        }
        let part = parts.last_mut().unwrap();
        part.push_str(line);
        part.push('\n');
    }
    std::fs::remove_file(dir.join(store::SPANS)).unwrap();
    for (i, rows) in parts.iter().enumerate() {
        let name = store::part_name(store::SPANS, i as u32 + 1);
        let text = format!("{header}\n{rows}");
        let members = layout
            .gz_parts
            .iter()
            .find(|(p, _)| p % parts.len() == i)
            .map(|(_, m)| m);
        match members {
            Some(m) => std::fs::write(
                dir.join(format!("{name}.gz")),
                gzip_members(text.as_bytes(), m),
            ),
            None => std::fs::write(dir.join(name), text),
        }
        .unwrap();
    }
    for (table, members) in &layout.gz_tables {
        let path = dir.join(table);
        let text = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        std::fs::write(
            dir.join(format!("{table}.gz")),
            gzip_members(&text, members),
        )
        .unwrap();
    }
    for d in damage {
        let names = files_of(&dir);
        let path = |i: &usize| dir.join(&names[i % names.len()]);
        match d {
            Damage::Stored(f, e) => {
                let mut bytes = std::fs::read(path(f)).unwrap();
                apply(&mut bytes, e);
                std::fs::write(path(f), bytes).unwrap();
            }
            Damage::Inside(f, e) => {
                let mut text = text_of(&path(f));
                apply(&mut text, e);
                put_text(&path(f), &text);
            }
            Damage::CutTail(f, n) => {
                let mut text = text_of(&path(f));
                if text.ends_with(b"\n") {
                    let last = text[..text.len() - 1]
                        .iter()
                        .rposition(|&b| b == b'\n')
                        .map_or(0, |p| p + 1);
                    text.truncate((text.len() - 1).saturating_sub(*n as usize).max(last));
                }
                put_text(&path(f), &text);
            }
            Damage::Replace(f, b, gz) => {
                let bytes = if *gz { gzip(&b.0) } else { b.0.clone() };
                std::fs::write(path(f), bytes).unwrap();
            }
            Damage::Remove(f) => std::fs::remove_file(path(f)).unwrap(),
            Damage::Swap(a, b) => {
                let (a, b) = (path(a), path(b));
                let (x, y) = (std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
                std::fs::write(&a, y).unwrap();
                std::fs::write(&b, x).unwrap();
            }
            Damage::Rename(f, n) => {
                let from = path(f);
                let gz = if from.extension().is_some_and(|e| e == "gz") {
                    ".gz"
                } else {
                    ""
                };
                let to = format!("{}{gz}", store::part_name(store::SPANS, u32::from(*n)));
                std::fs::rename(&from, dir.join(to)).unwrap();
            }
        }
    }
    (tmp, dir)
}

/// Each row's text (`Debug`, so that equal NaNs compare equal).
fn texts<T: std::fmt::Debug>(rows: &[T]) -> Vec<String> {
    rows.iter().map(|r| format!("{r:?}")).collect()
}

/// Fails, naming the first row that differs, where `got` is not `want`.
fn same(got: &[String], want: &[String], what: &str) {
    if got != want {
        let i = (0..got.len().max(want.len()))
            .find(|&i| got.get(i) != want.get(i))
            .unwrap_or(0);
        panic!(
            "{what}: {} rows where {} were expected; row {i} is {:?}, expected {:?}",
            got.len(),
            want.len(),
            got.get(i),
            want.get(i)
        );
    }
}

/// The spans of each rep of the original folder, as text, in file order.
fn original_spans_by_rep() -> &'static HashMap<u32, Vec<String>> {
    static SPANS: OnceLock<HashMap<u32, Vec<String>>> = OnceLock::new();
    SPANS.get_or_init(|| {
        let mut by_rep: HashMap<u32, Vec<String>> = HashMap::new();
        for s in RunData::load(&original().1).unwrap().spans {
            by_rep.entry(s.rep).or_default().push(format!("{s:?}"));
        }
        by_rep
    })
}

/// A laid-out folder read back: undamaged, every reader reads what the original holds
/// (the whole load, the reading a rep at a time, the GPU tables); damaged only by
/// whole files removed, swapped or renamed, a load that answers gives each rep exactly
/// its own spans (a part lost or read twice is an error, never fewer or more rows).
fn check_laid_out(dir: &Path, damage: &[Damage]) {
    let orig = RunData::load(&original().1).unwrap();
    let loaded = RunData::load(dir);
    if damage.is_empty() {
        let data = loaded.unwrap_or_else(|e| panic!("an undamaged layout is refused: {e}"));
        same(&texts(&data.runs), &texts(&orig.runs), "runs.csv");
        same(&texts(&data.spans), &texts(&orig.spans), "spans.csv");
        same(
            &texts(&data.load_telemetry().unwrap()),
            &texts(&orig.load_telemetry().unwrap()),
            "telemetry.csv",
        );
        same(
            &texts(&data.load_gpu_activity().unwrap()),
            &texts(&orig.load_gpu_activity().unwrap()),
            "gpu_activity.csv",
        );
        let mut reps = Vec::new();
        RunData::load_spans_by_rep(dir)
            .unwrap()
            .for_each_rep(|spans| reps.push(texts(spans)))
            .unwrap();
        let mut whole = Vec::new();
        orig.for_each_rep(|spans| whole.push(texts(spans))).unwrap();
        assert_eq!(reps.len(), whole.len(), "reps read a rep at a time");
        for (got, want) in reps.iter().zip(&whole) {
            same(got, want, "a rep read on its own");
        }
        return;
    }
    let whole_files = damage
        .iter()
        .all(|d| matches!(d, Damage::Remove(_) | Damage::Swap(..) | Damage::Rename(..)));
    if let (true, Ok(data)) = (whole_files, loaded) {
        let mut by_rep: HashMap<u32, Vec<String>> = HashMap::new();
        for s in &data.spans {
            by_rep.entry(s.rep).or_default().push(format!("{s:?}"));
        }
        for r in &data.runs {
            let mut got = by_rep.remove(&r.rep).unwrap_or_default();
            let mut want = original_spans_by_rep()
                .get(&r.rep)
                .cloned()
                .unwrap_or_default();
            got.sort();
            want.sort();
            same(&got, &want, &format!("rep {}'s spans", r.rep));
        }
    }
}

/// The span rows of each rep in every part of spans.csv (plain or gzipped), read as
/// they are (complete lines, no checks).
fn span_rows_by_rep(dir: &Path) -> HashMap<u32, Vec<SpanRow>> {
    let mut by_rep: HashMap<u32, Vec<SpanRow>> = HashMap::new();
    for n in 1.. {
        let p = dir.join(store::part_name(store::SPANS, n));
        if !p.exists() && !dir.join(format!("{}.gz", p.display())).exists() {
            break;
        }
        for s in store::read_csv_complete::<SpanRow>(&p).unwrap() {
            by_rep.entry(s.rep).or_default().push(s);
        }
    }
    by_rep
}

/// What `gapscope run --resume` reads of the folder, then a rep appended as a resumed
/// run appends one. A resume refuses the folder (an error that names it) or keeps a
/// set of committed reps, each with all of its rows, and drops every other rep's rows
/// with a note; it never runs again a rep the readers read whole (that would measure
/// it over rows it failed to read), and what it keeps reads back with the new rep.
fn check_resume(dir: &Path) {
    // What the readers take the folder to hold, before the resume touches it.
    let before = RunData::load(dir)
        .ok()
        .filter(|d| d.load_telemetry().is_ok() && d.load_gpu_activity().is_ok());
    let (mut writer, kept) = match RunWriter::open_resume(dir) {
        Ok(w) => w,
        Err(e) => {
            let e = e.to_string();
            assert!(
                before.is_none(),
                "a folder every reader reads is refused a resume: {e}"
            );
            assert!(e.contains(&*dir.to_string_lossy()), "{e}");
            return;
        }
    };
    let notes = writer.resume_notes().to_vec();
    let mut reps: Vec<u32> = kept.iter().map(|r| r.rep).collect();
    reps.sort_unstable();
    reps.dedup();
    assert_eq!(reps.len(), kept.len(), "a rep kept twice: {kept:?}");
    if let Some(before) = &before {
        assert!(notes.is_empty(), "{notes:?}");
        same(
            &texts(&kept),
            &texts(&before.runs),
            "the reps a resume keeps",
        );
    }
    // A rep of the fixture, under a number no kept rep has.
    let orig = RunData::load(&original().1).unwrap();
    let new = (0..).find(|r| !reps.contains(r)).unwrap();
    let mut row = orig.runs[2].clone();
    row.rep = new;
    let spans: Vec<SpanRow> = orig
        .spans
        .iter()
        .filter(|s| s.rep == orig.runs[2].rep)
        .map(|s| SpanRow {
            rep: new,
            ..s.clone()
        })
        .collect();
    writer.append_rep(&row, &spans).unwrap();
    drop(writer);
    row.span_rows = Some(spans.len() as u32);
    let runs: Vec<RunRow> = store::read_csv_complete(&dir.join(store::RUNS)).unwrap();
    let want: Vec<RunRow> = kept.iter().cloned().chain([row.clone()]).collect();
    same(&texts(&runs), &texts(&want), "runs.csv after the resume");
    let mut by_rep = span_rows_by_rep(dir);
    for r in &kept {
        let n = by_rep.remove(&r.rep).map_or(0, |s| s.len());
        match r.span_rows {
            Some(k) => assert_eq!(n, k as usize, "rep {} kept with {n} of its rows", r.rep),
            None => assert!(n > 0 || r.status != store::RepStatus::Ok, "rep {}", r.rep),
        }
    }
    let added = by_rep.remove(&new).unwrap_or_default();
    same(&texts(&added), &texts(&spans), "the new rep's rows");
    assert!(
        by_rep.is_empty(),
        "rows of reps not kept: {:?}",
        by_rep.keys()
    );
    if let Some(before) = before {
        let after = RunData::load(dir).unwrap_or_else(|e| panic!("after the resume: {e}"));
        same(
            &texts(&after.runs),
            &texts(&want),
            "runs read after the resume",
        );
        // The committed reps' rows as they were (an uncommitted rep's rows are dropped).
        let committed: Vec<SpanRow> = (before.spans.iter())
            .filter(|s| reps.contains(&s.rep))
            .chain(&spans)
            .cloned()
            .collect();
        same(
            &texts(&after.spans),
            &texts(&committed),
            "spans read after the resume",
        );
    }
}

/// Cases per target in a plain `cargo test` (a few seconds in a debug build).
const QUICK: u32 = 96;

#[test]
fn edited_results_files_give_values_or_clean_errors() {
    // Cases start from a folder every reader reads, and that a resume keeps whole.
    let (_, orig) = original();
    let data = RunData::load(orig).unwrap();
    assert!(data.runs.len() > 2 && data.spans.len() > data.runs.len());
    let files = prop::sample::select(FILES.to_vec());
    let case = prop_oneof![
        1 => (files, prop::collection::vec(edit(), 1..5))
            .prop_map(|(file, edits)| Case::Edited(file, edits)),
        2 => (layout(), prop::collection::vec(damage(), 0..4))
            .prop_map(|(layout, damage)| Case::Laid(layout, damage)),
    ];
    fuzz(QUICK, case, |case| {
        let (_tmp, dir) = match &case {
            Case::Edited(file, edits) => edited(file, edits, None),
            Case::Laid(layout, damage) => laid_out(layout, damage),
        };
        read_everything(&dir);
        if let Case::Laid(_, damage) = &case {
            check_laid_out(&dir, damage);
        }
        check_resume(&dir);
    });
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
