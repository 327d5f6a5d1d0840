//! Where the traffic runs: a veth pair between two private namespaces, two physical ports
//! moved into private namespaces, a remote peer, or loopback. Every change to the host is
//! written to a journal *before* it is made, and undone on every exit path: normal end, error,
//! SIGINT/SIGTERM (through the run loop), panic (Drop), and SIGKILL (the next run's
//! [`recover_leftovers`]).

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

/// How long to wait for queued kernel work (an RDMA device unregistered when its netdev moves,
/// a deleted namespace torn down) before calling it stuck. Milliseconds on a real host; on a
/// loaded 2-core machine running the guest under emulation (tests/vm/rdma-guest.sh) it took
/// over 10 s, and a run that gives up leaves its journal for `--recover` and the device
/// missing. Only a hang guard: nothing waits this long unless the kernel does.
const KERNEL_WORK_LIMIT: Duration = Duration::from_secs(90);

/// Whether RDMA device `dev` disappears within `limit` (unregistration is queued work).
fn gone_within(rnl: &mut RdmaNetlink, dev: &str, limit: Duration) -> Result<bool> {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if rnl.device_by_name(dev)?.is_none() {
            return Ok(true);
        }
        if std::time::Instant::now() >= deadline {
            return Ok(false);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Makes soft-RoCE device `dev` on `netdev`, waiting (up to `deadline`) while an earlier copy
/// still holds the name or the netdev. Unregistration is queued work, and a copy in another
/// namespace is invisible from here in exclusive mode, so "absent from the list" does not yet
/// mean "free": the kernel answers EEXIST (netdev still bound) or ENFILE (name still taken)
/// until the copy is really gone.
fn add_rxe_when_free(
    nl: &mut RdmaNetlink,
    dev: &str,
    netdev: &str,
    deadline: std::time::Instant,
) -> Result<()> {
    loop {
        match nl.add_rxe(dev, netdev) {
            Err(e)
                if matches!(
                    os_error(&e),
                    Some(libc::EEXIST) | Some(libc::ENFILE) | Some(libc::EBUSY)
                ) && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(50));
            }
            r => return r,
        }
    }
}

/// How one placement attempt of an RDMA two-port run ended, when not with a topology.
enum RdmaAttempt {
    /// Try again in shared mode; dropping the topology undoes this attempt first.
    Fallback(Box<Topology>),
    Failed(Error),
}

