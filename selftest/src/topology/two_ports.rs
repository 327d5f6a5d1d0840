//! Two ports cabled back to back, moved into private namespaces for the run: the checks that
//! refuse a port whose move would cut the host off, and the records that put it back.

use super::*;

impl Topology {
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
    pub(super) fn prepare_ports(
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
        // Before anything moves: sysfs of this namespace still shows both ports.
        check_port_pair(&daqtune_probe::Host::live(), tx_if, rx_if)?;
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

    /// Moves both (recorded) ports into the namespaces and addresses them.
    pub(super) fn place_ports(
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
        let mut nl_tx = crate::netlink::open_in(txn)?;
        let mut nl_rx = crate::netlink::open_in(rxn)?;
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
}

pub(super) fn is_v6_link_local(ip: &IpAddr) -> bool {
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

pub(super) fn record_port(link: &Link, addrs: &[Addr], routes: &[Route], ns: &str) -> PortRecord {
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
            counters: Vec::new(),
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
}

/// Refuses a TX and an RX netdev that are two PCI functions of one physical port (DGX Spark's
/// socket-direct CX-7: `enp1s0f0np0` and `enP2p1s0f0np0` are both p0): the frames loop inside
/// the NIC and the run would report an on-chip rate as the wire's (NVIDIA/daqiri PR #108). The
/// error names the function that crosses the cable instead. Ports whose driver names no
/// physical port (veth, most non-ConnectX NICs) are not judged.
pub fn check_port_pair(host: &daqtune_probe::Host, tx_if: &str, rx_if: &str) -> Result<()> {
    use daqtune_probe::pci::ports::{
        port_pair, same_port_message, wire_partner, PortIdentity, PortPair,
    };
    let (tx, rx) = (
        PortIdentity::read(host, tx_if),
        PortIdentity::read(host, rx_if),
    );
    if let PortPair::SamePort { port } = port_pair(&tx, &rx) {
        let all = PortIdentity::all(host);
        let partner = wire_partner(&all, &tx, &rx);
        let mut why = format!(
            "--tx-if {tx_if} and --rx-if {rx_if}: {}",
            same_port_message(&tx, &rx, &port, partner)
        );
        if let Some(p) = partner {
            why.push_str(&format!(" (--rx-if {})", p.name));
        }
        return Err(Error::Refused(why));
    }
    Ok(())
}

#[cfg(test)]
mod port_pair_tests {
    use super::check_port_pair;
    use daqtune_probe::Host;
    use std::path::Path;

    fn spark() -> Host {
        Host::at(Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/spark"))
            .expect("spark root")
    }

    #[test]
    fn two_views_of_p0_are_refused_with_the_port_that_crosses_the_wire() {
        // The seed's Spark pair (before NVIDIA/daqiri PR #108): both are p0.
        let e = check_port_pair(&spark(), "enp1s0f0np0", "enP2p1s0f0np0")
            .expect_err("same physical port");
        let m = e.to_string();
        assert!(m.contains("same physical port p0"), "{m}");
        assert!(m.contains("PR #108"), "{m}");
        assert!(m.contains("(--rx-if enP2p1s0f1np1)"), "{m}");
    }

    #[test]
    fn the_corrected_pair_and_unknown_ports_pass() {
        let h = spark();
        check_port_pair(&h, "enp1s0f0np0", "enP2p1s0f1np1").expect("p0 -> p1");
        check_port_pair(&h, "enp1s0f0np0", "enp1s0f1np1").expect("p0 -> p1, one domain");
        // The onboard Realtek names no physical port: nothing to judge.
        check_port_pair(&h, "enP7s7", "enp1s0f0np0").expect("unknown");
    }
}
