//! Where the traffic runs: a veth pair between two private namespaces, two physical ports
//! moved into private namespaces, a remote peer, or loopback. Every change to the host is
//! written to a journal *before* it is made, and undone on every exit path: normal end, error,
//! SIGINT/SIGTERM (through the run loop), panic (Drop), and SIGKILL (the next run's
//! [`recover_leftovers`]).
//!
//! One module per topology (`veth`, `two_ports`, `peer`, `loopback`); here is what they
//! share: the journal, the [`Topology`] handle with its namespaces, port counters and teardown,
//! and the addressing of a moved end. `rdma` places RDMA devices on the ports, `restore`
//! puts the host back.

use crate::error::{Error, Result};
use crate::netlink::{Addr, Link, Neighbour, Netlink, Route, RTPROT_KERNEL};
use crate::netns::{self, NetNs, NsId};
use crate::rdma_netlink::{
    errno_name, os_error, port_for_netdev, NetnsMode, RdmaNetlink, RdmaPort,
};
use serde::{Deserialize, Serialize};
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

mod loopback;
mod peer;
mod rdma;
mod restore;
mod two_ports;
mod veth;

pub use restore::{recover_in, recover_leftovers, restore};
pub use two_ports::{parse_ssh_connection, prefix_contains, refuse_unsafe_port};

/// One journal file per run, named by pid.
pub const JOURNAL_DIR: &str = "/run/daqtune/selftest";
/// RFC 2544 benchmarking range (198.18.0.0/15): never routed on the internet.
pub const TX_ADDR: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
pub const RX_ADDR: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
/// Interface names of the veth pair (they only ever exist inside daqtune's namespaces).
pub const VETH_TX: &str = "dqt-tx";
pub const VETH_RX: &str = "dqt-rx";

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// What was true of a port before it was moved: enough to put it back exactly.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PortRecord {
    pub name: String,
    pub index: i32,
    pub mtu: u32,
    pub up: bool,
    /// Addresses of the port (IPv6 link-local excluded: the kernel makes it again).
    pub addrs: Vec<Addr>,
    /// Routes through the port that the kernel does not re-create by itself.
    pub routes: Vec<Route>,
    /// Permanent neighbour entries on the port (static ARP, as wire-loopback setups make).
    #[serde(default)]
    pub neighbours: Vec<Neighbour>,
    /// daqtune namespace the port goes into.
    pub ns: String,
}

/// The journal: everything this run created or moved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Journal {
    pub version: u32,
    pub pid: u32,
    /// Start time of the owning process (/proc/PID/stat field 22), against pid reuse.
    pub starttime: u64,
    /// The namespace ports return to.
    pub home_ns: NsId,
    pub namespaces: Vec<String>,
    pub ports: Vec<PortRecord>,
    /// RDMA devices placed for an RDMA wire-loopback run (absent in older journals).
    #[serde(default)]
    pub rdma: RdmaJournal,
}

/// What an RDMA wire-loopback run changed besides the ports, in the order it is undone:
/// devices moved into namespaces go home first, the ports follow, then soft-RoCE devices are
/// deleted or re-created, and the subsystem's namespace mode is switched back last (the
/// kernel refuses the switch while any other namespace, ours included, still exists).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RdmaJournal {
    /// The mode before this run switched it.
    pub netns_mode_was: Option<NetnsMode>,
    /// RDMA devices moved into daqtune namespaces: (device, namespace).
    pub moved: Vec<(String, String)>,
    /// Soft-RoCE devices this run created (deleted afterwards).
    pub created: Vec<String>,
    /// Soft-RoCE devices that vanished when their netdev moved (rdma_rxe unregisters on the
    /// netdev's move): (device, netdev), re-created once the netdev is home.
    pub recreate: Vec<(String, String)>,
    /// The copies of those made inside the namespaces: (device, kernel device index). The kernel
    /// unregisters each one (queued work) when its netdev goes home, so for a while a device of
    /// the right name on the right netdev may still be the doomed copy: restore tells them
    /// apart by index (absent in older journals).
    #[serde(default)]
    pub copies: Vec<(String, u32)>,
}

