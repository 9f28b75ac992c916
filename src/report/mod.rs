//! Review reports: a folder with report.md, the charts of [`crate::plot`] (SVG and PNG)
//! and a Chrome trace, written from one run folder. The last step of the pipeline
//! (store → analysis/plot → report). The phase section is [`crate::analysis`]'s diff of
//! each other variant against the baseline, the one `gapscope diff` prints.
//!
//! A chart that cannot be drawn, or a comparison that cannot be computed (one variant,
//! no successful rep), becomes a line in report.md; only an unreadable run folder or an
//! unwritable output folder fails the report.
//!
//! Every text the run folder supplies (span, thread and variant names, knobs, errors,
//! command lines, the experiment copy) goes through [`crate::markup`], so a folder made
//! by someone else cannot put links, HTML or reordering controls into report.md.

pub mod chart_changes;
pub mod counter_source;
pub mod environment;
pub mod flame;
pub mod headline;
pub mod sections;

use std::fmt::Write;
use std::path::{Path, PathBuf};

use crate::export::{chrome::ChromeTrace, RepSelection};
use crate::markup::{md_code, md_text};
use crate::plot::{self, ImageFormat};
use crate::store::RunView;

pub use sections::{diffs, phase_section, Diffs};

pub const REPORT_FILE: &str = "report.md";
pub const TRACE_FILE: &str = "trace.json";

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Write(#[from] crate::fsx::WriteError),
    #[error(
        "a report is a folder (report.md, its charts and trace.json), so `--out -` cannot \
         print it: pass --out DIR"
    )]
    Stdout,
}

/// What a report run produced.
#[derive(Debug)]
pub struct ReportOutcome {
    pub dir: PathBuf,
    pub report: PathBuf,
    pub charts_drawn: usize,
    /// One line per chart that could not be drawn (also in report.md).
    pub chart_failures: Vec<String>,
}

/// A drawn chart in report.md: its title, caption, the PNG inline, the SVG linked, and
/// its notes, but for `said` (a note the report says elsewhere; the chart shows it).
fn chart_markdown(md: &mut String, r: &plot::Rendered, said: Option<&str>) {
    let file = |ext: &str| {
        r.files
            .iter()
            .find(|p| p.extension().is_some_and(|e| e == ext))
            .and_then(|p| p.file_name())
            .map(|f| f.to_string_lossy().into_owned())
    };
    let _ = writeln!(md, "### {}\n\n{}\n", r.title, r.caption);
    if let Some(png) = file("png") {
        let _ = writeln!(md, "![{}]({png})\n", r.title);
    }
    if let Some(svg) = file("svg") {
        let _ = writeln!(md, "Vector version: [{svg}]({svg})\n");
    }
    let notes: Vec<&String> = r
        .notes
        .0
        .iter()
        .filter(|n| Some(n.as_str()) != said)
        .collect();
    for note in &notes {
        let _ = writeln!(md, "- *{}*", sections::cell(note));
    }
    if !notes.is_empty() {
        md.push('\n');
    }
}

/// `reports/<experiment>-<run id>`: the default folder for a run's report, once both
/// names pass the rule of names ([`crate::store::output_name`]).
pub fn default_out_dir(input: &RunView) -> Result<PathBuf, ReportError> {
    let name = crate::store::output_name(&input.data.dir, &input.data.meta)?;
    Ok(PathBuf::from("reports").join(name))
}

/// Writes the report of `input` into `out`. `command` is the command line that asked
/// for it, quoted in the reproduce section.
pub fn write_report(
    input: &RunView,
    out: &Path,
    command: &[String],
) -> Result<ReportOutcome, ReportError> {
    write_report_with(input, out, command, None)
}

