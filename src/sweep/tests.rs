use std::path::Path;

use super::spec::{SlurmOptions, Target};
use super::*;

const EXP: &str = r#"
name = "tiny"
[workload]
circuit = "porep"
log2_constraints = 10
batch = 2
backend = "cpu"
[run]
reps = 2
warmups = 1
[[variant]]
name = "baseline"
drop = "sync"
[[variant]]
name = "candidate"
drop = "async"
"#;

fn sweep_file(dir: &Path, axes: &str) -> std::path::PathBuf {
    std::fs::write(dir.join("exp.toml"), EXP).unwrap();
    let p = dir.join("sweep.toml");
    std::fs::write(
        &p,
        format!("name = \"s\"\nexperiment = \"exp.toml\"\n[axes]\n{axes}\n"),
    )
    .unwrap();
    p
}

fn load(axes: &str) -> Result<(SweepSpec, Vec<Cell>), SweepError> {
    let tmp = tempfile::tempdir().unwrap();
    SweepSpec::load(&sweep_file(tmp.path(), axes))
}

#[test]
fn the_product_varies_the_last_axis_fastest_and_each_cell_is_its_experiment() {
    let (spec, cells) =
        load("log2_constraints = [10, 11]\n\"variant.candidate.drop\" = [\"async\", \"sync\"]\n\"run.reps\" = 3").unwrap();
    // [axes] is read in key order.
    assert_eq!(spec.axes.len(), 3);
    assert_eq!(cells.len(), 4);
    let labels: Vec<String> = cells.iter().map(|c| c.label()).collect();
    assert_eq!(
        labels,
        [
            "log2_constraints=10,run.reps=3,variant.candidate.drop=async",
            "log2_constraints=10,run.reps=3,variant.candidate.drop=sync",
            "log2_constraints=11,run.reps=3,variant.candidate.drop=async",
            "log2_constraints=11,run.reps=3,variant.candidate.drop=sync",
        ]
    );
    let e =
        crate::experiment::Experiment::parse(&cells[3].experiment_text, Path::new("x")).unwrap();
    assert_eq!(e.workload.log2_constraints, 11);
    assert_eq!(e.run.reps, 3);
    let v = e.resolved_variants();
    assert_eq!(v[1].prove.drop.as_str(), "sync");
    assert_eq!(v[0].prove.drop.as_str(), "sync");
    assert_eq!(cells[0].gpus, 0, "the CPU backend needs no GPU");
    assert_eq!(cells[0].reps, 4, "3 reps + 1 warm-up per variant");
}

#[test]
fn shorthands_and_paths_name_their_targets() {
    let t = |k: &str| {
        let (spec, _) = load(&format!("{k} = [1]")).unwrap_or_else(|e| panic!("{k}: {e}"));
        spec.axes[0].target.clone()
    };
    assert_eq!(t("batch"), Target::Workload("batch".into()));
    assert_eq!(t("\"run.warmups\""), Target::Run("warmups".into()));
    assert!(matches!(
        load("\"variant.*.drop\" = [\"sync\"]").unwrap().0.axes[0].target,
        Target::Variant(None, _)
    ));
    let (_, cells) = load("backend = [\"cuda\"]\ngpus = [2]").unwrap();
    assert_eq!(cells[0].gpus, 2, "a GPU cell asks for its variants' GPUs");
}

#[test]
fn bad_axes_are_refused_before_anything_runs() {
    let e = load("frobnicate = [1, 2]").unwrap_err().to_string();
    assert!(e.contains("unknown axis \"frobnicate\""), "{e}");
    let e = load("batch = []").unwrap_err().to_string();
    assert!(e.contains("no values"), "{e}");
    let e = load("").unwrap_err().to_string();
    assert!(e.contains("[axes] is empty"), "{e}");
    // A knob the experiment reader does not know: caught by validating each cell.
    let e = load("\"variant.*.dorp\" = [\"sync\"]")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("cell 0") && e.contains("not a valid experiment"),
        "{e}"
    );
    // A value out of range for the workload.
    let e = load("log2_constraints = [10, 99]").unwrap_err().to_string();
    assert!(e.contains("cell 1"), "{e}");
    let e = load("\"variant.nosuch.drop\" = [\"sync\"]")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("no variant named \"nosuch\"") && e.contains("baseline"),
        "{e}"
    );
    // 10 axes of 10 values: refused by count, without building them.
    let many: String = (0..10)
        .map(|i| format!("\"run.k{i}\" = [0,1,2,3,4,5,6,7,8,9]\n"))
        .collect();
    let e = load(&many).unwrap_err().to_string();
    assert!(e.contains("more than"), "{e}");
}

