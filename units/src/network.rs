//! Persistent MTU through whatever manages the port (seed 000 Step 9; the Spark tab pins the
//! MTU in NetworkManager profiles). Which one applies is the planner's decision:
//!
//! - netplan: a drop-in sorted late in /etc/netplan; netplan merges definitions with the same
//!   ID, so `mtu:` is added to the port's existing definition, and it wins over a later
//!   hand-written `.network` (netplan generates into /run, which systemd-networkd reads first).
//! - NetworkManager: a keyfile connection profile (`daqiri-<if>` on Spark, the seed's
//!   `daqiri-tx` / `daqiri-rx` style).
//! - otherwise a systemd-networkd `.link` file with `MTUBytes=`, applied by udev when the link
//!   appears whether or not networkd runs.
//!
//! netplan and NetworkManager keyfiles must be mode 0600 (both refuse or warn otherwise):
//! [`Artifact::mode`] says so to the writer.

use crate::validate::{self, InvalidValue};

/// One network artifact: where it goes, what it holds, and its file mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    pub path: String,
    pub text: String,
    pub mode: u32,
}

pub const NETPLAN_PATH: &str = "/etc/netplan/90-daqtune.yaml";

/// The netplan drop-in for `ports` (interface, MTU).
pub fn netplan(ports: &[(&str, u32)], profile: &str) -> Result<Artifact, InvalidValue> {
    netplan_with_addresses(ports, &[], profile)
}

/// The netplan drop-in for `ports` (interface, MTU), with static IPv4 `addresses` (interface,
/// CIDRs) for the ports that have them. netplan appends a later file's `addresses:` to the
/// port's existing ones, so an address the host's own file gives stays.
pub fn netplan_with_addresses(
    ports: &[(&str, u32)],
    addresses: &[(&str, Vec<&str>)],
    profile: &str,
) -> Result<Artifact, InvalidValue> {
    let profile = validate::profile_ref(profile)?;
    let mut s = format!(
        "# {} (profile {profile}); `daqtune revert` removes it.\n# Merged by netplan with the ports' existing definitions (same IDs).\nnetwork:\n  version: 2\n  ethernets:\n",
        crate::OWNER_MARK
    );
    let mut sorted: Vec<(&str, u32)> = ports.to_vec();
    sorted.sort();
    sorted.dedup();
    for (ifname, mtu) in sorted {
        s.push_str(&format!(
            "    {}:\n      mtu: {}\n",
            validate::interface_name(ifname)?,
            mtu_value(mtu)?
        ));
        let mine: Vec<&str> = addresses
            .iter()
            .filter(|(n, _)| *n == ifname)
            .flat_map(|(_, a)| a.iter().copied())
            .collect();
        if !mine.is_empty() {
            s.push_str("      addresses:\n");
            for a in mine {
                s.push_str(&format!("        - \"{}\"\n", ipv4_cidr(a)?));
            }
        }
    }
    Ok(Artifact {
        path: NETPLAN_PATH.into(),
        text: s,
        mode: 0o600,
    })
}

fn mtu_value(mtu: u32) -> Result<u32, InvalidValue> {
    if (68..=65535).contains(&mtu) {
        Ok(mtu)
    } else {
        Err(InvalidValue::new(
            "MTU",
            &mtu.to_string(),
            "expected 68..65535",
        ))
    }
}

/// A NetworkManager keyfile for one port. `addresses` (CIDR) pin IPv4 like the seed's
/// profiles (`ipv4.method manual`); without them IPv4 and IPv6 are off, which suits DPDK and
/// RDMA ports that carry no IP traffic. The caller passes the port's current addresses when
/// the profile names none, so a keyfile never takes a working address away.
pub fn nm_keyfile(
    prefix: &str,
    ifname: &str,
    mtu: u32,
    addresses: &[&str],
    profile: &str,
) -> Result<Artifact, InvalidValue> {
    nm_keyfile_ipv4(prefix, ifname, mtu, addresses, false, profile)
}

