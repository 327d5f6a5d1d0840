//! Facts about a GPU + NIC data-acquisition host, and the workspace's lowest layer.
//!
//! The facts are read through a [`Host`] (the live machine or a host root directory).
//! Parsers take text or bytes so that tests can feed captured kernel output; the `read_*`
//! functions only fetch that text and hand it to the parsers. Reading is not all this crate
//! does, though; it also holds what every crate above needs at the bottom:
//! - [`fsutil`]: the workspace's one atomic file write (temp + fsync + rename) and bounded
//!   reads;
//! - [`sys`]: the one system-call layer (euid, flock, namespaces, mount, interface ioctls),
//!   which the engine's writers and the self-tests call, so a probe function that reads
//!   never needs it to write;
//! - [`gpu::control`]: NVML's clock and persistence setters (the engine's `hostio::gpu`
//!   drives them during `apply`), and [`gpu::cache`], daqtune's own GPU-attribute file
//!   under /run/daqtune;
//! - [`signals`]: the termination handler the binaries install.
//!
//! No function that gathers a fact changes the host it reads.

pub mod cmdline;
pub mod cpu;
pub mod cpulist;
pub mod dbus;
pub mod fsutil;
pub mod gpu;
pub mod helpers;
pub mod host;
pub mod ldcache;
pub mod mem;
pub mod net;
pub mod pci;
pub mod signals;
pub mod sys;
pub mod system;
pub mod systemd;
pub mod text;

pub use cpulist::CpuSet;
pub use host::{Host, ReadError, ReadResult};
