//! Every `lspci -vv` capture of the real-host corpus (`tests/real-hosts/*/`), imported, reads
//! back as what lspci printed: MPS, MRRS, link speed and width (current and capable), ACS
//! control, NUMA node and driver, for every function of every capture (issue 41).
//!
//! The expected side is read from the capture's text by the plain regexes below, not by
//! daqtune's importer; the actual side is what daqtune's PCI facts (`read_pci`) read from the
//! imported root.

use daqtune_probe::pci::{read_pci, PciAddr, ReadOptions};
use daqtune_probe::Host;
use daqtune_testkit::corpus;
use regex::Regex;
use std::path::PathBuf;

#[derive(Debug, Default)]
struct Expected {
    bdf: String,
    mps_mrrs: Option<(u32, u32)>,
    cur: Option<(f32, u32)>,
    max: Option<(f32, u32)>,
    acs_ctl: Option<String>,
    numa: Option<i32>,
    driver: Option<String>,
    /// Vendor and device from a hex dump's first line (`00: 86 80 05 34 ...`).
    ids: Option<(u16, u16)>,
    /// Whether lspci decoded the capabilities (`Capabilities: [..]` lines), not only dumped hex.
    decoded: bool,
}

/// The function blocks of an lspci capture, by a header regex.
fn expected(text: &str) -> Vec<Expected> {
    let head = Regex::new(r"(?m)^((?:[0-9a-f]{4,8}:)?[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]) ")
        .expect("the pattern is a valid regex");
    let devctl = Regex::new(r"MaxPayload (\d+) bytes, MaxReadReq (\d+) bytes")
        .expect("the pattern is a valid regex");
    let lnksta = Regex::new(r"LnkSta:\s+Speed ([0-9.]+)GT/s[^,]*, Width x(\d+)")
        .expect("the pattern is a valid regex");
    let lnkcap = Regex::new(r"LnkCap:\s+Port #\d+, Speed ([0-9.]+)GT/s, Width x(\d+)")
        .expect("the pattern is a valid regex");
    let acs = Regex::new(r"ACSCtl:\s+(.*)").expect("the pattern is a valid regex");
    let numa = Regex::new(r"NUMA node: (\d+)").expect("the pattern is a valid regex");
    let drv = Regex::new(r"Kernel driver in use: (\S+)").expect("the pattern is a valid regex");
    let hex0 = Regex::new(r"(?m)^00: ([0-9a-f]{2}) ([0-9a-f]{2}) ([0-9a-f]{2}) ([0-9a-f]{2})")
        .expect("the pattern is a valid regex");
    let starts: Vec<(usize, String)> = head
        .captures_iter(text)
        .map(|c| {
            (
                c.get(0).expect("group 0 is the whole match").start(),
                c[1].to_string(),
            )
        })
        .collect();
    let mut out = Vec::new();
    for (i, (at, bdf)) in starts.iter().enumerate() {
        let end = starts.get(i + 1).map_or(text.len(), |s| s.0);
        let block = &text[*at..end];
        let bdf = if bdf.matches(':').count() == 1 {
            format!("0000:{bdf}")
        } else {
            bdf.clone()
        };
        let f = |r: &Regex| r.captures(block);
        out.push(Expected {
            bdf,
            mps_mrrs: f(&devctl).map(|c| {
                (
                    c[1].parse().expect("the regex matched a number"),
                    c[2].parse().expect("the regex matched a number"),
                )
            }),
            cur: f(&lnksta).map(|c| {
                (
                    c[1].parse().expect("the regex matched a number"),
                    c[2].parse().expect("the regex matched a number"),
                )
            }),
            max: f(&lnkcap).map(|c| {
                (
                    c[1].parse().expect("the regex matched a number"),
                    c[2].parse().expect("the regex matched a number"),
                )
            }),
            acs_ctl: f(&acs).map(|c| c[1].trim().to_string()),
            numa: f(&numa).map(|c| c[1].parse().expect("the regex matched digits")),
            driver: f(&drv).map(|c| c[1].to_string()),
            decoded: block.contains("Capabilities: ["),
            ids: f(&hex0).map(|c| {
                let b = |i: usize| {
                    u16::from_str_radix(&c[i], 16).expect("the regex matched two hex digits")
                };
                (b(2) << 8 | b(1), b(4) << 8 | b(3))
            }),
        });
    }
    out
}

/// `SrcValid+ TransBlk- ReqRedir- ...` as the control register's bits.
fn acs_bits(s: &str) -> u16 {
    let names = [
        "SrcValid",
        "TransBlk",
        "ReqRedir",
        "CmpltRedir",
        "UpstreamFwd",
        "EgressCtrl",
        "DirectTrans",
    ];
    let mut v = 0;
    for (i, n) in names.iter().enumerate() {
        if s.contains(&format!("{n}+")) {
            v |= 1 << i;
        }
    }
    v
}

