//! `gapscope run --until-decided`: the run adds pairs of reps (one of each variant, in
//! the experiment's alternating order) until end to end and every span's self time on
//! the critical path is regressed, improved or equivalent
//! ([`crate::analysis::sequential`], on confidence sequences, so looking after every
//! pair costs no false alarms), or until the cap on reps or the wall-time budget is
//! spent. The runner walks its schedule as for any run, with the cap as its reps, and
//! asks [`Plan::before_slot`] before each slot whether to go on.
//!
//! The plan is kept in meta.json (`reps` is the cap, `until_decided` the budget and why
//! the run stopped), so that `--resume` continues the same loop.

use std::fmt;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Result;
use indicatif::ProgressBar;

use super::spec::{Experiment, Order};
use crate::analysis::sequential::{self, Progress};
use crate::analysis::{self, DiffOptions};
use crate::store::{self, Meta, RunData, RunRow, UntilDecidedMeta};

/// Most measured reps per variant when `--max-reps` is not given.
pub const DEFAULT_MAX_REPS: u32 = 50;
/// Fewest: the diff pairs reps from this many pairs on, and nothing is decided before.
pub const MIN_MAX_REPS: u32 = crate::stats::MIN_REPS_FOR_CLAIM as u32;

/// What the command line asked for. `None` fields: on a resume, what the run recorded;
/// on a new run, [`DEFAULT_MAX_REPS`] and no budget.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UntilDecided {
    pub max_reps: Option<u32>,
    pub budget: Option<Duration>,
}

/// A request that cannot be run as asked (the command line's exit status 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

/// Why a run of `--until-decided` stopped.
#[derive(Debug, Clone, PartialEq)]
pub enum Stop {
    /// Every watched row is regressed, improved or equivalent.
    Decided {
        pairs: usize,
        last: Option<Progress>,
    },
    /// The next pair would have ended past the budget.
    Budget {
        budget: Duration,
        pairs: usize,
        last: Option<Progress>,
    },
    /// The schedule's `max_reps` pairs have run.
    MaxReps {
        max_reps: u32,
        pairs: usize,
        last: Option<Progress>,
    },
}

impl Stop {
    pub fn decided(&self) -> bool {
        matches!(self, Stop::Decided { .. })
    }
}

impl fmt::Display for Stop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (last, pairs) = match self {
            Stop::Decided { pairs, last } => {
                write!(f, "decided after {pairs} pairs")?;
                return match last.as_ref().and_then(end_to_end) {
                    Some(e) => write!(f, ": {e}"),
                    None => Ok(()),
                };
            }
            Stop::Budget {
                budget,
                pairs,
                last,
            } => {
                write!(f, "stopped at the budget of {}", fmt_budget(*budget))?;
                (last, pairs)
            }
            Stop::MaxReps {
                max_reps,
                pairs,
                last,
            } => {
                write!(f, "stopped at --max-reps {max_reps}")?;
                (last, pairs)
            }
        };
        write!(f, " after {pairs} pairs: ")?;
        match last {
            Some(p) => {
                if let Some(e) = end_to_end(p) {
                    write!(f, "{e}; ")?;
                }
                let open = open_rows(p);
                if open.is_empty() {
                    write!(f, "no row to watch")?;
                } else {
                    let shown: Vec<&str> = open.iter().take(4).map(String::as_str).collect();
                    write!(f, "still open: {}", shown.join(", "))?;
                    if open.len() > 4 {
                        write!(f, " and {} more", open.len() - 4)?;
                    }
                }
                match p.pairs_left() {
                    Some(n) if n > 0 => write!(f, " (about {n} more pairs would decide)"),
                    _ => Ok(()),
                }
            }
            None => write!(f, "too few paired reps to compare"),
        }
    }
}

