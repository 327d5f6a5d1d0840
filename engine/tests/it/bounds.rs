//! Issue 42, deliverable 2: bounds before anything is written. Every number and path of a
//! profile is range-checked at load with its file:line (rows 1, 6, 7, the BOM); what only the
//! host can bound (node memory, the NIC's ring maximum, the management port) is bounded when
//! planning, with a note and nothing written for that setting.

use crate::common;
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

/// A profile file in `dir` extending `base` with `body`.
fn profile_file(dir: &std::path::Path, base: &str, body: &str) -> String {
    let p = dir.join("p.yaml");
    std::fs::write(&p, format!("name: p\nextends: {base}\n{body}")).expect("profile");
    p.display().to_string()
}

/// Row 7: a boot reservation leaves every node max(512 MiB, an eighth) (docs/checks/hugepages.md):
/// 64 x 1G on the 64 GiB IGX wrote `hugepages=64` (the next boot has no memory); 56 x 1G is
/// what the rule allows there and is written.
#[test]
fn boot_reservation_leaves_the_host_its_minimum() {
    use common::drive::*;
    let root = prepared("igx-untuned", common::testroot::add_igx_pci);
    let r = root.path();
    let d = tempfile::tempdir().expect("tmp");
    let p = profile_file(
        d.path(),
        "igx-orin",
        "hugepages:\n  size: 1G\n  count: 64\n",
    );
    // The reservation is the hugepages setting's part of the drop-in (issue 42 deliverable 1).
    let out = plan(r, &p, &only(&["hugepages", "kernel.cmdline"]));
    assert!(!grub_line(&out).contains("hugepages="), "{out}");
    assert!(
        out.contains("hugepages=64 of 1G not written")
            && out.contains("node0 has 64G of which at least 8G stays")
            && out.contains("at most 56 x 1G fit here"),
        "{out}"
    );
    // The isolation arguments are still written; only the reservation is left out.
    assert!(grub_line(&out).contains("isolcpus=8-11"), "{out}");
    let (code, out) = apply(r, &p, &only(&["hugepages", "kernel.cmdline"]));
    assert_eq!(code, 0, "{out}");
    let dropin = read(r, "etc/default/grub.d/99-daqtune.cfg");
    assert!(!dropin.contains("hugepages=64"), "{dropin}");
    // The check says why instead of "reboot".
    let lp = daqtune_engine::profile::load(&p).expect("profile");
    let v = common::agree::checks(r, &lp);
    let hp: Vec<_> = v.iter().filter(|v| v.id == "hugepages").collect();
    assert!(
        hp.iter()
            .any(|v| v.message.contains("hugepages=64 of 1G not written")),
        "{hp:?}"
    );

    let root = prepared("igx-untuned", common::testroot::add_igx_pci);
    let p = profile_file(
        d.path(),
        "igx-orin",
        "hugepages:\n  size: 1G\n  count: 56\n",
    );
    let out = plan(root.path(), &p, &only(&["hugepages"]));
    assert!(out.contains("hugepagesz=1G hugepages=56"), "{out}");
}

/// Row 7 on two nodes: the kernel spreads `hugepages=N` evenly, so each 256 GiB node of
/// x86-2s keeps 32 GiB: 448 x 1G (224 a node) is written, 450 is not.
#[test]
fn boot_reservation_is_bounded_per_node() {
    use common::drive::*;
    let root = prepared("x86-2s", common::testroot::add_igx_pci);
    let d = tempfile::tempdir().expect("tmp");
    let p = profile_file(
        d.path(),
        "generic-dgpu",
        "hugepages:\n  size: 1G\n  count: 450\n",
    );
    let out = plan(root.path(), &p, &only(&["hugepages"]));
    assert!(
        !grub_line(&out).contains("hugepages=")
            && out.contains("over the 2 node(s) with memory, 225G on each, and node0 has 256G")
            && out.contains("at most 448 x 1G"),
        "{out}"
    );
    let p = profile_file(
        d.path(),
        "generic-dgpu",
        "hugepages:\n  size: 1G\n  count: 448\n",
    );
    let out = plan(root.path(), &p, &only(&["hugepages"]));
    assert!(out.contains("hugepages=448"), "{out}");
}