impl RdmaJournal {
    fn is_empty(&self) -> bool {
        self.netns_mode_was.is_none()
            && self.moved.is_empty()
            && self.created.is_empty()
            && self.recreate.is_empty()
            && self.copies.is_empty()
    }
}

/// Where the RDMA devices of a two-port run ended up, for the report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RdmaPlacement {
    /// The mode the run used.
    pub netns_mode: NetnsMode,
    pub tx_dev: String,
    pub rx_dev: String,
    /// Devices moved into the ports' namespaces (exclusive mode).
    pub moved: bool,
    /// Soft-RoCE devices run with their netdevs inside the namespaces (made for the run, or
    /// made again there after the netdev's move unregistered them).
    pub soft_roce_in_namespaces: bool,
    /// Why exclusive mode was not used, which devices were created, and the like.
    pub notes: Vec<String>,
}

/// A two-port RDMA run as asked for: the two netdevs cabled back to back.
#[derive(Debug, Clone)]
pub struct RdmaPortsRequest {
    pub tx_if: String,
    pub rx_if: String,
    pub mtu: Option<u32>,
    /// Try the exclusive mode (devices move with their netdevs) before the shared one.
    pub try_exclusive: bool,
    /// Create soft-RoCE devices on ports that have no RDMA device.
    pub soft_roce: bool,
}

fn journal_path(dir: &Path, pid: u32, n: u32) -> PathBuf {
    dir.join(format!("{pid}-{n}.json"))
}

impl Journal {
    pub fn save(&self, path: &Path) -> Result<()> {
        let data = serde_json::to_vec_pretty(self).map_err(|e| Error::Journal {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        daqtune_probe::fsutil::write_atomic(path, &data, 0o600)
            .map_err(|e| Error::io(format!("write {}", path.display()), e))
    }

    pub fn parse(text: &str) -> std::result::Result<Journal, String> {
        serde_json::from_str(text).map_err(|e| e.to_string())
    }

    /// Whether the process that wrote this journal is still running.
    pub fn owner_alive(&self) -> bool {
        crate::sys::process_starttime(self.pid) == Some(self.starttime)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Veth,
    Ports,
    Peer,
    Loopback,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Veth => "veth",
            Kind::Ports => "ports",
            Kind::Peer => "peer",
            Kind::Loopback => "loopback",
        }
    }
}

/// Port counters at one moment (see [`Topology::port_sample`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortSample {
    pub tx_bytes: u64,
    pub rx_bytes: u64,
    pub tx_phy_bytes: Option<u64>,
    pub rx_phy_bytes: Option<u64>,
}

/// A prepared path. Dropping it restores the host.
pub struct Topology {
    pub kind: Kind,
    /// Namespace of the sender (None = the process's own).
    pub tx_ns: Option<NetNs>,
    pub rx_ns: Option<NetNs>,
    pub tx_addr: IpAddr,
    pub rx_addr: IpAddr,
    /// Control port of a `--serve` peer.
    pub peer_port: u16,
    /// The sending and receiving interfaces inside the namespaces (veth ends or ports).
    pub tx_port: Option<String>,
    pub rx_port: Option<String>,
    pub description: String,
    /// Both ends on this host, one clock: latency and TcpRetransSegs are meaningful.
    pub local: bool,
    /// RDMA device placement of an RDMA two-port run.
    pub rdma: Option<RdmaPlacement>,
    home: Option<NetNs>,
    journal: Option<(PathBuf, Journal)>,
    /// Notes from teardown problems (reported, never fatal for the other steps).
    pub warnings: Vec<String>,
}

