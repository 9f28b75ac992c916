//! Git revisions as things to measure: resolve a revision (commit, tag, branch) of a
//! repository to its commit id, check that commit out in its own worktree, cached per
//! commit, and build it there with its build log kept.
//!
//! The cache (a folder, by default `<results>/.revs/`, or `$GAPSCOPE_REV_CACHE`) holds:
//!
//! ```text
//! <cache>/target/                 one CARGO_TARGET_DIR for every build (incremental rebuilds)
//! <cache>/repos/<key>.git/        a bare clone sharing the repository's objects, which
//!                                 the worktrees belong to (none is added to the user's)
//! <cache>/<commit>/tree/          the commit's worktree (`git worktree add --detach`)
//! <cache>/<commit>/build-<h>.log  stdout and stderr of build command <h> (a hash of it)
//! <cache>/<commit>/build-<h>.json its outcome: ok, or failed with the exit status
//! <cache>/<commit>/bin/           artefacts copied out of the shared target dir
//! ```
//!
//! A commit is checked out and built once per build command; later runs (and bisect
//! re-runs) reuse the worktree and the outcome, a failed build included. Delete
//! `<cache>/<commit>/` to build it afresh. Builds share the target dir, so an artefact
//! is copied out right after its build: the next commit's build overwrites it there.
//! This module knows nothing of experiments: it runs git and a build command (the latter
//! in a process group that ends with it, from [`crate::procs`]).

mod git;
mod seed;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::{Deserialize, Serialize};

pub use git::{first_parent_path, is_ancestor, is_dirty, resolve, short, toplevel, GitError};
pub use seed::{clean_worktree, seed_worktree, Seeded};

/// Lines of a failed build's log kept in its error (and shown to the user).
pub const LOG_TAIL_LINES: usize = 20;

/// Where worktrees, build logs and the shared target dir live.
#[derive(Debug, Clone)]
pub struct RevCache {
    pub root: PathBuf,
}

impl RevCache {
    /// `$GAPSCOPE_REV_CACHE` when set, else `<results_dir>/.revs` (made absolute: git
    /// and builds run in other folders).
    pub fn for_results(results_dir: &Path) -> RevCache {
        let root = std::env::var_os("GAPSCOPE_REV_CACHE")
            .map(PathBuf::from)
            .unwrap_or_else(|| results_dir.join(".revs"));
        let root = std::path::absolute(&root).unwrap_or(root);
        RevCache { root }
    }

    /// The one CARGO_TARGET_DIR every build shares.
    pub fn target_dir(&self) -> PathBuf {
        self.root.join("target")
    }

    fn commit_dir(&self, commit: &str) -> PathBuf {
        self.root.join(commit)
    }
}

/// An in-process workload's own binary in gapscope's tree: what a `rev` or `patch`
/// variant builds instead of a whole gapscope where the tree has its source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkloadBinary {
    /// Its source file, relative to the tree's root.
    pub source: &'static str,
    pub package: &'static str,
    /// The binary's name (also its file name wherever it is copied).
    pub name: &'static str,
    /// The kind it answers `__protocol` for.
    pub kind: gapscope_workload::phases::WorkloadKind,
}

/// The built-in prover's binary.
pub const PROVER_BINARY: WorkloadBinary = WorkloadBinary {
    source: "crates/gapscope-groth16/src/bin/gapscope-groth16-worker.rs",
    package: "gapscope-groth16",
    name: "gapscope-groth16-worker",
    kind: gapscope_workload::phases::WorkloadKind::Groth16,
};

/// The hash workload's binary.
pub const HASH_BINARY: WorkloadBinary = WorkloadBinary {
    source: "crates/gapscope-hash/src/bin/gapscope-hash-worker.rs",
    package: "gapscope-hash",
    name: "gapscope-hash-worker",
    kind: gapscope_workload::phases::WorkloadKind::Hash,
};

impl WorkloadBinary {
    /// Whether the tree at `tree` has this binary's source.
    pub fn in_tree(&self, tree: &Path) -> bool {
        tree.join(self.source).is_file()
    }

    /// Its release build (`cargo build --release -p PACKAGE --bin NAME`), with the GPU
    /// `features` of the build that asks (`cuda`, `supraseal`: this gapscope's own, so
    /// that a revision's prover runs the backends this one does) where the binary is the
    /// prover's; the hash workload has none.
    pub fn build_spec(&self, features: &[String]) -> BuildSpec {
        let mut command: Vec<String> = [
            "cargo",
            "build",
            "--release",
            "-p",
            self.package,
            "--bin",
            self.name,
        ]
        .map(String::from)
        .to_vec();
        if !features.is_empty() && self.kind == gapscope_workload::phases::WorkloadKind::Groth16 {
            command.push("--features".into());
            command.push(features.join(","));
        }
        BuildSpec {
            command,
            artefacts: vec![format!("release/{}", self.name)],
        }
    }
}

