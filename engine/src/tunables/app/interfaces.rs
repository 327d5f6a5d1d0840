//! `app.interfaces`: the configuration's interface addresses on this host.

use super::*;
use daqtune_probe::pci::nic::NicFunction;

pub const INTERFACES: Tunable = Tunable {
    id: "app.interfaces",
    area: Area::Nic,
    title: "The configuration's interface addresses exist on this host",
    aliases: &[],
    doc: include_str!("../../../../docs/checks/app.interfaces.md"),
    needs_root: false,
    profile_keys: &[],
    check: run_interfaces,
    planner: None,
};

// ---------------------------------------------------------------------------------------------
// app.interfaces

fn run_interfaces(ctx: &Context) -> Vec<Verdict> {
    const ID: &str = "app.interfaces";
    let app = match app(ctx, ID) {
        Ok(a) => a,
        Err(v) => return v,
    };
    if app.interfaces.is_empty() {
        return vec![Verdict::skip(
            ID,
            app.file.clone(),
            "the configuration defines no interfaces",
        )];
    }
    let facts = ctx.pci();
    let addrs = ctx.local_addrs();
    let mut out = Vec::new();
    for i in &app.interfaces {
        match i.transport {
            Transport::Raw => out.push(raw_interface(ctx, app, i, facts)),
            Transport::Unknown => out.push(Verdict::skip(
                ID,
                app.subject(i.line, &i.path),
                format!(
                    "`{}`: no tcp://, udp:// or roce:// endpoint tells its transport",
                    i.name
                ),
            )),
            _ => out.extend(socket_interface(app, i, facts.ok(), &addrs)),
        }
    }
    if let Ok(f) = facts {
        out.extend(raw_port_pairs(app, f));
    }
    if let Ok(a) = &addrs {
        out.extend(peer_reachability(ctx, app, a));
    }
    out
}

