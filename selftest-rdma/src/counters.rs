//! Port counters from sysfs: `/sys/class/infiniband/<dev>/ports/<port>/hw_counters/*` (what the
//! provider exposes: rxe has retry and RNR error counts, mlx5 out_of_sequence, ...) and the IB
//! standard `counters/*` where present. Read before and after a run; the report shows deltas.

use daqtune_probe::Host;
use std::collections::BTreeMap;

/// Parses one counter file: a decimal number, whitespace around it allowed.
pub fn parse_counter(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

/// Every readable counter of one port, keyed `hw_counters/<name>` or `counters/<name>`.
/// Unreadable or non-numeric files are left out (some counters need root, some read EINVAL on
/// ports that do not support them).
pub fn read_port_counters(host: &Host, device: &str, port: u8) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for group in ["hw_counters", "counters"] {
        let dir = format!("/sys/class/infiniband/{device}/ports/{port}/{group}");
        let Ok(names) = host.read_dir(&dir) else {
            continue;
        };
        for name in names {
            if let Ok(text) = host.read_string(&format!("{dir}/{name}")) {
                if let Some(v) = parse_counter(&text) {
                    out.insert(format!("{group}/{name}"), v);
                }
            }
        }
    }
    out
}

/// `after - before` for counters present in both, leaving out the ones that did not move.
/// A counter that went backwards (reset, wrapped 32-bit IB counter) is left out rather than
/// reported as a huge number.
pub fn delta(
    before: &BTreeMap<String, u64>,
    after: &BTreeMap<String, u64>,
) -> BTreeMap<String, u64> {
    after
        .iter()
        .filter_map(|(k, a)| {
            let b = before.get(k)?;
            let d = a.checked_sub(*b)?;
            (d > 0).then(|| (k.clone(), d))
        })
        .collect()
}

/// Counters whose increase means the run was not clean (retries, NAKs, drops).
pub fn is_error_counter(name: &str) -> bool {
    let n = name.rsplit('/').next().unwrap_or(name);
    [
        "err",
        "retry",
        "out_of_seq",
        "out_of_sequence",
        "duplicate",
        "discard",
        "rnr",
        "timeout",
        "naks",
        "link_downed",
    ]
    .iter()
    .any(|pat| n.contains(pat))
}

/// The netdev behind an RDMA port (`/sys/class/infiniband/<dev>/ports/<port>/gid_attrs/ndevs/<i>`
/// of its GID entry, else the device's `device/net` or the rxe parent).
pub fn netdev_of_gid(host: &Host, device: &str, port: u8, gid_index: u32) -> Option<String> {
    let p = format!("/sys/class/infiniband/{device}/ports/{port}/gid_attrs/ndevs/{gid_index}");
    host.read_attr(&p)
        .ok()
        .filter(|s| !s.is_empty() && s != "(null)")
}

/// The Ethernet netdev under a RoCE port: interface `ifindex` of the port's GID entry
/// (`ibv_gid_entry.ndev_ifindex`) by its name in this network namespace, else the GID's
/// `gid_attrs/ndevs` file; why not, where there is none (an InfiniBand port has no netdev).
pub fn netdev_of_port(
    host: &Host,
    device: &str,
    port: u8,
    gid_index: u32,
    ifindex: u32,
) -> Result<String, String> {
    if let Ok(index) = i32::try_from(ifindex) {
        if index != 0 {
            let links = daqtune_selftest::netlink::Netlink::open().and_then(|mut nl| nl.links());
            if let Some(l) = links
                .ok()
                .and_then(|v| v.into_iter().find(|l| l.index == index))
            {
                return Ok(l.name);
            }
        }
    }
    netdev_of_gid(host, device, port, gid_index).ok_or_else(|| {
        format!(
            "{device}:{port} GID {gid_index} is bound to no netdev here (an InfiniBand port, or a netdev in another namespace): the RDMA port's own counters are in rdma[].port_counters"
        )
    })
}

