//! The experiment file's words: names that name folders and cells, revisions, TOML
//! errors with their line and column, and the checks of one variant that need no more
//! than the variant (a command workload's knobs, profile rates).

use super::spec::{ResolvedVariant, RunPolicy, Variant};
use crate::counters::CounterMode;

/// The toml crate's message carries line/column and a caret; keep it, and add the
/// valid choices where serde gave them.
pub(super) fn describe_toml_error(_text: &str, err: &toml::de::Error) -> String {
    let mut msg = err.to_string();
    if let Some(span) = err.span() {
        let (line, col) = line_col(_text, span.start);
        if !msg.contains("line") {
            msg = format!("line {line}, column {col}: {msg}");
        }
    }
    msg.trim_end().to_string()
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.len() - before.rfind('\n').map(|p| p + 1).unwrap_or(0) + 1;
    (line, col)
}

/// Experiment and variant names name folders, CSV cells and table columns: the rule of
/// [`crate::fsx::check_name`], which the store applies again to names read back from a
/// run folder.
pub(super) fn check_name(what: &str, name: &str, why: &str) -> Result<(), String> {
    crate::fsx::check_name(what, name, why)
}

/// A variant's `rev` names a revision; `repo` goes with a `rev`.
pub(super) fn check_rev(name: &str, rev: Option<&str>, has_repo: bool) -> Result<(), String> {
    match rev {
        Some(r) if r.trim().is_empty() || r.starts_with('-') => Err(format!(
            "variant {name:?}: rev = {r:?} is not a revision: give a commit id, tag or branch"
        )),
        None if has_repo => Err(format!(
            "variant {name:?}: repo is the repository of a `rev`; add rev = \"COMMIT\" (or remove repo)"
        )),
        _ => Ok(()),
    }
}

/// A variant of a `command = […]` workload may set `telemetry`, `counters` (perf
/// events or none) and `profile` (the program's threads are sampled); the prover's knobs
/// do not apply to a program gapscope did not build.
pub(super) fn check_external_variant(v: &Variant, r: &ResolvedVariant) -> Result<(), String> {
    let prover_knobs = [
        ("drop", v.drop.is_some()),
        ("gadget", v.gadget.is_some()),
        ("host_memory", v.host_memory.is_some()),
        ("backend", v.backend.is_some()),
        ("streams", v.streams.is_some()),
        ("gpus", v.gpus.is_some()),
        ("msm_threads", v.msm_threads.is_some()),
        ("ntt", v.ntt.is_some()),
        ("h_threads", v.h_threads.is_some()),
        ("prep_threads", v.prep_threads.is_some()),
    ];
    if let Some((k, _)) = prover_knobs.iter().find(|(_, set)| *set) {
        return Err(format!(
            "variant {:?}: {k} is a knob of the built-in prover; a command workload runs its \
             program as given (put a difference between variants in the program's \
             arguments or its revision instead)",
            v.name
        ));
    }
    if r.command
        .as_ref()
        .is_some_and(|c| c.first().is_none_or(|p| p.is_empty()))
    {
        return Err(format!(
            "variant {:?}: command must name a program: command = [\"./bench\", \"--fast\"]",
            v.name
        ));
    }
    if r.counters == CounterMode::Emulated {
        return Err(format!(
            "variant {:?}: counters = \"emulated\" is not available for a command workload; \
             use true (perf events of the program and its threads) or false",
            v.name
        ));
    }
    Ok(())
}

/// `profile_hz` in range, and only where sampling is on.
pub(super) fn check_profile(v: &Variant, run: &RunPolicy) -> Result<(), String> {
    let max = crate::profile::MAX_HZ;
    for (hz, at) in [
        (run.profile_hz, "run.profile_hz"),
        (v.profile_hz, "profile_hz"),
    ] {
        if hz.is_some_and(|hz| hz == 0 || hz > max) {
            return Err(format!(
                "variant {:?}: {at} = {} is out of range: use 1..={max} (samples per second \
                 of each thread's CPU time; default {})",
                v.name,
                hz.unwrap_or_default(),
                crate::profile::DEFAULT_HZ
            ));
        }
    }
    if v.profile_hz.is_some() && !v.profile.unwrap_or(run.profile) {
        return Err(format!(
            "variant {:?}: profile_hz is set but sampling is off: add profile = true to the \
             variant (or to [run]), or remove profile_hz",
            v.name
        ));
    }
    Ok(())
}
