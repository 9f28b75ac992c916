//! `gapscope import`: trace files recorded elsewhere (Chrome/Kineto, OTLP, Nsight
//! Systems) as a run folder that `summary`, `diff`, `report` and `export` read.

use std::path::PathBuf;

use anyhow::Result;

use crate::import::{self, ImportOptions, NameMap, VariantInput};

#[derive(clap::Args, Debug)]
pub struct ImportArgs {
    /// The run folder's experiment name: the folder is RESULTS_DIR/NAME/<run id>/.
    #[arg(long)]
    name: String,
    #[command(flatten)]
    variants: Variants,
    /// Where the run folder goes.
    #[arg(long, default_value = "results")]
    results_dir: PathBuf,
    /// Cut each trace into one rep per occurrence of this span (e.g. ProfilerStep, a
    /// train_step annotation, a request): the spans inside it, on any thread, and the GPU
    /// work it launched.
    #[arg(long, value_name = "SPAN")]
    rep_span: Option<String>,
    /// The i-th rep of one variant pairs with the i-th of the other (the diff's paired
    /// test): only when the traces were recorded in matched pairs. Unpaired otherwise.
    #[arg(long)]
    paired_by_order: bool,
    /// Group names that vary per occurrence: the whole name becomes NAME where REGEX
    /// matches (anchor with ^…$). Tried in order, before the defaults.
    #[arg(long = "name-map", value_name = "REGEX=NAME")]
    name_map: Vec<String>,
    /// Leave out the default name maps (ProfilerStep#\d+ → ProfilerStep).
    #[arg(long)]
    no_default_names: bool,
    /// Also record each kernel, copy and memset as a span (on a thread per GPU and
    /// stream), so that the diff compares them by name (group names with --name-map).
    #[arg(long)]
    gpu_spans: bool,
    /// The most bytes read from one trace, also once decompressed.
    #[arg(long, value_name = "BYTES", default_value_t = import::source::MAX_FILE_BYTES)]
    max_file_bytes: u64,
}

/// `--variant NAME TRACES…`, once per variant: each occurrence is a group, which clap's
/// derive does not keep apart, so this argument is declared and read by hand.
#[derive(Debug, Clone, Default)]
struct Variants(Vec<Vec<String>>);

const VARIANT: &str = "variant";

impl clap::FromArgMatches for Variants {
    fn from_arg_matches(m: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let groups = m
            .get_occurrences::<String>(VARIANT)
            .map(|o| o.map(|g| g.cloned().collect()).collect())
            .unwrap_or_default();
        Ok(Variants(groups))
    }

    fn update_from_arg_matches(&mut self, m: &clap::ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

impl clap::Args for Variants {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        cmd.arg(
            clap::Arg::new(VARIANT)
                .long(VARIANT)
                .num_args(2..)
                .value_names(["NAME", "TRACES"])
                .action(clap::ArgAction::Append)
                .required(true)
                .help(
                    "A variant and its traces: --variant NAME 'dir/*.json' … (a quoted glob \
                     in the file name, a folder, or files). Once per variant, the baseline \
                     first; each file is one rep (see --rep-span), in natural order of names",
                ),
        )
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

pub fn run(a: ImportArgs) -> Result<()> {
    let names = NameMap::new(&a.name_map, !a.no_default_names).map_err(anyhow::Error::msg)?;
    let variants = a
        .variants
        .0
        .into_iter()
        .map(|mut v| VariantInput {
            name: v.remove(0),
            patterns: v,
        })
        .collect();
    let opts = ImportOptions {
        name: a.name,
        variants,
        results_dir: a.results_dir,
        rep_span: a.rep_span,
        paired_by_order: a.paired_by_order,
        names,
        max_file_bytes: a.max_file_bytes,
        gpu_spans: a.gpu_spans,
        command: super::command_line(),
        stop: crate::experiment::interrupt::requested,
    };
    // Ctrl-C stops between files and removes the unfinished folder; a second one ends
    // the process at once and says where that folder is.
    crate::experiment::interrupt::install();
    crate::experiment::interrupt::set_abandon_message(format!(
        "\nabandoned: the unfinished import is in a hidden folder {}/.import-*; remove it\n",
        opts.results_dir.join(&opts.name).display()
    ));
    let out = import::import(&opts)?;
    for w in &out.warnings {
        // File and span names come from the traces: shown, never obeyed by the terminal.
        eprintln!("warning: {}", crate::markup::terminal_text(w));
    }
    eprintln!("imported {} reps", out.reps);
    println!("{}", out.dir.display());
    Ok(())
}
