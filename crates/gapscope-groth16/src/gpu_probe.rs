//! Can this process run GPU code? Asked by the GPU backends before they hand work to code
//! that aborts the process on CUDA errors (upstream supraseal), so that the usual ways a
//! GPU run goes wrong — no driver, a driver older than this binary's CUDA runtime, no
//! device, machine code that does not load on the device — are an error that names the
//! cause instead of a crash.
//!
//! The questions are answered by cuda/gpu_probe.cu (compiled by build.rs where nvcc is
//! found, cfg `gapscope_cuda`), through the CUDA runtime linked into this binary, i.e. the
//! runtime the prover itself uses. A build without GPU code answers [`GpuError::NotBuilt`].

/// One CUDA device, as the runtime sees it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct GpuDevice {
    pub index: usize,
    pub name: String,
    pub compute_capability: (u32, u32),
    pub cooperative_launch: bool,
    pub multiprocessors: u32,
    pub total_bytes: u64,
    pub free_bytes: u64,
    pub pci_bus: u32,
}

impl GpuDevice {
    /// sppark (and so supraseal) only uses devices of compute capability 7.0 or newer that
    /// support cooperative launch; others are skipped as if absent.
    pub fn usable_by_sppark(&self) -> bool {
        self.compute_capability.0 >= 7 && self.cooperative_launch
    }
}

/// What the runtime reports: versions and devices.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct GpuReport {
    /// CUDA version the driver supports, as (major, minor).
    pub driver_cuda: (u32, u32),
    /// CUDA version of the runtime linked into this binary.
    pub runtime_cuda: (u32, u32),
    pub devices: Vec<GpuDevice>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GpuError {
    #[error(
        "this build has no GPU code (nvcc was not found when it was built): install the toolkit \
         with `eval \"$(scripts/cuda-toolkit.sh)\"` and rebuild with the GPU features"
    )]
    NotBuilt,
    #[error(
        "no NVIDIA driver on this machine (libcuda.so.1 not loaded: {0}); run on the GPU host"
    )]
    NoDriver(String),
    #[error(
        "the NVIDIA driver supports CUDA {}.{} but this binary's runtime is CUDA {}.{}: \
         update the driver (CUDA 13 needs driver 580 or newer) ({message})",
        driver.0, driver.1, runtime.0, runtime.1
    )]
    DriverTooOld {
        driver: (u32, u32),
        runtime: (u32, u32),
        message: String,
    },
    #[error("no CUDA device visible ({0}); check CUDA_VISIBLE_DEVICES and nvidia-smi")]
    NoDevice(String),
    #[error(
        "no GPU usable by sppark/supraseal (needs compute capability 7.0+ with cooperative \
         launch); found: {0}"
    )]
    Unsupported(String),
    #[error(
        "a test kernel of this binary does not run on GPU {index} ({name}, sm_{}{}): {message}; \
         the binary carries sm_90/sm_80/sm_75/sm_120 code and compute_90/compute_100 PTX, and \
         PTX needs a driver at least as new as the toolkit that built it",
        cc.0, cc.1
    )]
    Launch {
        index: usize,
        name: String,
        cc: (u32, u32),
        message: String,
    },
    #[error("{call} failed: {message}")]
    Cuda {
        call: &'static str,
        code: i32,
        message: String,
    },
}

/// CUDA error codes the probe distinguishes (cuda_runtime_api.h, `cudaError`).
#[cfg_attr(not(gapscope_cuda), allow(dead_code))]
mod code {
    pub const INSUFFICIENT_DRIVER: i32 = 35;
    pub const STUB_LIBRARY: i32 = 34;
    pub const NO_DEVICE: i32 = 100;
}

#[cfg_attr(not(gapscope_cuda), allow(dead_code))]
fn version(v: i32) -> (u32, u32) {
    let v = v.max(0) as u32;
    (v / 1000, (v % 1000) / 10)
}

/// Classifies a failed device count.
#[cfg_attr(not(gapscope_cuda), allow(dead_code))]
fn count_error(code: i32, message: String, driver: i32, runtime: i32) -> GpuError {
    match code {
        _ if driver == 0 => GpuError::NoDriver(message),
        code::STUB_LIBRARY => GpuError::NoDriver(message),
        code::INSUFFICIENT_DRIVER => GpuError::DriverTooOld {
            driver: version(driver),
            runtime: version(runtime),
            message,
        },
        code::NO_DEVICE => GpuError::NoDevice(message),
        _ => GpuError::Cuda {
            call: "cudaGetDeviceCount",
            code,
            message,
        },
    }
}

/// Versions and every device. Cheap after the first call of a process (which loads the
/// driver and creates a context per device).
pub fn probe() -> Result<GpuReport, GpuError> {
    imp::probe()
}