impl Topology {
    fn begin(kind: Kind, journal_dir: &Path) -> Result<(Topology, String, String)> {
        let pid = std::process::id();
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let tx_name = format!("{}{pid}-{n}-tx", netns::PREFIX);
        let rx_name = format!("{}{pid}-{n}-rx", netns::PREFIX);
        let home = NetNs::current()?;
        let journal = Journal {
            version: 1,
            pid,
            starttime: crate::sys::process_starttime(pid).unwrap_or(0),
            home_ns: home.id()?,
            namespaces: vec![tx_name.clone(), rx_name.clone()],
            ports: Vec::new(),
            rdma: RdmaJournal::default(),
        };
        let t = Topology {
            kind,
            tx_ns: None,
            rx_ns: None,
            tx_addr: IpAddr::V4(TX_ADDR),
            rx_addr: IpAddr::V4(RX_ADDR),
            peer_port: 0,
            tx_port: None,
            rx_port: None,
            description: String::new(),
            local: true,
            rdma: None,
            home: Some(home),
            journal: Some((journal_path(journal_dir, pid, n), journal)),
            warnings: Vec::new(),
        };
        Ok((t, tx_name, rx_name))
    }

    fn save_journal(&self) -> Result<()> {
        if let Some((p, j)) = &self.journal {
            j.save(p)?;
        }
        Ok(())
    }

    fn create_namespaces(&mut self) -> Result<()> {
        let names = match &self.journal {
            Some((_, j)) if j.namespaces.len() == 2 => {
                (j.namespaces[0].clone(), j.namespaces[1].clone())
            }
            _ => return Err(Error::Invalid("topology has no namespace names".into())),
        };
        self.tx_ns = Some(NetNs::create(&names.0)?);
        self.rx_ns = Some(NetNs::create(&names.1)?);
        Ok(())
    }

    /// Counters of the sending port (transmit side) and the receiving port (receive side):
    /// interface bytes through netlink, and the wire-level `*_bytes_phy` counters through
    /// ethtool where the driver exposes them; read inside each namespace. None without
    /// private ports.
    pub fn port_sample(&self) -> Option<PortSample> {
        let (txn, rxn) = self.namespaces().ok()?;
        type Sample = (crate::netlink::LinkStats, (Option<u64>, Option<u64>));
        let read = |ns: &NetNs, name: &str| -> Option<Sample> {
            let st = crate::netlink::open_in(ns)
                .ok()?
                .link_by_name(name)
                .ok()??
                .stats?;
            let phy = netns::run_in(ns, || crate::ethtool::stats(name))
                .ok()
                .and_then(|r| r.ok())
                .map(|v| crate::ethtool::phy_bytes(&v))
                .unwrap_or((None, None));
            Some((st, phy))
        };
        let (tx, tx_phy) = read(txn, self.tx_port.as_deref()?)?;
        let (rx, rx_phy) = read(rxn, self.rx_port.as_deref()?)?;
        Some(PortSample {
            tx_bytes: tx.tx_bytes,
            rx_bytes: rx.rx_bytes,
            tx_phy_bytes: tx_phy.0,
            rx_phy_bytes: rx_phy.1,
        })
    }

    /// Every drop and error counter of the sending and the receiving port, read inside each
    /// port's namespace: the interface statistics (IFLA_STATS64), the driver's own counters
    /// (SIOCETHTOOL) and the ethtool-netlink groups. `None` without private ports (loopback,
    /// a `--serve` peer's far end).
    pub fn counter_sample(&self) -> Option<[daqtune_probe::net::counters::PortCounters; 2]> {
        use daqtune_probe::net::counters::{PortCounters, Unavailable};
        let (txn, rxn) = self.namespaces().ok()?;
        let read = |ns: &NetNs, name: &str| -> PortCounters {
            netns::run_in(ns, || port_counters_here(name)).unwrap_or_else(|e| PortCounters {
                ifname: name.into(),
                counters: Vec::new(),
                unavailable: vec![Unavailable {
                    source: "the port's namespace".into(),
                    reason: format!("cannot enter it: {e}"),
                }],
            })
        };
        Some([
            read(txn, self.tx_port.as_deref()?),
            read(rxn, self.rx_port.as_deref()?),
        ])
    }