#[test]
fn materialising_twice_reuses_and_other_cells_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (spec, cells) = SweepSpec::load(&sweep_file(tmp.path(), "batch = [1, 2]")).unwrap();
    let sd = SweepDir::new(&tmp.path().join("root"), &spec.name);
    let m = sd.materialise(&spec, &cells).unwrap();
    assert_eq!(m.cells.len(), 2);
    assert!(sd.cell_dir(1).join("cell.toml").is_file());
    assert_eq!(sd.materialise(&spec, &cells).unwrap(), m);
    let (spec2, cells2) = SweepSpec::load(&sweep_file(tmp.path(), "batch = [1, 3]")).unwrap();
    let e = sd.materialise(&spec2, &cells2).unwrap_err().to_string();
    assert!(e.contains("other cells"), "{e}");
    assert!(status::folder_states(&sd, &m)
        .iter()
        .all(|s| s.folder == "pending"));
}

#[test]
fn the_slurm_script_throttles_asks_for_gpus_requeues_and_maps_tasks_to_cells() {
    // One manifest through the whole Slurm path (cells grouped by GPUs, the script, refused
    // values, a task's cell, squeue's lines), so that every check reads the same cells.
    let sd = SweepDir::new(Path::new("/shared/root"), "s");
    let m = Manifest {
        name: "s".into(),
        sweep_file: "s.toml".into(),
        experiment_file: "e.toml".into(),
        cells: (0..5)
            .map(|i| ManifestCell {
                index: i,
                label: format!("i={i}"),
                gpus: if i % 2 == 0 { 2 } else { 0 },
                experiment_sha256: String::new(),
            })
            .collect(),
    };
    let groups = by_gpus(&m.cells);
    assert_eq!(groups, vec![(0, vec![1, 3]), (2, vec![0, 2, 4])]);
    let opts = SlurmOptions {
        throttle: Some(2),
        partition: Some("gpu".into()),
        ..Default::default()
    };
    let s = slurm::script(&sd, &m, &opts, Path::new("/opt/gapscope"), 2, &groups[1].1);
    assert!(s.starts_with("#!/bin/bash\n"));
    for want in [
        "#SBATCH --array=0-2%2\n",
        "#SBATCH --gres=gpu:2\n",
        "#SBATCH --output=/shared/root/s/logs/%A_%a.out\n",
        "#SBATCH --requeue\n",
        "#SBATCH --open-mode=append\n",
        "#SBATCH --partition=gpu\n",
        "--task \"$SLURM_ARRAY_TASK_ID\" --cells 0,2,4",
        "exec '/opt/gapscope' sweep cell '/shared/root/s'",
    ] {
        assert!(s.contains(want), "missing {want:?} in\n{s}");
    }
    let cpu = slurm::script(
        &sd,
        &m,
        &SlurmOptions::default(),
        Path::new("g"),
        0,
        &groups[0].1,
    );
    assert!(
        !cpu.contains("--gres") && cpu.contains("--array=0-1\n"),
        "{cpu}"
    );
    // A value that would end its #SBATCH line (the rest running as shell code) is refused
    // before any script is written, naming the key.
    assert!(slurm::check_values(&sd, &m, &opts).is_ok());
    for (key, bad) in [
        (
            "partition",
            SlurmOptions {
                partition: Some("gpu\ntouch /tmp/owned".into()),
                ..Default::default()
            },
        ),
        (
            "account",
            SlurmOptions {
                account: Some("a\rb".into()),
                ..Default::default()
            },
        ),
        (
            "extra",
            SlurmOptions {
                extra: vec!["--qos=x\0y".into()],
                ..Default::default()
            },
        ),
    ] {
        let e = slurm::check_values(&sd, &m, &bad).unwrap_err().to_string();
        assert!(e.contains(key) && e.contains("one line"), "{e}");
    }
    assert_eq!(task_cell(2, Some(&[0, 2, 4])).unwrap(), 4);
    assert!(task_cell(3, Some(&[0, 2, 4])).is_err());
    let job = slurm::Job {
        job_id: "17".into(),
        gpus: 2,
        cells: vec![0, 2, 4],
        script: String::new(),
        submitted_utc: String::new(),
    };
    let t = slurm::parse_squeue_line("17_1|PENDING|BeginTime", &job).unwrap();
    assert_eq!(
        (t.cell, t.state.as_str(), t.reason.as_str()),
        (2, "PENDING", "BeginTime")
    );
    assert!(slurm::parse_squeue_line("18_1|RUNNING|None", &job).is_none());
    assert!(slurm::parse_squeue_line("17_[3-4%2]|PENDING|x", &job).is_none());
}

