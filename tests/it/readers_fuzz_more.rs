//! Readers of what sits beside run folders, fed random bytes and random edits of valid
//! files: a run folder's sampled stacks (`stacks/rep<N>.json` and `.folded`, plain or
//! gzipped, and folded lines of any values) and a variant's build log (random bytes,
//! invalid UTF-8, terminal controls, a sparse file of up to a TiB, a link, a FIFO), a
//! sweep folder (the sweep file and its experiment, `sweep.json`, `slurm.json`, a
//! cell's `cell.toml`, squeue's lines) and the history database (random bytes as the
//! file, edits of a valid one, its rows set to values of any SQLite type). Each answers
//! with a value or a clean error, never a panic, within the time limit of crate::fuzz;
//! what it accepts is handed on (flame graphs and their sections, a failed build's
//! message, the sweep's status table and scheduler files, the history's series and
//! their steps).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use gapscope::history::{schema, series, DetectOptions, Filter};
use gapscope::profile::{self, folded, FoldedRow, ProfileCounts, RepProfile};
use gapscope::store::{self, RunData, RunView};
use gapscope::sweep::{self, slurm, status, SweepDir, SweepSpec};
use proptest::prelude::*;
use rusqlite::types::Value as Sql;

use crate::fixture;
use crate::fuzz::{bytes, fuzz, gzip, raw, sqlite_to_write, Bytes, Raw};

/// Cases per target in a plain `cargo test`.
const QUICK: u32 = 64;

/// A copy of the folder at `from` (files and folders, one level of folders deep).
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            copy_dir(&p, &to.join(e.file_name()));
        } else {
            std::fs::copy(&p, to.join(e.file_name())).unwrap();
        }
    }
}

/// A fixture run folder whose variants were sampled: meta.json's `profile` names them,
/// and every measured rep has its stacks, on spans of that rep.
fn profiled() -> &'static (tempfile::TempDir, PathBuf) {
    static DIR: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    DIR.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        let dir = fixture::write(tmp.path(), &fixture::Options::default());
        let mut meta = store::read_meta(&dir).unwrap();
        for v in fixture::VARIANTS {
            meta.profile
                .insert(v.to_string(), "sampled at 1000 Hz".to_string());
        }
        store::write_meta(&dir, &meta).unwrap();
        let data = RunData::load(&dir).unwrap();
        for run in data.runs.iter().filter(|r| !r.warmup) {
            let rows = data
                .spans
                .iter()
                .filter(|s| s.rep == run.rep)
                .enumerate()
                .map(|(i, s)| FoldedRow {
                    span_id: s.span_id,
                    span: s.name.to_string(),
                    foreign: i % 3 == 2,
                    frames: vec!["main".into(), format!("work_{i}"), "inner".into()],
                    count: 1 + i as u64 * 7,
                })
                .collect();
            let p = RepProfile {
                rep: run.rep,
                variant: run.variant.clone(),
                hz: 1000,
                unavailable: None,
                counts: ProfileCounts {
                    samples: 100,
                    own: 80,
                    foreign: 20,
                    outside: 0,
                },
                lost: 0,
                threads: 2,
                threads_failed: 0,
                frame_pointers: true,
                sampler_cpu_ns: 1000,
                thread_failure: None,
                of_program: false,
                left_out: Default::default(),
                rows,
            };
            folded::write_rep(&dir, &p).unwrap();
        }
        (tmp, dir)
    })
}

/// A folded line from values of any size (counts past u64's half, frames with the
/// format's separators).
fn folded_row() -> impl Strategy<Value = FoldedRow> {
    let frame = prop_oneof!["[a-z]{1,4}", Just(String::new()), Just(" ;:".to_string())];
    (
        prop_oneof![0u64..16, any::<u64>()],
        prop_oneof![
            Just("prove".to_string()),
            Just("synthesis".to_string()),
            "[ -~]{0,5}"
        ],
        any::<bool>(),
        prop::collection::vec(frame, 0..4),
        prop_oneof![0u64..100, any::<u64>(), Just(u64::MAX)],
    )
        .prop_map(|(span_id, span, foreign, frames, count)| FoldedRow {
            span_id,
            span,
            foreign,
            frames,
            count,
        })
}

