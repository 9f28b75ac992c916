//! Commits as the history places them: a branch's first-parent path read from git once
//! per import (position 0 is the root commit), and a commit's subject and date.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

fn git(repo: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(repo)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A branch's first-parent path in `repo`: commit → position. Empty when `repo` is not
/// a git checkout or has no such branch (commits are then stored without a position).
pub fn first_parent_positions(repo: &Path, branch: &str) -> HashMap<String, i64> {
    git(
        repo,
        &["rev-list", "--first-parent", "--reverse", branch, "--"],
    )
    .unwrap_or_default()
    .lines()
    .enumerate()
    .map(|(i, c)| (c.trim().to_string(), i as i64))
    .collect()
}

/// A commit's subject line and committer date (UTC), where `repo` has it.
pub fn describe(repo: &Path, sha: &str) -> (String, String) {
    git(
        repo,
        &[
            "show",
            "-s",
            "--format=%s%n%cd",
            "--date=iso-strict-local",
            sha,
        ],
    )
    .map(|t| {
        let mut l = t.lines();
        (
            l.next().unwrap_or_default().to_string(),
            l.next().unwrap_or_default().to_string(),
        )
    })
    .unwrap_or_default()
}

/// The branch checked out in `repo` ("main" when it cannot tell).
pub fn current_branch(repo: &Path) -> String {
    git(repo, &["rev-parse", "--abbrev-ref", "HEAD"])
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty() && s != "HEAD")
        .unwrap_or_else(|| "main".into())
}
