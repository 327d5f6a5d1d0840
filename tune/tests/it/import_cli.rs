//! `daqtune import` and `--root CAPTURE` from the command line (issue 41): an lspci file, a
//! directory holding several captures, the archive `import -o X.tar.zst` writes; exit codes,
//! the coverage line, "not in this capture"; hostile input refused with file and line, exit 2.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn corpus(dir: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/real-hosts")
        .join(dir)
}

fn daqtune(args: &[&str]) -> Output {
    Command::new(crate::common::bin())
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("run daqtune")
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The ESC8000A's ConnectX-7s print `MaxReadReq 512 bytes` (lspci-vvv.txt), below the 4096
/// seed 000 (Step 3) asks for: `pcie.mrrs` fails, so `check` exits 1.
#[test]
fn check_root_on_an_lspci_file() {
    let f = corpus("lspci-asus-esc8000a-e12-stelline/lspci-vvv.txt");
    let o = daqtune(&["check", "--root", f.to_str().unwrap()]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(
        out.contains("fail   pcie.mrrs              0000:21:00.0           MRRS 512"),
        "{out}"
    );
    assert!(
        out.contains("skip   hugepages              host                   not in this capture (memory and hugepages, /proc/cmdline, /etc configuration missing; it holds PCI devices)"),
        "{out}"
    );
    assert!(out.contains("skip   gpu.bar1               host                   not in this capture (GPU facts (NVML) missing"), "{out}");
    assert!(!out.contains("pass   hugepages"), "{out}");
    assert!(
        err.contains("daqtune: capture: 5 of 40 checks judged from")
            && err.contains("(pcie.topology, pcie.link, pcie.mps, pcie.mrrs, pcie.acs)"),
        "{err}"
    );
}

/// The report's `host.root` is the capture the user named, not the temporary directory it
/// was imported into (gone when the command ends).
#[test]
fn check_json_names_the_capture_as_its_root() {
    let f = corpus("lspci-asus-esc8000a-e12-stelline/lspci-vvv.txt");
    let o = daqtune(&["check", "--root", f.to_str().unwrap(), "--format", "json"]);
    let (out, err) = text(&o);
    let j: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}\n{out}\n{err}"));
    assert_eq!(j["host"]["root"], f.to_str().unwrap(), "{}", j["host"]);
}

/// A directory holding the -vvv blocks and the -tv tree: the tree gives the parents, so the
/// GPU at 01:00.0 and the NIC at 21:00.0 sit on different host bridges of NUMA node 0
/// (nvidia-smi topo -m in the same report says NODE for GPU0-NIC0).
#[test]
fn check_root_on_a_directory_of_captures() {
    let d = corpus("lspci-asus-esc8000a-e12-stelline");
    let o = daqtune(&[
        "check",
        "--root",
        d.to_str().unwrap(),
        "pcie.topology",
        "--verbose",
    ]);
    let (out, err) = text(&o);
    assert!(out.contains("NODE"), "{out}\n{err}");
    assert!(
        err.contains("lspci -t") && err.contains("lspci -vv"),
        "{err}"
    );
}

#[test]
fn import_writes_a_root_and_an_archive() {
    let d = corpus("lspci-puget-wrx90-stelline");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("root");
    let o = daqtune(&["import", d.to_str().unwrap(), "-o", dir.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("daqtune/import.json")).unwrap())
            .unwrap();
    assert_eq!(m["schema"], "daqtune.import/v1");
    // The report's `nvidia-smi topo -m` (nvidia-smi-topo.txt) is read beside the lspci text.
    assert_eq!(m["covers"], serde_json::json!(["pci", "gpu-topology"]));
    let devs = m["devices"].as_array().unwrap();
    assert!(devs
        .iter()
        .any(|d| d["config"] == "reconstructed" && d["parent_from"] == "lspci -t tree"));
    assert!(devs.iter().all(|d| d["lines"][0].as_u64().unwrap() >= 1));
    let ar = tmp.path().join("root.tar.zst");
    let o = daqtune(&["import", d.to_str().unwrap(), "-o", ar.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    let a = daqtune(&["check", "--root", ar.to_str().unwrap(), "--format", "json"]);
    let b = daqtune(&["check", "--root", dir.to_str().unwrap(), "--format", "json"]);
    let strip = |o: &Output| {
        let mut v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        v.as_object_mut().unwrap().remove("run");
        v.as_object_mut().unwrap().remove("duration_ms");
        v["checks"].clone()
    };
    assert_eq!(strip(&a), strip(&b));
    assert_eq!(a.status.code(), b.status.code());
}

#[test]
fn bad_captures_say_file_and_line_and_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let garbage = tmp.path().join("garbage.txt");
    std::fs::write(&garbage, "hello\nworld\n").unwrap();
    let o = daqtune(&["check", "--root", garbage.to_str().unwrap()]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "{}:1: not a capture daqtune reads",
            garbage.display()
        )),
        "{err}"
    );

    // A directory of files none of which is a capture (the corpus's grep fragments of
    // `lspci -vvv | grep ACSCtl`: no function address, nothing to place).
    let d = corpus("field-acs-redirect-nccl-523");
    let o = daqtune(&["check", "--root", d.to_str().unwrap()]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("no capture daqtune reads in it"), "{err}");

    // A hex dump whose lines skip an offset.
    let hex = tmp.path().join("hex.txt");
    std::fs::write(
        &hex,
        "00:00.0 Host bridge [0600]: Intel Corporation 440FX [8086:1237]\n\tFlags: fast devsel\n00: 86 80 37 12 00 00 00 00 02 00 00 06 00 00 00 00\n20: 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00\n",
    )
    .unwrap();
    let o = daqtune(&[
        "import",
        hex.to_str().unwrap(),
        "-o",
        tmp.path().join("o").to_str().unwrap(),
    ]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "{}:4: hex dump line at offset 0x20, expected 0x10",
            hex.display()
        )),
        "{err}"
    );

    // Larger than any capture: refused whole, not read into memory.
    let huge = tmp.path().join("huge.txt");
    let f = std::fs::File::create(&huge).unwrap();
    f.set_len(17 * 1024 * 1024).unwrap();
    let o = daqtune(&["check", "--root", huge.to_str().unwrap()]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("more than 16777216 bytes"), "{err}");

    // Truncated mid-device: what was printed is imported, nothing more.
    let full =
        std::fs::read_to_string(corpus("lspci-asus-esc8000a-e12-stelline/lspci-vvv.txt")).unwrap();
    let cut = tmp.path().join("cut.txt");
    std::fs::write(&cut, &full[..full.len() / 3]).unwrap();
    let o = daqtune(&["check", "--root", cut.to_str().unwrap(), "pcie.link"]);
    assert!(
        matches!(o.status.code(), Some(0) | Some(1)),
        "{:?}",
        text(&o)
    );
}

