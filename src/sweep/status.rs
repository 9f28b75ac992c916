//! Every cell's state: its run folder's progress (measured reps of scheduled, finished
//! or not) beside what the scheduler says of its task.

use std::path::PathBuf;

use serde::Serialize;

use super::{cell_run_folders, Manifest, SweepDir};
use crate::store::{RepStatus, RunData, RunProgress};

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CellStatus {
    pub index: usize,
    pub label: String,
    /// "pending" (no folder yet), "partial", "done", "conflict" (two folders) or
    /// "unreadable".
    pub folder: String,
    pub measured: usize,
    pub scheduled: usize,
    pub failed_reps: usize,
    pub run_dir: Option<PathBuf>,
    /// The scheduler's word for the task, where one was asked.
    pub scheduler: Option<String>,
    pub problem: Option<String>,
}

impl CellStatus {
    pub fn done(&self) -> bool {
        self.folder == "done"
    }
}

/// The state of every cell of the sweep folder from its folders alone.
pub fn folder_states(sweep: &SweepDir, manifest: &Manifest) -> Vec<CellStatus> {
    manifest
        .cells
        .iter()
        .map(|c| {
            let mut s = CellStatus {
                index: c.index,
                label: c.label.clone(),
                folder: "pending".into(),
                measured: 0,
                scheduled: 0,
                failed_reps: 0,
                run_dir: None,
                scheduler: None,
                problem: None,
            };
            let folders = cell_run_folders(&sweep.cell_dir(c.index));
            if folders.len() > 1 {
                s.folder = "conflict".into();
                s.problem = Some(format!("{} run folders", folders.len()));
                return s;
            }
            let Some(dir) = folders.into_iter().next() else {
                return s;
            };
            match RunData::load(&dir) {
                Ok(data) => {
                    let p = RunProgress::of(&data);
                    s.measured = p.measured;
                    s.scheduled = p.scheduled;
                    s.failed_reps = data
                        .runs
                        .iter()
                        .filter(|r| !r.warmup && r.status != RepStatus::Ok)
                        .count();
                    s.folder = if p.completed { "done" } else { "partial" }.into();
                }
                Err(e) => {
                    s.folder = "unreadable".into();
                    s.problem = Some(e.to_string());
                }
            }
            s.run_dir = Some(dir);
            s
        })
        .collect()
}

/// A table of the states, one line per cell, and a count per state.
pub fn render(states: &[CellStatus]) -> String {
    let mut out = format!(
        "{:>5}  {:<10} {:<12} {:>9}  {}\n",
        "cell", "folder", "scheduler", "reps", "axes"
    );
    for s in states {
        let reps = if s.scheduled > 0 {
            format!("{}/{}", s.measured, s.scheduled)
        } else {
            "-".into()
        };
        out.push_str(&format!(
            "{:>5}  {:<10} {:<12} {:>9}  {}{}\n",
            s.index,
            s.folder,
            s.scheduler.as_deref().unwrap_or("-"),
            reps,
            s.label,
            s.problem
                .as_deref()
                .map(|p| format!("  ({p})"))
                .unwrap_or_default()
        ));
    }
    let mut counts: std::collections::BTreeMap<&str, usize> = Default::default();
    for s in states {
        *counts.entry(s.folder.as_str()).or_default() += 1;
    }
    let summary: Vec<String> = counts.iter().map(|(k, n)| format!("{n} {k}")).collect();
    out.push_str(&format!("{} cells: {}\n", states.len(), summary.join(", ")));
    out
}
