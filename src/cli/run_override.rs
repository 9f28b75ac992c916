//! `gapscope run FILE --reps N --warmups M`: the flags override the file's `[run] reps` and
//! `[run] warmups`. The run gets the file's text with those keys changed (and a comment
//! that says so), so that the run folder's experiment copy, meta.json and a later
//! `--resume` all hold the schedule that actually ran.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::experiment::Experiment;

/// One `[run]` key given on the command line, with the value the file had.
#[derive(Debug, Clone, PartialEq)]
pub struct Override {
    pub key: &'static str,
    pub value: u32,
    pub file_value: u32,
}

impl Override {
    /// The line `gapscope run` prints before the run.
    pub fn note(&self, file: &Path) -> String {
        format!(
            "--{} {} overrides [run] {} = {} of {} (the run folder's experiment copy says {} = {})",
            self.key,
            self.value,
            self.key,
            self.file_value,
            file.display(),
            self.key,
            self.value
        )
    }
}

/// The overrides `reps` and `warmups` make of experiment `exp` (none where a flag is
/// absent).
pub fn overrides(exp: &Experiment, reps: Option<u32>, warmups: Option<u32>) -> Vec<Override> {
    let mut out = Vec::new();
    if let Some(value) = reps {
        out.push(Override {
            key: "reps",
            value,
            file_value: exp.run.reps,
        });
    }
    if let Some(value) = warmups {
        out.push(Override {
            key: "warmups",
            value,
            file_value: exp.run.warmups,
        });
    }
    out
}