#[test]
fn the_k8s_job_is_indexed_with_retries_per_index_gpus_and_the_results_volume() {
    let sd = SweepDir::new(Path::new("/results"), "Big_Sweep");
    let m = Manifest {
        name: "Big_Sweep".into(),
        sweep_file: String::new(),
        experiment_file: String::new(),
        cells: (0..3)
            .map(|i| ManifestCell {
                index: i,
                label: String::new(),
                gpus: 1,
                experiment_sha256: String::new(),
            })
            .collect(),
    };
    let opts = spec::K8sOptions {
        image: Some("img:1".into()),
        claim: Some("pvc".into()),
        parallelism: Some(10),
        ..Default::default()
    };
    let docs = k8s::manifests(&sd, &m, &opts);
    assert_eq!(docs.len(), 1);
    let j = &docs[0];
    assert_eq!(j["metadata"]["name"], "gapscope-big-sweep-g1");
    assert_eq!(j["spec"]["completionMode"], "Indexed");
    assert_eq!(j["spec"]["completions"], 3);
    assert_eq!(j["spec"]["parallelism"], 3, "never more pods than cells");
    assert_eq!(j["spec"]["backoffLimitPerIndex"], 2);
    let pod = &j["spec"]["template"]["spec"];
    assert_eq!(
        pod["restartPolicy"], "Never",
        "backoffLimitPerIndex needs it"
    );
    let c = &pod["containers"][0];
    assert_eq!(c["resources"]["limits"]["nvidia.com/gpu"], 1);
    assert_eq!(c["volumeMounts"][0]["mountPath"], "/results");
    assert_eq!(
        pod["volumes"][0]["persistentVolumeClaim"]["claimName"],
        "pvc"
    );
    let cmd: Vec<&str> = c["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(
        cmd.windows(2)
            .any(|w| w == ["--task-env", "JOB_COMPLETION_INDEX"]),
        "{cmd:?}"
    );
    assert!(k8s::missing(&spec::K8sOptions::default()).len() == 2);
}

/// What is planted under a sweep folder's file name.
#[derive(Debug, Clone, Copy)]
enum Plant {
    LinkToSecret,
    Fifo,
    LinkToDevZero,
    /// A character device node (/dev/zero's numbers): made only where mknod is allowed
    /// (root); elsewhere the case says so and is left out.
    DevZeroNode,
    /// One byte past the cap, sparse: refused by its size, unread.
    Oversized,
}

impl Plant {
    const ALL: [Plant; 5] = [
        Plant::LinkToSecret,
        Plant::Fifo,
        Plant::LinkToDevZero,
        Plant::DevZeroNode,
        Plant::Oversized,
    ];

