use super::*;

fn hex(s: &str) -> Vec<u8> {
    let s = s.trim();
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("hex"))
        .collect()
}

/// A reply payload as the kernel lays it out (genl header, then attributes), built with the
/// request codec, without the netlink header.
fn reply(cmd: u8, f: impl FnOnce(&mut super::super::netlink::Builder)) -> Vec<u8> {
    let mut r = request(20, cmd, 1, 0, 1);
    f(&mut r);
    r.finish()[16..].to_vec()
}

/// Captured on Linux 6.18: STATS_GET of a veth end. The kernel answers with all four groups
/// (ids 0-3, string sets 17-20) and no counter in any: veth implements none of the
/// get_eth_*_stats operations.
#[test]
fn veth_stats_reply_captured_has_groups_but_no_counters() {
    let p = hex(include_str!("../ethtool/testdata/veth.stats.hex"));
    let ids: Vec<u32> = genl::genl_attrs(&p)
        .into_iter()
        .filter(|(k, _)| *k == A_STATS_GRP)
        .filter_map(|(_, g)| {
            attrs(g)
                .into_iter()
                .find(|(k, _)| *k == A_STATS_GRP_ID)
                .and_then(|(_, d)| get_u32(d))
        })
        .collect();
    assert_eq!(ids, [0, 1, 2, 3]);
    assert!(parse_stats_reply(&p).is_empty());
}

/// The layout of include/uapi/linux/ethtool_netlink.h: ETHTOOL_A_STATS_GRP (4) { GRP_ID (2),
/// GRP_STAT (4) { <index>: u64 } ... }; eth-mac index 4 is aFrameCheckSequenceErrors, 13
/// aFramesLostDueToIntMACRcvError; rmon 3 etherStatsJabbers.
#[test]
fn stats_reply_names_counters_by_group_and_index() {
    let p = reply(33, |r| {
        r.begin_nest(A_STATS_HEADER).end_nest();
        r.begin_nest(A_STATS_GRP).u32(A_STATS_GRP_ID, 1).u32(3, 18);
        for (idx, v) in [(4u16, 7u64), (13, 12_345), (99, 1)] {
            r.begin_nest(A_STATS_GRP_STAT)
                .attr(idx, &v.to_ne_bytes())
                .end_nest();
        }
        r.end_nest();
        r.begin_nest(A_STATS_GRP).u32(A_STATS_GRP_ID, 3);
        r.begin_nest(A_STATS_GRP_STAT)
            .attr(3, &5u64.to_ne_bytes())
            .end_nest();
        r.end_nest();
        // An unknown group (a newer kernel) is passed over.
        r.begin_nest(A_STATS_GRP).u32(A_STATS_GRP_ID, 9);
        r.begin_nest(A_STATS_GRP_STAT)
            .attr(0, &1u64.to_ne_bytes())
            .end_nest();
        r.end_nest();
    });
    let c = parse_stats_reply(&p);
    let got: Vec<(Source, &str, u64)> = c
        .iter()
        .map(|c| (c.source, c.name.as_str(), c.value))
        .collect();
    assert_eq!(
        got,
        [
            (Source::EthMac, "FrameCheckSequenceErrors", 7),
            (Source::EthMac, "FramesLostDueToIntMACRcvError", 12_345),
            (Source::Rmon, "etherStatsJabbers", 5),
        ]
    );
    assert_eq!(
        kind_of(Source::EthMac, "FrameCheckSequenceErrors"),
        Some(Kind::Link)
    );
    assert_eq!(
        kind_of(Source::EthMac, "FramesLostDueToIntMACRcvError"),
        Some(Kind::NicBuffer)
    );
    assert_eq!(kind_of(Source::EthMac, "FramesReceivedOK"), None);
}

