//! What keeps a run folder saying one thing: one writer at a time (an exclusive lock on
//! the folder), every committed rep whole (its `span_rows` all in spans.csv), each rep
//! once, a resume that continues the run its meta.json describes, and no other command
//! writing inside a run folder.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use super::parts::{locate, PartStart};
use super::{Meta, RepStatus, RunData, RunRow, SpanRow, StoreError, META};

/// Takes the run folder's exclusive lock (flock on the folder itself, released when the
/// returned handle closes, also when the process is killed).
pub(super) fn lock_dir(dir: &Path) -> Result<File, StoreError> {
    let f = File::open(dir).map_err(|source| StoreError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    match f.try_lock() {
        Ok(()) => Ok(f),
        Err(std::fs::TryLockError::WouldBlock) => Err(StoreError::Locked {
            path: dir.to_path_buf(),
        }),
        Err(std::fs::TryLockError::Error(source)) => Err(StoreError::Io {
            path: dir.to_path_buf(),
            source,
        }),
    }
}

/// Why a rep with a runs.csv row is not wholly committed, given how many rows spans.csv
/// holds for it; `None` when it is.
pub(super) fn uncommitted_reason(r: &RunRow, spans: usize) -> Option<String> {
    match r.span_rows {
        Some(k) if k as usize != spans => {
            Some(format!("spans.csv holds {spans} of its {k} span rows"))
        }
        None if r.status == RepStatus::Ok && spans == 0 => {
            Some("spans.csv holds none of its spans".into())
        }
        _ => None,
    }
}

/// Refuses a runs.csv that has a rep more than once (two writers at once, or an edit):
/// which of the rows is the rep cannot be told.
pub(super) fn check_unique_reps(path: &Path, rows: &[RunRow]) -> Result<(), StoreError> {
    let mut seen: HashMap<u32, usize> = HashMap::new();
    for (i, r) in rows.iter().enumerate() {
        if let Some(first) = seen.insert(r.rep, i) {
            return Err(StoreError::Invalid {
                path: path.to_path_buf(),
                message: format!(
                    "rep {} has two rows (lines {} and {}): the run folder was written by two \
                     processes at once, or edited. Keep one row per rep and run `gapscope run \
                     --resume` on the folder, which runs a rep again whose spans do not match \
                     its row",
                    r.rep,
                    first + 2,
                    i + 2
                ),
            });
        }
    }
    Ok(())
}

/// Latest time a row may hold: CLOCK_MONOTONIC counts nanoseconds since boot, and no
/// machine stays up 292 years (i64::MAX ns), so a larger value was not measured.
pub const MAX_CLOCK_NS: u64 = i64::MAX as u64;

/// Refuses rows no run writes: a time past [`MAX_CLOCK_NS`], self time longer than the
/// span, a span id twice in one rep, a parent chain that loops. Each error names the
/// file (the part of spans.csv, `parts`) and line. Linear in the rows: a crafted table
/// cannot make the readers after it spin.
pub(super) fn check_spans(parts: &[PartStart], spans: &[SpanRow]) -> Result<(), StoreError> {
    check_spans_from(parts, 0, spans)
}

/// [`check_spans`] of rows read together that begin at row `at` of the parts (a rep's
/// rows read on their own).
pub(super) fn check_spans_from(
    parts: &[PartStart],
    at: usize,
    spans: &[SpanRow],
) -> Result<(), StoreError> {
    // Long because its checks (values, ids unique in their rep, parent chains without
    // loops or dangling parents) share one index of the rows by id and one error that
    // names the row by its part and line; each check is one pass over the rows.
    let bad = |i: usize, message: String| {
        let (path, line) = locate(parts, at + i);
        StoreError::Parse {
            path,
            line,
            message: format!("{message}; no run writes this: the file was edited or damaged"),
        }
    };
    let mut first: HashMap<(u32, u64), usize> = HashMap::with_capacity(spans.len());
    for (i, s) in spans.iter().enumerate() {
        for (what, v) in [
            ("start_ns", s.start_ns),
            ("end_ns", s.end_ns),
            ("duration_ns", s.duration_ns),
            ("self_ns", s.self_ns),
        ] {
            if v > MAX_CLOCK_NS {
                return Err(bad(
                    i,
                    format!("span {:?}: {what} = {v} is past the clock's range", s.name),
                ));
            }
        }
        if s.self_ns > s.duration_ns {
            return Err(bad(
                i,
                format!(
                    "span {:?}: self_ns = {} is longer than the span ({} ns)",
                    s.name, s.self_ns, s.duration_ns
                ),
            ));
        }
        if let Some(j) = first.insert((s.rep, s.span_id), i) {
            return Err(bad(
                i,
                format!(
                    "span id {} of rep {} is already the id of {}",
                    s.span_id,
                    s.rep,
                    line_of(parts, at + j, at + i)
                ),
            ));
        }
    }
    // Parent chains: walk each up until a span already known to reach a root; a span met
    // twice on one walk is on a loop. Every span is walked through once.
    const NEW: u8 = 0;
    const ON_WALK: u8 = 1;
    const DONE: u8 = 2;
    let mut state = vec![NEW; spans.len()];
    let mut walk = Vec::new();
    for start in 0..spans.len() {
        let mut cur = Some(start);
        while let Some(i) = cur {
            match state[i] {
                DONE => break,
                ON_WALK => {
                    return Err(bad(
                        i,
                        format!(
                        "span {:?} (id {}) of rep {} is its own ancestor: its parent chain loops",
                        spans[i].name, spans[i].span_id, spans[i].rep
                    ),
                    ))
                }
                _ => {}
            }
            state[i] = ON_WALK;
            walk.push(i);
            let s = &spans[i];
            cur = s.parent_id.and_then(|p| first.get(&(s.rep, p)).copied());
        }
        for i in walk.drain(..) {
            state[i] = DONE;
        }
    }
    Ok(())
}

/// `line N` of row `j`, with its part's name where row `i` (the one it is told beside)
/// is in another part.
fn line_of(parts: &[PartStart], j: usize, i: usize) -> String {
    let (path, line) = locate(parts, j);
    if path == locate(parts, i).0 {
        format!("line {line}")
    } else {
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        format!("line {line} of {name}")
    }
}

/// Refuses runs.csv rows with times past [`MAX_CLOCK_NS`].
pub(super) fn check_run_values(path: &Path, runs: &[RunRow]) -> Result<(), StoreError> {
    for (i, r) in runs.iter().enumerate() {
        for (what, v) in [("start_ns", r.start_ns), ("wall_ns", r.wall_ns)] {
            if v > MAX_CLOCK_NS {
                return Err(StoreError::Parse {
                    path: path.to_path_buf(),
                    line: i as u64 + 2,
                    message: format!(
                        "rep {}: {what} = {v} is past the clock's range; no run writes this: \
                         the file was edited or damaged",
                        r.rep
                    ),
                });
            }
        }
    }
    Ok(())
}

/// The checks a reader makes on a loaded run folder: each rep once, every committed
/// rep with all of its spans, and no row that no run writes.
pub(super) fn check_loaded(
    dir: &Path,
    runs: &[RunRow],
    spans: &[SpanRow],
    parts: &[PartStart],
) -> Result<(), StoreError> {
    check_unique_reps(&dir.join(super::RUNS), runs)?;
    check_run_values(&dir.join(super::RUNS), runs)?;
    check_spans(parts, spans)?;
    let mut counts: HashMap<u32, usize> = HashMap::new();
    for s in spans {
        *counts.entry(s.rep).or_default() += 1;
    }
    for r in runs {
        if let Some(why) = uncommitted_reason(r, counts.get(&r.rep).copied().unwrap_or(0)) {
            return Err(uncommitted(dir, r, &why));
        }
    }
    Ok(())
}

/// The error for rep `r` of the folder `dir`, recorded in runs.csv without all of its
/// spans (`why`: [`uncommitted_reason`]).
pub(super) fn uncommitted(dir: &Path, r: &RunRow, why: &str) -> StoreError {
    StoreError::Invalid {
        path: dir.join(super::SPANS),
        message: format!(
            "rep {} ({}) is recorded in runs.csv but {why}: the file was cut or edited after \
             the rep was written. `gapscope run --resume {}` runs such reps again",
            r.rep,
            r.variant,
            dir.display()
        ),
    }
}

/// sha256 (hex) of an experiment file's text, as meta.json keeps it.
pub fn experiment_sha256(text: &str) -> String {
    use sha2::Digest;
    let d = sha2::Sha256::digest(text.as_bytes());
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// What differs between the meta.json of a run folder (`stored`) and the meta a run of
/// its experiment copy would start with today (`fresh`, with the copy's hash in
/// `experiment_sha256`): one line per difference, empty when a resume may continue.
/// Only what decides what the remaining reps run is compared, so fields other versions
/// add to meta.json (and the machine, the time, the command) do not stop a resume.
pub fn resume_mismatch(stored: &Meta, fresh: &Meta) -> Vec<String> {
    let mut out = Vec::new();
    let mut cmp = |what: &str, a: String, b: String| {
        if a != b {
            out.push(format!("{what}: {a} in meta.json, {b} in experiment.toml"));
        }
    };
    cmp("name", stored.experiment.clone(), fresh.experiment.clone());
    let (w, f) = (&stored.workload, &fresh.workload);
    cmp(
        "workload kind",
        w.kind().as_str().into(),
        f.kind().as_str().into(),
    );
    // A command's folder of schema 1 has circuit fields ("command"), a fresh one none.
    if w.circuit.is_some() && f.circuit.is_some() {
        for field in ["circuit", "log2_constraints", "batch", "backend"] {
            cmp(field, w.field(field), f.field(field));
        }
    }
    cmp("reps", stored.reps.to_string(), fresh.reps.to_string());
    cmp(
        "warmups",
        stored.warmups.to_string(),
        fresh.warmups.to_string(),
    );
    cmp("order", stored.order.clone(), fresh.order.clone());
    cmp("process", stored.process.clone(), fresh.process.clone());
    let names = |m: &Meta| {
        m.variants
            .iter()
            .map(|v| v.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    cmp("variants", names(stored), names(fresh));
    for (a, b) in stored.variants.iter().zip(&fresh.variants) {
        if a.name == b.name {
            cmp(
                &format!("variant {} backend", a.name),
                a.backend.clone(),
                b.backend.clone(),
            );
            // Knobs a version of gapscope added later are missing from an older
            // meta.json: only knobs both sides list are compared.
            for (k, va) in &a.knobs {
                if let Some(vb) = b.knobs.get(k) {
                    cmp(&format!("variant {} {k}", a.name), va.clone(), vb.clone());
                }
            }
        }
    }
    if let (Some(a), Some(b)) = (&stored.experiment_sha256, &fresh.experiment_sha256) {
        if a != b && out.is_empty() {
            out.push(format!(
                "experiment.toml was edited since the run started (sha256 {}… in meta.json, \
                 {}… now)",
                &a[..12.min(a.len())],
                &b[..12.min(b.len())]
            ));
        }
    }
    out
}

/// How far a run got, for readers of a run that stopped early.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunProgress {
    /// Measured reps with a row in runs.csv.
    pub measured: usize,
    /// Measured reps the schedule has.
    pub scheduled: usize,
    /// meta.json says the run finished its schedule.
    pub completed: bool,
}

impl RunProgress {
    pub fn of(data: &RunData) -> RunProgress {
        RunProgress {
            measured: data.runs.iter().filter(|r| !r.warmup).count(),
            scheduled: data.meta.variants.len() * data.meta.reps as usize,
            completed: data.meta.completed_utc.is_some(),
        }
    }

    /// A line for the reader of an unfinished run; `None` for a finished one.
    pub fn note(&self, dir: &Path) -> Option<String> {
        (!self.completed).then(|| {
            format!(
                "incomplete run: {} of {} measured reps recorded in {} (it stopped early, or \
                 is still running); `gapscope run --resume {}` continues it",
                self.measured,
                self.scheduled,
                dir.display(),
                dir.display()
            )
        })
    }
}

/// Refuses an output path inside a run folder (or a run folder itself): only `gapscope
/// run` writes there, so that nothing a user exports or reports can replace a result.
pub fn check_output_path(path: &Path) -> Result<(), StoreError> {
    let abs: PathBuf = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(path))
            .unwrap_or_else(|_| path.to_path_buf())
    };
    for a in abs.ancestors() {
        if a.join(META).is_file() {
            return Err(StoreError::Invalid {
                path: path.to_path_buf(),
                message: format!(
                    "this is inside the run folder {}, where only `gapscope run` writes (its \
                     results would be overwritten); choose an output path outside it",
                    a.display()
                ),
            });
        }
    }
    Ok(())
}
