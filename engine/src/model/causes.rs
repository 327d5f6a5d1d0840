//! The likely causes of a slow or lossy self-test: which of the host's failing or warning
//! verdicts can explain a result below its floor or with lost packets, ranked. This table is
//! the one place that knows it; each entry's reason is printed with the cause and explained in
//! docs/ci-gate.md ("Likely causes"), which `engine/tests/it/causes_doc.rs` keeps in step.
//!
//! The rank is the table's order: what caps the bandwidth of the whole path (the PCIe link, its
//! read requests and payloads, where GPU and NIC sit) before what costs cycles per packet (IRQs,
//! MTU, isolation, buffers) before what slows a core (governor, idle states) and the GPU's
//! clocks. A check that only a hardware port can explain (PCIe, NIC IRQs, the NIC's own MTU) is
//! never blamed for a veth pair or loopback: those never cross it.

use crate::model::verdict::{Status, Verdict};
use serde::{Deserialize, Serialize};

/// What went wrong with a result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Symptom {
    /// Below its floor (a share of the profile's reference).
    Shortfall,
    /// Messages lost.
    Loss,
}

/// Which runs a check's host verdicts can explain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Only runs whose traffic crossed a hardware port (two ports, a peer, DPDK or RDMA on
    /// named devices); a veth pair or loopback never touches the NIC or its PCIe path.
    Hardware,
    /// Any run on this host (the data cores, the socket buffers, the CPU).
    Any,
    /// Runs that landed payloads in GPU memory (`--gpu`).
    GpuSink,
}

/// One entry of the table.
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    /// The check whose failing or warning verdicts can explain the symptom.
    pub id: &'static str,
    pub scope: Scope,
    /// Engines it concerns; empty = every engine.
    pub engines: &'static [&'static str],
    pub symptoms: &'static [Symptom],
    /// Why it slows or drops traffic, in one sentence (docs/ci-gate.md says more).
    pub reason: &'static str,
}

const BOTH: &[Symptom] = &[Symptom::Shortfall, Symptom::Loss];