/// The A100's `nvidia-smi -q -x` (telegraf's test data): BAR1 131072 MiB passes the tutorial's
/// 1 GiB minimum (seed 000 Step 8), persistence mode Disabled fails `gpu.clocks`; the PCIe
/// checks have no PCI functions in this capture.
#[test]
fn check_root_on_an_nvidia_smi_xml_file() {
    let f = corpus("nvsmi-xml-a100-sxm4-80gb-telegraf/nvidia-smi-q.xml");
    let o = daqtune(&["check", "--root", f.to_str().unwrap()]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(
        out.contains("pass   gpu.bar1               GPU-513536b6-7d19-9063-b049-1e69664bb298 0000:01:00.0 131072 MiB BAR1"),
        "{out}"
    );
    assert!(out.contains("persistence mode is off"), "{out}");
    assert!(
        out.contains("skip   pcie.mrrs              host                   not in this capture (PCI devices missing; it holds GPU facts (NVML))"),
        "{out}"
    );
    assert!(
        err.contains("capture: 4 of 40 checks judged from") && err.contains("(nvidia-smi -q -x)"),
        "{err}"
    );
    // Broken XML: the line of the break, exit 2.
    let tmp = tempfile::tempdir().unwrap();
    let cut = tmp.path().join("cut.xml");
    let full = std::fs::read_to_string(&f).unwrap();
    std::fs::write(&cut, &full[..full.len() / 2]).unwrap();
    let o = daqtune(&["check", "--root", cut.to_str().unwrap()]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!("{}:", cut.display())) && err.contains("not well-formed XML"),
        "{err}"
    );
}