#[test]
fn pause_reply_gives_frame_counts() {
    let p = reply(22, |r| {
        r.begin_nest(A_PAUSE_HEADER).end_nest();
        r.u8(2, 0).u8(3, 1).u8(4, 1);
        r.begin_nest(A_PAUSE_STATS)
            .attr(1, &[0; 0])
            .attr(A_PAUSE_STAT_TX_FRAMES, &11u64.to_ne_bytes())
            .attr(A_PAUSE_STAT_RX_FRAMES, &22u64.to_ne_bytes())
            .end_nest();
    });
    let c = parse_pause_reply(&p);
    assert_eq!(c.len(), 2);
    assert_eq!((c[0].name.as_str(), c[0].value), ("tx_pause_frames", 11));
    assert_eq!((c[1].name.as_str(), c[1].value), ("rx_pause_frames", 22));
    assert!(parse_pause_reply(&reply(22, |_| {})).is_empty());
}

#[test]
fn requests_carry_header_groups_and_stats_flag() {
    let b = stats_request(0x14, "eth2", 9);
    let m = super::super::netlink::messages(&b);
    assert_eq!(m.len(), 1);
    assert_eq!(m[0].payload[0], MSG_STATS_GET);
    let a = genl::genl_attrs(m[0].payload);
    assert_eq!(a[0].0, A_STATS_HEADER);
    assert_eq!(attrs(a[0].1), vec![(A_HEADER_DEV_NAME, &b"eth2\0"[..])]);
    assert_eq!(a[1].0, A_STATS_GROUPS);
    let g = attrs(a[1].1);
    assert_eq!(g[0].0, A_BITSET_NOMASK);
    let names: Vec<String> = attrs(g[1].1)
        .into_iter()
        .map(|(_, bit)| {
            attrs(bit)
                .into_iter()
                .find(|(k, _)| *k == A_BITSET_BIT_NAME)
                .map(|(_, d)| super::super::netlink::get_string(d))
                .unwrap_or_default()
        })
        .collect();
    assert_eq!(names, ["eth-phy", "eth-mac", "eth-ctrl", "rmon"]);

    let b = pause_stats_request(0x14, "eth2", 9);
    let m = super::super::netlink::messages(&b);
    assert_eq!(m[0].payload[0], MSG_PAUSE_GET);
    let h = attrs(genl::genl_attrs(m[0].payload)[0].1);
    assert_eq!(h[1], (A_HEADER_FLAGS, &FLAG_STATS.to_ne_bytes()[..]));
}

#[test]
fn stats64_in_struct_order() {
    let mut b = Vec::new();
    for i in 0..24u64 {
        b.extend_from_slice(&(i * 10).to_ne_bytes());
    }
    let c = parse_stats64(&b);
    assert_eq!(c.len(), 24);
    assert_eq!((c[6].name.as_str(), c[6].value), ("rx_dropped", 60));
    assert_eq!(
        (c[15].name.as_str(), c[15].value),
        ("rx_missed_errors", 150)
    );
    assert_eq!(c[23].name, "rx_nohandler");
    // An older kernel's shorter struct: what it holds.
    assert_eq!(parse_stats64(&b[..8 * 23 + 3]).len(), 23);
}

/// The kinds follow the documents: mlx5 counters.rst (rx_out_of_buffer: "no software buffers
/// allocated for the adapter's incoming traffic"; rx_discards_phy: "dropped due to lack of
/// buffers on a physical port ... the adapter is congested"; rx_crc_errors_phy: FCS errors),
/// if_link.h (rx_missed_errors: "dropped by the device due to lack of buffer space").
#[test]
fn documented_counters_get_their_kind() {
    let d = |n| kind_of(Source::Driver, n);
    assert_eq!(d("rx_out_of_buffer"), Some(Kind::RxBuffer));
    assert_eq!(d("rx_discards_phy"), Some(Kind::NicBuffer));
    assert_eq!(d("rx_crc_errors_phy"), Some(Kind::Link));
    assert_eq!(d("rx_pause_ctrl_phy"), Some(Kind::Pause));
    assert_eq!(d("tx_pause_ctrl_phy"), Some(Kind::Pause));
    assert_eq!(d("rx_prio3_pause_duration"), None);
    assert_eq!(d("rx3_buff_alloc_err"), Some(Kind::RxBuffer));
    assert_eq!(d("rx_queue_0_drops"), Some(Kind::QueueDrop));
    assert_eq!(d("rx_queue_0_xdp_drops"), None);
    assert_eq!(d("tx_discards_phy"), Some(Kind::TxDrop));
    assert_eq!(d("rx_corrected_bits_phy"), None);
    assert_eq!(d("rx_bytes_phy"), None);
    let s = |n| kind_of(Source::Statistics, n);
    assert_eq!(s("rx_missed_errors"), Some(Kind::RxBuffer));
    assert_eq!(s("rx_dropped"), Some(Kind::KernelDrop));
    assert_eq!(s("rx_packets"), None);
    assert!(!Kind::Pause.is_loss());
    assert!(Kind::NicBuffer < Kind::RxBuffer && Kind::RxBuffer < Kind::KernelDrop);
}