/// The counters of the netdev under `device:port` now (its name in `ifname` of the result),
/// or, where there is none, an empty record that says why.
pub fn netdev_sample(
    host: &Host,
    device: &str,
    port: u8,
    gid_index: u32,
    ifindex: u32,
) -> daqtune_probe::net::counters::PortCounters {
    match netdev_of_port(host, device, port, gid_index, ifindex) {
        Ok(name) => daqtune_selftest::topology::port_counters_here(&name),
        Err(why) => daqtune_probe::net::counters::PortCounters {
            ifname: format!("{device}:{port}"),
            counters: Vec::new(),
            unavailable: vec![daqtune_probe::net::counters::Unavailable {
                source: "netdev".into(),
                reason: why,
            }],
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn counter_text() {
        assert_eq!(parse_counter("42\n"), Some(42));
        assert_eq!(parse_counter(" 0 "), Some(0));
        assert_eq!(parse_counter(""), None);
        assert_eq!(parse_counter("(null)"), None);
        assert_eq!(parse_counter("-1"), None);
        assert_eq!(parse_counter("18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_counter("18446744073709551616"), None);
    }

    #[test]
    fn reads_fixture_port_and_computes_deltas() {
        let root = tempfile::tempdir().expect("tempdir");
        let base = root.path().join("sys/class/infiniband/rxe0/ports/1");
        fs::create_dir_all(base.join("hw_counters")).expect("mkdir");
        fs::create_dir_all(base.join("gid_attrs/ndevs")).expect("mkdir");
        fs::write(base.join("hw_counters/sent_pkts"), "100\n").expect("w");
        fs::write(base.join("hw_counters/retry_exceeded_err"), "0\n").expect("w");
        fs::write(base.join("hw_counters/lifespan"), "garbage\n").expect("w");
        fs::write(base.join("gid_attrs/ndevs/1"), "veth0\n").expect("w");
        let host = Host::at(root.path()).expect("host");
        let before = read_port_counters(&host, "rxe0", 1);
        assert_eq!(before.get("hw_counters/sent_pkts"), Some(&100));
        assert!(!before.contains_key("hw_counters/lifespan"));
        fs::write(base.join("hw_counters/sent_pkts"), "250\n").expect("w");
        let after = read_port_counters(&host, "rxe0", 1);
        let d = delta(&before, &after);
        assert_eq!(d.len(), 1);
        assert_eq!(d.get("hw_counters/sent_pkts"), Some(&150));
        assert!(read_port_counters(&host, "mlx5_0", 1).is_empty());
        assert_eq!(netdev_of_gid(&host, "rxe0", 1, 1).as_deref(), Some("veth0"));
        assert_eq!(netdev_of_gid(&host, "rxe0", 1, 2), None);
        // No interface index from the GID table: the GID's own ndevs file names it.
        assert_eq!(
            netdev_of_port(&host, "rxe0", 1, 1, 0).as_deref(),
            Ok("veth0")
        );
        let ib = netdev_of_port(&host, "mlx5_0", 1, 0, 0).expect_err("an IB port has none");
        assert!(ib.contains("mlx5_0:1 GID 0"), "{ib}");
        let s = netdev_sample(&host, "mlx5_0", 1, 0, 0);
        assert_eq!(s.ifname, "mlx5_0:1");
        assert!(s.counters.is_empty());
        assert_eq!(s.unavailable.len(), 1);
    }

    /// The GID table's interface index names the netdev in this namespace (the loopback
    /// interface is index 1 in every network namespace, include/net/net_namespace.h's
    /// LOOPBACK_IFINDEX), and its counters are the kernel's IFLA_STATS64.
    #[test]
    fn interface_index_names_the_netdev_and_its_counters() {
        let root = tempfile::tempdir().expect("tempdir");
        let host = Host::at(root.path()).expect("host");
        assert_eq!(netdev_of_port(&host, "rxe0", 1, 1, 1).as_deref(), Ok("lo"));
        let s = netdev_sample(&host, "rxe0", 1, 1, 1);
        assert_eq!(s.ifname, "lo");
        assert!(
            s.get(
                daqtune_probe::net::counters::Source::Statistics,
                "rx_packets"
            )
            .is_some(),
            "{s:?}"
        );
    }

    #[test]
    fn backwards_counters_are_dropped() {
        let before = BTreeMap::from([("counters/port_xmit_data".to_string(), 10u64)]);
        let after = BTreeMap::from([("counters/port_xmit_data".to_string(), 3u64)]);
        assert!(delta(&before, &after).is_empty());
    }

    #[test]
    fn error_counter_names() {
        assert!(is_error_counter("hw_counters/retry_exceeded_err"));
        assert!(is_error_counter("hw_counters/rcvd_rnr_err"));
        assert!(is_error_counter("hw_counters/out_of_seq_request"));
        assert!(!is_error_counter("hw_counters/sent_pkts"));
        assert!(!is_error_counter("hw_counters/rdma_sends"));
    }
}
