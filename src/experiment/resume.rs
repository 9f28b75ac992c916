//! What `gapscope run --resume` checks before it adds a rep to a run folder: that the
//! folder's experiment copy still describes the run its meta.json recorded, that the
//! params the first reps were proved with are the ones this process loads (by sha256),
//! and where the continued run starts (a warm-up first, as the run itself began).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

use super::schedule::Slot;
use super::setup::ParamsOrigin;
use super::spec::Experiment;
#[cfg(feature = "groth16")]
use crate::prover::params;
use crate::store::{self, Meta, RunRow};

/// The experiment to run (with its text, as copied into the run folder) and the run
/// folder to resume, if any: `resume`'s own copy of the experiment when given.
pub fn load_experiment(
    exp_path: Option<&Path>,
    resume: Option<&Path>,
) -> Result<(Experiment, String, Option<PathBuf>)> {
    Ok(match (resume, exp_path) {
        (Some(dir), _) => {
            let copy = dir.join(store::EXPERIMENT_COPY);
            if std::fs::symlink_metadata(&copy).is_err() {
                bail!(
                    "{} is not a run folder to resume (no {})",
                    dir.display(),
                    store::EXPERIMENT_COPY
                );
            }
            let (e, t) = Experiment::load_copy(dir, store::EXPERIMENT_COPY)?;
            (e, t, Some(dir.to_path_buf()))
        }
        (None, Some(p)) => {
            let (e, t) = Experiment::load(p)?;
            (e, t, None)
        }
        (None, None) => bail!("give an experiment file, or --resume RUN_DIR"),
    })
}

/// Refuses a resume whose experiment copy no longer matches meta.json, naming each
/// difference. `fresh` is the meta a new run of the copy would start with, with the
/// copy's hash.
pub fn check_experiment(dir: &Path, stored: &Meta, fresh: &Meta) -> Result<()> {
    // The fresh meta's paths as the folder writes them (a variant's command that names
    // the temporary folder is recorded as `$TMPDIR/…`).
    let fresh = match &stored.paths {
        Some(p) => store::paths::as_written(
            dir,
            &Meta {
                paths: Some(p.clone()),
                ..fresh.clone()
            },
        ),
        None => fresh.clone(),
    };
    let diffs = store::resume_mismatch(stored, &fresh);
    if !diffs.is_empty() {
        bail!(
            "{} cannot be resumed: its {} no longer matches the run its {} recorded:\n  {}\n\
             Restore the experiment copy, or start a new run of the edited experiment \
             (`gapscope run {}`)",
            dir.display(),
            store::EXPERIMENT_COPY,
            store::META,
            diffs.join("\n  "),
            dir.join(store::EXPERIMENT_COPY).display()
        );
    }
    Ok(())
}

/// The params meta.json recorded for the run.
#[cfg(feature = "groth16")]
fn recorded(meta: &Meta) -> Vec<ParamsOrigin> {
    meta.params
        .iter()
        .filter_map(|v| serde_json::from_value(v.clone()).ok())
        .collect()
}

/// Refuses a resume whose params are not in `params_dir`: a resume never makes params,
/// since new ones (random) would not be those the run's first reps were proved with.
pub fn check_params_cached(dir: &Path, meta: &Meta, params_dir: &Path) -> Result<()> {
    // Params are the prover's: a run that recorded some ran it, and this build cannot.
    #[cfg(not(feature = "groth16"))]
    if !meta.params.is_empty() {
        let _ = params_dir;
        bail!(
            "{} cannot be resumed by this gapscope: the run proved with the built-in \
             Groth16 prover, which this build lacks (cargo feature `groth16`); rebuild \
             with default features (`cargo install --path .`)",
            dir.display()
        );
    }
    #[cfg(feature = "groth16")]
    for o in recorded(meta) {
        if !params::cached(params_dir, &o.key) {
            bail!(
                "{} cannot be resumed here: its params {}{} are not in {}. Pass --params-dir \
                 with the params folder the run used (a resume never makes new params: they \
                 would differ from those its first reps were proved with)",
                dir.display(),
                o.path.display(),
                o.sha256
                    .as_deref()
                    .map(|s| format!(" (sha256 {}…)", &s[..12.min(s.len())]))
                    .unwrap_or_default(),
                params_dir.display()
            );
        }
    }
    Ok(())
}