/// Row 7: a DAQIRI configuration whose regions add up to more than the host holds asked for
/// `hugepages=17179869184`; the derived reservation meets the same bound.
#[test]
fn config_reservation_is_bounded() {
    use common::drive::*;
    let root = prepared("igx-untuned", common::testroot::add_igx_pci);
    let r = root.path();
    let d = tempfile::tempdir().expect("tmp");
    let cfg = d.path().join("big.yaml");
    std::fs::write(
        &cfg,
        "daqiri:\n  cfg:\n    version: 1\n    stream_type: raw\n    master_core: 3\n    memory_regions:\n    - name: r\n      kind: huge\n      affinity: 0\n      num_bufs: 4294967295\n      buf_size: 1073741824\n    interfaces:\n    - name: capture\n      address: 0005:03:00.0\n      rx:\n        queues:\n        - name: q\n          id: 0\n          cpu_core: 10\n          batch_size: 8192\n          memory_regions: [r]\n",
    )
    .expect("cfg");
    let sel = daqtune_engine::apply::Selection {
        config: Some(cfg),
        ..Default::default()
    };
    let out = plan(r, "igx-orin", &sel);
    assert!(out.contains("not written: the kernel spreads"), "{out}");
    assert!(!grub_line(&out).contains("hugepages="), "{out}");
    assert!(grub_line(&out).contains("isolcpus=10"), "{out}");
}

/// The kernel arguments a plan writes into the grub drop-in.
fn grub_line(plan: &str) -> String {
    plan.lines()
        .find(|l| l.trim_start().starts_with("+GRUB_CMDLINE_LINUX="))
        .unwrap_or_default()
        .to_string()
}

/// What a plan changes that names `port` (its subject or any path or text of its action),
/// and the notes about it.
fn touching(plan: &daqtune_engine::plan::Plan, port: &str) -> (Vec<String>, Vec<String>) {
    let changes = plan
        .changes
        .iter()
        .filter(|c| c.check.starts_with("nic."))
        .map(|c| format!("{} {} {:?}", c.check, c.subject, c.action))
        .filter(|s| s.contains(port))
        .collect();
    let notes = plan
        .notes
        .iter()
        .filter(|n| n.message.contains(port))
        .map(|n| format!("{} {}", n.check, n.message))
        .collect();
    (changes, notes)
}

/// Row 7: the port carrying the default route is the host's management port: no MTU, ring,
/// queue, offload or network-file change for it; the plan and the check say why. x86-2s
/// routes its default through its ConnectX port ens1f0np0 (the plan changed its channels and
/// GRO and wrote a .link file for it).
#[test]
fn default_route_port_is_never_touched() {
    let root = common::drive::prepared("x86-2s", common::testroot::add_igx_pci);
    let lp = daqtune_engine::profile::load("generic-dgpu").expect("profile");
    let plan = common::agree::plan(root.path(), &lp, "generic-dgpu", false);
    let (changes, notes) = touching(&plan, "ens1f0np0");
    assert!(changes.is_empty(), "{changes:#?}");
    assert!(
        notes.iter().any(|n| n.starts_with(
            "nic.mtu ens1f0np0 not changed: it carries the default route (/proc/net/route)"
        )),
        "{notes:#?}"
    );
    assert!(
        notes.iter().any(|n| n.starts_with("nic.channels ")),
        "{notes:#?}"
    );
    let v = common::agree::checks(root.path(), &lp);
    let off = v
        .iter()
        .find(|v| v.id == "nic.offloads" && v.subject == "ens1f0np0")
        .expect("verdict");
    assert_eq!(off.status, daqtune_engine::verdict::Status::Skip, "{off:?}");
    assert!(off.message.contains("carries the default route"), "{off:?}");
}

