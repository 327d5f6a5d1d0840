//! `nic.mtu`: the MTU of the data-path interfaces. Plan: the MTU now (SIOCSIFMTU on the live
//! host: this module's setter hook), and the network configuration that keeps it (netplan,
//! NetworkManager keyfiles or systemd-networkd .link files, whichever manages the ports).

use crate::hostio::journal::{Entry, Journal};
use crate::hostio::parts::{Format, NIC_OWNERS};
use crate::hostio::setters::Done;
use crate::hostio::setters::{Target, Writer};
use crate::model::context::nics::{data_interfaces, data_path_nics_or_skip};
use crate::model::context::Context;
use crate::model::facts::Facts;
use crate::model::plan::{
    Action, ActionKind, Change, NoteLevel, Plan, PlanCx, PlanError, SetCx, SetError,
};
use crate::model::profile::LoadedProfile;
use crate::model::tunable::{Artifact, ArtifactError, GenerateCx, Planner, Tunable};
use crate::model::verdict::{Area, Verdict};
use daqtune_units::network;

pub const MTU: Tunable = Tunable {
    id: "nic.mtu",
    area: Area::Nic,
    title: "MTU of the data-path interfaces",
    aliases: &["mtu"],
    doc: include_str!("../../../docs/checks/nic.mtu.md"),
    needs_root: false,
    profile_keys: &[
        "nic.mtu",
        "nic.interfaces",
        "nic.addresses",
        "persist.network",
        "persist.nm_prefix",
    ],
    check: run_mtu,
    planner: Some(Planner {
        order: 6,
        // The port's network file carries the NIC settings too (nic_persist).
        with: &[
            "nic.rings",
            "nic.coalesce",
            "nic.pause",
            "nic.offloads",
            "nic.channels",
        ],
        plan: plan_mtu,
        artifacts: &[
            Artifact {
                kind: "netplan",
                help: "netplan file with the data ports' MTU",
                render: |g| {
                    let names = generate_ports(g);
                    let mtu = g.lp.profile.nic.mtu;
                    let ports: Vec<(&str, u32)> = names.iter().map(|n| (n.as_str(), mtu)).collect();
                    let addrs: Vec<(&str, Vec<&str>)> = names
                        .iter()
                        .filter_map(|n| {
                            g.lp.profile
                                .nic
                                .addresses
                                .get(n)
                                .map(|a| (n.as_str(), a.iter().map(String::as_str).collect()))
                        })
                        .collect();
                    Ok(network::netplan_with_addresses(&ports, &addrs, g.profile_ref)?.text)
                },
            },
            Artifact {
                kind: "nm",
                help: "NetworkManager keyfiles for the data ports (MTU; IPv4 as the profile says)",
                render: |g| {
                    let mut s = String::new();
                    for n in generate_ports(g) {
                        let art =
                            nm_keyfile(g.facts, g.lp, &n, g.lp.profile.nic.mtu, g.profile_ref)?;
                        s.push_str(&format!("# --- {}\n{}", art.path, art.text));
                    }
                    Ok(s)
                },
            },
            Artifact {
                kind: "networkd-link",
                help: "systemd .link files with the data ports' MTU",
                render: |g| {
                    let mut s = String::new();
                    for n in generate_ports(g) {
                        let mac = g
                            .facts
                            .read_attr(&format!("/sys/class/net/{n}/address"))
                            .map_err(|e| ArtifactError::Host(format!("{n}: {e}")))?;
                        let art = link_file(
                            g.facts,
                            g.lp,
                            &n,
                            &network::LinkMatch::Mac(mac),
                            g.lp.profile.nic.mtu,
                            g.profile_ref,
                        )?;
                        s.push_str(&format!("# --- {}\n{}", art.path, art.text));
                    }
                    Ok(s)
                },
            },
        ],
        port_reset: crate::model::tunable::PortReset::Resets,
        owned_files: |_| vec![network::NETPLAN_PATH.to_string()],
    }),
};

