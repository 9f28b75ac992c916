//! Results on disk: `results/<experiment>/<UTC time>-<id>/` holding the experiment copy,
//! `meta.json`, `runs.csv`, `spans.csv` (counter columns included; a long run goes on in
//! `spans.2.csv`, `spans.3.csv`, … before a file passes [`MAX_TABLE_BYTES`], see
//! `parts`), `telemetry.csv` (NVML samples) and `gpu_activity.csv` (CUPTI kernels and
//! copies).
//!
//! CSV files are appended and flushed rep by rep: a rep's spans, telemetry and activity
//! first, then its row in runs.csv, which is the commit marker. A run killed mid-rep therefore leaves at most
//! a partial tail that [`RunWriter::open_resume`] cuts off; every finished rep stays.
//! Whole files (meta.json) are written atomically (temp file + rename, [`crate::fsx`]).
//!
//! A run folder may come from anywhere (committed, attached to a CI job, shared in a
//! review), so its reader trusts nothing in it: each file is opened without following a
//! link and only when it is a regular file, each has a size cap, and the rows are
//! checked for what no run writes (a span id twice in a rep, a parent chain that loops,
//! times past the monotonic clock's range, self time longer than the span, a schema
//! version this gapscope does not know), naming the row.
//!
//! A run folder is written by one process at a time: [`RunWriter`] holds an exclusive
//! lock on it (`integrity`). Readers take a killed run as it is (its unterminated last
//! lines are dropped), but refuse a folder that says two things at once: a rep twice in
//! runs.csv, or a committed rep whose spans are not all there.

mod attrs;
mod by_rep;
pub mod command;
mod count;
pub mod drift;
pub mod envinfo;
mod files;
pub mod gaps;
pub mod gpu_checks;
mod integrity;
pub mod lanes;
mod new_run;
mod parts;
pub mod paths;
mod resume;
pub mod schema;
mod shared;
mod span_text;
mod view;

use std::fs::{self, File, OpenOptions};
use std::io::BufRead;
use std::path::{Path, PathBuf};

