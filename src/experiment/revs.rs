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
use crate::revisions::{self, BuildSpec, Checkout, RevCache};
use crate::store::{RevisionMeta, VariantMeta};

/// What `gapscope __protocol` prints: the worker protocol of this build (its arguments,
/// the experiment copy it reads, its result line).
pub const WORKER_PROTOCOL: &str = "gapscope-worker-protocol 1";

/// A `rev` variant made ready.
#[derive(Debug)]
struct Prepared {
    checkout: Checkout,
    build: BuildSpec,
    /// Its gapscope and the folder of its one-variant experiment copy.
    worker: Option<(PathBuf, PathBuf)>,
    /// Why it cannot run.
    failed: Option<String>,
    /// Command workloads: the folder its build and command run in (the worktree).
    subject_dir: Option<PathBuf>,
}

/// The `rev` variants of a run, by variant index.
#[derive(Debug, Default)]
pub struct RevVariants {
    slots: Vec<Option<Prepared>>,
}

impl RevVariants {
    /// Checks out and builds every `rev` variant of `exp` (in `variants` order).
    pub fn prepare(
        exp: &Experiment,
        text: &str,
        variants: &[ResolvedVariant],
        results_dir: &Path,
        progress: bool,
    ) -> Result<RevVariants> {
        let cache = RevCache::for_results(results_dir);
        let mut slots = Vec::new();
        for v in variants {
            let Some(rev) = &v.rev else {
                slots.push(None);
                continue;
            };
            let repo = v.repo.clone().unwrap_or_else(|| PathBuf::from("."));
            let mut checkout = revisions::checkout(&cache, &repo, rev)
                .with_context(|| format!("variant {:?}", v.name))?;
            if let Some(ext) = &exp.workload.external {
                if progress {
                    eprintln!(
                        "variant {}: rev {rev} = {}, checked out in {}",
                        v.name,
                        revisions::short(&checkout.commit),
                        checkout.worktree.display()
                    );
                }
                slots.push(Some(Prepared {
                    build: BuildSpec {
                        command: ext.build.clone().unwrap_or_default(),
                        artefacts: Vec::new(),
                    },
                    worker: None,
                    failed: None,
                    subject_dir: Some(checkout.worktree.clone()),
                    checkout,
                }));
                continue;
            }
            let build = BuildSpec::gapscope();
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
                build,
                checkout: checkout.clone(),
            };
            if !built.record.ok {
                p.failed = Some(format!(
                    "revision {rev} ({}) did not build ({}): the log ({}) ends:\n{}",
                    revisions::short(&checkout.commit),
                    built.record.status,
                    built.log.display(),
                    built.log_tail()
                ));
            } else if let Some(exe) = built.artefacts.first() {
                match probe_protocol(exe) {
                    Ok(()) => {
                        let dir = worker_copy(&cache, &checkout.commit, text, &v.name)?;
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

    /// Sets each command workload's `rev` variant's subject folder to its worktree.
    pub fn apply(&self, variants: &mut [ResolvedVariant]) {
        for (v, p) in variants.iter_mut().zip(&self.slots) {
            if let Some(dir) = p.as_ref().and_then(|p| p.subject_dir.clone()) {
                v.subject_dir = Some(dir);
            }
        }
    }

    /// Variant `i` is a `rev` variant.
    pub fn is_rev(&self, i: usize) -> bool {
        self.get(i).is_some()
    }

    /// Refuses to resume a run whose `rev` variants now name other commits (a branch
    /// that moved): its reps so far measured the commits `stored` records.
    pub fn check_resume(&self, stored: &[VariantMeta]) -> Result<()> {
        for (p, m) in self.slots.iter().zip(stored) {
            let (Some(p), Some(was)) = (p, &m.revision) else {
                continue;
            };
            if p.checkout.commit != was.commit {
                anyhow::bail!(
                    "variant {:?}: rev {} is now commit {}, but the run measured {}; a resume \
                     cannot mix them: start a new run of the experiment",
                    m.name,
                    p.checkout.rev,
                    revisions::short(&p.checkout.commit),
                    revisions::short(&was.commit),
                );
            }
        }
        Ok(())
    }

    /// Fills each `rev` variant's `revision` in meta.json.
    pub fn fill_meta(&self, metas: &mut [VariantMeta]) {
        for (m, p) in metas.iter_mut().zip(&self.slots) {
            m.revision = p.as_ref().map(|p| {
                let built = p.checkout.build.as_ref();
                RevisionMeta {
                    rev: p.checkout.rev.clone(),
                    repo: p.checkout.repo.display().to_string(),
                    commit: p.checkout.commit.clone(),
                    dirty: p.checkout.dirty,
                    build: p.build.command.clone(),
                    build_log: built.map(|b| b.log.display().to_string()),
                    build_reused: built.is_some_and(|b| b.reused),
                    failed: p.failed.clone(),
                }
            });
        }
    }
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

/// Writes the experiment copy a revision's worker reads: `text` with only the variant
/// `name`, without `rev` and `repo` (which its spec may not know), into a folder of the
/// revision cache named by its content. Returns that folder.
fn worker_copy(cache: &RevCache, commit: &str, text: &str, name: &str) -> Result<PathBuf> {
    let copy = one_variant_copy(text, name)?;
    let key: String = {
        use sha2::Digest;
        let h = sha2::Sha256::digest(copy.as_bytes());
        h.iter().take(6).map(|b| format!("{b:02x}")).collect()
    };
    let dir = cache.root.join(commit).join(format!("experiment-{key}"));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let path = dir.join(crate::store::EXPERIMENT_COPY);
    crate::store::write_atomic(&path, copy.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(dir)
}

/// `text` with only the variant `name`, and that one without `rev` and `repo`.
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
        }
    }
    Ok(toml::to_string(&doc)?)
}

#[cfg(test)]
#[path = "revs_tests.rs"]
mod tests;