fn run_mtu(ctx: &Context) -> Vec<Verdict> {
    const ID: &str = "nic.mtu";
    let nics = match data_path_nics_or_skip(ctx, ID) {
        Ok(n) => n,
        Err(v) => return v,
    };
    let want = ctx.profile.profile.nic.mtu;
    let mgmt = crate::model::context::nics::management_ports(ctx.facts());
    let mut out = Vec::new();
    for n in nics {
        if n.netdevs.is_empty() {
            let why = if n.foreign_netdevs.is_empty() {
                "no network interface visible".to_string()
            } else {
                format!(
                    "{} is in another network namespace",
                    n.foreign_netdevs.join(", ")
                )
            };
            out.push(Verdict::skip(ID, n.label(), why));
            continue;
        }
        for nd in &n.netdevs {
            let subject = format!("{} ({})", n.addr, nd.name);
            match nd.mtu {
                Some(m) if !short(m, want) => out.push(
                    Verdict::pass(ID, subject, format!("MTU {m}")).observed(m).expected(format!(">= {want}")),
                ),
                Some(m) if crate::model::context::nics::management_port(&mgmt, &nd.name).is_some() => {
                    let why = crate::model::context::nics::management_port(&mgmt, &nd.name).unwrap_or_default();
                    out.push(
                        Verdict::skip(ID, subject, format!("MTU {m}, the profile's {want}: {}", crate::model::context::nics::management_note(&nd.name, why)))
                            .observed(m)
                            .expected(format!(">= {want}")),
                    )
                }
                Some(m) => out.push(
                    Verdict::fail(ID, subject, format!("MTU {m} is below the profile's {want}: jumbo frames are dropped or fragmented"))
                        .observed(m)
                        .expected(format!(">= {want}"))
                        .fix(format!(
                            "sudo ip link set dev {} mtu {want}; persistent: sudo daqtune apply --only nic.mtu",
                            daqtune_probe::text::shell_quote(&nd.name)
                        )),
                ),
                None => out.push(Verdict::skip(ID, subject, "mtu unreadable")),
            }
        }
    }
    for (subject, msg) in netplan_overrides(ctx.facts(), ctx.profile) {
        out.push(
            Verdict::warn(ID, subject, msg)
                .expected(format!(">= {want}"))
                .fix(format!("remove `mtu:` from that file's definition of the port, or set it to at least {want} there; then `sudo netplan apply`")),
        );
    }
    out
}

/// How the ports' network configuration is managed.
pub fn network_style(facts: &Facts, lp: &LoadedProfile) -> &'static str {
    match lp.profile.persist.network.as_str() {
        "netplan" => "netplan",
        "networkmanager" => "networkmanager",
        "networkd" => "networkd",
        _ => {
            let netplan = facts
                .read_dir("/etc/netplan")
                .unwrap_or_default()
                .iter()
                .any(|n| n.ends_with(".yaml") && n != "90-daqtune.yaml");
            if netplan {
                "netplan"
            } else if facts.is_dir("/etc/NetworkManager/system-connections")
                || facts.unit_enabled("NetworkManager.service")
            {
                "networkmanager"
            } else {
                "networkd"
            }
        }
    }
}

