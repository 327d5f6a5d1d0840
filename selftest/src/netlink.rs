//! rtnetlink is probe's ([`daqtune_probe::net::netlink::route`]); what the self-test adds is
//! opening the socket inside one of its namespaces.

use crate::error::{Error, Result};
use crate::netns::NetNs;
pub use daqtune_probe::net::netlink::route::*;

/// A socket acting in the namespace `ns` (an open `/run/netns/...` or `/proc/.../ns/net`
/// file): a netlink socket acts in the namespace of the thread that created it, so it is
/// created on a thread that entered `ns` first.
pub fn open_in(ns: &NetNs) -> Result<Netlink> {
    crate::netns::run_in(ns, || Netlink::open().map_err(Error::from))?
}
