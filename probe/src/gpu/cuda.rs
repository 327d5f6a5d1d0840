//! The CUDA driver API (libcuda.so.1) through its C ABI, loaded at run time: device
//! enumeration and the attributes the GPUDirect checks need. No context is created.

use super::{c_buf_to_string, dl, format_uuid, normalize_bus_id, CudaAttrs, LibStatus};
use std::ffi::{c_char, c_int, c_uint, CStr};
use std::time::Instant;

type CuResult = c_int;
type CuDevice = c_int;

const CUDA_SUCCESS: CuResult = 0;

// CUdevice_attribute values (cuda.h).
const ATTR_INTEGRATED: c_int = 18;
const ATTR_CC_MAJOR: c_int = 75;
const ATTR_CC_MINOR: c_int = 76;
const ATTR_GPU_DIRECT_RDMA_SUPPORTED: c_int = 116;
const ATTR_DMA_BUF_SUPPORTED: c_int = 124;

/// CUuuid: 16 raw bytes.
#[repr(C)]
struct CuUuid {
    bytes: [c_char; 16],
}

type FnInit = unsafe extern "C" fn(c_uint) -> CuResult;
type FnInt = unsafe extern "C" fn(*mut c_int) -> CuResult;
type FnDeviceGet = unsafe extern "C" fn(*mut CuDevice, c_int) -> CuResult;
type FnName = unsafe extern "C" fn(*mut c_char, c_int, CuDevice) -> CuResult;
type FnUuid = unsafe extern "C" fn(*mut CuUuid, CuDevice) -> CuResult;
type FnAttr = unsafe extern "C" fn(*mut c_int, c_int, CuDevice) -> CuResult;
type FnErrName = unsafe extern "C" fn(CuResult, *mut *const c_char) -> CuResult;

struct Api {
    init: FnInit,
    driver_version: FnInt,
    count: FnInt,
    device_get: FnDeviceGet,
    name: Option<FnName>,
    uuid: FnUuid,
    attr: FnAttr,
    pci_bus_id: Option<FnName>,
    err_name: Option<FnErrName>,
    err_string: Option<FnErrName>,
}

impl Api {
    fn load() -> Result<Api, String> {
        let lib = dl::cuda()?;
        // SAFETY (all `dl::sym` calls): each alias is the signature cuda.h declares.
        unsafe {
            Ok(Api {
                init: dl::sym(lib, "cuInit")?,
                driver_version: dl::sym(lib, "cuDriverGetVersion")?,
                count: dl::sym(lib, "cuDeviceGetCount")?,
                device_get: dl::sym(lib, "cuDeviceGet")?,
                name: dl::sym(lib, "cuDeviceGetName").ok(),
                // _v2 reports MIG-aware UUIDs identical to NVML's; the old entry point is
                // the same for whole GPUs.
                uuid: dl::sym(lib, "cuDeviceGetUuid_v2")
                    .or_else(|_| dl::sym(lib, "cuDeviceGetUuid"))?,
                attr: dl::sym(lib, "cuDeviceGetAttribute")?,
                pci_bus_id: dl::sym(lib, "cuDeviceGetPCIBusId").ok(),
                err_name: dl::sym(lib, "cuGetErrorName").ok(),
                err_string: dl::sym(lib, "cuGetErrorString").ok(),
            })
        }
    }

    fn describe(&self, r: CuResult) -> String {
        let text = |f: Option<FnErrName>| -> Option<String> {
            let f = f?;
            let mut p: *const c_char = std::ptr::null();
            // SAFETY: `p` is a valid out pointer; on success it points at a static string.
            let ok = unsafe { f(r, &mut p) } == CUDA_SUCCESS && !p.is_null();
            // SAFETY: checked non-null; the driver's error strings are static and NUL-terminated.
            ok.then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
        };
        match (text(self.err_name), text(self.err_string)) {
            (Some(n), Some(s)) => format!("{n}: {s}"),
            (Some(n), None) => n,
            _ => format!("CUresult {r}"),
        }
    }

    fn attr(&self, dev: CuDevice, a: c_int) -> Result<i32, String> {
        let mut v: c_int = 0;
        // SAFETY: `v` is a valid out pointer; `dev` came from cuDeviceGet.
        let r = unsafe { (self.attr)(&mut v, a, dev) };
        if r == CUDA_SUCCESS {
            Ok(v)
        } else {
            Err(self.describe(r))
        }
    }
}

