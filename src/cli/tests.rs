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
    assert_eq!(d.format, crate::analysis::Format::Json);
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
        assert!(text.contains("upstream-reference"), "{shell}");
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