/// A two-host setup: the configuration names addresses of both hosts (the xhost examples list
/// the client 1.1.1.1 and the server 2.2.2.2 in one file); those that are local say which
/// data port this host uses, the others are the peer. NVIDIA/daqiri 4e4bdb2 (PR #180): *"The
/// /24 assignment alone does not give the kernel a route to the peer. On each host, add a host
/// route and static neighbor for the peer on the cabled port"*, since RDMA-CM resolves the peer
/// through the kernel. One verdict per peer address.
fn peer_reachability(ctx: &Context, app: &AppConfig, addrs: &LocalAddrs) -> Vec<Verdict> {
    use crate::model::appconfig::netaddr::{parse_arp, route_to};
    use std::net::Ipv4Addr;
    const ID: &str = "app.interfaces";
    // (path, line, address, RoCE) of every IPv4 address the configuration names.
    let mut named: Vec<(String, usize, Ipv4Addr, bool)> = Vec::new();
    for i in app
        .interfaces
        .iter()
        .filter(|i| i.transport != Transport::Raw)
    {
        for (path, line, host) in socket_hosts(i) {
            if let Ok(ip) = host.parse::<Ipv4Addr>() {
                named.push((path, line, ip, i.transport == Transport::Roce));
            }
        }
    }
    let roce = app
        .interfaces
        .iter()
        .any(|i| i.transport == Transport::Roce);
    for w in &app.workers {
        for (key, v) in [
            ("client_address", &w.client_address),
            ("server_address", &w.server_address),
        ] {
            if let Some(ip) = v.as_deref().and_then(|h| h.parse::<Ipv4Addr>().ok()) {
                named.push((format!("{}.{key}", w.path), w.line, ip, roce));
            }
        }
    }
    named.retain(|(_, _, ip, _)| !ip.is_unspecified() && !ip.is_loopback());
    let ports: Vec<String> = {
        let mut p: Vec<String> = named
            .iter()
            .filter(|(_, _, ip, _)| addrs.is_local(IpAddr::V4(*ip)))
            .filter_map(|(_, _, ip, _)| addrs.netdev_of(IpAddr::V4(*ip)))
            .collect();
        p.sort();
        p.dedup();
        p
    };
    // Not this host's configuration (no address of it is here), or a single-host one.
    if ports.is_empty() {
        return Vec::new();
    }
    let mut seen: Vec<Ipv4Addr> = Vec::new();
    let arp = ctx.facts().read_string("/proc/net/arp");
    let mut out = Vec::new();
    for (path, line, ip, needs_neigh) in &named {
        if addrs.is_local(IpAddr::V4(*ip)) || seen.contains(ip) {
            continue;
        }
        seen.push(*ip);
        let subject = app.subject(*line, &format!("{path} (peer)"));
        let local = named
            .iter()
            .find(|(_, _, l, _)| addrs.is_local(IpAddr::V4(*l)))
            .map(|(_, _, l, _)| *l);
        let port = ports.join(" or ");
        let src = local.map(|l| format!(" src {l}")).unwrap_or_default();
        let first_port = ports.first().cloned().unwrap_or_default();
        let fix = format!(
            "on this host: sudo ip route replace {ip}/32 dev {first_port}{src}; sudo ip neigh replace {ip} lladdr PEER_MAC dev {first_port} nud permanent (PEER_MAC: cat /sys/class/net/IFACE/address on the peer; NVIDIA/daqiri scripts/setup_spark_xhost_net.sh does both, 4e4bdb2)"
        );
        let route = route_to(&addrs.routes, *ip);
        match route {
            None => {
                out.push(
                    Verdict::fail(
                        ID,
                        subject,
                        format!("the peer {ip} has no route on this host: the kernel cannot reach it over the cabled port {port}, and RDMA-CM resolves the peer through the kernel"),
                    )
                    .expected(format!("a route to {ip} via {port}"))
                    .fix(fix),
                );
                continue;
            }
            Some(r) if !ports.contains(&r.iface) => {
                let via = if r.gateway.is_unspecified() {
                    String::new()
                } else {
                    format!(" through gateway {}", r.gateway)
                };
                let which = if r.mask.is_unspecified() {
                    "the default route"
                } else {
                    "a route"
                };
                out.push(
                    Verdict::fail(
                        ID,
                        subject,
                        format!("the kernel sends traffic for the peer {ip} by {which} via {}{via}, not the cabled data port {port}: a /24 on each host puts the two ends in different subnets, so the peer needs a host route on the cable (NVIDIA/daqiri 4e4bdb2)", r.iface),
                    )
                    .observed(format!("{ip} via {}{via}", r.iface))
                    .expected(format!("{ip} via {port}"))
                    .fix(fix),
                );
                continue;
            }
            Some(_) => {}
        }
        let dev = route.map(|r| r.iface.clone()).unwrap_or_default();
        let v = match &arp {
            Err(e) => Verdict::skip(
                ID,
                subject,
                format!("{ip} is routed via {dev}; its neighbour entry cannot be read: {e}"),
            ),
            Ok(text) => {
                let n = parse_arp(text)
                    .into_iter()
                    .find(|n| n.ip == *ip && n.device == dev && n.complete);
                match n {
                    Some(n) if n.permanent => Verdict::pass(
                        ID,
                        subject,
                        format!("the peer {ip} is routed via {dev} with a static neighbour ({})", n.mac),
                    ),
                    Some(n) => Verdict::pass(
                        ID,
                        subject,
                        format!("the peer {ip} is routed via {dev}, neighbour {} learned (not static: upstream pins it with nud permanent so it survives neighbour timeouts)", n.mac),
                    ),
                    None => {
                        let text = format!("the peer {ip} is routed via {dev} but has no neighbour entry there: NVIDIA/daqiri 4e4bdb2 adds a static one (ip neigh ... nud permanent), without which RDMA-CM cannot resolve the peer across the direct cable");
                        let v = if *needs_neigh {
                            Verdict::fail(ID, subject, text)
                        } else {
                            Verdict::warn(ID, subject, text)
                        };
                        v.expected(format!("a static neighbour for {ip} on {dev}"))
                            .fix(fix)
                    }
                }
            }
        };
        out.push(v);
    }
    out
}

