//! One rep of the prover behind gapscope-workload's [`Rep`]: a batch proved with a
//! backend (or synthesised alone), what it left running awaited, then every proof
//! verified. Made by the harness in its own process, or by [`crate::workload`] in a
//! workload binary (`gapscope-groth16-worker`).

use gapscope_workload::{Checked, Rep};

use crate::{CircuitInstance, ProveOptions};

/// One rep of the prover: a batch proved (or synthesised alone), background drops
/// awaited, then every proof verified (every constraint checked where no proof was
/// made).
pub struct Groth16Rep {
    backend: Option<Box<dyn crate::Backend>>,
    backend_kind: crate::BackendKind,
    params: std::sync::Arc<crate::Groth16Params>,
    circuits: Vec<CircuitInstance>,
    inputs: Vec<Vec<crate::Scalar>>,
    options: ProveOptions,
    /// Debug hook: the proofs are corrupted after proving, so the rep fails its check.
    corrupt: bool,
    made: Option<Made>,
}

impl Groth16Rep {
    /// A rep of `circuits` (their public `inputs` beside) with `params`, proved by
    /// `backend` (`None`: synthesised alone, `backend_kind` naming whose synthesis);
    /// `corrupt` spoils the proofs after proving (a test double: the check must fail).
    pub fn new(
        backend: Option<Box<dyn crate::Backend>>,
        backend_kind: crate::BackendKind,
        params: std::sync::Arc<crate::Groth16Params>,
        circuits: Vec<CircuitInstance>,
        inputs: Vec<Vec<crate::Scalar>>,
        options: ProveOptions,
        corrupt: bool,
    ) -> Groth16Rep {
        Groth16Rep {
            backend,
            backend_kind,
            params,
            circuits,
            inputs,
            options,
            corrupt,
            made: None,
        }
    }
}

impl Rep for Groth16Rep {
    fn run(&mut self) -> u64 {
        let circuits = std::mem::take(&mut self.circuits);
        let (trace, made) = match &self.backend {
            Some(backend) => {
                let out = crate::prove_batch(
                    backend.as_ref(),
                    &self.params,
                    circuits,
                    self.options,
                    &mut rand::rngs::OsRng,
                );
                (out.trace, Made::Proofs(out.result))
            }
            None => {
                let out = crate::synthesize_batch(self.backend_kind, circuits);
                (out.trace, Made::Assignments(out.result))
            }
        };
        self.made = Some(made);
        trace
    }

    fn settle(&mut self) {
        crate::dropper::wait_idle();
    }

    fn check(self: Box<Self>) -> Checked {
        match self.made {
            None => Checked::failed(0, "the rep made nothing"),
            // No proof to verify: every constraint of every assignment is checked instead.
            Some(Made::Assignments(Ok(assignments))) => {
                match assignments.iter().enumerate().find_map(|(i, a)| {
                    a.check_satisfied()
                        .err()
                        .map(|e| format!("circuit {i}: {e}"))
                }) {
                    None => Checked::passed(0),
                    Some(e) => Checked::failed(0, format!("synthesis check failed: {e}")),
                }
            }
            Some(Made::Assignments(Err(e))) => Checked::failed(0, e.to_string()),
            Some(Made::Proofs(Ok(mut proofs))) => {
                if self.corrupt {
                    for p in proofs.iter_mut() {
                        p.a = p.c;
                    }
                }
                let n = proofs.len() as u32;
                match crate::verify_all(&self.params, &proofs, &self.inputs) {
                    Ok(()) => Checked::passed(n),
                    Err(e) => Checked::failed(n, format!("verification failed: {e}")),
                }
            }
            Some(Made::Proofs(Err(e))) => Checked::failed(0, e.to_string()),
        }
    }
}

/// What a rep made: proofs, or assignments where synthesis ran alone.
enum Made {
    Proofs(Result<Vec<crate::Groth16Proof>, crate::ProverError>),
    Assignments(Result<Vec<crate::Assignment>, crate::ProverError>),
}
