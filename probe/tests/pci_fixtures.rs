//! The PCI probe on the generated fixture roots (tests/fixtures/gen_pci.py).

use daqtune_probe::pci::config::Visibility;
use daqtune_probe::pci::nic::discover_nics;
use daqtune_probe::pci::topo::{classify, PathClass};
use daqtune_probe::pci::{read_pci, PciAddr, PciTree, ReadOptions};
use daqtune_probe::Host;

fn root(name: &str) -> Host {
    let p = format!("{}/../tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    Host::at(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
}

fn tree(name: &str) -> (Host, PciTree) {
    let h = root(name);
    let t = read_pci(&h, ReadOptions::default()).expect("read_pci");
    assert!(t.problems.is_empty(), "{:?}", t.problems);
    (h, t)
}

fn a(s: &str) -> PciAddr {
    s.parse().expect("addr")
}

#[test]
fn igx_tree_matches_seed_lspci_tv() {
    let (h, t) = tree("igx-tuned");
    assert_eq!(t.devices.len(), 31);
    let nic = t.get(a("0005:03:00.0")).expect("cx7");
    assert_eq!(nic.parent, Some(a("0005:02:00.0")));
    assert_eq!(nic.host_bridge, "pci0005:00");
    assert_eq!(nic.short_name(), "ConnectX-7");
    assert_eq!(nic.driver.as_deref(), Some("mlx5_core"));
    let p = nic.pcie().expect("pcie cap");
    assert_eq!(
        (p.offset, p.mrrs, p.mps, p.mps_supported),
        (0x60, 4096, 128, 512)
    );
    assert_eq!(nic.iommu_type.as_deref(), Some("identity"));
    assert_eq!(nic.aer.correctable, Some(0));
    let gpu = t.gpus().next().expect("gpu");
    assert_eq!(gpu.addr, a("0005:09:00.0"));
    assert_eq!(gpu.link.cur_speed_gts, Some(2.5));
    assert_eq!(gpu.max_link(), (Some(16.0), Some(16)));
    let path = classify(&t, gpu.addr, nic.addr);
    assert_eq!(path.class, PathClass::Pxb, "{}", path.why);
    // The non-judged devices stay basic.
    assert!(!t.get(a("0001:9a:02.0")).expect("usb").detailed);
    let nics = discover_nics(&h, &t);
    let cx: Vec<_> = nics.iter().filter(|n| n.connectx).collect();
    assert_eq!(cx.len(), 2);
    assert_eq!(cx[0].netdev_names(), vec!["cx7_0"]);
    assert_eq!(cx[0].rdma_names(), vec!["mlx5_0"]);
    assert_eq!(
        cx[0].rdma[0].ports[0].link_layer.as_deref(),
        Some("Ethernet")
    );
    assert_eq!(cx[0].netdevs[0].mtu, Some(9000));
    assert!(nics
        .iter()
        .any(|n| !n.connectx && n.netdev_names() == vec!["eth0"]));
}

#[test]
fn igx_untuned_acs_and_mrrs() {
    let (_h, t) = tree("igx-untuned");
    let dp = t.get(a("0005:02:00.0")).expect("dp");
    let acs = dp.config.as_ref().and_then(|c| c.acs).expect("acs");
    assert_eq!(acs.redirects_enabled(), vec!["ReqRedir", "CmpltRedir"]);
    assert_eq!(
        t.get(a("0005:03:00.1"))
            .and_then(|d| d.pcie())
            .map(|p| p.mrrs),
        Some(512)
    );
}

#[test]
fn spark_domains() {
    let (h, t) = tree("spark");
    let nics = discover_nics(&h, &t);
    let cx: Vec<String> = nics
        .iter()
        .filter(|n| n.connectx)
        .map(|n| n.label())
        .collect();
    assert_eq!(
        cx,
        vec![
            "0000:01:00.0 (enp1s0f0np0, mlx5_0)",
            "0000:01:00.1 (enp1s0f1np1, mlx5_1)",
            "0002:01:00.0 (enP2p1s0f0np0, mlx5_2)",
            "0002:01:00.1 (enP2p1s0f1np1, mlx5_3)"
        ]
    );
    assert_eq!(
        t.get(a("0002:01:00.0"))
            .and_then(|d| d.pcie())
            .map(|p| p.mrrs),
        Some(512)
    );
}

#[test]
fn cap_at_0x70() {
    let (_h, t) = tree("nic-cap70");
    let d = t.get(a("0000:01:00.0")).expect("nic");
    let p = d.pcie().expect("pcie");
    assert_eq!((p.offset, p.mrrs), (0x70, 4096));
    let raw = std::fs::read(format!(
        "{}/../tests/fixtures/nic-cap70/sys/bus/pci/devices/0000:01:00.0/config",
        env!("CARGO_MANIFEST_DIR")
    ))
    .expect("config");
    let fixed = u16::from_le_bytes([raw[0x68], raw[0x69]]);
    assert_eq!(fixed, 0xb009, "0x68 holds the vendor capability's header");
    assert_eq!(128u32 << ((fixed >> 12) & 7), 1024);
    assert_eq!(daqtune_probe::pci::config::devctl_offset(&raw), Some(0x78));
}

#[test]
fn x86_two_sockets() {
    let (h, t) = tree("x86-2s");
    let gpu = t.gpus().next().expect("gpu");
    let nic = a("0000:99:00.0");
    assert_eq!(classify(&t, gpu.addr, nic).class, PathClass::Sys);
    let d = t.get(nic).expect("nic");
    assert_eq!(d.cur_link(), (Some(16.0), Some(8)));
    assert_eq!(d.sriov_totalvfs, Some(8));
    let vf = t.get(a("0000:99:00.2")).expect("vf");
    assert!(vf.is_vf);
    assert_eq!(vf.physfn, Some(nic));
    let nics = discover_nics(&h, &t);
    let moved = nics
        .iter()
        .find(|n| n.addr == a("0000:99:00.1"))
        .expect("pf1");
    assert_eq!(moved.foreign_netdevs, vec!["ens1f1np1"]);
    assert!(moved.notes[0].contains("namespace"), "{:?}", moved.notes);
}

#[test]
fn short_config_reports_hidden() {
    // A copy of a fixture device with only 64 bytes of config, as a non-root reader sees it.
    let d = tempfile::tempdir().expect("tmp");
    let src = format!("{}/../tests/fixtures/nic-cap70", env!("CARGO_MANIFEST_DIR"));
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(&src)
        .arg(d.path())
        .status()
        .expect("cp");
    assert!(status.success());
    let cfg = d
        .path()
        .join("nic-cap70/sys/devices/pci0000:00/0000:00:02.0/0000:01:00.0/config");
    let bytes = std::fs::read(&cfg).expect("read");
    std::fs::write(&cfg, &bytes[..64]).expect("write");
    let h = Host::at(d.path().join("nic-cap70")).expect("host");
    let t = read_pci(&h, ReadOptions::default()).expect("read");
    let dev = t.get(a("0000:01:00.0")).expect("nic");
    assert_eq!(dev.config_len, 64);
    let c = dev.config.as_ref().expect("config");
    assert_eq!(c.pcie_visibility, Visibility::Hidden);
    // Link data still comes from the sysfs attributes.
    assert_eq!(dev.max_link(), (Some(16.0), Some(16)));
}
