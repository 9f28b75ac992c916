//! spans.csv (and telemetry.csv, gpu_activity.csv) in parts. A reader refuses a table file past [`MAX_TABLE_BYTES`], so the
//! writer never makes one: before a rep's rows would take the part it writes past the
//! part size (the cap, unless `GAPSCOPE_TABLE_PART_BYTES` lowers it), it starts the next
//! part. spans.csv is the first part, `spans.2.csv`, `spans.3.csv`, … the next ones,
//! each with the header; any of them may be stored gzipped (`NAME.gz`). A rep's rows
//! stay in one part: a rep starts a part of its own when its rows do not fit in what is
//! left of the current one (or pass [`REP_BUFFER`]), and a rep whose rows alone pass the
//! cap keeps none of them and is recorded as failed, saying so (for a GPU table, an
//! error of the run).
//!
//! Readers read every part, in order, each through the same hardened reader as the
//! first (never through a link, only a regular file, under the cap); a part missing
//! between two others is refused.

use std::path::{Path, PathBuf};

use super::{io, present, Appender, StoreError, MAX_TABLE_BYTES};

/// Setting (environment) that lowers the size of a part below [`MAX_TABLE_BYTES`], so
/// that parts can be seen without writing gigabytes. Read when a run folder is opened
/// for writing; a value that is not a number of bytes is ignored.
pub const PART_BYTES_VAR: &str = "GAPSCOPE_TABLE_PART_BYTES";

/// Most parts a table has: past it a folder is refused rather than read.
pub const MAX_PARTS: u32 = 4096;

/// Most bytes of a rep's rows held in memory while the writer decides where the rep
/// goes: a rep longer than this, after earlier reps in the current part, starts a part
/// of its own (a rep is never split, and never held whole past this). Small beside a
/// rep of a million spans (about 180 MB of text), so that writing a run's later reps
/// takes about the memory of writing its first (which goes straight to its part).
const REP_BUFFER: u64 = 16 << 20;

/// Rows are written to the file in batches of about this many bytes.
const WRITE_BATCH: usize = 1 << 20;

/// The part size: [`PART_BYTES_VAR`] where it is set to a number of bytes (1 at least,
/// the cap at most), else the cap.
pub fn part_bytes() -> u64 {
    std::env::var(PART_BYTES_VAR)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(MAX_TABLE_BYTES, |n| n.clamp(1, MAX_TABLE_BYTES))
}

/// The name of part `n` (from 1) of `table`: the table's own name for the first part,
/// `spans.2.csv` for the second part of `spans.csv`.
pub fn part_name(table: &str, n: u32) -> String {
    if n <= 1 {
        return table.to_string();
    }
    match table.rsplit_once('.') {
        Some((stem, ext)) => format!("{stem}.{n}.{ext}"),
        None => format!("{table}.{n}"),
    }
}

/// The number of the part `name` is (2 and up; the first part is the table's name),
/// plain or gzipped; `None` for any other name.
fn part_number(table: &str, name: &str) -> Option<u32> {
    let (stem, ext) = table.rsplit_once('.')?;
    let name = name.strip_suffix(".gz").unwrap_or(name);
    let digits = name
        .strip_prefix(stem)?
        .strip_prefix('.')?
        .strip_suffix(ext)?
        .strip_suffix('.')?;
    let n: u32 = digits.parse().ok()?;
    (n >= 2 && n.to_string() == digits).then_some(n)
}

/// The paths of every part of `table` in run folder `dir`, in order, the first part's
/// included whether or not it is there (each path is the plain name; the reader takes
/// `NAME.gz` where only that exists). A part missing between two others, or more than
/// [`MAX_PARTS`] parts, is refused.
pub(super) fn part_paths(dir: &Path, table: &str) -> Result<Vec<PathBuf>, StoreError> {
    let mut last = 1u32;
    let entries = std::fs::read_dir(dir).map_err(io(dir))?;
    for e in entries {
        let e = e.map_err(io(dir))?;
        if let Some(n) = e.file_name().to_str().and_then(|s| part_number(table, s)) {
            last = last.max(n);
        }
    }
    if last > MAX_PARTS {
        return Err(StoreError::Invalid {
            path: dir.join(part_name(table, last)),
            message: format!(
                "{table} has parts up to {last}, more than the {MAX_PARTS} gapscope reads; no \
                 run writes this many"
            ),
        });
    }
    let paths: Vec<PathBuf> = (1..=last).map(|n| dir.join(part_name(table, n))).collect();
    let last_name = part_name(table, last);
    for p in &paths[1..] {
        if !present(p) && !present(&super::gz_path(p)) {
            return Err(StoreError::Invalid {
                path: p.clone(),
                message: format!(
                    "missing (nor is there a .gz of it), while {last_name} is there: a part \
                     of {table} is gone; put it back (its reps' spans are in it)"
                ),
            });
        }
    }
    Ok(paths)
}