/// The table, most likely first.
pub const TABLE: &[Rule] = &[
    // Measured, not inferred: a port's own counters that rose say where frames went.
    Rule {
        id: "nic.counters",
        scope: Scope::Hardware,
        engines: &[],
        symptoms: BOTH,
        reason: "a port's own drop or error counters rose: they say where the frames were lost (the NIC's buffer, the receive ring, the kernel, the wire)",
    },
    Rule {
        id: "pcie.link",
        scope: Scope::Hardware,
        engines: &[],
        symptoms: BOTH,
        reason: "a PCIe link trained below its width or speed caps everything the NIC moves",
    },
    Rule {
        id: "pcie.mrrs",
        scope: Scope::Hardware,
        engines: &[],
        symptoms: BOTH,
        reason: "small PCIe read requests cap the NIC's DMA reads of what it transmits",
    },
    Rule {
        id: "pcie.mps",
        scope: Scope::Hardware,
        engines: &[],
        symptoms: BOTH,
        reason: "a Max Payload Size mismatch on the data path makes small or malformed PCIe writes",
    },
    Rule {
        id: "pcie.topology",
        scope: Scope::Hardware,
        engines: &[],
        symptoms: BOTH,
        reason: "GPU and NIC across a host bridge or the CPU interconnect (PHB, NODE, SYS): peer-to-peer traffic crosses the slowest link",
    },
    Rule {
        id: "pcie.acs",
        scope: Scope::Hardware,
        engines: &[],
        symptoms: BOTH,
        reason: "ACS redirect sends peer-to-peer traffic up to the root complex and back",
    },
    Rule {
        id: "numa",
        scope: Scope::Hardware,
        engines: &[],
        symptoms: BOTH,
        reason: "NIC, GPU or data cores on different NUMA nodes: every buffer crosses the socket interconnect",
    },
    Rule {
        id: "nic.link",
        scope: Scope::Hardware,
        engines: &[],
        symptoms: BOTH,
        reason: "the port is down or negotiated a lower speed than it should",
    },
    Rule {
        id: "irq.affinity",
        scope: Scope::Hardware,
        engines: &[],
        symptoms: BOTH,
        reason: "NIC interrupts on the data cores preempt the threads that move the data",
    },
    Rule {
        id: "nic.mtu",
        scope: Scope::Hardware,
        engines: &[],
        symptoms: BOTH,
        reason: "an MTU below the message's frame cuts every message into more packets (UDP: IP fragments, all lost when one is)",
    },
    Rule {
        id: "kernel.cmdline",
        scope: Scope::Any,
        engines: &[],
        symptoms: BOTH,
        reason: "data cores not isolated (isolcpus, nohz_full, rcu_nocbs): the scheduler, timer ticks and RCU callbacks run on them",
    },
    Rule {
        id: "net.sysctl",
        scope: Scope::Any,
        engines: &["socket"],
        symptoms: BOTH,
        reason: "small socket buffers: UDP drops when the receive buffer fills, TCP's window stays small",
    },
    Rule {
        id: "cpu.governor",
        scope: Scope::Any,
        engines: &[],
        symptoms: BOTH,
        reason: "cores below their highest frequency take longer per packet",
    },
    Rule {
        id: "cpu.idle",
        scope: Scope::Any,
        engines: &[],
        symptoms: BOTH,
        reason: "deep idle states on the data cores: the wake-up latency drops bursts",
    },
    Rule {
        id: "iommu",
        scope: Scope::Hardware,
        engines: &[],
        symptoms: BOTH,
        reason: "a translating IOMMU adds an IOTLB lookup to every DMA",
    },
    Rule {
        id: "pcie.aer",
        scope: Scope::Hardware,
        engines: &[],
        symptoms: BOTH,
        reason: "PCIe errors replay packets, and ASPM puts the link to sleep between bursts",
    },
    Rule {
        id: "hugepages",
        scope: Scope::Any,
        engines: &["dpdk"],
        symptoms: BOTH,
        reason: "too few hugepages: DPDK's mempools shrink or land in 4 KiB pages",
    },
    Rule {
        id: "gpu.clocks",
        scope: Scope::GpuSink,
        engines: &[],
        symptoms: BOTH,
        reason: "GPU clocks not held: the kernel that verifies each batch runs slower after idling",
    },
];

/// `known` (the documented field failures a result fits, `crate::model::known_states`) ahead of
/// `ranked`: a state that fits explains the result whatever the settings are, and a setting
/// cannot fix it. Ranks are renumbered.
pub fn with_known(known: Vec<Cause>, ranked: Vec<Cause>) -> Vec<Cause> {
    let mut out = known;
    out.extend(ranked);
    for (i, c) in out.iter_mut().enumerate() {
        c.rank = i + 1;
    }
    out
}

/// The id under which a result's own path evidence is reported (the MTU the self-test set).
pub const PATH_SUBJECT: &str = "self-test path";

/// One likely cause of one result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cause {
    /// 1 = most likely.
    pub rank: usize,
    pub id: String,
    pub subject: String,
    pub status: String,
    pub message: String,
    pub reason: String,
    /// A known bad state's documented recovery (`crate::model::known_states`); checks have their
    /// verdict's fix instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery: Option<String>,
    /// Where a known bad state is documented (URLs, commits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// What a run was, as far as the table cares.
#[derive(Debug, Clone, Copy)]
pub struct Run<'a> {
    pub engine: &'a str,
    /// Its traffic crossed a hardware port.
    pub hardware: bool,
    pub gpu_sink: bool,
}

fn counts(status: Status) -> bool {
    // pending-reboot: the fix is written, but the running kernel does not have it yet.
    matches!(
        status,
        Status::Fail | Status::Warn | Status::PendingReboot | Status::Error
    )
}