/// The ConnectX function a raw interface's `address` names (PCI address, or netdev/RDMA
/// device for the ibverbs engine).
fn raw_function<'f>(facts: &'f PciFacts, i: &Interface) -> Option<&'f NicFunction> {
    let addr = i.address()?;
    match addr.parse::<PciAddr>() {
        Ok(pa) => facts.nics.iter().find(|n| n.addr == pa),
        Err(_) => nic_by_netdev(facts, addr),
    }
    .filter(|n| n.connectx)
}

/// A raw configuration that sends on one interface and receives on another of this host is a
/// loopback through the NIC: TX and RX must be different physical ports for the frames to cross
/// the cable (NVIDIA/daqiri PR #108). One verdict per (TX, RX) pair of interfaces.
fn raw_port_pairs(app: &AppConfig, facts: &PciFacts) -> Vec<Verdict> {
    use daqtune_probe::pci::ports::{
        port_pair, same_port_message, wire_partner, PortIdentity, PortPair,
    };
    const ID: &str = "app.interfaces";
    if app.loopback_sw {
        return Vec::new();
    }
    let raw: Vec<(&Interface, &NicFunction)> = app
        .interfaces
        .iter()
        .filter(|i| i.transport == Transport::Raw)
        .filter_map(|i| raw_function(facts, i).map(|n| (i, n)))
        .collect();
    let everyone: Vec<PortIdentity> = facts
        .nics
        .iter()
        .filter(|n| n.connectx)
        .map(PortIdentity::of_function)
        .collect();
    let mut out = Vec::new();
    for (ti, tn) in raw
        .iter()
        .filter(|(i, _)| i.queues(Dir::Tx).next().is_some())
    {
        for (ri, rn) in raw
            .iter()
            .filter(|(i, _)| i.queues(Dir::Rx).next().is_some())
        {
            if std::ptr::eq(*ti, *ri) {
                continue;
            }
            let line = ri.address.as_ref().map_or(ri.line, |f| f.line);
            let subject = app.subject(line, &format!("{} -> {}", ti.path, ri.path));
            let (tx, rx) = (PortIdentity::of_function(tn), PortIdentity::of_function(rn));
            out.push(match port_pair(&tx, &rx) {
                PortPair::SamePort { port } => {
                    let partner = wire_partner(&everyone, &tx, &rx);
                    let mut v = Verdict::fail(
                        ID,
                        subject,
                        format!(
                            "`{}` sends and `{}` receives on this host: {}",
                            ti.name,
                            ri.name,
                            same_port_message(&tx, &rx, &port, partner)
                        ),
                    )
                    .observed(format!("{} and {}: port {port}", tn.addr, rn.addr))
                    .expected("TX and RX on different physical ports");
                    if let Some(p) = partner.and_then(|p| p.pci) {
                        v = v.fix(format!(
                            "edit {}:{line}: address: {p} (a two-host setup, where TX leaves through the cable to a peer, pairs ports by its cabling instead)",
                            app.file
                        ));
                    }
                    v
                }
                PortPair::Apart(why) => Verdict::pass(
                    ID,
                    subject,
                    format!("{why}: frames from `{}` to `{}` cross the wire", ti.name, ri.name),
                ),
                PortPair::Unknown(why) => Verdict::skip(
                    ID,
                    subject,
                    format!("cannot tell whether `{}` and `{}` are one physical port: {why}", ti.name, ri.name),
                ),
            });
        }
    }
    out
}

