//! The history store on synthetic run folders: import, idempotence, skipped folders,
//! hosts, series order and steps.

use std::collections::HashMap;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;

use super::*;
use crate::analysis::synthetic::SyntheticRun;
use crate::store;

/// A synthetic run folder at `dir` whose gapscope ran at `sha` on `host`, its span
/// `prove` longer with `scale`.
fn folder(dir: &Path, sha: &str, host: &str, scale: f64, seed: u64) {
    let mut r = SyntheticRun::new();
    r.experiment = "hist".into();
    r.reps = 4;
    r.noise = 0.01;
    r.seed = seed;
    r.hostname = host.into();
    r.variants.truncate(1);
    let name = r.variants[0].name.clone();
    // Unattributed time in the GPU wrapper: prove.total (about 1.1 s) grows by
    // (scale - 1) x 1 s.
    r.variant_mut(&name).gpu_gap_ns = ((scale - 1.0) * 1e9) as u64;
    r.write(dir).unwrap();
    let mut meta = store::read_meta(dir).unwrap();
    meta.git.revision = Some(sha.into());
    meta.run_id = format!("run-{sha}-{seed}");
    meta.host.cpu_model = format!("cpu of {host}");
    store::write_meta(dir, &meta).unwrap();
}

fn ctx(shas: &[&str]) -> ImportContext {
    let positions: HashMap<String, i64> = shas
        .iter()
        .enumerate()
        .map(|(i, s)| (s.to_string(), i as i64))
        .collect();
    ImportContext::with_positions(Path::new("."), "main", positions)
}

fn count(conn: &rusqlite::Connection) -> i64 {
    conn.query_row("SELECT COUNT(*) FROM samples", [], |r| r.get(0))
        .unwrap()
}

#[test]
fn a_folder_imports_once_and_again_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("r1");
    folder(&dir, "aaaaaaa", "h1", 1.0, 1);
    let mut conn = schema::open(&tmp.path().join("h.sqlite")).unwrap();
    let c = ctx(&["aaaaaaa"]);
    let first = import::import_folder(&mut conn, &dir, &c, false).unwrap();
    let Imported::Stored {
        values, already, ..
    } = first
    else {
        panic!("{first:?}")
    };
    assert!(values > 50, "{values}");
    assert_eq!(already, 0);
    let n = count(&conn);
    let sum: f64 = conn
        .query_row("SELECT SUM(value) FROM samples", [], |r| r.get(0))
        .unwrap();
    let again = import::import_folder(&mut conn, &dir, &c, false).unwrap();
    assert_eq!(
        again,
        Imported::Stored {
            dir: dir.clone(),
            values: 0,
            already: values,
            commits: vec!["aaaaaaa".into()]
        }
    );
    assert_eq!(count(&conn), n);
    let sum2: f64 = conn
        .query_row("SELECT SUM(value) FROM samples", [], |r| r.get(0))
        .unwrap();
    assert_eq!(sum, sum2);
    // Every measure of the root span is there.
    for m in ["total", "self", "critical_self"] {
        let k: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM samples s JOIN series se ON se.id = s.series_id WHERE se.metric = ?1",
                [format!("prove.{m}")],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(k, 4, "prove.{m}");
    }
}

