//! Message building and parsing of the rtnetlink client, without a socket.

use super::super::messages;
use super::*;

#[test]
fn neighbour_round_trip() {
    let ip: IpAddr = "198.18.0.2".parse().expect("ip");
    let mut b = Builder::new(RTM_NEWNEIGH, 0, 1);
    b.raw(&ndmsg(AF_INET, 5, NUD_PERMANENT));
    b.attr(NDA_DST, &ip_bytes(&ip));
    b.attr(NDA_LLADDR, &[2, 0, 0, 0, 0, 9]);
    let m = b.finish();
    let n = parse_neighbour(messages(&m)[0].payload).expect("neighbour");
    assert_eq!(n.index, 5);
    assert_eq!(n.ip, ip);
    assert_eq!(n.mac, vec![2, 0, 0, 0, 0, 9]);
    assert!(n.is_permanent());
    // Reachable (learned) entries are not permanent; a truncated header is nothing.
    let mut b = Builder::new(RTM_NEWNEIGH, 0, 1);
    b.raw(&ndmsg(AF_INET, 5, 0x02));
    b.attr(NDA_DST, &ip_bytes(&ip));
    let m = b.finish();
    assert!(!parse_neighbour(messages(&m)[0].payload)
        .expect("neighbour")
        .is_permanent());
    assert_eq!(parse_neighbour(&[2, 0, 0]), None);
}

#[test]
fn builder_nests_and_aligns() {
    let mut b = Builder::new(RTM_NEWLINK, NLM_F_REQUEST, 7);
    b.raw(&ifinfomsg(0, 3, 0, 0));
    b.string(IFLA_IFNAME, "abc");
    b.begin_nest(IFLA_LINKINFO);
    b.string(IFLA_INFO_KIND, "veth");
    b.end_nest();
    let m = b.finish();
    assert_eq!(m.len() % 4, 0);
    let msgs = messages(&m);
    assert_eq!(msgs.len(), 1);
    assert_eq!(msgs[0].kind, RTM_NEWLINK);
    assert_eq!(msgs[0].seq, 7);
    let l = parse_link(msgs[0].payload).expect("link");
    assert_eq!(l.index, 3);
    assert_eq!(l.name, "abc");
    let a = attrs(&msgs[0].payload[16..]);
    assert_eq!(a.len(), 2);
    assert_eq!(a[1].0, IFLA_LINKINFO);
    let inner = attrs(a[1].1);
    assert_eq!(inner, vec![(IFLA_INFO_KIND, &b"veth\0"[..])]);
}

#[test]
fn link_stats_parse() {
    let mut b = Builder::new(RTM_NEWLINK, 0, 1);
    b.raw(&ifinfomsg(0, 4, IFF_UP, 0));
    let mut st = Vec::new();
    for v in 1u64..=24 {
        st.extend_from_slice(&v.to_ne_bytes());
    }
    b.attr(IFLA_STATS64, &st);
    let m = b.finish();
    let l = parse_link(messages(&m)[0].payload).expect("link");
    let s = l.stats.expect("stats");
    assert_eq!((s.rx_bytes, s.tx_bytes, s.tx_dropped), (3, 4, 8));
    assert!(l.is_up());
    assert_eq!(parse_stats64(&[0u8; 40]), None);
}

#[test]
fn route_round_trip_through_bytes() {
    let mut r = Route::host_route("198.18.0.2".parse().expect("ip"), 5);
    r.gateway = Some("198.18.0.9".parse().expect("ip"));
    r.priority = Some(100);
    let mut b = Builder::new(RTM_NEWROUTE, 0, 1);
    b.raw(&rtmsg(&r));
    b.attr(RTA_DST, &ip_bytes(&r.dst.expect("dst")));
    b.attr(RTA_OIF, &5i32.to_ne_bytes());
    b.attr(RTA_GATEWAY, &ip_bytes(&r.gateway.expect("gw")));
    b.u32(RTA_PRIORITY, 100);
    b.u32(RTA_TABLE, 254);
    let m = b.finish();
    let back = parse_route(messages(&m)[0].payload).expect("route");
    assert_eq!(back, r);
    assert!(back.uses_link(5));
    assert!(!back.is_default());
}

#[test]
fn multipath_next_hops_are_read() {
    let mut nh = Vec::new();
    for idx in [4i32, 9] {
        nh.extend_from_slice(&8u16.to_ne_bytes());
        nh.extend_from_slice(&[0, 0]);
        nh.extend_from_slice(&idx.to_ne_bytes());
    }
    let mut b = Builder::new(RTM_NEWROUTE, 0, 1);
    b.raw(&[AF_INET, 0, 0, 0, 254, 3, 0, RTN_UNICAST, 0, 0, 0, 0]);
    b.attr(RTA_MULTIPATH, &nh);
    let m = b.finish();
    let r = parse_route(messages(&m)[0].payload).expect("route");
    assert!(r.is_default());
    assert!(r.uses_link(9));
    assert_eq!(r.oif, None);
}

