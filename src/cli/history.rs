//! `gapscope history …`: the results database across commits. `add` and `import` store
//! run folders, `show` prints a series with its steps (and draws it), `regressions`
//! lists steps across metrics, `bisect` hands a step to `gapscope bisect`, and `detect`
//! runs the detector on series from a file. `history bisect` itself is in
//! `history_bisect.rs`.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::history::{
    self, chart, import, schema, series, values, Analysed, DetectOptions, Filter, Imported,
    StepRecord, StepVerdict,
};
use crate::revisions;

#[path = "history_bisect.rs"]
mod history_bisect;

#[derive(clap::Args, Debug)]
pub struct HistoryArgs {
    #[command(subcommand)]
    command: HistoryCommand,
}

/// Where the database is.
#[derive(clap::Args, Debug, Clone)]
pub struct Db {
    /// The history database (default: $GAPSCOPE_HISTORY, else results/history.sqlite).
    #[arg(long, global = true)]
    db: Option<PathBuf>,
}

impl Db {
    pub fn path(&self) -> PathBuf {
        self.db
            .clone()
            .unwrap_or_else(|| history::default_db(Path::new("results")))
    }
}

/// Where imported commits are placed.
#[derive(clap::Args, Debug, Clone)]
pub struct Place {
    /// The repository whose first-parent history orders the commits.
    #[arg(long, default_value = ".")]
    repo: PathBuf,
    /// The branch of that history (default: the one checked out, else main).
    #[arg(long, value_parser = branch_name)]
    branch: Option<String>,
}

/// A `--branch` value as git names branches: not empty, no leading `-` (git would read
/// it as an option), no whitespace or control characters.
fn branch_name(s: &str) -> Result<String, String> {
    if s.is_empty() || s.starts_with('-') || s.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(format!(
            "{} is not a branch name (empty, a leading '-', or a space or control \
             character): name the branch as `git branch` lists it",
            crate::markup::terminal_text(s)
        ));
    }
    Ok(s.to_string())
}

impl Place {
    pub fn repo(&self) -> &Path {
        &self.repo
    }

    pub fn context(&self) -> import::ImportContext {
        import::ImportContext::new(&self.repo, self.branch.as_deref())
    }
}

#[derive(clap::Args, Debug, Clone)]
pub struct Select {
    /// SPAN.total|self|critical_self|process_cpu|COUNTER, e.g. prove.total.
    #[arg(long)]
    metric: Option<String>,
    /// Part of the workload's name, e.g. "porep 2^14".
    #[arg(long)]
    workload: Option<String>,
    /// Part of the variant's knobs, e.g. "drop=async".
    #[arg(long)]
    variant: Option<String>,
    /// A host id (or its start) or hostname, as `history show` prints them.
    #[arg(long)]
    host: Option<String>,
    /// Only the last N measured commits of each series.
    #[arg(long)]
    last: Option<usize>,
}

impl Select {
    fn filter(&self) -> Result<Filter> {
        if let Some(m) = &self.metric {
            values::check_metric(m).map_err(anyhow::Error::msg)?;
        }
        Ok(Filter {
            metric: self.metric.clone(),
            workload: self.workload.clone(),
            variant: self.variant.clone(),
            host: self.host.clone(),
            last: self.last,
        })
    }
}

/// The detector's tuning (defaults: those measured in evidence/history_detector/).
#[derive(clap::Args, Debug, Clone)]
pub struct Tune {
    /// Fewest measured commits on each side of a step (a short backfill may need 3;
    /// below 5 two spikes side by side can make a step).
    #[arg(long, default_value_t = DetectOptions::default().min_segment)]
    min_segment: usize,
}

impl Tune {
    pub fn options(&self) -> Result<DetectOptions> {
        if self.min_segment < 2 {
            bail!("--min-segment {} must be at least 2", self.min_segment);
        }
        Ok(DetectOptions {
            min_segment: self.min_segment,
            ..DetectOptions::default()
        })
    }
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
}

