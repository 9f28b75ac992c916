//! Run folders into the history: `history add` (folders named) and `history import`
//! (every run folder under a tree, from any number of hosts). Folders are read through
//! the store's reader ([`RunData`]), so a folder the store refuses (no meta.json, a cut
//! row, a rep written twice) is skipped with the store's reason.
//!
//! Each folder is one transaction: a killed import keeps every folder it finished and
//! nothing of the one it was in. Rows are inserted with `INSERT OR IGNORE` on their keys
//! (run, variant, rep, series), so importing a folder again, or a folder that grew since
//! (a resumed run), adds only what is new and never changes a stored value.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use rusqlite::{params, Connection};

use super::commits;
use super::values;
use super::HistoryError;
use crate::store::host;
use crate::store::{self, RunData};

/// Where commits are placed: the repository and branch whose first-parent path gives
/// positions.
#[derive(Debug, Clone)]
pub struct ImportContext {
    pub repo: PathBuf,
    pub branch: String,
    positions: HashMap<String, i64>,
}

impl ImportContext {
    pub fn new(repo: &Path, branch: Option<&str>) -> ImportContext {
        let branch = branch
            .map(str::to_string)
            .unwrap_or_else(|| commits::current_branch(repo));
        ImportContext {
            positions: commits::first_parent_positions(repo, &branch),
            repo: repo.to_path_buf(),
            branch,
        }
    }

    /// A context with positions given (tests, and callers that know them).
    pub fn with_positions(repo: &Path, branch: &str, positions: HashMap<String, i64>) -> Self {
        ImportContext {
            repo: repo.to_path_buf(),
            branch: branch.to_string(),
            positions,
        }
    }
}

/// What became of one folder.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "outcome")]
pub enum Imported {
    /// New values stored (0 when everything was there already).
    Stored {
        dir: PathBuf,
        values: usize,
        already: usize,
        commits: Vec<String>,
    },
    /// Not imported, and why.
    Skipped { dir: PathBuf, reason: String },
}

/// A test double: stop inside the transaction of the n-th folder (counting from 1),
/// after half its values, and wait there until killed.
#[derive(Debug, Clone, Copy, Default)]
pub struct DebugPause(pub Option<usize>);

/// The workload a run measured, the same for every run of it (and for its bisect
/// steps): the built-in prover's circuit and size, or the command and the experiment.
fn workload_key(run: &RunData) -> String {
    let m = &run.meta;
    let base = m
        .experiment
        .split_once("-bisect-")
        .map(|(b, _)| b)
        .unwrap_or(&m.experiment);
    match &m.command_workload {
        Some(ext) => format!("command {} ({base})", ext.command.join(" ")),
        None => format!(
            "{} 2^{} x{}",
            m.workload.field("circuit"),
            m.workload.field("log2_constraints"),
            m.workload.field("batch")
        ),
    }
}

/// Knobs that say where a variant's code came from, not what it ran: the same variant
/// at many commits is one series.
const PLACE_KNOBS: [&str; 3] = ["rev", "repo", "subject_dir"];

/// A variant's knobs and backend (not its name, nor its revision).
fn variant_key(v: &store::VariantMeta) -> String {
    let mut parts = vec![format!("backend={}", v.backend)];
    parts.extend(
        v.knobs
            .iter()
            .filter(|(k, _)| !PLACE_KNOBS.contains(&k.as_str()))
            .map(|(k, val)| format!("{k}={val}")),
    );
    parts.join(",")
}

/// Largest experiment copy stored with a run (an experiment file is read up to 1 MiB).
const MAX_EXPERIMENT_COPY_BYTES: u64 = 1 << 20;

/// The run folder's experiment copy, as the store reads its files (a regular file, no
/// link, capped); empty where the folder has none; the reason where it cannot be read.
fn experiment_copy(dir: &Path) -> Result<String, String> {
    match crate::fsx::read_in_dir(dir, store::EXPERIMENT_COPY, MAX_EXPERIMENT_COPY_BYTES) {
        Ok(b) => String::from_utf8(b).map_err(|_| {
            format!(
                "{} is not UTF-8 text: the folder was edited or made elsewhere; fix or remove it",
                dir.join(store::EXPERIMENT_COPY).display()
            )
        }),
        Err(e) if e.is_not_found() => Ok(String::new()),
        Err(e) => Err(e.to_string()),
    }
}

