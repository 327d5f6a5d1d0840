//! Known bad states: documented field failures that no setting explains, each with its cause,
//! the signature that identifies it in the host's facts and a self-test result, the public
//! source that documents it, and its recovery. `qualify` names an entry among a result's likely
//! causes when the result and the port it crossed fit the signature (docs/field-diagnostics.md,
//! "Known bad states", lists the table; `daqtune explain known-states` prints it).
//!
//! Only failures with a public source belong here: the signature's numbers come from the
//! source, never from daqtune's own runs.

use crate::model::causes::Cause;
use crate::model::facts::Facts;

/// Where an entry is documented.
#[derive(Debug, Clone, Copy)]
pub struct Source {
    pub what: &'static str,
    pub url: &'static str,
    /// The commit of the file read, where the source is a repository's file.
    pub commit: Option<&'static str>,
}

/// What identifies the state: the host (platform, the port's NIC and links) and the run.
#[derive(Debug, Clone, Copy)]
pub struct Signature {
    /// Built-in profiles whose platform the state occurs on (`profile::detect` on the host).
    pub profiles: &'static [&'static str],
    /// The port's PCI function, (vendor, device).
    pub nic: &'static [(u16, u16)],
    /// The port's negotiated Ethernet speed, Mb/s.
    pub link_mbps: u64,
    /// The port's current PCIe link: GT/s per lane and width.
    pub pcie_gts: f32,
    pub pcie_width: u32,
    /// Self-test engines and modes the source measured (`None`: every mode of the engine).
    pub runs: &'static [(&'static str, Option<&'static str>)],
    /// Per-port throughput the state holds a run to, Gb/s, inclusive.
    pub gbps: (f64, f64),
}

/// One documented field failure.
#[derive(Debug, Clone, Copy)]
pub struct KnownState {
    pub id: &'static str,
    pub title: &'static str,
    pub cause: &'static str,
    pub signature: Signature,
    /// The signature in words, with what is deliberately not part of it.
    pub signature_text: &'static str,
    pub sources: &'static [Source],
    pub recovery: &'static str,
}

/// The table.
pub const TABLE: &[KnownState] = &[KnownState {
    id: "spark-cx7-degraded-init",
    title: "DGX Spark ConnectX-7 degraded (stale) initialization",
    cause: "the ConnectX-7 endpoint came up in a stale initialization state at boot or hot-plug: Ethernet negotiates 200 Gb/s and PCIe Gen5 x4 with clean counters, yet TCP and RDMA stay near 13 Gb/s per rail",
    signature: Signature {
        profiles: &["dgx-spark"],
        // ConnectX-7 (MT2910).
        nic: &[(0x15b3, 0x1021)],
        link_mbps: 200_000,
        pcie_gts: 32.0,
        pcie_width: 4,
        // The PR measured TCP (12.86 Gb/s) and ib_write_bw (13.23 Gb/s).
        runs: &[("socket", Some("tcp")), ("rdma", None)],
        // check-connectx-bandwidth: "a client result between 8 and 25 Gb/s".
        gbps: (8.0, 25.0),
    },
    signature_text: "a run through one ConnectX-7 port of a DGX Spark reaches 8-25 Gb/s while the port reports 200000 Mb/s and its PCIe function a 32 GT/s x4 link (a healthy rail reaches 80 Gb/s and more). The mlx5 \"insufficient power on the PCIe slot\" (27 W) kernel message is not part of the signature: the source saw it on healthy systems too",
    sources: &[
        Source {
            what: "NVIDIA/dgx-spark-playbooks PR #108, \"Detect degraded ConnectX-7 initialization before cluster setup\" (nvidia/connect-two-sparks/assets/check-connectx-bandwidth)",
            url: "https://github.com/NVIDIA/dgx-spark-playbooks/pull/108",
            commit: Some("a6a4e7a680cb87a681872c53bdcfe88ae9b8e1e1"),
        },
        Source {
            what: "NVIDIA developer forum, \"ConnectX-7 inter-Spark link capped at 13 Gbps (expected 200 Gbps) - PCIe power throttling 27W\" (cited by the PR for the same boot/hot-plug behaviour and recovery)",
            url: "https://forums.developer.nvidia.com/t/connectx-7-inter-spark-link-capped-at-13-gbps-expected-200-gbps-pcie-power-throttling-27w/363461",
            commit: None,
        },
    ],
    recovery: "keep the final QSFP cabling connected, reboot both endpoints and run the test again; if the cap remains, shut both down, disconnect each Spark and its power brick from AC for at least 60 seconds, reconnect power without moving the QSFP cables, boot and test again",
}];

