//! The programs of a command workload, found before the first rep: a program that does
//! not exist would otherwise fail every rep, one spawn at a time. A path (`./bench`) is
//! taken from the subject's folder, a name from PATH, as the spawn takes them; a shell
//! command (`sh -c "prog args"`) has its first word looked up by that shell
//! (`command -v`), so builtins and functions count as found.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Shells whose `-c` script's first word is looked up.
const SHELLS: [&str; 6] = ["sh", "bash", "dash", "zsh", "ksh", "ash"];

/// A program that cannot be started.
#[derive(Debug, thiserror::Error)]
#[error(
    "variant {variant:?}: {what} {program:?} {why}; no rep ran. Check its spelling, give its \
     path (a relative path is taken from the subject's folder {dir}), or add a build step \
     (workload.build) that makes it"
)]
pub struct MissingProgram {
    pub variant: String,
    /// "program", "the shell's command" or "prepare program".
    pub what: &'static str,
    pub program: String,
    pub why: String,
    pub dir: String,
}

/// Why a variant's command cannot run as written, found before the first rep.
#[derive(Debug, thiserror::Error)]
pub enum ProgramProblem {
    #[error(transparent)]
    Missing(#[from] MissingProgram),
    /// The command sets `GAPSCOPE_SPAN_FD`, which gapscope owns.
    #[error("variant {variant:?}: {why}; no rep ran")]
    SpanFd { variant: String, why: String },
}

/// Why `argv` cannot be started in `dir`, or `None` when it can.
pub fn missing(argv: &[String], dir: &Path) -> Option<(&'static str, String, String)> {
    let prog = argv.first()?;
    if let Some(why) = not_runnable(prog, dir) {
        return Some(("program", prog.clone(), why));
    }
    let name = Path::new(prog).file_name()?.to_string_lossy().into_owned();
    if SHELLS.contains(&name.as_str()) && argv.get(1).map(String::as_str) == Some("-c") {
        let word = argv.get(2).and_then(|s| first_word(s))?;
        let found = Command::new(prog)
            .args(["-c", "command -v -- \"$1\"", "sh", word])
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        // A shell that cannot even answer: the reps will say why.
        if found.is_ok_and(|s| !s.success()) {
            return Some((
                "the shell's command",
                word.to_string(),
                format!("is not found by {prog} (not a builtin, function or program on PATH)"),
            ));
        }
    }
    None
}

/// The first word of a shell script when it is a plain word (no quoting, expansion or
/// assignment, which only the shell can read), else `None`.
fn first_word(script: &str) -> Option<&str> {
    let s = script.trim_start();
    // `exec prog …` (as `--cmd` writes a one-command script): the word is the program's.
    let s = s.strip_prefix("exec ").map(str::trim_start).unwrap_or(s);
    let end = s
        .find(|c: char| c.is_whitespace() || ";|&<>()".contains(c))
        .unwrap_or(s.len());
    let w = &s[..end];
    let plain = !w.is_empty()
        && w.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./+,:@%".contains(c));
    plain.then_some(w)
}

/// Why `prog` cannot be executed from `dir`, or `None`.
fn not_runnable(prog: &str, dir: &Path) -> Option<String> {
    if prog.contains('/') {
        let p = dir.join(prog);
        return match executable(&p) {
            Ok(()) => None,
            Err(why) => Some(format!("({}) {why}", p.display())),
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&path)
        .map(|d| d.join(prog))
        .any(|p| executable(&p).is_ok());
    (!found).then(|| {
        format!(
            "is not on PATH ({})",
            std::env::split_paths(&path)
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(":")
        )
    })
}

fn executable(p: &PathBuf) -> Result<(), &'static str> {
    match std::fs::metadata(p) {
        Err(_) => Err("does not exist"),
        Ok(m) if !m.is_file() => Err("is not a file"),
        Ok(m) if m.permissions().mode() & 0o111 == 0 => Err("is not executable (chmod +x)"),
        Ok(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn programs_on_path_and_in_the_folder_are_found() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(missing(&argv(&["true"]), dir.path()), None);
        assert_eq!(
            missing(&argv(&["sh", "-c", "echo hi; sleep 0"]), dir.path()),
            None
        );
        assert_eq!(missing(&argv(&["sh", "-c", "X=1 nope"]), dir.path()), None);
        let prog = dir.path().join("bench");
        std::fs::write(&prog, "#!/bin/sh\n").unwrap();
        let (what, p, why) = missing(&argv(&["./bench"]), dir.path()).unwrap();
        assert_eq!((what, p.as_str()), ("program", "./bench"));
        assert!(why.contains("not executable"), "{why}");
        std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(missing(&argv(&["./bench"]), dir.path()), None);
        assert_eq!(
            missing(&argv(&["sh", "-c", "./bench --x"]), dir.path()),
            None
        );
    }

    #[test]
    fn missing_programs_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let (_, p, why) = missing(&argv(&["gapscope-no-such-program"]), dir.path()).unwrap();
        assert_eq!(p, "gapscope-no-such-program");
        assert!(why.contains("not on PATH"), "{why}");
        let (what, p, _) = missing(
            &argv(&["sh", "-c", "gapscope-no-such-program --fast"]),
            dir.path(),
        )
        .unwrap();
        assert_eq!(
            (what, p.as_str()),
            ("the shell's command", "gapscope-no-such-program")
        );
        assert!(missing(&argv(&["./nope"]), dir.path()).is_some());
        assert_eq!(first_word("  'quoted' x"), None);
        assert_eq!(first_word("a|b"), Some("a"));
    }
}
