//! The kernel's RDMA netlink interface (`NETLINK_RDMA`, the "nldev" client that iproute2's
//! `rdma` tool speaks): RDMA devices and the netdev behind each port, the subsystem's
//! network-namespace mode (shared or exclusive), moving a device into a namespace, and creating
//! or deleting soft-RoCE (`rxe`) links. No iproute2 and no libibverbs: the main binary uses it
//! to place two ports' RDMA devices next to their netdevs before a wire loopback run.
//!
//! A netlink socket acts in the namespace of the thread that opened it, and in exclusive mode a
//! device is visible only from its own namespace, so the self-test opens one inside a namespace
//! for the moves back (its `rdma_netlink::open_in`). Message building and parsing are plain
//! functions tested on bytes.

use super::{
    attrs, get_string, get_u32, Builder, Error, Protocol, Result, Socket, NLM_F_ACK, NLM_F_DUMP,
    NLM_F_REQUEST,
};
use serde::{Deserialize, Serialize};
use std::io;
use std::os::fd::RawFd;
/// `RDMA_NL_NLDEV` client; message type = client << 10 | command.
const RDMA_NL_NLDEV: u16 = 5;

const CMD_GET: u16 = 1;
const CMD_SET: u16 = 2;
const CMD_NEWLINK: u16 = 3;
const CMD_DELLINK: u16 = 4;
const CMD_PORT_GET: u16 = 5;
const CMD_SYS_GET: u16 = 6;
const CMD_SYS_SET: u16 = 7;

// Attributes (rdma/rdma_netlink.h, enum rdma_nldev_attr).
const ATTR_DEV_INDEX: u16 = 1;
const ATTR_DEV_NAME: u16 = 2;
const ATTR_PORT_INDEX: u16 = 3;
const ATTR_PORT_STATE: u16 = 12;
const ATTR_NDEV_INDEX: u16 = 50;
const ATTR_NDEV_NAME: u16 = 51;
const ATTR_LINK_TYPE: u16 = 65;
const SYS_ATTR_NETNS_MODE: u16 = 66;
const ATTR_DEV_PROTOCOL: u16 = 67;
const NET_NS_FD: u16 = 68;

fn msg_type(cmd: u16) -> u16 {
    (RDMA_NL_NLDEV << 10) + cmd
}

/// The RDMA subsystem's namespace mode (`rdma system show`). In shared mode every device is
/// visible from every network namespace; in exclusive mode a device lives in exactly one and
/// moves with `rdma dev set DEV netns NS`. The switch to exclusive is refused (EBUSY) while any
/// namespace other than the initial one exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NetnsMode {
    Shared,
    Exclusive,
}

impl NetnsMode {
    fn wire(self) -> u8 {
        match self {
            NetnsMode::Shared => 1,
            NetnsMode::Exclusive => 0,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            NetnsMode::Shared => "shared",
            NetnsMode::Exclusive => "exclusive",
        }
    }
}

/// One RDMA device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RdmaDevice {
    pub index: u32,
    pub name: String,
    /// "roce", "ib", "iw" (kernels from 5.4 report it).
    pub protocol: Option<String>,
}

/// One port of an RDMA device and the netdev behind it (absent for InfiniBand ports, and for a
/// netdev that sits in another namespace than the asking socket).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RdmaPort {
    pub dev_index: u32,
    pub dev_name: String,
    pub port: u32,
    /// IB port state: 1 down, 2 init, 3 armed, 4 active.
    pub state: Option<u8>,
    pub netdev_index: Option<u32>,
    pub netdev: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// Messages.

pub fn build_dev_dump(seq: u32) -> Vec<u8> {
    Builder::new(msg_type(CMD_GET), NLM_F_REQUEST | NLM_F_DUMP, seq).finish()
}

pub fn build_port_dump(seq: u32, dev_index: u32) -> Vec<u8> {
    let mut b = Builder::new(msg_type(CMD_PORT_GET), NLM_F_REQUEST | NLM_F_DUMP, seq);
    b.u32(ATTR_DEV_INDEX, dev_index);
    b.finish()
}

pub fn build_sys_get(seq: u32) -> Vec<u8> {
    Builder::new(msg_type(CMD_SYS_GET), NLM_F_REQUEST, seq).finish()
}

pub fn build_sys_set(seq: u32, mode: NetnsMode) -> Vec<u8> {
    let mut b = Builder::new(msg_type(CMD_SYS_SET), NLM_F_REQUEST | NLM_F_ACK, seq);
    b.attr(SYS_ATTR_NETNS_MODE, &[mode.wire()]);
    b.finish()
}