pub mod host;
pub use crate::phases::{PhaseSpec, WorkloadKind};
pub use attrs::merge_attrs;
pub use command::{BuildMeta, CommandMeta, CommandVariantMeta};
pub use count::Count;
pub use files::{
    build_log, RunFile, RUN_FILES, SPANS_PART_2, STACKS_DIR, STACKS_FOLDED, STACKS_JSON,
};
pub use gaps::GapsSpec;
pub use integrity::{check_output_path, experiment_sha256, resume_mismatch, RunProgress};
pub use new_run::{run_id, span_rows, NewRun};
pub use parts::{part_name, PART_BYTES_VAR};
pub use schema::*;
pub use shared::Shared;
pub use span_text::{GpuLine, SpanLine};
pub use view::{covered_ns, family, RunView, SpanTime};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}, line {line}: {message}")]
    Parse {
        path: PathBuf,
        line: u64,
        message: String,
    },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error(
        "{path} is being written by another gapscope process (a run or a --resume of it); \
         wait for that one to finish or stop it, then resume"
    )]
    Locked { path: PathBuf },
    #[error(transparent)]
    Read(#[from] crate::fsx::ReadError),
    #[error(transparent)]
    Write(#[from] crate::fsx::WriteError),
}

/// Largest meta.json read (a real one is a few KiB; a profile's lines add little).
pub const MAX_META_BYTES: u64 = 64 << 20;
/// Largest table read, after decompression for a `.csv.gz`: 2 GiB holds some 8 million
/// span rows, well past what one run records.
pub const MAX_TABLE_BYTES: u64 = 2 << 30;

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Writes `bytes` to `path` atomically with [`crate::fsx::write_file`] (an exclusive
/// temp file beside it, fsync, rename; never over a link or a file that is not regular),
/// for callers whose errors are `std::io::Error`s.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    crate::fsx::write_file(path, bytes).map_err(crate::fsx::WriteError::into_io)
}

/// Whether a directory entry is there (a link counts, without following it).
pub(crate) fn present(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok()
}

/// `<experiment>-<run id>` of a run folder, the name of its default report and export
/// folders, once both pass the rule names pass when a run is made
/// ([`crate::fsx::check_name`]): a meta.json that says `"experiment": "../x"` names no
/// folder outside.
pub fn output_name(dir: &Path, meta: &Meta) -> Result<String, StoreError> {
    for (what, v) in [("experiment", &meta.experiment), ("run_id", &meta.run_id)] {
        crate::fsx::check_name(
            &format!("meta.json's {what}"),
            v,
            "it would name the output folder",
        )
        .map_err(|message| StoreError::Invalid {
            path: dir.join(META),
            message: format!("{message}; pass --out to choose the output yourself"),
        })?;
    }
    Ok(format!("{}-{}", meta.experiment, meta.run_id))
}

pub const META: &str = "meta.json";
pub const RUNS: &str = "runs.csv";
pub const SPANS: &str = "spans.csv";
pub const EXPERIMENT_COPY: &str = "experiment.toml";
pub const TELEMETRY: &str = "telemetry.csv";
pub const GPU_ACTIVITY: &str = "gpu_activity.csv";

/// Appends rows to a CSV file, flushing after each batch.
struct Appender {
    path: PathBuf,
    /// `None` while the table is still stored gzipped (`NAME.gz`, as committed results
    /// keep it): it is made plain at its first new row, so that a resume with nothing
    /// to add leaves the folder as it was.
    w: Option<csv::Writer<File>>,
    /// Each flush waits for the disk (`fdatasync`): a run's reps are on disk as each
    /// ends. Off for a writer that does not wait
    /// ([`RunWriter::without_waiting_for_the_disk`]).
    sync: bool,
}

impl Appender {
    fn create(path: &Path, header: &[&str]) -> Result<Self, StoreError> {
        let f = OpenOptions::new()
            .create_new(true)
            .write(true)
            .open(path)
            .map_err(io(path))?;
        let mut w = csv::WriterBuilder::new().has_headers(false).from_writer(f);
        w.write_record(header).map_err(|e| csv_io(path, e))?;
        w.flush().map_err(io(path))?;
        Ok(Appender {
            path: path.to_path_buf(),
            w: Some(w),
            sync: true,
        })
    }

    /// An appender of a table stored as `path.gz`, made plain at its first row.
    fn gzipped(path: &Path) -> Self {
        Appender {
            path: path.to_path_buf(),
            w: None,
            sync: true,
        }
    }

    /// The writer, once the gzipped table is written back plain (its complete lines,
    /// atomically) and its `.gz` removed: nothing of it is lost, and the readers, which
    /// take `NAME` before `NAME.gz`, read the plain file from the moment it exists.
    fn writer(&mut self) -> Result<&mut csv::Writer<File>, StoreError> {
        if self.w.is_none() {
            let gz = gz_path(&self.path);
            let bytes = crate::fsx::read_gz_no_follow(&gz, MAX_TABLE_BYTES)?;
            let keep = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
            crate::fsx::write_file(&self.path, &bytes[..keep])?;
            fs::remove_file(&gz).map_err(io(&gz))?;
            self.w = Appender::append_existing(&self.path)?.w;
        }
        Ok(self.w.as_mut().expect("opened above"))
    }

    /// Opens a file of the run folder for appending, never through a link (O_NOFOLLOW)
    /// and only a regular file.
    fn append_existing(path: &Path) -> Result<Self, StoreError> {
        use std::os::unix::fs::OpenOptionsExt;
        let f = OpenOptions::new()
            .append(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)
            .map_err(|e| link_or_io(path, e))?;
        if !f.metadata().map_err(io(path))?.is_file() {
            return Err(StoreError::Invalid {
                path: path.to_path_buf(),
                message: "not a regular file: a run folder's tables are regular files".into(),
            });
        }
        Ok(Appender {
            path: path.to_path_buf(),
            w: Some(csv::WriterBuilder::new().has_headers(false).from_writer(f)),
            sync: true,
        })
    }

    fn write<T: serde::Serialize>(&mut self, row: &T) -> Result<(), StoreError> {
        let r = self.writer()?.serialize(row);
        r.map_err(|e| csv_io(&self.path, e))
    }

    /// Appends rows already written as CSV (complete lines).
    fn write_bytes(&mut self, bytes: &[u8]) -> Result<(), StoreError> {
        use std::io::Write;
        let w = self.writer()?;
        let r = w.flush().and_then(|()| {
            let mut file: &File = w.get_ref();
            file.write_all(bytes)
        });
        r.map_err(io(&self.path))
    }

    /// Cuts the file back to `len` bytes (appends go on from there).
    fn truncate(&mut self, len: u64) -> Result<(), StoreError> {
        let path = self.path.clone();
        let w = self.writer()?;
        w.flush().map_err(io(&path))?;
        w.get_ref().set_len(len).map_err(io(&path))
    }

    /// Writes out what is buffered, and waits for the disk where this appender syncs.
    fn flush(&mut self) -> Result<(), StoreError> {
        let Some(w) = self.w.as_mut() else {
            return Ok(());
        };
        w.flush().map_err(io(&self.path))?;
        if self.sync {
            w.get_ref().sync_data().map_err(io(&self.path))?;
        }
        Ok(())
    }

    /// Where this appender does not wait for the disk: starts the disk's writing of what
    /// was written so far, so that it does not pile up in memory.
    fn start_writeback(&self) {
        if let (false, Some(w)) = (self.sync, self.w.as_ref()) {
            use std::os::fd::AsRawFd;
            // SAFETY: sync_file_range(2) on this appender's open file, the whole file
            // (0, 0); it only starts writeback. An error (an old kernel, another file
            // system) leaves the writing to the kernel's own time.
            unsafe {
                libc::sync_file_range(w.get_ref().as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE)
            };
        }
    }
}

/// An open that failed with ELOOP met a link (O_NOFOLLOW): say so.
fn link_or_io(path: &Path, e: std::io::Error) -> StoreError {
    if e.raw_os_error() == Some(libc::ELOOP) {
        StoreError::Read(crate::fsx::ReadError::Link {
            path: path.to_path_buf(),
            target: fs::read_link(path)
                .map(|t| format!(" (to {})", t.display()))
                .unwrap_or_default(),
        })
    } else {
        io(path)(e)
    }
}

fn csv_io(path: &Path, e: csv::Error) -> StoreError {
    StoreError::Io {
        path: path.to_path_buf(),
        source: std::io::Error::other(e.to_string()),
    }
}

/// Header of a serde row type, from a sample row.
fn header_of<T: serde::Serialize>(sample: &T) -> Vec<String> {
    let mut w = csv::WriterBuilder::new()
        .has_headers(true)
        .from_writer(Vec::new());
    w.serialize(sample).expect("row serialises");
    let bytes = w.into_inner().expect("in memory");
    let text = String::from_utf8(bytes).expect("utf8");
    let first = text.lines().next().unwrap_or_default().to_string();
    csv::ReaderBuilder::new()
        .has_headers(false)
        .from_reader(first.as_bytes())
        .records()
        .next()
        .and_then(|r| r.ok())
        .map(|r| r.iter().map(str::to_string).collect())
        .unwrap_or_default()
}

/// Appends reps to a run folder.
pub struct RunWriter {
    pub dir: PathBuf,
    runs: Appender,
    spans: parts::PartWriter,
    telemetry: parts::PartWriter,
    activity: parts::PartWriter,
    /// Exclusive lock on the run folder, held while this writer lives.
    _lock: File,
    /// What a resume repaired (reps it found uncommitted), for the user.
    notes: Vec<String>,
    /// How the paths of a rep's error are written (`meta.paths`; none: as they are).
    paths: Option<paths::PathBases>,
    /// Why the last rep appended kept none of its spans (see [`RunWriter::take_capped`]).
    capped: Option<String>,
}

/// [`write_in_windows`] of `n` rows whose lines `line(i, text)` appends to `text`.
fn lines_in_windows(
    table: &mut parts::PartWriter,
    n: usize,
    chunk: usize,
    line: impl Fn(usize, &mut Vec<u8>) + Sync,
) -> Result<parts::Written, StoreError> {
    write_in_windows(table, n, chunk, |a, b| {
        let mut text = Vec::new();
        for i in a..b {
            line(i, &mut text);
            if i == a {
                // Room for the rest at the first row's length and a half, not grown
                // (and copied) a dozen times.
                text.reserve(text.len() * (b - a) * 3 / 2);
            }
        }
        text
    })
}

/// Writes `n` rows into `table` as one rep's, their text made on every core `chunk` rows
/// a task and a window of tasks at a time (`text(a, b)` is the text of rows `a..b`), so
/// that a rep of millions of rows is never held whole, as rows or as text. The next
/// window's text is made while this one is written (two windows at most wait).
fn write_in_windows(
    table: &mut parts::PartWriter,
    n: usize,
    chunk: usize,
    text: impl Fn(usize, usize) -> Vec<u8> + Sync,
) -> Result<parts::Written, StoreError> {
    use rayon::prelude::*;
    type Window = Vec<(Vec<u8>, u32)>;
    let window = chunk * CHUNKS_PER_WINDOW;
    let text = &text;
    std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Window>(1);
        scope.spawn(move || {
            let mut at = 0;
            while at < n {
                let end = (at + window).min(n);
                let starts: Vec<usize> = (at..end).step_by(chunk).collect();
                let made: Window = starts
                    .into_par_iter()
                    .map(|a| {
                        let b = (a + chunk).min(end);
                        (text(a, b), (b - a) as u32)
                    })
                    .collect();
                // The writer stopped (an error): nothing more to make.
                if tx.send(made).is_err() {
                    return;
                }
                at = end;
            }
        });
        let mut ready: std::collections::VecDeque<(Vec<u8>, u32)> = Default::default();
        table.write_rep(|buf| {
            if ready.is_empty() {
                ready = rx.recv().ok()?.into();
            }
            let (text, rows) = ready.pop_front()?;
            buf.extend_from_slice(&text);
            Some(rows)
        })
    })
}