fn plan_mtu(cx: &PlanCx, plan: &mut Plan) -> Result<(), PlanError> {
    const ID: &str = "nic.mtu";
    let want = cx.lp.profile.nic.mtu;
    let ifaces = match data_interfaces(cx.facts, cx.lp) {
        Ok(i) => i,
        Err(e) => {
            plan.note(ID, NoteLevel::Skip, e);
            return Ok(());
        }
    };
    if ifaces.is_empty() {
        plan.note(ID, NoteLevel::Skip, "no data-path interface (no ConnectX netdev in this namespace, and the profile names none)");
        return Ok(());
    }
    // The management port is never changed, and a port whose name no file or command can
    // carry is left out alone: each says why, and the other ports are planned.
    let mgmt = crate::model::context::nics::management_ports(cx.facts);
    let mut ifaces = ifaces;
    ifaces.retain(|(n, _, _)| {
        if let Some(why) = crate::model::context::nics::management_port(&mgmt, n) {
            plan.note(
                ID,
                NoteLevel::Skip,
                crate::model::context::nics::management_note(n, why),
            );
            return false;
        }
        if let Err(e) = daqtune_units::validate::interface_name(n) {
            plan.note(ID, NoteLevel::Skip, format!("{n:?} left out: {e}"));
            return false;
        }
        true
    });
    // Planned with the nic.* settings for their keys in the port's file; the MTU itself only
    // when it is asked for (`--only nic.rings` leaves the MTU as it is, live and at boot).
    let mtu_asked = cx.opts.wants(ID);
    if cx.opts.runtime && mtu_asked {
        for (n, _, _) in &ifaces {
            let path = format!("/sys/class/net/{n}/mtu");
            // A ConnectX port's MTU is in the PCI facts (what nic.mtu judges); another
            // interface the profile names is read.
            let known = cx.facts.pci().ok().and_then(|f| {
                f.nics
                    .iter()
                    .flat_map(|x| x.netdevs.iter())
                    .find(|d| &d.name == n)
                    .and_then(|d| d.mtu)
            });
            let raw = match known {
                Some(m) => format!("{m}\n"),
                None => match cx.facts.read_string(&path) {
                    Ok(r) => r,
                    Err(_) => {
                        plan.note(ID, NoteLevel::Skip, format!("{n}: not present"));
                        continue;
                    }
                },
            };
            let Ok(cur) = raw.trim().parse::<u32>() else {
                plan.note(
                    ID,
                    NoteLevel::Skip,
                    format!("{n}: MTU `{}` unreadable", raw.trim()),
                );
                continue;
            };
            if !short(cur, want) {
                continue;
            }
            let max = cx
                .facts
                .read_parsed::<u32>(&format!("/sys/class/net/{n}/max_mtu"));
            if max.is_some_and(|m| m < want) {
                plan.note(
                    ID,
                    NoteLevel::Skip,
                    format!("{n}: the device allows at most {} bytes", max.unwrap_or(0)),
                );
                continue;
            }
            let action = match cx.target {
                Target::Live => Action::owned(SetMtu {
                    ifname: n.clone(),
                    from: cur,
                    to: want,
                }),
                Target::Root => Action::Attr {
                    path,
                    from: raw,
                    to: want.to_string(),
                    shared_count: false,
                },
            };
            plan.changes.push(Change {
                check: ID.into(),
                subject: n.clone(),
                action,
                reboot: false,
                note: None,
            });
        }
    }
    for (_, msg) in netplan_overrides(cx.facts, cx.lp) {
        plan.note(ID, NoteLevel::Warn, msg);
    }
    if cx.opts.persist {
        let pref = cx.profile_ref();
        match network_style(cx.facts, cx.lp) {
            // netplan's file carries the MTU alone.
            "netplan" if !mtu_asked => {}
            "netplan" => {
                let ports: Vec<(&str, u32)> =
                    ifaces.iter().map(|(n, _, _)| (n.as_str(), want)).collect();
                // The profile's addresses only: an address the host's own netplan file gives
                // stays there (netplan merges the definitions of one port).
                let addrs: Vec<(&str, Vec<&str>)> = ifaces
                    .iter()
                    .filter_map(|(n, _, _)| {
                        cx.lp
                            .profile
                            .nic
                            .addresses
                            .get(n)
                            .map(|a| (n.as_str(), a.iter().map(String::as_str).collect()))
                    })
                    .collect();
                let a = network::netplan_with_addresses(&ports, &addrs, &pref)?;
                cx.file_change(plan, ID, "netplan", &a.path, a.text, a.mode, false);
            }
            "networkmanager" => {
                let others = nm_profiles(cx.facts);
                for (n, mac, _) in &ifaces {
                    let a = nm_keyfile(cx.facts, cx.lp, n, want, &pref)?;
                    // A profile someone else made for this port (the seed's daqiri-tx), by its
                    // interface name or by its MAC address, is not ours to rewrite, and a
                    // second one would fight it over the port.
                    let theirs: Vec<&NmProfile> = others
                        .iter()
                        .filter(|p| p.file != a.path && p.owns(n, mac.as_deref()))
                        .collect();
                    if let Some(p) = theirs.first() {
                        // What daqtune would have kept in its own keyfile: the MTU where theirs
                        // is lower, and the NIC settings set live (rings, coalescing, pause,
                        // offloads, queues), which NetworkManager re-applies from its profile.
                        let mut props = Vec::new();
                        if p.mtu.is_none_or(|m| m < want) {
                            props.push(format!("ethernet.mtu {want}"));
                        }
                        let keys = super::nic_persist::persist_keys(cx.facts, cx.lp, n);
                        let ethtool: Vec<String> = keys
                            .nm
                            .iter()
                            .map(|(k, v)| format!("ethtool.{k} {v}"))
                            .collect();
                        props.extend(ethtool.iter().cloned());
                        if props.is_empty() {
                            continue;
                        }
                        let lost = if ethtool.is_empty() {
                            String::new()
                        } else {
                            format!(
                                "; the NIC settings daqtune sets now ({}) are not kept across a reboot there: NetworkManager re-applies its profile's [ethtool] section",
                                keys.nm.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>().join(", ")
                            )
                        };
                        plan.note(
                            ID,
                            NoteLevel::Warn,
                            format!(
                                "{n} is managed by NetworkManager profile `{}` ({}), which daqtune does not rewrite{lost}; to keep them: `nmcli connection modify {} {}`",
                                p.id,
                                p.file,
                                daqtune_probe::text::shell_quote(&p.id),
                                props.join(" ")
                            ),
                        );
                        continue;
                    }
                    let pa = port_addresses(cx.facts, cx.lp, n);
                    if pa.source == AddrSource::Current {
                        for note in pa.notes(n) {
                            plan.note(ID, NoteLevel::Info, note);
                        }
                    }
                    cx.parted_file_change(
                        plan,
                        ID,
                        Format::NmKeyfile,
                        &NIC_OWNERS,
                        n,
                        &a.path,
                        &a.text,
                        a.mode,
                        false,
                    );
                }
            }
            _ => {
                for (n, mac, bdf) in &ifaces {
                    if cx
                        .lp
                        .profile
                        .nic
                        .addresses
                        .get(n)
                        .is_some_and(|a| !a.is_empty())
                    {
                        plan.note(
                            ID,
                            NoteLevel::Warn,
                            format!("{n}: the profile's nic.addresses are not written on a systemd-networkd host (a .link file carries no address, and a .network file of daqtune's would replace the one that configures the port); give them in that .network file's [Network] Address="),
                        );
                    }
                    let m = match (
                        mac.as_deref()
                            .and_then(|m| daqtune_units::validate::mac_address(m).ok()),
                        bdf,
                    ) {
                        (Some(m), _) => network::LinkMatch::Mac(m),
                        (None, Some(b)) => network::LinkMatch::PciPath(b.parse()?),
                        (None, None) => {
                            plan.note(ID, NoteLevel::Skip, format!("{n}: neither a MAC address nor a PCI path to match in a .link file"));
                            continue;
                        }
                    };
                    let a = link_file(cx.facts, cx.lp, n, &m, want, &pref)?;
                    cx.parted_file_change(
                        plan,
                        ID,
                        Format::NetworkdLink,
                        &NIC_OWNERS,
                        n,
                        &a.path,
                        &a.text,
                        a.mode,
                        false,
                    );
                }
            }
        }
    }
    Ok(())
}