/// A port as the table sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Port {
    pub netdev: String,
    pub bdf: String,
    pub vendor: u16,
    pub device: u16,
    pub speed_mbps: Option<u64>,
    pub pcie_gts: Option<f32>,
    pub pcie_width: Option<u32>,
}

/// What the table reads from the host: its platform and its NIC ports.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostView {
    /// The built-in profile the host's identity matches (DMI, device tree, GPU name).
    pub platform: Option<String>,
    pub ports: Vec<Port>,
    /// Why the ports could not be read, when they could not.
    pub unreadable: Option<String>,
}

impl HostView {
    pub fn read(facts: &Facts) -> HostView {
        let platform = crate::model::profile::detect(facts.platform(), &[])
            .or_else(|| crate::model::profile::detect(facts.platform(), facts.gpu_names()))
            .map(|(name, _)| name);
        let pci = match facts.pci() {
            Ok(p) => p,
            Err(e) => {
                return HostView {
                    platform,
                    ports: Vec::new(),
                    unreadable: Some(e.to_string()),
                }
            }
        };
        let mut ports = Vec::new();
        for n in pci.nics.iter().filter(|n| !n.is_vf) {
            let link = pci.tree.get(n.addr).map(|d| d.link).unwrap_or_default();
            for nd in &n.netdevs {
                ports.push(Port {
                    netdev: nd.name.clone(),
                    bdf: n.addr.to_string(),
                    vendor: n.vendor,
                    device: n.device,
                    speed_mbps: nd.speed_mbps,
                    pcie_gts: link.cur_speed_gts,
                    pcie_width: link.cur_width,
                });
            }
        }
        HostView {
            platform,
            ports,
            unreadable: None,
        }
    }
}

/// A self-test result, as much as the table needs (qualify's `SelftestEntry`).
#[derive(Debug, Clone, Copy)]
pub struct RunResult<'a> {
    pub engine: &'a str,
    pub mode: &'a str,
    pub status: &'a str,
    /// `ports`, `peer`, `veth`, `loopback`.
    pub topology: &'a str,
    pub gbps: f64,
    /// The run's port speed and where it was read (`sysfs speed of IFACE ...`), from the
    /// self-test's assessment.
    pub link_mbps: Option<u64>,
    pub link_source: Option<&'a str>,
    /// What the run's port's PCIe link carries, Gb/s (the self-test's assessment).
    pub pcie_gbps: Option<f64>,
}

impl RunResult<'_> {
    /// The port the self-test read its link from: its assessment's source says
    /// `sysfs speed of IFACE` (socket), `... of NETDEV (BDF)` (DPDK) or `... (RDMA device D)`.
    fn port_name(&self) -> Option<&str> {
        self.link_source?
            .strip_prefix("sysfs speed of ")?
            .split_whitespace()
            .next()
    }
}

/// One entry that fits a result.
#[derive(Debug, Clone)]
pub struct Match {
    pub state: &'static KnownState,
    /// The ports of the host that fit (the one the run used when its report names it).
    pub ports: Vec<Port>,
    pub gbps: f64,
}

