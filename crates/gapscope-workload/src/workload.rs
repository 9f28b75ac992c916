//! The seam between gapscope's rep lifecycle and an in-process workload.
//!
//! The harness owns a rep's lifecycle: it makes the rep's inputs through
//! [`Workload::prepare`] outside every measured window, opens its windows (GPU telemetry,
//! the emulator's instrumentation, the stack sampler), calls [`Rep::run`], waits for what
//! the rep left running ([`Rep::settle`]), closes the windows, files the spans of the
//! trace `run` returned, and only then asks the rep to check what it made
//! ([`Rep::check`]), so that a verification never lands inside a measurement. A workload
//! says what its run folder calls its phases ([`Workload::phases`]) and which knobs its
//! variants may set ([`Workload::check_knobs`]); it records its spans through
//! `gapscope-trace` and knows nothing else of the harness.

use std::collections::BTreeMap;

use crate::phases::{PhaseSpec, WorkloadKind};

/// A variant's knobs for its workload: name → value, as the experiment file wrote them
/// (strings, numbers and booleans as text).
pub type Knobs = BTreeMap<String, String>;

/// A workload the harness runs rep after rep in one of its processes.
pub trait Workload: Send + Sync {
    /// What meta.json's `workload.kind` says the run measured.
    fn kind(&self) -> WorkloadKind;
    /// The names of its span tree that tables and charts look up (meta.json `phases`).
    fn phases(&self) -> PhaseSpec;
    /// A variant's knobs with every default filled in, as meta.json records them (so a
    /// diff's title names what differs between two variants, the defaults included);
    /// refuses them before anything runs: unknown names (with the known ones listed) and
    /// values out of range, in a message that says what to write.
    fn resolve_knobs(&self, knobs: &Knobs) -> Result<Knobs, String>;
    /// One rep's inputs for a variant with `knobs`, made outside every measured window;
    /// `index` tells reps apart where inputs should differ from rep to rep.
    fn prepare(&self, knobs: &Knobs, index: u64) -> Result<Box<dyn Rep>, String>;
}

/// One prepared rep.
pub trait Rep: Send {
    /// The measured work, every span of it under one root span opened here; returns
    /// that root's trace id, whose spans the harness files under the rep.
    fn run(&mut self) -> u64;
    /// Waits for work the rep started that still belongs to it (buffers freed on a
    /// background thread, say); called inside the measured windows, after `run`.
    fn settle(&mut self) {}
    /// Checks what the rep made, outside every window (a proof verified, a digest
    /// recomputed another way).
    fn check(self: Box<Self>) -> Checked;
}

/// What a rep's check found, for runs.csv (`status`, `checked`, `outputs`, `error`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Checked {
    /// The rep succeeded and what it made passed its check.
    pub ok: bool,
    /// Its outputs were checked (a rep can succeed with nothing to check).
    pub checked: bool,
    /// How many outputs it made (proofs, digests).
    pub outputs: u32,
    /// Why it failed (empty when `ok`).
    pub error: String,
}

impl Checked {
    /// `outputs` made and every one checked.
    pub fn passed(outputs: u32) -> Checked {
        Checked {
            ok: true,
            checked: true,
            outputs,
            error: String::new(),
        }
    }

    /// The rep failed, or what it made failed its check.
    pub fn failed(outputs: u32, error: impl Into<String>) -> Checked {
        Checked {
            ok: false,
            checked: false,
            outputs,
            error: error.into(),
        }
    }
}

/// The knobs of `knobs` that are not in `known`, refused with the known ones listed
/// (for [`Workload::check_knobs`]).
pub fn refuse_unknown(workload: &str, knobs: &Knobs, known: &[&str]) -> Result<(), String> {
    match knobs.keys().find(|k| !known.contains(&k.as_str())) {
        None => Ok(()),
        Some(k) => Err(format!(
            "knob {k:?} is not one of the {workload} workload's ({}); check its spelling",
            known.join(", ")
        )),
    }
}
