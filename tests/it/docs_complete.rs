//! The reference pages say everything the code accepts: every key an experiment file may
//! hold is in docs/experiments-and-knobs.md, every option of `gapscope diff` in
//! docs/reports.md. The keys come from the spec's serde structs themselves (the
//! unknown-key error of each table lists them) and the options from clap's `diff`
//! command, so a key or option added to the code without its line in the docs fails
//! here.

use std::path::{Path, PathBuf};

use clap::CommandFactory;
use gapscope::experiment::Experiment;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(doc: &str) -> String {
    std::fs::read_to_string(root().join(doc)).unwrap()
}

/// A key no table accepts.
const UNKNOWN: &str = "zz_not_a_key";

/// The keys of one table of an experiment file: `text` (with [`UNKNOWN`] placed in
/// that table) is refused, and serde's error lists the fields the table has
/// ("unknown field `…`, expected one of `a`, `b`" or "expected `a` or `b`").
fn keys_of(table: &str, text: &str) -> Vec<String> {
    let err = match Experiment::parse(text, Path::new("probe.toml")) {
        Ok(_) => panic!("{table}: an unknown key was accepted:\n{text}"),
        Err(e) => e.to_string(),
    };
    let line = err
        .lines()
        .find(|l| l.contains(&format!("unknown field `{UNKNOWN}`")))
        .unwrap_or_else(|| panic!("{table}: not an unknown-key error: {err}"));
    let expected = &line[line.find("expected").expect("lists the keys")..];
    let keys: Vec<String> = expected
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect();
    assert!(keys.len() >= 2, "{table}: no keys read from {line:?}");
    keys
}

const BUILT_IN: &str = "name = \"p\"\n[workload]\ncircuit = \"porep\"\nlog2_constraints = 10\n";
const COMMAND: &str = "name = \"p\"\n[workload]\ncommand = [\"true\"]\n";
const VARIANT: &str = "[[variant]]\nname = \"a\"\n";

/// A table of an experiment file: its name, the heading of the docs sections its keys
/// belong under, whether it is nested in a key of such a section (its keys are then
/// named in that key's row or the prose), and its keys.
struct Table {
    name: &'static str,
    heading: &'static str,
    nested: bool,
    keys: Vec<String>,
}

fn table(name: &'static str, heading: &'static str, nested: bool, text: &str) -> Table {
    Table {
        name,
        heading,
        nested,
        keys: keys_of(name, text),
    }
}

/// Every table of an experiment file.
fn tables() -> Vec<Table> {
    let z = UNKNOWN;
    vec![
        table(
            "top level",
            "Top level",
            false,
            &format!("{z} = 1\n{BUILT_IN}{VARIANT}"),
        ),
        table(
            "[workload]",
            "[workload]",
            false,
            &format!("{BUILT_IN}{z} = 1\n{VARIANT}"),
        ),
        table(
            "[workload] gaps",
            "[workload]",
            true,
            &format!("{COMMAND}gaps = {{ wrapper = \"w\", {z} = 1 }}\n{VARIANT}"),
        ),
        table(
            "[workload.log_spans]",
            "[workload]",
            true,
            &format!("{COMMAND}log_spans = {{ s = {{ {z} = 1 }} }}\n{VARIANT}"),
        ),
        table(
            "[run]",
            "[run]",
            false,
            &format!("{BUILT_IN}[run]\n{z} = 1\n{VARIANT}"),
        ),
        table(
            "[[variant]]",
            "[[variant]]",
            false,
            &format!("{BUILT_IN}{VARIANT}{z} = 1\n"),
        ),
        table(
            "[[variant]] patch",
            "[[variant]]",
            true,
            &format!("{BUILT_IN}{VARIANT}patch = {{ c = {{ {z} = 1 }} }}\n"),
        ),
    ]
}

/// The text of the docs page's `## ` sections whose heading contains `heading`.
fn sections<'a>(doc: &'a str, heading: &str) -> Vec<&'a str> {
    doc.split("\n## ")
        .filter(|s| s.lines().next().is_some_and(|h| h.contains(heading)))
        .collect()
}

/// The keys a section's tables document: the first cell of each row, as `` `key` ``.
fn documented_rows(section: &str) -> Vec<String> {
    section
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .map(str::to_string)
        .collect()
}

#[test]
fn every_key_an_experiment_accepts_is_in_experiments_and_knobs() {
    let doc = read("docs/experiments-and-knobs.md");
    let mut missing = Vec::new();
    let mut checked = 0;
    for t in tables() {
        let secs = sections(&doc, t.heading);
        assert!(
            !secs.is_empty(),
            "no section with {:?} in its heading",
            t.heading
        );
        let rows: Vec<String> = secs.iter().flat_map(|s| documented_rows(s)).collect();
        // A table's own keys are rows of its tables; a nested table's keys (gaps'
        // wrapper, a patch's git) are named in the section of the table holding it.
        for k in t.keys {
            checked += 1;
            let found = if t.nested {
                secs.iter()
                    .any(|s| s.contains(&format!("`{k}`")) || s.contains(&format!("{k} =")))
            } else {
                rows.contains(&k)
            };
            if !found {
                missing.push(format!("{} {k}", t.name));
            }
        }
    }
    assert!(checked > 50, "only {checked} keys read from the spec");
    assert!(
        missing.is_empty(),
        "docs/experiments-and-knobs.md does not document {} key(s) the experiment file \
         accepts (add a row to the section's table):\n{}",
        missing.len(),
        missing.join("\n")
    );
}

/// The long options of `gapscope diff` a user can pass (not hidden), from clap.
fn diff_options() -> Vec<String> {
    let cli = gapscope::cli::Cli::command();
    let diff = cli
        .get_subcommands()
        .find(|c| c.get_name() == "diff")
        .expect("a diff subcommand");
    diff.get_arguments()
        .filter(|a| !a.is_hide_set() && !a.is_positional())
        .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
        .filter(|l| l != "--help")
        .collect()
}

#[test]
fn every_diff_option_is_in_reports() {
    let doc = read("docs/reports.md");
    let opts = diff_options();
    assert!(
        opts.len() >= 10,
        "only {} options read: {opts:?}",
        opts.len()
    );
    let diff_section = sections(&doc, "gapscope diff").join("\n");
    assert!(!diff_section.is_empty(), "no `gapscope diff` section");
    let missing: Vec<&String> = opts
        .iter()
        .filter(|o| {
            !diff_section.contains(&format!("`{o}`")) && !diff_section.contains(&format!("`{o} "))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "docs/reports.md's `gapscope diff` section does not document {} option(s) of \
         `gapscope diff` (add a row to its Options table): {missing:?}",
        missing.len()
    );
}
