//! The data path on the PCI bus: which NIC functions carry it (the profile's interfaces, else
//! the ConnectX physical functions), the GPU and NIC endpoints the PCIe checks judge, and the
//! ports the plan configures. One definition for the checks and the plan.

use super::Context;
use crate::model::appconfig::netaddr::LocalAddrs;
use crate::model::appconfig::{AppConfig, Field, Interface, Transport};
use crate::model::facts::Facts;
use crate::model::profile::LoadedProfile;
use crate::model::verdict::Verdict;
use daqtune_probe::pci::config::Visibility;
use daqtune_probe::pci::nic::NicFunction;
use daqtune_probe::pci::{PciAddr, PciDevice, PciFacts, PciTree};
use std::net::IpAddr;

/// The NIC functions of the data path: those the profile names (by netdev, RDMA device or PCI
/// address), else every ConnectX physical function ([`Context::data_path_nics`]).
pub fn data_path_nics<'f>(ctx: &Context, facts: &'f PciFacts) -> Vec<&'f NicFunction> {
    ctx.data_path_nics(facts)
}

/// Why no data-path NIC is there to judge (skip message), with Spark's cable pre-flight.
pub fn no_nic_reason(ctx: &Context) -> String {
    let p = &ctx.profile.profile.nic;
    if !p.interfaces.is_empty() {
        return format!(
            "none of the profile's interfaces ({}) is on this host",
            p.interfaces.join(", ")
        );
    }
    if p.cable_preflight {
        "no ConnectX function on the PCI bus: DGX Spark removes the CX-7 PFs when no QSFP cable is plugged in (plug a cable; see seed 000 pre-flight)".into()
    } else {
        "no ConnectX (vendor 0x15b3) network function on the PCI bus".into()
    }
}

pub const NEEDS_ROOT: &str =
    "config space beyond the first 64 bytes is readable only by root (run with sudo)";

/// The PCI facts, or the skip every PCI-based check gives without them.
pub fn pci_or_skip<'c>(ctx: &'c Context, id: &str) -> Result<&'c PciFacts, Vec<Verdict>> {
    ctx.pci()
        .map_err(|e| vec![Verdict::skip(id, "host", e.to_string())])
}

/// The data-path NICs, or the one `skip` verdict that says why there is nothing to judge.
pub fn data_path_nics_or_skip<'c>(
    ctx: &'c Context,
    id: &str,
) -> Result<Vec<&'c NicFunction>, Vec<Verdict>> {
    let nics = data_path_nics(ctx, pci_or_skip(ctx, id)?);
    if nics.is_empty() {
        return Err(vec![Verdict::skip(id, "host", no_nic_reason(ctx))]);
    }
    Ok(nics)
}

/// The NVIDIA GPUs on the PCI bus (physical functions).
pub fn pci_gpus(tree: &PciTree) -> Vec<&PciDevice> {
    tree.gpus().filter(|g| !g.is_vf).collect()
}

pub fn gpu_label(g: &PciDevice) -> String {
    format!("{} ({})", g.addr, g.short_name())
}

/// GPUs and data-path NIC functions, the endpoints whose paths the checks judge.
/// GPUs and data-path NIC functions with their report labels.
pub type Endpoints<'f> = Vec<(&'f PciDevice, String)>;

/// The PCI facts and the GPU / data-path NIC endpoints, or the skip every PCIe check gives
/// when there are none (or the PCI tree cannot be read).
pub fn endpoints_or_skip<'c>(
    ctx: &'c Context,
    id: &str,
) -> Result<(&'c PciFacts, Endpoints<'c>), Vec<Verdict>> {
    let f = pci_or_skip(ctx, id)?;
    let eps = endpoints(ctx, f);
    if eps.is_empty() {
        return Err(vec![Verdict::skip(
            id,
            "host",
            "no NVIDIA GPU and no data-path NIC on the PCI bus",
        )]);
    }
    Ok((f, eps))
}

pub fn endpoints<'f>(ctx: &Context, f: &'f PciFacts) -> Endpoints<'f> {
    let mut v: Vec<(&PciDevice, String)> = pci_gpus(&f.tree)
        .into_iter()
        .map(|g| (g, gpu_label(g)))
        .collect();
    for n in data_path_nics(ctx, f) {
        if let Some(d) = f.tree.get(n.addr) {
            v.push((d, n.label()));
        }
    }
    v
}

/// The data-path NIC functions with their PCI device.
pub fn nic_devices<'f>(ctx: &Context, f: &'f PciFacts) -> Vec<(&'f PciDevice, &'f NicFunction)> {
    data_path_nics(ctx, f)
        .into_iter()
        .filter_map(|n| f.tree.get(n.addr).map(|d| (d, n)))
        .collect()
}

/// The skip of a device whose PCI Express capability could not be read, saying why.
pub fn cap_visibility_skip(ctx: &Context, id: &str, label: String, d: &PciDevice) -> Verdict {
    let why = match (&d.config, &d.config_error) {
        (_, Some(e)) => format!("config space unreadable: {e}"),
        (Some(c), _) if c.pcie_visibility == Visibility::Hidden => {
            crate::model::capture::unseen_registers(ctx.facts(), &d.addr.to_string(), c.len)
                .unwrap_or_else(|| NEEDS_ROOT.to_string())
        }
        (Some(_), _) => "no PCI Express capability".to_string(),
        (None, None) => "config space not read".to_string(),
    };
    Verdict::skip(id, label, why)
}

