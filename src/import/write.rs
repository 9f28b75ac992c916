//! Traces into a run folder: every file of every variant read in turn, cut into reps,
//! and written through the store rep by rep (spans, GPU rows, then the rep's row), so
//! that a file of millions of spans is never held as rows. The folder is made under a
//! hidden name and renamed when every file was read: a failed import leaves nothing.
//! meta.json says where each rep came from (`import`: every file with its format,
//! SHA-256, size, clock, reps and warnings; the importer's version and options).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde_json::{json, Map, Value};

use super::model::Trace;
use super::reps::{self, Rep, FILE_ROOT};
use super::rows::{self, Threads};
use super::{read_trace, FileDigest, IMPORTER_VERSION};
use crate::capture::names::NameMap;
use crate::phases::{PhaseSpec, WorkloadKind};
use crate::store::{self, GpuMeta, Meta, NewRun, RunWriter, VariantMeta, WorkloadMeta};

/// A variant and the traces it is made of.
#[derive(Debug, Clone)]
pub struct VariantInput {
    pub name: String,
    /// The patterns as given (globs, folders, files).
    pub patterns: Vec<String>,
}

/// What `gapscope import` was asked.
#[derive(Debug, Clone)]
pub struct ImportOptions {
    /// The experiment name: the folder is `results_dir/name/<run id>/`.
    pub name: String,
    pub variants: Vec<VariantInput>,
    pub results_dir: PathBuf,
    /// Cut each trace into one rep per occurrence of this span (its name as imported,
    /// or as written).
    pub rep_span: Option<String>,
    /// The i-th rep of each variant pair with each other (the diff's paired test).
    pub paired_by_order: bool,
    pub names: NameMap,
    /// Most bytes read from one file, before and after decompression.
    pub max_file_bytes: u64,
    /// Each GPU interval also as a span (on a thread per device and stream), so that the
    /// diff compares kernels by name.
    pub gpu_spans: bool,
    /// The command line, for meta.json.
    pub command: Vec<String>,
    /// Asked before each file: whether to stop (Ctrl-C). The import then ends with an
    /// error and leaves no folder behind.
    pub stop: fn() -> bool,
}

/// The run folder an import wrote, and what it said along the way.
#[derive(Debug)]
pub struct Imported {
    pub dir: PathBuf,
    pub reps: u32,
    /// One line per warning, each naming its file.
    pub warnings: Vec<String>,
}

/// The order meta.json records: pairing in the diff follows the order of a run whose
/// schedule alternates the variants; imported reps pair only when the user says so.
const ORDER_UNPAIRED: &str = "imported";
const ORDER_PAIRED: &str = "imported_paired";

/// Imports the traces of every variant into a new run folder.
pub fn import(opts: &ImportOptions) -> Result<Imported> {
    crate::fsx::check_name("--name", &opts.name, "it names the run folder's folder")
        .map_err(anyhow::Error::msg)?;
    let mut files: Vec<Vec<PathBuf>> = Vec::new();
    for (i, v) in opts.variants.iter().enumerate() {
        if opts.variants[..i].iter().any(|w| w.name == v.name) {
            bail!(
                "--variant {:?} is given twice: give each variant once, with all its files",
                v.name
            );
        }
        let mut mine = Vec::new();
        for p in &v.patterns {
            mine.extend(super::source::expand(p)?);
        }
        files.push(mine);
    }
    let root = opts
        .rep_span
        .clone()
        .unwrap_or_else(|| FILE_ROOT.to_string());
    let meta = new_meta(opts, &root);
    let exp_dir = opts.results_dir.join(&opts.name);
    let hidden = exp_dir.join(format!(".import-{}", meta.run_id));
    let fin = exp_dir.join(&meta.run_id);
    let mut writer = RunWriter::create(&hidden, &meta, &experiment_text(opts, &files))?;
    // The traces stay where they are, so the folder is made again from them where it is
    // lost: its rows reach the disk in the kernel's time, and it gets its name once
    // every row is written.
    writer.without_waiting_for_the_disk();
    let result = write_all(opts, &files, &root, &mut writer);
    drop(writer);
    let (record, reps, warnings, gpu) = match result {
        Ok(r) => r,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&hidden);
            return Err(e);
        }
    };
    let mut meta = meta;
    meta.completed_utc = Some(chrono::Utc::now().to_rfc3339());
    meta.reps = reps.iter().copied().max().unwrap_or(0);
    if gpu {
        // The gaps chart: the root's time the GPU's kernels do not cover.
        let mut p = PhaseSpec::root_only(&root);
        p.wrapper = Some(root.clone());
        meta.phases = Some(p);
    }
    store::write_imported_meta(&hidden, &meta, &[("import", record)])?;
    std::fs::rename(&hidden, &fin)
        .with_context(|| format!("cannot rename {} to {}", hidden.display(), fin.display()))?;
    Ok(Imported {
        dir: fin,
        reps: reps.iter().sum(),
        warnings,
    })
}

