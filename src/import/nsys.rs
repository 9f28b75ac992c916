//! Nsight Systems' SQLite export (`nsys export --type sqlite`): NVTX push/pop and
//! start/end ranges (`NVTX_EVENTS`) and CUDA runtime calls (`CUPTI_ACTIVITY_KIND_RUNTIME`)
//! as spans on their threads (`globalTid`, named by `ThreadNames`), kernels, copies
//! and memsets (`CUPTI_ACTIVITY_KIND_KERNEL/MEMCPY/MEMSET`) as GPU intervals, names
//! through `StringIds`. All on the session's ns clock.
//!
//! The database is read from a private copy of the bytes that were hashed (gunzipped
//! where needed), opened read-only: SQLite never touches the input or its folder.

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;

use rusqlite::{Connection, OpenFlags};

use super::model::Format;
use super::model::{GpuKind, GpuRecord, Span, Trace};
use super::ImportError;

/// The tables that make an SQLite file an nsys export, any one of which holds events.
const EVENT_TABLES: [&str; 4] = [
    "NVTX_EVENTS",
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
];

/// NVTX event types of ranges: push/pop and start/end (marks and domains are not spans).
const NVTX_PUSH_POP: i64 = 59;
const NVTX_START_END: i64 = 60;
const NVTX_MARK: i64 = 34;

fn nsys_err(path: &Path, why: impl Into<String>) -> ImportError {
    ImportError::Nsys {
        path: path.to_path_buf(),
        why: why.into(),
    }
}

/// Reads an export from its (decompressed, capped) bytes.
pub fn read_stream(stream: &mut dyn Read, path: &Path, _cap: u64) -> Result<Trace, ImportError> {
    let mut tmp = tempfile::NamedTempFile::new().map_err(|e| ImportError::io(path, e))?;
    std::io::copy(stream, tmp.as_file_mut()).map_err(|e| ImportError::from_io(path, e))?;
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(tmp.path(), flags)
        .map_err(|e| nsys_err(path, format!("cannot open as SQLite: {e}")))?;
    read(&conn, path)
}

/// The tables and their columns.
fn schema(conn: &Connection, path: &Path) -> Result<HashMap<String, Vec<String>>, ImportError> {
    let sql = |e: rusqlite::Error| nsys_err(path, format!("reading the schema: {e}"));
    let mut st = conn
        .prepare("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")
        .map_err(sql)?;
    let names: Vec<String> = st
        .query_map([], |r| r.get(0))
        .map_err(sql)?
        .collect::<Result<_, _>>()
        .map_err(sql)?;
    let mut out = HashMap::new();
    for n in names {
        let mut st = conn
            .prepare(&format!("PRAGMA table_info(\"{}\")", n.replace('"', "")))
            .map_err(sql)?;
        let cols: Vec<String> = st
            .query_map([], |r| r.get(1))
            .map_err(sql)?
            .collect::<Result<_, _>>()
            .map_err(sql)?;
        out.insert(n, cols);
    }
    Ok(out)
}

/// Reads an open export.
pub fn read(conn: &Connection, path: &Path) -> Result<Trace, ImportError> {
    let tables = schema(conn, path)?;
    if !EVENT_TABLES.iter().any(|t| tables.contains_key(*t)) || !tables.contains_key("StringIds") {
        let mut have: Vec<&str> = tables.keys().map(String::as_str).collect();
        have.sort_unstable();
        have.truncate(12);
        return Err(ImportError::NotATrace {
            path: path.to_path_buf(),
            why: format!(
                "an SQLite database without the tables of an Nsight Systems export (StringIds \
                 and one of {}); its tables: {}. Export with `nsys export --type sqlite \
                 REPORT.nsys-rep`",
                EVENT_TABLES.join(", "),
                if have.is_empty() {
                    "none".into()
                } else {
                    have.join(", ")
                }
            ),
        });
    }
    let mut r = Reader {
        conn,
        path,
        tables: &tables,
        trace: Trace::new(path, Format::Nsys),
    };
    r.thread_names()?;
    r.nvtx()?;
    r.runtime()?;
    for (table, kind) in [
        ("CUPTI_ACTIVITY_KIND_KERNEL", GpuKind::Kernel),
        ("CUPTI_ACTIVITY_KIND_MEMCPY", GpuKind::Memcpy),
        ("CUPTI_ACTIVITY_KIND_MEMSET", GpuKind::Memset),
    ] {
        r.gpu(table, kind)?;
    }
    Ok(r.trace)
}

