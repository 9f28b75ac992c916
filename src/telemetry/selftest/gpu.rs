//! The GPU side of the self-test: NVRTC-compiled kernels, copies and a memset through
//! cudarc, inside the canonical span names. Everything here needs the CUDA driver (or
//! NVRTC, for compiling); the checks of what it recorded are in [`super::checks`].

use std::path::Path;
use std::sync::Arc;

use super::checks::{expected_value, x_of};
use super::spans;
use super::SelftestOptions;
use crate::telemetry::dylib;
use crate::trace::Span;

/// CUDA C of the self-test: a copy-bound saxpy and an arithmetic-bound spin.
const KERNELS: &str = r#"
extern "C" __global__ void saxpy(float a, const float *x, float *y, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" __global__ void spin(float *y, unsigned n, unsigned iters) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = y[i];
        for (unsigned k = 0; k < iters; ++k) v = v * 0.999f + 0.001f;
        y[i] = v;
    }
}
"#;

/// Compiles [`KERNELS`] with NVRTC (opened at run time, with its builtins library,
/// which libnvrtc itself only finds on the loader path).
fn compile_kernels() -> Result<cudarc::nvrtc::Ptx, String> {
    let dirs = dylib::cuda_lib_dirs();
    let at = dylib::preload(&["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"], &dirs)
        .map_err(|e| format!("NVRTC: {e}"))?;
    let mut builtins_dirs = dirs.clone();
    if let Some(parent) = Path::new(&at)
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
    {
        builtins_dirs.insert(0, parent.to_path_buf());
    }
    // Its versioned name (libnvrtc-builtins.so.13.0) follows the toolkit's minor version.
    let builtins: Vec<String> = builtins_dirs
        .iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flatten()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("libnvrtc-builtins.so.") && !n.contains(".alt."))
        .collect();
    let names: Vec<&str> = builtins.iter().map(String::as_str).collect();
    // Not fatal: a loader path that has libnvrtc has its builtins too.
    let _ = dylib::preload(&names, &builtins_dirs);
    dylib::guard("NVRTC", || {
        // SAFETY: only probes for the library.
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            return Err("libnvrtc opened but cudarc cannot find it by name".into());
        }
        cudarc::nvrtc::compile_ptx(KERNELS).map_err(|e| format!("NVRTC compile: {e:?}"))
    })
}

/// GPU side of the self-test (cudarc: driver + NVRTC).
pub(super) struct Gpu {
    stream: Arc<cudarc::driver::CudaStream>,
    ctx: Arc<cudarc::driver::CudaContext>,
    saxpy: cudarc::driver::CudaFunction,
    spin: cudarc::driver::CudaFunction,
}

pub(super) fn open_gpu() -> Result<Gpu, String> {
    dylib::guard("CUDA driver", || {
        // SAFETY: only probes for the library.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err("libcuda.so.1 not found: no NVIDIA driver".into());
        }
        Ok(())
    })?;
    let ptx = compile_kernels()?;
    dylib::guard("CUDA setup", || {
        let ctx =
            cudarc::driver::CudaContext::new(0).map_err(|e| format!("CUDA context: {e:?}"))?;
        let module = ctx
            .load_module(ptx)
            .map_err(|e| format!("module load: {e:?}"))?;
        let saxpy = module
            .load_function("saxpy")
            .map_err(|e| format!("{e:?}"))?;
        let spin = module.load_function("spin").map_err(|e| format!("{e:?}"))?;
        Ok(Gpu {
            stream: ctx.default_stream(),
            ctx,
            saxpy,
            spin,
        })
    })
}

