//! Every `lspci -vv` capture of the real-host corpus (`tests/real-hosts/*/`), imported, reads
//! back as what lspci printed: MPS, MRRS, link speed and width (current and capable), ACS
//! control, NUMA node and driver, for every function of every capture (issue 41).
//!
//! The expected side is read from the capture's text by the plain regexes below, not by
//! daqtune's importer; the actual side is what daqtune's PCI facts (`read_pci`) read from the
//! imported root.

use daqtune_probe::pci::{read_pci, PciAddr, ReadOptions};
use daqtune_probe::Host;
use regex::Regex;
use std::path::{Path, PathBuf};

#[derive(Debug, Default)]
struct Expected {
    bdf: String,
    mps_mrrs: Option<(u32, u32)>,
    cur: Option<(f32, u32)>,
    max: Option<(f32, u32)>,
    acs_ctl: Option<String>,
    numa: Option<i32>,
    driver: Option<String>,
}

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/real-hosts")
}

/// The function blocks of an lspci capture, by a header regex.
fn expected(text: &str) -> Vec<Expected> {
    let head = Regex::new(r"(?m)^((?:[0-9a-f]{4,8}:)?[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]) ").unwrap();
    let devctl = Regex::new(r"MaxPayload (\d+) bytes, MaxReadReq (\d+) bytes").unwrap();
    let lnksta = Regex::new(r"LnkSta:\s+Speed ([0-9.]+)GT/s[^,]*, Width x(\d+)").unwrap();
    let lnkcap = Regex::new(r"LnkCap:\s+Port #\d+, Speed ([0-9.]+)GT/s, Width x(\d+)").unwrap();
    let acs = Regex::new(r"ACSCtl:\s+(.*)").unwrap();
    let numa = Regex::new(r"NUMA node: (\d+)").unwrap();
    let drv = Regex::new(r"Kernel driver in use: (\S+)").unwrap();
    let starts: Vec<(usize, String)> = head
        .captures_iter(text)
        .map(|c| (c.get(0).unwrap().start(), c[1].to_string()))
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
            mps_mrrs: f(&devctl).map(|c| (c[1].parse().unwrap(), c[2].parse().unwrap())),
            cur: f(&lnksta).map(|c| (c[1].parse().unwrap(), c[2].parse().unwrap())),
            max: f(&lnkcap).map(|c| (c[1].parse().unwrap(), c[2].parse().unwrap())),
            acs_ctl: f(&acs).map(|c| c[1].trim().to_string()),
            numa: f(&numa).map(|c| c[1].parse().unwrap()),
            driver: f(&drv).map(|c| c[1].to_string()),
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
    let head = Regex::new(r"^((?:[0-9a-f]{4,8}:)?[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]) ").unwrap();
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    matches!((lines.next(), lines.next()), (Some(a), Some(b)) if head.is_match(a) && b.starts_with(char::is_whitespace))
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
                let got_acs = d.config.as_ref().and_then(|c| c.acs).map(|a| a.ctrl);
                diff(
                    "ACSCtl",
                    format!("{:?}", e.acs_ctl.as_deref().map(acs_bits)),
                    format!("{got_acs:?}"),
                );
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
}
