//! The NIC's own settings and counters, read from the kernel's ethtool interfaces (no
//! `ethtool` binary): the workspace's netlink stack ([`netlink`]: codec, socket, generic netlink,
//! rtnetlink, RDMA netlink), the ethtool-netlink client and
//! parsers ([`ethtool`]), the `SIOCETHTOOL` statistics ioctl ([`ethtool_ioctl`], the one
//! `unsafe` call of this module) and a port's drop and error counters from all of them
//! ([`counters`]), and the IPv4 addresses with their lifetimes from rtnetlink ([`addr`]: a
//! DHCP lease against a static address). Building and parsing messages is byte code tested on
//! captured replies.

pub mod addr;
pub mod counters;
pub mod ethtool;
pub mod ethtool_ioctl;
pub mod ethtool_text;
pub mod netlink;
pub mod rdma_text;