impl RunWriter {
    /// Creates a new run folder (never reuses an existing one) with its meta and the
    /// experiment copy. The folder is made whole under a hidden name
    /// (`.<name>.partial`) and then renamed, so that a kill while it is made never leaves
    /// a run folder without its meta.json.
    pub fn create(dir: &Path, meta: &Meta, experiment_text: &str) -> Result<Self, StoreError> {
        if let Some(parent) = dir.parent() {
            fs::create_dir_all(parent).map_err(io(parent))?;
        }
        if dir.exists() {
            return Err(io(dir)(std::io::Error::from(
                std::io::ErrorKind::AlreadyExists,
            )));
        }
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("run");
        let partial = dir.with_file_name(format!(".{name}.partial"));
        fs::create_dir(&partial).map_err(io(&partial))?;
        // rename(2) does not replace a non-empty folder: a run folder made meanwhile
        // under the same name stays as it is.
        let made = fill_new(&partial, meta, experiment_text)
            .and_then(|()| fs::rename(&partial, dir).map_err(io(dir)));
        if let Err(e) = made {
            // A full disk (or any failure) leaves nothing behind: the hidden folder is
            // this call's own (create_dir made it), and no run folder holds its files.
            let _ = fs::remove_dir_all(&partial);
            return Err(e);
        }
        let lock = integrity::lock_dir(dir)?;
        Ok(RunWriter {
            dir: dir.to_path_buf(),
            runs: Appender::append_existing(&dir.join(RUNS))?,
            spans: parts::PartWriter::first(dir, SPANS, header_of(&SpanRow::sample()))?,
            telemetry: parts::PartWriter::first(
                dir,
                TELEMETRY,
                header_of(&TelemetryRow::sample()),
            )?,
            activity: parts::PartWriter::first(
                dir,
                GPU_ACTIVITY,
                header_of(&GpuActivityRow::sample()),
            )?,
            _lock: lock,
            notes: Vec::new(),
            capped: None,
            paths: meta
                .paths
                .as_ref()
                .map(|p| paths::PathBases::of_meta(dir, p)),
        })
    }

