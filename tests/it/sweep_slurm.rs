//! A sweep on a real Slurm: the test starts a single-node cluster of its own (munged,
//! slurmctld and slurmd on localhost, from Debian's `munge` and `slurm-wlm`), submits a
//! sweep of 6 CPU-backend cells as a job array, requeues one cell while it runs, and
//! checks that every folder completes with no rep measured twice and that collect sees
//! them all. It is `#[ignore]`d, so that `cargo test` on a machine without Slurm lists it
//! as ignored rather than passed: `.ci/run` installs the packages and runs it with
//! `--ignored`, and run so it fails, saying why, where the cluster cannot start (no
//! packages, not root).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common;
use common::gapscope;

/// A cluster of one node for the length of the test; stopped on drop (also on panic).
struct Cluster {
    dir: PathBuf,
    conf: PathBuf,
    daemons: Vec<Child>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new("scontrol")
            .env("SLURM_CONF", &self.conf)
            .arg("shutdown")
            .output();
        for d in &mut self.daemons {
            let _ = d.kill();
            let _ = d.wait();
        }
        let _ = Command::new("munged")
            .arg("-s")
            .arg(format!(
                "--socket={}",
                self.dir.join("munge.sock").display()
            ))
            .output();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn which(cmd: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {cmd}"))
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Starts the cluster, or says why it cannot.
fn start(dir: &Path) -> Result<Cluster, String> {
    for cmd in [
        "munged",
        "slurmctld",
        "slurmd",
        "sbatch",
        "scontrol",
        "squeue",
    ] {
        if !which(cmd) {
            return Err(format!(
                "{cmd} is not installed (apt-get install slurm-wlm munge)"
            ));
        }
    }
    // SAFETY: getuid has no preconditions.
    if unsafe { libc::getuid() } != 0 {
        return Err("the daemons of a test cluster need root".into());
    }
    let key = Path::new("/etc/munge/munge.key");
    if !key.exists() {
        return Err("no /etc/munge/munge.key (the munge package makes it)".into());
    }
    for sub in ["state", "spool", "log"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    let sock = dir.join("munge.sock");
    let st = Command::new("munged")
        .arg("--force")
        .arg(format!("--socket={}", sock.display()))
        .arg(format!("--pid-file={}", dir.join("munged.pid").display()))
        .arg(format!(
            "--log-file={}",
            dir.join("log/munged.log").display()
        ))
        .arg(format!("--seed-file={}", dir.join("munged.seed").display()))
        .status()
        .map_err(|e| format!("munged: {e}"))?;
    if !st.success() {
        return Err(format!("munged failed to start ({st})"));
    }
    let host = String::from_utf8(Command::new("hostname").arg("-s").output().unwrap().stdout)
        .unwrap()
        .trim()
        .to_string();
    let conf = dir.join("slurm.conf");
    let d = dir.display();
    std::fs::write(
        &conf,
        format!(
            "ClusterName=gapscopetest\nSlurmctldHost={host}(127.0.0.1)\nSlurmUser=root\n\
             SlurmdUser=root\nAuthType=auth/munge\nCredType=cred/munge\nAuthInfo=socket={sock}\n\
             StateSaveLocation={d}/state\nSlurmdSpoolDir={d}/spool\n\
             SlurmctldPidFile={d}/slurmctld.pid\nSlurmdPidFile={d}/slurmd.pid\n\
             SlurmctldLogFile={d}/log/slurmctld.log\nSlurmdLogFile={d}/log/slurmd.log\n\
             SlurmctldPort={}\nSlurmdPort={}\nProctrackType=proctrack/linuxproc\n\
             TaskPlugin=task/none\nSelectType=select/cons_tres\nSelectTypeParameters=CR_Core\n\
             JobAcctGatherType=jobacct_gather/none\nAccountingStorageType=accounting_storage/none\n\
             MpiDefault=none\nReturnToService=2\nJobRequeue=1\nKillWait=5\n\
             NodeName={host} NodeAddr=127.0.0.1 CPUs={} State=UNKNOWN\n\
             PartitionName=test Nodes={host} Default=YES MaxTime=INFINITE State=UP\n",
            free_port(),
            free_port(),
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2),
            sock = sock.display(),
        ),
    )
    .unwrap();
    let mut cluster = Cluster {
        dir: dir.to_path_buf(),
        conf: conf.clone(),
        daemons: Vec::new(),
    };
    for daemon in ["slurmctld", "slurmd"] {
        let c = Command::new(daemon)
            .arg("-D")
            .arg("-f")
            .arg(&conf)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("{daemon}: {e}"))?;
        cluster.daemons.push(c);
    }
    let t0 = Instant::now();
    loop {
        let o = Command::new("sinfo")
            .env("SLURM_CONF", &conf)
            .args(["-h", "-o", "%T"])
            .output();
        if o.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "idle") {
            return Ok(cluster);
        }
        if t0.elapsed() > Duration::from_secs(30) {
            let log = std::fs::read_to_string(dir.join("log/slurmctld.log")).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(5).collect();
            return Err(format!(
                "the node did not become idle in 30 s; slurmctld.log ends: {tail:?}"
            ));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn slurm(conf: &Path, args: &[&str]) -> String {
    let o = Command::new(args[0])
        .env("SLURM_CONF", conf)
        .args(&args[1..])
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout).into_owned()
}

const EXP: &str = r#"name = "cells"
[workload]
circuit = "porep"
log2_constraints = 12
batch = 1
backend = "cpu"
[run]
reps = 4
warmups = 0
order = "interleaved"
[[variant]]
name = "baseline"
drop = "sync"
[[variant]]
name = "candidate"
drop = "async"
"#;

#[test]
#[ignore = "needs a Slurm test cluster (slurm-wlm, munge, root): .ci/run runs it with --ignored"]
fn a_slurm_job_array_runs_six_cells_and_a_requeued_cell_resumes_its_folder() {
    let tmp = tempfile::Builder::new()
        .prefix("gapscope-slurm")
        .tempdir_in("/tmp")
        .unwrap();
    let cluster = match start(&tmp.path().join("cluster")) {
        Ok(c) => c,
        Err(why) => panic!(
            "no Slurm test cluster here: {why}. This test needs one; `cargo test` without \
             --ignored leaves it out"
        ),
    };
    let conf = cluster.conf.clone();
    let work = tmp.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("exp.toml"), EXP).unwrap();
    let params = work.join("params");
    std::fs::write(
        work.join("sweep.toml"),
        format!(
            "name = \"six\"\nexperiment = \"exp.toml\"\nresults_root = \"root\"\n[axes]\n\
             batch = [1, 2, 3]\n\"variant.candidate.gadget\" = [\"lc\", \"add_to_lc\"]\n\
             [slurm]\nthrottle = 2\nparams_dir = \"{}\"\n",
            params.display()
        ),
    )
    .unwrap();
    // Params of the one size, made before the array starts (the cells share them).
    gapscope(&work)
        .env("GAPSCOPE_PARAMS_DIR", &params)
        .args(["run", "exp.toml", "--quiet", "--results-dir", "warm"])
        .assert()
        .success();
    let out = gapscope(&work)
        .env("SLURM_CONF", &conf)
        .args(["sweep", "run", "sweep.toml", "--slurm"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let out = String::from_utf8(out).unwrap();
    let job: String = out
        .split_whitespace()
        .skip_while(|w| *w != "job")
        .nth(1)
        .unwrap_or_else(|| panic!("no job id in {out}"))
        .to_string();
    let sweep_dir = work.join("root/six");
    // Requeue the first cell seen part-way through its reps.
    let t0 = Instant::now();
    let mut requeued = None;
    while requeued.is_none() {
        assert!(
            t0.elapsed() < Duration::from_secs(240),
            "no cell was seen part-way"
        );
        for i in 0..6usize {
            let folders =
                gapscope::sweep::cell_run_folders(&sweep_dir.join(format!("cell-{i:04}")));
            let Some(run) = folders.first() else { continue };
            let rows = std::fs::read_to_string(run.join("runs.csv")).unwrap_or_default();
            let measured = rows.lines().count().saturating_sub(1);
            let meta = std::fs::read_to_string(run.join("meta.json")).unwrap_or_default();
            if (1..8).contains(&measured) && !meta.contains("\"completed_utc\": \"") {
                // The array's task for cell i: one array, cells in order.
                let task = format!("{job}_{i}");
                slurm(&conf, &["scontrol", "requeue", &task]);
                std::thread::sleep(Duration::from_secs(1));
                slurm(
                    &conf,
                    &[
                        "scontrol",
                        "update",
                        &format!("jobid={task}"),
                        "StartTime=now",
                    ],
                );
                requeued = Some(i);
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let requeued = requeued.unwrap();
    // Wait for the array to drain. A requeued task waits for a begin time about two
    // minutes ahead; once it is pending again, move that to now (an update sent while it
    // is still being requeued is lost).
    let task = format!("{job}_{requeued}");
    loop {
        let q = slurm(&conf, &["squeue", "-h", "-r", "-j", &job, "-o", "%i|%r"]);
        if q.trim().is_empty() {
            break;
        }
        if q.lines().any(|l| l == format!("{task}|BeginTime")) {
            slurm(
                &conf,
                &[
                    "scontrol",
                    "update",
                    &format!("jobid={task}"),
                    "StartTime=now",
                ],
            );
        }
        assert!(
            t0.elapsed() < Duration::from_secs(600),
            "the array did not finish in 10 min"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let show = slurm(
        &conf,
        &["scontrol", "show", "job", &format!("{job}_{requeued}")],
    );
    let log = std::fs::read_to_string(sweep_dir.join(format!("logs/{job}_{requeued}.out")))
        .unwrap_or_default();
    assert!(
        show.contains("Restarts=1") || log.contains("attempt 2"),
        "cell {requeued} was not requeued:\n{show}\n{log}"
    );
    assert!(
        log.contains("resumed"),
        "the requeued task did not resume its folder:\n{log}"
    );
    // Every folder complete, each rep once.
    for i in 0..6usize {
        let folders = gapscope::sweep::cell_run_folders(&sweep_dir.join(format!("cell-{i:04}")));
        assert_eq!(folders.len(), 1, "cell {i}: {folders:?}");
        let d = gapscope::store::RunData::load(&folders[0]).unwrap();
        assert!(d.meta.completed_utc.is_some(), "cell {i} did not complete");
        // Measured reps, each (variant, iteration) once; a resumed process adds one
        // warm-up rep of its own.
        let measured: Vec<_> = d.runs.iter().filter(|r| !r.warmup).collect();
        let mut keys: Vec<(String, u32)> = measured
            .iter()
            .map(|r| (r.variant.clone(), r.iteration))
            .collect();
        let n = keys.len();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), n, "cell {i}: a rep was measured twice");
        assert_eq!(n, 8, "cell {i}: 4 reps x 2 variants");
    }
    // The submitted jobs and their scripts too are files the sweep lists.
    let unlisted = crate::sweep_cli::unlisted_sweep_files(&sweep_dir);
    assert!(
        unlisted.is_empty(),
        "files no hostile-input test plants: {unlisted:?}"
    );
    let status = gapscope(&work)
        .env("SLURM_CONF", &conf)
        .args(["sweep", "status", "sweep.toml"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let status = String::from_utf8(status).unwrap();
    assert!(status.contains("6 cells: 6 done"), "{status}");
    let collected = gapscope(&work)
        .args(["sweep", "collect", "sweep.toml"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    assert_eq!(String::from_utf8(collected).unwrap().lines().count(), 6);
    drop(cluster);
}
