//! Series out of the history: the values of one metric of one workload, variant and
//! host, per commit in first-parent order; and each series' change points as steps
//! between two measured commits.

use rusqlite::{params, Connection};
use serde::Serialize;
use sha2::Digest;

use super::detect::{self, DetectOptions, Detection, Step, StepVerdict};
use super::HistoryError;

/// Which series to read. Text filters match a part (`--workload porep`); `host`
/// matches the host id's start or the hostname.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Exact metric; None: every metric.
    pub metric: Option<String>,
    pub workload: Option<String>,
    pub variant: Option<String>,
    pub host: Option<String>,
    /// Only the last N measured commits of each series.
    pub last: Option<usize>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct SeriesKey {
    pub metric: String,
    pub workload: String,
    pub variant_key: String,
    pub host_id: String,
    pub hostname: String,
}

impl std::fmt::Display for SeriesKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} of {} [{}] on host {} ({})",
            self.metric, self.workload, self.variant_key, self.host_id, self.hostname
        )
    }
}

/// One measured commit of a series: every stored rep's value, of every run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommitPoint {
    pub sha: String,
    pub position: i64,
    pub subject: String,
    pub values: Vec<f64>,
    /// Run folders these values came from.
    pub runs: usize,
    /// Index into [`Series::runs`] of each value's run.
    #[serde(skip)]
    pub value_runs: Vec<usize>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Series {
    pub key: SeriesKey,
    pub points: Vec<CommitPoint>,
    /// Commits with values but no place on the branch's first-parent path (left out).
    pub off_path: usize,
    /// The run folders behind the values, and the factor each run's values were scaled
    /// by ([`level_runs`]): 1 for a run that shares no commit with another.
    #[serde(default)]
    pub runs: Vec<RunLevel>,
}

/// One run folder of a series and the factor its values were multiplied by.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunLevel {
    pub run: String,
    pub factor: f64,
    /// Commits of the series this run measured.
    pub commits: usize,
}

/// A step between two measured commits.
#[derive(Debug, Clone, Serialize)]
pub struct StepRecord {
    /// Stable across calls while the step's commits stay the same: `history bisect ID`.
    pub id: String,
    pub key: SeriesKey,
    /// The last measured commit before the step and the first after it: the step lies
    /// in (last_before, first_after].
    pub last_before: String,
    pub first_after: String,
    pub last_before_position: i64,
    pub first_after_position: i64,
    /// First-parent commits in the range that were not measured.
    pub unmeasured: i64,
    pub first_after_subject: String,
    pub step: Step,
}

/// A series with its detection and steps.
#[derive(Debug, Clone, Serialize)]
pub struct Analysed {
    pub series: Series,
    pub detection: Detection,
    pub steps: Vec<StepRecord>,
}

fn sql(what: &str) -> impl Fn(rusqlite::Error) -> HistoryError + '_ {
    move |e| HistoryError::Sql {
        what: what.to_string(),
        message: e.to_string(),
    }
}

/// Reads the series that `filter` selects, points in first-parent order.
pub fn load(conn: &Connection, filter: &Filter) -> Result<Vec<Series>, HistoryError> {
    // One query and one pass over its rows, ordered by series, commit and run: each row
    // extends the current series and point, or starts the next. Then each series' runs are
    // levelled and its last `filter.last` commits kept.
    let like = |s: &Option<String>| format!("%{}%", s.clone().unwrap_or_default());
    let mut stmt = conn
        .prepare(
            "SELECT se.metric, se.workload, se.variant_key, h.id, h.hostname,
                    c.sha, c.position, c.subject, s.value, s.run_key
             FROM samples s
             JOIN series se ON se.id = s.series_id
             JOIN hosts h ON h.id = s.host_id
             JOIN commits c ON c.sha = s.commit_sha
             WHERE (?1 IS NULL OR se.metric = ?1)
               AND se.workload LIKE ?2 AND se.variant_key LIKE ?3
               AND (?4 IS NULL OR h.id LIKE ?4 || '%' OR h.hostname = ?4)
             ORDER BY se.metric, se.workload, se.variant_key, h.id, c.position, c.sha, s.run_key, s.rep",
        )
        .map_err(sql("reading series"))?;
    let rows = stmt
        .query_map(
            params![
                filter.metric,
                like(&filter.workload),
                like(&filter.variant),
                filter.host
            ],
            |r| {
                Ok((
                    SeriesKey {
                        metric: r.get(0)?,
                        workload: r.get(1)?,
                        variant_key: r.get(2)?,
                        host_id: r.get(3)?,
                        hostname: r.get(4)?,
                    },
                    r.get::<_, String>(5)?,
                    r.get::<_, Option<i64>>(6)?,
                    r.get::<_, String>(7)?,
                    r.get::<_, f64>(8)?,
                    r.get::<_, String>(9)?,
                ))
            },
        )
        .map_err(sql("reading series"))?;
    let mut out: Vec<Series> = Vec::new();
    let mut runs_of_point: Vec<String> = Vec::new();
    for row in rows {
        let (key, sha, pos, subject, value, run) = row.map_err(sql("reading series"))?;
        if out.last().is_none_or(|s| s.key != key) {
            out.push(Series {
                key,
                points: Vec::new(),
                off_path: 0,
                runs: Vec::new(),
            });
        }
        let s = out.last_mut().expect("pushed");
        let Some(pos) = pos else {
            if s.points.last().is_none_or(|p| p.sha != sha) {
                s.off_path += 1;
            }
            continue;
        };
        if s.points.last().is_none_or(|p| p.sha != sha) {
            runs_of_point.clear();
            s.points.push(CommitPoint {
                sha,
                position: pos,
                subject,
                values: Vec::new(),
                runs: 0,
                value_runs: Vec::new(),
            });
        }
        let ri = match s.runs.iter().position(|r| r.run == run) {
            Some(i) => i,
            None => {
                s.runs.push(RunLevel {
                    run: run.clone(),
                    factor: 1.0,
                    commits: 0,
                });
                s.runs.len() - 1
            }
        };
        let p = s.points.last_mut().expect("pushed");
        p.values.push(value);
        p.value_runs.push(ri);
        if !runs_of_point.contains(&run) {
            runs_of_point.push(run);
            p.runs += 1;
        }
    }
    for s in &mut out {
        level_runs(s);
    }
    if let Some(n) = filter.last {
        for s in &mut out {
            let cut = s.points.len().saturating_sub(n);
            s.points.drain(..cut);
        }
    }
    out.retain(|s| !s.points.is_empty());
    Ok(out)
}

