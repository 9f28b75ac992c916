//! Whether a patch can take effect: its crate is in gapscope's dependency graph
//! (Cargo.lock), and cargo, asked with the patches applied (`cargo metadata`), resolves
//! that crate to the patch's folder rather than to the registry. Cargo itself only warns
//! about a patch it did not use and builds the registry's crate; this makes that a
//! failure of the variant, with the requirement the version missed.

use std::path::Path;
use std::process::{Command, Stdio};

use serde::Deserialize;

use super::{PatchError, ResolvedPatch};

/// Checks that `krate` is a package of the lock file at `lock`.
pub fn check_in_lock(krate: &str, lock: &Path) -> Result<(), PatchError> {
    let text = std::fs::read_to_string(lock).unwrap_or_default();
    let doc: toml::Table = toml::from_str(&text).unwrap_or_default();
    let names: Vec<String> = doc
        .get("package")
        .and_then(toml::Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|p| p.get("name")?.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    if names.iter().any(|n| n == krate) {
        return Ok(());
    }
    Err(PatchError::NotInGraph {
        krate: krate.into(),
        lock: lock.to_path_buf(),
        near: near_names(krate, &names),
    })
}

/// Up to five names of `names` that look like `krate` (a shared stem), as ", e.g. …".
fn near_names(krate: &str, names: &[String]) -> String {
    let stem: String = krate
        .to_lowercase()
        .replace('_', "-")
        .chars()
        .take(4)
        .collect();
    let mut near: Vec<&str> = names
        .iter()
        .filter(|n| n.to_lowercase().replace('_', "-").contains(&stem))
        .map(String::as_str)
        .collect();
    near.sort_unstable();
    near.dedup();
    near.truncate(5);
    if near.is_empty() {
        String::new()
    } else {
        format!(" (similar names there: {})", near.join(", "))
    }
}

#[derive(Deserialize)]
struct Metadata {
    packages: Vec<Package>,
}

#[derive(Deserialize)]
struct Package {
    name: String,
    version: String,
    source: Option<String>,
    manifest_path: String,
    #[serde(default)]
    dependencies: Vec<Dependency>,
}

#[derive(Deserialize)]
struct Dependency {
    name: String,
    req: String,
    #[serde(default)]
    optional: bool,
}

/// Asks cargo (in the gapscope worktree `tree`, with `args`: the features and the patch
/// configs the build will use) whether each patch is used; `log` keeps cargo's stderr.
pub fn check_used(
    tree: &Path,
    args: &[String],
    patches: &[ResolvedPatch],
    log: &Path,
) -> Result<(), PatchError> {
    // A lock file that holds the registry's version keeps it even where the patch's
    // version is accepted: let cargo move each patched crate to the patch first.
    let configs: Vec<&String> = args
        .windows(2)
        .filter(|w| w[0] == "--config")
        .flat_map(|w| [&w[0], &w[1]])
        .collect();
    for p in patches {
        let _ = Command::new("cargo")
            .args(["update", "--quiet", "-p", &p.krate])
            .args(&configs)
            .current_dir(tree)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
    let out = Command::new("cargo")
        .arg("metadata")
        .args(["--format-version", "1"])
        .args(args)
        .current_dir(tree)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| PatchError::NoWorker(format!("cannot run cargo ({e}): install Rust, or run `gapscope build-workers` where it is installed")))?;
    let _ = crate::fsx::write_file(log, &out.stderr);
    if !out.status.success() {
        return Err(PatchError::BuildFailed {
            status: format!("cargo metadata: {}", out.status),
            log: log.to_path_buf(),
            tail: crate::revisions::tail_of(log, crate::revisions::LOG_TAIL_LINES),
        });
    }
    let meta: Metadata =
        serde_json::from_slice(&out.stdout).map_err(|e| PatchError::BuildFailed {
            status: format!("cargo metadata printed no metadata ({e})"),
            log: log.to_path_buf(),
            tail: crate::revisions::tail_of(log, crate::revisions::LOG_TAIL_LINES),
        })?;
    for p in patches {
        unused_reason(&meta, p).map_or(Ok(()), Err)?;
    }
    Ok(())
}

fn unused_reason(meta: &Metadata, p: &ResolvedPatch) -> Option<PatchError> {
    let want = p.crate_dir.join("Cargo.toml");
    let want = want.canonicalize().unwrap_or(want);
    let used = meta.packages.iter().any(|k| {
        k.name == p.krate && k.source.is_none() && {
            let m = Path::new(&k.manifest_path);
            m.canonicalize().map(|c| c == want).unwrap_or(m == want)
        }
    });
    if used {
        return None;
    }
    let reqs: Vec<String> = meta
        .packages
        .iter()
        .flat_map(|k| {
            k.dependencies
                .iter()
                .filter(|d| d.name == p.krate)
                .map(move |d| {
                    format!(
                        "{} {} requires {} {}{}",
                        k.name,
                        k.version,
                        d.name,
                        d.req,
                        if d.optional { " (optional)" } else { "" }
                    )
                })
        })
        .collect();
    let registry: Vec<&str> = meta
        .packages
        .iter()
        .filter(|k| k.name == p.krate && k.source.is_some())
        .map(|k| k.version.as_str())
        .collect();
    let why = if !registry.is_empty() {
        format!(
            "its version does not satisfy the requirement ({}), so cargo kept the registry's {}",
            reqs.join("; "),
            registry.join(", ")
        )
    } else if reqs.is_empty() {
        "nothing in gapscope's graph depends on it with this build's features".into()
    } else {
        format!(
            "it is an optional dependency that this build's features leave out ({}): build \
             with the feature that enables it",
            reqs.join("; ")
        )
    };
    Some(PatchError::Unused {
        krate: p.krate.clone(),
        dir: p.crate_dir.clone(),
        version: p.meta.version.clone(),
        why,
    })
}