/// End to end as the sequence judges it: "prove (total) regressed [+1.2%, +5.0%]".
fn end_to_end(p: &Progress) -> Option<String> {
    let r = p.rows.first()?;
    let pct = |x: Option<f64>| x.map_or("?".into(), |v| format!("{:+.1}%", v * 100.0));
    Some(format!(
        "{} ({}) {} [{}, {}]",
        r.span,
        r.measure,
        r.verdict,
        pct(r.interval.lo),
        pct(r.interval.hi)
    ))
}

/// The watched rows not decided yet: "msm_h (critical_self)".
fn open_rows(p: &Progress) -> Vec<String> {
    p.rows
        .iter()
        .filter(|r| r.verdict == crate::analysis::Verdict::Inconclusive)
        .map(|r| format!("{} ({})", r.span, r.measure))
        .collect()
}

/// A budget as given on the command line: `90s`, `30m`, `1h30m`, `2h`; a bare number
/// is seconds.
pub fn parse_budget(s: &str) -> Result<Duration, String> {
    let bad = || {
        format!(
            "{s:?} is not a duration: give hours, minutes and seconds as 1h30m, 30m, 90s \
             (a bare number is seconds)"
        )
    };
    let t = s.trim();
    if t.is_empty() {
        return Err(bad());
    }
    if let Ok(secs) = t.parse::<u64>() {
        return positive(secs).ok_or_else(bad);
    }
    let mut total: u64 = 0;
    let mut num = String::new();
    let mut last_unit = 0u64;
    for c in t.chars() {
        if c.is_ascii_digit() {
            num.push(c);
            continue;
        }
        let unit = match c {
            'h' => 3600,
            'm' => 60,
            's' => 1,
            _ => return Err(bad()),
        };
        // Units in order (h, m, s), each once, each after its number.
        if num.is_empty() || (last_unit != 0 && unit >= last_unit) {
            return Err(bad());
        }
        let n: u64 = num.parse().map_err(|_| bad())?;
        total = n
            .checked_mul(unit)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(bad)?;
        num.clear();
        last_unit = unit;
    }
    if !num.is_empty() {
        return Err(bad());
    }
    positive(total).ok_or_else(bad)
}

/// `secs` as a budget: at least a second, at most a year.
fn positive(secs: u64) -> Option<Duration> {
    (1..=365 * 24 * 3600)
        .contains(&secs)
        .then(|| Duration::from_secs(secs))
}

