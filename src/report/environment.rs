//! The environment and reproduce sections of report.md: the machine, GPU, driver,
//! CUDA and revisions a run used, and the commands that make it again.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

use super::sections::table;
use crate::markup::{md_fence, md_text};
use crate::store::lanes;
use crate::store::RunView;
use crate::store::EXPERIMENT_COPY;
use crate::units::fmt_ns_short;

/// Host, GPU, driver, CUDA, revisions, run policy and variants.
pub fn environment_section(input: &RunView) -> String {
    // One table built row by row (host, GPU, how the GPU side was recorded, run policy,
    // reps, params, setup), then the variants' table and the GPU's problems: long because
    // the section has many rows of a line or two each.
    let m = &input.data.meta;
    let h = &m.host;
    let g = &m.gpu;
    let mut rows: Vec<Vec<String>> = vec![
        vec!["host".into(), h.hostname.clone()],
        vec![
            "CPU".into(),
            format!("{} ({} cores)", h.cpu_model, h.cpu_cores),
        ],
        vec![
            "memory".into(),
            format!("{:.1} GiB", h.memory_bytes as f64 / (1u64 << 30) as f64),
        ],
        vec!["OS / kernel".into(), format!("{} / {}", h.os, h.kernel)],
    ];
    if g.available {
        let devices: Vec<String> = g.devices.iter().map(device_line).collect();
        rows.push(vec![
            "GPU".into(),
            if devices.is_empty() {
                "available".into()
            } else {
                devices.join("; ")
            },
        ]);
    } else {
        let reason = g.reason.as_deref().unwrap_or("no reason recorded");
        rows.push(vec![
            "GPU".into(),
            format!("none used ({})", lanes::gpu_reason(reason)),
        ]);
    }
    let opt = |o: &Option<String>| o.clone().unwrap_or_else(|| "—".into());
    rows.push(vec!["GPU driver".into(), opt(&g.driver_version)]);
    rows.push(vec![
        "CUDA driver / runtime".into(),
        format!(
            "{} / {}",
            opt(&g.cuda_driver_version),
            opt(&g.cuda_runtime_version)
        ),
    ]);
    // How the GPU side was recorded (telemetry.csv, gpu_activity.csv, NVTX). Without a
    // GPU, NVML's and CUPTI's status repeat the GPU row's reason (meta.json keeps them).
    let sources = [
        ("NVML sampling", &g.nvml),
        ("CUPTI activity", &g.cupti),
        ("NVTX", &g.nvtx),
    ];
    let shown = if g.available {
        &sources[..]
    } else {
        &sources[2..]
    };
    for &(k, v) in shown {
        if let Some(v) = v {
            rows.push(vec![k.into(), v.clone()]);
        }
    }
    if let Some(ms) = g.sample_period_ms {
        rows.push(vec!["NVML sample period".into(), format!("{ms} ms")]);
    }
    rows.push(vec![
        "gapscope".into(),
        format!(
            "{} at {}{}",
            m.gapscope_version,
            m.git
                .revision
                .clone()
                .unwrap_or_else(|| "unknown revision".into()),
            match m.git.dirty {
                Some(true) => " (with uncommitted changes)",
                _ => "",
            }
        ),
    ]);
    rows.push(vec![
        "workload".into(),
        match &m.command_workload {
            Some(e) => format!("external command: {}", e.command.join(" ")),
            None => format!(
                "{} 2^{} constraints × {} on {}",
                m.workload.field("circuit"),
                m.workload.field("log2_constraints"),
                m.workload.field("batch"),
                m.workload.field("backend")
            ),
        },
    ]);
    // A run of `--until-decided` records its cap as `reps`, and why it stopped.
    let reps = match &m.until_decided {
        Some(_) => format!("at most {} measured reps (until decided)", m.reps),
        None => format!("{} measured reps", m.reps),
    };
    rows.push(vec![
        "run policy".into(),
        format!(
            "{reps} + {} warm-up(s) per variant, {} order, {} process",
            m.warmups, m.order, m.process
        ),
    ]);
    if let Some(u) = &m.until_decided {
        let budget = u
            .budget_s
            .map(|b| format!("budget {b} s; "))
            .unwrap_or_default();
        let why = u.stopped.as_deref().unwrap_or("not stopped yet");
        rows.push(vec!["until decided".into(), format!("{budget}{why}")]);
    }
    rows.push(vec![
        "started / completed (UTC)".into(),
        format!(
            "{} / {}",
            m.created_utc,
            m.completed_utc
                .clone()
                .unwrap_or_else(|| "not completed".into())
        ),
    ]);
    for p in &m.params {
        let source = p.get("source").and_then(|s| s.as_str()).unwrap_or("?");
        let path = p.get("path").and_then(|s| s.as_str()).unwrap_or("?");
        let by = match p.get("generator").and_then(|s| s.as_str()) {
            Some(g) => format!("; made by {g}"),
            None => String::new(),
        };
        rows.push(vec!["params".into(), format!("{path} ({source}{by})")]);
    }
    rows.extend(setup_rows(&m.setup_ns));
    let mut out = String::new();
    table(&mut out, &["".into(), "value".into()], &rows);
    let mut vrows = Vec::new();
    for v in &m.variants {
        let knobs: Vec<String> = v.knobs.iter().map(|(k, x)| format!("{k}={x}")).collect();
        vrows.push(vec![v.name.clone(), v.backend.clone(), knobs.join(", ")]);
    }
    let _ = writeln!(out);
    table(
        &mut out,
        &["variant".into(), "backend".into(), "knobs".into()],
        &vrows,
    );
    if !input.gpu.problems.is_empty() {
        let _ = writeln!(out);
        for p in &input.gpu.problems {
            let _ = writeln!(out, "- {}", md_text(p));
        }
    }
    out
}