type Written = (Value, Vec<u32>, Vec<String>, bool);

/// Where an import stands between files.
struct Progress<'a> {
    opts: &'a ImportOptions,
    root: &'a str,
    writer: &'a mut RunWriter,
    next_rep: u32,
    /// Each warning with its file.
    warnings: Vec<String>,
    any_gpu: bool,
}

/// Every file of every variant into the writer; meta.json's `import`, the reps per
/// variant, the warnings, and whether any rep had GPU records.
fn write_all(
    opts: &ImportOptions,
    files: &[Vec<PathBuf>],
    root: &str,
    writer: &mut RunWriter,
) -> Result<Written> {
    let mut p = Progress {
        opts,
        root,
        writer,
        next_rep: 0,
        warnings: Vec::new(),
        any_gpu: false,
    };
    let mut per_variant = Map::new();
    let mut reps_of = Vec::new();
    for (v, paths) in opts.variants.iter().zip(files) {
        let mut iteration = 0u32;
        let mut records = Vec::new();
        for path in paths {
            if (opts.stop)() {
                bail!(
                    "interrupted before {}: nothing was imported and the unfinished run \
                     folder was removed; run the same import again",
                    path.display()
                );
            }
            records.push(p.file(&v.name, &mut iteration, path)?);
        }
        reps_of.push(iteration);
        per_variant.insert(
            v.name.clone(),
            json!({"patterns": v.patterns, "files": records}),
        );
    }
    let record = json!({
        "importer_version": IMPORTER_VERSION,
        "rep_span": opts.rep_span,
        "paired_by_order": opts.paired_by_order,
        "name_map": opts.names.describe(),
        "max_file_bytes": opts.max_file_bytes,
        "gpu_spans": opts.gpu_spans,
        "variants": per_variant,
    });
    Ok((record, reps_of, p.warnings, p.any_gpu))
}

impl Progress<'_> {
    /// Reads one file and writes its reps; meta.json's record of it.
    fn file(&mut self, variant: &str, iteration: &mut u32, path: &Path) -> Result<Value> {
        let (mut trace, digest) = read_trace(path, self.opts.max_file_bytes)?;
        let mut cut = cut(&trace, self.opts);
        if self.opts.gpu_spans {
            reps::gpu_as_spans(&mut trace, &mut cut.reps);
        }
        if let Some(w) = cut.note.clone() {
            trace.warn(w);
        }
        if cut.reps.is_empty() {
            let why = no_rep_reason(&trace, self.opts.rep_span.as_deref());
            bail!("{}: {why}", path.display());
        }
        let threads = Threads::of(&trace);
        let mapped = rows::mapped_names(&trace, &self.opts.names);
        let mut notes = Vec::new();
        for rep in &cut.reps {
            let ctx = rows::RepCtx {
                trace: &trace,
                threads: &threads,
                names: &mapped,
                rep: self.next_rep,
                variant,
                iteration: *iteration,
                root: self.root,
            };
            // The GPU rows are written while the span tree is built.
            let gpu = rows::gpu_rows(&ctx, rep);
            let writer = &mut *self.writer;
            let (gpu_written, (run, spans, n)) = std::thread::scope(|scope| {
                let w =
                    scope.spawn(|| writer.append_gpu_lines(gpu.len(), |i, out| gpu.line(i, out)));
                let spans = rows::span_rows(&ctx, rep, &gpu);
                let w = w.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
                (w, spans)
            });
            gpu_written?;
            self.any_gpu |= !gpu.is_empty();
            self.writer
                .append_rep_lines(&run, spans.len(), |i, out| spans.line(i, out))?;
            if let Some(why) = self.writer.take_capped() {
                notes.push(format!("rep {}: {why}", self.next_rep));
            }
            notes.extend(n);
            self.next_rep += 1;
            *iteration += 1;
        }
        for n in notes {
            trace.warn(n);
        }
        for w in &trace.warnings.kept {
            self.warnings.push(format!("{}: {w}", path.display()));
        }
        if trace.warnings.more > 0 {
            self.warnings.push(format!(
                "{}: {} more warnings (meta.json's import counts them)",
                path.display(),
                trace.warnings.more
            ));
        }
        Ok(file_record(path, &trace, &digest, cut.reps.len()))
    }
}

/// A trace's reps, and a note on what cutting left out.
struct Cut {
    reps: Vec<Rep>,
    note: Option<String>,
}