#[derive(clap::Subcommand, Debug)]
enum HistoryCommand {
    /// Store run folders (runs, or the step folders of a bisect). Again is harmless:
    /// only values not stored yet are added.
    Add {
        #[command(flatten)]
        db: Db,
        #[command(flatten)]
        place: Place,
        /// Run folders (results/<experiment>/<run>/).
        #[arg(required = true)]
        runs: Vec<PathBuf>,
        /// Test double: wait inside the transaction of the N-th folder until killed.
        #[arg(long, hide = true)]
        debug_pause_in_folder: Option<usize>,
    },
    /// Store every run folder under DIR (e.g. the results of many hosts, copied into
    /// one tree). Folders that cannot be read are skipped with the reason.
    Import {
        #[command(flatten)]
        db: Db,
        #[command(flatten)]
        place: Place,
        dir: PathBuf,
        #[arg(long, hide = true)]
        debug_pause_in_folder: Option<usize>,
    },
    /// A metric over first-parent commits with its steps (one series per workload,
    /// variant and host), and a chart per series with --chart DIR.
    Show {
        #[command(flatten)]
        db: Db,
        #[command(flatten)]
        select: Select,
        #[command(flatten)]
        tune: Tune,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// Write <DIR>/<metric>-<workload>-<variant>-<host>-<hash>.svg and .png per series.
        #[arg(long)]
        chart: Option<PathBuf>,
    },
    /// Steps across every stored metric (or those selected), newest first.
    Regressions {
        #[command(flatten)]
        db: Db,
        #[command(flatten)]
        select: Select,
        #[command(flatten)]
        tune: Tune,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// Leave out suspected steps.
        #[arg(long)]
        confirmed: bool,
    },
    /// Run `gapscope bisect` over a step's commit range, with the metric and the
    /// experiment it was found on; the bisect's run folders are stored afterwards.
    Bisect {
        #[command(flatten)]
        db: Db,
        /// The step's id, as `history show` and `history regressions` print it.
        step: String,
        #[command(flatten)]
        tune: Tune,
        /// The experiment to bisect with (default: the stored copy of the run that
        /// measured the step's first commit).
        #[arg(long)]
        experiment: Option<PathBuf>,
        /// Smallest growth that counts, in percent (default: half the step, at most 5).
        #[arg(long)]
        threshold: Option<f64>,
        #[arg(long)]
        reps: Option<u32>,
        #[arg(long, default_value = ".")]
        repo: PathBuf,
        #[arg(long, default_value = "results")]
        results_dir: PathBuf,
        #[arg(long)]
        params_dir: Option<PathBuf>,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Run the detector on series from a JSON file: {"series": [{"points": [[rep, …],
    /// …]}, …]} (one entry per commit, oldest first). Prints one detection per series.
    Detect {
        file: PathBuf,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
}

pub fn run(a: HistoryArgs) -> Result<()> {
    match a.command {
        HistoryCommand::Add {
            db,
            place,
            runs,
            debug_pause_in_folder,
        } => store(&db, &place, &runs, debug_pause_in_folder),
        HistoryCommand::Import {
            db,
            place,
            dir,
            debug_pause_in_folder,
        } => {
            if !dir.is_dir() {
                bail!(
                    "{} is not a folder: give the top of a tree of run folders",
                    dir.display()
                );
            }
            let dirs = import::run_folders(&dir);
            if dirs.is_empty() {
                bail!(
                    "no run folder (a folder with meta.json) under {}",
                    dir.display()
                );
            }
            store(&db, &place, &dirs, debug_pause_in_folder)
        }
        HistoryCommand::Show {
            db,
            select,
            tune,
            format,
            chart,
        } => show(&db, &select, &tune.options()?, format, chart.as_deref()),
        HistoryCommand::Regressions {
            db,
            select,
            tune,
            format,
            confirmed,
        } => regressions(&db, &select, &tune.options()?, format, confirmed),
        HistoryCommand::Bisect {
            db,
            step,
            tune,
            experiment,
            threshold,
            reps,
            repo,
            results_dir,
            params_dir,
            format,
        } => history_bisect::bisect_step(
            &db,
            &step,
            &tune.options()?,
            experiment.as_deref(),
            threshold,
            reps,
            &repo,
            &results_dir,
            params_dir,
            format,
        ),
        HistoryCommand::Detect { file, format } => detect_file(&file, format),
    }
}

/// Imports `dirs` and prints one line per folder; an error only when the database
/// itself fails.
pub fn store(db: &Db, place: &Place, dirs: &[PathBuf], pause: Option<usize>) -> Result<()> {
    let mut conn = schema::open(&db.path())?;
    let out = import::import_all(&mut conn, dirs, &place.context(), import::DebugPause(pause))?;
    let (mut stored, mut skipped) = (0, 0);
    for o in &out {
        match o {
            Imported::Stored {
                dir,
                values,
                already,
                commits,
            } => {
                stored += 1;
                let shorts: Vec<&str> = commits.iter().map(|c| revisions::short(c)).collect();
                if *values == 0 {
                    println!("{}: already stored ({already} values)", safe(dir.display()));
                } else {
                    println!(
                        "{}: {values} values stored ({} commits: {})",
                        safe(dir.display()),
                        commits.len(),
                        safe(shorts.join(", "))
                    );
                }
            }
            Imported::Skipped { dir, reason } => {
                skipped += 1;
                println!("{}: skipped: {}", safe(dir.display()), safe(reason));
            }
        }
    }
    eprintln!(
        "{stored} folders stored, {skipped} skipped, in {}",
        db.path().display()
    );
    Ok(())
}

pub(super) fn open_existing(db: &Db) -> Result<rusqlite::Connection> {
    let path = db.path();
    if !path.exists() {
        bail!(
            "no history database at {}: store runs first with `gapscope history add RUN…` (or pass --db)",
            path.display()
        );
    }
    Ok(schema::open(&path)?)
}

/// Text from the database or a run folder (a workload's command, a commit's subject, a
/// skip reason quoting a file) for the terminal: control characters shown, not obeyed.
fn safe(s: impl std::fmt::Display) -> String {
    crate::markup::terminal_safe(&s.to_string())
}

pub(super) fn pct(x: f64) -> String {
    format!("{:+.1}%", x * 100.0)
}

/// One step in one line.
pub fn step_line(s: &StepRecord) -> String {
    let interval = s
        .step
        .interval
        .map(|(lo, hi)| format!(" [{} … {}]", pct(lo), pct(hi)))
        .unwrap_or_default();
    let range = if s.unmeasured > 0 {
        format!(
            "{}..{} ({} commits not measured in between)",
            revisions::short(&s.last_before),
            revisions::short(&s.first_after),
            s.unmeasured
        )
    } else {
        format!(
            "{}..{} (adjacent)",
            revisions::short(&s.last_before),
            revisions::short(&s.first_after)
        )
    };
    format!(
        "{} {:<9} {}{interval} z={:.1}  {:.4} -> {:.4}  in {}  \"{}\"",
        safe(&s.id),
        s.step.verdict.to_string(),
        pct(s.step.change),
        s.step.z,
        s.step.before,
        s.step.after,
        safe(range),
        safe(s.first_after_subject.chars().take(60).collect::<String>())
    )
}

fn show(
    db: &Db,
    select: &Select,
    opts: &DetectOptions,
    format: Format,
    chart_dir: Option<&Path>,
) -> Result<()> {
    // One function for `history show`: the series loaded and analysed, their charts, then
    // the printout, JSON or text. The text form (noise, levelled runs, one line per commit,
    // the steps) is most of its length, each line printed once, here.
    if select.metric.is_none() {
        bail!("history show needs --metric SPAN.MEASURE (e.g. prove.total); `history regressions` covers every metric");
    }
    let conn = open_existing(db)?;
    let all = series::load(&conn, &select.filter()?)?;
    if all.is_empty() {
        bail!(
            "no stored values of {} match: `gapscope history regressions` lists what is stored",
            select.metric.as_deref().unwrap_or_default()
        );
    }
    let analysed: Vec<Analysed> = all.into_iter().map(|s| series::analyse(s, opts)).collect();
    if let Some(dir) = chart_dir {
        for a in &analysed {
            match chart::write(a, dir) {
                Ok(files) => {
                    for f in files {
                        eprintln!("chart: {}", safe(f.display()));
                    }
                }
                Err(e) => eprintln!("chart of {} not drawn: {}", safe(&a.series.key), safe(e)),
            }
        }
    }
    match format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&analysed)?),
        Format::Text => {
            for a in &analysed {
                println!("{}", safe(&a.series.key));
                println!(
                    "  noise between commits σ = {:.4} ({}); {} commits measured{}",
                    a.detection.noise,
                    a.detection.noise_source,
                    a.series.points.len(),
                    if a.series.off_path > 0 {
                        format!(
                            ", {} off the branch's first-parent path left out",
                            a.series.off_path
                        )
                    } else {
                        String::new()
                    }
                );
                let scaled: Vec<String> = a
                    .series
                    .runs
                    .iter()
                    .filter(|r| (r.factor - 1.0).abs() > 1e-9)
                    .map(|r| format!("{} ×{:.3} ({} commits)", safe(&r.run), r.factor, r.commits))
                    .collect();
                if !scaled.is_empty() {
                    println!(
                        "  {} of {} runs put on one level by the commits they share: {}",
                        scaled.len(),
                        a.series.runs.len(),
                        scaled.join(", ")
                    );
                }
                for (i, p) in a.series.points.iter().enumerate() {
                    let mark = a
                        .steps
                        .iter()
                        .find(|s| s.step.index == i)
                        .map(|s| format!("  <- {} {}", s.step.verdict, pct(s.step.change)))
                        .unwrap_or_default();
                    println!(
                        "  {:>5} {} {:>14.4}  ({} values){mark}  {}",
                        p.position,
                        safe(revisions::short(&p.sha)),
                        a.detection.medians[i],
                        p.values.len(),
                        safe(p.subject.chars().take(50).collect::<String>())
                    );
                }
                if a.steps.is_empty() {
                    println!("  no step");
                }
                for s in &a.steps {
                    println!("  {}", step_line(s));
                }
            }
        }
    }
    Ok(())
}

fn regressions(
    db: &Db,
    select: &Select,
    opts: &DetectOptions,
    format: Format,
    confirmed: bool,
) -> Result<()> {
    let conn = open_existing(db)?;
    let mut steps = series::regressions(&conn, &select.filter()?, opts)?;
    if confirmed {
        steps.retain(|s| s.step.verdict != StepVerdict::Suspected);
    }
    match format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&steps)?),
        Format::Text => {
            if steps.is_empty() {
                println!("no step in the stored series");
            }
            for s in &steps {
                println!(
                    "{}  {} of {} on {}",
                    step_line(s),
                    safe(&s.key.metric),
                    safe(&s.key.workload),
                    safe(&s.key.host_id)
                );
            }
        }
    }
    Ok(())
}

