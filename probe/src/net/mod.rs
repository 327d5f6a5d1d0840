//! The NIC's own settings, read from the kernel's ethtool netlink interface (no `ethtool`
//! binary): a small generic-netlink codec ([`genl`]) and the ethtool client and parsers
//! ([`ethtool`]). Building and parsing messages is byte code tested on captured replies; the
//! socket is `nix`'s safe wrapper.

pub mod ethtool;
pub mod ethtool_text;
pub mod genl;
pub mod rdma_text;