fn raw_interface(
    _ctx: &Context,
    app: &AppConfig,
    i: &Interface,
    facts: Result<&PciFacts, &str>,
) -> Verdict {
    const ID: &str = "app.interfaces";
    let Some(f) = &i.address else {
        if app.loopback_sw {
            return Verdict::na(
                ID,
                app.subject(i.line, &i.path),
                "software loopback (loopback: sw): no NIC is used",
            );
        }
        return Verdict::skip(
            ID,
            app.subject(i.line, &i.path),
            "no address (see app.config)",
        );
    };
    let subject = app.subject(f.line, &f.path);
    let addr = match &f.value {
        Ok(a) => a,
        Err(b) => return bad_field(ID, app, &f.path, f.line, b),
    };
    if app.loopback_sw && addr == "loopback" {
        return Verdict::na(
            ID,
            subject,
            "software loopback (loopback: sw): no NIC is used",
        );
    }
    let facts = match facts {
        Ok(x) => x,
        Err(e) => return Verdict::skip(ID, subject, e.to_string()),
    };
    let connectx: Vec<String> = facts
        .nics
        .iter()
        .filter(|n| n.connectx)
        .map(|n| n.label())
        .collect();
    let here = if connectx.is_empty() {
        "this host has no ConnectX function".to_string()
    } else {
        format!("ConnectX functions here: {}", connectx.join(", "))
    };
    match addr.parse::<PciAddr>() {
        Ok(pa) => {
            if let Some(n) = facts.nics.iter().find(|n| n.addr == pa) {
                if !n.connectx {
                    return Verdict::fail(
                        ID,
                        subject,
                        format!(
                            "{addr} is {} ({:04x}:{:04x}), not a ConnectX: DAQIRI's raw engines drive mlx5 NICs; {here}",
                            n.model, n.vendor, n.device
                        ),
                    );
                }
                let driver = n.driver.as_deref().unwrap_or("no driver");
                if driver != "mlx5_core" {
                    return Verdict::fail(
                        ID,
                        subject,
                        format!(
                            "{} is bound to {driver}: DPDK's mlx5 driver is bifurcated and needs the function on mlx5_core (not vfio-pci)",
                            n.label()
                        ),
                    )
                    .fix(format!(
                        "echo {addr} | sudo tee {}; echo {addr} | sudo tee /sys/bus/pci/drivers/mlx5_core/bind",
                        daqtune_probe::text::shell_quote(&format!("/sys/bus/pci/drivers/{driver}/unbind"))
                    ));
                }
                let vf = if n.is_vf { " (a virtual function)" } else { "" };
                return Verdict::pass(
                    ID,
                    subject,
                    format!("{addr} is {}{vf} on mlx5_core", n.label()),
                )
                .observed(n.label());
            }
            let what = facts
                .tree
                .get(pa)
                .map(|d| format!("{addr} is {} ({}), not a network function", d.display_name(), d.driver.as_deref().unwrap_or("no driver")))
                .unwrap_or_else(|| format!("no PCI function {addr} on this host"));
            Verdict::fail(ID, subject, format!("{what}; {here}"))
                .fix(format!("edit {}:{}: set the address of the ConnectX port to use", app.file, f.line))
        }
        Err(_) => match nic_by_netdev(facts, addr) {
            Some(n) if app.engine == Engine::Dpdk => Verdict::fail(
                ID,
                subject,
                format!(
                    "`{addr}` is {}, but DAQIRI's DPDK engine takes only a PCI address here",
                    n.label()
                ),
            )
            .fix(format!("edit {}:{}: address: {}", app.file, f.line, n.addr)),
            Some(n) => Verdict::pass(ID, subject, format!("`{addr}` is {}", n.label())),
            None => Verdict::fail(
                ID,
                subject,
                format!("`{addr}` is neither a PCI address nor a ConnectX netdev or RDMA device here; {here}"),
            ),
        },
    }
}

