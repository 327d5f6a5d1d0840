//! Issue 3's acceptance table: PCIe and NIC checks on the fixture roots built by
//! tests/fixtures/gen_pci.py, through the engine's API (the report `check --format json`
//! prints). The `topo` command and a run on the live host are in tune/tests/pci_checks.rs.

use crate::common;
use common::*;
use daqtune_testkit::checks_with_id as of;
use daqtune_testkit::str_field as s;
use serde_json::Value;

fn subject_has<'a>(r: &'a Value, id: &str, needle: &str) -> &'a Value {
    of(r, id)
        .into_iter()
        .find(|c| c["subject"].as_str().unwrap_or("").contains(needle))
        .unwrap_or_else(|| panic!("{id}: no verdict about {needle}: {r}"))
}

#[test]
fn igx_tuned() {
    let r = check_json("igx-tuned", "igx-orin");
    assert_schema(&r);
    let topo = of(&r, "pcie.topology");
    assert_eq!(topo.len(), 1);
    assert_eq!(s(topo[0], "status"), "pass");
    assert!(s(topo[0], "message").starts_with("PXB"), "{}", topo[0]);
    for port in ["0005:03:00.0", "0005:03:00.1"] {
        let v = subject_has(&r, "pcie.mrrs", port);
        assert_eq!(
            (s(v, "status"), s(v, "observed")),
            ("pass".into(), "4096".into())
        );
        let m = subject_has(&r, "pcie.mps", port);
        assert_eq!(s(m, "status"), "pass");
        assert!(s(m, "message").contains("could carry 256"), "{m}");
    }
    assert_eq!(statuses(&r, "pcie.acs"), ["pass"]);
    assert!(statuses(&r, "nic.link-layer").iter().all(|x| x == "pass"));
    let mtu = statuses(&r, "nic.mtu");
    assert_eq!(mtu, ["pass", "pass"]);
    assert_eq!(s(subject_has(&r, "nic.mtu", "cx7_0"), "observed"), "9000");
    // The idle GPU link (2.5 GT/s) is not a warning.
    assert_eq!(
        s(subject_has(&r, "pcie.link", "RTX A6000"), "status"),
        "pass"
    );
    assert!(statuses(&r, "iommu").iter().all(|x| x == "pass"));
    assert!(statuses(&r, "irq.affinity").iter().all(|x| x == "pass"));
}

#[test]
fn igx_untuned() {
    let r = check_json("igx-untuned", "igx-orin");
    for port in ["0005:03:00.0", "0005:03:00.1"] {
        let v = subject_has(&r, "pcie.mrrs", port);
        assert_eq!(
            (s(v, "status"), s(v, "observed")),
            ("fail".into(), "512".into())
        );
        assert!(
            s(v, "fix").contains(&format!("setpci -s {port} CAP_EXP+8.w=5000:7000")),
            "{v}"
        );
    }
    assert_eq!(statuses(&r, "nic.mtu"), ["fail", "fail"]);
    let acs = of(&r, "pcie.acs");
    assert!(acs.iter().any(|v| v["status"] == "warn"));
    let dp = subject_has(&r, "pcie.acs", "0005:02:00.0");
    assert_eq!(s(dp, "status"), "warn");
    assert!(s(dp, "message").contains("ReqRedir, CmpltRedir"), "{dp}");
    // The IOMMU translates here, so the fix refuses to turn redirect off.
    assert!(s(dp, "fix").contains("leave ACS on"), "{dp}");
    assert!(statuses(&r, "irq.affinity").iter().all(|x| x == "warn"));
}

#[test]
fn server_pix() {
    let r = check_json("server-pix", "generic-dgpu");
    let topo = of(&r, "pcie.topology");
    assert_eq!(s(topo[0], "status"), "pass");
    assert!(s(topo[0], "message").starts_with("PIX"), "{}", topo[0]);
    for id in [
        "pcie.link",
        "pcie.mps",
        "pcie.mrrs",
        "pcie.acs",
        "pcie.aer",
        "iommu",
        "nic.driver",
        "nic.link-layer",
        "nic.link",
        "nic.mtu",
        "irq.affinity",
    ] {
        assert!(
            statuses(&r, id).iter().all(|x| x == "pass"),
            "{id}: {:?}",
            of(&r, id)
        );
    }
}