/// One rep's stacks as a case makes them.
#[derive(Debug, Clone)]
enum Stacks {
    /// Its json file (`true`) or folded file edited or replaced, the folded file
    /// gzipped where asked.
    File(bool, Bytes, bool),
    /// Its folded file made of these rows.
    Rows(Vec<FoldedRow>),
}

fn stacks() -> impl Strategy<Value = Stacks> {
    prop_oneof![
        (any::<bool>(), bytes(1024), any::<bool>()).prop_map(|(j, b, gz)| Stacks::File(j, b, gz)),
        prop::collection::vec(folded_row(), 0..24).prop_map(Stacks::Rows),
    ]
}

/// Every reader of sampled stacks and what they hand on, on a folder whose rep `rep`
/// has the case's stacks.
fn read_stacks(rep: u32, case: &Stacks) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    copy_dir(&profiled().1, &dir);
    let json = dir.join(store::STACKS_JSON.of_rep(rep));
    let plain = dir.join(store::STACKS_FOLDED.of_rep(rep));
    match case {
        Stacks::File(true, b, _) => {
            let valid = std::fs::read(&json).unwrap();
            std::fs::write(&json, b.of(&valid)).unwrap();
        }
        Stacks::File(false, b, gz) => {
            let made = b.of(&std::fs::read(&plain).unwrap());
            if *gz {
                std::fs::remove_file(&plain).unwrap();
                std::fs::write(dir.join(store::STACKS_FOLDED.gz_of_rep(rep)), gzip(&made)).unwrap();
            } else {
                std::fs::write(&plain, made).unwrap();
            }
        }
        Stacks::Rows(rows) => {
            let text: String = rows.iter().map(|r| folded::line(r) + "\n").collect();
            std::fs::write(&plain, text).unwrap();
        }
    }
    let _ = folded::read_run(&dir, true);
    let _ = folded::read_run(&dir, false);
    let _ = folded::read_rep(&dir, rep);
    let data = RunData::load(&dir).unwrap();
    let _ = profile::summary_lines(&dir, &data.meta.profile);
    let out = tmp.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let [a, b] = fixture::VARIANTS;
    let _ = gapscope::report::flame::diff_flame(&data, a, &data, b, "prove", &out.join("d.svg"));
    let view = RunView::new(data);
    let _ = gapscope::report::flame::section(&view, &out, None);
    let _ = gapscope::report::flame::section(&view, &out, Some("synthesis"));
}

/// A case of [`folded_stacks_give_values_or_clean_errors`]: a rep's sampled stacks, or
/// the build log of a variant.
#[derive(Debug, Clone)]
enum RunFileCase {
    Stacks(u32, Stacks),
    BuildLog(BuildLog),
}

/// A variant's build log (`build-<variant>.log`, which meta.json names and whose tail a
/// failed build's reps quote) as a case makes it.
#[derive(Debug, Clone)]
enum BuildLog {
    /// A file of these bytes (a compiler's output edited, or random bytes: invalid UTF-8
    /// and terminal controls included) after a hole of this many bytes (a sparse file of
    /// any size), ending in the line [`LAST_LINE`] where asked.
    File(Bytes, u64, bool),
    /// A symbolic link to a file of these bytes.
    Link(Raw),
    /// A FIFO no one writes to.
    Fifo,
    /// A folder.
    Folder,
    /// Nothing there.
    Missing,
}

/// The last line of a build log a case marks.
const LAST_LINE: &str =
    "error: could not compile `subject` (bin \"subject\") due to 1 previous error";

/// Most bytes of a build log read for its tail (the reader's own limit).
const BUILD_LOG_TAIL: usize = 64 << 10;

/// A build's output: progress lines, a coloured error, its location.
const BUILD_OUTPUT: &str = "   Compiling subject v0.1.0 (/work/subject)\n\
    warning: unused variable: `x`\n --> src/main.rs:2:9\n\n\
    \x1b[1m\x1b[31merror[E0308]\x1b[0m: mismatched types\n --> src/main.rs:3:5\n  |\n\
    3 |     1u32 - 2u64\n  |     ^^^^ expected `u32`, found `u64`\n";