#[test]
fn bad_folders_are_skipped_with_the_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let empty = tmp.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let cut = tmp.path().join("cut");
    folder(&cut, "aaaaaaa", "h1", 1.0, 1);
    let spans = cut.join(store::SPANS);
    let text = std::fs::read_to_string(&spans).unwrap();
    std::fs::write(&spans, &text[..text.len() - 7]).unwrap();
    let mut conn = schema::open(&tmp.path().join("h.sqlite")).unwrap();
    let c = ctx(&["aaaaaaa"]);
    for (d, words) in [(&empty, "no meta.json"), (&cut, "spans.csv")] {
        match import::import_folder(&mut conn, d, &c, false).unwrap() {
            Imported::Skipped { reason, .. } => assert!(reason.contains(words), "{reason}"),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(count(&conn), 0);
}

#[test]
fn a_tree_of_hosts_gives_a_series_per_host_in_commit_order() {
    let tmp = tempfile::tempdir().unwrap();
    let shas = [
        "c000000", "c100000", "c200000", "c300000", "c400000", "c500000", "c600000", "c700000",
        "c800000", "c900000", "ca00000", "cb00000",
    ];
    for (i, sha) in shas.iter().enumerate() {
        for host in ["h1", "h2"] {
            // Import order must not matter: folders named backwards.
            let d = tmp.path().join(host).join(format!("{:02}", 20 - i));
            let scale = if i >= 6 { 1.5 } else { 1.0 };
            folder(&d, sha, host, scale, i as u64);
        }
    }
    let mut conn = schema::open(&tmp.path().join("h.sqlite")).unwrap();
    let dirs = import::run_folders(tmp.path());
    assert_eq!(dirs.len(), 24);
    let out = import::import_all(&mut conn, &dirs, &ctx(&shas), Default::default()).unwrap();
    assert!(out.iter().all(|o| matches!(o, Imported::Stored { .. })));
    let filter = Filter {
        metric: Some("prove.total".into()),
        ..Default::default()
    };
    let series = series::load(&conn, &filter).unwrap();
    assert_eq!(series.len(), 2);
    for s in series {
        let order: Vec<&str> = s.points.iter().map(|p| p.sha.as_str()).collect();
        assert_eq!(order, shas);
        let a = series::analyse(s, &DetectOptions::default());
        let confirmed: Vec<_> = a
            .steps
            .iter()
            .filter(|s| s.step.verdict == StepVerdict::Regressed)
            .collect();
        assert_eq!(
            confirmed.len(),
            1,
            "{:?} {:?} σ {}",
            a.steps,
            a.detection.medians,
            a.detection.noise
        );
        assert_eq!(confirmed[0].last_before, "c500000");
        assert_eq!(confirmed[0].first_after, "c600000");
    }
    let steps = series::regressions(&conn, &filter, &DetectOptions::default()).unwrap();
    let id = &steps[0].id;
    assert_eq!(
        &series::find_step(&conn, id, &DetectOptions::default())
            .unwrap()
            .id,
        id
    );
}

#[test]
fn a_database_path_that_is_a_link_or_a_device_is_refused_and_its_target_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, b"keep me").unwrap();
    let link = dir.path().join("history.sqlite");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let err = schema::open(&link).unwrap_err().to_string();
    assert!(err.contains("not a regular file"), "{err}");
    assert_eq!(std::fs::read(&victim).unwrap(), b"keep me");
    // A dangling link (the target would be created through it) is refused too.
    let dangling = dir.path().join("dangling.sqlite");
    std::os::unix::fs::symlink(dir.path().join("nowhere"), &dangling).unwrap();
    assert!(schema::open(&dangling).is_err());
    assert!(!dir.path().join("nowhere").exists());
    let err = schema::open(Path::new("/dev/null"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("not a regular file"), "{err}");
    // A plain file path still works.
    assert!(schema::open(&dir.path().join("ok.sqlite")).is_ok());
}

#[test]
fn a_fifo_or_a_text_file_at_the_database_path_is_refused_at_once_and_left_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    // A FIFO no one writes to: refused by what it is, never opened (an open would wait).
    let fifo = dir.path().join("fifo.sqlite");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let (tx, rx) = std::sync::mpsc::channel();
    let path = fifo.clone();
    std::thread::spawn(move || {
        let _ = tx.send(schema::open(&path).map(drop).map_err(|e| e.to_string()));
    });
    let err = rx
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("an open of a FIFO returns")
        .unwrap_err();
    assert!(
        err.contains("not a regular file") && err.contains("FIFO"),
        "{err}"
    );
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());
    // A text file named by mistake: refused by its first bytes, untouched, no journal.
    let text = dir.path().join("notes.txt");
    let notes = b"history of the prover's timings, by hand\n".repeat(200);
    std::fs::write(&text, &notes).unwrap();
    let err = schema::open(&text).unwrap_err().to_string();
    assert!(
        err.contains("not an SQLite database") && err.contains("history of the"),
        "{err}"
    );
    assert_eq!(std::fs::read(&text).unwrap(), notes);
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        2,
        "a file beside"
    );
    // A file of a few bytes is no database either; an empty one is a new database.
    std::fs::write(&text, b"SQLite").unwrap();
    assert!(schema::open(&text).is_err());
    let empty = dir.path().join("empty.sqlite");
    std::fs::write(&empty, b"").unwrap();
    assert!(schema::open(&empty).is_ok());
}