/// One rep of GPU work in the canonical span names; returns the prove trace (also when
/// the GPU failed midway) and whether the result matched the host reference.
pub(super) fn gpu_rep(gpu: &Gpu, o: &SelftestOptions) -> (u64, Result<bool, String>) {
    use cudarc::driver::{LaunchConfig, PushKernelArg};
    let e = |what: &'static str| move |err: cudarc::driver::DriverError| format!("{what}: {err:?}");
    let n = o.elements;
    let x: Vec<f32> = (0..n as usize).map(x_of).collect();
    let ones = vec![1.0f32; n as usize];
    let prove = Span::enter(spans::PROVE);
    let trace = prove.trace();
    let result = (|| -> Result<Vec<f32>, String> {
        let _g = Span::enter(spans::GPU_PROVE);
        let (x_dev, mut y_dev) = {
            let s = Span::enter("h2d");
            s.set_attr("bytes", 2 * n as u64 * 4);
            let x_dev = gpu.stream.clone_htod(&x).map_err(e("HtoD"))?;
            let y_dev = gpu.stream.clone_htod(&ones).map_err(e("HtoD"))?;
            gpu.stream.synchronize().map_err(e("sync"))?;
            (x_dev, y_dev)
        };
        {
            let s = Span::enter("memset");
            // alloc, not alloc_zeros: that would add a second memset record.
            // SAFETY: the buffer is only written (by the memset) before it is freed.
            let mut scratch = unsafe { gpu.stream.alloc::<f32>(n as usize) }.map_err(e("alloc"))?;
            gpu.stream.memset_zeros(&mut scratch).map_err(e("memset"))?;
            gpu.stream.synchronize().map_err(e("sync"))?;
            s.set_attr("bytes", n as u64 * 4);
        }
        {
            let s = Span::enter(spans::KERNELS);
            let timing = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
            let start = gpu.ctx.new_event(timing).map_err(e("event"))?;
            let stop = gpu.ctx.new_event(timing).map_err(e("event"))?;
            start.record(&gpu.stream).map_err(e("event record"))?;
            let cfg = LaunchConfig::for_num_elems(n);
            let a = 2.0f32;
            for _ in 0..o.launches {
                let mut b = gpu.stream.launch_builder(&gpu.saxpy);
                b.arg(&a).arg(&x_dev).arg(&mut y_dev).arg(&n);
                // SAFETY: argument types match the kernel's signature; buffers hold n floats.
                unsafe { b.launch(cfg) }.map_err(e("launch saxpy"))?;
                let mut b = gpu.stream.launch_builder(&gpu.spin);
                b.arg(&mut y_dev).arg(&n).arg(&o.spin_iters);
                // SAFETY: as above.
                unsafe { b.launch(cfg) }.map_err(e("launch spin"))?;
            }
            stop.record(&gpu.stream).map_err(e("event record"))?;
            let ms = start.elapsed_ms(&stop).map_err(e("event elapsed"))?;
            s.set_attr("gpu_ms", ms as f64);
            s.set_attr("launches", 2 * o.launches);
        }
        {
            let _s = Span::enter("host_gap");
            std::thread::sleep(o.host_gap);
        }
        let y = {
            let _s = Span::enter("d2h");
            gpu.stream.clone_dtoh(&y_dev).map_err(e("DtoH"))?
        };
        let _d = Span::enter(spans::DROP);
        drop((x_dev, y_dev));
        Ok(y)
    })();
    drop(prove);
    let ok = result.map(|y| {
        [0usize, 1, 2, 3, 4, 5, 6, n as usize / 2, n as usize - 1]
            .iter()
            .all(|&i| {
                let want = expected_value(x_of(i), o.launches, o.spin_iters);
                (y[i] - want).abs() <= 1e-3 * want.abs().max(1.0)
            })
    });
    (trace, ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// NVRTC needs no GPU: wherever a toolkit is found (`CUDA_PATH`, /usr/local/cuda)
    /// the self-test's kernels must compile; elsewhere the reason names libnvrtc.
    #[test]
    fn the_selftest_kernels_compile_where_nvrtc_is_found() {
        match compile_kernels() {
            Ok(ptx) => {
                let src = ptx.to_src();
                assert!(
                    src.contains(".entry saxpy") && src.contains(".entry spin"),
                    "{src}"
                );
            }
            Err(e) => assert!(e.starts_with("NVRTC: libnvrtc.so.13 not found"), "{e}"),
        }
    }
}
