use clap::{CommandFactory, Parser};

use super::*;

#[test]
fn the_command_line_definition_is_consistent() {
    Cli::command().debug_assert();
}

#[test]
fn diff_flags_become_diff_options() {
    let cli = Cli::try_parse_from([
        "gapscope",
        "diff",
        "a",
        "--noise-floor",
        "2%",
        "--gap-threshold",
        "0.5",
        "--unpaired",
        "--format",
        "json",
    ])
    .unwrap();
    let Command::Diff(d) = cli.command else {
        panic!("not a diff: {:?}", cli.command)
    };
    assert_eq!(d.format, super::diff::DiffFormat::Json);
    let o = d.options();
    assert_eq!(o.noise_floor, 0.02);
    assert_eq!(o.gap_threshold, 0.005);
    assert!(!o.paired);
    assert_eq!(o.seed, crate::analysis::DiffOptions::default().seed);
    assert!(Cli::try_parse_from(["gapscope", "diff", "a", "--noise-floor", "100"]).is_err());
}

#[test]
fn export_takes_a_format_and_keeps_the_chrome_flag() {
    for args in [
        &["gapscope", "export", "r", "--chrome"][..],
        &["gapscope", "export", "r", "--format", "chrome"][..],
        &["gapscope", "export", "r"][..],
    ] {
        let cli = Cli::try_parse_from(args).unwrap();
        assert!(matches!(cli.command, Command::Export(_)), "{args:?}");
    }
    assert!(Cli::try_parse_from(["gapscope", "export", "r", "--format", "pprof"]).is_err());
}

#[test]
fn completions_are_written_for_each_shell() {
    for shell in ["bash", "zsh", "fish"] {
        let cli = Cli::try_parse_from(["gapscope", "completions", shell]).unwrap();
        let Command::Completions(c) = cli.command else {
            panic!("not completions")
        };
        let mut out = Vec::new();
        c.write(&mut out);
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("gapscope"), "{shell}");
        assert!(text.contains("fail-on-regression"), "{shell}");
        // The prover's commands are registered only in a build with it.
        assert_eq!(
            text.contains("upstream-reference"),
            cfg!(feature = "groth16"),
            "{shell}"
        );
    }
    assert!(Cli::try_parse_from(["gapscope", "completions", "tcsh"]).is_err());
}

/// An error that quotes its source prints the source once; a cause the message does not
/// end with is kept.
#[test]
fn error_chain_prints_a_quoted_source_once() {
    #[derive(Debug, thiserror::Error)]
    #[error("cannot read experiment x.toml: {source}")]
    struct Quoting {
        source: std::io::Error,
    }
    let io = || std::io::Error::new(std::io::ErrorKind::NotFound, "No such file");
    let e = anyhow::Error::new(Quoting { source: io() });
    assert_eq!(
        super::error_chain(&e),
        "cannot read experiment x.toml: No such file"
    );
    let e = anyhow::Error::new(io()).context("cannot open the params");
    assert_eq!(
        super::error_chain(&e),
        "cannot open the params: No such file"
    );
}

/// Every old spelling of [`renamed::RENAMED`] parses as its new one, hidden from help (a
/// hidden alias of the new subcommand, flag or value), and the new one exists.
#[test]
fn every_renamed_spelling_is_a_hidden_alias_of_its_new_name() {
    let root = Cli::command();
    for r in renamed::RENAMED {
        // The prover's commands exist only in a build with it.
        if !cfg!(feature = "groth16") && r.command.first() == Some(&"cuda-check") {
            continue;
        }
        let mut cmd = &root;
        for name in r.command {
            cmd = cmd.find_subcommand(name).unwrap_or_else(|| panic!("{r:?}"));
        }
        if r.command.is_empty() {
            let sub = cmd
                .find_subcommand(r.old)
                .unwrap_or_else(|| panic!("{r:?}"));
            assert_eq!(sub.get_name(), r.new, "{r:?}");
            assert!(!sub.get_visible_aliases().any(|a| a == r.old), "{r:?}");
            continue;
        }
        let (new_flag, new_value) = r.new.split_once(' ').unwrap_or((r.new, ""));
        let (old_flag, old_value) = r.old.split_once(' ').unwrap_or((r.old, ""));
        let arg = cmd
            .get_arguments()
            .find(|a| a.get_long() == Some(&new_flag[2..]))
            .unwrap_or_else(|| panic!("no {new_flag}: {r:?}"));
        if old_value.is_empty() {
            let all = arg.get_all_aliases().unwrap_or_default();
            assert!(all.contains(&&old_flag[2..]), "{r:?}: {all:?}");
            let visible = arg.get_visible_aliases().unwrap_or_default();
            assert!(!visible.contains(&&old_flag[2..]), "{r:?}");
        } else {
            assert_eq!(old_flag, new_flag, "{r:?}");
            let v = arg
                .get_possible_values()
                .into_iter()
                .find(|v| v.get_name() == new_value)
                .unwrap_or_else(|| panic!("{r:?}"));
            assert!(v.matches(old_value, false), "{r:?}");
        }
        // The old spelling and the new one parse alike.
        let mut old_args: Vec<&str> = vec!["gapscope"];
        old_args.extend(r.command);
        let mut new_args = old_args.clone();
        old_args.extend(r.old.split(' '));
        new_args.extend(r.new.split(' '));
        let old_err = Cli::try_parse_from(&old_args).err().map(|e| e.kind());
        let new_err = Cli::try_parse_from(&new_args).err().map(|e| e.kind());
        assert_eq!(old_err, new_err, "{old_args:?} vs {new_args:?}");
        assert_ne!(
            old_err,
            Some(clap::error::ErrorKind::UnknownArgument),
            "{old_args:?}"
        );
    }
}