#[test]
fn critical_self_follows_the_diffs_rule_an_async_drop_is_off_the_path() {
    use crate::analysis::synthetic::SyntheticRun;
    let mut run = SyntheticRun::new();
    run.variant_mut("candidate").async_drop = true;
    let data = run.build();
    let reps = super::values::of_run(&data);
    let get = |v: &str, m: &str| -> Vec<f64> {
        reps.iter()
            .filter(|r| r.variant == v)
            .map(|r| r.values[m])
            .collect()
    };
    // The baseline frees on the prover's thread: all of the drop's self time is on the
    // path. The candidate frees on a background thread: none of it is.
    assert_eq!(
        get("baseline", "drop.critical_self"),
        get("baseline", "drop.self")
    );
    assert!(get("baseline", "drop.self").iter().all(|&x| x > 0.0));
    assert!(get("candidate", "drop.critical_self")
        .iter()
        .all(|&x| x == 0.0));
    assert!(get("candidate", "drop.self").iter().all(|&x| x > 0.0));
}

/// A series from (run, commit position, values) cells.
fn series_of(cells: &[(&str, i64, &[f64])]) -> series::Series {
    let mut s = series::Series {
        key: series::SeriesKey {
            metric: "m.total".into(),
            workload: "w".into(),
            variant_key: "v".into(),
            host_id: "h".into(),
            hostname: "h".into(),
        },
        points: Vec::new(),
        off_path: 0,
        runs: Vec::new(),
    };
    let mut cells = cells.to_vec();
    cells.sort_by_key(|c| c.1);
    for (run, pos, values) in cells {
        let ri = match s.runs.iter().position(|r| r.run == run) {
            Some(i) => i,
            None => {
                s.runs.push(series::RunLevel {
                    run: run.into(),
                    factor: 1.0,
                    commits: 0,
                });
                s.runs.len() - 1
            }
        };
        if s.points.last().is_none_or(|p| p.position != pos) {
            s.points.push(series::CommitPoint {
                sha: format!("c{pos}"),
                position: pos,
                subject: String::new(),
                values: Vec::new(),
                runs: 0,
                value_runs: Vec::new(),
            });
        }
        let p = s.points.last_mut().unwrap();
        p.values.extend_from_slice(values);
        p.value_runs.extend(std::iter::repeat_n(ri, values.len()));
        p.runs += 1;
    }
    s
}

#[test]
fn runs_made_apart_are_put_on_one_level_by_the_commits_they_share() {
    // A wide run of 12 commits with a real +50% step at commit 8, and a narrow run made
    // when the machine was 4 times slower, of commits 3 and 4 only. Pooled as measured,
    // commits 3 and 4 sit far above their neighbours.
    let noise = [1.0, 1.01, 0.99, 1.02, 0.98];
    let wide: Vec<(i64, Vec<f64>)> = (0..12)
        .map(|i| {
            let level = if i >= 8 { 150.0 } else { 100.0 };
            (i, noise.iter().map(|n| level * n).collect())
        })
        .collect();
    let slow: Vec<(i64, Vec<f64>)> = [3, 4]
        .iter()
        .map(|&i| (i, noise.iter().map(|n| 400.0 * n * 1.005).collect()))
        .collect();
    let mut cells: Vec<(&str, i64, &[f64])> = wide
        .iter()
        .map(|(i, v)| ("wide", *i, v.as_slice()))
        .collect();
    cells.extend(slow.iter().map(|(i, v)| ("slow", *i, v.as_slice())));
    let opts = DetectOptions {
        min_segment: 3,
        ..DetectOptions::default()
    };
    let raw = series_of(&cells);
    let pooled: Vec<Vec<f64>> = raw.points.iter().map(|p| p.values.clone()).collect();
    let before = detect::detect(&pooled, &opts);
    assert!(
        before.steps.iter().any(|s| s.index != 8),
        "pooled as measured, the slow run makes a false step: {:?}",
        before.steps.iter().map(|s| s.index).collect::<Vec<_>>()
    );
    let mut levelled = raw.clone();
    series::level_runs(&mut levelled);
    // The slow run's values now read as the wide run's: a factor near 1/4 against it.
    let f = |name: &str| levelled.runs.iter().find(|r| r.run == name).unwrap().factor;
    assert!(
        (f("slow") / f("wide") - 0.25).abs() < 0.01,
        "{:?}",
        levelled.runs
    );
    for p in &levelled.points[3..5] {
        let m = crate::stats::median(&p.values).unwrap() / f("wide");
        assert!((m - 100.0).abs() < 3.0, "{m}");
    }
    let after = detect::detect(
        &levelled
            .points
            .iter()
            .map(|p| p.values.clone())
            .collect::<Vec<_>>(),
        &opts,
    );
    assert_eq!(
        after.steps.iter().map(|s| s.index).collect::<Vec<_>>(),
        [8],
        "only the real step; before levelling: {:?}",
        before.steps.iter().map(|s| s.index).collect::<Vec<_>>()
    );
    // A run that shares no commit keeps its values.
    let lone = [1000.0, 1001.0];
    cells.push(("lone", 20, &lone));
    let mut s = series_of(&cells);
    series::level_runs(&mut s);
    assert_eq!(s.runs.iter().find(|r| r.run == "lone").unwrap().factor, 1.0);
}

