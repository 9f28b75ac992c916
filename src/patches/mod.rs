//! Dependency variants: a variant that runs the current gapscope built against another
//! source of one or more crates of its dependency graph (a fork of supraseal-c2,
//! bellperson, blstrs, sppark…), at a git revision or as a working tree.
//!
//! ```toml
//! [[variant]]
//! name = "fork"
//! patch = { "supraseal-c2" = { path = "../supraseal-c2", rev = "HEAD~1" } }
//! ```
//!
//! Each patch is resolved ([`source`]): with `rev`, its commit is checked out in a
//! cached worktree ([`crate::revisions`]); without, the working tree is used as it is
//! and its dirty state recorded; with `git = URL`, the repository is cloned into the
//! cache first. A worker of the current gapscope is then built against the set
//! ([`worker`]) with cargo's `--config 'patch.crates-io.NAME.path="…"'` in a worktree
//! of gapscope's own commit (so neither checkout is touched), after cargo has been asked
//! whether the patch is used at all ([`graph`]). The worker and its log are cached per
//! (gapscope commit, patch set) under `<cache>/patched/`; a host with that cache and no
//! cargo runs the prebuilt workers (`gapscope build-workers` makes them).
//!
//! It knows nothing of experiments beyond the spec's table: `experiment::revs` runs a
//! variant's reps in the worker this module hands back.

pub mod graph;
pub mod source;
pub mod worker;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use source::ResolvedPatch;
pub use worker::{prepare_worker, GapscopeSource, PatchedWorker};

/// One entry of a variant's `patch` table: where a crate's source comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PatchSource {
    /// A folder in a git repository (the crate itself, or with `git` the crate's folder
    /// inside that repository). A relative path is taken from the current folder.
    #[serde(default)]
    pub path: Option<PathBuf>,
    /// A git URL to clone (into the revision cache) instead of a local repository.
    #[serde(default)]
    pub git: Option<String>,
    /// A revision of that repository (default: its working tree, as it is).
    #[serde(default)]
    pub rev: Option<String>,
}

impl PatchSource {
    /// How the experiment wrote it, for knobs and messages: `../fork@HEAD~1`.
    pub fn describe(&self) -> String {
        let mut s = match (&self.git, &self.path) {
            (Some(url), Some(p)) => format!("{url}:{}", p.display()),
            (Some(url), None) => url.clone(),
            (None, Some(p)) => p.display().to_string(),
            (None, None) => String::new(),
        };
        match &self.rev {
            Some(r) => s.push_str(&format!("@{r}")),
            None if self.git.is_none() => s.push_str(" (working tree)"),
            None => {}
        }
        s
    }
}

/// A variant's patches, by crate name.
pub type PatchSet = BTreeMap<String, PatchSource>;

/// Checks a variant's `patch` table as the experiment is read; the message names what
/// to write instead.
pub fn check(variant: &str, set: &PatchSet) -> Result<(), String> {
    if set.is_empty() {
        return Err(format!(
            "variant {variant:?}: patch = {{}} names no crate: write patch = {{ \"CRATE\" = {{ path = \"../fork\" }} }}, or leave it out"
        ));
    }
    for (name, p) in set {
        let ok_name = !name.is_empty()
            && name.len() <= 64
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !ok_name {
            return Err(format!(
                "variant {variant:?}: patch {name:?} is not a crate name (letters, digits, - and _)"
            ));
        }
        match (&p.path, &p.git) {
            (None, None) => {
                return Err(format!(
                    "variant {variant:?}: patch {name:?} has no source: give path = \"../fork\" or git = \"URL\""
                ))
            }
            (Some(path), _) if path.as_os_str().is_empty() => {
                return Err(format!("variant {variant:?}: patch {name:?}: path is empty"))
            }
            _ => {}
        }
        if let Some(r) = &p.rev {
            if r.is_empty() || r.starts_with('-') || r.len() > 200 {
                return Err(format!(
                    "variant {variant:?}: patch {name:?}: rev = {r:?} is not a revision: give a commit id, tag or branch"
                ));
            }
        }
        if p.git.is_some() && p.path.as_ref().is_some_and(|x| x.is_absolute()) {
            return Err(format!(
                "variant {variant:?}: patch {name:?}: with git, path is the crate's folder inside the repository (relative)"
            ));
        }
    }
    Ok(())
}

/// The cargo features this gapscope was built with: a worker gets the same ones, so
/// that it runs the backends this build runs.
pub fn this_build_features() -> Vec<String> {
    let mut f = Vec::new();
    if cfg!(feature = "supraseal") {
        f.push("supraseal".to_string());
    }
    if cfg!(feature = "cuda") {
        f.push("cuda".to_string());
    }
    f
}

#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    #[error(
        "patch {krate:?}: no crate of that name is in gapscope's dependency graph ({lock}); \
         patch one of the crates it lists{near}"
    )]
    NotInGraph {
        krate: String,
        lock: PathBuf,
        near: String,
    },
    #[error(
        "patch {krate:?}: cargo did not use {dir} (version {version}): {why}. Give a \
         revision whose Cargo.toml declares a version that satisfies the requirement"
    )]
    Unused {
        krate: String,
        dir: PathBuf,
        version: String,
        why: String,
    },
    #[error("patch {krate:?}: {dir} is not a crate ({why}); point path at the folder holding the crate's Cargo.toml")]
    NotACrate {
        krate: String,
        dir: PathBuf,
        why: String,
    },
    #[error("patch {krate:?}: {source}")]
    Rev {
        krate: String,
        source: crate::revisions::RevError,
    },
    #[error(
        "the worker for this patch set did not build ({status}): the log ({log}) ends:\n{tail}"
    )]
    BuildFailed {
        status: String,
        log: PathBuf,
        tail: String,
    },
    #[error("{0}")]
    NoWorker(String),
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Write(#[from] crate::fsx::WriteError),
}

pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> PatchError {
    let what = what.into();
    move |source| PatchError::Io { what, source }
}

/// A short hex digest of `text` (cache keys).
pub(crate) fn digest(text: &str, bytes: usize) -> String {
    use sha2::Digest;
    let h = sha2::Sha256::digest(text.as_bytes());
    h.iter().take(bytes).map(|b| format!("{b:02x}")).collect()
}

/// `path` made absolute from the current folder (kept as given when that fails).
pub(crate) fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Keeps the recorder's C ABI in the binary. C/C++ of a patched crate reaches it
/// through weak references (`cuda/gapscope_trace.h`), and a weak reference does not make
/// the linker pull the object that defines a symbol out of an archive: something strong
/// has to. Called by the worker before its rep; the addresses are only looked at.
pub fn link_recorder() -> usize {
    use crate::trace::ffi;
    let table: [usize; 6] = [
        ffi::gapscope_span_enter as *const () as usize,
        ffi::gapscope_span_enter_under as *const () as usize,
        ffi::gapscope_span_exit as *const () as usize,
        ffi::gapscope_span_context as *const () as usize,
        ffi::gapscope_span_attr_u64 as *const () as usize,
        ffi::gapscope_span_attr_str as *const () as usize,
    ];
    std::hint::black_box(table).iter().fold(0, |a, b| a ^ b)
}
