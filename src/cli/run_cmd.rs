//! `gapscope run --cmd A --cmd B`: an ad hoc comparison of commands, as hyperfine takes
//! them. The flags become the text of an experiment file (a command workload, one
//! variant per `--cmd`), which is then run as any experiment file is: the same
//! schedule, statistics, headline, report and exit statuses. `--export-experiment F`
//! keeps that file, so that the comparison can be run again, edited or committed.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::experiment::command::shell;

/// Name of the experiment (and so of the results folder) of an ad hoc run.
pub const EXPERIMENT_NAME: &str = "cmd";
/// Longest variant name made from a command (the experiment file allows 64).
const NAME_CHARS: usize = 40;

#[derive(clap::Args, Debug, Default)]
pub struct AdHocArgs {
    /// A command to measure (repeat for each variant): run directly when it holds no
    /// shell syntax, else through `sh -c` (which `exec`s its last command); its span
    /// lines are read if it prints any, else the whole process is the one span `program`.
    #[arg(long = "cmd", value_name = "COMMAND", conflicts_with_all = ["experiment", "resume"])]
    pub commands: Vec<String>,
    /// With --cmd: the name of the variant of the --cmd at the same position (default:
    /// made from the command). An experiment file names its variants itself.
    #[arg(long = "name", value_name = "NAME")]
    pub names: Vec<String>,
    /// Measured reps per variant: with --cmd, per command [default: 10]; with an
    /// experiment file, in place of its `[run] reps` (said before the run; the run
    /// folder's experiment copy and meta.json hold the value used).
    #[arg(long, value_name = "N")]
    pub reps: Option<u32>,
    /// Warm-up reps per variant (run, not measured): with --cmd [default: 1]; with an
    /// experiment file, in place of its `[run] warmups`, as --reps.
    #[arg(long, value_name = "N")]
    pub warmups: Option<u32>,
    /// With --cmd: a command run before every rep of every variant, outside the
    /// measurement (e.g. to drop a cache); a rep whose prepare fails is recorded as
    /// failed. In an experiment file: `prepare = [...]` under `[workload]`.
    #[arg(long, value_name = "COMMAND")]
    pub prepare: Option<String>,
    /// With --cmd: the shell that runs a command with shell syntax as `SHELL -c COMMAND`,
    /// or `none`: every command is split into words as a shell would (quotes respected)
    /// and run directly [default: sh].
    #[arg(long, value_name = "SHELL")]
    pub shell: Option<String>,
    /// With --cmd: write the experiment file these flags stand for (then run it);
    /// `gapscope run F` runs the same experiment again.
    #[arg(long, value_name = "FILE")]
    pub export_experiment: Option<PathBuf>,
}

/// Default measured reps per command of `--cmd`.
pub const DEFAULT_REPS: u32 = 10;
/// Default warm-up reps per command of `--cmd`.
pub const DEFAULT_WARMUPS: u32 = 1;

#[derive(Serialize)]
struct FileText {
    name: String,
    description: String,
    workload: WorkloadText,
    run: RunText,
    variant: Vec<VariantText>,
}

#[derive(Serialize)]
struct WorkloadText {
    command: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prepare: Option<Vec<String>>,
}

#[derive(Serialize)]
struct RunText {
    reps: u32,
    warmups: u32,
    /// Counterbalanced (ABBA…) for `--until-decided`, which adds pairs; else the default.
    #[serde(skip_serializing_if = "Option::is_none")]
    order: Option<&'static str>,
}

#[derive(Serialize)]
struct VariantText {
    name: String,
    command: Vec<String>,
}

impl AdHocArgs {
    pub fn given(&self) -> bool {
        !self.commands.is_empty()
    }

