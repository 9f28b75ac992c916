//! `gapscope run --cmd A --cmd B`: an ad hoc comparison of commands, as hyperfine takes
//! them. The flags become the text of an experiment file (a command workload, one
//! variant per `--cmd`), which is then run as any experiment file is: the same
//! schedule, statistics, headline, report and exit statuses. `--export-experiment F`
//! keeps that file, so that the comparison can be run again, edited or committed.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::Serialize;

/// Name of the experiment (and so of the results folder) of an ad hoc run.
pub const EXPERIMENT_NAME: &str = "cmd";
/// Longest variant name made from a command (the experiment file allows 64).
const NAME_CHARS: usize = 40;

#[derive(clap::Args, Debug, Default)]
pub struct AdHocArgs {
    /// A command to measure (repeat for each variant), run through `sh -c` unless
    /// `--shell none`; its span lines are read if it prints any, else the whole process
    /// is the one span `program`.
    #[arg(long = "cmd", value_name = "COMMAND", conflicts_with_all = ["experiment", "resume"])]
    pub commands: Vec<String>,
    /// Name of the variant of the --cmd at the same position (default: made from the
    /// command).
    #[arg(long = "name", value_name = "NAME", requires = "commands")]
    pub names: Vec<String>,
    /// Measured reps per command.
    #[arg(long, value_name = "N", requires = "commands", default_value_t = 10)]
    pub reps: u32,
    /// Warm-up reps per command (run, not measured).
    #[arg(long, value_name = "N", requires = "commands", default_value_t = 1)]
    pub warmups: u32,
    /// A command run before every rep of every variant, outside the measurement (e.g. to
    /// drop a cache); a rep whose prepare fails is recorded as failed.
    #[arg(long, value_name = "COMMAND", requires = "commands")]
    pub prepare: Option<String>,
    /// The shell that runs each command as `SHELL -c COMMAND`, or `none`: the command
    /// is split into words as a shell would (quotes respected) and run directly.
    #[arg(
        long,
        value_name = "SHELL",
        requires = "commands",
        default_value = "sh"
    )]
    pub shell: String,
    /// Write the experiment file these flags stand for (then run it); `gapscope run F`
    /// runs the same experiment again.
    #[arg(long, value_name = "FILE", requires = "commands")]
    pub export_experiment: Option<PathBuf>,
}

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

    /// `command` as the argv an experiment file holds.
    fn argv(&self, command: &str) -> Result<Vec<String>> {
        if self.shell == "none" {
            let words = shlex::split(command).with_context(|| {
                format!("--shell none: cannot split {command:?} into words (an unclosed quote?)")
            })?;
            if words.is_empty() {
                bail!("--cmd {command:?} names no program");
            }
            Ok(words)
        } else {
            if command.trim().is_empty() {
                bail!("--cmd {command:?} names no program");
            }
            Ok(vec![self.shell.clone(), "-c".into(), command.to_string()])
        }
    }

    /// The experiment file these flags stand for.
    pub fn experiment_text(&self) -> Result<String> {
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
                reps: self.reps,
                warmups: self.warmups,
            },
            variant: variants,
        };
        let body = toml::to_string(&file).context("writing the experiment file")?;
        Ok(format!(
            "# Made by `gapscope run --cmd` (each command is one variant); run it again with\n\
             # `gapscope run FILE`.\n{body}"
        ))
    }

    /// Writes the experiment file: to `--export-experiment`, else to a temporary file
    /// (kept until the returned guard drops); returns its path.
    pub fn write(&self) -> Result<(PathBuf, Option<tempfile::TempPath>)> {
        let text = self.experiment_text()?;
        if let Some(p) = &self.export_experiment {
            write_new(p, &text)?;
            eprintln!("experiment file: {}", p.display());
            return Ok((p.clone(), None));
        }
        let mut f = tempfile::Builder::new()
            .prefix("gapscope-cmd-")
            .suffix(".toml")
            .tempfile()
            .context("cannot create a temporary experiment file (is $TMPDIR writable?)")?;
        std::io::Write::write_all(&mut f, text.as_bytes())
            .context("cannot write the temporary experiment file")?;
        let path = f.into_temp_path();
        Ok((path.to_path_buf(), Some(path)))
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
            reps: 7,
            warmups: 2,
            shell: "sh".into(),
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
        let mut a = args(&["sleep 0.01", "sleep 0.01", "true"]);
        a.prepare = Some("sync".into());
        let text = a.experiment_text().unwrap();
        let e = crate::experiment::Experiment::parse(&text, Path::new("cmd.toml")).unwrap();
        assert_eq!(e.name, EXPERIMENT_NAME);
        assert_eq!((e.run.reps, e.run.warmups), (7, 2));
        let names: Vec<&str> = e.variants.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["sleep_0.01", "sleep_0.01-2", "true"]);
        let ext = e.workload.external.as_ref().unwrap();
        assert_eq!(ext.command, ["sh", "-c", "sleep 0.01"]);
        assert_eq!(
            ext.prepare.as_deref(),
            Some(&["sh".to_string(), "-c".into(), "sync".into()][..])
        );
        let r = e.resolved_variants();
        assert_eq!(
            r[2].command.as_deref(),
            Some(&["sh".to_string(), "-c".into(), "true".into()][..])
        );
    }

    #[test]
    fn shell_none_splits_words_and_names_are_checked() {
        let mut a = args(&["./bench 'a b' c"]);
        a.shell = "none".into();
        a.names = vec!["base".into()];
        let text = a.experiment_text().unwrap();
        let e = crate::experiment::Experiment::parse(&text, Path::new("x.toml")).unwrap();
        assert_eq!(e.variants[0].name, "base");
        assert_eq!(
            e.workload.external.unwrap().command,
            ["./bench", "a b", "c"]
        );
        a.commands.push("./bench \"unclosed".into());
        assert!(a.experiment_text().is_err());
        let mut two = args(&["a", "b"]);
        two.names = vec!["x".into(), "x".into()];
        assert!(two.experiment_text().is_err());
        let mut bad = args(&["a"]);
        bad.names = vec!["../x".into()];
        let text = bad.experiment_text().unwrap();
        assert!(crate::experiment::Experiment::parse(&text, Path::new("x.toml")).is_err());
    }
}