    /// What the resume that opened this writer repaired: one line per rep it found
    /// uncommitted (its row dropped, to run again). Empty for a new run.
    pub fn resume_notes(&self) -> &[String] {
        &self.notes
    }

    /// Appends one rep's NVML samples and GPU activity. Call before [`append_rep`]
    /// (whose runs.csv row commits the rep).
    ///
    /// [`append_rep`]: RunWriter::append_rep
    pub fn append_gpu(
        &mut self,
        telemetry: &[TelemetryRow],
        activity: &[GpuActivityRow],
    ) -> Result<(), StoreError> {
        gpu_rows(&mut self.telemetry, TELEMETRY, telemetry)?;
        gpu_rows(&mut self.activity, GPU_ACTIVITY, activity)
    }

    /// [`RunWriter::append_gpu`] of `n` GPU activity rows (and no NVML samples) whose
    /// lines `line(i, out)` appends: made and written as text on every core, a window of
    /// them at a time, so that a rep of millions of GPU records is never held as rows.
    pub fn append_gpu_lines<F>(&mut self, n: usize, line: F) -> Result<(), StoreError>
    where
        F: Fn(usize, &mut Vec<u8>) + Sync,
    {
        if n == 0 {
            return Ok(());
        }
        let written = lines_in_windows(&mut self.activity, n, GPU_ROWS_PER_CHUNK, line)?;
        match written {
            parts::Written::Rows(_) => Ok(()),
            parts::Written::Capped(why) => Err(StoreError::Invalid {
                path: PathBuf::from(GPU_ACTIVITY),
                message: format!("one rep's {n} rows of {GPU_ACTIVITY}: {why}"),
            }),
        }
    }

    /// Sets the size past which spans.csv goes on in a next part (at most, and by
    /// default, [`MAX_TABLE_BYTES`]; [`PART_BYTES_VAR`] lowers it for a whole process).
    #[cfg(test)]
    fn set_part_bytes(&mut self, n: u64) {
        self.spans.set_part_bytes(n);
        self.telemetry.set_part_bytes(n);
        self.activity.set_part_bytes(n);
    }

    /// Sets the most bytes a part of spans.csv holds below [`MAX_TABLE_BYTES`].
    #[cfg(test)]
    fn set_table_cap(&mut self, n: u64) {
        self.spans.set_cap(n);
    }