#[test]
fn a_database_with_a_damaged_page_is_refused_before_anything_is_read_or_written() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("h.sqlite");
    {
        let conn = schema::open(&db).unwrap();
        conn.execute_batch(
            "CREATE TABLE filler (x BLOB);
             WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i < 1999)
             INSERT INTO filler SELECT printf('%0200d', i) FROM c;",
        )
        .unwrap();
    }
    assert!(schema::open(&db).is_ok(), "an intact file opens");
    let mut bytes = std::fs::read(&db).unwrap();
    let page = u16::from_be_bytes([bytes[16], bytes[17]]) as usize;
    assert!(bytes.len() > 40 * page, "{} bytes", bytes.len());
    // A page in the middle of the table's b-tree, overwritten as a bad sector would be.
    let at = 30 * page;
    bytes[at..at + page].fill(0x5a);
    std::fs::write(&db, &bytes).unwrap();
    let e = schema::open(&db).expect_err("refused").to_string();
    assert!(e.contains("the database is damaged"), "{e}");
    assert_eq!(std::fs::read(&db).unwrap(), bytes, "nothing written");
}

/// What a history database holds, read back: each table's row count (as SQLite counts
/// it, through an index where it has one), the samples counted and summed through the
/// series index and through the primary key, and every row of every table.
fn contents(conn: &rusqlite::Connection) -> rusqlite::Result<Vec<String>> {
    let mut out = Vec::new();
    for t in [
        "schema_info",
        "hosts",
        "commits",
        "runs",
        "series",
        "samples",
    ] {
        let n: i64 = conn.query_row(&format!("SELECT COUNT(*) FROM {t}"), [], |r| r.get(0))?;
        out.push(format!("{t}: {n} rows"));
        let mut stmt = conn.prepare(&format!("SELECT * FROM {t} ORDER BY rowid"))?;
        let cols = stmt.column_count();
        let rows = stmt.query_map([], |r| {
            (0..cols)
                .map(|i| {
                    r.get::<_, rusqlite::types::Value>(i)
                        .map(|v| format!("{v:?}"))
                })
                .collect::<rusqlite::Result<Vec<_>>>()
        })?;
        for row in rows {
            out.push(row?.join(","));
        }
    }
    for (how, sql) in [
        (
            "by series",
            "SELECT COUNT(*), TOTAL(value) FROM samples INDEXED BY samples_by_series
             WHERE series_id >= 0",
        ),
        (
            "by key",
            "SELECT COUNT(*), TOTAL(value) FROM samples WHERE run_key >= ''",
        ),
    ] {
        let (n, sum): (i64, f64) = conn.query_row(sql, [], |r| Ok((r.get(0)?, r.get(1)?)))?;
        out.push(format!("samples {how}: {n}, {sum}"));
    }
    // Samples per commit and per run as the indexes hold them (read from the index).
    for sql in [
        "SELECT commit_sha, COUNT(*) FROM samples INDEXED BY samples_by_series
         WHERE series_id >= 0 GROUP BY commit_sha",
        "SELECT run_key, COUNT(*) FROM samples WHERE run_key >= '' GROUP BY run_key",
    ] {
        let mut stmt = conn.prepare(sql)?;
        let rows = stmt.query_map([], |r| {
            Ok(format!(
                "{}: {}",
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)?
            ))
        })?;
        for row in rows {
            out.push(row?);
        }
    }
    Ok(out)
}

