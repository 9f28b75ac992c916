//! The history database's schema (SQLite, compiled in through rusqlite's `bundled`),
//! created on first open and checked on every later one. docs/history.md describes each
//! table; this file is the one that creates them.
//!
//! Rows are only ever inserted (`INSERT OR IGNORE` on their natural keys), never
//! updated or deleted, with one exception: a commit's first-parent position is filled in
//! where it was unknown. So importing a folder again changes nothing already stored.

use std::path::Path;

use rusqlite::Connection;

use super::HistoryError;

/// Bumped on any change of the tables below; an older database is refused with the
/// reason rather than read wrongly.
pub const SCHEMA_VERSION: i64 = 1;

const TABLES: &str = "
CREATE TABLE IF NOT EXISTS schema_info (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
-- A machine, by what makes its numbers comparable (hostnames change, reboots move
-- MemTotal by a few MB: memory is bucketed, the hostname is only shown).
CREATE TABLE IF NOT EXISTS hosts (
    id           TEXT PRIMARY KEY,   -- first 12 hex digits of sha256(fingerprint)
    fingerprint  TEXT NOT NULL UNIQUE,
    cpu_model    TEXT NOT NULL,
    cpu_cores    INTEGER NOT NULL,
    gpu_model    TEXT NOT NULL,      -- e.g. '2x NVIDIA H200', or 'none'
    gpu_driver   TEXT NOT NULL,      -- NVML's driver version, or 'none'
    memory_bucket TEXT NOT NULL,     -- e.g. '256 GiB' (half-octave buckets)
    hostname     TEXT NOT NULL       -- as first seen
);
-- A commit and its place on a branch's first-parent history (0 = the root commit).
CREATE TABLE IF NOT EXISTS commits (
    sha          TEXT PRIMARY KEY,
    branch       TEXT NOT NULL,
    position     INTEGER,            -- NULL: not on the branch's first-parent path
    subject      TEXT NOT NULL,
    committed_utc TEXT NOT NULL
);
-- One imported run folder (a run, or one step of a bisect).
CREATE TABLE IF NOT EXISTS runs (
    key          TEXT PRIMARY KEY,   -- '<host id>/<experiment>/<run_id>'
    kind         TEXT NOT NULL,      -- 'run' or 'bisect_step'
    path         TEXT NOT NULL,      -- where it was imported from
    experiment   TEXT NOT NULL,
    experiment_toml TEXT NOT NULL,   -- the folder's experiment copy
    host_id      TEXT NOT NULL REFERENCES hosts(id),
    created_utc  TEXT NOT NULL,
    imported_utc TEXT NOT NULL
);
-- What is measured: a workload, a variant's knobs, and a metric
-- ('SPAN.total|self|critical_self|process_cpu|COUNTER').
CREATE TABLE IF NOT EXISTS series (
    id           INTEGER PRIMARY KEY,
    workload     TEXT NOT NULL,
    variant_key  TEXT NOT NULL,
    metric       TEXT NOT NULL,
    UNIQUE (workload, variant_key, metric)
);
-- One value of one measured rep.
CREATE TABLE IF NOT EXISTS samples (
    run_key      TEXT NOT NULL REFERENCES runs(key),
    variant      TEXT NOT NULL,      -- the variant's name in that run
    rep          INTEGER NOT NULL,
    series_id    INTEGER NOT NULL REFERENCES series(id),
    commit_sha   TEXT NOT NULL REFERENCES commits(sha),
    host_id      TEXT NOT NULL REFERENCES hosts(id),
    value        REAL NOT NULL,
    PRIMARY KEY (run_key, variant, rep, series_id)
);
CREATE INDEX IF NOT EXISTS samples_by_series ON samples (series_id, host_id, commit_sha);
";

/// Most problems `PRAGMA integrity_check` lists before it stops.
const INTEGRITY_CHECK_ROWS: u32 = 5;

/// Refuses a damaged database before anything is read from it or written to it: a
/// page overwritten or cut short can leave SQLite answering from what is left (a wrong
/// count, values missing) without an error. `integrity_check` reads every page (the
/// b-trees' structure) and checks that every index holds exactly its table's rows:
/// `quick_check` leaves that out, and a damaged index then answers a count or a lookup
/// with rows the table does not have. The cost, on a 2-core VM with a history of
/// 200,000 samples (a 55 MB file, in the page cache): `quick_check` 0.10 s,
/// `integrity_check` 0.46 to 0.55 s, paid once per command that opens the database.
/// What no check finds is a value changed in place (a sample's number): SQLite keeps
/// no checksum of a page.
fn check_intact(conn: &Connection, path: &Path) -> Result<(), HistoryError> {
    let damaged = |what: String| HistoryError::Open {
        path: path.to_path_buf(),
        message: format!(
            "the database is damaged ({what}): nothing was read or written. Restore it from \
             a copy, or import the run folders into a new file (`gapscope history import \
             DIR --db NEW`)"
        ),
    };
    let mut stmt = conn
        .prepare(&format!("PRAGMA integrity_check({INTEGRITY_CHECK_ROWS})"))
        .map_err(|e| damaged(e.to_string()))?;
    let found: Vec<String> = stmt
        .query_map([], |r| r.get::<_, String>(0))
        .and_then(|rows| rows.collect())
        .map_err(|e| damaged(e.to_string()))?;
    if found.len() == 1 && found[0] == "ok" {
        return Ok(());
    }
    Err(damaged(format!("integrity_check: {}", found.join("; "))))
}

/// The first bytes of every SQLite database file.
const SQLITE_HEADER: &[u8; 16] = b"SQLite format 3\0";

/// Refuses a file at the database path that is not empty and does not begin as an
/// SQLite database does (a text file named by mistake, or a database whose first page
/// was overwritten), before SQLite opens it. Read without following a link and without
/// waiting on a FIFO.
fn check_sqlite_header(path: &Path) -> Result<(), HistoryError> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let refused = |message: String| HistoryError::Open {
        path: path.to_path_buf(),
        message,
    };
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path);
    let mut f = match f {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(refused(e.to_string())),
    };
    let mut head = Vec::with_capacity(SQLITE_HEADER.len());
    (&mut f)
        .take(SQLITE_HEADER.len() as u64)
        .read_to_end(&mut head)
        .map_err(|e| refused(e.to_string()))?;
    if head.is_empty() || head == SQLITE_HEADER {
        return Ok(());
    }
    Err(refused(format!(
        "not an SQLite database (it begins {:?}, where an SQLite file begins \
         \"SQLite format 3\"): another file, or a history database damaged at its start; \
         nothing was read or written. Name the history database (or a new file), restore \
         it from a copy, or import the run folders into a new file (`gapscope history \
         import DIR --db NEW`)",
        String::from_utf8_lossy(&head)
    )))
}

