//! Test doubles for the run's failure paths, selected by hidden flags of `gapscope run`
//! (`--debug-corrupt-proofs VARIANT`, `--debug-worker noise|hang`) and handed on to each
//! `__worker`. They are no part of the experiment schema: an experiment file describes a
//! measurement, and these only make the paths a real failure takes testable without one.

/// What a worker process does before its rep.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WorkerDebug {
    /// Print lines that are not a result (library chatter and a broken result-like line)
    /// on stdout first: the runner must pass them through and still find the result.
    Noise,
    /// Start a child that holds the worker's pipes and never finishes, and wait for it:
    /// the rep timeout must kill the whole process group and fail the rep.
    Hang,
    /// Abort before the rep (as a GPU library can abort its process): the rep must fail
    /// with the worker's signal, and the run go on.
    Crash,
}

impl WorkerDebug {
    /// Acts before the worker's rep.
    pub fn act(self) {
        match self {
            WorkerDebug::Noise => {
                println!("CUDA init noise");
                println!("{{half a json");
            }
            WorkerDebug::Hang => {
                eprintln!("about to hang");
                let _ = std::process::Command::new("sleep").arg("600").status();
            }
            WorkerDebug::Crash => {
                eprintln!("about to abort");
                std::process::abort();
            }
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            WorkerDebug::Noise => "noise",
            WorkerDebug::Hang => "hang",
            WorkerDebug::Crash => "crash",
        }
    }
}

/// The test doubles of one run. [`Default`]: none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DebugHooks {
    /// Variants whose proofs are corrupted after proving, so that their reps fail
    /// verification and are recorded as failed.
    pub corrupt_proofs: Vec<String>,
    /// What each worker process does before its rep (`process = "per_rep"`).
    pub worker: Option<WorkerDebug>,
    /// Bytes each rep of a shared process allocates, touches and never frees: a leak
    /// the leak watch must flag (the soak test's control).
    pub leak_bytes_per_rep: u64,
    /// Refuse the stack sampler's perf events with this reason, as a machine that
    /// forbids them does: sampling must degrade to "unavailable".
    pub deny_profile: Option<String>,
    /// Each rep leaves a thread behind with a span of the rep's trace open, closed when
    /// the next rep starts: a span that closes after its rep was collected.
    pub late_span: bool,
}

/// The thread [`DebugHooks::late_span`] left, and how to let it close its span.
type LateThread = (std::sync::mpsc::Sender<()>, std::thread::JoinHandle<()>);
static LATE: std::sync::Mutex<Option<LateThread>> = std::sync::Mutex::new(None);

impl DebugHooks {
    /// At a rep's start: the span the previous rep left open closes now (the thread
    /// is waited for, so it has closed before this rep collects anything).
    pub fn release_late(&self) {
        let pending = LATE.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some((tx, h)) = pending {
            let _ = tx.send(());
            let _ = h.join();
        }
    }

    /// After a rep was collected: a thread opens `late_span` under its root and keeps it
    /// open until [`Self::release_late`].
    pub fn leave_late_span(&self, trace_id: u64) {
        if !self.late_span {
            return;
        }
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let h = std::thread::spawn(move || {
            let ctx = crate::trace::SpanContext {
                id: trace_id,
                trace: trace_id,
            };
            let id = crate::trace::enter_with_parent("late_span", Some(ctx));
            let _ = rx.recv();
            crate::trace::exit(id);
        });
        *LATE.lock().unwrap_or_else(|e| e.into_inner()) = Some((tx, h));
    }
}

impl DebugHooks {
    /// Leaks this hook's bytes (touched, so that they count in RSS); nothing by default.
    pub fn leak(&self) {
        if self.leak_bytes_per_rep > 0 {
            std::mem::forget(vec![1u8; self.leak_bytes_per_rep as usize]);
        }
    }
}

impl DebugHooks {
    /// How the stack sampler opens its events under these hooks.
    pub fn profile_opener(&self) -> crate::profile::Opener {
        match &self.deny_profile {
            Some(why) => crate::profile::Opener::Deny(why.clone()),
            None => crate::profile::Opener::Perf,
        }
    }

    /// Whether the proofs of `variant` are to be corrupted.
    pub fn corrupts(&self, variant: &str) -> bool {
        self.corrupt_proofs.iter().any(|v| v == variant)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_named_variants_are_corrupted() {
        let d = DebugHooks {
            corrupt_proofs: vec!["candidate".into()],
            ..DebugHooks::default()
        };
        assert!(d.corrupts("candidate"));
        assert!(!d.corrupts("baseline"));
        assert!(!DebugHooks::default().corrupts("candidate"));
    }
}