/// Devices that sppark would use, or why there are none.
pub fn usable_devices() -> Result<(GpuReport, Vec<GpuDevice>), GpuError> {
    let r = probe()?;
    let usable: Vec<GpuDevice> = r
        .devices
        .iter()
        .filter(|d| d.usable_by_sppark())
        .cloned()
        .collect();
    if usable.is_empty() {
        let found: Vec<String> = r
            .devices
            .iter()
            .map(|d| {
                format!(
                    "GPU {} {} (sm_{}{}, cooperative launch {})",
                    d.index,
                    d.name,
                    d.compute_capability.0,
                    d.compute_capability.1,
                    if d.cooperative_launch { "yes" } else { "no" }
                )
            })
            .collect();
        return Err(GpuError::Unsupported(found.join(", ")));
    }
    Ok((r, usable))
}

/// Runs a small kernel of this binary on `device` and checks its output.
pub fn launch_check(device: &GpuDevice) -> Result<(), GpuError> {
    imp::launch(device.index as i32).map_err(|(_, message)| GpuError::Launch {
        index: device.index,
        name: device.name.clone(),
        cc: device.compute_capability,
        message,
    })
}

/// Free and total bytes of `device` now (one `cudaMemGetInfo`; no enumeration).
pub fn memory(device: &GpuDevice) -> Result<(u64, u64), GpuError> {
    imp::memory(device.index as i32).map_err(|(code, message)| GpuError::Cuda {
        call: "cudaMemGetInfo",
        code,
        message: format!("GPU {} ({}): {message}", device.index, device.name),
    })
}

#[cfg(gapscope_cuda)]
mod imp {
    use std::ffi::{c_char, c_int, c_ulonglong, CStr};

    use super::{count_error, version, GpuDevice, GpuError, GpuReport};

    #[repr(C)]
    struct Status {
        code: c_int,
        message: [c_char; 240],
    }

    #[repr(C)]
    struct Versions {
        driver: c_int,
        runtime: c_int,
    }

    #[repr(C)]
    struct Device {
        name: [c_char; 256],
        major: c_int,
        minor: c_int,
        cooperative_launch: c_int,
        multiprocessors: c_int,
        total_bytes: c_ulonglong,
        free_bytes: c_ulonglong,
        pci_bus: c_int,
        pci_device: c_int,
    }

    extern "C" {
        fn gapscope_gpu_versions_get(out: *mut Versions) -> Status;
        fn gapscope_gpu_device_count(count: *mut c_int) -> Status;
        fn gapscope_gpu_device_get(device: c_int, out: *mut Device) -> Status;
        fn gapscope_gpu_mem_get(
            device: c_int,
            free: *mut c_ulonglong,
            total: *mut c_ulonglong,
        ) -> Status;
        fn gapscope_gpu_launch_probe(device: c_int) -> Status;
    }

    fn text(buf: &[c_char]) -> String {
        // The C side always NUL-terminates within the buffer; guard anyway.
        if !buf.contains(&0) {
            return String::from("(unterminated message)");
        }
        // SAFETY: `buf` holds a NUL within its bounds (checked above).
        unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    }

    fn check(s: Status) -> Result<(), (i32, String)> {
        if s.code == 0 {
            Ok(())
        } else {
            Err((s.code, text(&s.message)))
        }
    }

    pub(super) fn probe() -> Result<GpuReport, GpuError> {
        let mut v = Versions {
            driver: 0,
            runtime: 0,
        };
        // SAFETY: `v` is a valid, writable Versions laid out as the C struct.
        // A runtime that cannot even read versions has no driver to talk to.
        check(unsafe { gapscope_gpu_versions_get(&mut v) })
            .map_err(|(code, message)| count_error(code, message, 0, v.runtime))?;
        let mut n: c_int = 0;
        // SAFETY: `n` is a valid, writable int.
        check(unsafe { gapscope_gpu_device_count(&mut n) })
            .map_err(|(code, message)| count_error(code, message, v.driver, v.runtime))?;
        if n <= 0 {
            return Err(GpuError::NoDevice("cudaGetDeviceCount returned 0".into()));
        }
        let mut devices = Vec::with_capacity(n as usize);
        for i in 0..n {
            // SAFETY: Device is plain old data; all-zero is a valid value.
            let mut d: Device = unsafe { std::mem::zeroed() };
            // SAFETY: `d` is a valid, writable Device laid out as the C struct.
            check(unsafe { gapscope_gpu_device_get(i, &mut d) }).map_err(|(code, message)| {
                GpuError::Cuda {
                    call: "cudaGetDeviceProperties/cudaMemGetInfo",
                    code,
                    message: format!("GPU {i}: {message}"),
                }
            })?;
            devices.push(GpuDevice {
                index: i as usize,
                name: text(&d.name),
                compute_capability: (d.major.max(0) as u32, d.minor.max(0) as u32),
                cooperative_launch: d.cooperative_launch != 0,
                multiprocessors: d.multiprocessors.max(0) as u32,
                total_bytes: d.total_bytes,
                free_bytes: d.free_bytes,
                pci_bus: d.pci_bus.max(0) as u32,
            });
        }
        Ok(GpuReport {
            driver_cuda: version(v.driver),
            runtime_cuda: version(v.runtime),
            devices,
        })
    }

