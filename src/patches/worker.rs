//! The worker of a patch set: the prover's own binary (`gapscope-groth16-worker`) built
//! against the patched crates, so that a patched dependency of the prover rebuilds the
//! prover and that binary only, and this gapscope runs, stores and judges the reps; or,
//! where the source has no such binary or the variant needs gapscope's own worker
//! (sampled stacks, emulated counts), the current gapscope built against them. Cached
//! per (gapscope commit, patch set).
//!
//! ```text
//! <cache>/patched/<set>/<gapscope commit>/gapscope       the worker (or gapscope.gz), or
//!                                      gapscope-groth16-worker  the prover's binary
//! <cache>/patched/<set>/<gapscope commit>/build.log      cargo's output
//! <cache>/patched/<set>/<gapscope commit>/metadata.log   `cargo metadata`'s (the checks)
//! <cache>/patched/<set>/<gapscope commit>/entry.json     what it was built from, outcome
//! ```
//!
//! `<set>` is a digest of the patch table as the experiment writes it and the features,
//! so a host without the patched repositories (a GPU host given the cache) still finds
//! the worker; a host with them checks that the revisions still name the commits it was
//! built from. The build runs in a worktree of gapscope's commit (from the revision
//! cache) with cargo's `--config 'patch.crates-io.NAME.path="…"'`; the lock file cargo
//! rewrites there is restored afterwards. C/C++/CUDA inside a patched crate finds
//! `gapscope_trace.h` (a copy under `<cache>/include/`, named by its content) through
//! `GAPSCOPE_INCLUDE` (for its build.rs), `CXXFLAGS` and
//! `CFLAGS` (which the `cc` crate passes to its compiler, nvcc included) and
//! `NVCC_PREPEND_FLAGS` (which nvcc reads itself).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::{Deserialize, Serialize};

use super::source::{self, write};
use super::{digest, graph, io, PatchError, PatchSet, ResolvedPatch};
use crate::revisions::{self, BuildRecord, BuildSpec, RevCache, PROVER_BINARY};
use crate::store::PatchMeta;

/// The file name of a worker in its entry folder.
pub const WORKER_FILE: &str = "gapscope";

/// The gapscope checkout workers are built from: `$GAPSCOPE_SOURCE`, else the one this
/// binary was built from.
#[derive(Debug, Clone, PartialEq)]
pub struct GapscopeSource {
    pub top: PathBuf,
    pub commit: String,
}

impl GapscopeSource {
    /// `None` when neither is a git repository on this host (a GPU host given only the
    /// binary and the cache).
    pub fn locate() -> Option<GapscopeSource> {
        let dir = std::env::var_os("GAPSCOPE_SOURCE")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
        if !dir.is_dir() {
            return None;
        }
        let top = revisions::toplevel(&dir).ok()?;
        let commit = revisions::resolve(&top, "HEAD").ok()?;
        Some(GapscopeSource { top, commit })
    }
}