/// `text` (experiment file `file`) with every override applied: the key's line in the
/// `[run]` table replaced (or added below its header, or a `[run]` table added), every
/// other line kept; where the file writes `[run]` in a way that edit does not reach (an
/// inline table, dotted keys), the parsed file written again without its comments. The
/// result is checked to parse to the same experiment but for the overridden keys.
pub fn apply(text: &str, file: &Path, overrides: &[Override]) -> Result<String> {
    let header = format!(
        "# {} with {} from the command line (gapscope run {}).\n",
        file.display(),
        overrides
            .iter()
            .map(|o| format!(
                "[run] {} = {} (the file says {})",
                o.key, o.value, o.file_value
            ))
            .collect::<Vec<_>>()
            .join(" and "),
        overrides
            .iter()
            .map(|o| format!("--{} {}", o.key, o.value))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let edited = overrides.iter().fold(text.to_string(), |t, o| {
        set_in_run_table(&t, o.key, o.value)
    });
    let candidate = format!("{header}{edited}");
    if holds(&candidate, text, overrides) {
        return Ok(candidate);
    }
    let mut table: toml::Table = text
        .parse()
        .with_context(|| format!("{}: not a TOML table", file.display()))?;
    let run = table
        .entry("run")
        .or_insert_with(|| toml::Value::Table(Default::default()));
    let run = run
        .as_table_mut()
        .with_context(|| format!("{}: `run` is not a table", file.display()))?;
    for o in overrides {
        run.insert(o.key.into(), toml::Value::Integer(o.value.into()));
    }
    let body = toml::to_string(&table).context("writing the experiment with the overrides")?;
    let candidate = format!("{header}{body}");
    anyhow::ensure!(
        holds(&candidate, text, overrides),
        "{}: cannot apply {} to this file; set them in the file instead",
        file.display(),
        overrides
            .iter()
            .map(|o| format!("--{}", o.key))
            .collect::<Vec<_>>()
            .join(" and ")
    );
    Ok(candidate)
}

/// Whether `candidate` parses to the experiment of `original` with the overrides set.
fn holds(candidate: &str, original: &str, overrides: &[Override]) -> bool {
    let p = Path::new("experiment.toml");
    let (Ok(new), Ok(mut old)) = (
        Experiment::parse(candidate, p),
        Experiment::parse(original, p),
    ) else {
        return false;
    };
    for o in overrides {
        match o.key {
            "reps" => old.run.reps = o.value,
            "warmups" => old.run.warmups = o.value,
            _ => return false,
        }
    }
    new == old
}

/// `text` with `key = value` in its `[run]` table, by lines.
fn set_in_run_table(text: &str, key: &str, value: u32) -> String {
    let line = format!("{key} = {value}  # from the command line");
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let is_header = |l: &str| l.trim_start().starts_with('[');
    let Some(start) = lines.iter().position(|l| table_name(l) == Some("run")) else {
        if !text.ends_with('\n') && !text.is_empty() {
            lines.push(String::new());
        }
        lines.push("[run]".into());
        lines.push(line);
        return lines.join("\n") + "\n";
    };
    let end = (start + 1..lines.len())
        .find(|&i| is_header(&lines[i]))
        .unwrap_or(lines.len());
    match (start + 1..end).find(|&i| key_of(&lines[i]) == Some(key)) {
        Some(i) => lines[i] = line,
        None => lines.insert(start + 1, line),
    }
    lines.join("\n") + "\n"
}

/// The name of the table a header line opens (`[run]  # x` → `run`); none for other
/// lines and for arrays of tables.
fn table_name(line: &str) -> Option<&str> {
    let l = line.trim();
    let inner = l.strip_prefix('[')?;
    if inner.starts_with('[') {
        return None;
    }
    let close = inner.find(']')?;
    let rest = inner[close + 1..].trim_start();
    (rest.is_empty() || rest.starts_with('#')).then(|| inner[..close].trim())
}

/// The bare key a `key = value` line sets.
fn key_of(line: &str) -> Option<&str> {
    let (k, _) = line.split_once('=')?;
    let k = k.trim();
    (!k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'))
    .then_some(k)
}

/// Writes `text` to a temporary experiment file named `prefix…toml` (removed when the
/// returned path drops).
pub fn write_temp(prefix: &str, text: &str) -> Result<(PathBuf, tempfile::TempPath)> {
    let mut f = tempfile::Builder::new()
        .prefix(prefix)
        .suffix(".toml")
        .tempfile()
        .context("cannot create a temporary experiment file (is $TMPDIR writable?)")?;
    std::io::Write::write_all(&mut f, text.as_bytes())
        .context("cannot write the temporary experiment file")?;
    let path = f.into_temp_path();
    Ok((path.to_path_buf(), path))
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "name = \"e\" # the name\n[workload]\ncommand = [\"true\"]\n\
                        [run]  # policy\nreps = 10 # ten\nwarmups = 1\norder = \"interleaved\"\n\
                        [[variant]]\nname = \"a\"\n";

    fn parse(t: &str) -> Experiment {
        Experiment::parse(t, Path::new("x.toml")).unwrap()
    }

    #[test]
    fn the_run_table_s_keys_are_replaced_and_comments_kept() {
        let exp = parse(BASE);
        let o = overrides(&exp, Some(2), Some(0));
        assert_eq!(o[0].file_value, 10);
        let text = apply(BASE, Path::new("e.toml"), &o).unwrap();
        let e = parse(&text);
        assert_eq!((e.run.reps, e.run.warmups), (2, 0));
        assert!(
            text.contains("# the name") && text.contains("# policy"),
            "{text}"
        );
        assert!(
            text.starts_with("# e.toml with [run] reps = 2 (the file says 10)"),
            "{text}"
        );
        assert!(o[0]
            .note(Path::new("e.toml"))
            .contains("overrides [run] reps = 10"));
    }

    #[test]
    fn a_file_without_the_key_or_the_table_gets_them() {
        let no_key = BASE.replace("reps = 10 # ten\n", "");
        let e = parse(
            &apply(
                &no_key,
                Path::new("e.toml"),
                &overrides(&parse(&no_key), Some(3), None),
            )
            .unwrap(),
        );
        assert_eq!(e.run.reps, 3);
        let no_table = "name = \"e\"\n[workload]\ncommand = [\"true\"]\n[[variant]]\nname = \"a\"";
        let t = apply(
            no_table,
            Path::new("e.toml"),
            &overrides(&parse(no_table), Some(4), Some(2)),
        )
        .unwrap();
        let e = parse(&t);
        assert_eq!((e.run.reps, e.run.warmups, e.variants.len()), (4, 2, 1));
        // Dotted keys: the line edit would make a second `run`; the file is written again.
        let dotted = "name = \"e\"\nrun.reps = 9\n[workload]\ncommand = [\"true\"]\n[[variant]]\nname = \"a\"\n";
        let t = apply(
            dotted,
            Path::new("e.toml"),
            &overrides(&parse(dotted), Some(5), None),
        )
        .unwrap();
        assert_eq!(parse(&t).run.reps, 5);
    }

    #[test]
    fn a_value_the_file_could_not_hold_is_refused() {
        let e = apply(
            BASE,
            Path::new("e.toml"),
            &overrides(&parse(BASE), Some(0), None),
        );
        assert!(e.is_err(), "reps = 0 is not a valid schedule");
    }
}