/// A budget as people write it: `30m`, `1h30m`, `45s`.
pub fn fmt_budget(d: Duration) -> String {
    let s = d.as_secs();
    let (h, m, sec) = (s / 3600, (s % 3600) / 60, s % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if sec > 0 || out.is_empty() {
        out.push_str(&format!("{sec}s"));
    }
    out
}

/// The loop of one `--until-decided` run: its bounds, and what it has looked at so far.
#[derive(Debug)]
pub struct Plan {
    pub max_reps: u32,
    pub budget: Option<Duration>,
    started: Instant,
    /// The variants, in the schedule's order.
    names: Vec<String>,
    /// Progress lines on stderr (not under `--quiet`).
    progress: bool,
    /// Pairs (iterations run by both variants) at the last look.
    looked_at: usize,
    /// When the last look was, and the pairs then: the time of a pair.
    last_look: Option<(Instant, usize)>,
    last: Option<Progress>,
}

impl Plan {
    /// The plan of this run, `None` for a run of fixed reps. A resumed run continues its
    /// recorded plan (the command line's bounds replace the recorded ones); `exp`'s reps
    /// become the cap the run's meta.json recorded, so that the resume's checks compare
    /// like with like ([`Plan::record`] then sets the new cap).
    pub fn new(
        exp: &mut Experiment,
        asked: Option<&UntilDecided>,
        resume: Option<&Path>,
    ) -> Result<Option<Plan>> {
        let stored = match resume {
            Some(dir) => Some(store::read_meta(dir)?),
            None => None,
        };
        let recorded = stored.as_ref().and_then(|m| m.until_decided.as_ref());
        let (max_reps, budget) = match (asked, recorded, &stored) {
            (None, None, _) => return Ok(None),
            (Some(_), None, Some(m)) => {
                return Err(Refused(format!(
                    "--until-decided: {} is a run of a fixed {} reps per variant; resume it \
                     without --until-decided, or start a new run with `gapscope run \
                     EXPERIMENT --until-decided`",
                    resume.map(|d| d.display().to_string()).unwrap_or_default(),
                    m.reps
                ))
                .into())
            }
            (Some(a), None, None) => (a.max_reps.unwrap_or(DEFAULT_MAX_REPS), a.budget),
            (a, Some(r), Some(m)) => {
                exp.run.reps = m.reps;
                let a = a.cloned().unwrap_or_default();
                let max = a.max_reps.unwrap_or(m.reps);
                // Blocks of a new length would renumber the reps already run.
                if max != m.reps && exp.run.order == Order::Blocks {
                    return Err(Refused(format!(
                        "--max-reps {max}: a run of order = \"blocks\" keeps the cap it \
                         started with ({}), since another would lay its blocks out anew; \
                         resume it without --max-reps",
                        m.reps
                    ))
                    .into());
                }
                (max, a.budget.or(r.budget_s.map(Duration::from_secs)))
            }
            (_, Some(_), None) => unreachable!("a recorded plan comes from a stored meta"),
        };
        check_experiment(exp)?;
        Ok(Some(Plan {
            max_reps,
            budget,
            started: Instant::now(),
            names: exp.variants.iter().map(|v| v.name.clone()).collect(),
            progress: false,
            looked_at: 0,
            last_look: None,
            last: None,
        }))
    }

    /// Sets the cap as the run's reps, in the experiment the schedule is made from and in
    /// meta.json, and marks the run as one of `--until-decided`; `progress`: a line per
    /// pair on stderr.
    pub fn record(&mut self, exp: &mut Experiment, meta: &mut Meta, progress: bool) {
        self.progress = progress;
        exp.run.reps = self.max_reps;
        meta.reps = self.max_reps;
        meta.until_decided = Some(UntilDecidedMeta {
            budget_s: self.budget.map(|b| b.as_secs()),
            stopped: None,
        });
    }

    /// Whether the run stops before its next slot, given the reps run (`rows`): judged
    /// only when a pair has completed since the last look (the run folder `dir` is then
    /// read, and the progress line printed above `bar`). A run stops when every watched
    /// row is decided, or when one more pair, as long as the last one took, would end
    /// past the budget.
    pub fn before_slot(&mut self, rows: &[RunRow], dir: &Path, bar: &ProgressBar) -> Option<Stop> {
        let pairs = complete_pairs(rows, &self.names);
        if pairs <= self.looked_at {
            return None;
        }
        self.look(pairs, dir, bar);
        if self.last.as_ref().is_some_and(Progress::decided) {
            return Some(Stop::Decided {
                pairs,
                last: self.last.clone(),
            });
        }
        let budget = self.budget?;
        let now = Instant::now();
        // The time of a pair: since the previous look, per pair since then; at the
        // first look of this process, the last pair's reps as runs.csv has them.
        let per_pair = match self.last_look {
            Some((t, n)) if pairs > n => now.duration_since(t) / (pairs - n) as u32,
            _ => last_pair_wall(rows, &self.names),
        };
        self.last_look = Some((now, pairs));
        (now.duration_since(self.started) + per_pair > budget).then(|| Stop::Budget {
            budget,
            pairs,
            last: self.last.clone(),
        })
    }

    /// Why the run stopped when its schedule ran out: decided on its last pair, or at the
    /// cap.
    pub fn at_end(&mut self, rows: &[RunRow], dir: &Path, bar: &ProgressBar) -> Stop {
        let pairs = complete_pairs(rows, &self.names);
        if pairs > self.looked_at {
            self.look(pairs, dir, bar);
        }
        if self.last.as_ref().is_some_and(Progress::decided) {
            return Stop::Decided {
                pairs,
                last: self.last.clone(),
            };
        }
        Stop::MaxReps {
            max_reps: self.max_reps,
            pairs,
            last: self.last.clone(),
        }
    }

    fn look(&mut self, pairs: usize, dir: &Path, bar: &ProgressBar) {
        self.looked_at = pairs;
        let say = |l: &str| match (self.progress, bar.is_hidden()) {
            (false, _) => {}
            (true, true) => eprintln!("{l}"),
            (true, false) => bar.println(l),
        };
        match judge(dir) {
            Ok(Some(p)) => {
                say(&p.line());
                self.last = Some(p);
            }
            Ok(None) => {
                say(&format!(
                    "{pairs} pairs: nothing is decided before {MIN_MAX_REPS} pairs"
                ));
                self.last = None;
            }
            Err(e) => {
                say(&format!("{pairs} pairs: no comparison yet ({e})"));
                self.last = None;
            }
        }
    }
}

/// Refuses an experiment whose reps cannot be judged pair by pair.
fn check_experiment(exp: &Experiment) -> Result<(), Refused> {
    let n = exp.variants.len();
    if n != 2 {
        let names: Vec<&str> = exp.variants.iter().map(|v| v.name.as_str()).collect();
        return Err(Refused(format!(
            "--until-decided compares two variants pair by pair; experiment {:?} has {n} ({}). \
             Keep two variants in the file (or give two --cmd), or run it without \
             --until-decided and compare any two with `gapscope diff RUN_DIR --baseline A \
             --candidate B`",
            exp.name,
            names.join(", ")
        )));
    }
    if exp.run.order == Order::Sequential {
        return Err(Refused(format!(
            "--until-decided: experiment {:?} has order = \"sequential\", which runs every rep \
             of one variant before the other's, so no pair is complete before the end; set \
             order = \"counterbalanced\" (ABBA…) in its [run] table",
            exp.name
        )));
    }
    Ok(())
}

/// Iterations that every variant has run (measured, whatever their status).
fn complete_pairs(rows: &[RunRow], names: &[String]) -> usize {
    let per_variant = |name: &str| -> std::collections::HashSet<u32> {
        rows.iter()
            .filter(|r| !r.warmup && r.variant == name)
            .map(|r| r.iteration)
            .collect()
    };
    let mut sets = names.iter().map(|n| per_variant(n));
    let Some(first) = sets.next() else { return 0 };
    sets.fold(first, |acc, s| acc.intersection(&s).copied().collect())
        .len()
}

/// The wall time of the reps of the last iteration every variant has run.
fn last_pair_wall(rows: &[RunRow], names: &[String]) -> Duration {
    let measured = |name: &str| {
        rows.iter()
            .filter(move |r| !r.warmup && r.variant == name)
            .map(|r| r.iteration)
            .max()
    };
    let Some(last) = names.iter().map(|n| measured(n)).min().flatten() else {
        return Duration::ZERO;
    };
    let ns: u64 = (rows.iter())
        .filter(|r| !r.warmup && r.iteration == last && names.contains(&r.variant))
        .map(|r| r.wall_ns)
        .sum();
    Duration::from_nanos(ns)
}

/// The run folder's comparison so far, as the run's headline makes it, read on the
/// confidence sequences; `None` while it has too few pairs.
fn judge(dir: &Path) -> Result<Option<Progress>, String> {
    let data = RunData::load(dir).map_err(|e| e.to_string())?;
    let (b, c) = analysis::pick_variants(&data, None, None, None).map_err(|e| e.to_string())?;
    let opts = DiffOptions::default();
    let d = analysis::diff_runs(&data, &b, &data, &c, &opts).map_err(|e| e.to_string())?;
    Ok(sequential::progress(&d, &opts))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::sequential::WatchedRow;
    use crate::analysis::{Measure, Verdict};

    #[test]
    fn budgets_parse_as_people_write_them() {
        let s = |x: &str| parse_budget(x).map(|d| d.as_secs());
        assert_eq!(s("30m"), Ok(1800));
        assert_eq!(s("90s"), Ok(90));
        assert_eq!(s("1h30m"), Ok(5400));
        assert_eq!(s("2h5s"), Ok(7205));
        assert_eq!(s("45"), Ok(45));
        for bad in [
            "", "0", "0m", "m", "30x", "1m1h", "5m5m", "1.5h", "-3m", "30m1", "9999999h",
        ] {
            let e = parse_budget(bad).unwrap_err();
            assert!(e.contains("1h30m"), "{bad}: {e}");
        }
        assert_eq!(fmt_budget(Duration::from_secs(1800)), "30m");
        assert_eq!(fmt_budget(Duration::from_secs(5405)), "1h30m5s");
        assert_eq!(fmt_budget(Duration::from_secs(0)), "0s");
    }

    fn watched(span: &str, measure: Measure, verdict: Verdict, left: Option<usize>) -> WatchedRow {
        WatchedRow {
            span: span.into(),
            measure,
            verdict,
            interval: crate::analysis::Interval {
                lo: Some(0.02),
                hi: Some(0.05),
                level: 0.975,
            },
            pairs_left: left,
        }
    }

    #[test]
    fn the_stop_line_says_why_and_what_is_open() {
        let p = Progress {
            pairs: 12,
            level: 0.975,
            rows: vec![
                watched("prove", Measure::Total, Verdict::Regressed, None),
                watched(
                    "msm_h",
                    Measure::CriticalSelf,
                    Verdict::Inconclusive,
                    Some(6),
                ),
                watched(
                    "prep",
                    Measure::CriticalSelf,
                    Verdict::Inconclusive,
                    Some(3),
                ),
            ],
        };
        let mut all = p.clone();
        all.rows
            .iter_mut()
            .for_each(|r| r.verdict = Verdict::Equivalent);
        all.rows[0].verdict = Verdict::Regressed;
        let decided = Stop::Decided {
            pairs: 7,
            last: Some(all),
        };
        assert_eq!(
            decided.to_string(),
            "decided after 7 pairs: prove (total) regressed [+2.0%, +5.0%]"
        );
        assert!(decided.decided());
        let budget = Stop::Budget {
            budget: Duration::from_secs(1800),
            pairs: 12,
            last: Some(p.clone()),
        };
        assert_eq!(
            budget.to_string(),
            "stopped at the budget of 30m after 12 pairs: prove (total) regressed [+2.0%, +5.0%]; \
             still open: msm_h (critical_self), prep (critical_self) (about 6 more pairs \
             would decide)"
        );
        assert!(!budget.decided());
        let cap = Stop::MaxReps {
            max_reps: 50,
            pairs: 50,
            last: None,
        };
        assert_eq!(
            cap.to_string(),
            "stopped at --max-reps 50 after 50 pairs: too few paired reps to compare"
        );
    }

    fn row(variant: &str, iteration: u32, warmup: bool) -> RunRow {
        RunRow {
            variant: variant.into(),
            iteration,
            warmup,
            ..crate::store::RunRow::sample()
        }
    }

    #[test]
    fn a_pair_is_an_iteration_every_variant_ran() {
        let names = vec!["a".to_string(), "b".to_string()];
        let mut rows = vec![row("a", 0, true), row("b", 0, true)];
        assert_eq!(complete_pairs(&rows, &names), 0);
        rows.extend([row("a", 0, false), row("b", 0, false), row("b", 1, false)]);
        assert_eq!(complete_pairs(&rows, &names), 1);
        rows.push(row("a", 1, false));
        assert_eq!(complete_pairs(&rows, &names), 2);
        for (i, r) in rows.iter_mut().enumerate() {
            r.wall_ns = 1_000 * (i as u64 + 1);
        }
        // Iteration 1: rows 5 (b) and 6 (a).
        assert_eq!(last_pair_wall(&rows, &names), Duration::from_micros(11));
    }
}