/// Rows for meta.json `setup_ns`: one per key, except that the setups of per_rep workers
/// (keys ending in `/rep<N>`) are summarised per backend/variant: how many, median, range.
fn setup_rows(setup: &BTreeMap<String, u64>) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let mut per_worker: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for (k, ns) in setup {
        match k.rsplit_once("/rep") {
            Some((base, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
                per_worker.entry(base).or_default().push(*ns)
            }
            _ => rows.push(vec![format!("setup: {k}"), fmt_ns_short(*ns as f64)]),
        }
    }
    for (k, mut v) in per_worker {
        v.sort_unstable();
        let median = if v.len() % 2 == 1 {
            v[v.len() / 2] as f64
        } else {
            (v[v.len() / 2 - 1] as f64 + v[v.len() / 2] as f64) / 2.0
        };
        rows.push(vec![
            format!("setup: {k} (each worker, {} reps)", v.len()),
            format!(
                "median {} (from {} to {})",
                fmt_ns_short(median),
                fmt_ns_short(v[0] as f64),
                fmt_ns_short(v[v.len() - 1] as f64)
            ),
        ]);
    }
    rows
}

fn device_line(d: &serde_json::Value) -> String {
    match d {
        serde_json::Value::Object(map) => {
            let pick = |k: &str| {
                map.get(k).map(|v| {
                    v.as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| v.to_string())
                })
            };
            let name = pick("name").unwrap_or_else(|| "GPU".into());
            let mut extra: BTreeMap<&str, String> = BTreeMap::new();
            for k in [
                "index",
                "memory_bytes",
                "compute_capability",
                "pci_bus_id",
                "uuid",
            ] {
                if let Some(v) = pick(k) {
                    extra.insert(k, v);
                }
            }
            let extra: Vec<String> = extra.into_iter().map(|(k, v)| format!("{k} {v}")).collect();
            if extra.is_empty() {
                name
            } else {
                format!("{name} ({})", extra.join(", "))
            }
        }
        other => other.to_string(),
    }
}

/// POSIX shell quoting of one argument.
pub fn shell_quote(arg: &str) -> String {
    if !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%^".contains(c))
    {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', "'\\''"))
    }
}