/// The host's verdicts (and `path`, the run's own evidence) that can explain `symptoms` of
/// `run`, ranked: table order, the run's own path evidence first within an entry, then fail
/// before warn.
pub fn rank(
    verdicts: &[Verdict],
    path: &[Verdict],
    run: Run<'_>,
    symptoms: &[Symptom],
) -> Vec<Cause> {
    let mut out = Vec::new();
    for rule in TABLE {
        if !rule.symptoms.iter().any(|s| symptoms.contains(s))
            || (!rule.engines.is_empty() && !rule.engines.contains(&run.engine))
        {
            continue;
        }
        let host_counts = match rule.scope {
            Scope::Hardware => run.hardware,
            Scope::Any => true,
            Scope::GpuSink => run.gpu_sink,
        };
        let mut hits: Vec<&Verdict> = path
            .iter()
            .filter(|v| v.id == rule.id && counts(v.status))
            .collect();
        if host_counts {
            let mut host: Vec<&Verdict> = verdicts
                .iter()
                .filter(|v| v.id == rule.id && counts(v.status))
                .collect();
            host.sort_by_key(|v| std::cmp::Reverse(v.status.severity()));
            hits.extend(host);
        }
        for v in hits {
            out.push(Cause {
                rank: out.len() + 1,
                id: v.id.clone(),
                subject: v.subject.clone(),
                status: v.status.as_str().into(),
                message: v.message.clone(),
                reason: rule.reason.into(),
                recovery: None,
                source: None,
            });
        }
    }
    out
}

/// The losses the ports of a self-test run counted (`results[].port_counters`), as the run's
/// own `nic.counters` evidence: one verdict per counter that rose, most telling first.
pub fn path_counters(ports: &[daqtune_probe::net::counters::PortDelta]) -> Vec<Verdict> {
    daqtune_probe::net::counters::loss_causes(ports)
        .into_iter()
        .map(|(port, _, message)| {
            Verdict::new(
                "nic.counters",
                format!("self-test port {port}"),
                Status::Warn,
                message,
            )
        })
        .collect()
}