fn is_lspci(text: &str) -> bool {
    let head = Regex::new(r"^((?:[0-9a-f]{4,8}:)?[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]) ")
        .expect("the pattern is a valid regex");
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let hex = Regex::new(r"^[0-9a-f]{2,3}: [0-9a-f]{2} ").expect("the pattern is a valid regex");
    matches!((lines.next(), lines.next()), (Some(a), Some(b)) if head.is_match(a) && (b.starts_with(char::is_whitespace) || hex.is_match(b)))
}

#[test]
fn every_lspci_capture_reads_back_as_lspci_printed_it() {
    let root = corpus();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}: the real-host corpus is missing", root.display()))
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    let mut captures = 0;
    let mut names = Vec::new();
    let mut functions = 0;
    let mut wrong = Vec::new();
    for dir in &dirs {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.is_file())
            .collect();
        files.sort();
        for f in files {
            let Ok(text) = std::fs::read_to_string(&f) else {
                continue;
            };
            if !is_lspci(&text) {
                continue;
            }
            captures += 1;
            names.push(f.display().to_string());
            let out = tempfile::tempdir().unwrap();
            // The directory: its -t tree (if any) gives the parents.
            daqtune_engine::import::import(std::slice::from_ref(dir), out.path())
                .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
            let host = Host::at(out.path()).unwrap();
            let tree = read_pci(&host, ReadOptions { detail_all: true }).unwrap();
            assert!(
                tree.problems.is_empty(),
                "{}: {:?}",
                f.display(),
                tree.problems
            );
            let exp = expected(&text);
            assert!(!exp.is_empty(), "{}: no function", f.display());
            for e in exp {
                functions += 1;
                let a: PciAddr = e.bdf.parse().unwrap();
                let Some(d) = tree.get(a) else {
                    wrong.push(format!(
                        "{} {}: not in the imported root",
                        f.display(),
                        e.bdf
                    ));
                    continue;
                };
                let mut diff = |what: &str, want: String, got: String| {
                    if want != got {
                        wrong.push(format!(
                            "{} {}: {what}: lspci printed {want}, daqtune reads {got}",
                            f.display(),
                            e.bdf
                        ));
                    }
                };
                let pcie = d.pcie();
                if let Some((mps, mrrs)) = e.mps_mrrs {
                    diff(
                        "MPS/MRRS",
                        format!("{mps}/{mrrs}"),
                        pcie.map(|p| format!("{}/{}", p.mps, p.mrrs))
                            .unwrap_or("none".into()),
                    );
                }
                if let Some((s, w)) = e.cur {
                    let (gs, gw) = d.cur_link();
                    diff(
                        "LnkSta",
                        format!("{s} x{w}"),
                        format!("{} x{}", gs.unwrap_or(0.0), gw.unwrap_or(0)),
                    );
                }
                if let Some((s, w)) = e.max {
                    let (gs, gw) = d.max_link();
                    diff(
                        "LnkCap",
                        format!("{s} x{w}"),
                        format!("{} x{}", gs.unwrap_or(0.0), gw.unwrap_or(0)),
                    );
                }
                // ACS as lspci decoded it; a bare hex dump decodes nothing, so says nothing.
                if e.decoded {
                    let got_acs = d.config.as_ref().and_then(|c| c.acs).map(|a| a.ctrl);
                    diff(
                        "ACSCtl",
                        format!("{:?}", e.acs_ctl.as_deref().map(acs_bits)),
                        format!("{got_acs:?}"),
                    );
                }
                diff(
                    "NUMA node",
                    format!("{:?}", e.numa),
                    format!("{:?}", d.numa_node),
                );
                diff(
                    "driver",
                    format!("{:?}", e.driver),
                    format!("{:?}", d.driver),
                );
                if let Some((v, dv)) = e.ids {
                    diff(
                        "ids",
                        format!("{v:04x}:{dv:04x}"),
                        format!("{:04x}:{:04x}", d.vendor, d.device),
                    );
                }
            }
        }
    }
    assert!(
        captures > 0,
        "no lspci -vv capture under {} ({} directories): the sweep judged nothing",
        root.display(),
        dirs.len()
    );
    assert!(
        wrong.is_empty(),
        "{} of {functions} functions differ:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    eprintln!("{captures} lspci captures, {functions} functions agree");
    for n in &names {
        eprintln!("  {n}");
    }
}