/// One directory holding an lspci capture, its tree and an nvidia-smi capture: every kind is
/// imported and the coverage is their union.
#[test]
fn a_directory_of_several_kinds() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("case");
    std::fs::create_dir(&d).unwrap();
    for (src, dst) in [
        ("lspci-asus-esc8000a-e12-stelline/lspci-vvv.txt", "a.txt"),
        ("lspci-asus-esc8000a-e12-stelline/lspci-tv.txt", "b.txt"),
        (
            "nvsmi-xml-a100-sxm4-80gb-telegraf/nvidia-smi-q.xml",
            "c.out",
        ),
        (
            "lspci-asus-esc8000a-e12-stelline/origin.yaml",
            "origin.yaml",
        ),
    ] {
        std::fs::copy(corpus(src), d.join(dst)).unwrap();
    }
    // A pasted /proc/cmdline (one line naming the boot image).
    std::fs::write(
        d.join("cmdline.txt"),
        "BOOT_IMAGE=/boot/vmlinuz-6.8.0-60-generic root=UUID=0c1f ro quiet isolcpus=8-11\n",
    )
    .unwrap();
    let out = tmp.path().join("root");
    let o = daqtune(&["import", d.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("daqtune/import.json")).unwrap())
            .unwrap();
    assert_eq!(m["covers"], serde_json::json!(["pci", "cmdline", "gpu"]));
    assert_eq!(
        std::fs::read_to_string(out.join("proc/cmdline")).unwrap(),
        "BOOT_IMAGE=/boot/vmlinuz-6.8.0-60-generic root=UUID=0c1f ro quiet isolcpus=8-11\n"
    );
    let kinds: Vec<&str> = m["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        vec![
            "lspci -vv",
            "lspci -t",
            "nvidia-smi -q -x",
            "/proc/cmdline",
            "none"
        ]
    );
    let o = daqtune(&["check", "--root", d.to_str().unwrap()]);
    let (_, err) = text(&o);
    assert!(err.contains("capture: 9 of 40 checks judged"), "{err}");
}

/// An nvidia-bug-report.log.gz in the layout nvidia-bug-report.sh writes (one gzip member per
/// section, each opened by a rule of underscores; `*** PATH` + `*** ls:` headers for files,
/// the command line for commands: `lspci -d "10de:*" -v -xxx`, `lspci -t`), holding the
/// ESC8000A's GPU block and tree from the corpus and a kernel command line.
fn bug_report(dir: &Path) -> (PathBuf, String) {
    use std::io::Write;
    let vvv = std::fs::read_to_string(corpus("lspci-asus-esc8000a-e12-stelline/lspci-vvv.txt"))
        .expect("the corpus capture is readable");
    let gpu: String = vvv
        .split("\n\n")
        .next()
        .expect("split yields at least one piece")
        .to_string();
    let tree = std::fs::read_to_string(corpus("lspci-asus-esc8000a-e12-stelline/lspci-tv.txt"))
        .expect("the corpus capture is readable");
    let rule = "____________________________________________\n\n";
    let sections = [
        format!("{rule}Start of NVIDIA bug report log file.  Please include this file, along\nwith a detailed description of your problem, when reporting a graphics\ndriver bug via the NVIDIA Linux forum (see forums.developer.nvidia.com)\nor by sending email to 'linux-bugs@nvidia.com'.\n\nnvidia-bug-report.sh Version: 31831145\n\nDate: Thu Oct 27 08:50:11 PM -03 2022\nuname: Linux host 6.0.1 #1 SMP x86_64 GNU/Linux\ncommand line flags: \n\n"),
        format!("{rule}*** /var/log/nvidia-installer.log does not exist\n\n"),
        format!("{rule}*** /proc/cmdline\n*** ls: -r--r--r-- 1 root root 0 2022-10-27 20:48:33.974169298 -0300 /proc/cmdline\nBOOT_IMAGE=/boot/vmlinuz root=/dev/nvme0n1p2 isolcpus=8-11 hugepages=1024\n\n"),
        format!("{rule}/usr/bin/lspci -d \"10de:*\" -v -xxx\n\n{gpu}\n\n"),
        format!("{rule}/usr/bin/lspci -t\n\n{tree}\n"),
    ];
    let text: String = sections.concat();
    let path = dir.join("nvidia-bug-report.log.gz");
    let mut f = std::fs::File::create(&path).expect("create the report in the test's temp dir");
    for s in &sections {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(s.as_bytes()).expect("gzip into memory");
        f.write_all(&e.finish().expect("gzip into memory"))
            .expect("write the report");
    }
    (path, text)
}