/// The run's own MTU as a verdict, when it is below the frame of its messages: `mtu` of the
/// self-test's path, `message` bytes per message, `mode` tcp/udp/raw.
pub fn path_mtu(mtu: u32, message: usize, mode: &str) -> Option<Verdict> {
    let mtu = mtu as usize;
    let (frame, what) = match mode {
        // One datagram per message: the frame is the message plus IPv4 and UDP headers.
        "udp" | "raw" => (message + 28, "IP fragments"),
        // A byte stream: a segment carries at most MTU - 52 (IPv4, TCP with timestamps).
        "tcp" => (message + 52, "TCP segments"),
        _ => return None,
    };
    if mtu >= frame || mtu <= 100 {
        return None;
    }
    let per = mtu - if mode == "tcp" { 52 } else { 20 };
    let pieces = (message + if mode == "tcp" { 0 } else { 8 }).div_ceil(per.max(1));
    let mut v = Verdict::new(
        "nic.mtu",
        PATH_SUBJECT,
        if mode == "tcp" {
            Status::Warn
        } else {
            Status::Fail
        },
        format!(
            "the self-test path has MTU {mtu}, below the {frame}-byte frame of a {message}-byte message: each message travels as {pieces} {what}"
        ),
    );
    v.observed = Some(mtu.to_string());
    v.expected = Some(format!(">= {frame}"));
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture_verdicts() -> Vec<Verdict> {
        // The shape a host root gives (tests/fixtures/igx-untuned style): the NIC's MTU and
        // IRQs wrong, a governor off, PCIe fine, one check that passes.
        vec![
            Verdict::warn("cpu.governor", "cpu0-11", "schedutil"),
            Verdict::pass("pcie.link", "0000:05:00.0", "x16 16GT/s"),
            Verdict::warn(
                "irq.affinity",
                "mlx5_comp0@pci:0000:05:00.0",
                "IRQ 120 on CPU 10",
            ),
            Verdict::fail("nic.mtu", "eth2", "1500 < 9000"),
            Verdict::fail("kernel.cmdline", "host", "no isolcpus"),
            Verdict::skip("gpu.clocks", "GPU 0", "no NVML"),
            Verdict::fail("hugepages", "1G", "0 of 4"),
        ]
    }

    #[test]
    fn hardware_runs_blame_the_path_first_in_table_order() {
        let run = Run {
            engine: "socket",
            hardware: true,
            gpu_sink: false,
        };
        let c = rank(&fixture_verdicts(), &[], run, &[Symptom::Shortfall]);
        let ids: Vec<&str> = c.iter().map(|c| c.id.as_str()).collect();
        // hugepages concerns DPDK only; gpu.clocks skipped and concerns the GPU sink only;
        // pcie.link passed.
        assert_eq!(
            ids,
            ["irq.affinity", "nic.mtu", "kernel.cmdline", "cpu.governor"]
        );
        assert_eq!(c[0].rank, 1);
        assert!(c[0].reason.contains("interrupts"));
    }

    #[test]
    fn a_veth_run_is_not_blamed_on_the_nic_and_its_own_mtu_comes_first() {
        let run = Run {
            engine: "socket",
            hardware: false,
            gpu_sink: false,
        };
        let path = path_mtu(1500, 8192, "udp").expect("below the frame");
        let c = rank(&fixture_verdicts(), &[path], run, &[Symptom::Loss]);
        let ids: Vec<(&str, &str)> = c
            .iter()
            .map(|c| (c.id.as_str(), c.subject.as_str()))
            .collect();
        assert_eq!(
            ids,
            [
                ("nic.mtu", PATH_SUBJECT),
                ("kernel.cmdline", "host"),
                ("cpu.governor", "cpu0-11")
            ]
        );
        assert!(c[0].message.contains("6 IP fragments"), "{}", c[0].message);
        // DPDK: hugepages count, socket buffers do not.
        let dpdk = Run {
            engine: "dpdk",
            ..run
        };
        let c = rank(&fixture_verdicts(), &[], dpdk, &[Symptom::Shortfall]);
        assert!(c.iter().any(|c| c.id == "hugepages"));
    }

    /// A veth run whose receiving port counted drops: that counter is the first cause, before
    /// any inferred one, though the NIC checks are not blamed for a veth pair.
    #[test]
    fn a_runs_own_counters_rank_first() {
        use daqtune_probe::net::counters::{Counter, PortCounters, PortDelta, Source};
        let port = |name: &str, v: u64| PortCounters {
            ifname: name.into(),
            counters: vec![Counter {
                source: Source::Statistics,
                name: "rx_dropped".into(),
                value: v,
            }],
            unavailable: Vec::new(),
        };
        let ports = [
            PortDelta::new("tx", &port("dqt-tx", 0), &port("dqt-tx", 0), 3.0),
            PortDelta::new("rx", &port("dqt-rx", 5), &port("dqt-rx", 12_350), 3.0),
        ];
        let path = path_counters(&ports);
        assert_eq!(path.len(), 1);
        let run = Run {
            engine: "socket",
            hardware: false,
            gpu_sink: false,
        };
        let c = rank(&fixture_verdicts(), &path, run, &[Symptom::Loss]);
        assert_eq!(c[0].id, "nic.counters");
        assert_eq!(c[0].subject, "self-test port dqt-rx");
        assert!(
            c[0].message.starts_with(
                "the receiving port dqt-rx: rx_dropped (interface statistics) rose by 12,345: dropped by the kernel"
            ),
            "{}",
            c[0].message
        );
        assert_eq!(c[1].id, "kernel.cmdline");
    }

    #[test]
    fn path_mtu_only_below_the_frame() {
        assert!(path_mtu(9000, 8192, "udp").is_none());
        assert!(path_mtu(9000, 8192, "tcp").is_none());
        let v = path_mtu(1500, 8192, "tcp").expect("tcp");
        assert_eq!(v.status, Status::Warn);
        assert!(v.message.contains("6 TCP segments"), "{}", v.message);
        assert!(path_mtu(1500, 8192, "send").is_none());
        assert!(path_mtu(0, 8192, "udp").is_none());
    }

    #[test]
    fn every_table_id_is_a_check_and_appears_once() {
        let mut seen = std::collections::BTreeSet::new();
        for r in TABLE {
            assert!(seen.insert(r.id), "{} twice", r.id);
            assert!(!r.reason.is_empty());
        }
    }
}