/// Row 7: the port an SSH session came in on (an established connection to port 22 in
/// /proc/net/tcp on Spark's data port address 1.1.1.1) is left alone; the other ports are
/// still planned.
#[test]
fn ssh_session_port_is_never_touched() {
    let root = common::drive::prepared("spark", common::testroot::add_spark_pci);
    let r = root.path();
    let lp = daqtune_engine::profile::load("dgx-spark").expect("profile");
    let before = common::agree::plan(r, &lp, "dgx-spark", false);
    assert!(
        !touching(&before, "enp1s0f0np0").0.is_empty(),
        "planned before"
    );
    std::fs::write(
        r.join("proc/net/tcp"),
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 01010101:0016 0501010A:D431 01 00000000:00000000 02:000A7214 00000000     0        0 41231 4 0000000000000000 20 4 29 10 -1\n   1: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1234 1 0000000000000000 100 0 0 10 0\n",
    )
    .expect("tcp");
    let plan = common::agree::plan(r, &lp, "dgx-spark", false);
    let (changes, notes) = touching(&plan, "enp1s0f0np0");
    assert!(changes.is_empty(), "{changes:#?}");
    assert!(
        notes.iter().any(|n| n.contains(
            "enp1s0f0np0 not changed: an SSH session reaches it (/proc/net/tcp) on 1.1.1.1"
        )),
        "{notes:#?}"
    );
    assert!(
        !touching(&plan, "enp1s0f1np1").0.is_empty(),
        "the other port is planned"
    );
}

/// Row 7: a ring above the NIC's reported maximum (8192 on IGX's cx7_0) is not planned, live
/// or in the port's file; the plan says so. It was capped and set silently.
#[test]
fn ring_above_the_nic_maximum_is_not_planned() {
    use common::drive::*;
    let root = prepared("igx-untuned", common::testroot::add_igx_pci);
    let d = tempfile::tempdir().expect("tmp");
    let p = profile_file(
        d.path(),
        "igx-orin",
        "nic:\n  rings:\n    rx: 16384\n    tx: 4096\n",
    );
    let out = plan(root.path(), &p, &only(&["nic.rings", "nic.mtu"]));
    assert!(
        out.contains("cx7_0: rx 16384 is above the device's maximum 8192 (ethtool -g): not set"),
        "{out}"
    );
    assert!(
        !out.contains("RxBufferSize=16384") && !out.contains("rx 1024 -> 16384"),
        "{out}"
    );
    assert!(!out.contains("rx 1024 -> 8192"), "{out}");
    // The ring within the maximum is still set.
    assert!(out.contains("tx 1024 -> 4096"), "{out}");
}

/// Row 10: one data port with a legal but unusual name (Linux's dev_valid_name allows `=`;
/// networkd, netplan and NetworkManager files do not take it) made the whole plan exit 2.
/// That port alone is left out with the reason; the others are planned.
#[test]
fn unusual_port_name_leaves_out_that_port_alone() {
    use common::drive::*;
    let root = prepared("igx-untuned", common::testroot::add_igx_pci);
    let r = root.path();
    let dev = r.join("sys/class/net/cx7=1");
    std::fs::create_dir_all(&dev).expect("mkdir");
    std::fs::write(dev.join("address"), "48:b0:2d:00:00:99\n").expect("address");
    std::fs::write(dev.join("mtu"), "1500\n").expect("mtu");
    let d = tempfile::tempdir().expect("tmp");
    let p = profile_file(
        d.path(),
        "igx-orin",
        "nic:\n  interfaces: [cx7_0, \"cx7=1\"]\n",
    );
    let out = try_plan(r, &p, &only(&["nic.mtu", "nic.rings"]))
        .unwrap_or_else(|e| panic!("the plan was refused: {e}"));
    assert!(
        out.contains("nic.mtu       skip: \"cx7=1\" left out: invalid interface name"),
        "{out}"
    );
    assert!(
        out.contains("/sys/class/net/cx7_0/mtu: 1500 -> 9000"),
        "{out}"
    );
    assert!(!out.contains("/sys/class/net/cx7=1/mtu"), "{out}");
    let (code, out) = apply(r, &p, &only(&["nic.mtu"]));
    assert_eq!(code, 0, "{out}");
    assert_eq!(read(r, "sys/class/net/cx7=1/mtu"), "1500\n");
}