    /// Writes each rep's rows without waiting for the disk (the kernel is told to start
    /// writing them at once): for a folder made again from its sources, an import, whose
    /// caller names the folder only once every row is written. A crash of the machine in
    /// the seconds after can leave such a folder short; a run keeps the default, each rep
    /// on disk before the next begins.
    pub fn without_waiting_for_the_disk(&mut self) {
        self.runs.sync = false;
        for t in [&mut self.spans, &mut self.telemetry, &mut self.activity] {
            t.without_waiting_for_the_disk();
        }
    }

    /// Why the rep appended last kept none of its spans, once: its rows would have
    /// taken a table file past [`MAX_TABLE_BYTES`], so it was recorded as failed with
    /// this reason (its row says so). `None` for a rep written whole.
    pub fn take_capped(&mut self) -> Option<String> {
        self.capped.take()
    }

    /// Appends one rep (spans, then its run row) and flushes both. The row records how
    /// many span rows the rep has (`span_rows`), so that a reader or a resume can tell a
    /// rep whose spans were cut off from a complete one. The spans go to spans.csv or to
    /// its next part, never split across two (`parts`); a rep whose spans alone would
    /// pass the cap keeps none and is recorded as failed ([`RunWriter::take_capped`]).
    pub fn append_rep(&mut self, run: &RunRow, spans: &[SpanRow]) -> Result<(), StoreError> {
        self.append_rep_iter(run, spans)
    }

    /// [`RunWriter::append_rep`] with the spans made one at a time (an imported trace
    /// of millions of spans is never held as rows all at once).
    pub fn append_rep_iter<I>(&mut self, run: &RunRow, spans: I) -> Result<(), StoreError>
    where
        I: IntoIterator,
        I::Item: std::borrow::Borrow<SpanRow>,
    {
        let mut rows = spans.into_iter();
        let written = self.spans.write_rep(|buf| {
            let row = rows.next()?;
            std::borrow::Borrow::<SpanRow>::borrow(&row).write_csv_line(buf);
            Some(1)
        })?;
        self.end_rep(run, written)
    }

    /// [`RunWriter::append_rep`] with `n` span rows whose spans.csv lines `line(i, text)`
    /// appends to `text`: the lines are made on every core, a window of them at a time,
    /// and appended in order (an imported trace of millions of spans is never held as
    /// rows all at once).
    pub fn append_rep_lines<F>(&mut self, run: &RunRow, n: usize, line: F) -> Result<(), StoreError>
    where
        F: Fn(usize, &mut Vec<u8>) + Sync,
    {
        let written = lines_in_windows(&mut self.spans, n, ROWS_PER_CHUNK, line)?;
        self.end_rep(run, written)
    }

    /// Appends a rep's run row once its span rows are written (with how many it has), or
    /// as failed where its rows were too many for a table file.
    fn end_rep(&mut self, run: &RunRow, written: parts::Written) -> Result<(), StoreError> {
        let mut run = run.clone();
        self.capped = None;
        match written {
            parts::Written::Rows(n) => run.span_rows = Some(n),
            parts::Written::Capped(why) => {
                run.mark_capped(&why);
                self.capped = Some(why);
            }
        }
        if let Some(p) = &self.paths {
            run.error = p.text(&run.error);
        }
        self.runs.write(&run)?;
        self.runs.flush()
    }
}

impl RunRow {
    /// The row of a rep whose span rows were too many for a table file, as runs.csv
    /// records it: failed, `why` after any error it had, no span rows.
    pub fn mark_capped(&mut self, why: &str) {
        self.status = RepStatus::Failed;
        self.error = if self.error.is_empty() {
            why.to_string()
        } else {
            format!("{}; {why}", self.error)
        };
        self.span_rows = Some(0);
    }
}

/// Appends one rep's rows of a GPU table (`table`), in one part of it like a rep's spans;
/// rows of one rep past a table file's cap (no NVML or CUPTI rate makes them) are an error
/// that says so, with the reps before it kept.
fn gpu_rows<T: serde::Serialize>(
    w: &mut parts::PartWriter,
    table: &str,
    rows: &[T],
) -> Result<(), StoreError> {
    if rows.is_empty() {
        return Ok(());
    }
    let mut chunks = rows.chunks(1024);
    let written = w.write_rep(|buf| {
        let chunk = chunks.next()?;
        let mut c = csv::WriterBuilder::new()
            .has_headers(false)
            .from_writer(std::mem::take(buf));
        for r in chunk {
            c.serialize(r).expect("a row is written into memory");
        }
        *buf = c.into_inner().expect("rows written into memory");
        Some(chunk.len() as u32)
    })?;
    match written {
        parts::Written::Rows(_) => Ok(()),
        parts::Written::Capped(why) => Err(StoreError::Invalid {
            path: PathBuf::from(table),
            message: format!("one rep's {} rows of {table}: {why}", rows.len()),
        }),
    }
}