struct Reader<'a> {
    conn: &'a Connection,
    path: &'a Path,
    tables: &'a HashMap<String, Vec<String>>,
    trace: Trace,
}

/// A process and thread of nsys's `globalTid` (pid in bits 24..48, tid in 0..24).
fn split_tid(global: i64) -> (String, String) {
    (
        ((global >> 24) & 0xff_ffff).to_string(),
        (global & 0xff_ffff).to_string(),
    )
}

impl Reader<'_> {
    /// `expr` where `table` has column `col`, else NULL (columns differ across versions).
    fn col(&self, table: &str, col: &str, expr: &str) -> String {
        let has = self
            .tables
            .get(table)
            .is_some_and(|c| c.iter().any(|x| x == col));
        if has {
            expr.to_string()
        } else {
            "NULL".into()
        }
    }

    fn rows<T>(
        &self,
        sql: &str,
        f: impl FnMut(&rusqlite::Row) -> rusqlite::Result<T>,
    ) -> Result<Vec<T>, ImportError> {
        let err = |e: rusqlite::Error| nsys_err(self.path, format!("{e} (in `{sql}`)"));
        let mut st = self.conn.prepare(sql).map_err(err)?;
        let out = st
            .query_map([], f)
            .map_err(err)?
            .collect::<Result<Vec<T>, _>>();
        out.map_err(err)
    }

    fn thread_names(&mut self) -> Result<(), ImportError> {
        if !self.tables.contains_key("ThreadNames") {
            return Ok(());
        }
        let names = self.rows(
            "SELECT t.globalTid, s.value FROM ThreadNames t JOIN StringIds s ON s.id = t.nameId",
            |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)),
        )?;
        for (g, name) in names {
            let (pid, tid) = split_tid(g);
            let t = self.trace.thread(&pid, &tid);
            self.trace.threads[t as usize].name = Some(name);
        }
        Ok(())
    }

    /// A span from a row's times, or a warning naming it when they are not a range.
    fn span(
        &mut self,
        what: &str,
        name: &str,
        global_tid: i64,
        start: i64,
        end: Option<i64>,
    ) -> Option<Span> {
        let (Ok(start_ns), Some(Ok(end_ns))) = (u64::try_from(start), end.map(u64::try_from))
        else {
            self.trace.warn(format!(
                "{what} {name:?} at {start} ns: {}; left out",
                if end.is_none() {
                    "never ended (no end time)"
                } else {
                    "a negative time"
                }
            ));
            return None;
        };
        if end_ns < start_ns {
            self.trace.warn(format!(
                "{what} {name:?} at {start} ns: ends before it starts; left out"
            ));
            return None;
        }
        let (pid, tid) = split_tid(global_tid);
        let name = self.trace.names.id(name);
        let thread = self.trace.thread(&pid, &tid);
        Some(Span::plain(name, thread, start_ns, end_ns))
    }

    fn nvtx(&mut self) -> Result<(), ImportError> {
        const T: &str = "NVTX_EVENTS";
        if !self.tables.contains_key(T) {
            return Ok(());
        }
        let text = self.col(
            T,
            "textId",
            "(SELECT value FROM StringIds WHERE id = e.textId)",
        );
        let sql = format!(
            "SELECT e.start, e.end, e.eventType, COALESCE({}, {text}, ''), COALESCE(e.globalTid, 0) \
             FROM {T} e ORDER BY e.start",
            self.col(T, "text", "e.text"),
        );
        type Row = (i64, Option<i64>, i64, String, i64);
        let rows: Vec<Row> = self.rows(&sql, |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })?;
        for (start, end, kind, name, tid) in rows {
            self.trace.counts.events += 1;
            match kind {
                NVTX_PUSH_POP | NVTX_START_END => {
                    if let Some(s) = self.span("NVTX range", &name, tid, start, end) {
                        self.trace.spans.push(s);
                    }
                }
                NVTX_MARK => self.trace.counts.instants += 1,
                _ => self.trace.counts.other += 1,
            }
        }
        Ok(())
    }

    /// CUDA runtime calls: spans carrying the correlation id of the work they launched.
    fn runtime(&mut self) -> Result<(), ImportError> {
        const T: &str = "CUPTI_ACTIVITY_KIND_RUNTIME";
        if !self.tables.contains_key(T) {
            return Ok(());
        }
        let sql = format!(
            "SELECT r.start, r.end, COALESCE((SELECT value FROM StringIds WHERE id = r.nameId), \
             'cuda runtime'), COALESCE(r.globalTid, 0), COALESCE({}, 0) FROM {T} r",
            self.col(T, "correlationId", "r.correlationId")
        );
        let rows: Vec<(i64, Option<i64>, String, i64, i64)> = self.rows(&sql, |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })?;
        for (start, end, name, tid, corr) in rows {
            self.trace.counts.events += 1;
            if let Some(mut s) = self.span("CUDA runtime call", &name, tid, start, end) {
                s.correlation = corr.max(0) as u64;
                self.trace.spans.push(s);
            }
        }
        Ok(())
    }

    /// The query of one GPU table: times, name (a copy's kind as a number), device,
    /// stream, correlation, grid, block, bytes (NULL where the table lacks a column).
    fn gpu_sql(&self, table: &str, kind: GpuKind) -> String {
        let name = match kind {
            GpuKind::Kernel => format!(
                "COALESCE((SELECT value FROM StringIds WHERE id = {}), (SELECT value FROM \
                 StringIds WHERE id = {}), 'kernel')",
                self.col(table, "demangledName", "g.demangledName"),
                self.col(table, "shortName", "g.shortName")
            ),
            GpuKind::Memcpy => {
                format!("COALESCE({}, 0)", self.col(table, "copyKind", "g.copyKind"))
            }
            GpuKind::Memset => "'memset'".into(),
        };
        let c = |col: &str| self.col(table, col, &format!("g.{col}"));
        format!(
            "SELECT g.start, g.end, {name}, COALESCE({}, 0), COALESCE({}, 0), COALESCE({}, 0), \
             {}, {}, {}, {}, {}, {}, {} FROM {table} g",
            c("deviceId"),
            c("streamId"),
            c("correlationId"),
            c("gridX"),
            c("gridY"),
            c("gridZ"),
            c("blockX"),
            c("blockY"),
            c("blockZ"),
            c("bytes"),
        )
    }

    fn gpu(&mut self, table: &str, kind: GpuKind) -> Result<(), ImportError> {
        if !self.tables.contains_key(table) {
            return Ok(());
        }
        let sql = self.gpu_sql(table, kind);
        let rows = self.rows(&sql, |r| {
            let name = match r.get_ref(2)? {
                rusqlite::types::ValueRef::Integer(k) => {
                    crate::telemetry::activity::copy_direction(k as u8).to_string()
                }
                v => v.as_str().unwrap_or("").to_string(),
            };
            let opt = |i: usize| -> rusqlite::Result<Option<i64>> { r.get(i) };
            let triple = |a: usize| -> rusqlite::Result<Option<[u32; 3]>> {
                Ok(match (opt(a)?, opt(a + 1)?, opt(a + 2)?) {
                    (Some(x), Some(y), Some(z)) => Some([x as u32, y as u32, z as u32]),
                    _ => None,
                })
            };
            Ok((
                (r.get::<_, i64>(0)?, r.get::<_, i64>(1)?),
                name,
                (
                    r.get::<_, i64>(3)?,
                    r.get::<_, i64>(4)?,
                    r.get::<_, i64>(5)?,
                ),
                (triple(6)?, triple(9)?, opt(12)?),
            ))
        })?;
        for ((start, end), name, (dev, stream, corr), (grid, block, bytes)) in rows {
            self.trace.counts.events += 1;
            let (Ok(start_ns), Ok(end_ns)) = (u64::try_from(start), u64::try_from(end)) else {
                self.trace.warn(format!(
                    "{table} {name:?} at {start} ns: a negative time; left out"
                ));
                continue;
            };
            if end_ns < start_ns {
                self.trace.warn(format!(
                    "{table} {name:?} at {start} ns: ends before it starts; left out"
                ));
                continue;
            }
            let record = GpuRecord {
                kind,
                name: self.trace.names.id(&name),
                device: dev as u32,
                stream: stream as u32,
                correlation: corr.max(0) as u64,
                start_ns,
                end_ns,
                grid,
                block,
                bytes: bytes.map(|b| b.max(0) as u64),
            };
            self.trace.gpu.push(record);
        }
        Ok(())
    }
}