/// [`nm_keyfile`] for a port whose address DHCP leases (`dhcp`): `ipv4.method=auto`, so the
/// port keeps asking for its lease, with `addresses` as static addresses beside it
/// (NetworkManager adds `ipv4.addresses` to the ones DHCP gives, nm-settings(5)).
pub fn nm_keyfile_ipv4(
    prefix: &str,
    ifname: &str,
    mtu: u32,
    addresses: &[&str],
    dhcp: bool,
    profile: &str,
) -> Result<Artifact, InvalidValue> {
    let ifname = validate::interface_name(ifname)?;
    let profile = validate::profile_ref(profile)?;
    if prefix.is_empty()
        || prefix.len() > 32
        || !prefix
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(InvalidValue::new(
            "connection prefix",
            prefix,
            "letters, digits, `-` and `_`",
        ));
    }
    let id = format!("{prefix}-{ifname}");
    let mut s = format!(
        "# {} (profile {profile}); `daqtune revert` removes it.\n[connection]\nid={id}\ntype=ethernet\ninterface-name={ifname}\nautoconnect=true\n\n[ethernet]\nmtu={}\n\n",
        crate::OWNER_MARK,
        mtu_value(mtu)?,
    );
    if addresses.is_empty() && !dhcp {
        s.push_str("[ipv4]\nmethod=disabled\n\n[ipv6]\nmethod=ignore\n");
    } else {
        s.push_str(if dhcp {
            "[ipv4]\nmethod=auto\n"
        } else {
            "[ipv4]\nmethod=manual\n"
        });
        for (i, a) in addresses.iter().enumerate() {
            s.push_str(&format!("address{}={}\n", i + 1, ipv4_cidr(a)?));
        }
        s.push_str("\n[ipv6]\nmethod=ignore\n");
    }
    Ok(Artifact {
        path: format!("/etc/NetworkManager/system-connections/{id}.nmconnection"),
        text: s,
        mode: 0o600,
    })
}

/// An IPv4 address with its prefix length, `a.b.c.d/len` with len 1..32: the only form that
/// reaches a network file (netplan and NetworkManager read the same text).
pub fn ipv4_cidr(a: &str) -> Result<&str, InvalidValue> {
    let bad = || InvalidValue::new("IPv4 address", a, "expected a.b.c.d/len, len 1..32");
    let (ip, len) = a.split_once('/').ok_or_else(bad)?;
    let ip: std::net::Ipv4Addr = ip.parse().map_err(|_| bad())?;
    // Digits only: `+24` parses as a number too.
    if len.is_empty() || len.len() > 2 || !len.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let l: u8 = len.parse().map_err(|_| bad())?;
    if l == 0 || l > 32 || ip.is_unspecified() || ip.is_multicast() || ip.is_broadcast() {
        return Err(bad());
    }
    Ok(a)
}

/// How a `.link` file finds its port. The kernel name (`OriginalName=`) is useless for
/// ports udev renames, so the MAC or the PCI path is used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkMatch {
    Mac(String),
    PciPath(validate::PciAddr),
}

