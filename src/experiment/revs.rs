//! `rev` variants in a run. Before any rep, each revision is resolved, checked out in
//! its own worktree and built there ([`crate::revisions`], cached per commit under
//! `<results>/.revs/` or `$GAPSCOPE_REV_CACHE`). A revision that names no commit stops
//! the run before anything is measured; one that does not build, or whose gapscope is
//! too old to run reps for this one, fails its variant: every rep of it is recorded as
//! failed with the reason (the build log's tail), meta.json says why under the
//! variant's `revision.failed`, and the other variants are measured as usual.
//!
//! A revision of a command workload (`command = […]`) is only checked out here: its
//! worktree becomes the variant's subject folder, where the workload's `build` runs
//! before the reps (each run, with its log in the run folder; make and cargo rebuild
//! incrementally in the worktree, which is kept per commit) and its `command` runs.
//!
//! A revision of gapscope runs each of its variant's reps as its own `__worker`,
//! whatever `process` says. Its worker reads a copy of the experiment that holds only
//! that variant, without `rev` and `repo` (kept beside the revision's build), and
//! answers with the result line of this version (`gapscope-rep-v1`). Before its first
//! rep its binary is asked `__protocol`: a gapscope that does not answer
//! [`WORKER_PROTOCOL`] (every revision from before this command existed) is refused.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::spec::{Experiment, ResolvedVariant};
use crate::revisions::{self, BuildSpec, Checkout, RevCache, WorkloadBinary};
use crate::store::{PatchMeta, RevisionMeta, VariantMeta};

use gapscope_workload::worker::WORKER_PROTOCOL;

/// A `rev` or `patch` variant made ready.
#[derive(Debug)]
struct Prepared {
    kind: Kind,
    /// Its gapscope and the folder of its one-variant experiment copy.
    worker: Option<(PathBuf, PathBuf)>,
    /// Why it cannot run.
    failed: Option<String>,
    /// Command workloads: the folder its build and command run in (the worktree).
    subject_dir: Option<PathBuf>,
    /// The workload's own binary at the revision, where it has one
    /// ([`workload_binary_of`]): it runs the reps instead of a whole gapscope.
    binary: Option<PathBuf>,
}

/// The in-process workload's own binary, which a revision that has its source builds
/// instead of a whole gapscope (one from before workload binaries has none).
fn workload_binary_of(exp: &Experiment) -> Option<&'static WorkloadBinary> {
    match (&exp.workload.command, &exp.workload.hash) {
        (Some(_), _) => None,
        (None, Some(_)) => Some(&revisions::HASH_BINARY),
        (None, None) => Some(&revisions::PROVER_BINARY),
    }
}

/// Whether variant `v` needs a whole gapscope as its worker: only gapscope's own worker
/// runs under the emulator or samples its stacks.
fn needs_gapscope_worker(v: &ResolvedVariant) -> bool {
    v.profile.is_some() || v.counters == crate::counters::CounterMode::Emulated
}

#[derive(Debug)]
enum Kind {
    /// Another revision of gapscope (or of a command workload's program).
    Rev {
        checkout: Box<Checkout>,
        build: BuildSpec,
    },
    /// This gapscope built against patched dependencies: each patch as resolved (or,
    /// when it failed before that, as the experiment names it).
    Patch { patches: Vec<PatchMeta> },
}

/// The `rev` and `patch` variants of a run, by variant index.
#[derive(Debug, Default)]
pub struct RevVariants {
    slots: Vec<Option<Prepared>>,
}

/// One line of `gapscope build-workers`: a variant's worker, or why it has none.
#[derive(Debug, Clone, PartialEq)]
pub struct PreparedWorker {
    pub variant: String,
    pub worker: Option<PathBuf>,
    pub reused: bool,
    pub failed: Option<String>,
}

impl RevVariants {
    /// Checks out and builds every `rev` and `patch` variant of `exp` (in `variants`
    /// order); patch variants' workers get this build's features.
    pub fn prepare(
        exp: &Experiment,
        text: &str,
        variants: &[ResolvedVariant],
        results_dir: &Path,
        progress: bool,
    ) -> Result<RevVariants> {
        let features = crate::patches::this_build_features();
        Self::prepare_with(exp, text, variants, results_dir, progress, &features)
    }

