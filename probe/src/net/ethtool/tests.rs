use super::*;

fn hex(s: &str) -> Vec<u8> {
    let s = s.trim();
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("hex"))
        .collect()
}

/// A reply payload as the kernel lays it out, built with the request codec (the layouts are
/// the same: genl header, then attributes), without the netlink header.
fn reply(cmd: u8, f: impl FnOnce(&mut super::super::netlink::Builder)) -> Vec<u8> {
    let mut r = request(20, cmd, VERSION, 0, 1);
    header(&mut r, "eth0");
    f(&mut r);
    r.finish()[16..].to_vec()
}

/// Captured on Linux 6.18 from one end of a fresh veth pair (2 CPUs): veth has channels.
#[test]
fn veth_channels_captured() {
    let p = hex(include_str!("testdata/cap0.channels.hex"));
    let GroupState::Channels(c) = parse_reply(Group::Channels, &p) else {
        panic!("not channels");
    };
    assert_eq!(
        c,
        Channels {
            rx: Some(1),
            rx_max: Some(2),
            tx: Some(1),
            tx_max: Some(2),
            ..Default::default()
        }
    );
}

/// Captured from veth and lo: GRO present, LRO fixed off (neither does LRO).
#[test]
fn features_captured() {
    for f in [
        include_str!("testdata/cap0.features.hex"),
        include_str!("testdata/lo.features.hex"),
    ] {
        let GroupState::Features(x) = parse_reply(Group::Features, &hex(f)) else {
            panic!("not features");
        };
        assert!(x.features.len() > 40, "{}", x.features.len());
        // The kernel's name; `large-receive-offload` is ethtool(8)'s legacy alias.
        let lro = x.features["rx-lro"];
        assert_eq!(
            lro,
            Feature {
                active: false,
                fixed: true
            }
        );
        assert!(x.features.contains_key("rx-gro"));
    }
    let GroupState::Features(v) = parse_reply(
        Group::Features,
        &hex(include_str!("testdata/cap0.features.hex")),
    ) else {
        panic!()
    };
    // veth: GRO off by default and changeable (the live test turns it on).
    assert_eq!(
        v.features["rx-gro"],
        Feature {
            active: false,
            fixed: false
        }
    );
    assert_eq!(kernel_feature("large-receive-offload"), "rx-lro");
    assert_eq!(kernel_feature("generic-receive-offload"), "rx-gro");
    assert_eq!(kernel_feature("rx-gro"), "rx-gro");
}

#[test]
fn rings_pause_coalesce_parse() {
    let p = reply(MSG_RINGS_GET + 1, |r| {
        r.u32(rings::RX_MAX, 8192)
            .u32(rings::TX_MAX, 8192)
            .u32(rings::RX, 1024)
            .u32(rings::TX, 1024)
            .u8(rings::TCP_DATA_SPLIT, 1);
    });
    let g = parse_reply(Group::Rings, &p);
    assert_eq!(
        g,
        GroupState::Rings(Rings {
            rx: Some(1024),
            rx_max: Some(8192),
            tx: Some(1024),
            tx_max: Some(8192),
            tcp_data_split: Some(DataSplit::Disabled),
        })
    );
    assert_eq!(g.get("rx"), Some(1024));
    assert_eq!(g.get("tcp_data_split"), Some(1));
    // An old kernel: no header-split attribute at all.
    let p = reply(MSG_RINGS_GET + 1, |r| {
        r.u32(rings::RX, 256);
    });
    let GroupState::Rings(r) = parse_reply(Group::Rings, &p) else {
        panic!()
    };
    assert_eq!((r.rx, r.rx_max, r.tcp_data_split), (Some(256), None, None));

    let p = reply(MSG_PAUSE_GET + 1, |r| {
        r.u8(pause::AUTONEG, 1).u8(pause::RX, 1).u8(pause::TX, 0);
    });
    assert_eq!(
        parse_reply(Group::Pause, &p),
        GroupState::Pause(Pause {
            autoneg: Some(true),
            rx: Some(true),
            tx: Some(false)
        })
    );
    let p = reply(MSG_COALESCE_GET + 1, |r| {
        r.u32(coalesce::RX_USECS, 8)
            .u32(coalesce::TX_USECS, 16)
            .u8(coalesce::ADAPTIVE_RX, 1)
            .u8(coalesce::ADAPTIVE_TX, 0);
    });
    let g = parse_reply(Group::Coalesce, &p);
    assert_eq!(
        g,
        GroupState::Coalesce(Coalesce {
            rx_usecs: Some(8),
            tx_usecs: Some(16),
            adaptive_rx: Some(true),
            adaptive_tx: Some(false)
        })
    );
    assert_eq!(g.get("adaptive_rx"), Some(1));
}

