//! The host fingerprint: what makes two runs' numbers comparable, from a run's meta.json
//! (the history keys its series by it; a diff of two run folders refuses two hosts).
//! CPU model, cores, GPU models and driver, and memory in half-octave buckets, so that a
//! reboot (MemTotal moves by megabytes) or a new hostname (cloud VMs) is the same host,
//! and a driver upgrade or another GPU is a new one.

use sha2::Digest;

use crate::store::Meta;

/// A host as the history keys it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Host {
    pub id: String,
    pub fingerprint: String,
    pub cpu_model: String,
    pub cpu_cores: u32,
    pub gpu_model: String,
    pub gpu_driver: String,
    pub memory_bucket: String,
    pub hostname: String,
}

/// Memory rounded to the nearest half octave: 2^(k/2) GiB, shown whole.
pub fn memory_bucket(bytes: u64) -> String {
    if bytes == 0 {
        return "unknown".into();
    }
    let gib = bytes as f64 / (1u64 << 30) as f64;
    let k = (gib.log2() * 2.0).round();
    format!("{:.0} GiB", 2f64.powf(k / 2.0))
}

/// The GPUs a run saw: "2x NVIDIA H200", or "none".
fn gpu_model(meta: &Meta) -> String {
    if !meta.gpu.available || meta.gpu.devices.is_empty() {
        return "none".into();
    }
    let mut names: Vec<String> = meta
        .gpu
        .devices
        .iter()
        .map(|d| {
            d.get("name")
                .and_then(|n| n.as_str())
                .unwrap_or("unknown GPU")
                .to_string()
        })
        .collect();
    names.sort();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < names.len() {
        let j = names[i..].iter().take_while(|n| **n == names[i]).count();
        out.push(format!("{j}x {}", names[i]));
        i += j;
    }
    out.join(" + ")
}

pub fn of(meta: &Meta) -> Host {
    let h = &meta.host;
    let gpu_model = gpu_model(meta);
    let gpu_driver = if gpu_model == "none" {
        "none".to_string()
    } else {
        meta.gpu
            .driver_version
            .clone()
            .unwrap_or_else(|| "unknown".into())
    };
    let memory_bucket = memory_bucket(h.memory_bytes);
    let fingerprint = format!(
        "cpu={};cores={};gpu={};driver={};memory={}",
        h.cpu_model, h.cpu_cores, gpu_model, gpu_driver, memory_bucket
    );
    let digest = sha2::Sha256::digest(fingerprint.as_bytes());
    let id = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
    Host {
        id,
        fingerprint,
        cpu_model: h.cpu_model.clone(),
        cpu_cores: h.cpu_cores,
        gpu_model,
        gpu_driver,
        memory_bucket,
        hostname: h.hostname.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reboot_keeps_the_host_and_a_driver_change_does_not() {
        let mut a = Meta::sample();
        a.host.cpu_model = "Xeon".into();
        a.host.cpu_cores = 32;
        a.host.memory_bytes = 270_334_464_000;
        a.host.hostname = "vm-1".into();
        let mut b = a.clone();
        b.host.memory_bytes -= 300 << 20;
        b.host.hostname = "vm-2".into();
        assert_eq!(of(&a).id, of(&b).id);
        assert_eq!(of(&a).memory_bucket, "256 GiB");
        let mut c = a.clone();
        c.gpu.available = true;
        c.gpu.devices = vec![serde_json::json!({"name": "NVIDIA H200"})];
        c.gpu.driver_version = Some("580.1".into());
        let mut d = c.clone();
        d.gpu.driver_version = Some("590.2".into());
        assert_ne!(of(&a).id, of(&c).id);
        assert_ne!(of(&c).id, of(&d).id);
        assert_eq!(of(&c).gpu_model, "1x NVIDIA H200");
    }

    #[test]
    fn memory_buckets_sit_on_common_sizes() {
        assert_eq!(memory_bucket(16 * (1 << 30) - (400 << 20)), "16 GiB");
        assert_eq!(memory_bucket(64 * (1 << 30) - (900 << 20)), "64 GiB");
        assert_eq!(memory_bucket(0), "unknown");
    }
}