#[test]
fn check_root_on_a_bug_report_gz() {
    let tmp = tempfile::tempdir().unwrap();
    let (gz, report) = bug_report(tmp.path());
    let o = daqtune(&["check", "--root", gz.to_str().unwrap(), "--verbose"]);
    let (out, err) = text(&o);
    assert!(err.contains("capture: 5 of 40 checks judged"), "{err}");
    assert!(out.contains("pass   pcie.link"), "{out}");
    assert!(out.contains("not in this capture (CPUs, /etc configuration, memory and hugepages missing; it holds PCI devices, /proc/cmdline)"), "{out}");
    let root = tmp.path().join("root");
    let o = daqtune(&["import", gz.to_str().unwrap(), "-o", root.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    assert_eq!(
        std::fs::read_to_string(root.join("proc/cmdline")).unwrap(),
        "BOOT_IMAGE=/boot/vmlinuz root=/dev/nvme0n1p2 isolcpus=8-11 hugepages=1024\n"
    );
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("daqtune/import.json")).unwrap())
            .unwrap();
    assert_eq!(m["covers"], serde_json::json!(["pci", "cmdline"]));
    // The GPU's lines are the report's lines (after gunzip), not its section's.
    let want = report
        .lines()
        .position(|l| l.starts_with("01:00.0 VGA"))
        .unwrap()
        + 1;
    let dev = m["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["bdf"] == "0000:01:00.0")
        .unwrap();
    assert_eq!(dev["lines"][0].as_u64(), Some(want as u64), "{dev}");
    let kinds: Vec<String> = m["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["kind"].as_str().unwrap().to_string())
        .collect();
    assert!(
        kinds.contains(
            &"lspci -vv (bug report section `/usr/bin/lspci -d \"10de:*\" -v -xxx`)".to_string()
        ),
        "{kinds:?}"
    );
    assert!(
        kinds.contains(&"nvidia-bug-report.log".to_string()),
        "{kinds:?}"
    );
}

#[test]
fn hostile_gzip_is_refused() {
    use std::io::Write;
    let tmp = tempfile::tempdir().unwrap();
    let (gz, _) = bug_report(tmp.path());
    // Cut in the middle of a member.
    let bytes = std::fs::read(&gz).unwrap();
    let cut = tmp.path().join("cut.log.gz");
    std::fs::write(&cut, &bytes[..bytes.len() - 20]).unwrap();
    let o = daqtune(&["check", "--root", cut.to_str().unwrap()]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "{}:1: gzip data that does not decompress",
            cut.display()
        )),
        "{err}"
    );
    // 17 MiB of zeros in a few KB: refused at the bound, not inflated whole.
    let bomb = tmp.path().join("bomb.gz");
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..17 {
        e.write_all(&zeros).unwrap();
    }
    std::fs::write(&bomb, e.finish().unwrap()).unwrap();
    let o = daqtune(&["check", "--root", bomb.to_str().unwrap()]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("decompresses to more than 16777216 bytes"),
        "{err}"
    );
}