/// The pages (from 1) of b-tree `name` of a database, by type (`leaf`, `internal`).
fn pages_of(db: &Path, name: &str, kind: &str) -> Vec<usize> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut stmt = conn
        .prepare("SELECT pageno FROM dbstat WHERE name = ?1 AND pagetype = ?2 ORDER BY pageno")
        .unwrap();
    let pages = stmt
        .query_map([name, kind], |r| r.get::<_, i64>(0))
        .unwrap()
        .map(|p| p.unwrap() as usize)
        .collect();
    pages
}

/// The root page of table or index `name` (sqlite_master's `rootpage`).
fn root_page(db: &Path, name: &str) -> usize {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row(
        "SELECT rootpage FROM sqlite_master WHERE name = ?1",
        [name],
        |r| r.get::<_, i64>(0),
    )
    .unwrap() as usize
}

/// Bytes of a fixed pseudo-random sequence (a damaged sector's).
fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Where `pattern` first occurs inside page `page` (from 1) of a file of pages of `size`.
fn inside_page(bytes: &[u8], size: usize, page: usize, pattern: &[u8]) -> Option<usize> {
    let start = (page - 1) * size;
    bytes[start..start + size]
        .windows(pattern.len())
        .position(|w| w == pattern)
        .map(|i| start + i)
}