/// Where the rows of one part begin among the rows of every part read together.
#[derive(Debug, Clone)]
pub(super) struct PartStart {
    /// The file read (`NAME` or `NAME.gz`).
    pub path: PathBuf,
    /// Index of its first row among all the rows.
    pub first: usize,
}

/// The file and line of row `i` of the parts read together (rows are one a line, after
/// a header).
pub(super) fn locate(parts: &[PartStart], i: usize) -> (PathBuf, u64) {
    let p = parts
        .iter()
        .rev()
        .find(|p| p.first <= i)
        .expect("the first part starts at row 0");
    (p.path.clone(), (i - p.first) as u64 + 2)
}

/// Every part of `table` in `dir` read in order, each of its complete lines only
/// ([`super::read_csv_complete`]); with where each part's rows begin.
pub(super) fn read_parts_complete<T: serde::de::DeserializeOwned>(
    dir: &Path,
    table: &str,
) -> Result<(Vec<T>, Vec<PartStart>), StoreError> {
    let mut rows = Vec::new();
    let mut starts = Vec::new();
    for p in part_paths(dir, table)? {
        // Parsed straight onto the rows of the parts before.
        let first = rows.len();
        let path = super::read_complete_into(&p, &mut rows)?;
        starts.push(PartStart { path, first });
    }
    Ok((rows, starts))
}

/// [`read_parts_complete`]'s rows for a table a run folder may lack (telemetry.csv and
/// gpu_activity.csv of folders from before them): none where its first part is not there.
pub(super) fn read_optional_parts<T: serde::de::DeserializeOwned>(
    dir: &Path,
    table: &str,
) -> Result<Vec<T>, StoreError> {
    let first = dir.join(table);
    if !super::present(&first) && !super::present(&super::gz_path(&first)) {
        return Ok(Vec::new());
    }
    Ok(read_parts_complete(dir, table)?.0)
}

/// What became of a rep's rows.
pub(super) enum Written {
    /// All of them written, this many.
    Rows(u32),
    /// None kept: they would take a part past the cap. The rep's error says why.
    Capped(String),
}

/// Appends reps' rows to a table in parts.
pub(super) struct PartWriter {
    dir: PathBuf,
    table: &'static str,
    header: Vec<String>,
    /// Length of the header line, bytes.
    header_len: u64,
    /// The part written to (from 1).
    n: u32,
    out: Appender,
    /// Bytes in that part (its header included).
    len: u64,
    part_bytes: u64,
    /// Most bytes a part may hold: [`MAX_TABLE_BYTES`] (lower in tests).
    cap: u64,
    buf: Vec<u8>,
}

impl PartWriter {
    /// A writer appending to part `n` of `table`, which holds `len` bytes (a gzipped
    /// part counts its plain bytes).
    /// The writer of table `table`'s first part, just made in `dir` with `header`.
    pub(super) fn first(
        dir: &Path,
        table: &'static str,
        header: Vec<String>,
    ) -> Result<Self, StoreError> {
        let path = dir.join(table);
        let out = Appender::append_existing(&path)?;
        let len = std::fs::metadata(&path).map_err(io(dir))?.len();
        Ok(PartWriter::new(dir, table, header, 1, out, len))
    }

    pub(super) fn new(
        dir: &Path,
        table: &'static str,
        header: Vec<String>,
        n: u32,
        out: Appender,
        len: u64,
    ) -> Self {
        let mut w = csv::WriterBuilder::new()
            .has_headers(false)
            .from_writer(Vec::new());
        w.write_record(&header).expect("in memory");
        let header_len = w.into_inner().expect("in memory").len() as u64;
        PartWriter {
            dir: dir.to_path_buf(),
            table,
            header,
            header_len,
            n,
            out,
            len,
            part_bytes: part_bytes(),
            cap: MAX_TABLE_BYTES,
            buf: Vec::new(),
        }
    }

    /// Sets the part size (at most the cap), in place of [`PART_BYTES_VAR`]'s.
    #[cfg(test)]
    pub(super) fn set_part_bytes(&mut self, n: u64) {
        self.part_bytes = n.clamp(1, self.cap);
    }

    /// Sets the cap below [`MAX_TABLE_BYTES`] (and the part size with it).
    #[cfg(test)]
    pub(super) fn set_cap(&mut self, n: u64) {
        self.cap = n.min(MAX_TABLE_BYTES);
        self.part_bytes = self.part_bytes.min(self.cap);
    }

