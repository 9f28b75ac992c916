//! Kubernetes: one Indexed Job per GPU count (`completionMode: Indexed`); each pod's
//! `JOB_COMPLETION_INDEX` picks its cell through the job's cell list, a volume (a
//! PersistentVolumeClaim) holds the results root, GPUs are resource limits, and
//! `backoffLimitPerIndex` retries one cell without failing the others. A retried pod
//! runs `gapscope sweep cell`, which resumes the cell's folder. The manifest is JSON
//! (which kubectl takes as YAML).

use serde_json::{json, Value};

use super::spec::K8sOptions;
use super::{by_gpus, Manifest, SweepDir};

/// Kubernetes object names: lowercase letters, digits and '-', at most 63 characters.
fn dns_label(s: &str) -> String {
    let mut out: String = s
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    out.truncate(63);
    out.trim_matches('-').to_string()
}

/// The manifests, one Job per GPU count. `image` and `claim` are required (checked by
/// the caller with [`missing`]).
pub fn manifests(sweep: &SweepDir, manifest: &Manifest, opts: &K8sOptions) -> Vec<Value> {
    let root = sweep
        .dir
        .parent()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| ".".into());
    let gapscope = opts.gapscope.clone().unwrap_or_else(|| "gapscope".into());
    let gpu_resource = opts
        .gpu_resource
        .clone()
        .unwrap_or_else(|| "nvidia.com/gpu".into());
    by_gpus(&manifest.cells)
        .into_iter()
        .map(|(gpus, cells)| {
            let n = cells.len();
            let list: Vec<String> = cells.iter().map(|c| c.to_string()).collect();
            let mut container = json!({
                "name": "gapscope",
                "image": opts.image.clone().unwrap_or_default(),
                "command": [
                    gapscope, "sweep", "cell", sweep.dir.display().to_string(),
                    "--task-env", "JOB_COMPLETION_INDEX",
                    "--cells", list.join(","),
                    "--params-dir", "/tmp/gapscope-params"
                ],
                "volumeMounts": [{"name": "results", "mountPath": root}],
            });
            if gpus > 0 {
                container["resources"] = json!({"limits": {gpu_resource.clone(): gpus}});
            }
            let mut job = json!({
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {
                    "name": dns_label(&format!("gapscope-{}-g{gpus}", manifest.name)),
                    "labels": {"app.kubernetes.io/name": "gapscope", "gapscope/sweep": dns_label(&manifest.name)}
                },
                "spec": {
                    "completionMode": "Indexed",
                    "completions": n,
                    "parallelism": opts.parallelism.map(|p| p as usize).unwrap_or(n).min(n),
                    "backoffLimitPerIndex": opts.retries.unwrap_or(2),
                    "maxFailedIndexes": n,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [container],
                            "volumes": [{
                                "name": "results",
                                "persistentVolumeClaim": {"claimName": opts.claim.clone().unwrap_or_default()}
                            }]
                        }
                    }
                }
            });
            if let Some(ns) = &opts.namespace {
                job["metadata"]["namespace"] = json!(ns);
            }
            job
        })
        .collect()
}

/// The `[k8s]` keys a manifest cannot do without.
pub fn missing(opts: &K8sOptions) -> Vec<&'static str> {
    let mut m = Vec::new();
    if opts.image.as_deref().is_none_or(str::is_empty) {
        m.push("image (the container image with gapscope in it)");
    }
    if opts.claim.as_deref().is_none_or(str::is_empty) {
        m.push("claim (the PersistentVolumeClaim that holds the results root)");
    }
    m
}