/// A worker ready to run reps.
#[derive(Debug, Clone, PartialEq)]
pub struct PatchedWorker {
    pub exe: PathBuf,
    /// Each patch as meta.json records it.
    pub patches: Vec<PatchMeta>,
    pub log: PathBuf,
    /// It came from the cache.
    pub reused: bool,
    /// Something the user should know (a worker used without its sources on this host).
    pub note: Option<String>,
    /// `exe` is the prover's own binary (a workload binary), not a gapscope.
    pub binary: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Entry {
    gapscope_commit: String,
    features: Vec<String>,
    patches: Vec<PatchMeta>,
    record: BuildRecord,
    /// The file the build made: the prover's binary ([`PROVER_BINARY`]), or (absent) a
    /// whole gapscope ([`WORKER_FILE`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    binary: Option<String>,
}

/// Features sorted, without repeats or empty names.
fn normalized(features: &[String]) -> Vec<String> {
    let mut f: Vec<String> = features
        .iter()
        .map(|f| f.trim().to_string())
        .filter(|f| !f.is_empty())
        .collect();
    f.sort();
    f.dedup();
    f
}

/// The cache folder name of patch set `set` built with (normalized) `features`, as a
/// whole gapscope (`whole`) or as the prover's binary where the source has it.
fn set_key(set: &PatchSet, features: &[String], whole: bool) -> String {
    let text = serde_json::to_string(&(features, set)).unwrap_or_default();
    digest(
        &if whole {
            text
        } else {
            format!("{text} binary")
        },
        6,
    )
}

/// The worker for patch set `set` with `features`: reused from the cache, or built
/// (where cargo is installed and the sources are here). `whole`: a whole gapscope even
/// where the source has the prover's binary (a variant that needs gapscope's own worker).
pub fn prepare_worker(
    cache: &RevCache,
    gapscope: Option<&GapscopeSource>,
    set: &PatchSet,
    features: &[String],
    whole: bool,
) -> Result<PatchedWorker, PatchError> {
    // `--features supraseal,cuda` and `cuda,supraseal` build the same worker: one key.
    let features = &normalized(features);
    let set_key = set_key(set, features, whole);
    let base = cache.root.join("patched").join(&set_key);
    let here = gapscope.filter(|_| set.values().all(source::available));
    let Some(src) = here else {
        return prebuilt(&base, set);
    };
    let resolved: Vec<ResolvedPatch> = set
        .iter()
        .map(|(k, s)| source::resolve(cache, k, s))
        .collect::<Result<_, _>>()?;
    let dir = base.join(revisions::short(&src.commit));
    let working_tree = set.values().any(|s| s.rev.is_none());
    let cargo = cargo_available();
    if let Some((entry, exe)) = read_entry(&dir) {
        let same = entry.gapscope_commit == src.commit
            && entry.patches.len() == resolved.len()
            && entry
                .patches
                .iter()
                .zip(&resolved)
                .all(|(a, b)| a.krate == b.krate && a.commit == b.meta.commit);
        // A working tree may have changed since: cargo decides what to rebuild.
        let fresh_enough = !working_tree || !cargo;
        if same && fresh_enough {
            let patches = metas(&resolved, &entry, &dir, true);
            return if entry.record.ok {
                Ok(PatchedWorker {
                    exe,
                    patches,
                    log: dir.join("build.log"),
                    reused: true,
                    note: None,
                    binary: entry.binary.is_some(),
                })
            } else {
                Err(failed(&entry.record, &dir))
            };
        }
    }
    if !cargo {
        return Err(PatchError::NoWorker(format!(
            "no worker was prepared for this patch set at gapscope {} ({}), and cargo is not \
             installed here to build one: run `gapscope build-workers EXPERIMENT` on a host with \
             cargo and bring the cache ({}) along",
            revisions::short(&src.commit),
            dir.display(),
            cache.root.display()
        )));
    }
    build(cache, src, &resolved, features, &dir, whole)
}

fn build(
    cache: &RevCache,
    src: &GapscopeSource,
    resolved: &[ResolvedPatch],
    features: &[String],
    dir: &Path,
    whole: bool,
) -> Result<PatchedWorker, PatchError> {
    std::fs::create_dir_all(dir).map_err(io(format!("cannot create {}", dir.display())))?;
    let co =
        revisions::checkout(cache, &src.top, &src.commit).map_err(|source| PatchError::Rev {
            krate: "gapscope".into(),
            source,
        })?;
    let tree = co.worktree.clone();
    restore_lock(&tree);
    for p in resolved {
        graph::check_in_lock(&p.krate, &tree.join("Cargo.lock"))?;
    }
    let mut args = Vec::new();
    if !features.is_empty() {
        args.push("--features".to_string());
        args.push(features.join(","));
    }
    for p in resolved {
        args.push("--config".into());
        let dir = toml::Value::String(p.crate_dir.display().to_string());
        args.push(format!("patch.crates-io.{}.path={dir}", p.krate));
    }
    let checked = graph::check_used(&tree, &args, resolved, &dir.join("metadata.log"));
    if checked.is_err() {
        restore_lock(&tree);
        checked?;
    }
    // The prover's binary where the source has one: the prover and its crates only.
    let binary = (!whole && PROVER_BINARY.in_tree(&tree)).then_some(PROVER_BINARY.name);
    let mut command = match binary {
        // (this build's features are among `args`)
        Some(_) => PROVER_BINARY.build_spec(&[]).command,
        None => BuildSpec::gapscope().command,
    };
    command.extend(args);
    let log = dir.join("build.log");
    let record = run_cargo(cache, &tree, &command, &log)?;
    restore_lock(&tree);
    let file = binary.unwrap_or(WORKER_FILE);
    let exe = dir.join(file);
    if record.ok {
        let from = cache.target_dir().join("release").join(file);
        if !from.is_file() {
            return Err(io(format!(
                "the worker built but left no {} to copy",
                from.display()
            ))(std::io::ErrorKind::NotFound.into()));
        }
        crate::fsx::copy_file(&from, &exe)?;
    }
    let entry = Entry {
        gapscope_commit: src.commit.clone(),
        features: features.to_vec(),
        patches: resolved.iter().map(|p| p.meta.clone()).collect(),
        record,
        binary: binary.map(String::from),
    };
    let json = serde_json::to_vec_pretty(&entry).unwrap_or_default();
    write(&dir.join("entry.json"), &json)?;
    if !entry.record.ok {
        return Err(failed(&entry.record, dir));
    }
    Ok(PatchedWorker {
        exe,
        patches: metas(resolved, &entry, dir, false),
        log,
        reused: false,
        note: None,
        binary: binary.is_some(),
    })
}

/// A worker from the cache when the sources are not on this host.
fn prebuilt(base: &Path, set: &PatchSet) -> Result<PatchedWorker, PatchError> {
    let mut entries: Vec<(std::time::SystemTime, PathBuf)> = std::fs::read_dir(base)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let t = e
                .path()
                .join("entry.json")
                .metadata()
                .ok()?
                .modified()
                .ok()?;
            Some((t, e.path()))
        })
        .collect();
    entries.sort();
    let missing: Vec<String> = set
        .iter()
        .filter(|(_, s)| !source::available(s))
        .map(|(k, s)| format!("{k} from {}", s.describe()))
        .collect();
    let why = if missing.is_empty() {
        "gapscope's own source is not on this host".to_string()
    } else {
        format!("the source of {} is not on this host", missing.join(", "))
    };
    for (_, dir) in entries.iter().rev() {
        if let Some((entry, exe)) = read_entry(dir) {
            if !entry.record.ok {
                return Err(failed(&entry.record, dir));
            }
            let note = format!(
                "{why}: using the worker prepared from gapscope {} in {}",
                revisions::short(&entry.gapscope_commit),
                dir.display()
            );
            return Ok(PatchedWorker {
                exe,
                patches: entry
                    .patches
                    .iter()
                    .map(|m| PatchMeta {
                        build_log: dir.join("build.log").display().to_string(),
                        build_reused: true,
                        gapscope_commit: entry.gapscope_commit.clone(),
                        ..m.clone()
                    })
                    .collect(),
                log: dir.join("build.log"),
                reused: true,
                note: Some(note),
                binary: entry.binary.is_some(),
            });
        }
    }
    Err(PatchError::NoWorker(format!(
        "{why}, and no worker was prepared for this patch set in {}: run `gapscope build-workers \
         EXPERIMENT` where the sources and cargo are, then bring the cache along",
        base.display()
    )))
}