    /// [`RevVariants::prepare`] with the features patch variants' workers are built with.
    pub fn prepare_with(
        exp: &Experiment,
        text: &str,
        variants: &[ResolvedVariant],
        results_dir: &Path,
        progress: bool,
        features: &[String],
    ) -> Result<RevVariants> {
        // One pass over the variants, each slot prepared by its kind: a patch variant
        // (prepare_patch), a revision of a command workload's program (checked out; its
        // build runs with the program's), or a revision of gapscope (checked out, built,
        // its worker protocol probed). One loop, so that each slot lands at its variant's
        // index.
        let cache = RevCache::for_results(results_dir);
        let gapscope = crate::patches::GapscopeSource::locate();
        let mut slots = Vec::new();
        for v in variants {
            if let Some(set) = &v.patch {
                let p = prepare_patch(&cache, gapscope.as_ref(), text, v, set, features, progress)?;
                slots.push(Some(p));
                continue;
            }
            let Some(rev) = &v.rev else {
                slots.push(None);
                continue;
            };
            let repo = v.repo.clone().unwrap_or_else(|| PathBuf::from("."));
            let mut checkout = revisions::checkout(&cache, &repo, rev)
                .with_context(|| format!("variant {:?}", v.name))?;
            if let Some(ext) = &exp.workload.command {
                if progress {
                    eprintln!(
                        "variant {}: rev {rev} = {}, checked out in {}",
                        v.name,
                        revisions::short(&checkout.commit),
                        checkout.worktree.display()
                    );
                }
                slots.push(Some(Prepared {
                    worker: None,
                    failed: None,
                    binary: None,
                    subject_dir: Some(checkout.worktree.clone()),
                    kind: Kind::Rev {
                        build: BuildSpec {
                            command: ext.build.clone().unwrap_or_default(),
                            artefacts: Vec::new(),
                        },
                        checkout: Box::new(checkout),
                    },
                }));
                continue;
            }
            // The workload's own binary where the revision has it: a change to the
            // workload rebuilds that binary only, and this gapscope runs, stores and
            // judges the reps.
            let own = workload_binary_of(exp)
                .filter(|b| b.in_tree(&checkout.worktree))
                .filter(|_| !needs_gapscope_worker(v));
            let features = crate::patches::this_build_features();
            let build = own.map_or_else(BuildSpec::gapscope, |b| b.build_spec(&features));
            if progress {
                eprintln!(
                    "variant {}: rev {rev} = {}, building in {} ({})",
                    v.name,
                    revisions::short(&checkout.commit),
                    checkout.worktree.display(),
                    build.command.join(" ")
                );
            }
            revisions::build(&cache, &mut checkout, &build)
                .with_context(|| format!("variant {:?}", v.name))?;
            let built = checkout.build.as_ref().expect("built");
            let mut p = Prepared {
                worker: None,
                failed: None,
                subject_dir: None,
                binary: None,
                kind: Kind::Rev {
                    build,
                    checkout: Box::new(checkout.clone()),
                },
            };
            if !built.record.ok {
                p.failed = Some(format!(
                    "revision {rev} ({}) did not build ({}): the log ({}) ends:\n{}",
                    revisions::short(&checkout.commit),
                    built.record.status,
                    built.log.display(),
                    built.log_tail()
                ));
            } else if let (Some(exe), Some(own)) = (built.artefacts.first(), own) {
                let cmd = [exe.to_string_lossy().into_owned()];
                match super::workload_bin::probe(&cmd, own.kind) {
                    Ok(()) => p.binary = Some(exe.clone()),
                    Err(why) => {
                        p.failed = Some(format!(
                            "revision {rev} ({}): {why}",
                            revisions::short(&checkout.commit)
                        ))
                    }
                }
            } else if let Some(exe) = built.artefacts.first() {
                match probe_protocol(exe) {
                    Ok(()) => {
                        let dir = worker_copy(&cache.root.join(&checkout.commit), text, &v.name)?;
                        p.worker = Some((exe.clone(), dir));
                    }
                    Err(why) => {
                        p.failed = Some(format!(
                            "revision {rev} ({}): {why}",
                            revisions::short(&checkout.commit)
                        ))
                    }
                }
            }
            if let (true, Some(why)) = (progress, &p.failed) {
                eprintln!("variant {}: {why}\nits reps are recorded as failed", v.name);
            }
            slots.push(Some(p));
        }
        Ok(RevVariants { slots })
    }

    fn get(&self, i: usize) -> Option<&Prepared> {
        self.slots.get(i).and_then(Option::as_ref)
    }

    /// Why variant `i` cannot run, if it cannot.
    pub fn failed(&self, i: usize) -> Option<&str> {
        self.get(i)?.failed.as_deref()
    }

    /// The gapscope that runs variant `i`'s reps, and the folder of its experiment copy.
    pub fn worker(&self, i: usize) -> Option<(&Path, &Path)> {
        let (exe, dir) = self.get(i)?.worker.as_ref()?;
        Some((exe, dir))
    }

    /// The workload's own binary that runs variant `i`'s reps (a `rev` variant whose
    /// revision has one).
    pub fn binary(&self, i: usize) -> Option<&Path> {
        self.get(i)?.binary.as_deref()
    }