    /// `command` as the argv an experiment file holds: split into words and run
    /// directly when it holds no shell syntax (or with `--shell none`), else `SHELL -c`
    /// with `exec` before its last command where the shell can replace itself with it,
    /// so that the process measured is the command's.
    fn argv(&self, command: &str) -> Result<Vec<String>> {
        if command.trim().is_empty() {
            bail!("--cmd {command:?} names no program");
        }
        let sh = self.shell.as_deref().unwrap_or("sh");
        let argv = if sh == "none" || !shell::needs_shell(command) {
            let words = shlex::split(command).with_context(|| {
                format!("--cmd {command:?}: cannot split it into words (an unclosed quote?)")
            })?;
            if words.is_empty() {
                bail!("--cmd {command:?} names no program");
            }
            words
        } else {
            vec![sh.to_string(), "-c".into(), shell::exec_last(command)]
        };
        if let Some(why) = shell::span_fd_override(&argv) {
            bail!("--cmd {command:?}: {why}");
        }
        Ok(argv)
    }

    /// The experiment file these flags stand for; `counterbalanced` (for
    /// `--until-decided`) runs its pairs in ABBA… order.
    pub fn experiment_text(&self, counterbalanced: bool) -> Result<String> {
        if self.names.len() > self.commands.len() {
            bail!(
                "{} --name for {} --cmd: give at most one name per command, in the same order",
                self.names.len(),
                self.commands.len()
            );
        }
        let mut variants: Vec<VariantText> = Vec::new();
        for (i, c) in self.commands.iter().enumerate() {
            let name = match self.names.get(i) {
                Some(n) => n.clone(),
                None => unique(name_of(c, i), &variants),
            };
            if variants.iter().any(|v| v.name == name) {
                bail!("--name {name:?} is given twice: each command needs a name of its own");
            }
            variants.push(VariantText {
                name,
                command: self.argv(c)?,
            });
        }
        let file = FileText {
            name: EXPERIMENT_NAME.into(),
            description: format!("gapscope run --cmd: {}", self.commands.join(" vs ")),
            workload: WorkloadText {
                command: variants[0].command.clone(),
                prepare: self.prepare.as_deref().map(|p| self.argv(p)).transpose()?,
            },
            run: RunText {
                reps: self.reps.unwrap_or(DEFAULT_REPS),
                warmups: self.warmups.unwrap_or(DEFAULT_WARMUPS),
                order: counterbalanced.then_some("counterbalanced"),
            },
            variant: variants,
        };
        let body = toml::to_string(&file).context("writing the experiment file")?;
        Ok(format!(
            "# Made by `gapscope run --cmd` (each command is one variant); run it again with\n\
             # `gapscope run FILE`.\n{body}"
        ))
    }

    /// Writes the experiment file ([`Self::experiment_text`]): to `--export-experiment`,
    /// else to a temporary file (kept until the returned guard drops); returns its path.
    pub fn write(&self, counterbalanced: bool) -> Result<(PathBuf, Option<tempfile::TempPath>)> {
        let text = self.experiment_text(counterbalanced)?;
        if let Some(p) = &self.export_experiment {
            write_new(p, &text)?;
            eprintln!("experiment file: {}", p.display());
            return Ok((p.clone(), None));
        }
        let (path, guard) = super::run_override::write_temp("gapscope-cmd-", &text)?;
        Ok((path, Some(guard)))
    }
}

/// Writes `text` to `path` whole ([`crate::fsx::write_file`]: never through a link,
/// never over anything but a regular file).
fn write_new(path: &Path, text: &str) -> Result<()> {
    crate::fsx::write_file(path, text.as_bytes())
        .map_err(|e| anyhow::anyhow!("--export-experiment {e}"))
}

/// A variant name made from a command: its characters that a name allows, others as
/// `_`, cut to [`NAME_CHARS`]; `cmd<i>` when nothing of it is left.
fn name_of(command: &str, i: usize) -> String {
    let mut s = String::new();
    for c in command.trim().chars() {
        let c = if c.is_ascii_alphanumeric() || "-_.".contains(c) {
            c
        } else {
            '_'
        };
        if !(c == '_' && s.ends_with('_')) {
            s.push(c);
        }
    }
    let s = s.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    let s: String = s.chars().take(NAME_CHARS).collect();
    let s = s.trim_end_matches(|c: char| !c.is_ascii_alphanumeric());
    if s.is_empty() {
        format!("cmd{}", i + 1)
    } else {
        s.to_string()
    }
}

