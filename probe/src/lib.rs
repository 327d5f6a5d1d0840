//! Read-only facts about a GPU + NIC data-acquisition host.
//!
//! Everything here reads through a [`Host`] (the live machine or a host root directory) and
//! never writes to the host it probes (the GPU facts file and [`fsutil`], the workspace's one
//! atomic file write, are daqtune's own files). Parsers take text or bytes so that tests can feed captured kernel output;
//! the `read_*` functions only fetch that text and hand it to the parsers.

pub mod cmdline;
pub mod cpu;
pub mod cpulist;
pub mod dbus;
pub mod fsutil;
pub mod gpu;
pub mod host;
pub mod mem;
pub mod pci;
pub mod signals;
pub mod system;
pub mod systemd;
pub mod text;

pub use cpulist::CpuSet;
pub use host::{Host, ReadError, ReadResult};
