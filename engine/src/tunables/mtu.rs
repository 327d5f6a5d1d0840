//! `nic.mtu`: the MTU of the data-path interfaces. Plan: the MTU now (SIOCSIFMTU on the live
//! host: this module's setter hook), and the network configuration that keeps it (netplan,
//! NetworkManager keyfiles or systemd-networkd .link files, whichever manages the ports).

use crate::context::nics::{data_interfaces, data_path_nics_or_skip};
use crate::context::Context;
use crate::facts::Facts;
use crate::hostio::journal::{Entry, Journal};
use crate::hostio::setters::{Target, Writer};
use crate::plan::{Action, Change, NoteLevel, Plan, PlanCx, PlanError};
use crate::profile::LoadedProfile;
use crate::tunable::{Artifact, ArtifactError, GenerateCx, Planner, Tunable};
use crate::verdict::{Area, Verdict};
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
        "persist.network",
        "persist.nm_prefix",
    ],
    check: run_mtu,
    planner: Some(Planner {
        order: 6,
        with: &[],
        plan: plan_mtu,
        artifacts: &[
            Artifact {
                kind: "netplan",
                help: "netplan file with the data ports' MTU",
                render: |g| {
                    let names = generate_ports(g);
                    let mtu = g.lp.profile.nic.mtu;
                    let ports: Vec<(&str, u32)> = names.iter().map(|n| (n.as_str(), mtu)).collect();
                    Ok(netplan(&ports, g.profile_ref)?.text)
                },
            },
            Artifact {
                kind: "nm",
                help: "NetworkManager keyfiles for the data ports (MTU; IPv4 as the profile says)",
                render: |g| {
                    let mut s = String::new();
                    for n in generate_ports(g) {
                        let art = nm_keyfile(g.lp, &n, g.lp.profile.nic.mtu, g.profile_ref)?;
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
    for (n, _, _) in &ifaces {
        daqtune_units::validate::interface_name(n)?;
    }
    if cx.opts.runtime {
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
                Target::Live => Action::Mtu {
                    ifname: n.clone(),
                    from: cur,
                    to: want,
                },
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
    if cx.opts.persist {
        let pref = cx.profile_ref();
        match network_style(cx.facts, cx.lp) {
            "netplan" => {
                let ports: Vec<(&str, u32)> =
                    ifaces.iter().map(|(n, _, _)| (n.as_str(), want)).collect();
                let a = netplan(&ports, &pref)?;
                cx.file_change(plan, ID, "netplan", &a.path, a.text, a.mode, false);
            }
            "networkmanager" => {
                let others = nm_profiles(cx.facts);
                for (n, _, _) in &ifaces {
                    let a = nm_keyfile(cx.lp, n, want, &pref)?;
                    // A profile someone else made for this port (the seed's daqiri-tx) is not
                    // ours to rewrite, and a second one would fight it over the port.
                    let theirs: Vec<&NmProfile> = others
                        .iter()
                        .filter(|p| p.interface.as_deref() == Some(n.as_str()) && p.file != a.path)
                        .collect();
                    if let Some(p) = theirs.first() {
                        match p.mtu {
                            Some(m) if m >= want => {}
                            _ => plan.note(
                                ID,
                                NoteLevel::Warn,
                                format!(
                                    "{n} is managed by NetworkManager profile `{}` ({}), which daqtune does not rewrite: run `nmcli connection modify {} ethernet.mtu {want}`",
                                    p.id, p.file, p.id
                                ),
                            ),
                        }
                        continue;
                    }
                    cx.file_change(plan, ID, n, &a.path, a.text, a.mode, false);
                }
            }
            _ => {
                for (n, mac, bdf) in &ifaces {
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
                    let a = link_file(n, &m, want, &pref)?;
                    cx.file_change(plan, ID, n, &a.path, a.text, a.mode, false);
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

/// The netplan file giving `ports` their MTU.
fn netplan(
    ports: &[(&str, u32)],
    profile_ref: &str,
) -> Result<network::Artifact, daqtune_units::InvalidValue> {
    network::netplan(ports, profile_ref)
}

/// daqtune's NetworkManager keyfile for one port.
fn nm_keyfile(
    lp: &LoadedProfile,
    ifname: &str,
    mtu: u32,
    profile_ref: &str,
) -> Result<network::Artifact, daqtune_units::InvalidValue> {
    network::nm_keyfile(&lp.profile.persist.nm_prefix, ifname, mtu, &[], profile_ref)
}

/// The systemd .link file giving one port its MTU.
fn link_file(
    ifname: &str,
    m: &network::LinkMatch,
    mtu: u32,
    profile_ref: &str,
) -> Result<network::Artifact, daqtune_units::InvalidValue> {
    network::networkd_link(ifname, m, mtu, profile_ref)
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

/// A NetworkManager keyfile connection, as far as MTU planning needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NmProfile {
    pub file: String,
    pub id: String,
    pub interface: Option<String>,
    pub mtu: Option<u32>,
}

/// Parse a keyfile's `[connection] id=, interface-name=` and `[ethernet] mtu=`.
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

/// The setter hook of `Action::Mtu` (live hosts; under a root the MTU is an attribute write):
/// journal the MTU, set it with SIOCSIFMTU, read it back.
pub(crate) fn set_mtu(
    j: &mut Journal,
    w: &mut dyn Writer,
    lockdown: Option<&str>,
    ifname: &str,
    to: u32,
) -> Result<String, crate::tunable::SetError> {
    let jerr = crate::tunable::SetError::Journal;
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