/// Puts runs that measured common commits on one level. A run made at another time on a
/// shared machine can read every commit 3× slower; pooled with another run per commit,
/// its values move the medians of the commits the two share, and a detector then finds
/// steps at the edges of that overlap (evidence/history_backfill: a bisect's runs beside
/// the backfill's made a false step appear). The fit is two-way on the log scale, value
/// = run level × commit level, by median polish over the per-(run, commit) medians
/// (Tukey, EDA 1977): robust, deterministic, and exact for runs that differ by a
/// factor. Within each group of runs linked by shared commits, levels are anchored so
/// that the median run keeps its values; a run sharing no commit keeps its own. Series
/// with a value ≤ 0 (counts can be 0) are left as measured.
pub fn level_runs(s: &mut Series) {
    // One fit in its steps (the cells, the median polish, each linked group anchored),
    // which share the cells' index and the effects; split, each would take all of them.
    let nr = s.runs.len();
    for r in &mut s.runs {
        r.commits = 0;
    }
    for p in &s.points {
        let mut runs = p.value_runs.clone();
        runs.sort_unstable();
        runs.dedup();
        for ri in runs {
            s.runs[ri].commits += 1;
        }
    }
    if nr < 2 || s.points.iter().any(|p| p.values.iter().any(|&v| v <= 0.0)) {
        return;
    }
    // cells[(run, point)] = log of the median of that run's values of that commit.
    let mut cells: Vec<(usize, usize, f64)> = Vec::new();
    for (pi, p) in s.points.iter().enumerate() {
        let mut by_run: std::collections::BTreeMap<usize, Vec<f64>> = Default::default();
        for (&v, &ri) in p.values.iter().zip(&p.value_runs) {
            by_run.entry(ri).or_default().push(v);
        }
        for (ri, v) in by_run {
            if let Some(m) = crate::stats::median(&v) {
                cells.push((ri, pi, m.ln()));
            }
        }
    }
    let np = s.points.len();
    // The cells of each commit and of each run. A commit only one run measured says
    // nothing of that run's level (its own level absorbs it): run levels come from the
    // shared commits alone, and with none there is nothing to level.
    let mut of_point: Vec<Vec<usize>> = vec![Vec::new(); np];
    let mut of_run: Vec<Vec<usize>> = vec![Vec::new(); nr];
    for (k, &(_, pi, _)) in cells.iter().enumerate() {
        of_point[pi].push(k);
    }
    for (k, &(ri, pi, _)) in cells.iter().enumerate() {
        if of_point[pi].len() > 1 {
            of_run[ri].push(k);
        }
    }
    if of_run.iter().all(Vec::is_empty) {
        return;
    }
    let median_of = |ks: &[usize], f: &dyn Fn(&(usize, usize, f64)) -> f64| {
        crate::stats::median(&ks.iter().map(|&k| f(&cells[k])).collect::<Vec<_>>()).unwrap_or(0.0)
    };
    let mut run_eff = vec![0.0f64; nr];
    let mut point_eff = vec![0.0f64; np];
    for _ in 0..20 {
        for (pe, ks) in point_eff.iter_mut().zip(&of_point) {
            *pe = median_of(ks, &|c| c.2 - run_eff[c.0]);
        }
        for (re, ks) in run_eff.iter_mut().zip(&of_run) {
            *re = median_of(ks, &|c| c.2 - point_eff[c.1]);
        }
    }
    // Groups of runs linked through shared commits (union-find over runs), each
    // anchored so that its median run keeps its values (a lone run's level stays 0).
    let mut parent: Vec<usize> = (0..nr).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    for ks in &of_point {
        for w in ks.windows(2) {
            let (a, b) = (
                root(&mut parent, cells[w[0]].0),
                root(&mut parent, cells[w[1]].0),
            );
            parent[a] = b;
        }
    }
    let groups: Vec<usize> = (0..nr).map(|i| root(&mut parent, i)).collect();
    for g in groups
        .iter()
        .copied()
        .collect::<std::collections::BTreeSet<_>>()
    {
        let members: Vec<usize> = (0..nr).filter(|&i| groups[i] == g).collect();
        let m = crate::stats::median(&members.iter().map(|&i| run_eff[i]).collect::<Vec<_>>())
            .unwrap_or(0.0);
        for &i in &members {
            run_eff[i] -= m;
        }
    }
    for (ri, r) in s.runs.iter_mut().enumerate() {
        r.factor = (-run_eff[ri]).exp();
    }
    for p in &mut s.points {
        for (v, &ri) in p.values.iter_mut().zip(&p.value_runs) {
            *v *= s.runs[ri].factor;
        }
    }
}

