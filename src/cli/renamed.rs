//! Old spellings of subcommands, flags and values, renamed so that one idea has one name
//! across subcommands (`--out` is always a folder; a file is `--out-file`; a span for a
//! flame graph is `--flame-span`; plain output is `--format text`). Each old spelling
//! still parses, as a hidden clap alias, and [`notes`] gives the one line that says what
//! it is now called.

/// One renamed spelling: where it is given, the old form and the new one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Renamed {
    /// The subcommand path it belongs to (`["sweep", "run"]`); empty for a subcommand.
    pub command: &'static [&'static str],
    /// The old spelling: a subcommand name, a `--flag`, or `--flag value`.
    pub old: &'static str,
    /// The spelling to use now.
    pub new: &'static str,
}

/// Every old spelling gapscope still accepts.
pub const RENAMED: &[Renamed] = &[
    Renamed {
        command: &[],
        old: "prepare",
        new: "build-workers",
    },
    Renamed {
        command: &["gpu-selftest"],
        old: "--out",
        new: "--results-dir",
    },
    Renamed {
        command: &["gpu-selftest"],
        old: "--period-ms",
        new: "--telemetry-period-ms",
    },
    Renamed {
        command: &["export"],
        old: "--out",
        new: "--out-file",
    },
    Renamed {
        command: &["sweep", "run"],
        old: "--out",
        new: "--out-file",
    },
    Renamed {
        command: &["diff"],
        old: "--flame",
        new: "--flame-span",
    },
    Renamed {
        command: &["diff"],
        old: "--flame-out",
        new: "--flame-file",
    },
    Renamed {
        command: &["diff"],
        old: "--format terminal",
        new: "--format text",
    },
    Renamed {
        command: &["cuda-check"],
        old: "--log2",
        new: "--log2-sizes",
    },
];

/// The deprecation lines for the old spellings in `args` (the command line without the
/// program name), one per spelling used.
pub fn notes(args: &[String]) -> Vec<String> {
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut out = Vec::new();
    for r in RENAMED {
        if used(r, &words) {
            out.push(format!(
                "note: `{}` is now `{}`; the old name still works, for now",
                r.old, r.new
            ));
        }
    }
    out
}

/// Whether `args` use `r`'s old spelling: the subcommand path first, then the flag among
/// the arguments after it (before a `--`).
fn used(r: &Renamed, args: &[&str]) -> bool {
    if r.command.is_empty() {
        return args.first() == Some(&r.old);
    }
    if args.len() < r.command.len() || args[..r.command.len()] != *r.command {
        return false;
    }
    let rest: Vec<&str> = args[r.command.len()..]
        .iter()
        .copied()
        .take_while(|a| *a != "--")
        .collect();
    match r.old.split_once(' ') {
        Some((flag, value)) => rest.iter().enumerate().any(|(i, a)| {
            *a == format!("{flag}={value}") || (*a == flag && rest.get(i + 1) == Some(&value))
        }),
        None => rest
            .iter()
            .any(|a| *a == r.old || a.starts_with(&format!("{}=", r.old))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn an_old_spelling_gets_one_line_and_a_new_one_none() {
        let n = notes(&args("diff run --flame prove --flame-out f.svg"));
        assert_eq!(n.len(), 2, "{n:?}");
        assert!(n[0].contains("`--flame` is now `--flame-span`"), "{n:?}");
        assert!(notes(&args("diff run --flame-span prove")).is_empty());
        assert_eq!(notes(&args("diff run --format terminal")).len(), 1);
        assert_eq!(notes(&args("diff run --format=terminal")).len(), 1);
        assert!(notes(&args("diff run --format text")).is_empty());
        assert_eq!(notes(&args("prepare e.toml")).len(), 1);
        assert_eq!(notes(&args("sweep run s.toml --k8s --out=x")).len(), 1);
        // Another subcommand's flag of the same name is not renamed.
        assert!(notes(&args("report run --out dir")).is_empty());
        // After `--`, arguments are not flags.
        assert!(notes(&args("export run -- --out")).is_empty());
    }
}