pub fn build_move(seq: u32, dev_index: u32, ns_fd: u32) -> Vec<u8> {
    let mut b = Builder::new(msg_type(CMD_SET), NLM_F_REQUEST | NLM_F_ACK, seq);
    b.u32(ATTR_DEV_INDEX, dev_index);
    b.u32(NET_NS_FD, ns_fd);
    b.finish()
}

pub fn build_newlink(seq: u32, name: &str, link_type: &str, netdev: &str) -> Vec<u8> {
    let mut b = Builder::new(msg_type(CMD_NEWLINK), NLM_F_REQUEST | NLM_F_ACK, seq);
    b.string(ATTR_DEV_NAME, name);
    b.string(ATTR_LINK_TYPE, link_type);
    b.string(ATTR_NDEV_NAME, netdev);
    b.finish()
}

pub fn build_dellink(seq: u32, dev_index: u32) -> Vec<u8> {
    let mut b = Builder::new(msg_type(CMD_DELLINK), NLM_F_REQUEST | NLM_F_ACK, seq);
    b.u32(ATTR_DEV_INDEX, dev_index);
    b.finish()
}

/// Parses one device message (the payload after the netlink header: nldev has no family
/// header, attributes start at once).
pub fn parse_device(p: &[u8]) -> Option<RdmaDevice> {
    let mut index = None;
    let mut name = None;
    let mut protocol = None;
    for (k, d) in attrs(p) {
        match k {
            ATTR_DEV_INDEX => index = get_u32(d),
            ATTR_DEV_NAME => name = Some(get_string(d)),
            ATTR_DEV_PROTOCOL => protocol = Some(get_string(d)),
            _ => {}
        }
    }
    Some(RdmaDevice {
        index: index?,
        name: name?,
        protocol,
    })
}

pub fn parse_port(p: &[u8]) -> Option<RdmaPort> {
    let mut port = RdmaPort {
        dev_index: u32::MAX,
        dev_name: String::new(),
        port: 0,
        state: None,
        netdev_index: None,
        netdev: None,
    };
    let (mut have_dev, mut have_port) = (false, false);
    for (k, d) in attrs(p) {
        match k {
            ATTR_DEV_INDEX => {
                port.dev_index = get_u32(d)?;
                have_dev = true;
            }
            ATTR_DEV_NAME => port.dev_name = get_string(d),
            ATTR_PORT_INDEX => {
                port.port = get_u32(d)?;
                have_port = true;
            }
            ATTR_PORT_STATE => port.state = d.first().copied(),
            ATTR_NDEV_INDEX => port.netdev_index = get_u32(d),
            ATTR_NDEV_NAME => port.netdev = Some(get_string(d)),
            _ => {}
        }
    }
    (have_dev && have_port).then_some(port)
}

pub fn parse_netns_mode(p: &[u8]) -> Option<NetnsMode> {
    attrs(p)
        .into_iter()
        .find(|(k, _)| *k == SYS_ATTR_NETNS_MODE)
        .and_then(|(_, d)| d.first().copied())
        .map(|v| {
            if v == 0 {
                NetnsMode::Exclusive
            } else {
                NetnsMode::Shared
            }
        })
}

/// The RDMA device whose port carries `netdev` (by name), from a port listing.
pub fn port_for_netdev<'a>(ports: &'a [RdmaPort], netdev: &str) -> Option<&'a RdmaPort> {
    ports.iter().find(|p| p.netdev.as_deref() == Some(netdev))
}

// ---------------------------------------------------------------------------------------------
// The socket.

/// A `NETLINK_RDMA` socket bound to the namespace it was opened in.
pub struct RdmaNetlink {
    sock: Socket,
}

impl RdmaNetlink {
    /// Opens the socket in the calling thread's namespace. Kernels without RDMA support (no
    /// `ib_core`) refuse the protocol; the error says so.
    pub fn open() -> Result<Self> {
        match Socket::open(Protocol::Rdma, None) {
            Ok(sock) => Ok(RdmaNetlink { sock }),
            Err(e) if e.raw_os_error() == Some(libc::EPROTONOSUPPORT) => Err(Error::Unsupported(
                "the kernel has no RDMA netlink (ib_core not loaded, or no InfiniBand support)"
                    .into(),
            )),
            Err(e) => Err(Error::io("socket", e)),
        }
    }

    fn dump(
        &mut self,
        build: impl FnOnce(u32) -> Vec<u8>,
        kind: u16,
        op: &str,
    ) -> Result<Vec<Vec<u8>>> {
        self.sock
            .payloads_of(kind, build)
            .map_err(|e| Error::io(op, e))
    }

    fn request(&mut self, build: impl FnOnce(u32) -> Vec<u8>, op: &str) -> Result<()> {
        self.sock
            .transact(build)
            .map(drop)
            .map_err(|e| Error::io(op, e))
    }

