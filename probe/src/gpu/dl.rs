//! Process-wide handles on the NVIDIA driver libraries.
//!
//! Each library is opened once and never closed: function pointers taken from it stay valid
//! for the life of the process, and unloading libcuda after cuInit is known to crash at exit.

use libloading::Library;
use std::sync::OnceLock;

static NVML: OnceLock<Result<Library, String>> = OnceLock::new();
static CUDA: OnceLock<Result<Library, String>> = OnceLock::new();

pub const NVML_LIB: &str = "libnvidia-ml.so.1";
pub const CUDA_LIB: &str = "libcuda.so.1";

fn open(name: &str) -> Result<Library, String> {
    // SAFETY: loading runs the library's initialisers. libnvidia-ml and libcuda are the
    // NVIDIA driver's own libraries, whose initialisers only set up internal state; we load
    // them by their versioned sonames, as the driver installs them.
    unsafe { Library::new(name) }.map_err(|e| describe(name, &e))
}

/// libloading's Display says only "dlopen failed"; the dlerror text is in the source.
fn describe(what: &str, e: &libloading::Error) -> String {
    use std::error::Error;
    match e.source() {
        Some(src) if src.to_string().contains(what) => src.to_string(),
        Some(src) => format!("{what}: {src}"),
        None => format!("{what}: {e}"),
    }
}

pub fn nvml() -> Result<&'static Library, String> {
    NVML.get_or_init(|| open(NVML_LIB))
        .as_ref()
        .map_err(Clone::clone)
}

pub fn cuda() -> Result<&'static Library, String> {
    CUDA.get_or_init(|| open(CUDA_LIB))
        .as_ref()
        .map_err(Clone::clone)
}

/// Look up a symbol and copy out the function pointer. `T` must be the exact `extern "C"`
/// function pointer type of the symbol as the vendor header declares it.
///
/// # Safety
/// The caller promises that `T` matches the symbol's real signature.
pub unsafe fn sym<T: Copy>(lib: &'static Library, name: &str) -> Result<T, String> {
    // SAFETY: the library is never unloaded (static), so the copied pointer stays valid; the
    // type is the caller's promise (see above).
    unsafe { lib.get::<T>(name.as_bytes()) }
        .map(|s| *s)
        .map_err(|e| describe(name, &e))
}