/// Span rows written as text at once by one thread of [`RunWriter::append_rep_lines`],
/// and chunks of them made at once (on every core) before they are appended.
const ROWS_PER_CHUNK: usize = 4096;
const CHUNKS_PER_WINDOW: usize = 16;
/// GPU activity rows written as text at once by one thread of
/// [`RunWriter::append_gpu_lines`] (as [`gpu_rows`] writes them, 1024 at a time).
const GPU_ROWS_PER_CHUNK: usize = 1024;

/// A new run folder's files, written under its hidden name.
fn fill_new(partial: &Path, meta: &Meta, experiment_text: &str) -> Result<(), StoreError> {
    crate::fsx::write_file(&partial.join(EXPERIMENT_COPY), experiment_text.as_bytes())?;
    write_meta(partial, meta)?;
    for (file, header) in [
        (RUNS, header_of(&RunRow::sample())),
        (SPANS, header_of(&SpanRow::sample())),
        (TELEMETRY, header_of(&TelemetryRow::sample())),
        (GPU_ACTIVITY, header_of(&GpuActivityRow::sample())),
    ] {
        drop(Appender::create(&partial.join(file), &strs(&header))?);
    }
    Ok(())
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// Writes meta.json of run folder `dir`, its paths as `meta.paths` says ([`paths`]).
pub fn write_meta(dir: &Path, meta: &Meta) -> Result<(), StoreError> {
    // Through the struct, so that meta.json keeps its fields in their order.
    let bytes = serde_json::to_vec_pretty(&paths::as_written(dir, meta));
    crate::fsx::write_file(&dir.join(META), &bytes.expect("meta serialises"))?;
    Ok(())
}

/// [`write_meta`] of an imported folder, with more top-level objects beside the
/// [`Meta`] fields (its record of its source files, `import`), which readers of
/// [`Meta`] pass over. Not fsynced, as its rows are not
/// ([`RunWriter::without_waiting_for_the_disk`]): the traces make the folder again, and
/// an fsync here would wait for every row the import wrote.
pub fn write_imported_meta(
    dir: &Path,
    meta: &Meta,
    extra: &[(&str, serde_json::Value)],
) -> Result<(), StoreError> {
    let bytes = serde_json::to_vec_pretty(&paths::meta_json(dir, meta, extra));
    crate::fsx::write_file_unsynced(&dir.join(META), &bytes.expect("meta serialises"))?;
    Ok(())
}

/// Reads meta.json (a regular file of at most [`MAX_META_BYTES`]) and refuses a schema
/// version this gapscope does not know.
pub fn read_meta(dir: &Path) -> Result<Meta, StoreError> {
    let p = dir.join(META);
    let bytes = crate::fsx::read_in_dir(dir, META, MAX_META_BYTES)?;
    let meta: Meta = serde_json::from_slice(&bytes).map_err(|e| StoreError::Parse {
        path: p.clone(),
        line: e.line() as u64,
        message: format!("{e} (is this a gapscope run folder?)"),
    })?;
    if meta.schema_version == 0 || meta.schema_version > SCHEMA_VERSION {
        return Err(StoreError::Invalid {
            path: p,
            message: format!(
                "schema_version {} is not one this gapscope reads (1 to {SCHEMA_VERSION}): \
                 the folder was written by another version of gapscope ({}); read it with \
                 that version",
                meta.schema_version, meta.gapscope_version
            ),
        });
    }
    let checked = meta
        .workload
        .check()
        .and_then(|_| meta.phases.as_ref().map_or(Ok(()), |p| p.check()));
    if let Err(message) = checked {
        return Err(StoreError::Invalid { path: p, message });
    }
    Ok(meta)
}

/// Reads a whole CSV of `T`, naming the file and line of the first bad record. A file
/// whose last line is cut short (no trailing newline and unparsable) is reported as
/// truncated.
pub fn read_csv<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Vec<T>, StoreError> {
    let (path, bytes) = read_text(path)?;
    parse_csv(&path, &bytes)
}

/// [`read_csv`] of the file's complete lines only: every row is written with its line
/// end, so an unterminated last line is what a run killed mid-write leaves, and it is
/// left out (its rep has no runs.csv row yet, or it is found incomplete by its count).
pub fn read_csv_complete<T: serde::de::DeserializeOwned>(
    path: &Path,
) -> Result<Vec<T>, StoreError> {
    let mut out = Vec::new();
    read_complete_into(path, &mut out)?;
    Ok(out)
}

/// [`read_csv_complete`] appending to `out`; returns the path read (`NAME.csv`, or
/// `NAME.csv.gz` where only that exists). A plain file is parsed as it is read, a buffer
/// at a time, so that a table of millions of rows is never held as text beside its rows;
/// a gzipped one is decompressed whole first.
fn read_complete_into<T: serde::de::DeserializeOwned>(
    path: &Path,
    out: &mut Vec<T>,
) -> Result<PathBuf, StoreError> {
    read_complete_each(path, |r| {
        out.push(r);
        Ok(())
    })
}

/// [`read_complete_into`] handing each row to `each` as it is parsed.
fn read_complete_each<T: serde::de::DeserializeOwned>(
    path: &Path,
    each: impl FnMut(T) -> Result<(), StoreError>,
) -> Result<PathBuf, StoreError> {
    use std::io::{Read, Seek, SeekFrom};
    if !present(path) && present(&gz_path(path)) {
        let (path, bytes) = read_text(path)?;
        let text = &bytes[..complete_len(&bytes)];
        parse_csv_each(&path, text, || text.lines().count() as u64, each)?;
        return Ok(path);
    }
    let mut f = crate::fsx::read::open_no_follow(path)?;
    let len = f.metadata().map_err(io(path))?.len();
    if len > MAX_TABLE_BYTES {
        return Err(crate::fsx::ReadError::TooLarge {
            path: path.to_path_buf(),
            cap_bytes: MAX_TABLE_BYTES,
            decompressed: "",
        }
        .into());
    }
    // Up to the last line end the file had when opened: a run appending meanwhile adds
    // only lines past it.
    let keep = last_line_end(&mut f, len).map_err(io(path))?;
    f.seek(SeekFrom::Start(0)).map_err(io(path))?;
    let text = std::io::BufReader::with_capacity(1 << 20, f.take(keep));
    let lines = || {
        // Counted only to word an error, from the file again (its text ends a line).
        let mut text = match crate::fsx::read::open_no_follow(path) {
            Ok(f) => f.take(keep),
            Err(_) => return 0,
        };
        let (mut buf, mut n) = (vec![0u8; 64 << 10], 0);
        while let Ok(k @ 1..) = text.read(&mut buf) {
            n += buf[..k].iter().filter(|&&b| b == b'\n').count() as u64;
        }
        n
    };
    parse_csv_each(path, text, lines, each)?;
    Ok(path.to_path_buf())
}

/// Bytes of `text` up to and with its last line end.
fn complete_len(text: &[u8]) -> usize {
    text.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1)
}

