//! RDMA netlink is probe's ([`daqtune_probe::net::netlink::rdma`]); what the self-test adds is
//! opening the socket inside one of its namespaces (in exclusive mode a device is visible only
//! from its own, so the moves back need it) and the errno of its own errors.

use crate::error::{Error, Result};
use crate::netns::NetNs;
pub use daqtune_probe::net::netlink::rdma::*;

/// A socket acting in `ns` (created on a thread that entered it).
pub fn open_in(ns: &NetNs) -> Result<RdmaNetlink> {
    crate::netns::run_in(ns, || RdmaNetlink::open().map_err(Error::from))?
}

/// An error that may carry the errno behind it: the self-test's own and probe's netlink one.
pub trait OsError {
    fn os_error(&self) -> Option<i32>;
}

impl OsError for Error {
    fn os_error(&self) -> Option<i32> {
        match self {
            Error::Netlink { source, .. } | Error::Io { source, .. } => source.raw_os_error(),
            _ => None,
        }
    }
}

impl OsError for daqtune_probe::net::netlink::Error {
    fn os_error(&self) -> Option<i32> {
        self.raw_os_error()
    }
}

/// The OS error behind a netlink or I/O failure, when there is one.
pub fn os_error(e: &impl OsError) -> Option<i32> {
    e.os_error()
}
