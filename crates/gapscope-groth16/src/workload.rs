//! The prover as a [`Workload`], for its own binary (`gapscope-groth16-worker`): built
//! from the settings the harness sends (the circuit, its size, the batch and the params
//! cache), with a variant's knobs as [`crate::knobs::to_knobs`] writes them. Params are
//! loaded from the cache (made there first where missing, before any rep) once per
//! gadget; a GPU backend is set up once (its verified warm-up proof, [`crate::setup`])
//! before its first rep, as the harness sets up its own; each rep's circuits and backend
//! are made outside the spans, as in the harness's own process.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use gapscope_workload::phases::{PhaseSpec, WorkloadKind};
use gapscope_workload::{Knobs, Rep, Workload};

use crate::knobs::{from_knobs, to_knobs};
use crate::paramgen::ParamGen;
use crate::rep::Groth16Rep;
use crate::{BackendKind, CircuitInstance, CircuitKind, Gadget, Groth16Params};

/// What the harness sends a prover binary (`--workload` JSON).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Groth16Settings {
    pub circuit: CircuitKind,
    pub log2_constraints: u32,
    pub batch: u32,
    /// The params cache (the harness's `--params-dir`).
    pub params_dir: PathBuf,
}

/// The prover, serving reps in a binary of its own.
pub struct Groth16Workload {
    settings: Groth16Settings,
    /// Per gadget: its params and the file they were read from.
    params: Mutex<HashMap<Gadget, (Arc<Groth16Params>, PathBuf)>>,
    /// The backends (with the gadget of their warm-up) set up so far.
    set_up: Mutex<HashSet<(BackendKind, Gadget)>>,
}

impl Groth16Workload {
    /// Checks the settings; the error says what is wrong.
    pub fn new(settings: Groth16Settings) -> Result<Groth16Workload, String> {
        if settings.batch == 0 {
            return Err("batch must be at least 1".into());
        }
        CircuitInstance::new(settings.circuit, settings.log2_constraints, Gadget::Lc, 0)?;
        Ok(Groth16Workload {
            settings,
            params: Mutex::new(HashMap::new()),
            set_up: Mutex::new(HashSet::new()),
        })
    }

    /// The params of `gadget`, from the cache (made there where missing).
    fn params(&self, gadget: Gadget) -> Result<(Arc<Groth16Params>, PathBuf), String> {
        let mut by = self.params.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = by.get(&gadget) {
            return Ok(p.clone());
        }
        let s = &self.settings;
        let c = CircuitInstance::new(s.circuit, s.log2_constraints, gadget, 0)?;
        let key = crate::params::ParamsKey::for_circuit(&c, s.circuit.as_str(), s.log2_constraints)
            .map_err(|e| e.to_string())?;
        let generator = ParamGen::from_env()?;
        let (p, origin) = crate::params::load_or_generate(&s.params_dir, &c, &key, generator)
            .map_err(|e| format!("params: {e}"))?;
        let p = (Arc::new(p), origin.path);
        by.insert(gadget, p.clone());
        Ok(p)
    }

    /// Sets backend `kind` up once (a GPU backend's verified warm-up proof), outside the
    /// spans of any rep; an error fails the rep that asked, with the reason.
    fn set_up(
        &self,
        kind: BackendKind,
        gadget: Gadget,
        params: &Groth16Params,
        file: PathBuf,
    ) -> Result<(), String> {
        let mut done = self.set_up.lock().unwrap_or_else(|e| e.into_inner());
        if done.contains(&(kind, gadget)) {
            return Ok(());
        }
        let s = &self.settings;
        let c = CircuitInstance::new(s.circuit, s.log2_constraints, gadget, 0)?;
        crate::setup(kind, &[file], params, c)
            .map_err(|e| format!("{} setup: {e}", kind.as_str()))?;
        done.insert((kind, gadget));
        Ok(())
    }
}

impl Workload for Groth16Workload {
    fn kind(&self) -> WorkloadKind {
        WorkloadKind::Groth16
    }

    fn phases(&self) -> PhaseSpec {
        crate::spans::phase_spec()
    }

    fn resolve_knobs(&self, knobs: &Knobs) -> Result<Knobs, String> {
        let (backend, gadget, options) = from_knobs(knobs)?;
        Ok(to_knobs(backend, gadget, &options))
    }

    fn prepare(&self, knobs: &Knobs, _index: u64) -> Result<Box<dyn Rep>, String> {
        let (backend_kind, gadget, options) = from_knobs(knobs)?;
        let (params, file) = self.params(gadget)?;
        self.set_up(backend_kind, gadget, &params, file)?;
        let backend = crate::backend(backend_kind).map_err(|e| e.to_string())?;
        let s = &self.settings;
        let circuits: Vec<CircuitInstance> = (0..u64::from(s.batch))
            .map(|i| CircuitInstance::new(s.circuit, s.log2_constraints, gadget, i))
            .collect::<Result<_, _>>()?;
        let inputs = circuits
            .iter()
            .map(CircuitInstance::public_inputs)
            .collect();
        Ok(Box::new(Groth16Rep::new(
            Some(backend),
            backend_kind,
            params,
            circuits,
            inputs,
            options,
            false,
        )))
    }
}
