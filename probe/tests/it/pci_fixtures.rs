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
    assert_eq!(vf.numa(), Some(1), "a VF takes its PF's node");
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

/// A real capture (tests/fixtures/h200-vm/README.md), not generated.
#[test]
fn real_h200_vm_capture() {
    let (h, t) = tree("h200-vm");
    assert_eq!(t.devices.len(), 7);
    let gpu = t.gpus().next().expect("gpu");
    assert_eq!(gpu.addr, a("0000:00:06.0"));
    assert_eq!(gpu.short_name(), "H200 SXM 141GB");
    assert_eq!(gpu.driver.as_deref(), Some("nvidia"));
    assert_eq!(gpu.cur_link(), (Some(32.0), Some(16)));
    let p = gpu.pcie().expect("pcie cap");
    assert_eq!((p.offset, p.mps, p.mrrs), (0x60, 256, 4096));
    assert_eq!(gpu.numa(), None, "numa_node -1");
    assert!(t.single_node());
    let nics = discover_nics(&h, &t);
    assert_eq!(nics.len(), 1);
    assert!(!nics[0].connectx);
}

/// The sparse read of config space decodes exactly as the whole file does, for every config
/// space of every fixture root (64, 256 and 4096 bytes; bridges with ACS, NICs, GPUs), and
/// reads a small part of a 4 KiB one.
#[test]
fn sparse_config_reads_decode_as_whole_ones() {
    use daqtune_probe::pci::config::{decode, read_sparse};
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures");
    let mut files = Vec::new();
    let mut todo = vec![root];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).expect("ls").flatten() {
            let ft = e.file_type().expect("type");
            if ft.is_dir() {
                todo.push(e.path());
            } else if ft.is_file() && e.file_name() == "config" {
                files.push(e.path());
            }
        }
    }
    assert!(files.len() > 50, "{} config files", files.len());
    let mut extended = 0;
    for f in files {
        let whole = std::fs::read(&f).expect("read");
        let mut reads = 0usize;
        let (sparse, bytes) = read_sparse(whole.len(), &mut |off, len| {
            reads += 1;
            Ok(whole
                .get(off..(off + len).min(whole.len()))
                .unwrap_or_default()
                .to_vec())
        })
        .expect("sparse");
        assert_eq!(
            decode(&sparse).map_err(|e| e.to_string()),
            decode(&whole).map_err(|e| e.to_string()),
            "{}",
            f.display()
        );
        if whole.len() == 4096 {
            extended += 1;
            assert!(bytes <= 256 + 4 * 40, "{}: {bytes} bytes read", f.display());
            assert!(reads < 45, "{}: {reads} reads", f.display());
        }
    }
    assert!(extended > 20, "{extended} extended config spaces");
}

/// A device that shows fewer bytes than its file reports (config space beyond 64 bytes
/// without root; a device that stops answering) comes back as far as it was shown.
#[test]
fn sparse_config_read_of_a_short_device() {
    use daqtune_probe::pci::config::read_sparse;
    let shown = [0x15u8; 64];
    let (b, n) = read_sparse(4096, &mut |off, len| {
        Ok(shown
            .get(off..(off + len).min(shown.len()))
            .unwrap_or_default()
            .to_vec())
    })
    .expect("sparse");
    assert_eq!((b.len(), n), (64, 64));
    // Extended capability pointers that loop back are followed once.
    let mut cfg = vec![0u8; 4096];
    cfg[0] = 0xb3;
    cfg[0x100..0x104].copy_from_slice(&(0x0001u32 | (0x100u32 << 20)).to_le_bytes());
    let (_, n) = read_sparse(4096, &mut |off, len| Ok(cfg[off..off + len].to_vec())).expect("ok");
    assert_eq!(n, 256 + 4);
}
