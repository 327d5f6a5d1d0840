//! daqtune's RDMA self-test: ibverbs RC queue pairs moving sequence-numbered, checksummed
//! payloads by RDMA WRITE (with immediate) and SEND, plus a SEND ping-pong for latency, between
//! two local ports (addressed by GID, so traffic crosses the wire) or to a peer over a TCP side
//! channel.
//!
//! The verbs code needs the system libibverbs (rdma-core) and is behind the cargo feature
//! `rdma`. Without it the crate builds anywhere and every run reports "built without RDMA
//! support" as a skip. With it, a host without kernel RDMA support (`ibv_get_device_list` fails
//! with ENOSYS) or without a device also skips, with the reason.
//!
//! Memory comes from a [`buffer::BufferProvider`] (host memory now; pinned and GPU memory plug
//! in there later).

pub mod buffer;
pub mod counters;
pub mod error;
pub mod gid;
pub mod gpudirect;
mod mem;
pub mod perftest;
pub mod proto;
pub mod run;
pub mod server;

#[cfg(feature = "rdma")]
pub mod endpoint;
#[cfg(feature = "rdma")]
mod ffi;
#[cfg(feature = "rdma")]
pub mod verbs;

pub use error::RdmaError;
pub use proto::{EndpointConfig, Transfer};
pub use run::{RdmaDetail, RdmaEngine, Topology};

/// Defaults shared by the engine with and without the verbs code.
pub mod endpoint_defaults {
    /// ACK timeout exponent perftest uses by default: 4.096 us * 2^14 = 67 ms.
    pub const QP_TIMEOUT: u8 = 14;
}

/// Whether this build has the verbs engine.
pub const BUILT_WITH_RDMA: bool = cfg!(feature = "rdma");