    pub(super) fn memory(device: i32) -> Result<(u64, u64), (i32, String)> {
        let (mut free, mut total): (c_ulonglong, c_ulonglong) = (0, 0);
        // SAFETY: both pointers are valid, writable integers.
        check(unsafe { gapscope_gpu_mem_get(device, &mut free, &mut total) })?;
        Ok((free, total))
    }

    pub(super) fn launch(device: i32) -> Result<(), (i32, String)> {
        // SAFETY: no pointers cross; an invalid device id is reported as a status.
        check(unsafe { gapscope_gpu_launch_probe(device) })
    }
}

#[cfg(not(gapscope_cuda))]
mod imp {
    use super::{GpuError, GpuReport};

    pub(super) fn probe() -> Result<GpuReport, GpuError> {
        Err(GpuError::NotBuilt)
    }

    pub(super) fn memory(_device: i32) -> Result<(u64, u64), (i32, String)> {
        Err((-1, GpuError::NotBuilt.to_string()))
    }

    pub(super) fn launch(_device: i32) -> Result<(), (i32, String)> {
        Err((-1, GpuError::NotBuilt.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn count_errors_name_their_cause() {
        let e = count_error(35, "cudaErrorInsufficientDriver: x".into(), 12080, 13000);
        assert_eq!(
            e,
            GpuError::DriverTooOld {
                driver: (12, 8),
                runtime: (13, 0),
                message: "cudaErrorInsufficientDriver: x".into()
            }
        );
        let m = e.to_string();
        assert!(
            m.contains("CUDA 12.8") && m.contains("CUDA 13.0") && m.contains("580"),
            "{m}"
        );
        // No driver at all: cudart reports 35 too, but the driver version is 0.
        assert!(matches!(
            count_error(35, "m".into(), 0, 13000),
            GpuError::NoDriver(_)
        ));
        assert!(matches!(
            count_error(34, "stub".into(), 13000, 13000),
            GpuError::NoDriver(_)
        ));
        assert!(matches!(
            count_error(100, "none".into(), 13000, 13000),
            GpuError::NoDevice(_)
        ));
        let other = count_error(999, "cudaErrorUnknown: unknown error".into(), 13000, 13000);
        assert!(
            other
                .to_string()
                .contains("cudaGetDeviceCount failed: cudaErrorUnknown"),
            "{other}"
        );
    }

    #[test]
    fn devices_sppark_skips_are_reported_as_unsupported() {
        let d = |cc: (u32, u32), coop| GpuDevice {
            index: 0,
            name: "X".into(),
            compute_capability: cc,
            cooperative_launch: coop,
            multiprocessors: 1,
            total_bytes: 1,
            free_bytes: 1,
            pci_bus: 0,
        };
        assert!(d((9, 0), true).usable_by_sppark());
        assert!(!d((6, 1), true).usable_by_sppark());
        assert!(!d((9, 0), false).usable_by_sppark());
    }

    /// On a machine without an NVIDIA driver (build machines, CI) the probe must report
    /// that, not panic or claim a device. On a GPU host it must find one.
    #[test]
    fn probe_agrees_with_the_machine() {
        let has_driver = std::path::Path::new("/dev/nvidiactl").exists();
        match probe() {
            Ok(r) => {
                assert!(
                    has_driver,
                    "a device reported without /dev/nvidiactl: {r:?}"
                );
                assert!(!r.devices.is_empty());
                assert!(r.runtime_cuda.0 >= 12, "{r:?}");
            }
            Err(e) => {
                let m = e.to_string();
                assert!(!m.is_empty());
                if cfg!(gapscope_cuda) {
                    if !has_driver {
                        assert!(
                            matches!(e, GpuError::NoDriver(_) | GpuError::NoDevice(_)),
                            "{e:?}"
                        );
                    }
                } else {
                    assert_eq!(e, GpuError::NotBuilt);
                    assert!(m.contains("scripts/cuda-toolkit.sh"), "{m}");
                }
            }
        }
    }
}