impl From<Error> for RdmaAttempt {
    fn from(e: Error) -> Self {
        RdmaAttempt::Failed(e)
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
    pub fn loopback() -> Topology {
        Topology {
            kind: Kind::Loopback,
            tx_ns: None,
            rx_ns: None,
            tx_addr: IpAddr::V4(Ipv4Addr::LOCALHOST),
            rx_addr: IpAddr::V4(Ipv4Addr::LOCALHOST),
            peer_port: 0,
            tx_port: None,
            rx_port: None,
            description: "loopback 127.0.0.1".into(),
            local: true,
            rdma: None,
            home: None,
            journal: None,
            warnings: Vec::new(),
        }
    }

    /// The sending side of a `--peer` run (the receiver is the peer's `--serve`).
    pub fn peer(peer: std::net::SocketAddr) -> Topology {
        let addr = peer.ip();
        let local_any = match addr {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            IpAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
        };
        Topology {
            kind: Kind::Peer,
            tx_ns: None,
            rx_ns: None,
            tx_addr: local_any,
            rx_addr: addr,
            peer_port: peer.port(),
            tx_port: None,
            rx_port: None,
            description: format!("peer {peer} (daqtune selftest --serve)"),
            local: false,
            rdma: None,
            home: None,
            journal: None,
            warnings: Vec::new(),
        }
    }

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

    /// A veth pair between two fresh namespaces, `mtu` on both ends.
    pub fn veth(mtu: u32) -> Result<Topology> {
        Self::veth_with_journal(mtu, Path::new(JOURNAL_DIR))
    }

    pub fn veth_with_journal(mtu: u32, journal_dir: &Path) -> Result<Topology> {
        let (mut t, tx_name, rx_name) = Self::begin(Kind::Veth, journal_dir)?;
        // Journal first: a SIGKILL between here and the end leaves a record to sweep.
        t.save_journal()?;
        t.tx_ns = Some(NetNs::create(&tx_name)?);
        t.rx_ns = Some(NetNs::create(&rx_name)?);
        let (tx, rx) = t.namespaces()?;
        let mut nl_tx = Netlink::open_in(tx)?;
        let mut nl_rx = Netlink::open_in(rx)?;
        nl_tx.create_veth(VETH_TX, VETH_RX, Some(rx.fd()))?;
        let a = find(&mut nl_tx, VETH_TX)?;
        let b = find(&mut nl_rx, VETH_RX)?;
        configure_end(&mut nl_tx, &a, Some(mtu), TX_ADDR, RX_ADDR, &b.mac)?;
        configure_end(&mut nl_rx, &b, Some(mtu), RX_ADDR, TX_ADDR, &a.mac)?;
        t.tx_port = Some(VETH_TX.into());
        t.rx_port = Some(VETH_RX.into());
        t.description = format!(
            "veth pair {tx_name}/{VETH_TX} {TX_ADDR} -> {rx_name}/{VETH_RX} {RX_ADDR}, MTU {mtu}"
        );
        Ok(t)
    }

    /// Two ports cabled back to back, moved into private namespaces. `mtu` None keeps theirs.
    pub fn ports(tx_if: &str, rx_if: &str, mtu: Option<u32>) -> Result<Topology> {
        Self::ports_with_journal(
            tx_if,
            rx_if,
            mtu,
            Path::new(JOURNAL_DIR),
            std::env::var("SSH_CONNECTION").ok().as_deref(),
        )
    }

    pub fn ports_with_journal(
        tx_if: &str,
        rx_if: &str,
        mtu: Option<u32>,
        journal_dir: &Path,
        ssh_connection: Option<&str>,
    ) -> Result<Topology> {
        let (mut t, mut nl, records) =
            Self::prepare_ports(tx_if, rx_if, journal_dir, ssh_connection)?;
        t.save_journal()?;
        t.create_namespaces()?;
        t.place_ports(&mut nl, &records, mtu)?;
        Ok(t)
    }

    /// Checks both ports and writes their records into a fresh journal (not yet saved).
    fn prepare_ports(
        tx_if: &str,
        rx_if: &str,
        journal_dir: &Path,
        ssh_connection: Option<&str>,
    ) -> Result<(Topology, Netlink, Vec<PortRecord>)> {
        if tx_if == rx_if {
            return Err(Error::Invalid(format!(
                "--tx-if and --rx-if are both {tx_if}: two distinct ports are needed"
            )));
        }
        let mut nl = Netlink::open()?;
        let links = nl.links()?;
        let addrs = nl.addrs()?;
        let routes = nl.routes()?;
        let neighbours = nl.neighbours()?;
        let (mut t, tx_name, rx_name) = Self::begin(Kind::Ports, journal_dir)?;
        let mut records = Vec::new();
        for (name, ns) in [(tx_if, &tx_name), (rx_if, &rx_name)] {
            let link = links
                .iter()
                .find(|l| l.name == name)
                .ok_or_else(|| Error::Invalid(format!("no interface named {name}")))?;
            refuse_unsafe_port(link, &addrs, &routes, ssh_connection)?;
            let mut rec = record_port(link, &addrs, &routes, ns);
            rec.neighbours = neighbours
                .iter()
                .filter(|n| n.index == link.index && n.is_permanent())
                .cloned()
                .collect();
            records.push(rec);
        }
        if let Some((_, j)) = &mut t.journal {
            j.ports = records.clone();
        }
        Ok((t, nl, records))
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

    /// Moves both (recorded) ports into the namespaces and addresses them.
    fn place_ports(
        &mut self,
        nl: &mut Netlink,
        records: &[PortRecord],
        mtu: Option<u32>,
    ) -> Result<()> {
        let (tx_if, rx_if) = (records[0].name.as_str(), records[1].name.as_str());
        let (tx_name, rx_name) = (records[0].ns.as_str(), records[1].ns.as_str());
        let (txn, rxn) = self.namespaces()?;
        nl.move_to_ns(records[0].index, txn.fd())?;
        nl.move_to_ns(records[1].index, rxn.fd())?;
        let mut nl_tx = Netlink::open_in(txn)?;
        let mut nl_rx = Netlink::open_in(rxn)?;
        let a = find(&mut nl_tx, tx_if)?;
        let b = find(&mut nl_rx, rx_if)?;
        configure_end(&mut nl_tx, &a, mtu, TX_ADDR, RX_ADDR, &b.mac)?;
        configure_end(&mut nl_rx, &b, mtu, RX_ADDR, TX_ADDR, &a.mac)?;
        self.tx_port = Some(tx_if.into());
        self.rx_port = Some(rx_if.into());
        self.description = format!(
            "ports {tx_if} ({tx_name}) {TX_ADDR} -> {rx_if} ({rx_name}) {RX_ADDR}, MTU {}",
            mtu.map(|m| m.to_string())
                .unwrap_or_else(|| format!("{}/{}", a.mtu, b.mtu))
        );
        Ok(())
    }

    fn rdma_journal(&mut self) -> Result<&mut RdmaJournal> {
        match &mut self.journal {
            Some((_, j)) => Ok(&mut j.rdma),
            None => Err(Error::Invalid("topology has no journal".into())),
        }
    }

    /// A veth pair between two private namespaces with a soft-RoCE device on each end, made
    /// inside its namespace: the RDMA self-test without any RDMA hardware. Needs rdma_rxe with
    /// network-namespace support (recent kernels; not 6.1) and the shared RDMA netns mode (a
    /// soft-RoCE device cannot be placed in exclusive mode). Nothing else on the host changes:
    /// deleting the namespaces destroys the veth pair, and rdma_rxe drops the devices with it.
    pub fn rdma_veth(mtu: u32) -> Result<Topology> {
        Self::rdma_veth_with_journal(mtu, Path::new(JOURNAL_DIR))
    }

    pub fn rdma_veth_with_journal(mtu: u32, journal_dir: &Path) -> Result<Topology> {
        let mut rnl = RdmaNetlink::open()?;
        if rnl.netns_mode()? == NetnsMode::Exclusive {
            return Err(Error::Unsupported(
                "the RDMA subsystem is in exclusive netns mode, where soft-RoCE devices cannot \
                 be placed in the veth pair's namespaces (`rdma system set netns shared`)"
                    .into(),
            ));
        }
        let mut t = Self::veth_with_journal(mtu, journal_dir)?;
        let pid = std::process::id();
        let names = [format!("dqt{pid}-tx"), format!("dqt{pid}-rx")];
        let (txn, rxn) = t.namespaces()?;
        for (name, ns, netdev) in [(&names[0], txn, VETH_TX), (&names[1], rxn, VETH_RX)] {
            RdmaNetlink::open_in(ns).and_then(|mut r| r.add_rxe(name, netdev))?;
        }
        t.description = format!(
            "{}; soft-RoCE {} -> {} made inside the namespaces",
            t.description, names[0], names[1]
        );
        t.rdma = Some(RdmaPlacement {
            netns_mode: NetnsMode::Shared,
            tx_dev: names[0].clone(),
            rx_dev: names[1].clone(),
            moved: false,
            soft_roce_in_namespaces: true,
            notes: Vec::new(),
        });
        Ok(t)
    }

    /// Two ports cabled back to back with their RDMA devices, each pair in a private namespace
    /// so that traffic between them must cross the cable (in one namespace the kernel and the
    /// NIC's embedded switch short-cut it). The RDMA subsystem is switched to exclusive mode
    /// and the devices move with their netdevs; where the switch is refused (EBUSY: other
    /// namespaces exist) or a driver cannot move its device (EOPNOTSUPP: soft-RoCE), the run
    /// falls back to shared mode, where every device stays visible in every namespace. Both
    /// modes are how DAQIRI's wire-loopback script sets up its ports. Everything is journaled
    /// and undone as for [`Topology::ports`], the mode last.
    pub fn rdma_ports(req: &RdmaPortsRequest) -> Result<Topology> {
        Self::rdma_ports_with_journal(
            req,
            Path::new(JOURNAL_DIR),
            std::env::var("SSH_CONNECTION").ok().as_deref(),
        )
    }

    pub fn rdma_ports_with_journal(
        req: &RdmaPortsRequest,
        journal_dir: &Path,
        ssh_connection: Option<&str>,
    ) -> Result<Topology> {
        let mut notes = Vec::new();
        if req.try_exclusive {
            match Self::rdma_attempt(req, true, journal_dir, ssh_connection, &mut notes) {
                Err(RdmaAttempt::Fallback(t)) => {
                    // Restores the mode and removes the namespaces before the shared attempt.
                    drop(t);
                }
                Err(RdmaAttempt::Failed(e)) => return Err(e),
                Ok(t) => return Ok(t),
            }
        }
        match Self::rdma_attempt(req, false, journal_dir, ssh_connection, &mut notes) {
            Ok(t) => Ok(t),
            Err(RdmaAttempt::Failed(e)) => Err(e),
            Err(RdmaAttempt::Fallback(_)) => Err(Error::Invalid(
                "the RDMA devices could not be placed in either namespace mode".into(),
            )),
        }
    }

    fn rdma_attempt(
        req: &RdmaPortsRequest,
        exclusive: bool,
        journal_dir: &Path,
        ssh_connection: Option<&str>,
        notes: &mut Vec<String>,
    ) -> std::result::Result<Topology, RdmaAttempt> {
        use RdmaAttempt::Failed;
        let mut rnl = RdmaNetlink::open()?;
        let (mut t, mut nl, records) =
            Self::prepare_ports(&req.tx_if, &req.rx_if, journal_dir, ssh_connection)?;
        t.save_journal()?;

        // The RDMA device of each port, or a soft-RoCE device made for the run.
        let ports = rnl.ports()?;
        let mut devs = Vec::new();
        for ifname in [&req.tx_if, &req.rx_if] {
            if let Some(p) = port_for_netdev(&ports, ifname) {
                devs.push(p.dev_name.clone());
                continue;
            }
            if !req.soft_roce {
                return Err(Failed(Error::Invalid(format!(
                    "{ifname} has no RDMA device (the kernel lists none on it); give \
                     --soft-roce to run soft-RoCE on it"
                ))));
            }
            let name = format!("dqt-rxe-{ifname}");
            t.rdma_journal()?.created.push(name.clone());
            t.save_journal()?;
            rnl.add_rxe(&name, ifname)?;
            let note = format!("created soft-RoCE device {name} on {ifname}");
            if !notes.contains(&note) {
                notes.push(note);
            }
            devs.push(name);
        }

        let mut mode = rnl.netns_mode()?;
        if exclusive && mode == NetnsMode::Shared {
            t.rdma_journal()?.netns_mode_was = Some(NetnsMode::Shared);
            t.save_journal()?;
            match rnl.set_netns_mode(NetnsMode::Exclusive) {
                Ok(()) => mode = NetnsMode::Exclusive,
                Err(e) => {
                    t.rdma_journal()?.netns_mode_was = None;
                    t.save_journal()?;
                    let why = match os_error(&e) {
                        Some(libc::EBUSY) => {
                            "EBUSY: other network namespaces exist (containers?)".to_string()
                        }
                        _ => e.to_string(),
                    };
                    notes.push(format!(
                        "RDMA netns mode stays shared: switching to exclusive was refused ({why})"
                    ));
                }
            }
        }
        t.create_namespaces()?;
        let moved = mode == NetnsMode::Exclusive;
        if moved {
            let (txn, rxn) = t.namespaces()?;
            let targets = [
                (devs[0].clone(), records[0].ns.clone(), txn.fd()),
                (devs[1].clone(), records[1].ns.clone(), rxn.fd()),
            ];
            for (dev, ns_name, fd) in targets {
                let d = rnl
                    .device_by_name(&dev)?
                    .ok_or_else(|| Failed(Error::Invalid(format!("RDMA device {dev} vanished"))))?;
                t.rdma_journal()?.moved.push((dev.clone(), ns_name));
                t.save_journal()?;
                if let Err(e) = rnl.move_device(&d, fd) {
                    // Nothing was moved by the failed call: forget it before the restore.
                    if let Ok(j) = t.rdma_journal() {
                        j.moved.retain(|(n, _)| n != &dev);
                    }
                    let _ = t.save_journal();
                    let code = os_error(&e);
                    if code == Some(libc::EOPNOTSUPP) && exclusive {
                        notes.push(format!(
                            "RDMA netns mode shared: {dev} cannot change namespace (EOPNOTSUPP: \
                             its driver cannot disassociate user contexts, as soft-RoCE)"
                        ));
                        return Err(RdmaAttempt::Fallback(Box::new(t)));
                    }
                    return Err(Failed(Error::Invalid(format!(
                        "moving {dev} into its namespace: {}",
                        code.map(errno_name).unwrap_or_else(|| e.to_string())
                    ))));
                }
            }
        }
        // Software devices (no PCI function behind them: rxe, siw) follow their netdev.
        let software: Vec<bool> = devs
            .iter()
            .map(|d| {
                !Path::new("/sys/class/infiniband")
                    .join(d)
                    .join("device")
                    .exists()
            })
            .collect();
        if !moved {
            // Journaled before the netdevs move, which unregisters these devices: a run killed
            // in between must still get them made again.
            for (i, dev) in devs.iter().enumerate() {
                let j = t.rdma_journal()?;
                if software[i] && !j.created.contains(dev) {
                    j.recreate.push((dev.clone(), records[i].name.clone()));
                }
            }
            t.save_journal()?;
        }
        t.place_ports(&mut nl, &records, req.mtu)?;

        // rdma_rxe unregisters its device when the netdev leaves the namespace (asynchronously):
        // make it again on the moved netdev, from inside that namespace, and again at home
        // afterwards.
        let soft_roce_in_namespaces = !moved && software.iter().any(|s| *s);
        if !moved {
            // Opened again by name: `t` is changed (journal) while they are used.
            let txn = NetNs::open_named(&records[0].ns)?;
            let rxn = NetNs::open_named(&records[1].ns)?;
            for (i, ns) in [(0usize, &txn), (1usize, &rxn)] {
                let dev = &devs[i];
                let ifname = &records[i].name;
                if !software[i] || !gone_within(&mut rnl, dev, KERNEL_WORK_LIMIT)? {
                    continue;
                }
                let deadline = std::time::Instant::now() + KERNEL_WORK_LIMIT;
                let copy = RdmaNetlink::open_in(ns)
                    .and_then(|mut r| {
                        add_rxe_when_free(&mut r, dev, ifname, deadline)?;
                        r.device_by_name(dev)
                    })
                    .map_err(|e| {
                        Failed(Error::Invalid(format!(
                            "{dev} was unregistered when {ifname} moved into its namespace \
                             (soft-RoCE follows its netdev) and could not be made again there: {e}"
                        )))
                    })?;
                if let Some(copy) = copy {
                    t.rdma_journal()?.copies.push((dev.clone(), copy.index));
                    t.save_journal()?;
                }
                notes.push(format!(
                    "{dev} (soft-RoCE) was unregistered when {ifname} moved; made again inside \
                     the namespace"
                ));
            }
        }
        t.description = format!(
            "{}; RDMA {} -> {}, netns mode {}{}",
            t.description,
            devs[0],
            devs[1],
            mode.as_str(),
            if moved {
                " (devices moved with their ports)"
            } else {
                " (devices visible everywhere)"
            }
        );
        t.rdma = Some(RdmaPlacement {
            netns_mode: mode,
            tx_dev: devs[0].clone(),
            rx_dev: devs[1].clone(),
            moved,
            soft_roce_in_namespaces,
            notes: notes.clone(),
        });
        Ok(t)
    }

    /// Counters of the sending port (transmit side) and the receiving port (receive side):
    /// interface bytes through netlink, and the wire-level `*_bytes_phy` counters through
    /// ethtool where the driver exposes them; read inside each namespace. None without
    /// private ports.
    pub fn port_sample(&self) -> Option<PortSample> {
        let (txn, rxn) = self.namespaces().ok()?;
        type Sample = (crate::netlink::LinkStats, (Option<u64>, Option<u64>));
        let read = |ns: &NetNs, name: &str| -> Option<Sample> {
            let st = Netlink::open_in(ns).ok()?.link_by_name(name).ok()??.stats?;
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

fn find(nl: &mut Netlink, name: &str) -> Result<Link> {
    nl.link_by_name(name)?
        .ok_or_else(|| Error::Invalid(format!("interface {name} not found after set-up")))
}

/// /32 address, link up, /32 route to the peer and a permanent neighbour entry: traffic goes
/// out of this port to the peer's MAC with no ARP and no other route involved.
fn configure_end(
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

fn is_v6_link_local(ip: &IpAddr) -> bool {
    matches!(ip, IpAddr::V6(a) if (a.segments()[0] & 0xffc0) == 0xfe80)
}

/// Whether `ip` lies in `net/len`.
pub fn prefix_contains(net: &IpAddr, len: u8, ip: &IpAddr) -> bool {
    match (net, ip) {
        (IpAddr::V4(n), IpAddr::V4(a)) => {
            let len = len.min(32) as u32;
            let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
            (u32::from(*n) & mask) == (u32::from(*a) & mask)
        }
        (IpAddr::V6(n), IpAddr::V6(a)) => {
            let len = len.min(128) as u32;
            let mask = if len == 0 {
                0
            } else {
                u128::MAX << (128 - len)
            };
            (u128::from(*n) & mask) == (u128::from(*a) & mask)
        }
        _ => false,
    }
}

/// The local address of an SSH session from `SSH_CONNECTION` ("client port server port").
pub fn parse_ssh_connection(s: &str) -> Option<(IpAddr, IpAddr)> {
    let mut it = s.split_whitespace();
    let client = it.next()?;
    let _ = it.next()?;
    let server = it.next()?;
    let strip = |x: &str| -> Option<IpAddr> { x.split('%').next()?.parse().ok() };
    Some((strip(client)?, strip(server)?))
}

/// Refuses a port whose move would cut the host off: one carrying a default route, the SSH
/// session's address, or the route back to the SSH client; loopback; a multipath member (its
/// route could not be restored exactly).
pub fn refuse_unsafe_port(
    link: &Link,
    addrs: &[Addr],
    routes: &[Route],
    ssh_connection: Option<&str>,
) -> Result<()> {
    let name = &link.name;
    if name == "lo" {
        return Err(Error::Refused("lo is the loopback interface".into()));
    }
    if let Some(r) = routes
        .iter()
        .find(|r| r.is_default() && r.uses_link(link.index))
    {
        return Err(Error::Refused(format!(
            "{name} carries a default route{}: moving it would cut this host off",
            r.gateway.map(|g| format!(" via {g}")).unwrap_or_default()
        )));
    }
    if routes
        .iter()
        .any(|r| !r.multipath_oifs.is_empty() && r.uses_link(link.index))
    {
        return Err(Error::Refused(format!(
            "{name} is a next hop of a multipath route, which daqtune cannot restore exactly"
        )));
    }
    if let Some((client, server)) = ssh_connection.and_then(parse_ssh_connection) {
        if addrs
            .iter()
            .any(|a| a.index == link.index && a.local == server)
        {
            return Err(Error::Refused(format!(
                "{name} holds {server}, the address of the current SSH session"
            )));
        }
        if routes.iter().any(|r| {
            r.uses_link(link.index)
                && r.table == crate::netlink::RT_TABLE_MAIN as u32
                && r.dst
                    .as_ref()
                    .is_some_and(|d| prefix_contains(d, r.dst_len, &client))
        }) {
            return Err(Error::Refused(format!(
                "the route to the SSH client {client} goes through {name}"
            )));
        }
    }
    Ok(())
}

fn record_port(link: &Link, addrs: &[Addr], routes: &[Route], ns: &str) -> PortRecord {
    PortRecord {
        name: link.name.clone(),
        index: link.index,
        mtu: link.mtu,
        up: link.is_up(),
        addrs: addrs
            .iter()
            .filter(|a| a.index == link.index && !is_v6_link_local(&a.local))
            .cloned()
            .collect(),
        routes: routes
            .iter()
            .filter(|r| {
                r.uses_link(link.index)
                    && r.protocol != RTPROT_KERNEL
                    // IPv6 router advertisements re-learn their routes.
                    && r.protocol != 9
                    && r.table != 255
                    && !r.dst.as_ref().is_some_and(is_v6_link_local)
            })
            .cloned()
            .collect(),
        neighbours: Vec::new(),
        ns: ns.to_string(),
    }
}

/// Finds the namespace a journal calls home: ours, init's, or a named one.
fn find_home(id: &NsId) -> Option<NetNs> {
    let mut candidates = vec![
        NetNs::current().ok(),
        NetNs::open(Path::new("/proc/1/ns/net")).ok(),
    ];
    for name in netns::list_named() {
        candidates.push(NetNs::open_named(&name).ok());
    }
    candidates
        .into_iter()
        .flatten()
        .find(|n| n.id().ok().as_ref() == Some(id))
}

/// Puts ports back and removes namespaces, as recorded. Returns what could not be done.
pub fn restore(j: &Journal, home: Option<&NetNs>) -> Vec<String> {
    let mut warnings = Vec::new();
    let found;
    let home = match home {
        Some(h) => Some(h),
        None => {
            found = find_home(&j.home_ns);
            found.as_ref()
        }
    };
    if !j.rdma.is_empty() {
        if let Some(home) = home {
            warnings.extend(restore_rdma_moves(&j.rdma, home));
        }
    }
    let doomed = doomed_rdma_devices(j);
    for p in &j.ports {
        let Some(home) = home else {
            warnings.push(format!(
                "{}: its home namespace is gone; left in {}",
                p.name, p.ns
            ));
            continue;
        };
        // Bring the port home if it is still in our namespace.
        if let Ok(ns) = NetNs::open_named(&p.ns) {
            match Netlink::open_in(&ns).and_then(|mut nl| {
                if let Some(l) = nl.link_by_name(&p.name)? {
                    nl.set_up(l.index, false)?;
                    nl.move_to_ns(l.index, home.fd())?;
                }
                Ok(())
            }) {
                Ok(()) => {}
                Err(e) => warnings.push(format!("{}: move back: {e}", p.name)),
            }
        }
        if let Err(e) = Netlink::open_in(home).and_then(|mut nl| restore_port(&mut nl, p)) {
            warnings.push(format!("{}: restore: {e}", p.name));
        }
    }
    for name in &j.namespaces {
        if let Err(e) = netns::delete_named(name) {
            warnings.push(format!("namespace {name}: {e}"));
        }
    }
    if !j.rdma.is_empty() {
        warnings.extend(restore_rdma_rest(&j.rdma, &doomed));
    }
    warnings
}

/// Brings RDMA devices moved into daqtune namespaces home (in exclusive mode a device is only
/// visible from its namespace, so the request is made from there). Deleting the namespace
/// would return them too, but only once the kernel has finished tearing it down.
fn restore_rdma_moves(r: &RdmaJournal, home: &NetNs) -> Vec<String> {
    let mut warnings = Vec::new();
    for (dev, ns_name) in &r.moved {
        let Ok(ns) = NetNs::open_named(ns_name) else {
            continue; // namespace gone: the kernel has returned the device already
        };
        let moved = RdmaNetlink::open_in(&ns).and_then(|mut nl| match nl.device_by_name(dev)? {
            Some(d) => nl.move_device(&d, home.fd()),
            None => Ok(()),
        });
        if let Err(e) = moved {
            warnings.push(format!("RDMA device {dev}: move back from {ns_name}: {e}"));
        }
    }
    warnings
}

/// What the re-creation of soft-RoCE device `dev` on `netdev` does next, given the kernel's
/// RDMA ports and the indexes of the devices that are doomed (bound to the netdev while it was
/// away; see [`doomed_rdma_devices`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RecreateStep {
    /// A device of that name that will stay sits on the netdev (made by an earlier restore).
    Done,
    /// No device of that name is left: make it.
    Make,
    /// A device of that name is still listed (a copy the kernel is unregistering): wait.
    Wait,
}

fn recreate_step(dev: &str, netdev: &str, ports: &[RdmaPort], doomed: &[u32]) -> RecreateStep {
    let mut named = ports.iter().filter(|p| p.dev_name == dev).peekable();
    if named.peek().is_none() {
        return RecreateStep::Make;
    }
    if named.any(|p| p.netdev.as_deref() == Some(netdev) && !doomed.contains(&p.dev_index)) {
        RecreateStep::Done
    } else {
        RecreateStep::Wait
    }
}

/// The kernel indexes of the RDMA devices that will vanish by themselves: the copies the run
/// journaled, and any device of a to-be-recreated name still bound to its netdev while that
/// netdev is away in a daqtune namespace (the run may have been killed between making a copy and
/// journaling it; the original, too, is only queued for unregistration when its netdev leaves).
/// Read before the ports go home, because afterwards a doomed copy and a device made again look
/// alike (same name, same netdev) until the kernel's queued work removes the copy.
fn doomed_rdma_devices(j: &Journal) -> Vec<u32> {
    let mut doomed: Vec<u32> = j.rdma.copies.iter().map(|(_, index)| *index).collect();
    for (dev, netdev) in &j.rdma.recreate {
        let Some(port) = j.ports.iter().find(|p| &p.name == netdev) else {
            continue;
        };
        let Ok(ns) = NetNs::open_named(&port.ns) else {
            continue;
        };
        let away = Netlink::open_in(&ns)
            .and_then(|mut nl| nl.link_by_name(netdev))
            .is_ok_and(|l| l.is_some());
        if !away {
            continue;
        }
        // From inside (exclusive mode hides it from home) and from home (the original).
        for rnl in [RdmaNetlink::open_in(&ns), RdmaNetlink::open()] {
            if let Ok(Some(d)) = rnl.and_then(|mut r| r.device_by_name(dev)) {
                if !doomed.contains(&d.index) {
                    doomed.push(d.index);
                }
            }
        }
    }
    doomed
}

/// After the ports are home and the namespaces deleted: soft-RoCE devices this run made are
/// deleted, those that vanished with their netdev's move are made again, and the namespace
/// mode goes back to what it was.
fn restore_rdma_rest(r: &RdmaJournal, doomed: &[u32]) -> Vec<String> {
    let mut warnings = Vec::new();
    let mut nl = match RdmaNetlink::open() {
        Ok(nl) => nl,
        Err(e) => return vec![format!("RDMA netlink: {e}")],
    };
    for dev in &r.created {
        match nl.device_by_name(dev) {
            Ok(Some(d)) => {
                if let Err(e) = nl.delete_link(&d) {
                    warnings.push(format!("soft-RoCE device {dev}: delete: {e}"));
                }
            }
            Ok(None) => {}
            Err(e) => warnings.push(format!("soft-RoCE device {dev}: {e}")),
        }
    }
    for (dev, netdev) in &r.recreate {
        // The copy made inside the namespace is unregistered (asynchronously) now that the
        // netdev is home: wait for it to go, then make the device again where it was.
        let deadline = std::time::Instant::now() + KERNEL_WORK_LIMIT;
        let mut last_error = None;
        loop {
            let step = match nl.ports() {
                Ok(ports) => recreate_step(dev, netdev, &ports, doomed),
                Err(e) => {
                    last_error = Some(e.to_string());
                    RecreateStep::Wait
                }
            };
            match step {
                RecreateStep::Done => break,
                RecreateStep::Make => {
                    if let Err(e) = add_rxe_when_free(&mut nl, dev, netdev, deadline) {
                        warnings.push(format!(
                            "soft-RoCE device {dev} on {netdev}: make again: {e}"
                        ));
                    }
                    break;
                }
                RecreateStep::Wait => {}
            }
            if std::time::Instant::now() > deadline {
                let why = last_error
                    .map(|e| format!(" (RDMA netlink: {e})"))
                    .unwrap_or_default();
                warnings.push(format!(
                    "soft-RoCE device {dev} did not go away with its namespace copy{why}; make it \
                     again with `rdma link add {dev} type rxe netdev {netdev}`"
                ));
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
    if let Some(was) = r.netns_mode_was {
        warnings.extend(restore_netns_mode(&mut nl, was));
    }
    warnings
}

/// Switches the namespace mode back. The kernel answers EBUSY while any namespace other than
/// the initial one exists, and a deleted namespace is torn down asynchronously, so this waits
/// for ours to go (up to [`KERNEL_WORK_LIMIT`]: namespace teardown is queued work, slow on a
/// loaded host).
fn restore_netns_mode(nl: &mut RdmaNetlink, was: NetnsMode) -> Vec<String> {
    let deadline = std::time::Instant::now() + KERNEL_WORK_LIMIT;
    loop {
        match nl.netns_mode() {
            Ok(m) if m == was => return Vec::new(),
            Ok(_) => {}
            Err(e) => return vec![format!("RDMA netns mode: {e}")],
        }
        match nl.set_netns_mode(was) {
            Ok(()) => return Vec::new(),
            Err(e) if os_error(&e) == Some(libc::EBUSY) && std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            Err(e) => {
                return vec![format!(
                    "RDMA netns mode left {} (was {}): {e}; other network namespaces exist: \
                     `rdma system set netns {}` once they are gone",
                    was_other(was).as_str(),
                    was.as_str(),
                    was.as_str()
                )]
            }
        }
    }
}

fn was_other(m: NetnsMode) -> NetnsMode {
    match m {
        NetnsMode::Shared => NetnsMode::Exclusive,
        NetnsMode::Exclusive => NetnsMode::Shared,
    }
}

fn exists_err(e: &Error) -> bool {
    matches!(e, Error::Netlink { source, .. } if source.raw_os_error() == Some(libc::EEXIST))
}

fn restore_port(nl: &mut Netlink, p: &PortRecord) -> Result<()> {
    let link = nl.link_by_name(&p.name)?.ok_or_else(|| {
        Error::Invalid(format!(
            "{} is neither in its daqtune namespace nor at home",
            p.name
        ))
    })?;
    if link.mtu != p.mtu {
        nl.set_mtu(link.index, p.mtu)?;
    }
    for a in &p.addrs {
        let mut a = a.clone();
        a.index = link.index;
        match nl.add_addr(&a) {
            Err(e) if !exists_err(&e) => return Err(e),
            _ => {}
        }
    }
    // Routes through a link need it up; a port that was down had only routes the kernel
    // keeps flagged `linkdown`, which come back with the link.
    nl.set_up(link.index, true)?;
    for r in &p.routes {
        let mut r = r.clone();
        if r.oif == Some(p.index) {
            r.oif = Some(link.index);
        }
        match nl.add_route(&r) {
            Err(e) if !exists_err(&e) => return Err(e),
            _ => {}
        }
    }
    for n in &p.neighbours {
        nl.add_permanent_neighbour(link.index, n.ip, &n.mac)?;
    }
    if !p.up {
        nl.set_up(link.index, false)?;
    }
    Ok(())
}

/// Restores what killed runs left behind: journals whose owner is gone, then any
/// `daqtune-<pid>-*` namespace whose pid is not running. Never touches other namespaces.
pub fn recover_leftovers() -> Vec<String> {
    recover_in(Path::new(JOURNAL_DIR))
}

pub fn recover_in(dir: &Path) -> Vec<String> {
    let mut notes = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    entries.sort();
    for path in entries {
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let j = match Journal::parse(&text) {
            Ok(j) => j,
            Err(e) => {
                notes.push(format!(
                    "{}: unreadable journal ({e}); left alone",
                    path.display()
                ));
                continue;
            }
        };
        if j.owner_alive() {
            continue;
        }
        let w = restore(&j, None);
        if w.is_empty() {
            let _ = std::fs::remove_file(&path);
            let rdma = if j.rdma.is_empty() {
                String::new()
            } else {
                format!(
                    ", RDMA: {} device(s) moved, {} made, {} to make again{}",
                    j.rdma.moved.len(),
                    j.rdma.created.len(),
                    j.rdma.recreate.len(),
                    j.rdma
                        .netns_mode_was
                        .map(|m| format!(", netns mode back to {}", m.as_str()))
                        .unwrap_or_default()
                )
            };
            notes.push(format!(
                "restored what run {} left behind ({} namespace(s), {} port(s){rdma})",
                j.pid,
                j.namespaces.len(),
                j.ports.len()
            ));
        } else {
            notes.extend(w);
            notes.push(format!(
                "journal {} kept for the next run to retry",
                path.display()
            ));
        }
    }
    for name in netns::list_named() {
        let Some(pid) = netns::owner_pid(&name) else {
            continue;
        };
        if pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        match netns::delete_named(&name) {
            Ok(()) => notes.push(format!("removed leftover namespace {name}")),
            Err(e) => notes.push(format!("leftover namespace {name}: {e}")),
        }
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netlink::{RTN_UNICAST, RT_TABLE_MAIN};

    fn link(i: i32, name: &str) -> Link {
        Link {
            index: i,
            name: name.into(),
            mtu: 1500,
            flags: 1,
            mac: vec![2, 0, 0, 0, 0, 1],
            stats: None,
        }
    }

    fn addr(i: i32, ip: &str, len: u8) -> Addr {
        Addr {
            index: i,
            prefix_len: len,
            flags: 0x80,
            scope: 0,
            local: ip.parse().expect("ip"),
            peer: None,
            broadcast: None,
            label: None,
        }
    }

    fn default_via(i: i32) -> Route {
        Route {
            family: 2,
            dst: None,
            dst_len: 0,
            table: RT_TABLE_MAIN as u32,
            protocol: 3,
            scope: 0,
            kind: RTN_UNICAST,
            oif: Some(i),
            gateway: Some("10.0.0.1".parse().expect("ip")),
            prefsrc: None,
            priority: None,
            multipath_oifs: vec![],
        }
    }

    #[test]
    fn default_route_port_refused() {
        let e = refuse_unsafe_port(&link(2, "eth0"), &[], &[default_via(2)], None);
        assert!(matches!(e, Err(Error::Refused(m)) if m.contains("default route")));
        assert!(refuse_unsafe_port(&link(3, "eth1"), &[], &[default_via(2)], None).is_ok());
        assert!(refuse_unsafe_port(&link(1, "lo"), &[], &[], None).is_err());
    }

    #[test]
    fn ssh_port_refused() {
        let addrs = [addr(3, "192.168.1.5", 24)];
        let ssh = Some("192.168.1.9 50000 192.168.1.5 22");
        let e = refuse_unsafe_port(&link(3, "eth1"), &addrs, &[], ssh);
        assert!(matches!(e, Err(Error::Refused(m)) if m.contains("SSH")));
        // Route to the client through the port, address elsewhere.
        let mut r = Route::host_route("192.168.1.0".parse().expect("ip"), 4);
        r.dst_len = 24;
        let e = refuse_unsafe_port(&link(4, "eth2"), &addrs, &[r], ssh);
        assert!(matches!(e, Err(Error::Refused(m)) if m.contains("SSH client")));
        assert!(refuse_unsafe_port(&link(5, "eth3"), &addrs, &[], ssh).is_ok());
        assert!(refuse_unsafe_port(&link(5, "eth3"), &addrs, &[], Some("garbage")).is_ok());
    }

    #[test]
    fn ssh_connection_parse() {
        assert_eq!(
            parse_ssh_connection("10.0.0.2 5000 10.0.0.1 22"),
            Some((
                "10.0.0.2".parse().expect("ip"),
                "10.0.0.1".parse().expect("ip")
            ))
        );
        assert!(parse_ssh_connection("fe80::1%eth0 5 fe80::2%eth0 22").is_some());
        assert_eq!(parse_ssh_connection(""), None);
        assert_eq!(parse_ssh_connection("a b c d"), None);
    }

    #[test]
    fn prefixes() {
        let n: IpAddr = "198.18.0.0".parse().expect("ip");
        assert!(prefix_contains(
            &n,
            15,
            &"198.19.255.1".parse().expect("ip")
        ));
        assert!(!prefix_contains(&n, 15, &"198.20.0.1".parse().expect("ip")));
        assert!(prefix_contains(&n, 0, &"1.2.3.4".parse().expect("ip")));
        let v6: IpAddr = "fd00::".parse().expect("ip");
        assert!(prefix_contains(&v6, 8, &"fd12::1".parse().expect("ip")));
        assert!(!prefix_contains(&v6, 8, &"10.0.0.1".parse().expect("ip")));
    }

    #[test]
    fn record_skips_kernel_made_state() {
        let addrs = [
            addr(2, "198.18.5.1", 24),
            addr(2, "fe80::1", 64),
            addr(3, "10.1.1.1", 8),
        ];
        let mut kernel = Route::host_route("198.18.5.0".parse().expect("ip"), 2);
        kernel.protocol = RTPROT_KERNEL;
        let stat = Route::host_route("198.18.9.0".parse().expect("ip"), 2);
        let rec = record_port(&link(2, "p0"), &addrs, &[kernel, stat.clone()], "ns");
        assert_eq!(rec.addrs, vec![addrs[0].clone()]);
        assert_eq!(rec.routes, vec![stat]);
        assert!(rec.up);
    }

    fn rdma_port(index: u32, dev: &str, netdev: Option<&str>) -> RdmaPort {
        RdmaPort {
            dev_index: index,
            dev_name: dev.into(),
            port: 1,
            state: Some(4),
            netdev_index: netdev.map(|_| 7),
            netdev: netdev.map(String::from),
        }
    }

    #[test]
    fn a_doomed_copy_on_the_netdev_is_not_the_device_made_again() {
        use RecreateStep::*;
        // The run's copy (index 8) is still listed on dqa after dqa came home: the kernel has
        // queued its unregistration, so it is waited for, not taken for the restored rxe0 (the
        // lifecycle under load: rxe0 was later gone, or made again after rxe1).
        let copy = [rdma_port(8, "rxe0", Some("dqa"))];
        assert_eq!(recreate_step("rxe0", "dqa", &copy, &[8]), Wait);
        // Gone: make it. Made again (a new index): done, also when a recover runs twice.
        assert_eq!(recreate_step("rxe0", "dqa", &[], &[8]), Make);
        let made = [
            rdma_port(10, "rxe0", Some("dqa")),
            rdma_port(11, "rxe1", Some("dqb")),
        ];
        assert_eq!(recreate_step("rxe0", "dqa", &made, &[8, 9]), Done);
        assert_eq!(recreate_step("rxe1", "dqb", &made, &[8, 9]), Done);
        // Listed but unregistering (its netdev no longer shown), or on another netdev: wait.
        assert_eq!(
            recreate_step("rxe0", "dqa", &[rdma_port(8, "rxe0", None)], &[]),
            Wait
        );
        assert_eq!(
            recreate_step("rxe0", "dqa", &[rdma_port(3, "rxe0", Some("eth9"))], &[]),
            Wait
        );
        // Another device on the netdev does not count as rxe0.
        assert_eq!(
            recreate_step("rxe0", "dqa", &[rdma_port(12, "rxe7", Some("dqa"))], &[]),
            Make
        );
    }

    #[test]
    fn journal_round_trip_and_garbage() {
        let j = Journal {
            version: 1,
            pid: 42,
            starttime: 7,
            home_ns: NsId {
                dev: 4,
                ino: 4026531840,
            },
            namespaces: vec!["daqtune-42-0-tx".into()],
            ports: vec![],
            rdma: RdmaJournal {
                netns_mode_was: Some(NetnsMode::Shared),
                moved: vec![("mlx5_0".into(), "daqtune-42-0-tx".into())],
                created: vec![],
                recreate: vec![("rxe0".into(), "dqa".into())],
                copies: vec![("rxe0".into(), 8)],
            },
        };
        let dir = tempfile::tempdir().expect("tmp");
        let p = dir.path().join("j.json");
        j.save(&p).expect("save");
        let text = std::fs::read_to_string(&p).expect("read");
        assert!(text.contains("\"netns_mode_was\": \"shared\""), "{text}");
        let back = Journal::parse(&text).expect("parse");
        assert_eq!(back, j);
        // Journals written before the RDMA part existed still parse (nothing RDMA to undo).
        let old = text.split("\"rdma\"").next().expect("prefix").trim_end();
        let old = format!("{}}}", old.trim_end_matches(','));
        let back = Journal::parse(&old).expect("old journal");
        assert!(back.rdma.is_empty());
        assert!(Journal::parse("").is_err());
        assert!(Journal::parse("{\"version\":1}").is_err());
        // A dead owner with an unreadable journal is reported, not acted on.
        std::fs::write(dir.path().join("bad.json"), "{garbage").expect("write");
        let notes = recover_in(dir.path());
        assert!(notes.iter().any(|n| n.contains("unreadable")));
    }
}