fn build_log_case() -> impl Strategy<Value = BuildLog> {
    let hole = prop_oneof![
        Just(0u64),
        0u64..200_000,
        Just(u64::from(u32::MAX)),
        Just(1u64 << 40),
    ];
    prop_oneof![
        4 => (bytes(4096), hole, any::<bool>()).prop_map(|(b, h, m)| BuildLog::File(b, h, m)),
        1 => raw(64).prop_map(BuildLog::Link),
        1 => Just(BuildLog::Fifo),
        1 => Just(BuildLog::Folder),
        1 => Just(BuildLog::Missing),
    ]
}

/// Why a failed build's reps fail, as read from a log the case made: a message that
/// names the log and ends in the log's last lines (its last line where the case marked
/// one), never longer than the 64 KiB it is read from (each byte at most shown as
/// `\xNN`), and never the content behind a link (named as a link); a FIFO, a folder
/// or no file gives the reason in place of the lines, at once.
fn check_build_log(case: &BuildLog) {
    use std::io::{Seek, SeekFrom, Write};
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join(store::build_log("candidate"));
    const SECRET: &str = "token=not-for-a-build-log";
    match case {
        BuildLog::File(b, hole, marked) => {
            let mut bytes = b.of(BUILD_OUTPUT.repeat(40).as_bytes());
            if *marked {
                bytes.extend_from_slice(format!("\n{LAST_LINE}\n").as_bytes());
            }
            let mut f = std::fs::File::create(&log).unwrap();
            f.seek(SeekFrom::Start(*hole)).unwrap();
            f.write_all(&bytes).unwrap();
        }
        BuildLog::Link(b) => {
            let target = tmp.path().join("elsewhere");
            let mut bytes = b.0.clone();
            bytes.extend_from_slice(format!("\n{SECRET}\n").as_bytes());
            std::fs::write(&target, bytes).unwrap();
            std::os::unix::fs::symlink(&target, &log).unwrap();
        }
        BuildLog::Fifo => {
            let c = std::ffi::CString::new(log.to_str().unwrap()).unwrap();
            assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        }
        BuildLog::Folder => std::fs::create_dir(&log).unwrap(),
        BuildLog::Missing => {}
    }
    let meta = store::BuildMeta {
        ok: false,
        wall_ns: 0,
        log: log.display().to_string(),
        status: "exit status: 101".into(),
        reused: false,
    };
    let why = gapscope::experiment::command::build_failure(&meta);
    let head = format!(
        "build failed (exit status: 101); log {} ends: ",
        log.display()
    );
    let tail = why
        .strip_prefix(&head)
        .unwrap_or_else(|| panic!("{why:?} does not begin {head:?}"));
    assert!(
        tail.len() <= 4 * BUILD_LOG_TAIL + 64,
        "{} bytes of a log's tail",
        tail.len()
    );
    assert!(
        !tail.chars().any(|c| c.is_control()),
        "controls in {tail:?}"
    );
    match case {
        BuildLog::File(_, _, true) => assert!(tail.ends_with(LAST_LINE), "{tail:?}"),
        BuildLog::File(..) => {}
        BuildLog::Link(_) => assert!(
            tail.contains("symbolic link") && !tail.contains(SECRET),
            "{tail:?}"
        ),
        BuildLog::Fifo | BuildLog::Folder => {
            assert!(tail.contains("not a regular file"), "{tail:?}")
        }
        BuildLog::Missing => assert!(!tail.is_empty(), "no reason given"),
    }
}

#[test]
fn folded_stacks_give_values_or_clean_errors() {
    // Cases start from stacks the readers read through to a flame graph.
    let dir = &profiled().1;
    let profiles = folded::read_run(dir, true).unwrap();
    assert!(!profiles.is_empty() && profiles.iter().all(|p| !p.rows.is_empty()));
    let out = tempfile::tempdir().unwrap();
    let view = RunView::new(RunData::load(dir).unwrap());
    let md = gapscope::report::flame::section(&view, out.path(), None);
    assert!(md.contains(".svg"), "{md}");
    let data = RunData::load(dir).unwrap();
    let reps: Vec<u32> = data
        .runs
        .iter()
        .filter(|r| !r.warmup)
        .map(|r| r.rep)
        .collect();
    let case = prop_oneof![
        3 => (prop::sample::select(reps), stacks()).prop_map(|(r, s)| RunFileCase::Stacks(r, s)),
        1 => build_log_case().prop_map(RunFileCase::BuildLog),
    ];
    fuzz(QUICK, case, |case| match case {
        RunFileCase::Stacks(rep, stacks) => read_stacks(rep, &stacks),
        RunFileCase::BuildLog(log) => check_build_log(&log),
    });
}