/// The entry in `dir` and its worker (a `gapscope.gz` is unpacked first).
fn read_entry(dir: &Path) -> Option<(Entry, PathBuf)> {
    let entry: Entry = serde_json::from_slice(&std::fs::read(dir.join("entry.json")).ok()?).ok()?;
    // Only the two names a build writes: an entry never names a path of its own.
    let file = match entry.binary.as_deref() {
        Some(b) if b == PROVER_BINARY.name => b,
        Some(_) => return None,
        None => WORKER_FILE,
    };
    let exe = dir.join(file);
    if entry.record.ok && !exe.exists() {
        unpack(&dir.join(format!("{file}.gz")), &exe).ok()?;
    }
    (exe.exists() || !entry.record.ok).then_some((entry, exe))
}

fn unpack(gz: &Path, exe: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut r = flate2::read::GzDecoder::new(std::fs::File::open(gz)?);
    crate::fsx::write_file_with(exe, |w| std::io::copy(&mut r, w).map(drop))
        .map_err(crate::fsx::WriteError::into_io)?;
    std::fs::set_permissions(exe, std::fs::Permissions::from_mode(0o755))
}

fn metas(resolved: &[ResolvedPatch], entry: &Entry, dir: &Path, reused: bool) -> Vec<PatchMeta> {
    resolved
        .iter()
        .map(|p| PatchMeta {
            gapscope_commit: entry.gapscope_commit.clone(),
            build_log: dir.join("build.log").display().to_string(),
            build_reused: reused,
            ..p.meta.clone()
        })
        .collect()
}