/// Imports one run folder in one transaction.
pub fn import_folder(
    conn: &mut Connection,
    dir: &Path,
    ctx: &ImportContext,
    pause: bool,
) -> Result<Imported, HistoryError> {
    // One transaction per folder: the run read, each variant's commit found, then hosts,
    // runs, commits, series and samples inserted. All of it runs inside the one transaction
    // (an import is whole or absent), hence one function.
    let skip = |reason: String| {
        Ok(Imported::Skipped {
            dir: dir.to_path_buf(),
            reason,
        })
    };
    let run = match RunData::load(dir) {
        Ok(r) => r,
        Err(e) => return skip(e.to_string()),
    };
    let reps = values::of_run(&run);
    if reps.is_empty() {
        return skip("no measured rep that succeeded and verified".into());
    }
    let meta = &run.meta;
    // Each variant's commit: its revision, else the revision gapscope ran at.
    let mut commit_of: HashMap<&str, String> = HashMap::new();
    for v in &meta.variants {
        let c = match &v.revision {
            Some(r) if r.failed.is_none() => Some(r.commit.clone()),
            Some(_) => None,
            None => meta.git.revision.clone(),
        };
        if let Some(c) = c {
            // A revision is passed to git: anything but a commit id is refused here.
            if !commits::is_commit_id(&c) {
                return skip(format!(
                    "meta.json's revision of variant {} is {:?}, not a commit id (7 to 64 \
                     hex digits): the folder was edited or made elsewhere; fix or remove it",
                    crate::markup::terminal_safe(&v.name),
                    c
                ));
            }
            commit_of.insert(v.name.as_str(), c);
        }
    }
    if commit_of.is_empty() {
        return skip("meta.json names no git revision: the run was made outside a checkout".into());
    }
    let host = host::of(meta);
    let workload = workload_key(&run);
    let key = format!("{}/{}/{}", host.id, meta.experiment, meta.run_id);
    let kind = if meta.experiment.contains("-bisect-") {
        "bisect_step"
    } else {
        "run"
    };
    let experiment_toml = match experiment_copy(dir) {
        Ok(t) => t,
        Err(e) => return skip(e),
    };
    let sql = |e: rusqlite::Error| HistoryError::Sql {
        what: format!("importing {}", dir.display()),
        message: e.to_string(),
    };
    let tx = conn.transaction().map_err(sql)?;
    tx.execute(
        "INSERT OR IGNORE INTO hosts (id, fingerprint, cpu_model, cpu_cores, gpu_model, gpu_driver, memory_bucket, hostname)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![host.id, host.fingerprint, host.cpu_model, host.cpu_cores, host.gpu_model, host.gpu_driver, host.memory_bucket, host.hostname],
    )
    .map_err(sql)?;
    tx.execute(
        "INSERT OR IGNORE INTO runs (key, kind, path, experiment, experiment_toml, host_id, created_utc, imported_utc)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![
            key,
            kind,
            std::path::absolute(dir).unwrap_or(dir.to_path_buf()).display().to_string(),
            meta.experiment,
            experiment_toml,
            host.id,
            meta.created_utc,
            chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
        ],
    )
    .map_err(sql)?;
    let mut shas: Vec<String> = commit_of.values().cloned().collect();
    shas.sort();
    shas.dedup();
    for sha in &shas {
        let (subject, date) = commits::describe(&ctx.repo, sha);
        let pos = ctx.positions.get(sha).copied();
        tx.execute(
            "INSERT OR IGNORE INTO commits (sha, branch, position, subject, committed_utc) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![sha, ctx.branch, pos, subject, date],
        )
        .map_err(sql)?;
        if let Some(p) = pos {
            tx.execute(
                "UPDATE commits SET position = ?2, branch = ?3 WHERE sha = ?1 AND position IS NULL",
                params![sha, p, ctx.branch],
            )
            .map_err(sql)?;
        }
    }
    let variants: HashMap<&str, String> = meta
        .variants
        .iter()
        .map(|v| (v.name.as_str(), variant_key(v)))
        .collect();
    let total: usize = reps.iter().map(|r| r.values.len()).sum();
    let (mut stored, mut already, mut done) = (0, 0, 0);
    let mut series_ids: HashMap<(String, String), i64> = HashMap::new();
    for r in &reps {
        let (Some(sha), Some(vkey)) = (
            commit_of.get(r.variant.as_str()),
            variants.get(r.variant.as_str()),
        ) else {
            continue;
        };
        for (metric, value) in &r.values {
            let id = match series_ids.get(&(vkey.clone(), metric.clone())) {
                Some(&id) => id,
                None => {
                    tx.execute(
                        "INSERT OR IGNORE INTO series (workload, variant_key, metric) VALUES (?1, ?2, ?3)",
                        params![workload, vkey, metric],
                    )
                    .map_err(sql)?;
                    let id: i64 = tx
                        .query_row(
                            "SELECT id FROM series WHERE workload = ?1 AND variant_key = ?2 AND metric = ?3",
                            params![workload, vkey, metric],
                            |row| row.get(0),
                        )
                        .map_err(sql)?;
                    series_ids.insert((vkey.clone(), metric.clone()), id);
                    id
                }
            };
            let n = tx
                .execute(
                    "INSERT OR IGNORE INTO samples (run_key, variant, rep, series_id, commit_sha, host_id, value)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                    params![key, r.variant, r.rep, id, sha, host.id, value],
                )
                .map_err(sql)?;
            if n == 1 {
                stored += 1;
            } else {
                already += 1;
            }
            done += 1;
            if pause && done == total / 2 {
                eprintln!(
                    "history: paused inside the transaction of {}",
                    dir.display()
                );
                let mut line = String::new();
                let _ = std::io::stdin().read_line(&mut line);
                std::process::abort();
            }
        }
    }
    tx.commit().map_err(sql)?;
    Ok(Imported::Stored {
        dir: dir.to_path_buf(),
        values: stored,
        already,
        commits: shas,
    })
}

/// Every run folder under `root` (folders holding a meta.json; the revision cache's
/// `.revs` and other hidden folders are not entered), in path order.
pub fn run_folders(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        if d.join(store::META).is_file() {
            out.push(d);
            continue;
        }
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            let hidden = e.file_name().to_string_lossy().starts_with('.');
            if !hidden && e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Imports `dirs` one after another (one transaction each).
pub fn import_all(
    conn: &mut Connection,
    dirs: &[PathBuf],
    ctx: &ImportContext,
    pause: DebugPause,
) -> Result<Vec<Imported>, HistoryError> {
    let mut out = Vec::new();
    for (i, d) in dirs.iter().enumerate() {
        out.push(import_folder(conn, d, ctx, pause.0 == Some(i + 1))?);
    }
    Ok(out)
}