fn cut(trace: &Trace, opts: &ImportOptions) -> Cut {
    let Some(rep_span) = &opts.rep_span else {
        let r = reps::whole_file(trace);
        return Cut {
            reps: r.into_iter().collect(),
            note: None,
        };
    };
    let hit: Vec<bool> = (0..trace.names.len() as u32)
        .map(|i| {
            let n = trace.names.name(i);
            n == rep_span || opts.names.map(n) == rep_span.as_str()
        })
        .collect();
    let (reps, left) = reps::by_span(trace, |n| hit[n as usize]);
    let note = (left.spans + left.gpu > 0).then(|| {
        format!(
            "{} span(s) and {} GPU record(s) lie outside every {rep_span:?} span: left out",
            left.spans, left.gpu
        )
    });
    Cut { reps, note }
}

fn no_rep_reason(trace: &Trace, rep_span: Option<&str>) -> String {
    match rep_span {
        Some(s) => format!(
            "no span {s:?} in this {} trace ({} spans read), so it gives no rep; \
             --rep-span names a span of the file (as written, or as --name-map names it)",
            trace.format.as_str(),
            trace.spans.len()
        ),
        None => format!(
            "this {} trace holds no span and no GPU record ({} events read)",
            trace.format.as_str(),
            trace.counts.events
        ),
    }
}

/// meta.json's record of one file.
fn file_record(path: &Path, trace: &Trace, digest: &FileDigest, reps: usize) -> Value {
    let c = trace.counts;
    json!({
        "path": path.display().to_string(),
        "resolved": path.canonicalize().map(|p| p.display().to_string()).unwrap_or_default(),
        "format": trace.format.as_str(),
        "sha256": digest.sha256,
        "bytes": digest.bytes,
        "clock": trace.format.clock(),
        "reps": reps,
        "spans": trace.spans.len(),
        "gpu_records": trace.gpu.len(),
        "events": c.events,
        "instants_left_out": c.instants,
        "flows": c.flows,
        "other_events_left_out": c.other,
        "warnings": trace.warnings.kept,
        "more_warnings": trace.warnings.more,
    })
}

/// meta.json before the first rep: the import's workload, phases and variants.
fn new_meta(opts: &ImportOptions, root: &str) -> Meta {
    let variants = opts
        .variants
        .iter()
        .map(|v| VariantMeta {
            name: v.name.clone(),
            backend: WorkloadKind::Import.as_str().into(),
            knobs: [("traces".to_string(), v.patterns.join(" "))].into(),
            counters: Some("off".into()),
            scope: None,
            revision: None,
            patches: Vec::new(),
            patch_failed: None,
        })
        .collect();
    NewRun {
        experiment: opts.name.clone(),
        command: opts.command.clone(),
        counters: Default::default(),
        gpu: GpuMeta {
            available: false,
            reason: Some(
                "imported traces: gapscope watched no GPU; the traces' own kernel and copy \
                 records are in gpu_activity.csv"
                    .into(),
            ),
            ..Default::default()
        },
        workload: WorkloadMeta {
            kind: Some(WorkloadKind::Import),
            circuit: None,
        },
        phases: PhaseSpec::root_only(root),
        variants,
        reps: 0,
        warmups: 0,
        order: if opts.paired_by_order {
            ORDER_PAIRED
        } else {
            ORDER_UNPAIRED
        }
        .into(),
        process: "imported".into(),
    }
    // No span of an import went through gapscope's recorder: its cost is not theirs.
    .meta_unrecorded()
}

/// The run folder's experiment.toml: not an experiment `gapscope run` takes, but what
/// the folder was made from, in the same place every run folder keeps its recipe.
fn experiment_text(opts: &ImportOptions, files: &[Vec<PathBuf>]) -> String {
    let q = |s: &str| toml::Value::String(s.to_string()).to_string();
    let mut t = format!(
        "# Made by `gapscope import` from the traces below (meta.json's `import` has each\n\
         # file's format and sha256); re-import them rather than `gapscope run` this file.\n\
         name = {}\n\n[import]\nformat_detected = true\npaired_by_order = {}\n",
        q(&opts.name),
        opts.paired_by_order
    );
    if let Some(r) = &opts.rep_span {
        t.push_str(&format!("rep_span = {}\n", q(r)));
    }
    for (v, paths) in opts.variants.iter().zip(files) {
        let list: Vec<String> = paths.iter().map(|p| q(&p.display().to_string())).collect();
        t.push_str(&format!(
            "\n[[import.variant]]\nname = {}\nfiles = [{}]\n",
            q(&v.name),
            list.join(", ")
        ));
    }
    t
}
