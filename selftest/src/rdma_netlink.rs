//! RDMA netlink is probe's ([`daqtune_probe::net::netlink::rdma`]); what the self-test adds is
//! opening the socket inside one of its namespaces (in exclusive mode a device is visible only
//! from its own, so the moves back need it).

use crate::error::{Error, Result};
use crate::netns::NetNs;
pub use daqtune_probe::net::netlink::rdma::*;

/// A socket acting in `ns` (created on a thread that entered it).
pub fn open_in(ns: &NetNs) -> Result<RdmaNetlink> {
    crate::netns::run_in(ns, || RdmaNetlink::open().map_err(Error::from))?
}