    fn reason(self) -> &'static str {
        match self {
            Plant::LinkToSecret | Plant::LinkToDevZero => "is a symbolic link",
            Plant::Fifo => "is a FIFO, not a regular file",
            Plant::DevZeroNode => "is a character device, not a regular file",
            Plant::Oversized => "more than gapscope reads from such a file",
        }
    }

    /// Puts the plant at `path` (removing what is there); false where it cannot be made.
    fn put(self, path: &Path, secret: &Path) -> bool {
        let _ = std::fs::remove_file(path);
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        match self {
            Plant::LinkToSecret => std::os::unix::fs::symlink(secret, path).unwrap(),
            Plant::LinkToDevZero => std::os::unix::fs::symlink("/dev/zero", path).unwrap(),
            // SAFETY: a valid NUL-terminated path; mkfifo has no other precondition.
            Plant::Fifo => assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0),
            Plant::DevZeroNode => {
                // SAFETY: as mkfifo; makedev only computes a number.
                let made =
                    unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o600, libc::makedev(1, 5)) };
                if made != 0 {
                    return false;
                }
            }
            Plant::Oversized => std::fs::File::create(path)
                .unwrap()
                .set_len(spec::MAX_STATE_BYTES + 1)
                .unwrap(),
        }
        true
    }
}

/// The readers of a sweep folder's `file`, each giving the text a user would see (an
/// error, or `sweep status`'s notes). A file added to [`SWEEP_FILES`] that is read back
/// fails here until its readers are named.
#[allow(clippy::type_complexity)]
fn sweep_readers<'a>(
    file: &SweepFile,
    spec: &'a SweepSpec,
    cells: &'a [Cell],
) -> Vec<(&'static str, Box<dyn Fn(&SweepDir) -> String + 'a>)> {
    let err = |r: Result<String>| match r {
        Ok(v) => format!("read without an error: {v}"),
        Err(e) => format!("{e:#}"),
    };
    let opts = CellOptions {
        params_dir: std::env::temp_dir(),
        progress: false,
        command: Vec::new(),
    };
    let run_cell_1 = move |sd: &SweepDir| err(run_cell(sd, 1, &opts).map(|o| format!("{o:?}")));
    match file.name {
        MANIFEST => vec![
            (
                "manifest",
                Box::new(move |sd: &SweepDir| err(sd.manifest().map(|m| m.name))),
            ),
            (
                "materialise",
                Box::new(move |sd: &SweepDir| err(sd.materialise(spec, cells).map(|m| m.name))),
            ),
            ("run_cell", Box::new(run_cell_1)),
        ],
        CELL_TOML => vec![
            (
                "materialise",
                Box::new(move |sd: &SweepDir| err(sd.materialise(spec, cells).map(|m| m.name))),
            ),
            ("run_cell", Box::new(run_cell_1)),
        ],
        slurm::JOBS => vec![(
            "status",
            Box::new(|sd: &SweepDir| {
                let (states, notes) = slurm::task_states(sd);
                assert!(states.is_empty());
                notes.join("\n")
            }),
        )],
        other => panic!("{other} is read back, and no reader of it is tested here"),
    }
}

#[test]
fn every_file_a_sweep_reads_back_replaced_by_a_link_a_fifo_a_device_or_an_oversized_file_is_refused(
) {
    let tmp = tempfile::tempdir().unwrap();
    let secret = tmp.path().join("secret");
    std::fs::write(&secret, "API_TOKEN=hunter2").unwrap();
    let (spec, cells) = SweepSpec::load(&sweep_file(tmp.path(), "batch = [1, 2]")).unwrap();
    let mut failures = Vec::new();
    let mut planted = 0;
    for file in SWEEP_FILES.iter().filter(|f| f.read_back) {
        for p in Plant::ALL {
            let sd = SweepDir::new(&tmp.path().join(format!("{}-{p:?}", file.name)), &spec.name);
            sd.materialise(&spec, &cells).unwrap();
            let path = match file.at {
                SweepAt::Sweep => sd.dir.join(file.name),
                SweepAt::Cell => sd.cell_dir(1).join(file.name),
            };
            if !p.put(&path, &secret) {
                eprintln!(
                    "{p:?} not made under {} (mknod needs root): left out",
                    file.name
                );
                continue;
            }
            planted += 1;
            for (reader, read) in sweep_readers(file, &spec, &cells) {
                let text = read(&sd);
                if !text.contains(p.reason()) || text.contains("hunter2") {
                    failures.push(format!("{reader} of {} as {p:?}: {text}", file.name));
                }
            }
        }
    }
    assert!(planted >= 12, "{planted} plants made");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
