//! One patch resolved: the folder cargo builds the crate from (a cached worktree of the
//! revision, or the working tree), its repository, commit, dirty state and the version
//! its Cargo.toml declares.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{absolute, digest, io, PatchError, PatchSource};
use crate::revisions::{self, RevCache, RevError};
use crate::store::PatchMeta;

/// A patch made concrete.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedPatch {
    pub krate: String,
    /// The crate's folder (absolute): what `patch.crates-io.NAME.path` names.
    pub crate_dir: PathBuf,
    /// What meta.json records (repo, rev, commit, dirty, version).
    pub meta: PatchMeta,
}

/// Whether the patch's source can be resolved on this host (a local folder that
/// exists, or a git URL); a run on a host without it uses the worker `gapscope
/// prepare` left in the cache.
pub fn available(src: &PatchSource) -> bool {
    match (&src.git, &src.path) {
        (Some(_), _) => true,
        (None, Some(p)) => p.exists(),
        (None, None) => false,
    }
}

/// Resolves `src` for crate `krate`: checks its revision out in `cache` (with `rev`),
/// reads its Cargo.toml and checks that it is that crate.
pub fn resolve(
    cache: &RevCache,
    krate: &str,
    src: &PatchSource,
) -> Result<ResolvedPatch, PatchError> {
    // Where the crate lives (a git URL cloned into the cache, a folder in a repository, a
    // plain folder) decides both its checkout and its record, so the three cases and the
    // checkout stay together.
    let rev_err = |source: RevError| PatchError::Rev {
        krate: krate.to_string(),
        source,
    };
    let (repo_dir, repo_name, subdir) = match (&src.git, &src.path) {
        (Some(url), sub) => (
            clone(cache, url).map_err(rev_err)?,
            url.clone(),
            sub.clone().unwrap_or_default(),
        ),
        (None, Some(path)) => {
            let abs = absolute(path);
            if !abs.is_dir() {
                return Err(PatchError::NotACrate {
                    krate: krate.into(),
                    dir: abs,
                    why: "no such folder".into(),
                });
            }
            match revisions::toplevel(&abs) {
                Ok(top) => {
                    let top = top.canonicalize().unwrap_or(top);
                    let here = abs.canonicalize().unwrap_or(abs);
                    let sub = here
                        .strip_prefix(&top)
                        .unwrap_or(Path::new(""))
                        .to_path_buf();
                    (top.clone(), top.display().to_string(), sub)
                }
                // A plain folder: fine as a working tree, but it has no revisions.
                Err(e) if src.rev.is_some() => return Err(rev_err(e.into())),
                Err(_) => {
                    let meta = PatchMeta {
                        krate: krate.into(),
                        repo: abs.display().to_string(),
                        path: abs.display().to_string(),
                        ..PatchMeta::default()
                    };
                    return finish(krate, abs, meta);
                }
            }
        }
        (None, None) => {
            return Err(PatchError::NotACrate {
                krate: krate.into(),
                dir: PathBuf::new(),
                why: "the patch names no path and no git URL".into(),
            })
        }
    };
    // A clone in the cache is never a working tree of the user's: without a rev it
    // stands for the remote's default branch as last fetched.
    let rev = match (&src.rev, &src.git) {
        (None, Some(_)) => Some("HEAD".to_string()),
        (r, _) => r.clone(),
    };
    let (crate_dir, commit, dirty) = match &rev {
        Some(rev) => {
            let co = revisions::checkout(cache, &repo_dir, rev).map_err(rev_err)?;
            (join(&co.worktree, &subdir), co.commit, co.dirty)
        }
        None => {
            let commit = revisions::resolve(&repo_dir, "HEAD").map_err(|e| rev_err(e.into()))?;
            let dirty = revisions::is_dirty(&repo_dir).map_err(|e| rev_err(e.into()))?;
            (join(&repo_dir, &subdir), commit, dirty)
        }
    };
    let meta = PatchMeta {
        krate: krate.into(),
        repo: repo_name,
        path: crate_dir.display().to_string(),
        rev: src.rev.clone().unwrap_or_default(),
        commit,
        dirty,
        ..PatchMeta::default()
    };
    finish(krate, crate_dir, meta)
}