#[test]
fn a_damaged_database_is_refused_or_reads_as_it_was_never_with_other_data() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("h.sqlite");
    let shas = ["aaaaaaa", "bbbbbbb", "ccccccc", "ddddddd"];
    let mut conn = schema::open(&db).unwrap();
    for (i, sha) in shas.iter().enumerate() {
        let dir = tmp.path().join(format!("r{i}"));
        folder(&dir, sha, "h1", 1.0 + i as f64 / 10.0, i as u64);
        import::import_folder(&mut conn, &dir, &ctx(&shas), false).unwrap();
    }
    let intact = contents(&conn).unwrap();
    drop(conn);
    let bytes = std::fs::read(&db).unwrap();
    let size = u16::from_be_bytes([bytes[16], bytes[17]]) as usize;
    let pages = bytes.len() / size;
    let leaves = pages_of(&db, "samples", "leaf");
    let index_leaves = pages_of(&db, "samples_by_series", "leaf");
    let index_root = root_page(&db, "samples_by_series");
    assert!(
        leaves.len() >= 4 && index_leaves.len() >= 2,
        "{leaves:?} {index_leaves:?}"
    );
    let at = move |page: usize| (page - 1) * size;
    let page_of = move |page: usize| at(page)..at(page) + size;
    let mid = leaves[leaves.len() / 2];
    let (first, second, last) = (leaves[0], leaves[1], leaves[leaves.len() - 1]);
    // The unused space of a leaf of samples: after its cell pointers, before its cells.
    let free_space = leaves.iter().find_map(|&p| {
        let h = at(p);
        let cells = u16::from_be_bytes([bytes[h + 3], bytes[h + 4]]) as usize;
        let content = u16::from_be_bytes([bytes[h + 5], bytes[h + 6]]) as usize;
        let r = h + 8 + 2 * cells..h + content;
        (r.len() >= 16).then_some(r)
    });

    #[derive(Debug, PartialEq)]
    enum Went {
        Refused,
        ReadIntact,
    }
    use Went::*;
    type Damage = Box<dyn Fn(&mut Vec<u8>)>;
    let damages: Vec<(&str, Went, Damage)> = vec![
        (
            "a page of samples zeroed",
            Refused,
            Box::new(move |b| {
                let r = page_of(mid);
                b[r].fill(0);
            }),
        ),
        (
            "random bytes over a page of samples",
            Refused,
            Box::new(move |b| {
                let r = page_of(second);
                b[r].copy_from_slice(&noise(size, 7));
            }),
        ),
        (
            "random bytes over the series index's root page",
            Refused,
            Box::new(move |b| {
                let r = page_of(index_root);
                b[r].copy_from_slice(&noise(size, 11));
            }),
        ),
        (
            // The page stays well formed: only the index no longer matches its table,
            // which quick_check does not look at.
            "a commit in a cell of the series index changed",
            Refused,
            Box::new(move |b| {
                let i = (index_leaves.iter())
                    .find_map(|&p| inside_page(b, size, p, b"bbbbbbb"))
                    .expect("a commit in the index");
                b[i + 6] = b'c';
            }),
        ),
        (
            "a run's key in a cell of samples changed",
            Refused,
            Box::new(move |b| {
                let i = inside_page(b, size, mid, b"run-").expect("a run key in the page");
                b[i + 4] ^= 0x01;
            }),
        ),
        (
            "two pages of samples swapped",
            Refused,
            Box::new(move |b| {
                let (x, y) = (first, last);
                let px = b[page_of(x)].to_vec();
                let py = b[page_of(y)].to_vec();
                b[at(x)..at(x) + size].copy_from_slice(&py);
                b[at(y)..at(y) + size].copy_from_slice(&px);
            }),
        ),
        (
            "the file cut at a page boundary",
            Refused,
            Box::new(move |b| b.truncate((pages - 2) * size)),
        ),
        (
            "the file cut inside a page",
            Refused,
            Box::new(move |b| b.truncate((pages - 1) * size + size / 3)),
        ),
        (
            // Space no cell uses (between a page's cell pointers and its cells) is never
            // read: the database reads as it was.
            "random bytes in a page's unused space",
            ReadIntact,
            Box::new(move |b| {
                let r = free_space
                    .clone()
                    .expect("a page of samples with unused space");
                let n = r.len();
                b[r].copy_from_slice(&noise(n, 5));
            }),
        ),
        (
            "the header's page count one more",
            Refused,
            Box::new(move |b| b[28..32].copy_from_slice(&(pages as u32 + 1).to_be_bytes())),
        ),
        (
            "the header's page count one less",
            Refused,
            Box::new(move |b| b[28..32].copy_from_slice(&(pages as u32 - 1).to_be_bytes())),
        ),
        (
            "the header's first bytes overwritten",
            Refused,
            Box::new(move |b| b[..16].copy_from_slice(b"SQLite format 4\0")),
        ),
        (
            "random bytes, no database",
            Refused,
            Box::new(move |b| *b = noise(b.len(), 3)),
        ),
    ];
    assert!(damages.len() >= 8);
    for (what, expected, damage) in &damages {
        let copy = tmp.path().join("copy.sqlite");
        let mut damaged = bytes.clone();
        damage(&mut damaged);
        assert_ne!(damaged, bytes, "{what}: nothing damaged");
        std::fs::write(&copy, &damaged).unwrap();
        let quick = passes_quick_check(&copy);
        std::fs::write(&copy, &damaged).unwrap();
        let went = match schema::open(&copy) {
            Err(e) => {
                let e = e.to_string();
                assert!(
                    (e.contains("the database is damaged") || e.contains("not an SQLite database"))
                        && e.to_lowercase().contains("restore it from a copy")
                        && e.contains(&copy.display().to_string()),
                    "{what}: {e}"
                );
                assert_eq!(std::fs::read(&copy).unwrap(), damaged, "{what}: written");
                Refused
            }
            Ok(conn) => {
                let read = contents(&conn).unwrap_or_else(|e| panic!("{what}: opened, then {e}"));
                assert_eq!(read, intact, "{what}: opened with other data");
                ReadIntact
            }
        };
        eprintln!(
            "{what}: {went:?} (quick_check alone: {})",
            if quick { "ok" } else { "damaged" }
        );
        assert_eq!(&went, expected, "{what}");
        // The cells changed inside well-formed pages are what quick_check let through.
        if what.contains("in a cell") {
            assert!(quick, "{what}: quick_check finds it too");
        }
    }
}

/// Whether `PRAGMA quick_check` alone finds nothing wrong with the database at `db`.
fn passes_quick_check(db: &Path) -> bool {
    let Ok(conn) =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
    else {
        return false;
    };
    let found: rusqlite::Result<Vec<String>> = conn
        .prepare("PRAGMA quick_check")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect());
    found.is_ok_and(|f| f == ["ok"])
}