/// The experiment text with variant `name` moved first (bisect measures the first
/// variant's knobs).
#[derive(serde::Deserialize)]
struct SeriesFile {
    series: Vec<PointsOnly>,
}

#[derive(serde::Deserialize)]
struct PointsOnly {
    points: Vec<Vec<f64>>,
}

fn detect_file(file: &Path, format: Format) -> Result<()> {
    // A file the user named (a link is their choice), but capped: /dev/zero ends.
    let text = crate::fsx::read_capped(file, 64 << 20)
        .with_context(|| format!("cannot read {}", file.display()))?;
    let parsed: SeriesFile = serde_json::from_slice(&text).with_context(|| {
        format!(
            "{}: expected {{\"series\": [{{\"points\": [[value, …], …]}}, …]}}",
            file.display()
        )
    })?;
    let opts = DetectOptions::default();
    let out: Vec<history::Detection> = parsed
        .series
        .iter()
        .map(|s| history::detect::detect(&s.points, &opts))
        .collect();
    match format {
        Format::Json => println!("{}", serde_json::to_string(&out)?),
        Format::Text => {
            for (i, d) in out.iter().enumerate() {
                let steps: Vec<String> = d
                    .steps
                    .iter()
                    .map(|s| format!("{}@{} {}", s.verdict, s.index, pct(s.change)))
                    .collect();
                println!("series {i}: σ {:.4}; {}", d.noise, steps.join(", "));
            }
        }
    }
    Ok(())
}
