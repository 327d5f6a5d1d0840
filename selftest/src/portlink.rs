//! The link a self-test's port sits on, read from sysfs before the port moves into a private
//! namespace: its speed, its PCIe link, and for the RDMA self-test the network device behind an
//! RDMA device. [`crate::reference`] turns these into the line rate a result is measured against.

use crate::reference::Link;

/// Link speed of `iface` in the host's namespace (sysfs), Mb/s; None for a virtual interface
/// (veth) or a link that is down.
pub fn link_speed_mbps(iface: &str) -> Option<u64> {
    // An interface name never holds '/', so it cannot leave /sys/class/net.
    if iface.is_empty() || iface.len() >= 16 || iface.contains('/') || iface.starts_with('.') {
        return None;
    }
    // A virtual interface (veth, bridge, bond's members aside) has no `device`: what its
    // driver answers (veth: a constant 10000 Mb/s) limits nothing.
    if daqtune_probe::Host::live()
        .read_link(&format!("/sys/class/net/{iface}/device"))
        .is_err()
    {
        return None;
    }
    daqtune_probe::Host::live()
        .read_string(&format!("/sys/class/net/{iface}/speed"))
        .ok()
        .and_then(|t| daqtune_probe::pci::nic::parse_speed(&t))
}

/// What the PCIe link of `iface`'s device carries (`current_link_speed` x
/// `current_link_width`, the link as trained with its upstream port), with the words for it.
pub fn pcie_of(iface: &str) -> Option<(f64, String)> {
    let dev = format!("/sys/class/net/{iface}/device");
    let gts = f64::from(daqtune_probe::pci::parse_link_speed(
        &daqtune_probe::Host::live()
            .read_string(&format!("{dev}/current_link_speed"))
            .ok()?,
    )?);
    let lanes: u32 = daqtune_probe::Host::live()
        .read_string(&format!("{dev}/current_link_width"))
        .ok()?
        .trim()
        .parse()
        .ok()
        .filter(|w| (1..=32).contains(w))?;
    Some((
        crate::reference::pcie_payload_gbps(gts, lanes),
        format!("PCIe x{lanes} at {gts} GT/s"),
    ))
}

/// Link speed of the network device of PCI function `bdf` (a DPDK port), Mb/s.
pub fn pci_link_speed_mbps(bdf: &str) -> Option<(String, u64)> {
    // A PCI address is hex digits, ':' and '.': it cannot leave /sys/bus/pci/devices.
    if bdf.is_empty()
        || bdf.len() > 16
        || !bdf
            .chars()
            .all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.')
    {
        return None;
    }
    // probe's read_dir returns the names sorted: the first network device is stable.
    let names = daqtune_probe::Host::live()
        .read_dir(&format!("/sys/bus/pci/devices/{bdf}/net"))
        .ok()?;
    names
        .into_iter()
        .find_map(|n| link_speed_mbps(&n).map(|s| (n, s)))
}

/// The link of a named sending port (`--tx-if`) at the run's MTU: its sysfs speed and PCIe
/// link, or why it has none.
pub fn port_link(iface: &str, mtu: u32) -> Link {
    match link_speed_mbps(iface) {
        Some(speed) => Link {
            speed_mbps: Some(speed),
            source: format!("sysfs speed of {iface}"),
            mtu: Some(mtu),
            pcie: pcie_of(iface),
        },
        None => Link {
            speed_mbps: None,
            source: format!(
                "{iface} reported no link speed (link down, a virtual interface, or a driver without one)"
            ),
            mtu: Some(mtu),
            pcie: None,
        },
    }
}

/// The link of RDMA device `dev` (`--dev mlx5_0`): the network device of the same PCI function
/// (`/sys/class/infiniband/DEV/device/net/*`) with its speed and MTU. A soft-RoCE device has
/// no PCI function, so no speed: its traffic runs over whatever netdev it was put on.
pub fn rdma_device_link(dev: &str) -> Link {
    // A device name never holds '/', so it cannot leave /sys/class/infiniband.
    if dev.is_empty() || dev.len() > 64 || dev.contains('/') || dev.starts_with('.') {
        return Link::none(&format!("{dev:?} is not an RDMA device name"));
    }
    let dir = format!("/sys/class/infiniband/{dev}/device/net");
    let mut names: Vec<String> = match daqtune_probe::Host::live().read_dir(&dir) {
        Ok(d) => d,
        Err(_) => {
            return Link::none(&format!(
                "{dev} has no PCI network device ({dir} unreadable: soft-RoCE, or a device in another namespace): no link speed"
            ))
        }
    };
    names.sort();
    let Some(netdev) = names.into_iter().next() else {
        return Link::none(&format!("{dev}: its PCI function has no network device"));
    };
    let mtu = daqtune_probe::Host::live()
        .read_string(&format!("/sys/class/net/{netdev}/mtu"))
        .ok()
        .and_then(|t| daqtune_probe::pci::nic::parse_mtu(&t));
    let mut link = port_link(&netdev, mtu.unwrap_or(0));
    link.mtu = mtu;
    link.source = format!("{} (RDMA device {dev})", link.source);
    link
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_leave_sysfs_give_no_link() {
        for bad in ["", "../x", "a/b", ".hidden"] {
            let l = rdma_device_link(bad);
            assert_eq!(l.speed_mbps, None, "{bad}");
        }
        assert!(link_speed_mbps("../../etc").is_none());
    }

    #[test]
    fn a_missing_rdma_device_says_why() {
        let l = rdma_device_link("dqt-no-such-dev0");
        assert_eq!(l.speed_mbps, None);
        assert!(l.source.contains("no PCI network device"), "{}", l.source);
    }
}