/// A sweep file of two axes over the quickstart experiment, with Slurm and Kubernetes
/// settings.
const SWEEP_TOML: &str = r#"name = "s"
experiment = "exp.toml"
[axes]
log2_constraints = [10, 11]
"variant.candidate.drop" = ["async", "sync"]
[slurm]
partition = "gpu"
throttle = 2
[k8s]
image = "gapscope:latest"
"#;

/// The files of a sweep folder a case may edit (relative to the folder that holds the
/// sweep file and the sweep root `root/s/`).
const SWEEP_FILES: [&str; 5] = [
    "sweep.toml",
    "exp.toml",
    "root/s/sweep.json",
    "root/s/slurm.json",
    "root/s/cell-0000/cell.toml",
];

/// A materialised sweep: its file, its experiment, the sweep folder with a submitted
/// job recorded, and cell 0's run folder (the fixture's).
fn swept() -> &'static (tempfile::TempDir, PathBuf) {
    static DIR: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    DIR.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path().join("sweep");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("sweep.toml"), SWEEP_TOML).unwrap();
        let quickstart = concat!(env!("CARGO_MANIFEST_DIR"), "/experiments/quickstart.toml");
        std::fs::copy(quickstart, d.join("exp.toml")).unwrap();
        let (spec, cells) = SweepSpec::load(&d.join("sweep.toml")).unwrap();
        let sd = SweepDir::new(&d.join("root"), &spec.name);
        let m = sd.materialise(&spec, &cells).unwrap();
        let jobs: Vec<slurm::Job> = sweep::by_gpus(&m.cells)
            .into_iter()
            .map(|(gpus, cells)| slurm::Job {
                job_id: "4242".into(),
                gpus,
                cells,
                script: "s.sbatch".into(),
                submitted_utc: "2026-01-01T00:00:00Z".into(),
            })
            .collect();
        std::fs::write(
            sd.dir.join("slurm.json"),
            serde_json::to_vec_pretty(&jobs).unwrap(),
        )
        .unwrap();
        fixture::write(&sd.cell_dir(0), &fixture::Options::default());
        (tmp, d)
    })
}

/// squeue's (and sacct's) lines: the recorded job's tasks with any state, or anything.
fn squeue_line() -> impl Strategy<Value = String> {
    prop_oneof![
        (
            "[0-9]{1,3}|18446744073709551616",
            "[A-Z]{0,8}",
            "[ -~]{0,8}"
        )
            .prop_map(|(t, s, r)| format!("4242_{t}|{s}|{r}")),
        "[ -~]{0,30}",
    ]
}

/// Every reader of a sweep folder, and what they hand on, after the case's edit.
fn read_sweep(file: &str, b: &Bytes, lines: &[String]) {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("sweep");
    copy_dir(&swept().1, &d);
    let p = d.join(file);
    std::fs::write(&p, b.of(&std::fs::read(&p).unwrap())).unwrap();
    let loaded = SweepSpec::load(&d.join("sweep.toml"));
    let sd = SweepDir::new(&d.join("root"), "s");
    if let Ok((spec, _)) = &loaded {
        let _ = spec.cell_count();
    }
    let (jobs, _) = slurm::recorded(&sd);
    for l in lines {
        for j in &jobs {
            let _ = slurm::parse_squeue_line(l, j);
        }
    }
    let Ok(m) = sd.manifest() else { return };
    let states = status::folder_states(&sd, &m);
    let _ = status::render(&states);
    let groups = sweep::by_gpus(&m.cells);
    for task in [0, 1, usize::MAX] {
        let _ = sweep::task_cell(task, groups.first().map(|g| g.1.as_slice()));
    }
    if let Ok((spec, cells)) = loaded {
        let _ = sd.materialise(&spec, &cells);
        let _ = slurm::check_values(&sd, &m, &spec.slurm);
        for (gpus, cells) in &groups {
            let _ = slurm::script(&sd, &m, &spec.slurm, Path::new("gapscope"), *gpus, cells);
        }
        let _ = sweep::k8s::manifests(&sd, &m, &spec.k8s);
    }
}