/// A ConnectX physical function of the plan: its address and (netdev, MAC) pairs.
pub struct NicPort {
    pub bdf: String,
    pub netdevs: Vec<(String, Option<String>)>,
}

/// Why the data ports are not known: the PCI facts they come from could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PortsError {
    #[error("{0}")]
    Pci(String),
}

/// For the planners, whose notes are text.
impl From<PortsError> for String {
    fn from(e: PortsError) -> String {
        e.to_string()
    }
}

/// The ConnectX physical functions (what MRRS is planned for, and the default data ports).
pub fn connectx_pfs(facts: &Facts) -> Result<Vec<NicPort>, PortsError> {
    let facts = facts.pci().map_err(|e| PortsError::Pci(e.to_string()))?;
    Ok(facts
        .nics
        .iter()
        .filter(|n| n.connectx && !n.is_vf)
        .map(|n| NicPort {
            bdf: n.addr.to_string(),
            netdevs: n
                .netdevs
                .iter()
                .map(|d| (d.name.clone(), d.address.clone()))
                .collect(),
        })
        .collect())
}

/// A data-path port: (interface, MAC, PCI function).
pub type Port = (String, Option<String>, Option<String>);

/// The data-path interfaces to configure: the profile's, else every ConnectX PF's netdevs.
pub fn data_interfaces(facts: &Facts, lp: &LoadedProfile) -> Result<Vec<Port>, PortsError> {
    let named = &lp.profile.nic.interfaces;
    let pfs = connectx_pfs(facts)?;
    let mut out = Vec::new();
    if named.is_empty() {
        for pf in pfs {
            for (n, mac) in pf.netdevs {
                out.push((n, mac, Some(pf.bdf.clone())));
            }
        }
    } else {
        for n in named {
            let pf = pfs.iter().find(|p| p.netdevs.iter().any(|d| &d.0 == n));
            // A ConnectX netdev's MAC is in the PCI facts; another port's is read.
            let mac = match pf.and_then(|p| p.netdevs.iter().find(|d| &d.0 == n)) {
                Some((_, mac)) => mac.clone(),
                None => facts.read_attr(&format!("/sys/class/net/{n}/address")).ok(),
            };
            let bdf = pf.map(|p| p.bdf.clone());
            out.push((n.clone(), mac, bdf));
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// The ports of a DAQIRI configuration (`--config`)

/// What an interface of a DAQIRI configuration is on this host: a NIC function and a netdev.
#[derive(Debug, Clone, Default)]
pub struct AppPort<'f> {
    pub nic: Option<&'f NicFunction>,
    pub netdev: Option<String>,
}

/// The NIC function with this netdev or RDMA device.
pub fn nic_by_netdev<'f>(facts: &'f PciFacts, name: &str) -> Option<&'f NicFunction> {
    facts
        .nics
        .iter()
        .find(|n| n.netdev_names().contains(&name) || n.rdma_names().contains(&name))
}

/// The local IP hosts an interface binds (its `address`, and `local_addr`'s host when it
/// differs), with the key each comes from.
pub fn socket_hosts(i: &Interface) -> Vec<(String, usize, String)> {
    let mut out = Vec::new();
    if let Some(Field {
        path,
        line,
        value: Ok(a),
    }) = &i.address
    {
        out.push((path.clone(), *line, a.clone()));
    }
    if let Some(Field {
        path,
        line,
        value: Ok(ep),
    }) = &i.local_addr
    {
        if !out.iter().any(|(_, _, h)| *h == ep.host) {
            out.push((path.clone(), *line, ep.host.clone()));
        }
    }
    out
}

/// Every port an interface of the configuration uses on this host: a raw interface's NIC
/// function (by PCI address, netdev or RDMA device) with its first netdev; a socket or RDMA
/// interface's netdev for each local address it binds ([`socket_hosts`]: `address`, then
/// `local_addr`), in that order, where the namespace has it. The `app.*` checks judge the first;
/// `--config` makes all their netdevs the data-path interfaces ([`app_netdevs`]).
pub fn app_ports<'f>(
    i: &Interface,
    pci: Option<&'f PciFacts>,
    addrs: Option<&LocalAddrs>,
) -> Vec<AppPort<'f>> {
    match i.transport {
        Transport::Raw => {
            let (Some(a), Some(f)) = (i.address(), pci) else {
                return Vec::new();
            };
            let nic = match a.parse::<PciAddr>() {
                Ok(addr) => f.nics.iter().find(|n| n.addr == addr),
                Err(_) => nic_by_netdev(f, a),
            };
            nic.map(|n| AppPort {
                nic: Some(n),
                netdev: n.netdevs.first().map(|d| d.name.clone()),
            })
            .into_iter()
            .collect()
        }
        _ => {
            let Some(addrs) = addrs else {
                return Vec::new();
            };
            socket_hosts(i)
                .into_iter()
                .filter_map(|(_, _, host)| addrs.netdev_of(host.parse::<IpAddr>().ok()?))
                .map(|nd| AppPort {
                    nic: pci.and_then(|f| nic_by_netdev(f, &nd)),
                    netdev: Some(nd),
                })
                .collect()
        }
    }
}