/// Row 7: CPU isolation leaves a housekeeping CPU on every node. Isolating all of x86-2s's
/// node1 (32-63,96-127), or every CPU of the one-node IGX, is refused for the isolation
/// arguments (the plan says why and writes none); the hugepage and governor arguments stay.
/// (A core rule already keeps CPU 0; a list did not.)
#[test]
fn isolation_leaves_housekeeping_on_every_node() {
    use common::drive::*;
    let d = tempfile::tempdir().expect("tmp");
    let root = prepared("x86-2s", common::testroot::add_igx_pci);
    let p = profile_file(
        d.path(),
        "generic-dgpu",
        "cpu:\n  isolated: \"32-63,96-127\"\n  irqaffinity: \"0-31,64-95\"\n",
    );
    let out = plan(root.path(), &p, &only(&["kernel.cmdline"]));
    assert!(
        out.contains("isolating 32-63,96-127 takes every online CPU of node1 (32-63,96-127): leave at least one housekeeping CPU on every node"),
        "{out}"
    );
    let line = grub_line(&out);
    assert!(
        !line.contains("isolcpus") && !line.contains("nohz_full"),
        "{line}"
    );
    // With the hugepages setting asked for too, its reservation is still written (issue 42:
    // `--only kernel.cmdline` writes the isolation words alone).
    let out = plan(root.path(), &p, &only(&["kernel.cmdline", "hugepages"]));
    assert!(grub_line(&out).contains("hugepages="), "{out}");
    // One CPU of the node left: planned.
    let p = profile_file(
        d.path(),
        "generic-dgpu",
        "cpu:\n  isolated: \"33-63,96-127\"\n  irqaffinity: \"0-32,64-95\"\n",
    );
    let out = plan(root.path(), &p, &only(&["kernel.cmdline"]));
    assert!(grub_line(&out).contains("isolcpus=33-63,96-127"), "{out}");

    let root = prepared("igx-untuned", common::testroot::add_igx_pci);
    let p = profile_file(
        d.path(),
        "igx-orin",
        "cpu:\n  isolated: \"0-11\"\n  irqaffinity: null\n",
    );
    let out = try_plan(root.path(), &p, &only(&["kernel.cmdline"]));
    match out {
        Ok(out) => assert!(
            !grub_line(&out).contains("isolcpus")
                && out.contains("takes every online CPU of node0 (0-11)"),
            "{out}"
        ),
        Err(e) => panic!("refused: {e}"),
    }
}

/// A Spark root with a NetworkManager profile someone else made in system-connections.
fn spark_with_nm(file: &str, text: &str) -> tempfile::TempDir {
    let root = common::drive::prepared("spark", common::testroot::add_spark_pci);
    let dir = root.path().join("etc/NetworkManager/system-connections");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join(file), text).expect("write");
    root
}

/// Row 8: a foreign profile's id reaches the suggested nmcli command shell-quoted (an id is
/// any text: `daq tx; reboot` ran a second command when pasted).
#[test]
fn foreign_nm_id_is_shell_quoted() {
    use common::drive::*;
    let root = spark_with_nm(
        "x.nmconnection",
        "[connection]\nid=daq tx; reboot\ntype=ethernet\ninterface-name=enp1s0f0np0\n",
    );
    let out = plan(root.path(), "dgx-spark", &only(&["nic.mtu"]));
    assert!(
        out.contains("`nmcli connection modify 'daq tx; reboot' ethernet.mtu 9000"),
        "{out}"
    );
    assert!(!out.contains("modify daq tx; reboot"), "{out}");
}