impl Match {
    pub fn subject(&self) -> String {
        self.ports
            .iter()
            .map(|p| format!("{} ({})", p.bdf, p.netdev))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// As a likely cause (ranked by the caller).
    pub fn cause(&self, rank: usize) -> Cause {
        let sig = &self.state.signature;
        let src = self
            .state
            .sources
            .iter()
            .map(|s| match s.commit {
                Some(c) => format!("{} (commit {c})", s.url),
                None => s.url.to_string(),
            })
            .collect::<Vec<_>>()
            .join("; ");
        Cause {
            rank,
            id: format!("known-state:{}", self.state.id),
            subject: self.subject(),
            status: "matches".into(),
            message: format!(
                "{}: {:.2} Gb/s through a port that negotiated {} Mb/s behind a PCIe {} link fits the documented signature ({}-{} Gb/s per port with healthy links)",
                self.state.title,
                self.gbps,
                sig.link_mbps,
                daqtune_probe::pci::link_label(Some(sig.pcie_gts), Some(sig.pcie_width)),
                sig.gbps.0,
                sig.gbps.1
            ),
            reason: self.state.cause.into(),
            recovery: Some(self.state.recovery.into()),
            source: Some(src),
        }
    }
}

fn close(a: f32, b: f32) -> bool {
    (a - b).abs() < 0.01
}

fn port_fits(sig: &Signature, p: &Port) -> bool {
    sig.nic.contains(&(p.vendor, p.device))
        && p.speed_mbps == Some(sig.link_mbps)
        && p.pcie_gts.is_some_and(|g| close(g, sig.pcie_gts))
        && p.pcie_width == Some(sig.pcie_width)
}

/// The entries `r` and the host fit. A result whose port cannot be tied to the host's ports
/// (no link speed in its assessment and no port named) fits nothing: the signature is about
/// the port the run crossed.
pub fn matches(host: &HostView, r: &RunResult<'_>) -> Vec<Match> {
    let mut out = Vec::new();
    if matches!(r.status, "skip" | "error")
        || matches!(r.topology, "veth" | "loopback" | "")
        || !r.gbps.is_finite()
    {
        return out;
    }
    for state in TABLE {
        let sig = &state.signature;
        if !host
            .platform
            .as_deref()
            .is_some_and(|p| sig.profiles.contains(&p))
        {
            continue;
        }
        if !sig
            .runs
            .iter()
            .any(|(e, m)| *e == r.engine && m.is_none_or(|m| m == r.mode))
        {
            continue;
        }
        if r.gbps < sig.gbps.0 || r.gbps > sig.gbps.1 {
            continue;
        }
        // The run's own port figures, where the self-test recorded them, must be the
        // signature's: a 100G port at 13 Gb/s is another story.
        if r.link_mbps.is_some_and(|m| m != sig.link_mbps) {
            continue;
        }
        let sig_pcie = daqtune_probe::pci::payload_gbps(f64::from(sig.pcie_gts), sig.pcie_width);
        if r.pcie_gbps.is_some_and(|g| (g - sig_pcie).abs() > 0.5) {
            continue;
        }
        let fitting: Vec<Port> = match r.port_name() {
            Some(name) => host
                .ports
                .iter()
                .filter(|p| p.netdev == name && port_fits(sig, p))
                .cloned()
                .collect(),
            None if r.link_mbps.is_some() => host
                .ports
                .iter()
                .filter(|p| port_fits(sig, p))
                .cloned()
                .collect(),
            None => Vec::new(),
        };
        if fitting.is_empty() {
            continue;
        }
        out.push(Match {
            state,
            ports: fitting,
            gbps: r.gbps,
        });
    }
    out
}

/// The table as text: `daqtune explain known-states`.
pub fn describe() -> String {
    let mut s = String::from(
        "Known bad states: documented field failures that qualify names among a self-test\nresult's likely causes when the result and the host fit the signature.\n",
    );
    for k in TABLE {
        s.push_str(&format!(
            "\n{} - {}\n  cause: {}\n  signature: {}\n  recovery: {}\n",
            k.id, k.title, k.cause, k.signature_text, k.recovery
        ));
        for src in k.sources {
            s.push_str(&format!("  source: {} <{}>", src.what, src.url));
            if let Some(c) = src.commit {
                s.push_str(&format!(" commit {c}"));
            }
            s.push('\n');
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use daqtune_probe::Host;

    fn spark() -> Host {
        Host::at(format!(
            "{}/../tests/fixtures/spark",
            env!("CARGO_MANIFEST_DIR")
        ))
        .expect("fixture")
    }

    /// What `daqtune selftest socket --tx-if enp1s0f0np0 ...` records for a Spark rail: the
    /// port's sysfs speed and the payload rate of its Gen5 x4 link.
    fn run(gbps: f64, iface: &str) -> RunResult<'static> {
        RunResult {
            engine: "socket",
            mode: "tcp",
            status: "fail",
            topology: "ports",
            gbps,
            link_mbps: Some(200_000),
            link_source: Some(Box::leak(
                format!("sysfs speed of {iface}").into_boxed_str(),
            )),
            pcie_gbps: Some(daqtune_probe::pci::payload_gbps(32.0, 4)),
        }
    }

    #[test]
    fn spark_fixture_reads_as_the_signature_needs() {
        let host = spark();
        let v = HostView::read(&Facts::new(&host));
        assert_eq!(v.platform.as_deref(), Some("dgx-spark"));
        // The fixture's four CX-7 functions: 200G ports behind Gen5 x4 (lspci of a Spark,
        // ServeTheHome's GB10 write-up; the forum's GX10 report lists the same LnkSta).
        let cx7: Vec<&Port> = v
            .ports
            .iter()
            .filter(|p| (p.vendor, p.device) == (0x15b3, 0x1021))
            .collect();
        assert_eq!(cx7.len(), 4, "{:?}", v.ports);
        assert!(cx7.iter().all(|p| port_fits(&TABLE[0].signature, p)));
    }

    /// The PR's measurements: TCP 12.86 Gb/s and ib_write_bw 13.23 Gb/s fit; the guide's
    /// healthy 92.57 and 97.28 Gb/s per logical interface do not.
    #[test]
    fn the_sources_figures_fit_and_the_healthy_ones_do_not() {
        let host = spark();
        let v = HostView::read(&Facts::new(&host));
        let m = matches(&v, &run(12.86, "enp1s0f0np0"));
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].state.id, "spark-cx7-degraded-init");
        assert_eq!(m[0].subject(), "0000:01:00.0 (enp1s0f0np0)");
        let rdma = RunResult {
            engine: "rdma",
            mode: "write",
            link_source: Some("sysfs speed of enP2p1s0f1np1 (RDMA device roceP2p1s0f1)"),
            ..run(13.23, "x")
        };
        let m = matches(&v, &rdma);
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].subject(), "0002:01:00.1 (enP2p1s0f1np1)");
        for healthy in [92.57, 97.28] {
            assert!(matches(&v, &run(healthy, "enp1s0f0np0")).is_empty());
        }
        // Outside the script's 8-25 band: another degradation, not this state.
        assert!(matches(&v, &run(40.0, "enp1s0f0np0")).is_empty());
        assert!(matches(&v, &run(5.0, "enp1s0f0np0")).is_empty());
    }

    #[test]
    fn the_port_must_have_the_healthy_links_of_the_signature() {
        let host = spark();
        let mut v = HostView::read(&Facts::new(&host));
        // The management port (10G Realtek) is not a ConnectX-7 at 200G.
        assert!(matches(&v, &run(12.0, "enP7s7")).is_empty());
        // The port trained at x2 (the GX10's second endpoint): a PCIe problem, not this state.
        for p in v.ports.iter_mut().filter(|p| p.netdev == "enp1s0f0np0") {
            p.pcie_width = Some(2);
        }
        assert!(matches(&v, &run(12.0, "enp1s0f0np0")).is_empty());
        // A port at 100G.
        let r = RunResult {
            link_mbps: Some(100_000),
            ..run(12.0, "enp1s0f1np1")
        };
        assert!(matches(&v, &r).is_empty());
        // Not a Spark.
        v.platform = Some("igx-orin".into());
        assert!(matches(&v, &run(12.0, "enp1s0f1np1")).is_empty());
    }

    #[test]
    fn runs_that_cross_no_port_or_were_not_measured_fit_nothing() {
        let host = spark();
        let v = HostView::read(&Facts::new(&host));
        let veth = RunResult {
            topology: "veth",
            ..run(12.0, "enp1s0f0np0")
        };
        assert!(matches(&v, &veth).is_empty());
        let skipped = RunResult {
            status: "skip",
            ..run(12.0, "enp1s0f0np0")
        };
        assert!(matches(&v, &skipped).is_empty());
        // UDP is not what the source measured (loss caps it for other reasons).
        let udp = RunResult {
            mode: "udp",
            ..run(12.0, "enp1s0f0np0")
        };
        assert!(matches(&v, &udp).is_empty());
        // Nothing ties the result to a port.
        let unknown = RunResult {
            link_mbps: None,
            link_source: None,
            pcie_gbps: None,
            ..run(12.0, "enp1s0f0np0")
        };
        assert!(matches(&v, &unknown).is_empty());
        // The port unnamed but its figures known: every port that fits is named.
        let unnamed = RunResult {
            link_source: Some("test override"),
            ..run(12.0, "enp1s0f0np0")
        };
        assert_eq!(matches(&v, &unnamed)[0].ports.len(), 4);
    }

    /// docs/field-diagnostics.md lists every entry with its source (and commit) and recovery.
    #[test]
    fn the_docs_list_the_table() {
        let doc = include_str!("../../../docs/field-diagnostics.md");
        let section = doc
            .split("## Known bad states")
            .nth(1)
            .expect("docs/field-diagnostics.md has a `## Known bad states` section");
        for k in TABLE {
            let row = section
                .lines()
                .find(|l| l.starts_with(&format!("| `{}` |", k.id)))
                .unwrap_or_else(|| panic!("no row for {}", k.id));
            for s in k.sources {
                assert!(row.contains(s.url), "{} lacks {}", k.id, s.url);
                if let Some(c) = s.commit {
                    assert!(row.contains(c), "{} lacks commit {c}", k.id);
                }
            }
            assert!(row.contains(k.recovery), "{}: recovery differs", k.id);
        }
    }

    #[test]
    fn every_entry_is_sourced_and_recoverable() {
        let mut seen = std::collections::BTreeSet::new();
        for k in TABLE {
            assert!(seen.insert(k.id), "{} twice", k.id);
            assert!(!k.sources.is_empty() && !k.recovery.is_empty());
            assert!(k.sources.iter().all(|s| s.url.starts_with("https://")));
            assert!(k.signature.gbps.0 < k.signature.gbps.1);
        }
    }
}
