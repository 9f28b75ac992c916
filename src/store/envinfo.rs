//! What machine and revision a run ran on (meta.json's host and git sections), and the
//! state of the machine at the start and the end of a run (meta.json's `drift`): load
//! average, CPU frequency and governor where the kernel exposes them, and each GPU's
//! clocks and throttle reasons (filled by telemetry, which holds NVML). A diff of two
//! runs prints them, since drift between runs is not in any interval.

use std::path::Path;

pub use super::drift::{CpuMhz, Drift, GpuClockState, MachineState};
use super::schema::{GitInfo, HostInfo};

/// Load average, CPU frequency and governor now; `gpus` from telemetry.
pub fn machine_state(gpus: Vec<GpuClockState>) -> MachineState {
    let load_avg = parse_loadavg(&read("/proc/loadavg"));
    let mut khz: Vec<f64> = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/sys/devices/system/cpu") {
        for e in dir.flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            if name.starts_with("cpu") && name[3..].bytes().all(|b| b.is_ascii_digit()) {
                let f = read(&format!("{}/cpufreq/scaling_cur_freq", e.path().display()));
                if let Ok(k) = f.trim().parse::<f64>() {
                    khz.push(k);
                }
            }
        }
    }
    let mut mhz: Vec<f64> = khz.iter().map(|k| k / 1000.0).collect();
    if mhz.is_empty() {
        mhz = cpuinfo_mhz(&read("/proc/cpuinfo"));
    }
    let cpu_mhz = crate::stats::median(&mhz).map(|median| CpuMhz {
        median,
        min: mhz.iter().copied().fold(f64::INFINITY, f64::min),
        max: mhz.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        cpus: mhz.len(),
    });
    let governor = Some(read(
        "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
    ))
    .map(|g| g.trim().to_string())
    .filter(|g| !g.is_empty());
    MachineState {
        utc: chrono::Utc::now().to_rfc3339(),
        load_avg,
        cpu_mhz,
        governor,
        gpus,
    }
}

fn parse_loadavg(text: &str) -> Option<[f64; 3]> {
    let v: Vec<f64> = text
        .split_whitespace()
        .take(3)
        .filter_map(|x| x.parse().ok())
        .collect();
    (v.len() == 3).then(|| [v[0], v[1], v[2]])
}

fn cpuinfo_mhz(text: &str) -> Vec<f64> {
    text.lines()
        .filter(|l| l.starts_with("cpu MHz"))
        .filter_map(|l| l.split(':').nth(1)?.trim().parse().ok())
        .collect()
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

pub fn host() -> HostInfo {
    let cpuinfo = read("/proc/cpuinfo");
    let cpu_model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    let memory_bytes = read("/proc/meminfo")
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|k| k.parse::<u64>().ok())
        .map(|k| k * 1024)
        .unwrap_or(0);
    let os = read("/etc/os-release")
        .lines()
        .find(|l| l.starts_with("PRETTY_NAME="))
        .map(|l| {
            l.trim_start_matches("PRETTY_NAME=")
                .trim_matches('"')
                .to_string()
        })
        .unwrap_or_else(|| std::env::consts::OS.to_string());
    HostInfo {
        hostname: read("/proc/sys/kernel/hostname").trim().to_string(),
        os,
        kernel: read("/proc/sys/kernel/osrelease").trim().to_string(),
        cpu_model,
        cpu_cores: std::thread::available_parallelism()
            .map(|n| n.get() as u32)
            .unwrap_or(1),
        memory_bytes,
    }
}

/// Revision of the source tree at `dir` (the binary's build revision if not a checkout).
pub fn git(dir: &Path) -> GitInfo {
    let run = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let revision =
        run(&["rev-parse", "HEAD"]).or_else(|| option_env!("GAPSCOPE_GIT_REV").map(str::to_string));
    let dirty = run(&["status", "--porcelain", "--untracked-files=no"]).map(|s| !s.is_empty());
    GitInfo { revision, dirty }
}

/// Resident set size of this process.
pub fn rss_bytes() -> Option<u64> {
    let statm = read("/proc/self/statm");
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * page.max(4096) as u64)
}

/// The CPUs this process may run on (its scheduler affinity), else the CPUs online.
pub fn allowed_cpus() -> usize {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity writes at most
    // size_of::<cpu_set_t>() bytes into it and pid 0 is this thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0 {
            let n = libc::CPU_COUNT(&set);
            if n > 0 {
                return n as usize;
            }
        }
    }
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_average_and_cpu_mhz_parse_and_old_meta_reads_back() {
        assert_eq!(
            parse_loadavg("2.99 2.26 1.17 3/456 7890\n"),
            Some([2.99, 2.26, 1.17])
        );
        assert_eq!(parse_loadavg(""), None);
        let info = "processor\t: 0\ncpu MHz\t\t: 2445.406\nprocessor\t: 1\ncpu MHz\t\t: 2500\n";
        assert_eq!(cpuinfo_mhz(info), vec![2445.406, 2500.0]);
        let now = machine_state(vec![]);
        assert!(now.load_avg.is_some(), "/proc/loadavg is readable on Linux");
        let back: Drift = serde_json::from_str(r#"{"start":{"utc":"x"}}"#).unwrap();
        assert!(back.end.is_none() && back.start.gpus.is_empty());
        assert!(allowed_cpus() >= 1);
    }
}