#[test]
fn spark_two_domains() {
    let r = check_json("spark", "dgx-spark");
    for port in ["0000:01:00.0", "0000:01:00.1"] {
        assert_eq!(s(subject_has(&r, "pcie.mrrs", port), "status"), "pass");
    }
    for port in ["0002:01:00.0", "0002:01:00.1"] {
        assert_eq!(s(subject_has(&r, "pcie.mrrs", port), "status"), "fail");
    }
    assert_eq!(statuses(&r, "pcie.topology"), ["n/a"]);
    assert!(statuses(&r, "nic.mtu").iter().all(|x| x == "pass"));
}

#[test]
fn spark_without_cable_names_the_preflight() {
    // The same host after the hotplug service removed the CX-7 PFs.
    let tmp = tempfile::tempdir().expect("tmp");
    let ok = std::process::Command::new("cp")
        .arg("-a")
        .arg(fixture("spark"))
        .arg(tmp.path())
        .status()
        .expect("cp");
    assert!(ok.success());
    let root = tmp.path().join("spark");
    for bdf in [
        "0000:01:00.0",
        "0000:01:00.1",
        "0002:01:00.0",
        "0002:01:00.1",
    ] {
        std::fs::remove_file(root.join("sys/bus/pci/devices").join(bdf)).expect("rm");
    }
    let (r, _) = evaluate(&root, "dgx-spark", &["nic.link", "pcie.mrrs"]);
    let link = of(&r, "nic.link");
    assert_eq!(s(link[0], "status"), "fail");
    assert!(s(link[0], "message").contains("QSFP cable"), "{}", link[0]);
    assert_eq!(statuses(&r, "pcie.mrrs"), ["skip"]);
}

#[test]
fn nic_cap_at_0x70() {
    for profile in ["generic-dgpu", "igx-orin", "dgx-spark"] {
        let r = check_json("nic-cap70", profile);
        let v = of(&r, "pcie.mrrs");
        assert_eq!(v.len(), 1);
        assert_eq!(
            (s(v[0], "status"), s(v[0], "observed")),
            ("pass".into(), "4096".into()),
            "{profile}"
        );
        assert!(s(v[0], "message").contains("0x78"), "{}", v[0]);
    }
}

#[test]
fn x86_two_sockets() {
    let r = check_json("x86-2s", "generic-dgpu");
    let topo = of(&r, "pcie.topology");
    assert!(
        matches!(s(topo[0], "status").as_str(), "warn" | "fail"),
        "{}",
        topo[0]
    );
    assert!(s(topo[0], "message").contains("SYS"), "{}", topo[0]);
    let link = subject_has(&r, "pcie.link", "0000:99:00.0");
    assert_eq!(s(link, "status"), "warn");
    assert!(s(link, "message").contains("x8"), "{link}");
    assert!(s(link, "expected").contains("x16"), "{link}");
    // The second port's netdev lives in another namespace: named, not missed.
    let moved = subject_has(&r, "nic.link", "ens1f1np1");
    assert_eq!(s(moved, "status"), "warn");
    assert!(s(moved, "message").contains("another network namespace"));
    assert_eq!(
        s(subject_has(&r, "nic.mtu", "0000:99:00.1"), "status"),
        "skip"
    );
    // GPU and NIC on different sockets: no shared hierarchy, ACS does not apply.
    assert_eq!(statuses(&r, "pcie.acs"), ["n/a"]);
    assert!(statuses(&r, "iommu").iter().all(|x| x == "warn"));
    let irq = subject_has(&r, "irq.affinity", "0000:99:00.0");
    assert_eq!(s(irq, "status"), "warn");
    assert!(s(irq, "observed").contains("200->2-5"), "{irq}");
}