#[test]
fn sweep_files_give_values_or_clean_errors() {
    // Cases start from a sweep folder every reader reads: cell 0 has its run folder.
    let d = &swept().1;
    assert!(SweepSpec::load(&d.join("sweep.toml")).is_ok());
    let sd = SweepDir::new(&d.join("root"), "s");
    let states = status::folder_states(&sd, &sd.manifest().unwrap());
    assert_eq!(states[0].folder, "done", "{states:?}");
    assert!(!slurm::recorded(&sd).0.is_empty());
    fuzz(
        QUICK,
        (
            prop::sample::select(SWEEP_FILES.to_vec()),
            bytes(1024),
            prop::collection::vec(squeue_line(), 0..6),
        ),
        |(file, b, lines)| read_sweep(file, &b, &lines),
    );
}

/// The history tables and their columns (src/history/schema.rs).
const HISTORY_TABLES: [(&str, &[&str]); 6] = [
    ("schema_info", &["key", "value"]),
    (
        "hosts",
        &[
            "id",
            "fingerprint",
            "cpu_model",
            "cpu_cores",
            "gpu_model",
            "gpu_driver",
            "memory_bucket",
            "hostname",
        ],
    ),
    (
        "commits",
        &["sha", "branch", "position", "subject", "committed_utc"],
    ),
    (
        "runs",
        &[
            "key",
            "kind",
            "path",
            "experiment",
            "experiment_toml",
            "host_id",
            "created_utc",
            "imported_utc",
        ],
    ),
    ("series", &["id", "workload", "variant_key", "metric"]),
    (
        "samples",
        &[
            "run_key",
            "variant",
            "rep",
            "series_id",
            "commit_sha",
            "host_id",
            "value",
        ],
    ),
];

const SHAS: [&str; 3] = ["aaaaaaa", "bbbbbbb", "ccccccc"];

/// Commits of the synthetic series (positions 10 to 21 of `main`), its value stepping
/// up by half at the seventh.
const STEPPED: usize = 12;

/// A history database holding the fixture run imported at three commits (positions 0,
/// 1 and 2 of `main`), and a series over [`STEPPED`] later commits with a step (so that
/// cases reach the steps' reading too).
fn history() -> &'static [u8] {
    static DB: OnceLock<Vec<u8>> = OnceLock::new();
    DB.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        let db = tmp.path().join("history.sqlite");
        let mut conn = schema::open(&db).unwrap();
        let positions = SHAS
            .iter()
            .enumerate()
            .map(|(i, s)| (s.to_string(), i as i64))
            .collect();
        let ctx =
            gapscope::history::ImportContext::with_positions(Path::new("."), "main", positions);
        for (i, sha) in SHAS.iter().enumerate() {
            let dir = fixture::write(&tmp.path().join(format!("r{i}")), &Default::default());
            let mut meta = store::read_meta(&dir).unwrap();
            meta.git.revision = Some(sha.to_string());
            meta.run_id = format!("run-{sha}");
            store::write_meta(&dir, &meta).unwrap();
            gapscope::history::import::import_folder(&mut conn, &dir, &ctx, false).unwrap();
        }
        let mut sql = String::from(
            "INSERT INTO series (workload, variant_key, metric) VALUES ('synthetic', 'v', 'step.total');",
        );
        for i in 0..STEPPED {
            let value = if i < STEPPED / 2 { 100.0 } else { 150.0 };
            sql += &format!(
                "INSERT INTO commits VALUES ('c{i:02}', 'main', {}, 'commit {i}', '2026-01-01');",
                10 + i
            );
            for rep in 0..3 {
                sql += &format!(
                    "INSERT INTO samples SELECT (SELECT key FROM runs LIMIT 1), 'v', {},
                     (SELECT id FROM series WHERE workload = 'synthetic'), 'c{i:02}',
                     (SELECT id FROM hosts LIMIT 1), {};",
                    i * 3 + rep,
                    value + rep as f64
                );
            }
        }
        conn.execute_batch(&sql).unwrap();
        drop(conn);
        std::fs::read(&db).unwrap()
    })
}