fn socket_interface(
    app: &AppConfig,
    i: &Interface,
    facts: Option<&PciFacts>,
    addrs: &Result<&LocalAddrs, &str>,
) -> Vec<Verdict> {
    const ID: &str = "app.interfaces";
    let mut out = Vec::new();
    let bads = [
        i.address
            .as_ref()
            .and_then(|f| f.value.as_ref().err().map(|b| (&f.path, f.line, b))),
        i.local_addr
            .as_ref()
            .and_then(|f| f.value.as_ref().err().map(|b| (&f.path, f.line, b))),
    ];
    for (path, line, b) in bads.into_iter().flatten() {
        out.push(bad_field(ID, app, path, line, b));
    }
    let hosts = socket_hosts(i);
    if hosts.is_empty() && out.is_empty() {
        out.push(Verdict::skip(
            ID,
            app.subject(i.line, &i.path),
            format!("`{}` names no local address", i.name),
        ));
    }
    for (path, line, host) in hosts {
        let subject = app.subject(line, &path);
        let ip = match host.parse::<IpAddr>() {
            Ok(ip) => ip,
            Err(_) => {
                out.push(Verdict::fail(
                    ID,
                    subject,
                    format!("`{host}` is not an IP address: DAQIRI parses IPv4 literals (inet_pton), never names"),
                ));
                continue;
            }
        };
        if ip.is_unspecified() {
            out.push(Verdict::pass(
                ID,
                subject,
                format!("`{host}` binds every local address"),
            ));
            continue;
        }
        let a = match addrs {
            Ok(a) => a,
            Err(e) => {
                out.push(Verdict::skip(ID, subject, e.to_string()));
                continue;
            }
        };
        let v4 = if ip.is_ipv6() {
            " (DAQIRI's socket engines take IPv4 addresses only)"
        } else {
            ""
        };
        if !a.is_local(ip) {
            out.push(
                Verdict::fail(
                    ID,
                    subject,
                    format!(
                        "{host} is not configured on any netdev in this network namespace{v4}: {} cannot bind it",
                        i.name
                    ),
                )
                .fix(format!(
                    "configure {host} on the data-path port (netplan / nmcli / `ip addr add {host}/24 dev IFACE`), or run the application in the namespace that holds it"
                )),
            );
            continue;
        }
        let nd = a.netdev_of(ip);
        let nic = nd
            .as_deref()
            .and_then(|n| facts.and_then(|f| nic_by_netdev(f, n)));
        let on = nd.clone().unwrap_or_else(|| "a local netdev".into());
        let v = if i.transport == Transport::Roce {
            match nic {
                Some(n) if !n.rdma.is_empty() => Verdict::pass(
                    ID,
                    subject,
                    format!(
                        "{host} is on {on}, RDMA device {} ({})",
                        n.rdma_names().join(", "),
                        n.label()
                    ),
                ),
                Some(n) => Verdict::fail(
                    ID,
                    subject,
                    format!("{host} is on {on} ({}), which has no RDMA device: load mlx5_ib (see nic.driver)", n.label()),
                )
                .fix("sudo modprobe mlx5_ib"),
                None => Verdict::fail(
                    ID,
                    subject,
                    format!("{host} is on {on}, which is not a ConnectX port with an RDMA device: RoCE needs one (roce:// endpoints use ibverbs)"),
                ),
            }
        } else if ip.is_ipv6() {
            Verdict::warn(ID, subject, format!("{host} is on {on}{v4}"))
        } else {
            Verdict::pass(
                ID,
                subject,
                format!(
                    "{host} is on {on}{}",
                    nic.map(|n| format!(" ({})", n.label())).unwrap_or_default()
                ),
            )
        };
        out.push(v);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{failures, judge};
    use super::*;

    #[test]
    fn an_address_not_on_this_host_fails() {
        let before = failures(&judge(run_interfaces, &|t| t.to_string()));
        assert!(before.is_empty(), "{before:?}");
        let after = failures(&judge(run_interfaces, &|t| {
            t.replace("1.1.1.1", "198.18.9.9")
        }));
        assert!(after.iter().any(|f| f.contains("198.18.9.9")), "{after:?}");
    }
}