/// Refuses params that were not loaded from the cache, or whose sha256 differs from the
/// one meta.json recorded.
pub fn check_params_match(dir: &Path, meta: &Meta, loaded: &[ParamsOrigin]) -> Result<()> {
    // No params can have been loaded without the prover.
    #[cfg(not(feature = "groth16"))]
    let _ = (dir, meta, loaded);
    #[cfg(feature = "groth16")]
    for o in recorded(meta) {
        let Some(now) = loaded
            .iter()
            .find(|l| l.key.shape_digest == o.key.shape_digest)
        else {
            continue;
        };
        if now.source != "loaded" {
            bail!(
                "{} cannot be resumed: its params {} were not loaded from the cache ({}), so \
                 they are not those its first reps were proved with",
                dir.display(),
                o.path.display(),
                now.source
            );
        }
        if let (Some(a), Some(b)) = (&o.sha256, &now.sha256) {
            if a != b {
                bail!(
                    "{} cannot be resumed: params {} have sha256 {}…, the run was proved with \
                     {}…; pass --params-dir with the params folder the run used",
                    dir.display(),
                    now.path.display(),
                    &b[..12.min(b.len())],
                    &a[..12.min(a.len())]
                );
            }
        }
    }
    Ok(())
}

/// The slots a resumed run still has to run. In a shared process whose next slot is a
/// measured rep, a warm-up of that rep's variant comes first (recorded with
/// `warmup = true`, under a rep number past the schedule): the process is new, and its
/// first rep would fault in the pages the killed process had warmed.
pub fn remaining(
    slots: &[Slot],
    done: &[RunRow],
    variant_names: &[String],
    warm_up_first: bool,
) -> Vec<Slot> {
    let done_reps: HashSet<u32> = done.iter().map(|r| r.rep).collect();
    let mut todo: Vec<Slot> = slots
        .iter()
        .copied()
        .filter(|s| !done_reps.contains(&s.rep))
        .collect();
    if let Some(first) = todo.first().copied() {
        if warm_up_first && !done.is_empty() && !first.warmup {
            let next_rep = done
                .iter()
                .map(|r| r.rep + 1)
                .chain([slots.len() as u32])
                .max()
                .unwrap_or(0);
            let name = variant_names.get(first.variant).map(String::as_str);
            let iteration = done
                .iter()
                .filter(|r| r.warmup && Some(r.variant.as_str()) == name)
                .count() as u32;
            todo.insert(
                0,
                Slot {
                    rep: next_rep,
                    variant: first.variant,
                    iteration,
                    warmup: true,
                },
            );
        }
    }
    todo
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::spec::Order;

    fn rows(slots: &[Slot], n: usize) -> Vec<RunRow> {
        slots[..n]
            .iter()
            .map(|s| {
                let mut r = RunRow::sample();
                r.rep = s.rep;
                r.variant = ["a", "b"][s.variant].into();
                r.warmup = s.warmup;
                r.iteration = s.iteration;
                r
            })
            .collect()
    }

    #[test]
    fn a_resume_in_a_shared_process_warms_up_before_its_first_measured_rep() {
        let slots = crate::experiment::schedule::schedule(2, 1, 3, Order::Interleaved, 5);
        let done = rows(&slots, 4);
        let names = vec!["a".to_string(), "b".to_string()];
        let todo = remaining(&slots, &done, &names, true);
        assert!(todo[0].warmup, "{todo:?}");
        assert_eq!(todo[0].rep as usize, slots.len());
        assert_eq!(todo[0].variant, slots[4].variant);
        assert_eq!(todo[0].iteration, 1, "the variant's second warm-up");
        assert_eq!(&todo[1..], &slots[4..]);
        // Resumed again after that warm-up and one more rep: a new rep number.
        let mut done2 = done.clone();
        let mut w = RunRow::sample();
        w.rep = todo[0].rep;
        w.variant = "a".into();
        w.warmup = true;
        done2.push(w);
        done2.extend(rows(&slots[4..], 1));
        let todo2 = remaining(&slots, &done2, &names, true);
        assert_eq!(todo2[0].rep as usize, slots.len() + 1);
        // Per-rep processes, a fresh run, or a resume before the schedule's warm-ups: none.
        assert_eq!(remaining(&slots, &done, &names, false), slots[4..].to_vec());
        assert_eq!(remaining(&slots, &[], &names, true), slots.to_vec());
        assert_eq!(
            remaining(&slots, &rows(&slots, 1), &names, true),
            slots[1..].to_vec()
        );
    }
}