/// `dir/sub`, or `dir` itself for an empty `sub` (no trailing separator).
fn join(dir: &Path, sub: &Path) -> PathBuf {
    if sub.as_os_str().is_empty() {
        dir.to_path_buf()
    } else {
        dir.join(sub)
    }
}

fn finish(
    krate: &str,
    crate_dir: PathBuf,
    mut meta: PatchMeta,
) -> Result<ResolvedPatch, PatchError> {
    meta.version = crate_version(krate, &crate_dir)?;
    Ok(ResolvedPatch {
        krate: krate.into(),
        crate_dir,
        meta,
    })
}

/// The version `dir/Cargo.toml` declares for crate `krate`; an error when the folder
/// holds no manifest, one of a workspace only, or another crate.
pub fn crate_version(krate: &str, dir: &Path) -> Result<String, PatchError> {
    let not = |why: String| PatchError::NotACrate {
        krate: krate.into(),
        dir: dir.to_path_buf(),
        why,
    };
    let manifest = dir.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest)
        .map_err(|e| not(format!("cannot read {}: {e}", manifest.display())))?;
    let doc: toml::Table = toml::from_str(&text)
        .map_err(|e| not(format!("its Cargo.toml does not parse: {}", e.message())))?;
    let Some(pkg) = doc.get("package").and_then(toml::Value::as_table) else {
        return Err(not(
            "its Cargo.toml has no [package] (a workspace?): point path at the member crate".into(),
        ));
    };
    let name = pkg.get("name").and_then(toml::Value::as_str).unwrap_or("");
    if name != krate {
        return Err(not(format!("its Cargo.toml names the crate {name:?}")));
    }
    match pkg.get("version") {
        Some(toml::Value::String(v)) => Ok(v.clone()),
        Some(toml::Value::Table(t)) if t.get("workspace").and_then(toml::Value::as_bool) == Some(true) => {
            workspace_version(dir).ok_or_else(|| {
                not("its version comes from a workspace whose [workspace.package] version was not found".into())
            })
        }
        // Cargo's default when a manifest gives none.
        None => Ok("0.0.0".into()),
        Some(other) => Err(not(format!("its version {other} is not a string"))),
    }
}

fn workspace_version(dir: &Path) -> Option<String> {
    for up in dir.ancestors().skip(1) {
        let Ok(text) = std::fs::read_to_string(up.join("Cargo.toml")) else {
            continue;
        };
        let doc: toml::Table = toml::from_str(&text).ok()?;
        if let Some(v) = doc
            .get("workspace")
            .and_then(|w| w.get("package"))
            .and_then(|p| p.get("version"))
            .and_then(toml::Value::as_str)
        {
            return Some(v.to_string());
        }
    }
    None
}

/// Clones `url` into the cache (once; later calls fetch, and go on with the clone they
/// have when the fetch fails, as offline). The fetch moves the clone's own branches and
/// tags to the remote's, so that `rev = "main"` names the remote's main as fetched, not
/// the one of the first clone.
fn clone(cache: &RevCache, url: &str) -> Result<PathBuf, RevError> {
    let dir = cache.root.join("git").join(digest(url, 8));
    if dir.join(".git").exists() {
        let _ = Command::new("git")
            .arg("-C")
            .arg(&dir)
            .args([
                "fetch",
                "--quiet",
                "--force",
                "--update-head-ok",
                "origin",
                "+refs/heads/*:refs/heads/*",
                "+refs/tags/*:refs/tags/*",
            ])
            .status();
        return Ok(dir);
    }
    std::fs::create_dir_all(dir.parent().unwrap_or(&cache.root)).map_err(|source| {
        RevError::Io {
            what: format!("cannot create {}", cache.root.display()),
            source,
        }
    })?;
    let out = Command::new("git")
        .args(["clone", "--quiet", "--", url])
        .arg(&dir)
        .output()
        .map_err(|e| RevError::Git(revisions::GitError::NoGit(e)))?;
    if !out.status.success() {
        return Err(RevError::Git(revisions::GitError::Failed {
            args: format!("clone {url}"),
            dir: dir.clone(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        }));
    }
    Ok(dir)
}

/// Writes `text` to `path` (used for the records beside a worker).
pub(crate) fn write(path: &Path, text: &[u8]) -> Result<(), PatchError> {
    crate::store::write_atomic(path, text).map_err(io(format!("cannot write {}", path.display())))
}