#[test]
fn garbage_parses_to_nothing() {
    for g in Group::ALL {
        for bytes in [&[][..], &[1, 2, 3], &[0xff; 64]] {
            let s = parse_reply(g, bytes);
            for k in ["rx", "tx", "combined", "rx_usecs", "autoneg", "rx-gro"] {
                assert_eq!(s.get(k), None, "{g:?} {k}");
            }
        }
    }
}

#[test]
fn set_requests_round_trip() {
    let mut s = Settings::new();
    s.insert("rx".into(), 4096);
    s.insert("tcp_data_split".into(), 2);
    let m = set_request(20, Group::Rings, "eth0", &s, 3).expect("req");
    let msgs = super::super::netlink::messages(&m);
    assert_eq!(msgs[0].payload[0], MSG_RINGS_SET);
    // The request's attributes read back as a reply would.
    let g = parse_reply(Group::Rings, msgs[0].payload);
    assert_eq!(
        (g.get("rx"), g.get("tcp_data_split")),
        (Some(4096), Some(2))
    );
    s.insert("bogus".into(), 1);
    assert!(set_request(20, Group::Rings, "eth0", &s, 3).is_err());
    let mut f = Settings::new();
    f.insert("rx-gro".into(), 1);
    f.insert("large-receive-offload".into(), 0);
    let m = set_request(20, Group::Features, "eth0", &f, 3).expect("req");
    let a = genl::genl_attrs(super::super::netlink::messages(&m)[0].payload);
    let wanted = a
        .iter()
        .find(|(k, _)| *k == features::WANTED)
        .expect("wanted");
    let bits = bitset_bits(wanted.1);
    assert_eq!(
        bits,
        vec![
            ("large-receive-offload".to_string(), false),
            ("rx-gro".to_string(), true)
        ]
    );
    let mut p = Settings::new();
    p.insert("rx".into(), 300);
    assert!(
        set_request(20, Group::Pause, "eth0", &p, 3).is_err(),
        "not a flag"
    );
}

#[test]
fn recorded_files_round_trip() {
    let r = Recorded::Value(GroupState::Rings(Rings {
        rx: Some(512),
        rx_max: Some(4096),
        tx: Some(512),
        tx_max: Some(4096),
        tcp_data_split: None,
    }));
    let t = recorded_json(&r);
    assert_eq!(GroupState::from_json(Group::Rings, &t).expect("json"), r);
    let e = Recorded::Error {
        error: "the driver does not support it (EOPNOTSUPP)".into(),
    };
    let t = recorded_json(&e);
    assert_eq!(GroupState::from_json(Group::Pause, &t).expect("json"), e);
    assert!(GroupState::from_json(Group::Rings, "{\"rx\": \"x\"}").is_err());
    assert!(GroupState::from_json(Group::Rings, "{\"rxx\": 1}").is_err());
    let g = GroupState::Rings(Rings::default());
    let mut s = Settings::new();
    s.insert("rx".into(), 9);
    assert_eq!(g.with(&s).expect("with").get("rx"), Some(9));
    s.insert("nope".into(), 9);
    assert!(g.with(&s).is_err());
    assert_eq!(
        recorded_path("eth0", Group::Rings),
        "/daqtune/ethtool/eth0/rings.json"
    );
}

#[test]
fn errors_are_described() {
    let e = io::Error::from_raw_os_error(libc::EOPNOTSUPP);
    assert!(describe_error(&e).contains("EOPNOTSUPP"));
    assert!(describe_error(&io::Error::from_raw_os_error(libc::ENOENT)).contains("5.6"));
}

/// lo answers FEATURES but not RINGS (EOPNOTSUPP): both are what the client says.
#[test]
fn live_loopback() {
    let mut c = match Client::open() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("skip: no ethtool netlink here: {e}");
            return;
        }
    };
    let f = c.get(Group::Features, "lo").expect("features of lo");
    assert!(f.get("rx-gro").is_some());
    let e = c.get(Group::Rings, "lo").expect_err("lo has no rings");
    assert_eq!(e.raw_os_error(), Some(libc::EOPNOTSUPP));
    let e = c
        .get(Group::Rings, "no-such-if9")
        .expect_err("no such interface");
    assert_eq!(e.raw_os_error(), Some(libc::ENODEV));
}