/// Every `nvidia-smi -q -x` capture of the corpus, imported, gives the GPU facts the XML
/// states: UUID, bus id, persistence mode, P-state, BAR1 total, PCIe max/current generation
/// and width. The expected side is read by regexes on each `<gpu>` block (its MIG devices'
/// blocks cut out first: they repeat BAR1).
#[test]
fn every_nvidia_smi_xml_capture_reads_back_as_printed() {
    let root = corpus();
    let gpu_block = Regex::new(r#"(?s)<gpu id="([^"]+)">(.*?)</gpu>"#).unwrap();
    let mig = Regex::new(r"(?s)<mig_devices>.*?</mig_devices>").unwrap();
    let one = |re: &str, s: &str| {
        Regex::new(re)
            .unwrap()
            .captures(s)
            .map(|c| c[1].to_string())
    };
    let mut captures = 0;
    let mut gpus = 0;
    let mut wrong = Vec::new();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    for dir in dirs {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .collect();
        files.sort();
        for f in files {
            let Ok(text) = std::fs::read_to_string(&f) else {
                continue;
            };
            if !text.contains("<nvidia_smi_log") {
                continue;
            }
            captures += 1;
            let out = tempfile::tempdir().unwrap();
            daqtune_engine::import::import(std::slice::from_ref(&f), out.path())
                .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            let snap = daqtune_probe::gpu::GpuSnapshot::from_json(
                &std::fs::read_to_string(out.path().join("daqtune/gpu.json")).unwrap(),
            )
            .unwrap();
            for (i, c) in gpu_block.captures_iter(&text).enumerate() {
                gpus += 1;
                let block = mig.replace_all(&c[2], "").into_owned();
                let uuid = one(r"<uuid>([^<]+)</uuid>", &block).unwrap();
                // In nvidia-smi's order (redacted captures repeat one UUID).
                let Some(g) = snap.gpus.get(i).filter(|g| g.uuid == uuid) else {
                    wrong.push(format!("{}: GPU {i} {uuid} not imported", f.display()));
                    continue;
                };
                let mut diff = |what: &str, want: Option<String>, got: Option<String>| {
                    if want != got {
                        wrong.push(format!(
                            "{} {uuid}: {what}: nvidia-smi printed {want:?}, daqtune reads {got:?}",
                            f.display()
                        ));
                    }
                };
                let bus = c[1].to_lowercase();
                diff("bus id", Some(bus[4..].to_string()), g.pci_bus_id.clone());
                diff(
                    "persistence",
                    one(r"<persistence_mode>(\w+)</persistence_mode>", &block)
                        .map(|v| (v == "Enabled").to_string()),
                    g.persistence_mode.map(|v| v.to_string()),
                );
                diff(
                    "P-state",
                    one(r"<performance_state>P(\d+)</performance_state>", &block),
                    g.pstate.map(|v| v.to_string()),
                );
                diff(
                    "BAR1 MiB",
                    one(
                        r"(?s)<bar1_memory_usage>\s*<total>(\d+) MiB</total>",
                        &block,
                    ),
                    g.bar1.map(|b| b.total_mib().to_string()),
                );
                diff(
                    "max link gen",
                    one(r"<max_link_gen>(\d+)</max_link_gen>", &block),
                    g.pcie.max_link_gen.map(|v| v.to_string()),
                );
                diff(
                    "current link gen",
                    one(r"<current_link_gen>(\d+)</current_link_gen>", &block),
                    g.pcie.current_link_gen.map(|v| v.to_string()),
                );
                diff(
                    "max link width",
                    one(r"<max_link_width>(\d+)x</max_link_width>", &block),
                    g.pcie.max_link_width.map(|v| v.to_string()),
                );
                diff(
                    "current link width",
                    one(r"<current_link_width>(\d+)x</current_link_width>", &block),
                    g.pcie.current_link_width.map(|v| v.to_string()),
                );
            }
        }
    }
    assert!(
        captures > 0,
        "no nvidia-smi -q -x capture under {}",
        root.display()
    );
    assert!(
        wrong.is_empty(),
        "{} differ:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    eprintln!("{captures} nvidia-smi -q -x captures, {gpus} GPUs agree");
}

/// A hex dump's ids win over its text header, and a `-nn` header that disagrees is said in
/// the manifest. The GT218 of pciutils' X58 dump (`tests/tree-asus-p6t6`): its config bytes
/// start `de 10 65 0a` (10de:0a65); its header is given `-nn` ids that say otherwise, as a
/// capture pasted from two runs would.
#[test]
fn hex_dump_ids_win_over_a_disagreeing_header_and_the_manifest_says_so() {
    let src = corpus().join("lspci-xxxx-asus-p6t6-x58-geforce-pciutils/lspci-xxxx.txt");
    let text = std::fs::read_to_string(&src).unwrap();
    let head = "06:00.0 VGA compatible controller: NVIDIA Corporation GT218 [GeForce 210] (rev a2)";
    let at = text.find(head).expect("the GT218 block");
    let end = text[at..].find("\n\n").map_or(text.len(), |e| at + e);
    let block = text[at..end].replacen(
        head,
        "06:00.0 VGA compatible controller [0300]: NVIDIA Corporation GT218 [GeForce 210] [10de:0000] (rev a2)",
        1,
    );
    let dir = tempfile::tempdir().unwrap();
    let cap = dir.path().join("lspci.txt");
    std::fs::write(&cap, format!("{block}\n")).unwrap();
    let out = tempfile::tempdir().unwrap();
    let m = daqtune_engine::import::import(&[cap], out.path()).unwrap();
    let dev = std::fs::read_to_string(out.path().join("sys/bus/pci/devices/0000:06:00.0/device"))
        .unwrap();
    assert_eq!(dev.trim(), "0x0a65", "the config bytes' device id");
    let rec = m.devices.iter().find(|d| d.bdf == "0000:06:00.0").unwrap();
    assert!(
        rec.notes
            .iter()
            .any(|n| n.contains("[10de:0000]") && n.contains("10de:0a65")),
        "the manifest says the header disagrees: {:?}",
        rec.notes
    );
}