    /// Appends one rep's rows, all in one part, and flushes them to disk. `next`
    /// appends the next piece of the rep's rows (one row or many, as CSV lines) to the
    /// buffer it is given and says how many rows it holds; None once there are no more.
    pub(super) fn write_rep(
        &mut self,
        next: impl FnMut(&mut Vec<u8>) -> Option<u32>,
    ) -> Result<Written, StoreError> {
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        let out = self.write_rows(next, &mut buf);
        // Kept for the next rep up to a write batch: what a rep held while its part was
        // decided is given back, not carried through the run.
        buf.clear();
        buf.shrink_to(2 * WRITE_BATCH);
        self.buf = buf;
        let written = out?;
        self.out.flush()?;
        Ok(written)
    }

    fn write_rows(
        &mut self,
        mut next: impl FnMut(&mut Vec<u8>) -> Option<u32>,
        buf: &mut Vec<u8>,
    ) -> Result<Written, StoreError> {
        // A part that holds no rows yet takes the rep as it comes; otherwise its rows
        // are held until they are known to fit in what is left of the part.
        let mut placed = self.len <= self.header_len;
        let mut start = self.len;
        let mut n = 0u32;
        while let Some(rows) = next(buf) {
            n += rows;
            if !placed {
                let room = self.part_bytes.saturating_sub(self.len).min(REP_BUFFER);
                if buf.len() as u64 <= room {
                    continue;
                }
                self.roll()?;
                placed = true;
                start = self.len;
            }
            if self.len + buf.len() as u64 > self.cap {
                // Cut back what the rep wrote; count the rest for the message.
                self.cut(start)?;
                let mut total = u64::from(n);
                loop {
                    buf.clear();
                    match next(buf) {
                        Some(rows) => total += u64::from(rows),
                        None => break,
                    }
                }
                buf.clear();
                let cap = match self.cap {
                    c if c % (1 << 30) == 0 => format!("{} GiB", c >> 30),
                    c => format!("{c} bytes"),
                };
                return Ok(Written::Capped(format!(
                    "its {total} span rows take more than the {cap} a table file of a run \
                     folder holds: none were kept, and the rep counts as failed. Record \
                     fewer spans per rep (a program's workload.max_spans_per_rep lowers how \
                     many a rep keeps)"
                )));
            }
            if buf.len() >= WRITE_BATCH {
                self.write_buf(buf)?;
            }
        }
        self.write_buf(buf)?;
        Ok(Written::Rows(n))
    }

    fn write_buf(&mut self, buf: &mut Vec<u8>) -> Result<(), StoreError> {
        if !buf.is_empty() {
            self.out.write_bytes(buf)?;
            self.out.start_writeback();
            self.len += buf.len() as u64;
            buf.clear();
        }
        Ok(())
    }

    /// Its parts written without waiting for the disk
    /// ([`super::RunWriter::without_waiting_for_the_disk`]).
    pub(super) fn without_waiting_for_the_disk(&mut self) {
        self.out.sync = false;
    }

    /// Starts the next part (its header only, on disk before any row of it).
    fn roll(&mut self) -> Result<(), StoreError> {
        self.out.flush()?;
        let next = self.dir.join(part_name(self.table, self.n + 1));
        let header: Vec<&str> = self.header.iter().map(String::as_str).collect();
        let sync = self.out.sync;
        self.out = Appender::create(&next, &header)?;
        self.out.sync = sync;
        self.out.flush()?;
        self.n += 1;
        self.len = self.header_len;
        Ok(())
    }

    /// Cuts the part written to back to `len` bytes.
    fn cut(&mut self, len: u64) -> Result<(), StoreError> {
        self.out.truncate(len)?;
        self.len = len;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_named_and_known_by_number() {
        assert_eq!(part_name("spans.csv", 1), "spans.csv");
        assert_eq!(part_name("spans.csv", 2), "spans.2.csv");
        assert_eq!(part_name("spans.csv", 12), "spans.12.csv");
        assert_eq!(part_number("spans.csv", "spans.2.csv"), Some(2));
        assert_eq!(part_number("spans.csv", "spans.12.csv.gz"), Some(12));
        for other in [
            "spans.csv",
            "spans.1.csv",
            "spans.02.csv",
            "spans..csv",
            "spans.x.csv",
            "spans.2.csv.tmp",
            "runs.2.csv",
        ] {
            assert_eq!(part_number("spans.csv", other), None, "{other}");
        }
    }

    #[test]
    fn a_row_is_located_in_its_part() {
        let parts = [
            PartStart {
                path: "a".into(),
                first: 0,
            },
            PartStart {
                path: "b".into(),
                first: 3,
            },
        ];
        assert_eq!(locate(&parts, 2), ("a".into(), 4));
        assert_eq!(locate(&parts, 3), ("b".into(), 2));
        assert_eq!(locate(&parts, 7), ("b".into(), 6));
    }
}