/// A sosreport as sos lays it out (`sosreport-HOST-DATE/` with `sos_commands/pci/lspci_-nnvv`
/// and `lspci_-tv` from its pci plugin, and its copy of `/proc/cmdline`), holding the
/// ESC8000A's lspci captures from the corpus; unpacked, and as the .tar.gz sos writes.
fn sosreport(dir: &Path) -> PathBuf {
    let top = dir.join("sosreport-esc8000-2025-07-22-abcdef");
    let pci = top.join("sos_commands/pci");
    std::fs::create_dir_all(&pci).expect("lay out the sosreport in the test's temp dir");
    std::fs::create_dir_all(top.join("proc"))
        .expect("lay out the sosreport in the test's temp dir");
    std::fs::create_dir_all(top.join("sos_logs"))
        .expect("lay out the sosreport in the test's temp dir");
    std::fs::copy(
        corpus("lspci-asus-esc8000a-e12-stelline/lspci-vvv.txt"),
        pci.join("lspci_-nnvv"),
    )
    .expect("lay out the sosreport in the test's temp dir");
    std::fs::copy(
        corpus("lspci-asus-esc8000a-e12-stelline/lspci-tv.txt"),
        pci.join("lspci_-tv"),
    )
    .expect("lay out the sosreport in the test's temp dir");
    std::fs::write(
        top.join("proc/cmdline"),
        "BOOT_IMAGE=/vmlinuz root=/dev/sda2 iommu=pt\n",
    )
    .expect("lay out the sosreport in the test's temp dir");
    std::fs::write(top.join("sos_logs/sos.log"), "2025-07-22 sos report\n")
        .expect("lay out the sosreport in the test's temp dir");
    top
}

#[test]
fn check_root_on_a_sosreport_dir_and_archive() {
    let tmp = tempfile::tempdir().unwrap();
    let top = sosreport(tmp.path());
    for root in [top.clone(), tmp.path().to_path_buf()] {
        let o = daqtune(&["check", "--root", root.to_str().unwrap()]);
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
        assert!(
            out.contains("fail   pcie.mrrs              0000:21:00.0           MRRS 512"),
            "{out}"
        );
        assert!(err.contains("capture: 5 of 40 checks judged"), "{err}");
    }
    // The .tar.gz sos writes.
    let ar = tmp.path().join("sosreport.tar.gz");
    {
        let f = std::fs::File::create(&ar).unwrap();
        let gz = flate2::write::GzEncoder::new(f, flate2::Compression::default());
        let mut t = tar::Builder::new(gz);
        t.append_dir_all("sosreport-esc8000-2025-07-22-abcdef", &top)
            .unwrap();
        t.into_inner().unwrap().finish().unwrap();
    }
    let out = tmp.path().join("imported");
    let o = daqtune(&["import", ar.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("daqtune/import.json")).unwrap())
            .unwrap();
    assert_eq!(m["covers"], serde_json::json!(["pci", "cmdline"]));
    let files: Vec<&str> = m["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["file"].as_str().unwrap())
        .collect();
    assert!(
        files.iter().any(|f| f.ends_with(
            "sosreport.tar.gz!/sosreport-esc8000-2025-07-22-abcdef/sos_commands/pci/lspci_-nnvv"
        )),
        "{files:?}"
    );
    assert_eq!(
        std::fs::read_to_string(out.join("proc/cmdline")).unwrap(),
        "BOOT_IMAGE=/vmlinuz root=/dev/sda2 iommu=pt\n"
    );
}

/// A tar whose entry climbs out with `..`: refused whole, nothing written outside.
#[test]
fn a_tar_with_dotdot_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let ar = tmp.path().join("evil.tar");
    {
        let f = std::fs::File::create(&ar).unwrap();
        let mut t = tar::Builder::new(f);
        let data = b"00:01.0 PCI bridge [0604]: X [1234:5678]\n\tNUMA node: 0\n";
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_entry_type(tar::EntryType::Regular);
        // Written raw: the tar crate refuses to build `..` paths itself.
        let name = b"sos/sos_commands/../../../escaped";
        h.as_old_mut().name[..name.len()].copy_from_slice(name);
        h.set_cksum();
        t.append(&h, &data[..]).unwrap();
        t.finish().unwrap();
    }
    let o = daqtune(&["check", "--root", ar.to_str().unwrap()]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("climbs with `..`: refused"), "{err}");
    assert!(!tmp.path().join("escaped").exists());
}