/// Naming interfaces in the profile selects them (VF included) instead of every ConnectX PF.
#[test]
fn profile_interfaces_select_the_data_path() {
    let tmp = tempfile::tempdir().expect("tmp");
    let p = tmp.path().join("p.yaml");
    std::fs::write(
        &p,
        "name: x\nextends: generic-dgpu\nnic:\n  interfaces: [ens1f0v0, \"0000:99:00.0\"]\n",
    )
    .expect("write");
    let (r, _) = evaluate(
        &fixture("x86-2s"),
        p.to_str().expect("utf8"),
        &["pcie.mrrs", "nic.mtu"],
    );
    let mrrs = of(&r, "pcie.mrrs");
    assert_eq!(
        mrrs.iter().map(|v| s(v, "status")).collect::<Vec<_>>(),
        ["pass", "n/a"],
        "{mrrs:?}"
    );
    let mtu = of(&r, "nic.mtu");
    assert_eq!(mtu.len(), 2);
    assert_eq!(s(subject_has(&r, "nic.mtu", "ens1f0v0"), "status"), "fail");
}

/// What a non-root reader sees: 64 bytes of config space. The checks that need the PCIe
/// capability skip and say root is needed; the link comes from sysfs attributes and is judged.
#[test]
fn short_config_skips_saying_root() {
    let tmp = tempfile::tempdir().expect("tmp");
    let ok = std::process::Command::new("cp")
        .arg("-a")
        .arg(fixture("igx-tuned"))
        .arg(tmp.path())
        .status()
        .expect("cp");
    assert!(ok.success());
    let root = tmp.path().join("igx-tuned");
    for dir in walk(&root.join("sys/devices")) {
        let cfg = dir.join("config");
        if let Ok(b) = std::fs::read(&cfg) {
            std::fs::write(&cfg, &b[..64.min(b.len())]).expect("truncate");
        }
    }
    let (r, _) = evaluate(
        &root,
        "igx-orin",
        &[
            "pcie.mrrs",
            "pcie.mps",
            "pcie.acs",
            "pcie.link",
            "pcie.topology",
            "pcie.aer",
        ],
    );
    // AER counters are sysfs (readable); ASPM lives in the hidden capability: no pass that
    // claims "without ASPM".
    for v in of(&r, "pcie.aer") {
        assert_ne!(s(v, "status"), "pass", "{v}");
    }
    assert!(
        of(&r, "pcie.aer")
            .iter()
            .any(|v| s(v, "message").contains("ASPM state unknown")),
        "{r}"
    );
    for id in ["pcie.mrrs", "pcie.mps", "pcie.acs"] {
        for v in of(&r, id) {
            assert_eq!(s(v, "status"), "skip", "{v}");
            assert!(s(v, "message").contains("root"), "{v}");
        }
    }
    assert_eq!(statuses(&r, "pcie.topology"), ["pass"]);
    assert!(statuses(&r, "pcie.link").iter().all(|x| x == "pass"));
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = vec![dir.to_path_buf()];
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                out.extend(walk(&p));
            }
        }
    }
    out
}

/// A link whose current speed and width are unreadable (down, or never trained) is not a pass
/// labelled "unknown".
#[test]
fn unreadable_current_link_is_a_skip() {
    let dir = tempfile::tempdir().expect("tmp");
    common::copy_tree(&fixture("igx-tuned"), dir.path());
    let dev = std::fs::canonicalize(dir.path().join("sys/bus/pci/devices/0005:03:00.0"))
        .expect("NIC dir");
    std::fs::write(dev.join("current_link_speed"), "Unknown\n").expect("speed");
    std::fs::write(dev.join("current_link_width"), "0\n").expect("width");
    // Without root the kernel shows 64 bytes of config space: no LnkSta to fall back on.
    let cfg = std::fs::read(dev.join("config")).expect("config");
    std::fs::write(dev.join("config"), &cfg[..64]).expect("short config");
    let r = common::check_json_root(dir.path(), "igx-orin");
    let v = subject_has(&r, "pcie.link", "0005:03:00.0");
    assert_eq!(s(v, "status"), "skip", "{v}");
    assert!(s(v, "message").contains("unreadable"), "{v}");
}

