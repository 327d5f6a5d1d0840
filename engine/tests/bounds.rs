//! Issue 42, deliverable 2: bounds before anything is written. Every number and path of a
//! profile is range-checked at load with its file:line (rows 1, 6, 7, the BOM); what only the
//! host can bound (node memory, the NIC's ring maximum, the management port) is bounded when
//! planning, with a note and nothing written for that setting.

mod common;
use daqtune_engine::profile::load_source;

/// The profile refused, with its line and a message containing every `needles`.
fn refused_at(src: &str, line: usize, needles: &[&str]) {
    let e = match load_source("hostile.yaml", src) {
        Ok(_) => panic!("accepted:\n{src}"),
        Err(e) => e,
    };
    assert_eq!(
        (e.file.as_str(), e.line),
        ("hostile.yaml", line),
        "{e}\n{src}"
    );
    for n in needles {
        assert!(e.message.contains(n), "{e} lacks {n:?}");
    }
}

/// Row 1: a grub drop-in path that leaves grub.d (`..`, a sub-directory, a newline, a dot
/// file) is refused at load, on its line.
#[test]
fn grub_dropin_stays_in_grub_d() {
    for bad in [
        "/etc/default/grub.d/../../../../escape.cfg",
        "/etc/default/grub.d/sub/x.cfg",
        "\"/etc/default/grub.d/a\\nb.cfg\"",
        "/etc/default/grub.d/.hidden.cfg",
        "/etc/default/grub.d/.cfg",
        "\"/etc/default/grub.d/a b.cfg\"",
    ] {
        let src = format!("name: x\npersist:\n  grub_dropin: {bad}\n");
        refused_at(&src, 3, &["grub_dropin"]);
    }
    load_source(
        "ok.yaml",
        "name: x\npersist:\n  grub_dropin: /etc/default/grub.d/50-daq_tune.cfg\n",
    )
    .expect("a plain name loads");
}

/// Row 1: every other path a profile names: hugetlbfs mounts (`..` would mount over /etc),
/// the NetworkManager prefix (it names a file), sysctl names (files under /proc/sys), the
/// data-path interfaces.
#[test]
fn every_path_key_stays_in_its_directory() {
    refused_at(
        "name: x\nhugepages:\n  mount: /mnt/../etc\n",
        3,
        &["mount", "`..`"],
    );
    refused_at(
        "name: x\nhugepages:\n  pools:\n    - {size: 2M, count: 8, mount: \"/mnt/h\\nx\"}\n",
        4,
        &["mount"],
    );
    refused_at(
        "name: x\npersist:\n  nm_prefix: ../../x\n",
        3,
        &["nm_prefix", "names a file"],
    );
    refused_at(
        "name: x\nsysctl:\n  enabled: true\n  values:\n    net..core.x: \"1\"\n",
        5,
        &["sysctl name", "/proc/sys"],
    );
    refused_at(
        "name: x\nsysctl:\n  values:\n    net.core.rmem_max: \"lots\"\n",
        4,
        &["net.core.rmem_max", "non-negative integer"],
    );
    refused_at(
        "name: x\nnic:\n  interfaces: [\"../x\"]\n",
        3,
        &["interface", "/"],
    );
}

/// The terminal escapes of the issue: a raw ESC or U+202E in any string is refused.
#[test]
fn control_characters_refused_anywhere() {
    refused_at(
        "name: x\nnot_applicable:\n  gpu.clocks: \"no \\e[31mGPU\"\n",
        3,
        &["U+001B"],
    );
    refused_at("name: \"x\\u202e\"\n", 1, &["U+202E"]);
    // Prose may span lines.
    load_source("ok.yaml", "name: x\ndescription: |\n  two\n  lines\n").expect("prose");
}

/// Row 6: NaN, infinity, negatives and zero where they mean nothing, each on its line.
#[test]
fn selftest_numbers_are_bounded() {
    for (v, needle) in [
        (".nan", "NaN"),
        ("-1", "-1"),
        (".inf", "inf"),
        ("100.5", "100.5"),
    ] {
        refused_at(
            &format!("name: x\nselftest:\n  max_udp_loss_pct: {v}\n"),
            3,
            &["max_udp_loss_pct", needle],
        );
    }
    refused_at(
        "name: x\nselftest:\n  message_size: 0\n",
        3,
        &["message_size 0"],
    );
    refused_at(
        "name: x\nselftest:\n  min_tcp_gbps: -5\n",
        3,
        &["min_tcp_gbps -5"],
    );
    refused_at(
        "name: x\nselftest:\n  min_tcp_gbps: .nan\n",
        3,
        &["min_tcp_gbps NaN"],
    );
}