/// The one judgement, which the check turns into a failure and the plan into an MTU change:
/// a port's MTU is below the profile's (a larger one carries the profile's frames too).
fn short(mtu: u32, want: u32) -> bool {
    mtu < want
}

/// The IPv4 configuration a port's network file gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortAddrs {
    /// Written as static addresses.
    pub addrs: Vec<String>,
    pub source: AddrSource,
    /// The port's current addresses that DHCP leased (netlink: a finite valid lifetime, no
    /// IFA_F_PERMANENT): never written as static; the file keeps DHCP (`ipv4.method=auto`).
    pub leased: Vec<String>,
    /// Why the current addresses' lifetimes could not be read (a host root, no netlink):
    /// they are then all written as static, and the plan says so.
    pub lifetimes_unknown: Option<String>,
}

impl PortAddrs {
    /// Whether the file keeps the port on DHCP.
    pub fn dhcp(&self) -> bool {
        !self.leased.is_empty()
    }

    /// What the plan says about a port whose current addresses the file keeps.
    pub fn notes(&self, n: &str) -> Vec<String> {
        let mut v = Vec::new();
        if !self.addrs.is_empty() {
            let how = match &self.lifetimes_unknown {
                Some(why) => format!(
                    "ipv4.method=manual; whether DHCP gave it cannot be told ({why}), so a leased address becomes static"
                ),
                None => "ipv4.method=manual: a static address (netlink: permanent)".to_string(),
            };
            v.push(format!(
                "{n}: daqtune's keyfile keeps its current address {} ({how}); name the port in the profile's nic.addresses to choose",
                self.addrs.join(", ")
            ));
        }
        if !self.leased.is_empty() {
            v.push(format!(
                "{n}: {} is leased by DHCP (netlink: a finite valid lifetime, not permanent): daqtune's keyfile keeps DHCP (ipv4.method=auto) and does not write the leased address as static; name the port in the profile's nic.addresses for a static one",
                self.leased.join(", ")
            ));
        }
        v
    }
}