/// A command line for a shell; the program is shown as the binary `cargo build --release`
/// makes (`target/release/gapscope`) when it was gapscope, wherever it ran from.
fn command_line(argv: &[String]) -> String {
    argv.iter()
        .enumerate()
        .map(|(i, a)| {
            let is_gapscope = Path::new(a).file_name().is_some_and(|f| f == "gapscope");
            if i == 0 && is_gapscope {
                "target/release/gapscope".to_string()
            } else {
                shell_path_arg(a)
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// [`shell_quote`], leaving the `~/` or `$TMPDIR/` a run folder's paths start with
/// (`store::paths`) for the shell to expand.
fn shell_path_arg(arg: &str) -> String {
    use crate::store::paths::{HOME, TMPDIR};
    if arg == HOME {
        return arg.to_string();
    }
    if let Some(rest) = arg.strip_prefix(HOME).and_then(|r| r.strip_prefix('/')) {
        return format!("{HOME}/{}", shell_quote(rest));
    }
    if let Some(rest) = arg.strip_prefix(TMPDIR).and_then(|r| r.strip_prefix('/')) {
        return format!("\"{TMPDIR}\"/{}", shell_quote(rest));
    }
    shell_quote(arg)
}

/// Largest experiment copy embedded in the report (an experiment file is a few KiB).
const MAX_EMBEDDED_BYTES: u64 = 256 << 10;

/// The commands that reproduce the run, then this report, and the run folder's
/// experiment copy: read only as a regular file inside the folder (never through a
/// link), fenced so that nothing in it ends the block.
pub fn reproduce_section(input: &RunView, report_cmd: &[String]) -> String {
    let m = &input.data.meta;
    let mut sh = String::new();
    match &m.git.revision {
        Some(rev) => {
            let _ = writeln!(sh, "git checkout {}", shell_quote(rev));
            if m.git.dirty == Some(true) {
                let _ = writeln!(
                    sh,
                    "# note: the run was made with uncommitted changes on top of this revision"
                );
            }
        }
        None => {
            let _ = writeln!(sh, "# the source revision was not recorded");
        }
    }
    let _ = writeln!(sh, "cargo build --release");
    let _ = writeln!(sh, "# the run, as it was started:");
    let _ = writeln!(sh, "{}", command_line(&m.command));
    let _ = writeln!(sh, "# this report:");
    let _ = writeln!(sh, "{}", command_line(report_cmd));
    let mut out = md_fence("sh", &sh);
    out.push('\n');
    match crate::fsx::read_in_dir(&input.data.dir, EXPERIMENT_COPY, MAX_EMBEDDED_BYTES) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let _ = writeln!(
                out,
                "\nThe experiment as it ran (the run folder's `{EXPERIMENT_COPY}`; pass it instead of \
                 the file named above if that one has changed or is not at hand):\n\n{}",
                md_fence("toml", &text)
            );
        }
        Err(e) if e.is_not_found() => {}
        Err(e) => {
            let _ = writeln!(
                out,
                "\nThe run folder's `{EXPERIMENT_COPY}` is not shown: {}",
                md_text(&e.to_string())
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_worker_setups_are_summarised_and_others_listed() {
        let setup: BTreeMap<String, u64> = [
            ("supraseal/gpu".to_string(), 7_000_000_000),
            ("supraseal/ss/rep3".to_string(), 3_000_000_000),
            ("supraseal/ss/rep5".to_string(), 1_000_000_000),
            ("supraseal/ss/rep7".to_string(), 2_000_000_000),
            ("odd/rep".to_string(), 5),
        ]
        .into();
        let rows = setup_rows(&setup);
        let text: Vec<String> = rows.iter().map(|r| r.join(" = ")).collect();
        assert_eq!(rows.len(), 3, "{text:?}");
        assert!(text
            .iter()
            .any(|t| t.starts_with("setup: supraseal/gpu = ")));
        assert!(text.iter().any(|t| t.starts_with("setup: odd/rep = ")));
        let w = text
            .iter()
            .find(|t| t.contains("each worker"))
            .expect("a per-worker row");
        assert!(
            w.starts_with("setup: supraseal/ss (each worker, 3 reps)"),
            "{w}"
        );
        assert!(w.contains(&format!("median {}", fmt_ns_short(2e9))), "{w}");
        assert!(
            w.contains(&fmt_ns_short(1e9)) && w.contains(&fmt_ns_short(3e9)),
            "{w}"
        );
    }

    #[test]
    fn quoting_leaves_plain_words_and_quotes_the_rest() {
        assert_eq!(shell_quote("results/x-1"), "results/x-1");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_path_arg("~/r s/x"), "~/'r s/x'");
        assert_eq!(shell_path_arg("$TMPDIR/lres"), "\"$TMPDIR\"/lres");
        assert_eq!(shell_path_arg("$TMPDIRx"), "'$TMPDIRx'");
        assert_eq!(shell_path_arg("~"), "~");
        assert_eq!(shell_path_arg("~x"), "'~x'");
    }

    #[test]
    fn commands_show_the_built_binary_and_quote_arguments() {
        let argv = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            command_line(&argv(&["/x/target/release/gapscope", "run", "a b.toml"])),
            "target/release/gapscope run 'a b.toml'"
        );
        assert_eq!(command_line(&argv(&["cargo", "run"])), "cargo run");
    }
}