    /// Sets each command workload's `rev` variant's subject folder to its worktree.
    pub fn apply(&self, variants: &mut [ResolvedVariant]) {
        for (v, p) in variants.iter_mut().zip(&self.slots) {
            if let Some(dir) = p.as_ref().and_then(|p| p.subject_dir.clone()) {
                v.subject_dir = Some(dir);
            }
        }
    }

    /// Variant `i` runs in a worker of its own (a `rev` or `patch` variant).
    pub fn is_rev(&self, i: usize) -> bool {
        self.get(i).is_some()
    }

    /// Each `rev` and `patch` variant's worker, for `gapscope build-workers` to list.
    pub fn workers(&self, variants: &[ResolvedVariant]) -> Vec<PreparedWorker> {
        (variants.iter().zip(&self.slots))
            .filter_map(|(v, p)| {
                let p = p.as_ref()?;
                let reused = match &p.kind {
                    Kind::Rev { checkout, .. } => checkout.build.as_ref().is_some_and(|b| b.reused),
                    Kind::Patch { patches } => patches.iter().all(|m| m.build_reused),
                };
                Some(PreparedWorker {
                    variant: v.name.clone(),
                    worker: (p.worker.as_ref().map(|(exe, _)| exe.clone()))
                        .or_else(|| p.binary.clone()),
                    reused,
                    failed: p.failed.clone(),
                })
            })
            .collect()
    }