/// The IPv4 addresses a port's network file gives it: the profile's `nic.addresses` for the
/// port, else the addresses the port has now (a keyfile that owns the port must not take a
/// working address away: `ipv4.method=disabled` would), a DHCP lease among them kept as DHCP
/// rather than pinned (netlink's lifetimes tell it), else none.
pub fn port_addresses(facts: &Facts, lp: &LoadedProfile, ifname: &str) -> PortAddrs {
    if let Some(a) = lp
        .profile
        .nic
        .addresses
        .get(ifname)
        .filter(|a| !a.is_empty())
    {
        return PortAddrs {
            addrs: a.clone(),
            source: AddrSource::Profile,
            leased: Vec::new(),
            lifetimes_unknown: None,
        };
    }
    let now = facts
        .local_addrs()
        .map(|l| l.v4_cidrs_on(ifname))
        .unwrap_or_default();
    let source = if now.is_empty() {
        AddrSource::None
    } else {
        AddrSource::Current
    };
    match facts.addr_lifetimes() {
        Ok(all) => {
            let (leased, addrs) = split_leases(now, ifname, all);
            PortAddrs {
                addrs,
                source,
                leased,
                lifetimes_unknown: None,
            }
        }
        Err(why) => PortAddrs {
            addrs: now,
            source,
            leased: Vec::new(),
            lifetimes_unknown: Some(why.to_string()),
        },
    }
}

/// `(leased, static)` of a port's current addresses (`a.b.c.d/len`) by what netlink says of
/// each; one netlink does not list (it went between the two reads) counts as static, as before.
pub fn split_leases(
    now: Vec<String>,
    ifname: &str,
    all: &[daqtune_probe::net::addr::AddrInfo],
) -> (Vec<String>, Vec<String>) {
    // By address alone: fib_trie's prefix comes from the covering route, netlink's from the
    // address itself, and the two can differ without the address being another one.
    now.into_iter().partition(|cidr| {
        let ip = cidr.split('/').next().unwrap_or(cidr);
        all.iter()
            .any(|a| a.ifname() == ifname && a.address.to_string() == ip && a.leased())
    })
}

/// Where [`port_addresses`] took a port's addresses from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddrSource {
    Profile,
    Current,
    None,
}

/// daqtune's NetworkManager keyfile for one port, with its IPv4 addresses
/// ([`port_addresses`]) and the `[ethtool]` keys of the NIC settings the profile wants
/// (nic.rings, ...: `nic_ethtool::persist_keys`).
fn nm_keyfile(
    facts: &Facts,
    lp: &LoadedProfile,
    ifname: &str,
    mtu: u32,
    profile_ref: &str,
) -> Result<network::Artifact, daqtune_units::InvalidValue> {
    let pa = port_addresses(facts, lp, ifname);
    let addrs: Vec<&str> = pa.addrs.iter().map(String::as_str).collect();
    let mut a = network::nm_keyfile_ipv4(
        &lp.profile.persist.nm_prefix,
        ifname,
        mtu,
        &addrs,
        pa.dhcp(),
        profile_ref,
    )?;
    let keys = super::nic_persist::persist_keys(facts, lp, ifname);
    a.text.push_str(&super::nic_persist::nm_section(&keys));
    Ok(a)
}

/// The systemd .link file giving one port its MTU, and the `[Link]` keys of the NIC settings
/// the profile wants (only the first matching .link file applies, so they share it).
fn link_file(
    facts: &Facts,
    lp: &LoadedProfile,
    ifname: &str,
    m: &network::LinkMatch,
    mtu: u32,
    profile_ref: &str,
) -> Result<network::Artifact, daqtune_units::InvalidValue> {
    let mut a = network::networkd_link(ifname, m, mtu, profile_ref)?;
    let keys = super::nic_persist::persist_keys(facts, lp, ifname);
    a.text.push_str(&super::nic_persist::link_lines(&keys));
    Ok(a)
}

/// The ports `generate` writes network files for: `--interface`, else the data-path
/// interfaces the plan configures (a host whose PCI facts cannot be read: the profile's).
fn generate_ports(g: &GenerateCx) -> Vec<String> {
    if !g.interfaces.is_empty() {
        return g.interfaces.to_vec();
    }
    match data_interfaces(g.facts, g.lp) {
        Ok(ports) => ports.into_iter().map(|(n, _, _)| n).collect(),
        Err(_) => g.lp.profile.nic.interfaces.clone(),
    }
}

/// netplan's directories, lowest priority first: a file shadows one of the same name in an
/// earlier directory, and the files left are merged in name order (the last `mtu:` wins).
const NETPLAN_DIRS: [&str; 3] = ["/lib/netplan", "/etc/netplan", "/run/netplan"];

/// The `network.ethernets.<id>.mtu` settings of one netplan file, in the file's order.
pub fn parse_netplan_mtus(text: &str) -> Result<Vec<(String, u64)>, String> {
    let doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(text).map_err(|e| e.to_string())?;
    let Some(eths) = doc
        .get("network")
        .and_then(|n| n.get("ethernets"))
        .and_then(|e| e.as_mapping())
    else {
        return Ok(Vec::new());
    };
    // netplan reads `mtu` as a scalar (strtoul): `mtu: "1500"` quoted is the same MTU.
    let mtu = |v: &serde_yaml_ng::Value| {
        v.as_u64()
            .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
    };
    Ok(eths
        .iter()
        .filter_map(|(id, def)| Some((id.as_str()?.to_string(), mtu(def.get("mtu")?)?)))
        .collect())
}