/// Issue 45 item 3: a port faster than its PCIe link. DGX Spark's ConnectX-7: each 200 Gb/s
/// port's PCIe functions sit behind Gen5 x4 links (the fixture's sysfs), and
/// NVIDIA/daqiri PR #108 (873b379) maps 0000:01:00.0 and 0002:01:00.0 to physical port p0,
/// 0000:01:00.1 and 0002:01:00.1 to p1. NVIDIA/dgx-spark-playbooks #102 / PR #103: one
/// endpoint carries ~100 Gb/s, both together the port's 200.
#[test]
fn spark_ports_are_faster_than_one_gen5_x4_endpoint() {
    const PORTS: &[(&str, &str)] = &[
        ("enp1s0f0np0", "p0"),
        ("enp1s0f1np1", "p1"),
        ("enP2p1s0f0np0", "p0"),
        ("enP2p1s0f1np1", "p1"),
    ];
    let spark = |phys: Option<bool>, narrow: Option<&str>| {
        let d = tempfile::tempdir().expect("tmp");
        copy_tree(&fixture("spark"), d.path());
        if phys == Some(false) {
            for (n, _) in PORTS {
                let f = d
                    .path()
                    .join("sys/class/net")
                    .join(n)
                    .join("phys_port_name");
                std::fs::remove_file(f).expect("ppn");
            }
        }
        if phys == Some(true) {
            for (n, p) in PORTS {
                let dir = d.path().join("sys/class/net").join(n);
                std::fs::write(dir.join("phys_port_name"), format!("{p}\n")).expect("ppn");
                std::fs::write(dir.join("phys_switch_id"), "30429f0300ea4cfc\n").expect("psid");
            }
        }
        if let Some(bdf) = narrow {
            let f = d
                .path()
                .join("sys/bus/pci/devices")
                .join(bdf)
                .join("current_link_width");
            std::fs::write(f, "2\n").expect("width");
        }
        let (r, _) = evaluate(d.path(), "dgx-spark", &["pcie.capacity"]);
        r
    };
    // Without phys_port_name nothing says which endpoints make one port: each warns with the
    // figures.
    let r = spark(Some(false), None);
    let v = subject_has(&r, "pcie.capacity", "0000:01:00.0");
    assert_eq!(s(v, "status"), "warn", "{v}");
    assert!(s(v, "message").contains("200 Gb/s port"), "{v}");
    assert!(s(v, "message").contains("Gen5 x4"), "{v}");
    assert!(s(v, "message").contains("114.4 Gb/s"), "{v}");
    // With it, each endpoint names its sibling and the two carry the port: by the switch id
    // (switchdev mode), and as the fixture is (legacy mode: phys_port_name p0/p1, no
    // phys_switch_id, one RDMA sys_image_guid for the adapter), by the adapter's GUID, the
    // rule ports::port_pair applies to the self-test's port pairs.
    for phys in [Some(true), None] {
        let r = spark(phys, None);
        assert_eq!(of(&r, "pcie.capacity").len(), 4, "{r}");
        let v = subject_has(&r, "pcie.capacity", "0000:01:00.0");
        assert_eq!(s(v, "status"), "pass", "{phys:?} {v}");
        assert!(
            s(v, "message").contains("0002:01:00.0 (enP2p1s0f0np0)"),
            "{v}"
        );
        assert!(s(v, "message").contains("228.8 Gb/s"), "{v}");
        assert!(s(v, "message").contains("physical port p0"), "{v}");
    }
    // One endpoint of p0 trained at x2 (the ASUS GX10 thread in tests/real-hosts): p0 cannot
    // be carried at 200 any more; p1 still can.
    let r = spark(Some(true), Some("0002:01:00.0"));
    let v = subject_has(&r, "pcie.capacity", "0000:01:00.0");
    assert_eq!(s(v, "status"), "warn", "{v}");
    assert!(s(v, "message").contains("171.6 Gb/s"), "{v}");
    let v = subject_has(&r, "pcie.capacity", "0000:01:00.1");
    assert_eq!(s(v, "status"), "pass", "{v}");
}