fn port(name: &str, c: &[(Source, &str, u64)]) -> PortCounters {
    PortCounters {
        ifname: name.into(),
        counters: c
            .iter()
            .map(|(s, n, v)| Counter {
                source: *s,
                name: (*n).into(),
                value: *v,
            })
            .collect(),
        unavailable: Vec::new(),
    }
}

#[test]
fn deltas_rank_losses_and_ignore_resets() {
    let before = port(
        "eth2",
        &[
            (Source::Statistics, "rx_dropped", 10),
            (Source::Statistics, "rx_packets", 100),
            (Source::Driver, "rx_out_of_buffer", 5),
            (Source::Driver, "rx_discards_phy", 500),
            (Source::Driver, "tx_pause_ctrl_phy", 0),
        ],
    );
    let after = port(
        "eth2",
        &[
            (Source::Statistics, "rx_dropped", 12),
            (Source::Statistics, "rx_packets", 200),
            (Source::Driver, "rx_out_of_buffer", 12_350),
            // Fell: a driver reload reset it.
            (Source::Driver, "rx_discards_phy", 3),
            (Source::Driver, "tx_pause_ctrl_phy", 4),
            // Absent before: no delta.
            (Source::Driver, "rx_crc_errors_phy", 9),
        ],
    );
    let d = deltas(&before, &after);
    let names: Vec<&str> = d.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "rx_out_of_buffer",
            "rx_dropped",
            "tx_pause_ctrl_phy",
            "rx_packets"
        ]
    );
    assert_eq!(d[0].delta, 12_345);
    let loss: Vec<&str> = losses(&d).map(|d| d.name.as_str()).collect();
    assert_eq!(loss, ["rx_out_of_buffer", "rx_dropped"]);
    let p = PortDelta::new("rx", &before, &after, 41.0);
    let causes = loss_causes(&[p]);
    assert_eq!(causes.len(), 2);
    assert!(
        causes[0].2.starts_with(
            "the receiving port eth2: rx_out_of_buffer (driver (ethtool -S)) rose by 12,345: dropped for lack of receive buffers: rings / CPU / PCIe"
        ),
        "{}",
        causes[0].2
    );
    assert_eq!(thousands(0), "0");
    assert_eq!(thousands(999), "999");
    assert_eq!(thousands(1_000), "1,000");
    assert_eq!(thousands(12_345_678), "12,345,678");
}

/// A host root has the statistics files; the ioctl and netlink parts say why they are absent.
#[test]
fn a_root_gives_statistics_and_says_why_not_the_rest() {
    let d = tempfile::tempdir().expect("tmp");
    let st = d.path().join("sys/class/net/eth2/statistics");
    std::fs::create_dir_all(&st).expect("mkdir");
    std::fs::write(st.join("rx_dropped"), "17\n").expect("w");
    std::fs::write(st.join("rx_missed_errors"), "4\n").expect("w");
    std::fs::write(st.join("tx_bytes"), "garbage\n").expect("w");
    let host = Host::at(d.path()).expect("root");
    let p = read_port(&host, "eth2");
    assert_eq!(p.get(Source::Statistics, "rx_dropped"), Some(17));
    assert_eq!(p.get(Source::Statistics, "rx_missed_errors"), Some(4));
    assert_eq!(p.get(Source::Statistics, "tx_bytes"), None);
    assert_eq!(p.unavailable.len(), 1);
    assert!(p.unavailable[0].reason.contains("running kernel"));
    let none = read_port(&host, "eth9");
    assert!(none.counters.is_empty());
    assert_eq!(none.unavailable[0].source, Source::Statistics.label());
}