fn failed(record: &BuildRecord, dir: &Path) -> PatchError {
    let log = dir.join("build.log");
    PatchError::BuildFailed {
        status: record.status.clone(),
        tail: revisions::tail_of(&log, revisions::LOG_TAIL_LINES),
        log,
    }
}

fn cargo_available() -> bool {
    Command::new("cargo")
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Puts back the lock file cargo rewrote for the patches (the worktree is shared with
/// `rev` variants of the same commit, which build it as committed).
fn restore_lock(tree: &Path) {
    let _ = Command::new("git")
        .arg("-C")
        .arg(tree)
        .args(["checkout", "--quiet", "--", "Cargo.lock"])
        .status();
}

/// A folder holding the gapscope_trace.h of the worktree `tree`, named by its content:
/// the path goes into CXXFLAGS, which the `cc` crate's builds depend on, so it stays the
/// same from one gapscope commit to the next while the header does.
fn include_dir(cache: &RevCache, tree: &Path) -> PathBuf {
    let header = tree.join("cuda").join("gapscope_trace.h");
    let Ok(text) = std::fs::read(&header) else {
        return tree.join("cuda");
    };
    let dir = cache
        .root
        .join("include")
        .join(digest(&String::from_utf8_lossy(&text), 6));
    let copy = dir.join("gapscope_trace.h");
    if !copy.exists() {
        let made = std::fs::create_dir_all(&dir).and_then(|_| {
            crate::fsx::write_file(&copy, &text).map_err(crate::fsx::WriteError::into_io)
        });
        if made.is_err() {
            return tree.join("cuda");
        }
    }
    dir
}

fn run_cargo(
    cache: &RevCache,
    tree: &Path,
    command: &[String],
    log: &Path,
) -> Result<BuildRecord, PatchError> {
    let include = include_dir(cache, tree);
    let add = |var: &str| {
        let old = std::env::var(var).unwrap_or_default();
        format!("{old} -I{}", include.display()).trim().to_string()
    };
    let env = [
        ("GAPSCOPE_INCLUDE", include.display().to_string()),
        ("CXXFLAGS", add("CXXFLAGS")),
        ("CFLAGS", add("CFLAGS")),
        ("NVCC_PREPEND_FLAGS", add("NVCC_PREPEND_FLAGS")),
    ];
    revisions::run_in_tree(cache, tree, command, &env, log).map_err(|source| match source {
        revisions::RevError::Write(w) => PatchError::Write(w),
        source => PatchError::Rev {
            krate: "gapscope".into(),
            source,
        },
    })
}

#[cfg(test)]
mod key_tests {
    use super::*;

    #[test]
    fn the_order_of_features_does_not_change_the_workers_cache_folder() {
        let set = PatchSet::new();
        let f = |l: &[&str]| normalized(&l.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(
            set_key(&set, &f(&["supraseal", "cuda"]), false),
            set_key(&set, &f(&["cuda", "supraseal", "cuda", " "]), false)
        );
        assert_ne!(
            set_key(&set, &f(&["cuda"]), false),
            set_key(&set, &f(&["cuda", "supraseal"]), false)
        );
        // The prover's binary and a whole gapscope are two workers of one patch set.
        assert_ne!(set_key(&set, &[], false), set_key(&set, &[], true));
    }
}