/// The data-path interfaces of a configuration on this host: the netdevs of every interface's
/// [`app_ports`], in order, once each; never `lo` (a loopback test binds it, and it is no port
/// to tune).
pub fn app_netdevs(
    app: &AppConfig,
    pci: Option<&PciFacts>,
    addrs: Option<&LocalAddrs>,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for i in &app.interfaces {
        for nd in app_ports(i, pci, addrs)
            .into_iter()
            .filter_map(|p| p.netdev)
        {
            if nd != "lo" && !out.contains(&nd) {
                out.push(nd);
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// The ports daqtune never changes

/// The ports daqtune never changes, each with why: the one carrying the default route, and the
/// one an SSH session to this host came in on (the server address of `SSH_CONNECTION` on the
/// live host; an established connection to port 22 in /proc/net/tcp and tcp6 on any root).
/// A wrong MTU, ring or queue count or a second NetworkManager profile there cuts the operator
/// off a remote instrument host (issue 42).
pub fn management_ports(facts: &Facts) -> Vec<(String, String)> {
    use crate::model::appconfig::netaddr::parse_route;
    let mut out: Vec<(String, String)> = Vec::new();
    let mut add = |name: String, why: String| {
        if !out.iter().any(|(n, _)| *n == name) {
            out.push((name, why));
        }
    };
    let routes = facts
        .read_string("/proc/net/route")
        .map(|t| parse_route(&t))
        .unwrap_or_default();
    for r in routes
        .iter()
        .filter(|r| r.dest.is_unspecified() && r.mask.is_unspecified())
    {
        add(
            r.iface.clone(),
            "it carries the default route (/proc/net/route)".into(),
        );
    }
    let fallback;
    let addrs = match facts.local_addrs() {
        Ok(a) => a,
        Err(_) => {
            fallback = LocalAddrs {
                routes,
                ..Default::default()
            };
            &fallback
        }
    };
    let mut sessions: Vec<(IpAddr, String)> = Vec::new();
    if facts.host.is_live() {
        // SSH_CONNECTION: client address, client port, server address, server port.
        if let Some(server) = std::env::var("SSH_CONNECTION")
            .ok()
            .and_then(|v| v.split_whitespace().nth(2).and_then(|a| a.parse().ok()))
        {
            sessions.push((server, "this SSH session's address (SSH_CONNECTION)".into()));
        }
    }
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        if let Ok(t) = facts.read_string(table) {
            for ip in ssh_server_addrs(&t) {
                sessions.push((ip, format!("an SSH session reaches it ({table})")));
            }
        }
    }
    for (ip, why) in sessions {
        if let Some(dev) = addrs.netdev_of(ip).filter(|d| d != "lo") {
            add(dev, format!("{why} on {ip}"));
        }
    }
    out
}

/// The local addresses of established TCP connections to port 22 in a /proc/net/tcp{,6}
/// table (`sl local_address rem_address st ...`, addresses in the kernel's word order).
fn ssh_server_addrs(table: &str) -> Vec<IpAddr> {
    let mut out = Vec::new();
    for l in table.lines().skip(1) {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() < 4 || f[3] != "01" {
            continue;
        }
        let Some((addr, port)) = f[1].split_once(':') else {
            continue;
        };
        if u16::from_str_radix(port, 16) != Ok(22) {
            continue;
        }
        let ip = match addr.len() {
            8 => u32::from_str_radix(addr, 16)
                .ok()
                .map(|v| IpAddr::from(v.to_le_bytes())),
            32 => {
                // Four 32-bit words, each printed in host (little-endian) order.
                let mut b = [0u8; 16];
                let mut ok = true;
                for w in 0..4 {
                    match u32::from_str_radix(&addr[w * 8..w * 8 + 8], 16) {
                        Ok(v) => b[w * 4..w * 4 + 4].copy_from_slice(&v.to_le_bytes()),
                        Err(_) => ok = false,
                    }
                }
                ok.then(|| {
                    let v6 = std::net::Ipv6Addr::from(b);
                    // An IPv4 client on a dual-stack socket: the mapped IPv4 address.
                    v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4)
                })
            }
            _ => None,
        };
        if let Some(ip) = ip {
            if !out.contains(&ip) {
                out.push(ip);
            }
        }
    }
    out
}

/// Why daqtune leaves this port alone, when it is a management port.
pub fn management_port<'m>(mgmt: &'m [(String, String)], name: &str) -> Option<&'m str> {
    mgmt.iter()
        .find(|(n, _)| n == name)
        .map(|(_, why)| why.as_str())
}

/// The sentence a plan note and a verdict say for a management port.
pub fn management_note(name: &str, why: &str) -> String {
    format!("{name} not changed: {why}, and daqtune never changes the port that manages the host")
}