/// Row 8: a foreign profile that binds the port by `mac-address` (no interface-name) owns
/// the port: no second autoconnect profile for it.
#[test]
fn foreign_nm_profile_by_mac_owns_the_port() {
    use common::drive::*;
    // The fixture's ports share one MAC; this one gets its own (NetworkManager writes MACs in
    // upper case).
    let root = spark_with_nm(
        "lab-rx.nmconnection",
        "[connection]\nid=lab-rx\ntype=ethernet\n\n[ethernet]\nmac-address=48:B0:2D:AA:BB:01\n",
    );
    let r = root.path();
    std::fs::write(
        r.join("sys/class/net/enp1s0f0np0/address"),
        "48:b0:2d:aa:bb:01\n",
    )
    .expect("mac");
    let out = plan(r, "dgx-spark", &only(&["nic.mtu"]));
    assert!(
        out.contains("enp1s0f0np0 is managed by NetworkManager profile `lab-rx`"),
        "{out}"
    );
    assert!(!out.contains("daqiri-enp1s0f0np0.nmconnection"), "{out}");
    assert!(out.contains("daqiri-enp1s0f1np1.nmconnection"), "{out}");
    let (code, out) = apply(r, "dgx-spark", &only(&["nic.mtu"]));
    assert_eq!(code, 0, "{out}");
    assert!(!r
        .join("etc/NetworkManager/system-connections/daqiri-enp1s0f0np0.nmconnection")
        .exists());
}

/// Row 8: a foreign profile that already has MTU 9000 needs no MTU change, but the rings,
/// coalescing and pause daqtune sets live are not kept there: the plan says where and how.
#[test]
fn foreign_nm_profile_with_mtu_gets_a_persistence_note() {
    use common::drive::*;
    let root = spark_with_nm(
        "daqiri-tx.nmconnection",
        "[connection]\nid=daqiri-tx\ntype=ethernet\ninterface-name=enp1s0f0np0\n\n[ethernet]\nmtu=9000\n",
    );
    let out = plan(
        root.path(),
        "dgx-spark",
        &daqtune_engine::apply::Selection::default(),
    );
    let note = out
        .lines()
        .find(|l| l.contains("NetworkManager profile `daqiri-tx`"))
        .unwrap_or_else(|| panic!("no note:\n{out}"));
    assert!(
        note.contains("are not kept across a reboot there") && note.contains("ring-rx"),
        "{note}"
    );
    assert!(
        note.contains("`nmcli connection modify daqiri-tx ethtool.ring-rx "),
        "{note}"
    );
    assert!(!note.contains("ethernet.mtu"), "{note}");
}

/// Row 6 in a DAQIRI configuration: zero buffers, zero-byte buffers, a CPU past NR_CPUS and
/// an IPv4 length below its header are problems on their lines, and nothing is derived from
/// them.
#[test]
fn config_numbers_are_bounded() {
    use daqtune_engine::appconfig::AppConfig;
    let text = "daqiri:\n  cfg:\n    version: 1\n    stream_type: raw\n    master_core: 3\n    memory_regions:\n    - name: r\n      kind: huge\n      affinity: 0\n      num_bufs: 0\n      buf_size: 0\n    interfaces:\n    - name: capture\n      address: 0005:03:00.0\n      rx:\n        queues:\n        - name: q\n          id: 0\n          cpu_core: 100000\n          batch_size: 8192\n          memory_regions: [r]\n        flows:\n        - name: f\n          id: 1\n          action: {type: queue, id: 0}\n          match: {udp_src: 4096, udp_dst: 4096, ipv4_len: 5}\n";
    let app = AppConfig::parse("app.yaml", text).expect("parse");
    let found = |line: usize, needle: &str| {
        assert!(
            app.problems
                .iter()
                .any(|p| p.line == line && p.message.contains(needle)),
            "line {line} {needle:?}: {:#?}",
            app.problems
        )
    };
    found(10, "`0` is out of range (expected 1 .. 4294967295");
    found(11, "`0` is out of range (expected 1 .. 1073741824");
    found(
        19,
        "`100000` is out of range (expected 0 .. 8191 (a CPU number))",
    );
    found(26, "`5` is out of range (expected 20 .. 65535");
    assert!(app.regions[0].num_bufs().is_none() && app.regions[0].buf_size().is_none());
}