fn step_id(key: &SeriesKey, first_after: &str) -> String {
    let text = format!(
        "{}|{}|{}|{}|{}",
        key.host_id, key.workload, key.variant_key, key.metric, first_after
    );
    let d = sha2::Sha256::digest(text.as_bytes());
    let hex: String = d.iter().take(4).map(|b| format!("{b:02x}")).collect();
    format!("step-{hex}")
}

/// Runs the detector over a series.
pub fn analyse(series: Series, opts: &DetectOptions) -> Analysed {
    let points: Vec<Vec<f64>> = series.points.iter().map(|p| p.values.clone()).collect();
    let detection = detect::detect(&points, opts);
    let steps = detection
        .steps
        .iter()
        .map(|s| {
            let b = &series.points[s.index - 1];
            let a = &series.points[s.index];
            StepRecord {
                id: step_id(&series.key, &a.sha),
                key: series.key.clone(),
                last_before: b.sha.clone(),
                first_after: a.sha.clone(),
                last_before_position: b.position,
                first_after_position: a.position,
                unmeasured: a.position.saturating_sub(b.position).saturating_sub(1),
                first_after_subject: a.subject.clone(),
                step: s.clone(),
            }
        })
        .collect();
    Analysed {
        series,
        detection,
        steps,
    }
}

/// Steps of every series `filter` selects, newest first (by the step's first commit),
/// confirmed before suspected at one commit.
pub fn regressions(
    conn: &Connection,
    filter: &Filter,
    opts: &DetectOptions,
) -> Result<Vec<StepRecord>, HistoryError> {
    let mut steps: Vec<StepRecord> = load(conn, filter)?
        .into_iter()
        .flat_map(|s| analyse(s, opts).steps)
        .collect();
    steps.sort_by(|a, b| {
        b.first_after_position
            .cmp(&a.first_after_position)
            .then(
                (a.step.verdict == StepVerdict::Suspected)
                    .cmp(&(b.step.verdict == StepVerdict::Suspected)),
            )
            .then(b.step.z.total_cmp(&a.step.z))
    });
    Ok(steps)
}

/// The step named `id` (as `history show` and `history regressions` print it).
pub fn find_step(
    conn: &Connection,
    id: &str,
    opts: &DetectOptions,
) -> Result<StepRecord, HistoryError> {
    regressions(conn, &Filter::default(), opts)?
        .into_iter()
        .find(|s| s.id == id)
        .ok_or_else(|| HistoryError::NoStep(id.to_string()))
}

/// The experiment copy of the newest run that measured `sha` on this series' host:
/// (experiment name, its text, the name of the variant measured there).
pub fn experiment_of(
    conn: &Connection,
    key: &SeriesKey,
    sha: &str,
) -> Result<Option<(String, String, String)>, HistoryError> {
    conn.query_row(
        "SELECT r.experiment, r.experiment_toml, s.variant FROM runs r
         JOIN samples s ON s.run_key = r.key
         JOIN series se ON se.id = s.series_id
         WHERE s.commit_sha = ?1 AND s.host_id = ?2 AND se.metric = ?3 AND se.workload = ?4
           AND se.variant_key = ?5 AND r.kind = 'run' AND r.experiment_toml != ''
         ORDER BY r.created_utc DESC LIMIT 1",
        params![sha, key.host_id, key.metric, key.workload, key.variant_key],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )
    .map(Some)
    .or_else(|e| match e {
        rusqlite::Error::QueryReturnedNoRows => Ok(None),
        e => Err(sql("reading a run's experiment")(e)),
    })
}