/// Where a netplan file of someone else's sets a data port's MTU after daqtune's drop-in, to
/// less than the profile's: at boot netplan renders that value. (subject, sentence) each; a
/// file netplan would read but this cannot parse is named too (its precedence is unknown).
pub fn netplan_overrides(facts: &Facts, lp: &LoadedProfile) -> Vec<(String, String)> {
    if network_style(facts, lp) != "netplan" {
        return Vec::new();
    }
    let want = u64::from(lp.profile.nic.mtu);
    let Ok(ifaces) = data_interfaces(facts, lp) else {
        return Vec::new();
    };
    let mut files = std::collections::BTreeMap::new();
    for d in NETPLAN_DIRS {
        for n in facts.read_dir(d).unwrap_or_default().iter() {
            if n.ends_with(".yaml") {
                files.insert(n.clone(), format!("{d}/{n}"));
            }
        }
    }
    let mut last: std::collections::BTreeMap<String, (String, u64)> = Default::default();
    let mut out = Vec::new();
    for path in files.values() {
        let parsed = facts
            .read_string(path)
            .map_err(|e| e.to_string())
            .and_then(|t| parse_netplan_mtus(&t));
        match parsed {
            Ok(mtus) => {
                for (id, m) in mtus {
                    last.insert(id, (path.clone(), m));
                }
            }
            Err(e) => out.push((
                "netplan".to_string(),
                format!("{path}: unreadable as netplan YAML ({e}): which MTU netplan renders is unknown"),
            )),
        }
    }
    for (n, _, _) in &ifaces {
        match last.get(n) {
            Some((path, m)) if path != network::NETPLAN_PATH && *m < want => out.push((
                format!("{n} at boot"),
                format!(
                    "{path} sets the MTU of {n} to {m} after daqtune's {} (netplan merges its files in name order and the last setting wins): at boot {n} gets MTU {m}, below {want}",
                    network::NETPLAN_PATH
                ),
            )),
            _ => {}
        }
    }
    out
}

/// A NetworkManager keyfile connection, as far as MTU planning needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NmProfile {
    pub file: String,
    pub id: String,
    pub interface: Option<String>,
    /// `[ethernet] mac-address=`: a profile may bind its port by MAC instead of by name.
    pub mac: Option<String>,
    pub mtu: Option<u32>,
}

impl NmProfile {
    /// Whether NetworkManager would activate this profile on the port `name` with MAC `mac`:
    /// its `interface-name` is the port's, or it names none and its `mac-address` is the
    /// port's (NetworkManager compares MACs whatever their case or separators).
    pub fn owns(&self, name: &str, mac: Option<&str>) -> bool {
        let norm = |m: &str| -> String {
            m.chars()
                .filter(char::is_ascii_hexdigit)
                .map(|c| c.to_ascii_lowercase())
                .collect()
        };
        match (&self.interface, &self.mac, mac) {
            (Some(i), _, _) => i == name,
            (None, Some(theirs), Some(ours)) => {
                let t = norm(theirs);
                t.len() == 12 && t == norm(ours)
            }
            _ => false,
        }
    }
}

/// Parse a keyfile's `[connection] id=, interface-name=` and `[ethernet] mtu=, mac-address=`.
pub fn parse_nm_keyfile(file: &str, text: &str) -> NmProfile {
    let mut section = String::new();
    let mut p = NmProfile {
        file: file.into(),
        id: file
            .rsplit('/')
            .next()
            .unwrap_or(file)
            .trim_end_matches(".nmconnection")
            .into(),
        interface: None,
        mac: None,
        mtu: None,
    };
    for line in text.lines() {
        let l = line.trim();
        if l.starts_with('#') || l.is_empty() {
            continue;
        }
        if let Some(sec) = l.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
            section = sec.trim().to_string();
            continue;
        }
        let Some((k, v)) = l.split_once('=') else {
            continue;
        };
        match (section.as_str(), k.trim()) {
            ("connection", "id") => p.id = v.trim().to_string(),
            ("connection", "interface-name") => p.interface = Some(v.trim().to_string()),
            ("ethernet", "mtu") | ("802-3-ethernet", "mtu") => p.mtu = v.trim().parse().ok(),
            ("ethernet", "mac-address") | ("802-3-ethernet", "mac-address") => {
                p.mac = Some(v.trim().trim_end_matches(';').to_string())
            }
            _ => {}
        }
    }
    p
}