/// [`write_report`], with the span whose sampled stacks to draw (default: the span
/// below the root with the most self time of those with 1% of the samples or more).
pub fn write_report_with(
    input: &RunView,
    out: &Path,
    command: &[String],
    flame_span: Option<&str>,
) -> Result<ReportOutcome, ReportError> {
    // report.md top to bottom in the order a reader meets it (headline, where the time
    // went, phases, spans, leak watch, charts, sampled stacks, trace, counters,
    // environment, reproduce): each section is a call, and this function is their order.
    if crate::fsx::write::is_stdout(out) {
        return Err(ReportError::Stdout);
    }
    // Only `gapscope run` writes into a run folder: a report never replaces a result.
    crate::store::check_output_path(out)?;
    std::fs::create_dir_all(out).map_err(|source| ReportError::Io {
        path: out.to_path_buf(),
        source,
    })?;
    let m = &input.data.meta;
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# {} — run {}\n",
        md_text(&m.experiment),
        md_text(&m.run_id)
    );
    let workload = match &m.command_workload {
        Some(e) => format!("External command {}", md_code(&e.command.join(" "))),
        None => format!(
            "{} 2^{} constraints × {} on the `{}` backend",
            md_text(&m.workload.field("circuit")),
            m.workload.field("log2_constraints"),
            m.workload.field("batch"),
            md_text(&m.workload.field("backend"))
        ),
    };
    let _ = writeln!(
        md,
        "{workload}; variants {}. Run folder: {}.\n",
        input
            .variants()
            .iter()
            .map(|v| md_code(v))
            .collect::<Vec<_>>()
            .join(" vs "),
        md_code(&input.data.dir.display().to_string())
    );

    let diffs = diffs(&input.data);
    // The answer first: the headline and the chart of where the time went, then tables.
    let _ = write!(md, "{}", headline::headline_section(&diffs));
    let mut drawn = 0;
    let mut failures = Vec::new();
    // A host without an NVIDIA driver is said once, in the environment section.
    let no_gpu_note = input.gpu.no_driver().then(|| input.gpu.missing_note());
    let said = no_gpu_note.as_deref();
    let first = diffs
        .as_ref()
        .ok()
        .and_then(|d| d.results.iter().find_map(|(_, r)| r.as_ref().ok()));
    if let Some(diff) = first {
        let chart = headline::change_chart(diff);
        match plot::render(&chart, input, out, &[ImageFormat::Svg, ImageFormat::Png]) {
            Ok(r) => {
                drawn += 1;
                chart_markdown(&mut md, &r, said);
            }
            Err(e) => {
                let line = format!("chart `change` could not be drawn: {e}");
                let _ = writeln!(
                    md,
                    "- ⚠ chart `change` could not be drawn: {}\n",
                    md_text(&e.to_string())
                );
                failures.push(line);
            }
        }
    }

    // Every chart's and table's Δ is the diffs' change of the same span and measure.
    let changes = chart_changes::changes(&diffs);
    let _ = writeln!(md, "## Phases\n\n{}", phase_section(&diffs));
    let _ = writeln!(
        md,
        "### All spans\n\n{}",
        sections::spans_section(input, &changes)
    );
    let _ = writeln!(
        md,
        "## Leak watch\n\n{}",
        sections::leak_section(&input.data)
    );

    let _ = writeln!(md, "## Charts\n");
    for (name, outcome) in
        plot::render_all(input, out, &[ImageFormat::Svg, ImageFormat::Png], &changes)
    {
        match outcome {
            Ok(r) if r.skipped.is_some() => {
                let why = r.skipped.as_deref().unwrap_or_default();
                let _ = writeln!(md, "- chart `{name}` {}\n", sections::cell(why));
            }
            Ok(r) => {
                drawn += 1;
                chart_markdown(&mut md, &r, said);
            }
            Err(e) => {
                let line = format!("chart `{name}` could not be drawn: {e}");
                let _ = writeln!(
                    md,
                    "- ⚠ chart `{name}` could not be drawn: {}\n",
                    md_text(&e.to_string())
                );
                failures.push(line);
            }
        }
    }

    md.push_str(&flame::section(input, out, flame_span));

    let _ = writeln!(md, "## Trace\n");
    let trace_path = out.join(TRACE_FILE);
    match crate::export::export_to_file(&ChromeTrace, input, RepSelection::All, Some(&trace_path)) {
        Ok(_) => {
            let _ = writeln!(
                md,
                "Every rep as a Chrome trace: [{TRACE_FILE}]({TRACE_FILE}). Open it in Perfetto (ui.perfetto.dev) \
                 or chrome://tracing; each rep is a process track starting at 0.\n"
            );
        }
        Err(e) => {
            let _ = writeln!(
                md,
                "- ⚠ the Chrome trace could not be written: {}\n",
                md_text(&e.to_string())
            );
        }
    }

    let _ = writeln!(md, "## Counters\n\n{}", sections::counters_section(input));
    let _ = writeln!(
        md,
        "## Environment\n\n{}",
        environment::environment_section(input)
    );
    let _ = writeln!(
        md,
        "## Reproduce\n\n{}",
        environment::reproduce_section(input, command)
    );

    let report = out.join(REPORT_FILE);
    crate::fsx::write_file(&report, md.as_bytes())?;
    Ok(ReportOutcome {
        dir: out.to_path_buf(),
        report,
        charts_drawn: drawn,
        chart_failures: failures,
    })
}
