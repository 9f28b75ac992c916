//! Reopening a run folder to continue it (`gapscope run --resume`): under the folder's
//! lock, cut what a kill left half-written, drop reps that are not wholly committed, and
//! reopen the CSV files for appending under today's headers.
//!
//! A rep is committed when its runs.csv row is there and spans.csv (with its next parts,
//! `spans.2.csv`, …) holds as many of its rows as that row says (`span_rows`). A rep whose spans were cut off (a spans.csv cut
//! mid-file, as the truncation error once advised) loses its row here and runs again,
//! rather than entering comparisons with no spans.

use std::collections::{HashMap, HashSet};
use std::fs::OpenOptions;
use std::io::Seek;
use std::path::{Path, PathBuf};

use super::integrity::{check_unique_reps, lock_dir, uncommitted_reason};
use super::parts::{part_paths, PartWriter};
use super::{
    csv_io, gz_path, header_of, io, parse_csv, present, read_csv_complete, read_text, strs,
    Appender, GpuActivityRow, RunRow, RunWriter, SpanRow, StoreError, TelemetryRow, GPU_ACTIVITY,
    MAX_TABLE_BYTES, META, RUNS, SPANS, TELEMETRY,
};

/// A row that belongs to one rep (so a resume can drop the rows of unfinished reps).
trait RepRow: serde::Serialize + serde::de::DeserializeOwned {
    fn rep(&self) -> u32;
    fn header() -> Vec<String>;
}

macro_rules! rep_row {
    ($($t:ty),*) => {$(
        impl RepRow for $t {
            fn rep(&self) -> u32 {
                self.rep
            }
            fn header() -> Vec<String> {
                header_of(&<$t>::sample())
            }
        }
    )*};
}
rep_row!(RunRow, SpanRow, TelemetryRow, GpuActivityRow);

/// Opens a per-rep CSV of a run folder being resumed: cuts a partial last line, drops
/// rows of reps not in `done`, and creates the file (header only) where an older run
/// folder has none. A file whose first line is not today's header (an older gapscope's,
/// or none at all in an emptied file) is rewritten under it, so that appended rows line
/// up with it. Returns the file's appender and its length (plain, where it stays
/// gzipped).
/// The writer of a table in parts (`parts`, from [`part_paths`]) once every part lost
/// the rows of reps that run again; the last part is appended to.
fn resume_parts<T: RepRow>(
    dir: &Path,
    table: &'static str,
    parts: &[std::path::PathBuf],
    done: &HashSet<u32>,
) -> Result<PartWriter, StoreError> {
    let mut last = None;
    for p in parts {
        last = Some(resume_rep_file::<T>(p, done)?);
    }
    let (out, len) = last.expect("a table's first part is always listed");
    Ok(PartWriter::new(
        dir,
        table,
        T::header(),
        parts.len() as u32,
        out,
        len,
    ))
}

fn resume_rep_file<T: RepRow>(
    path: &Path,
    done: &HashSet<u32>,
) -> Result<(Appender, u64), StoreError> {
    let gzipped = !present(path) && present(&gz_path(path));
    if !present(path) && !gzipped {
        let header = T::header();
        let len = header.join(",").len() as u64 + 1;
        return Ok((Appender::create(path, &strs(&header))?, len));
    }
    if !gzipped {
        truncate_partial_line(path)?;
    }
    let (_, bytes) = read_text(path)?;
    let keep = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
    let rows: Vec<T> = parse_csv(path, &bytes[..keep])?;
    let header = strs(&T::header()).join(",");
    let first_line = bytes.split(|&b| b == b'\n').next().unwrap_or_default();
    let first_line = String::from_utf8_lossy(first_line.strip_suffix(b"\r").unwrap_or(first_line));
    if first_line != header || rows.iter().any(|s| !done.contains(&s.rep())) {
        let mut w = csv::WriterBuilder::new()
            .has_headers(false)
            .from_writer(Vec::new());
        w.write_record(header.split(','))
            .map_err(|e| csv_io(path, e))?;
        for s in rows.iter().filter(|s| done.contains(&s.rep())) {
            w.serialize(s).map_err(|e| csv_io(path, e))?;
        }
        let bytes = w
            .into_inner()
            .map_err(|e| io(path)(std::io::Error::other(e.to_string())))?;
        crate::fsx::write_file(path, &bytes)?;
        if gzipped {
            let gz = gz_path(path);
            std::fs::remove_file(&gz).map_err(io(&gz))?;
        }
        return Ok((Appender::append_existing(path)?, bytes.len() as u64));
    } else if gzipped {
        // Kept gzipped until a row is added (a complete run resumes as a no-op).
        return Ok((Appender::gzipped(path), keep as u64));
    }
    Ok((Appender::append_existing(path)?, keep as u64))
}

/// Cuts a file back to its last complete line (a kill mid-write leaves a partial one).
/// Opened without following a link, and only a regular file.
fn truncate_partial_line(path: &Path) -> Result<(), StoreError> {
    use std::os::unix::fs::OpenOptionsExt;
    let bytes = crate::fsx::read::read_all_capped(
        crate::fsx::read::open_no_follow(path)?,
        path,
        MAX_TABLE_BYTES,
        "",
    )?;
    if bytes.is_empty() || bytes.ends_with(b"\n") {
        return Ok(());
    }
    let keep = bytes
        .iter()
        .rposition(|&b| b == b'\n')
        .map(|p| p + 1)
        .unwrap_or(0);
    let mut f = OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(io(path))?;
    f.set_len(keep as u64).map_err(io(path))?;
    f.seek(std::io::SeekFrom::End(0)).map_err(io(path))?;
    Ok(())
}