fn nm_profiles(facts: &Facts) -> Vec<NmProfile> {
    let dir = "/etc/NetworkManager/system-connections";
    facts
        .read_dir(dir)
        .unwrap_or_default()
        .iter()
        .filter(|n| n.ends_with(".nmconnection"))
        .filter_map(|n| {
            let f = format!("{dir}/{n}");
            facts.read_string(&f).ok().map(|t| parse_nm_keyfile(&f, &t))
        })
        .collect()
}

/// An MTU set with SIOCSIFMTU (live hosts; under a root the MTU is an `Attr` on `mtu`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetMtu {
    pub ifname: String,
    pub from: u32,
    pub to: u32,
}

impl ActionKind for SetMtu {
    fn execute(&self, cx: SetCx<'_>) -> Result<Done, SetError> {
        set_mtu(cx.journal, cx.writer, cx.lockdown, &self.ifname, self.to).map(Done::from)
    }
    fn plan_json(&self) -> serde_json::Value {
        serde_json::json!({
            "kind": "mtu", "interface": self.ifname, "from": self.from, "to": self.to,
        })
    }
    fn describe(&self) -> String {
        format!(
            "MTU of {}: {} -> {} (SIOCSIFMTU)",
            self.ifname, self.from, self.to
        )
    }
    fn port(&self) -> Option<&str> {
        Some(&self.ifname)
    }
}

