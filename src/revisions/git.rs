//! The git commands revisions need, each with an error that says what to do.

use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("cannot run git ({0}); install git, or put it on PATH")]
    NoGit(std::io::Error),
    #[error("{path} is not in a git repository ({stderr}); give `repo = \"PATH\"` (or --repo) naming one")]
    NotARepo { path: PathBuf, stderr: String },
    #[error("revision {rev:?} is not a commit of {repo} ({stderr}); give a commit id, tag or branch that `git -C {repo} rev-parse` knows")]
    UnknownRev {
        rev: String,
        repo: PathBuf,
        stderr: String,
    },
    #[error(
        "--good {} is not on the first-parent history of --bad {} (it came in by a merge, \
         or is on another branch): the search walks first parents only. Give a good commit \
         that `git log --first-parent {}` lists{}",
        short(good), short(bad), short(bad),
        merge.as_ref().map_or(String::new(), |m| format!(
            ", e.g. --good {} (the merge that brought it in) or --good {}^1 (the commit \
             before that merge)", short(m), short(m)
        ))
    )]
    NotFirstParent {
        good: String,
        bad: String,
        /// The oldest commit of bad's first-parent history that has good in its past.
        merge: Option<String>,
    },
    #[error("git {args} in {dir} failed: {stderr}")]
    Failed {
        args: String,
        dir: PathBuf,
        stderr: String,
    },
}

fn git(dir: &Path, args: &[&str]) -> Result<Result<String, String>, GitError> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .map_err(GitError::NoGit)?;
    if out.status.success() {
        Ok(Ok(String::from_utf8_lossy(&out.stdout).trim().to_string()))
    } else {
        Ok(Err(String::from_utf8_lossy(&out.stderr).trim().to_string()))
    }
}

fn git_ok(dir: &Path, args: &[&str]) -> Result<String, GitError> {
    git(dir, args)?.map_err(|stderr| GitError::Failed {
        args: args.join(" "),
        dir: dir.to_path_buf(),
        stderr,
    })
}

/// The top folder of the repository holding `path`.
pub fn toplevel(path: &Path) -> Result<PathBuf, GitError> {
    match git(path, &["rev-parse", "--show-toplevel"])? {
        Ok(s) => Ok(PathBuf::from(s)),
        Err(stderr) => Err(GitError::NotARepo {
            path: path.to_path_buf(),
            stderr,
        }),
    }
}

/// The full commit id `rev` names in `repo`.
pub fn resolve(repo: &Path, rev: &str) -> Result<String, GitError> {
    if rev.starts_with('-') {
        return Err(GitError::UnknownRev {
            rev: rev.into(),
            repo: repo.into(),
            stderr: "a revision may not start with '-'".into(),
        });
    }
    let spec = format!("{rev}^{{commit}}");
    git(repo, &["rev-parse", "--verify", "--quiet", &spec])?.map_err(|stderr| {
        GitError::UnknownRev {
            rev: rev.into(),
            repo: repo.into(),
            stderr: if stderr.is_empty() {
                "unknown revision".into()
            } else {
                stderr
            },
        }
    })
}

/// The first 12 characters of a commit id.
pub fn short(commit: &str) -> &str {
    &commit[..commit.len().min(12)]
}

/// Whether `a` is an ancestor of (or equal to) `b`.
pub fn is_ancestor(repo: &Path, a: &str, b: &str) -> Result<bool, GitError> {
    Ok(git(repo, &["merge-base", "--is-ancestor", a, b])?.is_ok())
}

/// The first-parent history from `good` to `bad`, both included, oldest first; an error
/// when `good` is not on `bad`'s first-parent chain.
pub fn first_parent_path(repo: &Path, good: &str, bad: &str) -> Result<Vec<String>, GitError> {
    let range = format!("{good}..{bad}");
    let list = git_ok(
        repo,
        &["rev-list", "--first-parent", "--reverse", &range, "--"],
    )?;
    let mut path = vec![good.to_string()];
    path.extend(list.lines().map(str::to_string));
    if let Some(first) = path.get(1) {
        let parent = git_ok(repo, &["rev-parse", &format!("{first}^1")])?;
        if parent != good {
            return Err(GitError::NotFirstParent {
                good: good.into(),
                bad: bad.into(),
                merge: merged_at(repo, good, &path[1..])?,
            });
        }
    }
    Ok(path)
}

