//! The experiment file's words: names that name folders and cells, revisions, TOML
//! errors with their line and column, and the checks of one variant that need no more
//! than the variant (a command workload's knobs, profile rates).

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
/// do not apply to a program gapscope did not build. `prover_knobs`: each prover knob
/// and whether the variant sets it; `command` and `counters` as resolved.
pub(super) fn check_command_variant(
    name: &str,
    prover_knobs: &[(&str, bool)],
    command: Option<&[String]>,
    counters: CounterMode,
) -> Result<(), String> {
    if let Some((k, _)) = prover_knobs.iter().find(|(_, set)| *set) {
        return Err(format!(
            "variant {name:?}: {k} is a knob of the built-in prover; a command workload runs \
             its program as given (put a difference between variants in the program's \
             arguments or its revision instead)"
        ));
    }
    if command.is_some_and(|c| c.first().is_none_or(|p| p.is_empty())) {
        return Err(format!(
            "variant {name:?}: command must name a program: command = [\"./bench\", \"--fast\"]"
        ));
    }
    if counters == CounterMode::Emulated {
        return Err(format!(
            "variant {name:?}: counters = \"emulated\" is not available for a command \
             workload; use true (perf events of the program and its threads) or false"
        ));
    }
    Ok(())
}

/// `profile_hz` in range (the run's and the variant's), and only where sampling is on
/// (`sampling`: the variant's `profile`, else the run's).
pub(super) fn check_profile(
    name: &str,
    run_hz: Option<u32>,
    variant_hz: Option<u32>,
    sampling: bool,
) -> Result<(), String> {
    let max = crate::profile::MAX_HZ;
    for (hz, at) in [(run_hz, "run.profile_hz"), (variant_hz, "profile_hz")] {
        if hz.is_some_and(|hz| hz == 0 || hz > max) {
            return Err(format!(
                "variant {name:?}: {at} = {} is out of range: use 1..={max} (samples per \
                 second of each thread's CPU time; default {})",
                hz.unwrap_or_default(),
                crate::profile::DEFAULT_HZ
            ));
        }
    }
    if variant_hz.is_some() && !sampling {
        return Err(format!(
            "variant {name:?}: profile_hz is set but sampling is off: add profile = true to \
             the variant (or to [run]), or remove profile_hz"
        ));
    }
    Ok(())
}

/// The knobs of `backend = "cuda"` as a variant resolved them; `prep_threads` and `gpus`
/// are `None` where the variant set them to 0.
pub(super) struct CudaKnobs {
    /// The variant sets any of them.
    pub any_set: bool,
    pub backend: &'static str,
    pub cuda: bool,
    pub streams: u32,
    pub msm_threads: u32,
    pub h_threads: u32,
    pub prep_threads: Option<u32>,
    pub gpus: Option<u32>,
}

/// The cuda backend's knobs: only on that backend, each within what it takes.
pub(super) fn check_cuda_knobs(name: &str, k: &CudaKnobs) -> Result<(), String> {
    if k.any_set && !k.cuda {
        return Err(format!(
            "variant {name:?}: streams, gpus, msm_threads, ntt, h_threads and prep_threads are \
             knobs of backend = \"cuda\" (this variant uses {})",
            k.backend
        ));
    }
    if !matches!(k.streams, 1 | 2) {
        return Err(format!(
            "variant {name:?}: streams = {} is not valid: use 1 or 2",
            k.streams
        ));
    }
    if !matches!(k.msm_threads, 1 | 4 | 8) {
        return Err(format!(
            "variant {name:?}: msm_threads = {} is not valid: use 1, 4 or 8",
            k.msm_threads
        ));
    }
    if !matches!(k.h_threads, 1 | 2) {
        return Err(format!(
            "variant {name:?}: h_threads = {} is not valid: use 1 or 2",
            k.h_threads
        ));
    }
    match k.prep_threads {
        Some(p) if p <= 256 => {}
        p => {
            return Err(format!(
                "variant {name:?}: prep_threads = {} is not valid: use 1..=256, or leave it out \
                 for half the cores",
                p.unwrap_or(0)
            ))
        }
    }
    match k.gpus {
        Some(g) if g <= 64 => {}
        g => {
            return Err(format!(
                "variant {name:?}: gpus = {} is not valid: use 1..=64, or leave it out for \
                 every GPU",
                g.unwrap_or(0)
            ))
        }
    }
    Ok(())
}