/// A value of any SQLite type: the keys the rows join on, small and extreme numbers,
/// reals of any value, text, blobs, NULL.
fn history_value() -> impl Strategy<Value = Sql> {
    prop_oneof![
        prop::sample::select(vec!["aaaaaaa", "c00", "c06", "c11"])
            .prop_map(|s| Sql::Text(s.into())),
        (0i64..4).prop_map(Sql::Integer),
        prop::sample::select(vec![i64::MIN, i64::MAX, -1]).prop_map(Sql::Integer),
        any::<f64>().prop_map(Sql::Real),
        prop::sample::select(vec![f64::INFINITY, f64::NEG_INFINITY, 0.0, -1.0, 1e308])
            .prop_map(Sql::Real),
        "[a-z0-9.|]{0,6}".prop_map(Sql::Text),
        prop::collection::vec(any::<u8>(), 0..4).prop_map(Sql::Blob),
        Just(Sql::Null),
    ]
}

/// A change of one row of a history table: column `col` (modulo the table's) of row
/// `row` (from the last where not above 0: the synthetic series' rows) set to a
/// value, or the row deleted (`None`).
type RowEdit = (usize, usize, i64, Option<Sql>);

fn row_edit() -> impl Strategy<Value = RowEdit> {
    (
        0..HISTORY_TABLES.len(),
        any::<usize>(),
        -40i64..120,
        prop::option::weighted(0.9, history_value()),
    )
}

/// The row a [`RowEdit`] names (`?2`): by its rowid, or counted back from the last.
const ROW: &str = "rowid = CASE WHEN ?2 > 0 THEN ?2 ELSE (SELECT MAX(rowid) FROM {table}) + ?2 END";

/// The valid database with `rows` applied (through a connection without foreign keys
/// or checks), then its file's bytes edited or replaced.
fn history_file(path: &Path, rows: &[RowEdit], b: &Bytes) {
    std::fs::write(path, history()).unwrap();
    {
        let mut conn = sqlite_to_write(path);
        let conn = conn.transaction().unwrap();
        for (t, col, row, v) in rows {
            let (table, cols) = HISTORY_TABLES[*t];
            // An update SQLite refuses (text into an INTEGER PRIMARY KEY) changes nothing.
            let _ = match v {
                Some(v) => {
                    let col = cols[col % cols.len()];
                    let sql = format!("UPDATE OR IGNORE {table} SET {col} = ?1 WHERE {ROW}");
                    conn.execute(&sql.replace("{table}", table), rusqlite::params![v, row])
                }
                None => {
                    let sql = format!("DELETE FROM {table} WHERE {ROW}").replace("?2", "?1");
                    conn.execute(&sql.replace("{table}", table), [row])
                }
            };
        }
        conn.commit().unwrap();
    }
    std::fs::write(path, b.of(&std::fs::read(path).unwrap())).unwrap();
}

#[test]
fn history_databases_give_values_or_clean_errors() {
    // Cases start from a database whose series hold the three commits.
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("history.sqlite");
    std::fs::write(&db, history()).unwrap();
    let conn = schema::open(&db).unwrap();
    let all = series::load(&conn, &Filter::default()).unwrap();
    assert!(all.iter().any(|s| s.points.len() == SHAS.len()), "{all:?}");
    let steps = series::regressions(&conn, &Filter::default(), &DetectOptions::default());
    assert_eq!(steps.unwrap().len(), 1, "the synthetic series' step");
    drop(conn);
    let file = prop_oneof![
        4 => Just(Bytes::Edited(Vec::new())),
        1 => bytes(4096),
    ];
    fuzz(
        QUICK,
        (prop::collection::vec(row_edit(), 0..12), file),
        |(rows, b)| {
            let tmp = tempfile::tempdir().unwrap();
            let db = tmp.path().join("history.sqlite");
            history_file(&db, &rows, &b);
            let Ok(conn) = schema::open(&db) else { return };
            let opts = DetectOptions::default();
            let last = Filter {
                last: Some(2),
                ..Filter::default()
            };
            for f in [Filter::default(), last] {
                let Ok(all) = series::load(&conn, &f) else {
                    continue;
                };
                // The experiment of a few series' commits (each a query of its own).
                for s in all.iter().take(3) {
                    for sha in SHAS {
                        let _ = series::experiment_of(&conn, &s.key, sha);
                    }
                }
                for s in all {
                    let _ = series::analyse(s, &opts);
                }
            }
            let _ = series::regressions(&conn, &Filter::default(), &opts);
        },
    );
}