/// The oldest of `chain` (a first-parent history, oldest first) that has `good` in its
/// past: once a first-parent commit has it, every later one does, so the search halves.
fn merged_at(repo: &Path, good: &str, chain: &[String]) -> Result<Option<String>, GitError> {
    let (mut lo, mut hi) = (0, chain.len());
    while lo < hi {
        let mid = (lo + hi) / 2;
        if is_ancestor(repo, good, &chain[mid])? {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    Ok(chain.get(lo).cloned())
}

/// The commit checked out at `tree`, if it is a worktree.
pub(super) fn head_of(tree: &Path) -> Option<String> {
    if !tree.join(".git").exists() {
        return None;
    }
    git(tree, &["rev-parse", "HEAD"]).ok()?.ok()
}

/// The bare clone of `repo` under `dir` that gapscope's worktrees are registered with,
/// made on first use: `git clone --shared` borrows the repository's objects (through
/// its alternates, so commits made later are seen as they are made) and copies none,
/// and the user's repository gains no worktree entry (`git worktree list` there is
/// unchanged). One clone per repository, keyed by its git folder.
pub(super) fn private_clone(repo: &Path, dir: &Path) -> Result<PathBuf, GitError> {
    let common = git_ok(
        repo,
        &["rev-parse", "--path-format=absolute", "--git-common-dir"],
    )?;
    let key: String = {
        use sha2::Digest;
        let d = sha2::Sha256::digest(common.as_bytes());
        d.iter().take(8).map(|b| format!("{b:02x}")).collect()
    };
    let clone = dir.join(format!("{key}.git"));
    if clone.join("HEAD").is_file() {
        return Ok(clone);
    }
    let _ = std::fs::remove_dir_all(&clone);
    let parent = clone.parent().unwrap_or(dir);
    std::fs::create_dir_all(parent).map_err(|e| GitError::Failed {
        args: "clone --bare --shared".into(),
        dir: parent.to_path_buf(),
        stderr: format!("cannot create the folder: {e}"),
    })?;
    git_ok(
        parent,
        &[
            "clone",
            "--quiet",
            "--bare",
            "--shared",
            &common,
            &clone.to_string_lossy(),
        ],
    )?;
    Ok(clone)
}

/// Adds a detached worktree of `commit` at `tree` (pruning a stale registration first).
pub(super) fn add_worktree(repo: &Path, tree: &Path, commit: &str) -> Result<(), GitError> {
    let _ = git(repo, &["worktree", "prune"])?;
    let path = tree.to_string_lossy();
    git_ok(
        repo,
        &["worktree", "add", "--force", "--detach", &path, commit],
    )?;
    Ok(())
}

/// Removes the worktree at `tree` from `repo` (the cache's clone), files and
/// registration; a folder that is not one of its worktrees is left as it is.
pub(super) fn remove_worktree(repo: &Path, tree: &Path) -> Result<bool, GitError> {
    let path = tree.to_string_lossy();
    Ok(git(repo, &["worktree", "remove", "--force", &path])?.is_ok())
}

/// The files git tracks in `tree`, as paths inside it.
pub fn tracked_files(tree: &Path) -> Result<Vec<PathBuf>, GitError> {
    Ok(git_ok(tree, &["ls-files", "-z"])?
        .split('\0')
        .filter(|f| !f.is_empty())
        .map(|f| tree.join(f))
        .collect())
}

pub fn is_dirty(tree: &Path) -> Result<bool, GitError> {
    Ok(!git_ok(tree, &["status", "--porcelain", "--untracked-files=no"])?.is_empty())
}

/// Paths (inside the repository) whose content differs between `commit` and the
/// commit checked out at `tree`.
pub(super) fn changed_between(tree: &Path, commit: &str) -> Result<Vec<String>, GitError> {
    Ok(split_z(&git_ok(
        tree,
        &["diff", "--name-only", "--no-renames", "-z", commit, "HEAD"],
    )?))
}

/// Tracked files of `tree` whose working copy differs from its commit.
pub(super) fn modified_files(tree: &Path) -> Result<Vec<String>, GitError> {
    Ok(split_z(&git_ok(
        tree,
        &["diff", "--name-only", "--no-renames", "-z", "HEAD"],
    )?))
}

/// Untracked files of `tree`, ignored ones included (a nested repository is left out).
pub(super) fn untracked_files(tree: &Path) -> Result<Vec<String>, GitError> {
    Ok(split_z(&git_ok(tree, &["ls-files", "-z", "--others"])?)
        .into_iter()
        .filter(|f| !f.ends_with('/'))
        .collect())
}

/// Removes every untracked and ignored file of `tree`.
pub(super) fn clean(tree: &Path) -> Result<(), GitError> {
    git_ok(tree, &["clean", "-q", "-f", "-d", "-x"]).map(|_| ())
}

fn split_z(s: &str) -> Vec<String> {
    s.split('\0')
        .filter(|f| !f.is_empty())
        .map(String::from)
        .collect()
}