/// NVIDIA's own `nvidia-smi topo -mp` of an IGX devkit (DAQIRI tutorial, Step 1): GPU0 to both
/// on-board CX-7 ports is PXB, which the tutorial calls the IGX design ("connect the GPU to the
/// NIC interfaces with a PXB connection"); `pcie.topology` judges the matrix without a PCI tree.
/// An `ibstat` of two ConnectX-3 HCAs in InfiniBand mode: `nic.link-layer` fails each port
/// (seed 000: "For DAQIRI, we want the NIC to use the ETH link layer"), exit 1.
#[test]
fn check_root_on_topo_and_ibstat_captures() {
    let f = corpus("topo-igx-orin-devkit-daqiri-tutorial/nvidia-smi-topo.txt");
    let o = daqtune(&[
        "check",
        "--root",
        f.to_str().unwrap(),
        "--profile",
        "igx-orin",
    ]);
    let (out, err) = text(&o);
    assert!(matches!(o.status.code(), Some(0) | Some(1)), "{out}\n{err}");
    let line = out
        .lines()
        .find(|l| l.contains("pcie.topology"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        line.trim_start().starts_with("pass")
            && line.contains("GPU0")
            && line.contains("PXB to NIC0 mlx5_0"),
        "{line}"
    );
    assert!(err.contains("nvidia-smi topo -m"), "{err}");

    let f = corpus("ibstat-connectx3-fdr-heioy-books/ibstat.txt");
    let o = daqtune(&["check", "--root", f.to_str().unwrap()]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    for port in ["mlx4_0/1", "mlx4_0/2", "mlx4_1/1", "mlx4_1/2"] {
        assert!(
            out.lines().any(|l| l.trim_start().starts_with("fail")
                && l.contains("nic.link-layer")
                && l.contains(port)
                && l.contains("InfiniBand")),
            "{port}: {out}"
        );
    }
    assert!(
        !out.lines()
            .any(|l| l.trim_start().starts_with("pass") && l.contains("nic.link ")),
        "{out}"
    );
}

/// An ibstat whose port line is broken and a topo -m row with a cell nvidia-smi never prints:
/// the file, the line and what was expected, exit 2.
#[test]
fn bad_ibstat_and_topo_say_file_and_line_and_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let ib = tmp.path().join("ibstat.txt");
    std::fs::write(
        &ib,
        "CA 'mlx5_0'\n\tCA type: MT4129\n\tPort one:\n\t\tState: Active\n",
    )
    .unwrap();
    let o = daqtune(&["check", "--root", ib.to_str().unwrap()]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "{}:3: `Port one:`: expected `Port N:`",
            ib.display()
        )),
        "{err}"
    );

    let topo = tmp.path().join("topo.txt");
    std::fs::write(
        &topo,
        "\tGPU0\tNIC0\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tFAST\t0-11\t0\nNIC0\tPXB\t X \n",
    )
    .unwrap();
    let o = daqtune(&[
        "import",
        topo.to_str().unwrap(),
        "-o",
        tmp.path().join("out").to_str().unwrap(),
    ]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!("{}:2: `FAST`: expected X, PIX", topo.display())),
        "{err}"
    );
}