/// A build: the command (run in the worktree, with CARGO_TARGET_DIR set to the shared
/// target dir) and the artefacts to copy out of that target dir afterwards.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuildSpec {
    pub command: Vec<String>,
    /// Paths relative to the target dir (e.g. `release/gapscope`), copied to
    /// `<cache>/<commit>/bin/<file name>`.
    #[serde(default)]
    pub artefacts: Vec<String>,
}

impl BuildSpec {
    /// gapscope itself: a release build of its binary.
    pub fn gapscope() -> BuildSpec {
        BuildSpec {
            command: ["cargo", "build", "--release", "--bin", "gapscope"]
                .map(String::from)
                .to_vec(),
            artefacts: vec!["release/gapscope".into()],
        }
    }

    fn key(&self) -> String {
        use sha2::Digest;
        let text = serde_json::to_string(self).unwrap_or_default();
        let h = sha2::Sha256::digest(text.as_bytes());
        h.iter().take(4).map(|b| format!("{b:02x}")).collect()
    }
}

/// The outcome of a build, as cached in `build-<h>.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuildRecord {
    pub command: Vec<String>,
    pub ok: bool,
    /// Exit status in words, when it failed.
    #[serde(default)]
    pub status: String,
    pub duration_ms: u64,
}

/// A revision checked out (and, when asked, built).
#[derive(Debug, Clone, PartialEq)]
pub struct Checkout {
    /// The revision as given.
    pub rev: String,
    pub commit: String,
    /// The repository's top folder.
    pub repo: PathBuf,
    pub worktree: PathBuf,
    /// Tracked files of the worktree differ from the commit (after its build).
    pub dirty: bool,
    /// The build, if one ran or was reused: its command, log and outcome.
    pub build: Option<Built>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Built {
    pub record: BuildRecord,
    pub log: PathBuf,
    /// Artefacts copied out of the target dir (absolute paths), in the order asked.
    pub artefacts: Vec<PathBuf>,
    /// The build was done by an earlier run.
    pub reused: bool,
}

impl Built {
    /// The last [`LOG_TAIL_LINES`] lines of the build log.
    pub fn log_tail(&self) -> String {
        tail_of(&self.log, LOG_TAIL_LINES)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RevError {
    #[error(transparent)]
    Git(#[from] GitError),
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Write(#[from] crate::fsx::WriteError),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> RevError {
    let what = what.into();
    move |source| RevError::Io { what, source }
}

/// Resolves `rev` in `repo` and checks its commit out in the cache (reusing a worktree
/// already there).
pub fn checkout(cache: &RevCache, repo: &Path, rev: &str) -> Result<Checkout, RevError> {
    let top = toplevel(repo)?;
    let commit = resolve(&top, rev)?;
    let dir = cache.commit_dir(&commit);
    let tree = dir.join("tree");
    std::fs::create_dir_all(&dir).map_err(io(format!("cannot create {}", dir.display())))?;
    if git::head_of(&tree).as_deref() != Some(commit.as_str()) {
        if tree.exists() {
            std::fs::remove_dir_all(&tree)
                .map_err(io(format!("cannot remove stale {}", tree.display())))?;
        }
        let clone = git::private_clone(&top, &cache.root.join("repos"))?;
        git::add_worktree(&clone, &tree, &commit)?;
    }
    // Absolute, so that commands run elsewhere find it.
    let worktree = tree.canonicalize().unwrap_or(tree);
    Ok(Checkout {
        rev: rev.to_string(),
        commit,
        repo: top,
        dirty: git::is_dirty(&worktree)?,
        worktree,
        build: None,
    })
}

/// Removes the worktree of `commit` of `repo` from the cache (its build logs, records
/// and artefacts stay; a later checkout makes it again). Whether there was one of the
/// cache's clone to remove: a worktree registered elsewhere (by a version that added
/// them to the repository itself) is left alone.
pub fn remove_worktree(cache: &RevCache, repo: &Path, commit: &str) -> Result<bool, RevError> {
    let tree = cache.commit_dir(commit).join("tree");
    if !tree.exists() {
        return Ok(false);
    }
    let clone = git::private_clone(&toplevel(repo)?, &cache.root.join("repos"))?;
    Ok(git::remove_worktree(&clone, &tree)?)
}

/// Builds `co` with `spec` unless the cache holds this build's outcome already; a failed
/// build is an outcome too (`Built::record.ok` false, with its log).
pub fn build(cache: &RevCache, co: &mut Checkout, spec: &BuildSpec) -> Result<(), RevError> {
    let dir = cache.commit_dir(&co.commit);
    let key = spec.key();
    let log = dir.join(format!("build-{key}.log"));
    let record_path = dir.join(format!("build-{key}.json"));
    let bin = dir.join("bin");
    let artefacts: Vec<PathBuf> = spec
        .artefacts
        .iter()
        .map(|a| bin.join(Path::new(a).file_name().unwrap_or(a.as_ref())))
        .collect();
    let cached: Option<BuildRecord> = std::fs::read(&record_path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    if let Some(record) = cached {
        if !record.ok || artefacts.iter().all(|a| a.exists()) {
            co.build = Some(Built {
                record,
                log,
                artefacts,
                reused: true,
            });
            co.dirty = git::is_dirty(&co.worktree)?;
            return Ok(());
        }
    }
    let record = run_build(cache, co, spec, &log)?;
    if record.ok {
        std::fs::create_dir_all(&bin).map_err(io(format!("cannot create {}", bin.display())))?;
        for (a, to) in spec.artefacts.iter().zip(&artefacts) {
            let from = cache.target_dir().join(a);
            if !from.is_file() {
                return Err(io(format!(
                    "the build of {} succeeded but left no {} to copy",
                    co.commit,
                    from.display()
                ))(std::io::ErrorKind::NotFound.into()));
            }
            crate::fsx::copy_file(&from, to)?;
        }
    }
    let json = serde_json::to_vec_pretty(&record).unwrap_or_default();
    crate::fsx::write_file(&record_path, &json)?;
    co.dirty = git::is_dirty(&co.worktree)?;
    co.build = Some(Built {
        record,
        log,
        artefacts,
        reused: false,
    });
    Ok(())
}

/// Marks every tracked file of the worktree as modified now. Every build shares one
/// CARGO_TARGET_DIR, and cargo names a workspace package's artefacts by its path inside
/// the workspace, so every worktree's `gapscope` has the same ones; cargo then decides
/// freshness by the files' times. A worktree checked out before another commit's was
/// built would look older than those artefacts, and its build would keep the other
/// commit's binary (seen: the worktree of commit A, made before B's and built after it,
/// printed B). Newer times make cargo rebuild the package; the dependencies it shares
/// are untouched.
pub fn touch_worktree(tree: &Path) -> Result<(), RevError> {
    let now = std::time::SystemTime::now();
    for f in git::tracked_files(tree)? {
        // A tracked file the worktree lacks (deleted in the working tree) has nothing to
        // mark; links are left alone (their targets may lie outside the worktree).
        let Ok(meta) = std::fs::symlink_metadata(&f) else {
            continue;
        };
        if !meta.file_type().is_file() {
            continue;
        }
        std::fs::OpenOptions::new()
            .write(true)
            .open(&f)
            .and_then(|h| h.set_modified(now))
            .map_err(io(format!("cannot mark {} for the build", f.display())))?;
    }
    Ok(())
}

fn run_build(
    cache: &RevCache,
    co: &Checkout,
    spec: &BuildSpec,
    log: &Path,
) -> Result<BuildRecord, RevError> {
    run_in_tree(cache, &co.worktree, &spec.command, &[], log)
}

/// Runs a build `command` in `tree` with the cache's shared CARGO_TARGET_DIR and `env`,
/// its output into `log` (a fresh file), after marking the tree's files as new
/// ([`touch_worktree`]), in a process group of its own ([`crate::procs::lifeline`]):
/// nothing it started runs on after it. An empty command is a build that did nothing; a command that
/// does not start is a failed build whose log says why.
pub fn run_in_tree(
    cache: &RevCache,
    tree: &Path,
    command: &[String],
    env: &[(&str, String)],
    log: &Path,
) -> Result<BuildRecord, RevError> {
    let started = std::time::Instant::now();
    touch_worktree(tree)?;
    let file = crate::fsx::create_fresh(log)?;
    let err = file
        .try_clone()
        .map_err(io(format!("cannot write {}", log.display())))?;
    let Some((prog, args)) = command.split_first() else {
        return Ok(BuildRecord {
            command: command.to_vec(),
            ok: true,
            status: String::new(),
            duration_ms: 0,
        });
    };
    let mut cmd = Command::new(prog);
    cmd.args(args)
        .current_dir(tree)
        .env("CARGO_TARGET_DIR", cache.target_dir())
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(err);
    // What the build starts ends with it (the group, ended once it was waited for), and
    // with gapscope however gapscope ends.
    let mut group = crate::procs::lifeline::step_in_group(&mut cmd);
    let status = cmd.status();
    group.end();
    let (ok, status) = match status {
        Ok(s) if s.success() => (true, String::new()),
        Ok(s) => (false, s.to_string()),
        Err(e) => {
            // The log says why the command did not start, like a build error would.
            let _ = crate::fsx::write_file(log, format!("cannot start {prog:?}: {e}\n").as_bytes());
            (false, format!("cannot start {prog:?}: {e}"))
        }
    };
    Ok(BuildRecord {
        command: command.to_vec(),
        ok,
        status,
        duration_ms: started.elapsed().as_millis() as u64,
    })
}

/// The last `n` lines of a text file ("" when unreadable), joined by newlines.
pub fn tail_of(path: &Path, n: usize) -> String {
    let text = std::fs::read(path).unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