    /// Refuses to resume a run whose `rev` variants now name other commits (a branch
    /// that moved): its reps so far measured the commits `stored` records.
    pub fn check_resume(&self, stored: &[VariantMeta]) -> Result<()> {
        for (p, m) in self.slots.iter().zip(stored) {
            match (p.as_ref().map(|p| &p.kind), &m.revision) {
                (Some(Kind::Rev { checkout, .. }), Some(was)) if checkout.commit != was.commit => {
                    anyhow::bail!(
                        "variant {:?}: rev {} is now commit {}, but the run measured {}; a \
                         resume cannot mix them: start a new run of the experiment",
                        m.name,
                        checkout.rev,
                        revisions::short(&checkout.commit),
                        revisions::short(&was.commit),
                    );
                }
                (Some(Kind::Patch { patches }), _) => {
                    for (now, was) in patches.iter().zip(&m.patches) {
                        if now.commit != was.commit {
                            anyhow::bail!(
                                "variant {:?}: patch {} is now commit {}, but the run measured \
                                 {}; a resume cannot mix them: start a new run of the experiment",
                                m.name,
                                now.krate,
                                revisions::short(&now.commit),
                                revisions::short(&was.commit),
                            );
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Fills each `rev` variant's `revision` in meta.json.
    pub fn fill_meta(&self, metas: &mut [VariantMeta]) {
        for (m, p) in metas.iter_mut().zip(&self.slots) {
            let Some(p) = p else {
                continue;
            };
            match &p.kind {
                Kind::Rev { checkout, build } => {
                    let built = checkout.build.as_ref();
                    m.revision = Some(RevisionMeta {
                        rev: checkout.rev.clone(),
                        repo: checkout.repo.display().to_string(),
                        commit: checkout.commit.clone(),
                        dirty: checkout.dirty,
                        build: build.command.clone(),
                        build_log: built.map(|b| b.log.display().to_string()),
                        build_reused: built.is_some_and(|b| b.reused),
                        failed: p.failed.clone(),
                    });
                }
                Kind::Patch { patches } => {
                    m.patches = patches.clone();
                    m.patch_failed = p.failed.clone();
                }
            }
        }
    }
}

/// `gapscope build-workers`: builds (or finds in the cache) the worker of every `rev` and
/// `patch` variant of the experiment at `path`, patch variants' with `features` (this
/// build's when `None`), so that a later run on a host without cargo finds them.
pub fn prepare_workers(
    path: &Path,
    results_dir: &Path,
    features: Option<&[String]>,
    progress: bool,
) -> Result<Vec<PreparedWorker>> {
    let (exp, text) = Experiment::load(path)?;
    let variants = exp.resolved_variants();
    let own = crate::patches::this_build_features();
    let features = features.unwrap_or(&own);
    let revs = RevVariants::prepare_with(&exp, &text, &variants, results_dir, progress, features)?;
    Ok(revs.workers(&variants))
}

/// Asks a gapscope binary for its worker protocol; an error says why it is refused.
pub fn probe_protocol(exe: &Path) -> Result<(), String> {
    let out = std::process::Command::new(exe)
        .arg("__protocol")
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run its gapscope {}: {e}", exe.display()))?;
    let said = String::from_utf8_lossy(&out.stdout);
    if out.status.success() && said.trim() == WORKER_PROTOCOL {
        return Ok(());
    }
    let answer = if out.status.success() {
        format!("it answered {:?}", said.trim())
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        format!(
            "it has no `__protocol` command ({}: {})",
            out.status,
            err.lines().next().unwrap_or("").trim()
        )
    };
    Err(format!(
        "its gapscope does not speak {WORKER_PROTOCOL:?} ({answer}), so it cannot run reps \
         for this gapscope: revisions from before that protocol are refused. Measure it with \
         its own `gapscope run` instead, or pick a later revision"
    ))
}

/// Makes a `patch` variant ready: its worker (cached, or built), or why it has none.
fn prepare_patch(
    cache: &RevCache,
    gapscope: Option<&crate::patches::GapscopeSource>,
    text: &str,
    v: &ResolvedVariant,
    set: &crate::patches::PatchSet,
    features: &[String],
    progress: bool,
) -> Result<Prepared> {
    if progress {
        let what: Vec<String> = set
            .iter()
            .map(|(k, p)| format!("{k}={}", p.describe()))
            .collect();
        eprintln!(
            "variant {}: patch {}: its worker (features: {})",
            v.name,
            what.join(", "),
            if features.is_empty() {
                "none".to_string()
            } else {
                features.join(",")
            }
        );
    }
    let as_written = || -> Vec<PatchMeta> {
        set.iter()
            .map(|(k, p)| PatchMeta {
                krate: k.clone(),
                repo: p.describe(),
                rev: p.rev.clone().unwrap_or_default(),
                ..PatchMeta::default()
            })
            .collect()
    };
    let mut p = Prepared {
        kind: Kind::Patch {
            patches: as_written(),
        },
        worker: None,
        failed: None,
        subject_dir: None,
        binary: None,
    };
    let whole = needs_gapscope_worker(v);
    match crate::patches::prepare_worker(cache, gapscope, set, features, whole) {
        Ok(w) => {
            if let (true, Some(note)) = (progress, &w.note) {
                eprintln!("variant {}: {note}", v.name);
            }
            // The prover's own binary answers the workload protocol; a whole gapscope the
            // worker protocol, and reads a copy of the experiment.
            let probed = if w.binary {
                let cmd = [w.exe.to_string_lossy().into_owned()];
                super::workload_bin::probe(&cmd, revisions::PROVER_BINARY.kind)
            } else {
                probe_protocol(&w.exe)
            };
            match probed {
                Ok(()) if w.binary => p.binary = Some(w.exe.clone()),
                Ok(()) => {
                    let base = w.exe.parent().unwrap_or(&cache.root).to_path_buf();
                    let dir = worker_copy(&base, text, &v.name)?;
                    p.worker = Some((w.exe.clone(), dir));
                }
                Err(why) => p.failed = Some(format!("its worker {}: {why}", w.exe.display())),
            }
            if progress && p.failed.is_none() {
                eprintln!(
                    "variant {}: {} {} ({})",
                    v.name,
                    if w.binary {
                        "the prover's binary"
                    } else {
                        "worker"
                    },
                    w.exe.display(),
                    if w.reused { "cached" } else { "built" }
                );
            }
            p.kind = Kind::Patch { patches: w.patches };
        }
        Err(e) => p.failed = Some(e.to_string()),
    }
    if let (true, Some(why)) = (progress, &p.failed) {
        eprintln!("variant {}: {why}\nits reps are recorded as failed", v.name);
    }
    Ok(p)
}

/// Writes the experiment copy a worker reads: `text` with only the variant `name`,
/// without `rev`, `repo` and `patch` (which its spec may not know), into a folder
/// under `base` named by its content. Returns that folder.
fn worker_copy(base: &Path, text: &str, name: &str) -> Result<PathBuf> {
    let copy = one_variant_copy(text, name)?;
    let key: String = {
        use sha2::Digest;
        let h = sha2::Sha256::digest(copy.as_bytes());
        h.iter().take(6).map(|b| format!("{b:02x}")).collect()
    };
    let dir = base.join(format!("experiment-{key}"));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let path = dir.join(crate::store::EXPERIMENT_COPY);
    crate::store::write_atomic(&path, copy.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(dir)
}

/// `text` with only the variant `name`, and that one without `rev`, `repo` and `patch`.
pub fn one_variant_copy(text: &str, name: &str) -> Result<String> {
    let mut doc: toml::Table = toml::from_str(text).context("the experiment does not parse")?;
    let variants = doc
        .get_mut("variant")
        .and_then(toml::Value::as_array_mut)
        .context("the experiment has no [[variant]]")?;
    variants.retain(|v| v.get("name").and_then(toml::Value::as_str) == Some(name));
    for v in variants.iter_mut() {
        if let Some(t) = v.as_table_mut() {
            t.remove("rev");
            t.remove("repo");
            t.remove("patch");
        }
    }
    Ok(toml::to_string(&doc)?)
}

#[cfg(test)]
#[path = "revs_tests.rs"]
mod tests;
