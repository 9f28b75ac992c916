//! An incremental build for a new worktree: its build outputs seeded from an earlier
//! commit's worktree, as an in-place checkout (`git bisect`) leaves them.
//!
//! A worktree made for a commit has every tracked file new (written at its checkout),
//! so `make` or any build that compares times rebuilds everything in it. Seeding copies
//! the earlier worktree's untracked and ignored files (its build's outputs), times
//! kept, and gives each tracked file the two commits have alike the earlier worktree's
//! time: only the files that differ between the commits are then newer than the
//! outputs, and the build redoes what depends on them, as it would after `git checkout`
//! in one folder.

use std::path::{Path, PathBuf};

use super::git::{self, GitError};

/// What [`seed_worktree`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Seeded {
    /// Untracked or ignored files copied from the earlier worktree.
    pub copied: usize,
    /// Tracked files alike in both commits that took the earlier worktree's time.
    pub aged: usize,
    /// Tracked files that differ (kept new, so that the build redoes them).
    pub changed: usize,
}

/// Copies the untracked and ignored files of worktree `from` into worktree `to` (times
/// and permissions kept; links made again; a file `to` has already is left alone), and
/// sets each tracked file of `to` whose content its commit shares with `from`'s commit
/// (and that `from`'s working tree has unmodified) to `from`'s time of that file.
/// Both must be worktrees of one repository.
pub fn seed_worktree(from: &Path, to: &Path) -> Result<Seeded, GitError> {
    let from_head = git::head_of(from).ok_or_else(|| failed(from, "not a worktree"))?;
    let changed: std::collections::HashSet<String> = git::changed_between(to, &from_head)?
        .into_iter()
        .chain(git::modified_files(from)?)
        .collect();
    let mut done = Seeded::default();
    for rel in git::untracked_files(from)? {
        let (src, dst) = (from.join(&rel), to.join(&rel));
        if dst.symlink_metadata().is_ok() {
            continue;
        }
        if copy_kept(&src, &dst).is_ok() {
            done.copied += 1;
        }
    }
    for file in git::tracked_files(to)? {
        let Ok(rel) = file.strip_prefix(to) else {
            continue;
        };
        let key = rel.to_string_lossy();
        if changed.contains(key.as_ref()) {
            done.changed += 1;
            continue;
        }
        let Ok(meta) = from.join(rel).symlink_metadata() else {
            continue;
        };
        let Ok(when) = meta.modified() else { continue };
        if !meta.file_type().is_file() {
            continue;
        }
        let aged = std::fs::OpenOptions::new()
            .write(true)
            .open(&file)
            .and_then(|h| h.set_modified(when));
        if aged.is_ok() {
            done.aged += 1;
        }
    }
    Ok(done)
}

/// Removes what seeding (and a build) left in `tree`: every untracked and ignored file.
pub fn clean_worktree(tree: &Path) -> Result<(), GitError> {
    git::clean(tree)
}

fn failed(dir: &Path, why: &str) -> GitError {
    GitError::Failed {
        args: "seed".into(),
        dir: dir.to_path_buf(),
        stderr: why.into(),
    }
}

/// Copies `src` to `dst` (folders made), its time kept; a link is made again.
fn copy_kept(src: &Path, dst: &Path) -> std::io::Result<()> {
    let meta = src.symlink_metadata()?;
    if let Some(parent) = dst.parent() {
        std::fs::create_dir_all(parent)?;
    }
    if meta.file_type().is_symlink() {
        let target: PathBuf = std::fs::read_link(src)?;
        return std::os::unix::fs::symlink(target, dst);
    }
    if !meta.file_type().is_file() {
        return Ok(());
    }
    std::fs::copy(src, dst)?;
    let h = std::fs::OpenOptions::new().write(true).open(dst)?;
    h.set_modified(meta.modified()?)
}
