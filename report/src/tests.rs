//! Every type of the crate round-trips (serialize, parse, equal), and reports recorded on real
//! hosts parse as these types and are written again byte for byte.

use crate::assessment::Assessment;
use crate::dpdk::{DpdkDetails, DpdkOutput, IfCounters, PacketSocketStats, PortReport};
use crate::findmax::{Limit, Phase, Summary as SearchSummary, Trial};
use crate::gpu::{Calibration, GpuSinkResult, MemoryKind};
use crate::metrics::{Latency, ThreadCpu};
use crate::rdma::RdmaReport;
use crate::selftest::{
    Batching, CounterCause, DefectRecord, EngineResult, Mode, PortBytes, Report, Status,
    StreamFigures, Summary, ZeroCopy,
};
use daqtune_probe::net::counters::{Counter, Kind, PortCounters, Source};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::BTreeMap;

/// `v` written as JSON and parsed back is `v` again.
fn round_trip<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(v: &T) {
    let text = serde_json::to_string_pretty(v).expect("serialize");
    let back: T = serde_json::from_str(&text).expect("parse");
    assert_eq!(&back, v, "{text}");
}

fn recorded(path: &str) -> String {
    let p = format!(
        "{}/../docs/validation-data/{path}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
}

fn threads() -> Vec<ThreadCpu> {
    vec![
        ThreadCpu {
            role: "tx".into(),
            cpu: Some(12),
            cpu_s: 1.5,
            utilization: 0.75,
        },
        ThreadCpu {
            role: "rx".into(),
            cpu: None,
            cpu_s: 0.25,
            utilization: 0.125,
        },
    ]
}

fn gpu() -> GpuSinkResult {
    GpuSinkResult {
        uuid: "GPU-0b1c".into(),
        name: "NVIDIA H200".into(),
        pci_bus_id: Some("00000000:19:00.0".into()),
        memory: MemoryKind::Copy,
        batch_bytes: 8 << 20,
        batches: 17,
        verified: 1000,
        verified_gbps: 31.5,
        integrity_errors: 2,
        bad_magic: 1,
        bad_length: 0,
        bad_crc: 1,
        min_seq: Some(0),
        max_seq: Some(1001),
        seq_breaks: 1,
        kernel_gbps: 900.25,
        kernel_ms: 3.5,
        h2d_copies: 17,
        h2d_gbps: Some(350.5),
        pinned_peak: Some(Calibration {
            bytes: 8 << 20,
            copies: 20,
            peak_gbps: 400.0,
            median_gbps: 390.5,
        }),
        h2d_of_peak: Some(0.87625),
        receiver_wait_ms: Some(12.5),
        receiver_wait_of_window: Some(0.004),
        copy_busy_of_window: Some(0.25),
        totals_agree: true,
        setup_ms: 210.0,
    }
}

fn assessment() -> Assessment {
    Assessment {
        link_mbps: Some(200_000),
        link_source: "sysfs speed of enp1s0f1np1".into(),
        mtu: Some(9000),
        line_gbps: Some(114.4),
        pcie_gbps: Some(114.4),
        of_line_pct: Some(80.5),
        reference_gbps: Some(97.2),
        reference_stated_gbps: Some(97.2),
        reference_source: Some("seed 002".into()),
        of_reference_pct: Some(94.7),
        floor: Some(0.9),
        floor_gbps: Some(87.48),
        shortfall_gbps: None,
        verdict: "met".into(),
        why: "92.05 Gb/s is 94.7 % of the reference".into(),
    }
}

/// A result with every optional part filled in, so each nested record is written and read.
fn full_result() -> EngineResult {
    let port = |name: &str, v: u64| PortCounters {
        ifname: name.into(),
        counters: vec![Counter {
            source: Source::Statistics,
            name: "rx_dropped".into(),
            value: v,
        }],
        unavailable: Vec::new(),
    };
    let mut r = EngineResult::new("socket", Mode::Udp, "ports");
    r.message_size = 8192;
    r.duration_s = 3.25;
    r.rate_gbps = Some(40.0);
    r.gbps = 39.5;
    r.packets = 1_000_000;
    r.packets_per_s = 307_692.25;
    r.bytes = 8_192_000_000;
    r.sent = 1_000_010;
    r.lost = 10;
    r.reordered = 1;
    r.integrity_errors = 2;
    r.retransmits = Some(3);
    r.port_bytes = Some(PortBytes {
        tx_port_tx: 8_300_000_000,
        rx_port_rx: 8_299_000_000,
        tx_port_tx_phy: Some(8_400_000_000),
        rx_port_rx_phy: None,
    });
    r.latency = Some(Latency {
        samples: 100,
        p50_us: 10.5,
        p99_us: 20.25,
        p999_us: 30.0,
        max_us: 44.5,
    });
    r.threads = threads();
    r.cpu_cores = 0.875;
    r.roi = Some(1783.0);
    r.status = Status::Fail;
    r.notes = vec!["loss 0.001 % above the allowed 0.000 %".into()];
    r.injected_corruptions = 2;
    r.gpu = Some(gpu());
    r.rx_buffer_bytes = Some(4 << 20);
    r.rx_buffer_sizing = Some("--rcvbuf 4M".into());
    r.streams = vec![StreamFigures {
        stream: 0,
        tx_cpu: Some(12),
        rx_cpu: Some(13),
        gbps: 39.5,
        bytes: 8_192_000_000,
        packets: 1_000_000,
        sent: 1_000_010,
        lost: 10,
        reordered: 1,
        integrity_errors: 2,
        tx_utilization: 0.75,
        rx_utilization: 0.125,
    }];
    r.max_loss_free_gbps = Some(38.0);
    r.trials = vec![Trial {
        phase: Phase::Confirm,
        asked_gbps: Some(38.0),
        offered_gbps: 37.75,
        achieved_gbps: 37.5,
        duration_s: 6.0,
        length_rule: "confirm".into(),
        sent: 100,
        received: 100,
        lost: 0,
        loss_pct: 0.0,
        integrity_errors: 0,
        cpu_per_core: BTreeMap::from([("12".to_string(), 0.5), ("unpinned".to_string(), 0.25)]),
        threads: threads(),
        passed: false,
        why: Some("loss".into()),
    }];
    r.search = Some(SearchSummary {
        loss_allowed_pct: 0.0,
        precision_pct: 2.0,
        start_upper_gbps: 99.0,
        resolution_gbps: 1.98,
        trial_floor_s: 2.0,
        buffer_bytes: Some(4 << 20),
        limit: Some(Limit {
            gbps: 99.0,
            source: "link speed 100000 Mb/s".into(),
        }),
        fraction_of_limit: Some(0.38),
        confirm_runs: 5,
        max_trials: 40,
        lowest_lossy_gbps: Some(40.5),
        carried_gbps: Some((37.25, 39.5)),
        spread_pct: 6.0,
        base_gbps: Some(37.25),
        margin_pct: 6.0,
        backoffs: 1,
        ended: "confirmed".into(),
    });
    r.batching = vec![Batching {
        name: "gso".into(),
        asked: true,
        used: false,
        detail: "the kernel refused UDP_SEGMENT".into(),
    }];
    r.zerocopy = Some(ZeroCopy {
        sends: 10,
        completed: 9,
        copied: 1,
    });
    r.defects = vec![DefectRecord {
        stream: 0,
        seq: Some(77),
        defect: "crc".into(),
        bytes: 8192,
        segment: Some(3),
        segments: Some(8),
    }];
    r.gbps_per_core = Some(45.25);
    r.gbps_per_tx_core = Some(52.5);
    r.reference = Some(assessment());
    r.set_port_counters(
        &[port("tx0", 0), port("rx0", 5)],
        &[port("tx0", 0), port("rx0", 105)],
        3.25,
    );
    r
}

#[test]
fn every_selftest_type_round_trips() {
    let r = full_result();
    assert_eq!(r.port_counters.len(), 2);
    assert_eq!(r.causes.len(), 1, "{:?}", r.causes);
    round_trip(&r);
    let mut rep = Report::new("host", "two ports", "tx cpu 12, rx cpu 13");
    for s in [
        Status::Pass,
        Status::Warn,
        Status::Fail,
        Status::Skip,
        Status::Error,
        Status::Pending,
    ] {
        round_trip(&s);
        let mut x = EngineResult::skipped("dpdk", Mode::Raw, "veth", "why");
        x.status = s;
        rep.push(x);
    }
    rep.push(r);
    assert_eq!(
        rep.summary,
        Summary {
            pass: 1,
            warn: 1,
            fail: 3,
            skip: 1,
            error: 1
        }
    );
    round_trip(&rep);
    let back: Report = serde_json::from_str(&rep.to_json()).expect("to_json parses");
    assert_eq!(back, rep);
    for m in [Mode::Tcp, Mode::Udp, Mode::Raw, Mode::Write, Mode::Send] {
        round_trip(&m);
        assert_eq!(m.as_str().parse::<Mode>(), Ok(m));
    }
    for k in [MemoryKind::HostPinned, MemoryKind::Copy, MemoryKind::Device] {
        round_trip(&k);
    }
    for p in [Phase::Probe, Phase::Search, Phase::Confirm] {
        round_trip(&p);
    }
    round_trip(&CounterCause {
        rank: 1,
        port: "rx".into(),
        kind: Kind::KernelDrop,
        message: "dropped by the kernel".into(),
    });
    round_trip(&Assessment::default());
    round_trip(&assessment());
    round_trip(&gpu());
}

#[test]
fn the_helpers_outputs_round_trip() {
    let details = DpdkDetails {
        dpdk_version: "22.11.11".into(),
        eal_args: vec!["--in-memory".into(), "-l".into(), "1,2,3".into()],
        ports: vec![PortReport {
            role: "rx".into(),
            name: "net_af_packet1".into(),
            driver: "net_af_packet".into(),
            mtu: 9000,
            link_up: Some(true),
            ipackets: 10,
            opackets: 0,
            imissed: 1,
            ierrors: 0,
            oerrors: 0,
            rx_nombuf: 0,
            xstats: BTreeMap::from([("rx_good_packets".to_string(), 10)]),
        }],
        hugepages: "used existing".into(),
        foreign_frames: 2,
        tx_retries: 3,
        kernel_interfaces: vec![IfCounters {
            name: "dqt1".into(),
            rx_packets: 10,
            rx_dropped: 1,
            tx_packets: 0,
            tx_dropped: 0,
        }],
        packet_sockets: vec![PacketSocketStats {
            iface: "dqt1".into(),
            packets: 11,
            drops: 1,
        }],
        removed: vec!["/dev/hugepages/rtemap_0".into()],
    };
    let mut raw = EngineResult::new("dpdk", Mode::Raw, "veth");
    raw.status = Status::Pass;
    let out = DpdkOutput::new(raw.clone(), Some(details));
    assert_eq!(out.schema, crate::dpdk::OUTPUT_SCHEMA);
    round_trip(&out);
    round_trip(&DpdkOutput::new(raw, None));
    // Details from an engine of another version: what is missing is its default.
    let partial: DpdkDetails =
        serde_json::from_str(r#"{"dpdk_version": "23.11"}"#).expect("lenient details");
    assert_eq!(partial.dpdk_version, "23.11");

    let mut rep = Report::new("host", "RDMA ports mlx5_0:1 -> mlx5_1:1", "unpinned");
    rep.push(full_result());
    let rdma = RdmaReport {
        report: rep.clone(),
        rdma: Some(serde_json::json!([{"transfer": "write", "memory": "host"}])),
    };
    round_trip(&rdma);
    let text = serde_json::to_string(&rdma).expect("json");
    // The section sits beside `results`, as the helper writes it.
    let v: serde_json::Value = serde_json::from_str(&text).expect("json");
    assert_eq!(v["rdma"][0]["transfer"], "write");
    assert_eq!(v["schema"], "daqtune.selftest/v1");
    round_trip(&RdmaReport::<serde_json::Value> {
        report: rep,
        rdma: None,
    });
}

/// Reports written on lent machines (docs/validation-data): the GPU sink's socket run on the
/// H200 and the RDMA helper's report with its `rdma` section on the H100 parse as these types,
/// and written again they are the same bytes (the wire format did not move).
#[test]
fn recorded_reports_parse_and_are_written_again_unchanged() {
    let text = recorded("final-h200/gpusink-copy.json");
    let rep: Report = serde_json::from_str(&text).expect("a self-test report");
    let gpu = rep.results[0].gpu.as_ref().expect("the GPU sink's figures");
    assert_eq!(gpu.memory, MemoryKind::Copy);
    assert!(gpu.totals_agree);
    assert_eq!(rep.to_json() + "\n", text);

    let text = recorded("rdma-memory-h100/selftest-rdma-device.json");
    let rep: RdmaReport = serde_json::from_str(&text).expect("the RDMA helper's report");
    assert_eq!(rep.report.results[0].mode, Mode::Write);
    assert!(rep.rdma.is_some());
    let again = serde_json::to_string_pretty(&rep).expect("json") + "\n";
    assert_eq!(again, text);
}