/// The setter hook of [`SetMtu`] (live hosts; under a root the MTU is an attribute write):
/// journal the MTU, set it with SIOCSIFMTU, read it back.
pub(crate) fn set_mtu(
    j: &mut Journal,
    w: &mut dyn Writer,
    lockdown: Option<&str>,
    ifname: &str,
    to: u32,
) -> Result<String, crate::model::tunable::SetError> {
    let jerr = crate::model::tunable::SetError::Journal;
    let original = w.mtu(ifname).map_err(|e| format!("{ifname}: {e}"))?;
    let idx = j
        .record(
            w,
            Entry::Mtu {
                ifname: ifname.to_string(),
                original,
                new: to,
            },
        )
        .map_err(jerr)?;
    w.set_mtu(ifname, to).map_err(|e| {
        crate::hostio::setters::explain_write_error(&e, &format!("MTU of {ifname}"), lockdown)
    })?;
    j.mark_done(w, idx).map_err(jerr)?;
    let back = w
        .mtu(ifname)
        .map_err(|e| format!("{ifname}: read back: {e}"))?;
    if back != to {
        return Err(format!("{ifname}: set MTU {to}, reads back {back}").into());
    }
    Ok(format!("MTU of {ifname} = {to}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 45 item 6: a DHCP lease (QEMU's user network leases 10.0.2.15 for a day;
    /// NetworkManager installs it with that valid lifetime and without IFA_F_PERMANENT,
    /// include/uapi/linux/if_addr.h) is never written as static; a permanent address is.
    #[test]
    fn a_leased_address_keeps_dhcp_and_a_static_one_is_kept_as_static() {
        use daqtune_probe::net::addr::AddrInfo;
        let a = |ip: [u8; 4], label: &str, permanent: bool, valid: Option<u32>| AddrInfo {
            ifindex: 2,
            label: label.into(),
            address: ip.into(),
            prefix_len: 24,
            permanent,
            valid_lft: valid,
        };
        let all = [
            a([10, 0, 2, 15], "ens1", false, Some(86_400)),
            a([192, 0, 2, 20], "ens1", true, None),
            // The same address on another port says nothing about this one.
            a([198, 18, 0, 1], "ens2", false, Some(600)),
        ];
        let now = vec![
            "10.0.2.15/24".to_string(),
            "192.0.2.20/24".to_string(),
            "198.18.0.1/24".to_string(),
        ];
        let (leased, fixed) = split_leases(now, "ens1", &all);
        assert_eq!(leased, ["10.0.2.15/24"]);
        assert_eq!(fixed, ["192.0.2.20/24", "198.18.0.1/24"]);
        let pa = PortAddrs {
            addrs: vec!["192.0.2.20/24".into()],
            source: AddrSource::Current,
            leased,
            lifetimes_unknown: None,
        };
        assert!(pa.dhcp());
        let notes = pa.notes("ens1").join("\n");
        assert!(
            notes.contains("ens1: 10.0.2.15/24 is leased by DHCP")
                && notes.contains("ipv4.method=auto"),
            "{notes}"
        );
        assert!(
            notes.contains(
                "keeps its current address 192.0.2.20/24 (ipv4.method=manual: a static address"
            ),
            "{notes}"
        );
        // Where the lifetimes cannot be read, the plan says a lease would become static.
        let unknown = PortAddrs {
            addrs: vec!["10.0.2.15/24".into()],
            source: AddrSource::Current,
            leased: Vec::new(),
            lifetimes_unknown: Some("a host root".into()),
        };
        assert!(!unknown.dhcp());
        assert!(unknown.notes("ens1")[0]
            .contains("cannot be told (a host root), so a leased address becomes static"));
    }

    #[test]
    fn netplan_mtus_parse() {
        let t = "network:\n  version: 2\n  ethernets:\n    ens1:\n      mtu: 1500\n    ens2:\n      dhcp4: true\n";
        assert_eq!(parse_netplan_mtus(t), Ok(vec![("ens1".to_string(), 1500)]));
        assert_eq!(parse_netplan_mtus("network:\n  version: 2\n"), Ok(vec![]));
        assert!(parse_netplan_mtus("network: [\n").is_err());
        // daqtune's own drop-in reads back as what it says.
        let a = network::netplan(&[("ens1", 9000)], "p").unwrap();
        assert_eq!(
            parse_netplan_mtus(&a.text),
            Ok(vec![("ens1".to_string(), 9000)])
        );
    }

    #[test]
    fn a_later_netplan_file_is_named() {
        let d = tempfile::tempdir().expect("tmp");
        let r = d.path();
        let w = |f: &str, t: &str| {
            let p = r.join(f);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::write(p, t).expect("write");
        };
        std::fs::create_dir_all(r.join("sys/bus/pci/devices")).expect("mkdir");
        w("sys/class/net/ens1/address", "52:54:00:da:00:01\n");
        w(
            "etc/netplan/50-data.yaml",
            "network:\n  version: 2\n  ethernets:\n    ens1:\n      mtu: 1500\n",
        );
        let a = network::netplan(&[("ens1", 9000)], "p").expect("artifact");
        w("etc/netplan/90-daqtune.yaml", &a.text);
        let lp = crate::model::profile::load_source(
            "t.yaml",
            "name: t\nextends: generic-dgpu\nnic:\n  mtu: 9000\n  interfaces: [ens1]\n",
        )
        .expect("profile");
        let host = daqtune_probe::Host::at(r).expect("host");
        // daqtune's drop-in is later than the user's 50-: nothing to say.
        assert_eq!(netplan_overrides(&Facts::new(&host), &lp), vec![]);
        // A later file setting less wins at boot, and is named.
        w(
            "etc/netplan/99-user.yaml",
            "network:\n  version: 2\n  ethernets:\n    ens1:\n      mtu: 1500\n",
        );
        let o = netplan_overrides(&Facts::new(&host), &lp);
        assert_eq!(o.len(), 1, "{o:?}");
        assert_eq!(o[0].0, "ens1 at boot");
        assert!(o[0].1.starts_with("/etc/netplan/99-user.yaml sets the MTU of ens1 to 1500 after daqtune's /etc/netplan/90-daqtune.yaml"), "{}", o[0].1);
        // /run/netplan shadows /etc/netplan's file of the same name.
        w(
            "run/netplan/99-user.yaml",
            "network:\n  version: 2\n  ethernets:\n    ens1:\n      mtu: 9000\n",
        );
        assert_eq!(netplan_overrides(&Facts::new(&host), &lp), vec![]);
        // A file netplan reads but this cannot parse is named, not passed over.
        w("etc/netplan/95-bad.yaml", "network: [\n");
        let o = netplan_overrides(&Facts::new(&host), &lp);
        assert!(
            o.len() == 1 && o[0].1.starts_with("/etc/netplan/95-bad.yaml: unreadable"),
            "{o:?}"
        );
    }

    #[test]
    fn nm_keyfiles_parse() {
        let p = parse_nm_keyfile(
            "/etc/NetworkManager/system-connections/x.nmconnection",
            "[connection]\nid=daqiri-tx\ntype=ethernet\ninterface-name=enp1s0f0np0\n\n[ethernet]\nmtu=9000\n",
        );
        assert_eq!(
            (p.id.as_str(), p.interface.as_deref(), p.mtu),
            ("daqiri-tx", Some("enp1s0f0np0"), Some(9000))
        );
        let q = parse_nm_keyfile("/x/y.nmconnection", "garbage\n[ethernet]\nmtu=(null)\n");
        assert_eq!((q.id.as_str(), q.interface, q.mtu), ("y", None, None));
    }
}