/// `name`, or `name-2`, `name-3`… when a variant already has it.
fn unique(name: String, taken: &[VariantText]) -> String {
    let free = |n: &str| !taken.iter().any(|v| v.name == n);
    if free(&name) {
        return name;
    }
    (2..)
        .map(|k| format!("{name}-{k}"))
        .find(|n| free(n))
        .expect("an unused suffix")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(cmds: &[&str]) -> AdHocArgs {
        AdHocArgs {
            commands: cmds.iter().map(|s| s.to_string()).collect(),
            reps: Some(7),
            warmups: Some(2),
            ..Default::default()
        }
    }

    #[test]
    fn names_come_from_the_commands_and_stay_valid() {
        assert_eq!(name_of("sleep 0.1", 0), "sleep_0.1");
        assert_eq!(name_of("  ./bench --size=12 ", 0), "bench_--size_12");
        assert_eq!(name_of("'$'", 3), "cmd4");
        assert_eq!(name_of(&"x".repeat(100), 0).len(), NAME_CHARS);
    }

    #[test]
    fn the_flags_become_an_experiment_file_that_loads() {
        let mut a = args(&["sleep 0.01", "sleep 0.01", "cd /tmp && ./bench > out"]);
        a.prepare = Some("sync".into());
        let text = a.experiment_text(false).unwrap();
        let e = crate::experiment::Experiment::parse(&text, Path::new("cmd.toml")).unwrap();
        assert_eq!(e.name, EXPERIMENT_NAME);
        assert_eq!((e.run.reps, e.run.warmups), (7, 2));
        assert_eq!(e.run.order, crate::experiment::spec::Order::Interleaved);
        let paired = a.experiment_text(true).unwrap();
        let e2 = crate::experiment::Experiment::parse(&paired, Path::new("cmd.toml")).unwrap();
        assert_eq!(
            e2.run.order,
            crate::experiment::spec::Order::Counterbalanced
        );
        let names: Vec<&str> = e.variants.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["sleep_0.01", "sleep_0.01-2", "cd_tmp_._bench_out"]);
        let ext = e.workload.command.as_ref().unwrap();
        // No shell syntax: run directly, so the process measured is the command's.
        assert_eq!(ext.command, ["sleep", "0.01"]);
        assert_eq!(ext.prepare.as_deref(), Some(&["sync".to_string()][..]));
        // Shell syntax: through the shell, which replaces itself with the last command.
        let r = e.resolved_variants();
        assert_eq!(
            r[2].command.as_deref(),
            Some(
                &[
                    "sh".to_string(),
                    "-c".into(),
                    "cd /tmp && exec ./bench > out".into()
                ][..]
            )
        );
    }

    #[test]
    fn a_command_that_sets_the_span_fd_is_refused() {
        let a = args(&["GAPSCOPE_SPAN_FD=2 ./prog"]);
        let e = a.experiment_text(false).unwrap_err().to_string();
        assert!(e.contains("sets GAPSCOPE_SPAN_FD=2"), "{e}");
        assert!(e.contains("Remove it"), "{e}");
    }

    #[test]
    fn shell_none_splits_words_and_names_are_checked() {
        let mut a = args(&["./bench 'a b' c"]);
        a.shell = Some("none".into());
        a.names = vec!["base".into()];
        let text = a.experiment_text(false).unwrap();
        let e = crate::experiment::Experiment::parse(&text, Path::new("x.toml")).unwrap();
        assert_eq!(e.variants[0].name, "base");
        assert_eq!(e.workload.command.unwrap().command, ["./bench", "a b", "c"]);
        a.commands.push("./bench \"unclosed".into());
        assert!(a.experiment_text(false).is_err());
        let mut two = args(&["a", "b"]);
        two.names = vec!["x".into(), "x".into()];
        assert!(two.experiment_text(false).is_err());
        let mut bad = args(&["a"]);
        bad.names = vec!["../x".into()];
        let text = bad.experiment_text(false).unwrap();
        assert!(crate::experiment::Experiment::parse(&text, Path::new("x.toml")).is_err());
    }
}