#[test]
fn addr_parse_local_and_peer() {
    let mut b = Builder::new(RTM_NEWADDR, 0, 1);
    b.raw(&ifaddrmsg(AF_INET, 32, 0x80, 0, 2));
    b.attr(IFA_ADDRESS, &[198, 18, 0, 2]);
    b.attr(IFA_LOCAL, &[198, 18, 0, 1]);
    b.string(IFA_LABEL, "p0");
    let m = b.finish();
    let a = parse_addr(messages(&m)[0].payload).expect("addr");
    assert_eq!(a.local, "198.18.0.1".parse::<IpAddr>().expect("ip"));
    assert_eq!(a.peer, Some("198.18.0.2".parse().expect("ip")));
    assert_eq!(a.label.as_deref(), Some("p0"));
}

#[test]
fn tbf_request_carries_rate_burst_and_limit() {
    // 100 Mbit/s on a 9000-byte link: 12.5 MB/s, a 64 KiB bucket, a 1.25 MB queue.
    let t = Tbf::at(100_000_000, 9000);
    assert_eq!(t.burst_bytes, 65536);
    assert_eq!(t.limit_bytes, 1_250_000);
    let m = tbf_request(7, 3, &t);
    let msgs = messages(&m);
    assert_eq!(msgs.len(), 1);
    assert_eq!(msgs[0].kind, RTM_NEWQDISC);
    let p = msgs[0].payload;
    let q = parse_qdisc(p).expect("tcmsg");
    assert_eq!((q.index, q.handle, q.parent), (3, 0x1_0000, TC_H_ROOT));
    assert_eq!(q.kind, "tbf");
    let opts = attrs(&p[20..])
        .into_iter()
        .find(|(k, _)| *k == TCA_OPTIONS)
        .expect("options")
        .1;
    let inner = attrs(opts);
    let parms = inner
        .iter()
        .find(|(k, _)| *k == TCA_TBF_PARMS)
        .expect("parms")
        .1;
    assert_eq!(parms.len(), 36);
    assert_eq!(parms[1], TC_LINKLAYER_ETHERNET);
    let rate = u32::from_ne_bytes(parms[8..12].try_into().expect("4"));
    assert_eq!(rate, 12_500_000);
    let limit = u32::from_ne_bytes(parms[24..28].try_into().expect("4"));
    assert_eq!(limit, 1_250_000);
    // 65536 B at 12.5 MB/s = 5.24288 ms = 81920 ticks of 64 ns.
    let buffer = u32::from_ne_bytes(parms[28..32].try_into().expect("4"));
    assert_eq!(buffer, 81920);
    let burst = inner
        .iter()
        .find(|(k, _)| *k == TCA_TBF_BURST)
        .expect("burst")
        .1;
    assert_eq!(burst, 65536u32.to_ne_bytes());
    assert!(!inner.iter().any(|(k, _)| *k == TCA_TBF_RATE64));
    // 400 Gbit/s = 50 GB/s does not fit the u32: the 64-bit attribute carries it.
    let m = tbf_request(8, 3, &Tbf::at(400_000_000_000, 9000));
    let p = messages(&m)[0].payload.to_vec();
    let opts = attrs(&p[20..])
        .into_iter()
        .find(|(k, _)| *k == TCA_OPTIONS)
        .expect("options")
        .1
        .to_vec();
    let r64 = attrs(&opts)
        .into_iter()
        .find(|(k, _)| *k == TCA_TBF_RATE64)
        .expect("rate64")
        .1
        .to_vec();
    assert_eq!(r64, 50_000_000_000u64.to_ne_bytes());
}

#[test]
fn garbage_does_not_panic() {
    assert!(messages(&[]).is_empty());
    assert!(messages(&[0xff; 15]).is_empty());
    // Length field larger than the buffer.
    let mut m = vec![0u8; 20];
    m[0..4].copy_from_slice(&100u32.to_ne_bytes());
    assert!(messages(&m).is_empty());
    assert!(attrs(&[3, 0, 1]).is_empty());
    assert!(parse_link(&[1, 2, 3]).is_none());
    assert!(parse_addr(&[]).is_none());
    assert!(parse_route(&[2]).is_none());
    assert!(parse_qdisc(&[0; 19]).is_none());
    assert!(parse_qdisc(&[0; 20]).is_none());
}

proptest::proptest! {
    #[test]
    fn parsers_never_panic(data in proptest::collection::vec(proptest::num::u8::ANY, 0..300)) {
        for m in messages(&data) {
            let _ = parse_link(m.payload);
            let _ = parse_addr(m.payload);
            let _ = parse_route(m.payload);
            let _ = parse_qdisc(m.payload);
        }
        let _ = attrs(&data);
        let _ = parse_link(&data);
        let _ = parse_addr(&data);
        let _ = parse_route(&data);
    }
}