/// Row 6/7: the NIC and GPU numbers a profile cannot mean.
#[test]
fn device_numbers_are_bounded() {
    refused_at("name: x\nnic:\n  rings:\n    rx: 0\n", 4, &["rx ring of 0"]);
    refused_at(
        "name: x\nnic:\n  rings:\n    tx: 4294967295\n",
        4,
        &["tx ring of 4294967295"],
    );
    refused_at(
        "name: x\nnic:\n  coalesce:\n    rx_usecs: 4294967295\n",
        4,
        &["rx_usecs 4294967295", "8160"],
    );
    refused_at(
        "name: x\nnic:\n  channels:\n    combined: 0\n",
        4,
        &["combined 0"],
    );
    refused_at("name: x\nnic:\n  expected_pfs: 0\n", 3, &["expected_pfs 0"]);
    refused_at(
        "name: x\ncpu:\n  isolated: {rule: highest, count: 100000}\n",
        3,
        &["count 100000"],
    );
    refused_at(
        "name: x\ncpu:\n  max_idle_latency_us: 18446744073709551615\n",
        3,
        &["max_idle_latency_us"],
    );
    refused_at(
        "name: x\ngpu:\n  clock_tolerance_mhz: 4000000000\n",
        3,
        &["clock_tolerance_mhz"],
    );
    load_source(
        "ok.yaml",
        "name: x\nnic:\n  rings: {rx: 8192, tx: max}\n  coalesce: {rx_usecs: 8160}\n",
    )
    .expect("real values load");
}

/// Row 7: a pool count no host can hold is refused at load (it went into the drop-in
/// verbatim), in `count` and in `pools`.
#[test]
fn hugepage_count_bounded_at_load() {
    refused_at(
        "name: x\nhugepages:\n  size: 1G\n  count: 18446744073709551615\n",
        4,
        &["18446744073709551615 x 1G", "64 TiB"],
    );
    refused_at(
        "name: x\nhugepages:\n  pools:\n    - size: 2M\n      count: 1000\n    - size: 1G\n      count: 70000\n",
        7,
        &["70000 x 1G"],
    );
    load_source("ok.yaml", "name: x\nhugepages:\n  size: 1G\n  count: 64\n").expect("64 x 1G");
}

/// A profile saved with a UTF-8 byte-order mark loads (it said "more than one document").
#[test]
fn bom_profile_loads() {
    let lp = load_source("bom.yaml", "\u{feff}name: bom\nnic:\n  mtu: 4000\n").expect("BOM");
    assert_eq!(
        (lp.profile.name.as_str(), lp.profile.nic.mtu),
        ("bom", 4000)
    );
    // Its errors keep their lines and columns.
    let e = load_source("bom.yaml", "\u{feff}name: x\nnic:\n  mtu: 9\n").expect_err("mtu");
    assert_eq!((e.line, e.column), (3, 3), "{e}");
}

/// Row 9: a later netplan file with `mtu: "1500"` (quoted: netplan reads the scalar alike) is
/// named like the unquoted one.
#[test]
fn quoted_netplan_mtu_is_reported() {
    use daqtune_engine::facts::Facts;
    use daqtune_engine::tunables::mtu::netplan_overrides;
    let d = tempfile::tempdir().expect("tmp");
    let r = d.path();
    let w = |f: &str, t: &str| {
        let p = r.join(f);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, t).expect("write");
    };
    std::fs::create_dir_all(r.join("sys/bus/pci/devices")).expect("mkdir");
    w("sys/class/net/ens1/address", "52:54:00:da:00:01\n");
    let a = daqtune_units::network::netplan(&[("ens1", 9000)], "p").expect("artifact");
    w("etc/netplan/90-daqtune.yaml", &a.text);
    let lp = load_source(
        "t.yaml",
        "name: t\nextends: generic-dgpu\nnic:\n  mtu: 9000\n  interfaces: [ens1]\n",
    )
    .expect("profile");
    let host = daqtune_probe::Host::at(r).expect("host");
    for quoted in ["\"1500\"", "'1500'"] {
        w(
            "etc/netplan/99-user.yaml",
            &format!("network:\n  version: 2\n  ethernets:\n    ens1:\n      mtu: {quoted}\n"),
        );
        let o = netplan_overrides(&Facts::new(&host), &lp);
        assert_eq!(o.len(), 1, "{quoted}: {o:?}");
        assert!(
            o[0].1.starts_with(
                "/etc/netplan/99-user.yaml sets the MTU of ens1 to 1500 after daqtune's"
            ),
            "{}",
            o[0].1
        );
    }
}