    pub fn devices(&mut self) -> Result<Vec<RdmaDevice>> {
        let p = self.dump(build_dev_dump, msg_type(CMD_GET), "rdma dev show")?;
        Ok(p.iter().filter_map(|m| parse_device(m)).collect())
    }

    pub fn device_by_name(&mut self, name: &str) -> Result<Option<RdmaDevice>> {
        Ok(self.devices()?.into_iter().find(|d| d.name == name))
    }

    pub fn ports_of(&mut self, dev_index: u32) -> Result<Vec<RdmaPort>> {
        let p = self.dump(
            |seq| build_port_dump(seq, dev_index),
            msg_type(CMD_PORT_GET),
            "rdma link show",
        )?;
        Ok(p.iter().filter_map(|m| parse_port(m)).collect())
    }

    /// Every port of every device visible from this namespace.
    pub fn ports(&mut self) -> Result<Vec<RdmaPort>> {
        let mut out = Vec::new();
        for d in self.devices()? {
            out.extend(self.ports_of(d.index)?);
        }
        Ok(out)
    }

    pub fn netns_mode(&mut self) -> Result<NetnsMode> {
        let p = self.dump(build_sys_get, msg_type(CMD_SYS_GET), "rdma system show")?;
        p.iter().find_map(|m| parse_netns_mode(m)).ok_or_else(|| {
            Error::Unsupported("the kernel did not report the RDMA netns mode".into())
        })
    }

    pub fn set_netns_mode(&mut self, mode: NetnsMode) -> Result<()> {
        self.request(
            |seq| build_sys_set(seq, mode),
            &format!("rdma system set netns {}", mode.as_str()),
        )
    }

    /// Moves a device into the namespace open as `ns_fd` (exclusive mode only; drivers that
    /// cannot disassociate user contexts, soft-RoCE among them, answer EOPNOTSUPP).
    pub fn move_device(&mut self, dev: &RdmaDevice, ns_fd: RawFd) -> Result<()> {
        let fd =
            u32::try_from(ns_fd).map_err(|_| Error::Invalid(format!("namespace fd {ns_fd}")))?;
        self.request(
            |seq| build_move(seq, dev.index, fd),
            &format!("rdma dev set {} netns", dev.name),
        )
    }

    /// Creates a soft-RoCE device `name` on `netdev` (`rdma link add NAME type rxe netdev ND`).
    pub fn add_rxe(&mut self, name: &str, netdev: &str) -> Result<()> {
        if name.is_empty() || name.len() >= 64 || name.contains('/') || name.contains('%') {
            return Err(Error::Invalid(format!("RDMA device name {name:?}")));
        }
        match self.request(
            |seq| build_newlink(seq, name, "rxe", netdev),
            &format!("rdma link add {name} type rxe netdev {netdev}"),
        ) {
            Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL) | Some(libc::ENODEV)) => {
                Err(Error::Unsupported(format!(
                    "cannot create a soft-RoCE device on {netdev} ({e}): is the rdma_rxe module \
                     available (modprobe rdma_rxe)?"
                )))
            }
            r => r,
        }
    }

    pub fn delete_link(&mut self, dev: &RdmaDevice) -> Result<()> {
        self.request(
            |seq| build_dellink(seq, dev.index),
            &format!("rdma link delete {}", dev.name),
        )
    }
}