/// A systemd-networkd `.link` file. Only the first matching `.link` file applies, so the
/// naming policies of 99-default.link are repeated here to keep the port's name.
pub fn networkd_link(
    ifname: &str,
    m: &LinkMatch,
    mtu: u32,
    profile: &str,
) -> Result<Artifact, InvalidValue> {
    let ifname = validate::interface_name(ifname)?;
    let profile = validate::profile_ref(profile)?;
    let matcher = match m {
        LinkMatch::Mac(mac) => format!("MACAddress={}", validate::mac_address(mac)?),
        LinkMatch::PciPath(a) => format!("Path=pci-{a}"),
    };
    Ok(Artifact {
        path: format!("/etc/systemd/network/10-daqtune-{ifname}.link"),
        text: format!(
            "# {mark} (profile {profile}); `daqtune revert` removes it.\n# Jumbo frames for {ifname}. The first matching .link file is the only one applied, so the\n# naming policy of 99-default.link is repeated.\n[Match]\n{matcher}\n\n[Link]\nNamePolicy=keep kernel database onboard slot path\nAlternativeNamesPolicy=database onboard slot path\nMACAddressPolicy=persistent\nMTUBytes={mtu}\n",
            mark = crate::OWNER_MARK,
            mtu = mtu_value(mtu)?,
        ),
        mode: 0o644,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_bad_names() {
        assert!(netplan(&[("eth0\n    x", 9000)], "p").is_err());
        assert!(netplan(&[("eth0", 9)], "p").is_err());
        assert!(nm_keyfile("daqiri", "eth0", 9000, &["1.1.1.1/33"], "p").is_err());
        assert!(nm_keyfile("da qiri", "eth0", 9000, &[], "p").is_err());
        assert!(networkd_link("eth0", &LinkMatch::Mac("zz".into()), 9000, "p").is_err());
        let a =
            nm_keyfile("daqiri", "enp1s0f0np0", 9000, &["1.1.1.1/24"], "dgx-spark").expect("nm");
        assert_eq!(
            a.path,
            "/etc/NetworkManager/system-connections/daqiri-enp1s0f0np0.nmconnection"
        );
        assert!(a.text.contains("address1=1.1.1.1/24\n"));
    }

    /// Issue 45 item 6: the seed's static addresses (`nmcli ... ipv4.addresses 1.1.1.1/24
    /// ipv4.method manual ethernet.mtu 9000`) as a keyfile, and in netplan the playbook's form
    /// (`addresses: [192.168.100.10/24]` under the port, NVIDIA/dgx-spark-playbooks
    /// connect-two-sparks).
    #[test]
    fn static_addresses_in_keyfiles_and_netplan() {
        let a =
            nm_keyfile("daqiri", "eth0", 9000, &["1.1.1.1/24", "10.0.0.2/16"], "p").expect("nm");
        assert!(
            a.text
                .contains("[ipv4]\nmethod=manual\naddress1=1.1.1.1/24\naddress2=10.0.0.2/16\n"),
            "{}",
            a.text
        );
        assert!(!a.text.contains("method=disabled"), "{}", a.text);
        // A port whose address is a DHCP lease keeps asking for it (nm-settings(5):
        // ipv4.method auto), with any static address beside it, and never "disabled".
        let d = nm_keyfile_ipv4("daqiri", "eth0", 9000, &[], true, "p").expect("nm");
        assert!(
            d.text
                .contains("[ipv4]\nmethod=auto\n\n[ipv6]\nmethod=ignore\n"),
            "{}",
            d.text
        );
        let d2 =
            nm_keyfile_ipv4("daqiri", "eth0", 9000, &["192.0.2.20/24"], true, "p").expect("nm");
        assert!(
            d2.text
                .contains("[ipv4]\nmethod=auto\naddress1=192.0.2.20/24\n"),
            "{}",
            d2.text
        );
        let n = netplan_with_addresses(
            &[("enp1s0f1np1", 9000), ("enP2p1s0f1np1", 9000)],
            &[("enp1s0f1np1", vec!["192.168.100.10/24"])],
            "dgx-spark",
        )
        .expect("netplan");
        assert!(
            n.text.contains("    enp1s0f1np1:\n      mtu: 9000\n      addresses:\n        - \"192.168.100.10/24\"\n"),
            "{}",
            n.text
        );
        assert!(
            n.text
                .contains("    enP2p1s0f1np1:\n      mtu: 9000\n    enp1s0f1np1:\n"),
            "{}",
            n.text
        );
        // Bounded: only a.b.c.d/len reaches a file.
        for bad in [
            "1.1.1.1",
            "1.1.1.1/0",
            "1.1.1.1/+4",
            "0.0.0.0/8",
            "224.0.0.1/4",
            "1.1.1.1/24\nx",
        ] {
            assert!(ipv4_cidr(bad).is_err(), "{bad}");
            assert!(
                netplan_with_addresses(&[("eth0", 9000)], &[("eth0", vec![bad])], "p").is_err(),
                "{bad}"
            );
        }
    }
}