/// Bytes of the first `len` of `f` up to and with its last line end, read from the end
/// back.
fn last_line_end(f: &mut File, len: u64) -> std::io::Result<u64> {
    use std::io::{Read, Seek, SeekFrom};
    let mut buf = vec![0u8; 64 << 10];
    let mut end = len;
    while end > 0 {
        let start = end.saturating_sub(buf.len() as u64);
        let chunk = &mut buf[..(end - start) as usize];
        f.seek(SeekFrom::Start(start))?;
        f.read_exact(chunk)?;
        if let Some(p) = chunk.iter().rposition(|&b| b == b'\n') {
            return Ok(start + p as u64 + 1);
        }
        end = start;
    }
    Ok(0)
}

fn parse_csv<T: serde::de::DeserializeOwned>(
    path: &Path,
    bytes: &[u8],
) -> Result<Vec<T>, StoreError> {
    let mut out = Vec::new();
    parse_csv_into(path, bytes, || bytes.lines().count() as u64, &mut out)?;
    Ok(out)
}

/// Parses CSV text (header first) into `out`; `total_lines` counts the text's lines
/// when a record is bad, to say whether it is the last one (a truncated file).
fn parse_csv_into<T: serde::de::DeserializeOwned, R: std::io::Read>(
    path: &Path,
    text: R,
    total_lines: impl FnOnce() -> u64,
    out: &mut Vec<T>,
) -> Result<(), StoreError> {
    parse_csv_each(path, text, total_lines, |r| {
        out.push(r);
        Ok(())
    })
}

/// [`parse_csv_into`] handing each row to `each` as it is parsed (which may stop the
/// reading with an error of its own).
fn parse_csv_each<T: serde::de::DeserializeOwned, R: std::io::Read>(
    path: &Path,
    text: R,
    total_lines: impl FnOnce() -> u64,
    mut each: impl FnMut(T) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(true)
        .from_reader(text);
    for rec in rdr.deserialize() {
        match rec {
            Ok(r) => each(r)?,
            Err(e) => {
                let line = e.position().map(|p| p.line()).unwrap_or(0);
                let hint = if line >= total_lines() {
                    " (the file looks truncated: was the run killed? `gapscope run --resume DIR` repairs it)"
                } else {
                    ""
                };
                return Err(StoreError::Parse {
                    path: path.to_path_buf(),
                    line,
                    message: format!("{}{hint}", e.kind_message()),
                });
            }
        }
    }
    Ok(())
}

