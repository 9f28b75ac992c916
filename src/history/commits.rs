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
    if branch.starts_with('-') {
        return HashMap::new();
    }
    git(
        repo,
        &[
            "rev-list",
            "--first-parent",
            "--reverse",
            "--end-of-options",
            branch,
            "--",
        ],
    )
    .unwrap_or_default()
    .lines()
    .enumerate()
    .map(|(i, c)| (c.trim().to_string(), i as i64))
    .collect()
}

/// A full or abbreviated commit id: 7 to 64 hex digits, nothing else. A revision read
/// from a run folder or a history database is passed to git only if it is one, so a
/// value such as `--output=FILE` can never reach git's command line as an option.
pub fn is_commit_id(s: &str) -> bool {
    (7..=64).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A commit's subject line and committer date (UTC), where `repo` has it; empty for a
/// value that is not a commit id ([`is_commit_id`]).
pub fn describe(repo: &Path, sha: &str) -> (String, String) {
    if !is_commit_id(sha) {
        return Default::default();
    }
    git(
        repo,
        &[
            "show",
            "-s",
            "--format=%s%n%cd",
            "--date=iso-strict-local",
            "--end-of-options",
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

#[cfg(test)]
mod injection_tests {
    use super::*;

    /// A revision read from a run folder never reaches git as an option: `--output=FILE`
    /// would make `git show` write over FILE.
    #[test]
    fn a_revision_that_is_an_option_is_never_passed_to_git() {
        let tmp = tempfile::tempdir().unwrap();
        let victim = tmp.path().join("victim");
        let here = Path::new(env!("CARGO_MANIFEST_DIR"));
        let evil = format!("--output={}", victim.display());
        assert!(!is_commit_id(&evil));
        assert_eq!(describe(here, &evil), (String::new(), String::new()));
        assert!(!victim.exists());
        assert!(first_parent_positions(here, &evil).is_empty());
        assert!(!victim.exists());
        assert!(is_commit_id("302f5c8") && is_commit_id(&"a".repeat(64)));
        assert!(!is_commit_id("302f5c") && !is_commit_id("HEAD~1") && !is_commit_id(""));
    }
}
