//! What machine and revision a run ran on (meta.json's host and git sections).

use std::path::Path;

use super::schema::{GitInfo, HostInfo};

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