trait KindMessage {
    fn kind_message(&self) -> String;
}

impl KindMessage for csv::Error {
    fn kind_message(&self) -> String {
        match self.kind() {
            csv::ErrorKind::Deserialize { err, .. } => match err.field() {
                Some(f) => format!("field {}: {}", f + 1, err.kind()),
                None => err.kind().to_string(),
            },
            csv::ErrorKind::UnequalLengths {
                expected_len, len, ..
            } => {
                format!("{len} fields where the header has {expected_len}")
            }
            _ => self.to_string(),
        }
    }
}

/// A run folder read back whole.
#[derive(Debug)]
pub struct RunData {
    pub dir: PathBuf,
    pub meta: Meta,
    pub runs: Vec<RunRow>,
    /// Every span of the folder; empty where they were left in it
    /// ([`RunData::load_spans_by_rep`]).
    pub spans: Vec<SpanRow>,
    /// The spans were left in the folder: [`RunData::for_each_rep`] reads them a rep at
    /// a time, and only readers written with it may be given this folder.
    pub spans_on_disk: bool,
}

impl RunData {
    pub fn load(dir: &Path) -> Result<Self, StoreError> {
        let (meta, runs) = Self::read_head(dir)?;
        let (spans, parts) = parts::read_parts_complete(dir, SPANS)?;
        integrity::check_loaded(dir, &runs, &spans, &parts)?;
        Ok(RunData {
            dir: dir.to_path_buf(),
            meta,
            runs,
            spans,
            spans_on_disk: false,
        })
    }

    /// A run folder's meta.json and runs.csv, as every load reads them first.
    fn read_head(dir: &Path) -> Result<(Meta, Vec<RunRow>), StoreError> {
        if !present(&dir.join(META)) {
            return Err(StoreError::Invalid {
                path: dir.to_path_buf(),
                message: format!("no {META} here: not a gapscope run folder (expected results/<experiment>/<run>/)"),
            });
        }
        Ok((read_meta(dir)?, read_csv_complete(&dir.join(RUNS))?))
    }
}

impl RunData {
    /// The NVML samples of the run (empty for a run folder from before telemetry),
    /// without the rows no run writes ([`Self::load_telemetry_checked`] says which).
    pub fn load_telemetry(&self) -> Result<Vec<TelemetryRow>, StoreError> {
        self.load_telemetry_checked().map(|(rows, _)| rows)
    }

    /// [`Self::load_telemetry`], and one line per reason a row was left out
    /// ([`gpu_checks`]: a percentage above 100, a time an hour outside its rep, …).
    pub fn load_telemetry_checked(&self) -> Result<(Vec<TelemetryRow>, Vec<String>), StoreError> {
        let rows = parts::read_optional_parts(&self.dir, TELEMETRY)?;
        Ok(gpu_checks::check_telemetry(rows, &self.runs))
    }

    /// The CUPTI kernels and copies of the run (empty for a run folder from before
    /// telemetry), without the rows no run writes.
    pub fn load_gpu_activity(&self) -> Result<Vec<GpuActivityRow>, StoreError> {
        self.load_gpu_activity_checked().map(|(rows, _)| rows)
    }

    /// [`Self::load_gpu_activity`], and one line per reason a row was left out
    /// ([`gpu_checks`]: an end before its start, a duration that is not end − start, …).
    pub fn load_gpu_activity_checked(
        &self,
    ) -> Result<(Vec<GpuActivityRow>, Vec<String>), StoreError> {
        let rows = parts::read_optional_parts(&self.dir, GPU_ACTIVITY)?;
        Ok(gpu_checks::check_activity(rows, &self.runs))
    }
}

/// `NAME.csv`, or `NAME.csv.gz` where only that exists: committed results keep their large
/// tables gzipped. Returns the path read and its (decompressed) bytes: a regular file,
/// never through a link, of at most [`MAX_TABLE_BYTES`] (decompressed).
fn read_text(path: &Path) -> Result<(PathBuf, Vec<u8>), StoreError> {
    let gz = gz_path(path);
    if !present(path) && present(&gz) {
        let text = crate::fsx::read_gz_no_follow(&gz, MAX_TABLE_BYTES)?;
        return Ok((gz, text));
    }
    let text = crate::fsx::read_no_follow(path, MAX_TABLE_BYTES)?;
    Ok((path.to_path_buf(), text))
}

fn gz_path(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".gz");
    PathBuf::from(p)
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod gpu_tests;