/// Opens (creating when absent) the database at `path`, once it is a regular file that
/// begins as an SQLite database does and passes [`check_intact`].
pub fn open(path: &Path) -> Result<Connection, HistoryError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| HistoryError::Open {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
    }
    let open_err = |e: rusqlite::Error| HistoryError::Open {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    // The database is a file the user named: never a link (SQLite would write through it,
    // and its journal beside the link's target) nor a device or folder.
    if let Ok(m) = std::fs::symlink_metadata(path) {
        if !m.file_type().is_file() {
            return Err(HistoryError::Open {
                path: path.to_path_buf(),
                message: "not a regular file (a link, folder, FIFO or device): name a plain \
                          file for the history database"
                    .into(),
            });
        }
    }
    check_sqlite_header(path)?;
    let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE
        | rusqlite::OpenFlags::SQLITE_OPEN_CREATE
        | rusqlite::OpenFlags::SQLITE_OPEN_URI
        | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX
        | rusqlite::OpenFlags::SQLITE_OPEN_NOFOLLOW;
    let conn = Connection::open_with_flags(path, flags).map_err(open_err)?;
    check_intact(&conn, path)?;
    // A rollback journal with full syncs: a killed import leaves the last committed
    // folder and nothing of the one it was in.
    conn.execute_batch(
        "PRAGMA journal_mode = DELETE; PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;",
    )
    .map_err(open_err)?;
    conn.execute_batch(TABLES).map_err(open_err)?;
    let found: Option<String> = conn
        .query_row(
            "SELECT value FROM schema_info WHERE key = 'version'",
            [],
            |r| r.get(0),
        )
        .ok();
    match found {
        None => {
            conn.execute(
                "INSERT INTO schema_info (key, value) VALUES ('version', ?1)",
                [SCHEMA_VERSION.to_string()],
            )
            .map_err(open_err)?;
        }
        Some(v) if v == SCHEMA_VERSION.to_string() => {}
        Some(v) => {
            return Err(HistoryError::Open {
                path: path.to_path_buf(),
                message: format!(
                    "schema version {v}, this gapscope reads version {SCHEMA_VERSION}: \
                     use the gapscope that wrote it, or import the run folders into a new file"
                ),
            })
        }
    }
    Ok(conn)
}