/// Deepest folder level inside a run folder that is looked at for links (`stacks/` is
/// one level down).
const LINK_SCAN_DEPTH: usize = 4;

/// Refuses a run folder that holds a symbolic link or a special file (a FIFO, a
/// device): a resume writes inside the folder, and a link would take its writes
/// elsewhere. Names the first such entry and says what to do.
fn refuse_links(dir: &Path) -> Result<(), StoreError> {
    let mut todo = vec![(dir.to_path_buf(), 0usize)];
    while let Some((d, depth)) = todo.pop() {
        let entries = std::fs::read_dir(&d).map_err(io(&d))?;
        for e in entries {
            let e = e.map_err(io(&d))?;
            let t = e.file_type().map_err(io(&e.path()))?;
            let what = if t.is_symlink() {
                let target = std::fs::read_link(e.path())
                    .map(|t| format!(" (to {})", t.display()))
                    .unwrap_or_default();
                format!("a symbolic link{target}")
            } else if t.is_dir() {
                if depth < LINK_SCAN_DEPTH {
                    todo.push((e.path(), depth + 1));
                }
                continue;
            } else if t.is_file() {
                continue;
            } else {
                format!("{}, not a regular file", crate::fsx::kind_of(&t))
            };
            return Err(StoreError::Invalid {
                path: dir.to_path_buf(),
                message: format!(
                    "--resume refuses this folder: {} is {what}; a run folder holds only \
                     regular files and folders, and a resume writes inside it (a link would \
                     take its writes elsewhere). Replace it with a copy of the file it stands \
                     for, or remove it, then resume",
                    e.path().display()
                ),
            });
        }
    }
    Ok(())
}

/// Span rows per rep in spans.csv and its next parts (any of them gzipped), each part
/// cut back to its last complete line. A folder whose runs.csv commits reps with spans
/// and that has no spans table at all is refused: measuring those reps again would drop
/// their rows, when the table is only missing (not yet copied back, say).
fn committed_span_counts(
    parts: &[PathBuf],
    rows: &[RunRow],
) -> Result<HashMap<u32, usize>, StoreError> {
    let mut counts: HashMap<u32, usize> = HashMap::new();
    let spans_path = &parts[0];
    if !present(spans_path) && !present(&gz_path(spans_path)) {
        if rows.iter().any(|r| r.span_rows.unwrap_or(0) > 0) {
            return Err(StoreError::Invalid {
                path: spans_path.to_path_buf(),
                message: format!(
                    "missing (nor is there a {SPANS}.gz), while {RUNS} commits reps with \
                     spans: put the table back before resuming (a resume would measure \
                     those reps again in place of their rows)"
                ),
            });
        }
        return Ok(counts);
    }
    for p in parts {
        if present(p) {
            truncate_partial_line(p)?;
        }
        // Complete lines only, as the readers count them: a gzipped part is not cut back,
        // and its unterminated last line is no row of its rep.
        for s in read_csv_complete::<SpanRow>(p)? {
            *counts.entry(s.rep).or_default() += 1;
        }
    }
    Ok(counts)
}

impl RunWriter {
    /// Reopens a run folder to continue it, under its exclusive lock (a second resume
    /// of the same folder is refused while this writer lives). Drops any partial tail,
    /// the row of every rep whose spans are not all in spans.csv (see
    /// [`RunWriter::resume_notes`]), and the rows of other files that belong to no
    /// committed rep; returns the committed rows.
    pub fn open_resume(dir: &Path) -> Result<(Self, Vec<RunRow>), StoreError> {
        if !present(&dir.join(META)) {
            return Err(StoreError::Invalid {
                path: dir.to_path_buf(),
                message: format!("no {META} here: not a run folder to resume"),
            });
        }
        let lock = lock_dir(dir)?;
        refuse_links(dir)?;
        let runs_path = dir.join(RUNS);
        if present(&runs_path) {
            truncate_partial_line(&runs_path)?;
        }
        // Complete lines only (a gzipped runs.csv is not cut back): an unterminated last
        // row commits no rep, for the readers as for the resume.
        let rows: Vec<RunRow> = read_csv_complete(&runs_path)?;
        check_unique_reps(&runs_path, &rows)?;
        let span_parts = part_paths(dir, SPANS)?;
        let span_counts = committed_span_counts(&span_parts, &rows)?;
        let mut notes = Vec::new();
        let rows: Vec<RunRow> = rows
            .into_iter()
            .filter(|r| {
                let n = span_counts.get(&r.rep).copied().unwrap_or(0);
                match uncommitted_reason(r, n) {
                    Some(why) => {
                        notes.push(format!("rep {} ({}) runs again: {why}", r.rep, r.variant));
                        false
                    }
                    None => true,
                }
            })
            .collect();
        let done: HashSet<u32> = rows.iter().map(|r| r.rep).collect();
        let (runs, _) = resume_rep_file::<RunRow>(&runs_path, &done)?;
        let spans = resume_parts::<SpanRow>(dir, SPANS, &span_parts, &done)?;
        let telemetry_parts = part_paths(dir, TELEMETRY)?;
        let telemetry = resume_parts::<TelemetryRow>(dir, TELEMETRY, &telemetry_parts, &done)?;
        let activity_parts = part_paths(dir, GPU_ACTIVITY)?;
        let activity = resume_parts::<GpuActivityRow>(dir, GPU_ACTIVITY, &activity_parts, &done)?;
        let paths = super::read_meta(dir)?.paths;
        Ok((
            RunWriter {
                dir: dir.to_path_buf(),
                runs,
                spans,
                telemetry,
                activity,
                _lock: lock,
                notes,
                capped: None,
                paths: paths.map(|p| super::paths::PathBases::of_meta(dir, &p)),
            },
            rows,
        ))
    }
}