/// What the CUDA half of a live probe found: (UUID, attributes) per device.
#[derive(Default)]
pub(crate) struct CudaPart {
    pub driver_version: Option<i32>,
    pub device_order: Option<String>,
    pub devices: Vec<(String, CudaAttrs)>,
    pub init_ms: Option<f64>,
    pub query_ms: Option<f64>,
}

pub(crate) fn gather() -> (LibStatus, CudaPart) {
    let mut part = CudaPart {
        device_order: std::env::var("CUDA_DEVICE_ORDER").ok(),
        ..CudaPart::default()
    };
    let t0 = Instant::now();
    let api = match Api::load() {
        Ok(a) => a,
        Err(reason) => return (LibStatus::Unavailable { reason }, part),
    };
    // SAFETY: cuInit(0) is the documented first call; it is idempotent and thread-safe.
    let r = unsafe { (api.init)(0) };
    if r != CUDA_SUCCESS {
        return (
            LibStatus::Unavailable {
                reason: format!("cuInit failed: {}", api.describe(r)),
            },
            part,
        );
    }
    part.init_ms = Some(t0.elapsed().as_secs_f64() * 1e3);
    let t1 = Instant::now();
    let mut v: c_int = 0;
    // SAFETY: valid out pointer.
    if unsafe { (api.driver_version)(&mut v) } == CUDA_SUCCESS {
        part.driver_version = Some(v);
    }
    let mut n: c_int = 0;
    // SAFETY: valid out pointer; cuInit succeeded.
    let r = unsafe { (api.count)(&mut n) };
    if r != CUDA_SUCCESS {
        return (
            LibStatus::Unavailable {
                reason: format!("cuDeviceGetCount failed: {}", api.describe(r)),
            },
            part,
        );
    }
    for ordinal in 0..n.max(0) {
        let mut dev: CuDevice = 0;
        // SAFETY: valid out pointer; ordinal < count.
        if unsafe { (api.device_get)(&mut dev, ordinal) } != CUDA_SUCCESS {
            continue;
        }
        let mut raw = CuUuid { bytes: [0; 16] };
        // SAFETY: `raw` matches CUuuid; `dev` came from cuDeviceGet.
        if unsafe { (api.uuid)(&mut raw, dev) } != CUDA_SUCCESS {
            continue;
        }
        let bytes: [u8; 16] = raw.bytes.map(|c| c as u8);
        let string_of = |f: Option<FnName>| -> Option<String> {
            let f = f?;
            let mut buf = [0u8; 128];
            // SAFETY: the buffer is writable for the length passed.
            let r = unsafe { f(buf.as_mut_ptr().cast(), buf.len() as c_int, dev) };
            (r == CUDA_SUCCESS).then(|| c_buf_to_string(&buf))
        };
        let flag = |a| api.attr(dev, a).ok().map(|v| v != 0);
        let cc = match (api.attr(dev, ATTR_CC_MAJOR), api.attr(dev, ATTR_CC_MINOR)) {
            (Ok(a), Ok(b)) => Some(format!("{a}.{b}")),
            _ => None,
        };
        let integrated = flag(ATTR_INTEGRATED);
        // Integrated GPUs have no PCI address; some drivers report a zero bus id for them.
        let pci_bus_id = string_of(api.pci_bus_id)
            .and_then(|s| normalize_bus_id(&s))
            .filter(|b| !(integrated == Some(true) && b == "0000:00:00.0"));
        let attrs = CudaAttrs {
            ordinal: Some(ordinal as u32),
            gpu_direct_rdma_supported: flag(ATTR_GPU_DIRECT_RDMA_SUPPORTED),
            dma_buf_supported: flag(ATTR_DMA_BUF_SUPPORTED),
            integrated,
            compute_capability: cc,
            pci_bus_id,
            name: string_of(api.name),
            read_from: None,
        };
        part.devices.push((format_uuid(&bytes), attrs));
    }
    part.query_ms = Some(t1.elapsed().as_secs_f64() * 1e3);
    (LibStatus::Ok, part)
}