/// The error number as a short name, for messages.
pub fn errno_name(code: i32) -> String {
    match code {
        libc::EBUSY => "EBUSY".into(),
        libc::EOPNOTSUPP => "EOPNOTSUPP".into(),
        libc::EPERM => "EPERM".into(),
        libc::EINVAL => "EINVAL".into(),
        libc::ENODEV => "ENODEV".into(),
        c => io::Error::from_raw_os_error(c).to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::messages as split_messages;
    use super::*;

    fn payload_of(msg: &[u8]) -> Vec<u8> {
        split_messages(msg)[0].payload.to_vec()
    }

    #[test]
    fn message_types_follow_the_nldev_client() {
        assert_eq!(msg_type(CMD_GET), 0x1401);
        assert_eq!(msg_type(CMD_SYS_SET), 0x1407);
        let m = build_sys_set(9, NetnsMode::Exclusive);
        let raw = &split_messages(&m)[0];
        assert_eq!(raw.kind, 0x1407);
        assert_eq!(raw.seq, 9);
        assert_eq!(raw.flags, NLM_F_REQUEST | NLM_F_ACK);
        assert_eq!(attrs(raw.payload), vec![(SYS_ATTR_NETNS_MODE, &[0u8][..])]);
        let m = build_sys_set(1, NetnsMode::Shared);
        assert_eq!(attrs(&payload_of(&m))[0].1, &[1u8]);
    }

    #[test]
    fn move_and_link_requests_carry_their_attributes() {
        let p = payload_of(&build_move(1, 7, 12));
        assert_eq!(
            attrs(&p),
            vec![
                (ATTR_DEV_INDEX, &7u32.to_ne_bytes()[..]),
                (NET_NS_FD, &12u32.to_ne_bytes()[..])
            ]
        );
        let p = payload_of(&build_newlink(1, "rxe0", "rxe", "dqa"));
        let a = attrs(&p);
        assert_eq!(a[0], (ATTR_DEV_NAME, &b"rxe0\0"[..]));
        assert_eq!(a[1], (ATTR_LINK_TYPE, &b"rxe\0"[..]));
        assert_eq!(a[2], (ATTR_NDEV_NAME, &b"dqa\0"[..]));
        let p = payload_of(&build_dellink(1, 3));
        assert_eq!(attrs(&p), vec![(ATTR_DEV_INDEX, &3u32.to_ne_bytes()[..])]);
        let raw = build_port_dump(4, 2);
        assert_eq!(split_messages(&raw)[0].flags, NLM_F_REQUEST | NLM_F_DUMP);
    }

    /// A reply as the kernel builds it (attributes straight after the header).
    fn reply(build: impl FnOnce(&mut Builder)) -> Vec<u8> {
        let mut b = Builder::new(msg_type(CMD_PORT_GET), 0, 1);
        build(&mut b);
        payload_of(&b.finish())
    }

    #[test]
    fn ports_and_devices_parse() {
        let p = reply(|b| {
            b.u32(ATTR_DEV_INDEX, 4);
            b.string(ATTR_DEV_NAME, "mlx5_1");
            b.u32(ATTR_PORT_INDEX, 1);
            b.attr(4, &0u64.to_ne_bytes()); // CAP_FLAGS: ignored
            b.attr(ATTR_PORT_STATE, &[4]);
            b.u32(ATTR_NDEV_INDEX, 9);
            b.string(ATTR_NDEV_NAME, "enp1s0f1np1");
        });
        let port = parse_port(&p).expect("port");
        assert_eq!(port.dev_name, "mlx5_1");
        assert_eq!(port.state, Some(4));
        assert_eq!(port.netdev.as_deref(), Some("enp1s0f1np1"));
        assert_eq!(port.netdev_index, Some(9));
        let ports = vec![port.clone()];
        assert_eq!(port_for_netdev(&ports, "enp1s0f1np1"), Some(&port));
        assert_eq!(port_for_netdev(&ports, "enp1s0f0np0"), None);

        // An InfiniBand port, or a netdev in another namespace: no NDEV attributes.
        let p = reply(|b| {
            b.u32(ATTR_DEV_INDEX, 1);
            b.string(ATTR_DEV_NAME, "mlx5_0");
            b.u32(ATTR_PORT_INDEX, 1);
        });
        assert_eq!(parse_port(&p).expect("port").netdev, None);
        // Without a port index it is not a port.
        let p = reply(|b| {
            b.u32(ATTR_DEV_INDEX, 1);
        });
        assert_eq!(parse_port(&p), None);

        let d = reply(|b| {
            b.u32(ATTR_DEV_INDEX, 2);
            b.string(ATTR_DEV_NAME, "rxe0");
            b.string(ATTR_DEV_PROTOCOL, "roce");
        });
        assert_eq!(
            parse_device(&d),
            Some(RdmaDevice {
                index: 2,
                name: "rxe0".into(),
                protocol: Some("roce".into())
            })
        );
        assert_eq!(parse_device(&[1, 2, 3]), None);
    }

    #[test]
    fn netns_mode_parses() {
        let p = reply(|b| {
            b.attr(SYS_ATTR_NETNS_MODE, &[1]);
        });
        assert_eq!(parse_netns_mode(&p), Some(NetnsMode::Shared));
        let p = reply(|b| {
            b.attr(SYS_ATTR_NETNS_MODE, &[0]);
        });
        assert_eq!(parse_netns_mode(&p), Some(NetnsMode::Exclusive));
        assert_eq!(parse_netns_mode(&[]), None);
        assert_eq!(
            serde_json::to_string(&NetnsMode::Exclusive).expect("json"),
            "\"exclusive\""
        );
    }

    #[test]
    fn bad_rxe_names_refused_before_the_kernel() {
        // Only meaningful where the socket opens; elsewhere the open error is the answer.
        if let Ok(mut nl) = RdmaNetlink::open() {
            assert!(nl.add_rxe("", "lo").is_err());
            assert!(nl.add_rxe("a/b", "lo").is_err());
        } else {
            assert!(matches!(RdmaNetlink::open(), Err(Error::Unsupported(_))));
        }
    }
}