    fn namespaces(&self) -> Result<(&NetNs, &NetNs)> {
        match (&self.tx_ns, &self.rx_ns) {
            (Some(a), Some(b)) => Ok((a, b)),
            _ => Err(Error::Invalid("topology has no namespaces".into())),
        }
    }

    /// Undoes everything (idempotent). Problems are collected in `warnings`; every step runs.
    pub fn teardown(&mut self) -> Vec<String> {
        let Some((path, journal)) = self.journal.take() else {
            return std::mem::take(&mut self.warnings);
        };
        let home = self.home.take();
        self.tx_ns = None;
        self.rx_ns = None;
        let mut warnings = std::mem::take(&mut self.warnings);
        warnings.extend(restore(&journal, home.as_ref()));
        if warnings.is_empty() {
            let _ = std::fs::remove_file(&path);
        } else {
            warnings.push(format!(
                "journal kept at {} for the next run to retry",
                path.display()
            ));
        }
        warnings
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        for w in self.teardown() {
            eprintln!("daqtune selftest: restore: {w}");
        }
    }
}

pub(super) fn find(nl: &mut Netlink, name: &str) -> Result<Link> {
    nl.link_by_name(name)?
        .ok_or_else(|| Error::Invalid(format!("interface {name} not found after set-up")))
}

/// /32 address, link up, /32 route to the peer and a permanent neighbour entry: traffic goes
/// out of this port to the peer's MAC with no ARP and no other route involved.
pub(super) fn configure_end(
    nl: &mut Netlink,
    link: &Link,
    mtu: Option<u32>,
    local: Ipv4Addr,
    peer: Ipv4Addr,
    peer_mac: &[u8],
) -> Result<()> {
    if let Some(lo) = nl.link_by_name("lo")? {
        nl.set_up(lo.index, true)?;
    }
    if let Some(m) = mtu {
        if m != link.mtu {
            nl.set_mtu(link.index, m)?;
        }
    }
    nl.add_simple_addr(link.index, IpAddr::V4(local), 32)?;
    nl.set_up(link.index, true)?;
    nl.add_route(&Route::host_route(IpAddr::V4(peer), link.index))?;
    if !peer_mac.is_empty() {
        nl.add_permanent_neighbour(link.index, IpAddr::V4(peer), peer_mac)?;
    }
    Ok(())
}

/// Every drop and error counter of `name` in the calling thread's network namespace: the
/// interface statistics as IFLA_STATS64 (sysfs shows the namespace it was mounted in, which
/// need not be this one), the driver's own counters (SIOCETHTOOL) and the ethtool-netlink
/// groups. What could not be read is named in `unavailable`, never guessed. The DPDK and RDMA
/// engines read their ports' netdevs through this too.
pub fn port_counters_here(name: &str) -> daqtune_probe::net::counters::PortCounters {
    use daqtune_probe::net::counters::{read_kernel, PortCounters, Source, Unavailable};
    let mut p = PortCounters {
        ifname: name.into(),
        ..PortCounters::default()
    };
    match Netlink::open().and_then(|mut nl| nl.link_by_name(name)) {
        Ok(Some(l)) if !l.counters.is_empty() => p.counters = l.counters,
        Ok(Some(_)) => p.unavailable.push(Unavailable {
            source: Source::Statistics.label().into(),
            reason: format!("the kernel sent no IFLA_STATS64 for {name}"),
        }),
        Ok(None) => {
            p.unavailable.push(Unavailable {
                source: Source::Statistics.label().into(),
                reason: format!("no interface {name} in this network namespace"),
            });
            return p;
        }
        Err(e) => p.unavailable.push(Unavailable {
            source: Source::Statistics.label().into(),
            reason: e.to_string(),
        }),
    }
    read_kernel(name, &mut p);
    p
}
