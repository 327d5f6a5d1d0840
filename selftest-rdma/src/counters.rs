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
