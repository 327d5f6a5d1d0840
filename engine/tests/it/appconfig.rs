//! The `app.*` checks (`check --config APP.yaml`) on the fixture roots through the engine's
//! API, with DAQIRI configurations written to DAQIRI's documented schema (tests/configs/), and
//! the profile derived from them. What the command line adds (ids as arguments, exit 2 on a
//! configuration that does not parse) is tested in tune/tests/appconfig.rs.

use crate::common;
use daqtune_testkit::config;

use common::{copy_tree, fixture, msg, status, verdicts};
use daqtune_engine::app_profile::derive_loaded;
use daqtune_engine::appconfig::AppConfig;
use daqtune_engine::context::Context;
use daqtune_engine::gate::{self, FailOn};
use daqtune_engine::tunables::{cmdline::isolation_args, hugepages::hugepage_args};
use daqtune_engine::{commands, hostroot, profile, report};
use serde_json::Value;
use std::path::Path;

/// What `daqtune check --root ROOT --profile PROFILE --config CFG --format json IDS...` reports
/// (the same engine calls), with the exit code its gate gives.
fn evaluate(root: &Path, profile: &str, cfg: &Path, ids: &[&str]) -> (Value, u8) {
    let host = hostroot::open_root(Some(root)).expect("root");
    let lp = commands::load_profile(profile).expect("profile");
    let app = AppConfig::load(cfg).expect("config");
    let only = ids.iter().map(|s| s.to_string()).collect();
    let rep = commands::evaluate_with_app(&host, &lp, only, false, Some(&app));
    let code = gate::exit_code(&rep.checks, FailOn::Fail, false, &lp.profile);
    (
        serde_json::from_str(&report::json(&rep)).expect("json report"),
        code,
    )
}

fn text(name: &str) -> String {
    std::fs::read_to_string(config(name)).expect("config text")
}

/// The 1-based line of the first line of the config containing `needle`.
fn line(name: &str, needle: &str) -> usize {
    text(name)
        .lines()
        .position(|l| l.contains(needle))
        .map(|i| i + 1)
        .unwrap_or_else(|| panic!("`{needle}` not in {name}"))
}

fn check(root: &str, profile: &str, cfg: &str) -> Value {
    let (rep, code) = evaluate(
        &fixture(root),
        profile,
        &config(cfg),
        &[
            "app.config",
            "app.cores",
            "app.memory",
            "app.interfaces",
            "app.sizes",
        ],
    );
    assert!(matches!(code, 0 | 1), "exit {code}");
    rep
}

/// The verdict of `id` whose subject is exactly `FILE:LINE path`.
fn at<'a>(rep: &'a Value, id: &str, cfg: &str, line: usize, path: &str) -> &'a Value {
    let subject = format!("{}:{line} {path}", config(cfg).display());
    rep["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .find(|c| c["id"] == id && c["subject"] == subject.as_str())
        .unwrap_or_else(|| panic!("no {id} verdict for {subject} in {rep:#}"))
}

#[test]
fn the_igx_tuned_by_its_profile_runs_queue_and_worker_cores_apart() {
    // NVIDIA/daqiri c7ddd12 (PR #157): one isolated core per DAQIRI queue plus one per
    // application worker thread (raw 2-queue configs: queues 9/11, workers 8/10), with
    // `isolcpus=8-11 irqaffinity=0-7`. raw_hds_igx uses the same four cores (queues 11 and 8,
    // workers 9 and 10); the igx-tuned root is a host tuned by the igx-orin profile.
    let cfg = "raw_hds_igx.yaml";
    let rep = check("igx-tuned", "igx-orin", cfg);
    let cores = verdicts(&rep, "app.cores");
    assert_eq!(cores.len(), 5, "{cores:#?}");
    for v in cores {
        assert_eq!(status(v), "pass", "{v:#}");
    }
    // Everything else about this configuration fits the tuned IGX.
    for id in ["app.memory", "app.interfaces", "app.sizes"] {
        for v in verdicts(&rep, id) {
            assert_eq!(status(v), "pass", "{v:#}");
        }
    }
}

#[test]
fn a_queue_core_that_is_not_isolated_fails() {
    // The same host booted with the seed's pre-c7ddd12 line (`isolcpus=9-11 irqaffinity=0-8
    // nohz_full=9-11 rcu_nocbs=9-11`): the RX queue on CPU 8 is not isolated.
    let cfg = "raw_hds_igx.yaml";
    let d = tempfile::tempdir().expect("tmp");
    copy_tree(&fixture("igx-tuned"), d.path());
    let r = d.path();
    let cmdline = std::fs::read_to_string(r.join("proc/cmdline")).expect("cmdline");
    let old = cmdline
        .replace("isolcpus=8-11", "isolcpus=9-11")
        .replace("irqaffinity=0-7", "irqaffinity=0-8")
        .replace("nohz_full=8-11", "nohz_full=9-11")
        .replace("rcu_nocbs=8-11", "rcu_nocbs=9-11");
    assert_ne!(old, cmdline, "the fixture's line changed: {cmdline}");
    std::fs::write(r.join("proc/cmdline"), old).expect("w");
    for f in ["isolated", "nohz_full"] {
        std::fs::write(r.join("sys/devices/system/cpu").join(f), "9-11\n").expect("w");
    }
    let (rep, code) = evaluate(
        r,
        "igx-orin",
        &config(cfg),
        &[
            "app.config",
            "app.cores",
            "app.memory",
            "app.interfaces",
            "app.sizes",
        ],
    );
    assert!(matches!(code, 0 | 1), "exit {code}");
    let v = at(
        &rep,
        "app.cores",
        cfg,
        line(cfg, "cpu_core: 8"),
        "interfaces[1].rx.queues[0].cpu_core",
    );
    assert_eq!(status(v), "fail", "{v:#}");
    assert!(
        msg(v).contains("CPU 8 is not isolated (isolcpus=9-11)"),
        "{v:#}"
    );
    assert!(
        v["fix"].as_str().expect("fix").contains("isolcpus=8-11"),
        "{v:#}"
    );
    // The TX queue (11) and the workers (9, 10) are isolated; the master core (3) need not be.
    let v = at(
        &rep,
        "app.cores",
        cfg,
        line(cfg, "cpu_core: 11"),
        "interfaces[0].tx.queues[0].cpu_core",
    );
    assert_eq!(status(v), "pass", "{v:#}");
    assert_eq!(
        status(at(
            &rep,
            "app.cores",
            cfg,
            line(cfg, "cpu_core: 9"),
            "bench_rx.cpu_core"
        )),
        "pass"
    );
    assert_eq!(
        status(at(
            &rep,
            "app.cores",
            cfg,
            line(cfg, "master_core"),
            "master_core"
        )),
        "pass"
    );
    let rep = check("igx-tuned", "igx-orin", cfg);
    // Everything else about this configuration fits the tuned IGX.
    for id in ["app.memory", "app.interfaces", "app.sizes"] {
        for v in verdicts(&rep, id) {
            assert_eq!(status(v), "pass", "{v:#}");
        }
    }
    // Header-data split: the header fits the first region, the payload the second.
    let v = at(
        &rep,
        "app.sizes",
        cfg,
        line(cfg, "payload_size"),
        "bench_tx.payload_size",
    );
    assert!(msg(v).contains("header-data split"), "{v:#}");
}

#[test]
fn untuned_igx_fails_cores_and_hugepages_gpudirect_by_dmabuf() {
    let cfg = "raw_hds_igx.yaml";
    let rep = check("igx-untuned", "igx-orin", cfg);
    for v in verdicts(&rep, "app.cores") {
        if v["subject"].as_str().expect("s").ends_with("master_core") {
            assert_eq!(status(v), "pass");
        } else {
            assert_eq!(status(v), "fail", "{v:#}");
            assert!(msg(v).contains("no isolcpus="), "{v:#}");
        }
    }
    // No hugepages at all: the whole DPDK preflight is missing.
    let v = at(
        &rep,
        "app.memory",
        cfg,
        line(cfg, "memory_regions:"),
        "memory_regions",
    );
    assert_eq!(status(v), "fail");
    assert!(msg(v).contains("0 MiB of hugepages free"), "{v:#}");
    // Device memory without nvidia_peermem: igx-orin takes dma-buf too (NVIDIA/daqiri
    // 3c87196) and this A6000 has it ready (open module, DMA_BUF_SUPPORTED=1, kernel 5.15).
    let v = at(
        &rep,
        "app.memory",
        cfg,
        line(cfg, "name: \"pay_tx\""),
        "memory_regions[1]",
    );
    assert_ne!(status(v), "fail", "{v:#}");
    assert!(msg(v).contains("dma-buf"), "{v:#}");
    // MTU 1500 on the untuned ports: 1522-byte IP packets do not fit.
    let v = verdicts(&rep, "app.sizes")
        .into_iter()
        .find(|v| status(v) == "warn")
        .expect("MTU warning");
    assert!(msg(v).contains("MTU 1500"), "{v:#}");
}

#[test]
fn device_region_on_spark_fails_with_host_pinned_advice() {
    let cfg = "raw_spark_device.yaml";
    let rep = check("spark", "dgx-spark", cfg);
    let v = at(
        &rep,
        "app.memory",
        cfg,
        line(cfg, "name: tx_buf"),
        "memory_regions[0]",
    );
    assert_eq!(status(v), "fail", "{v:#}");
    assert!(msg(v).contains("integrated NVIDIA GB10"), "{v:#}");
    assert!(msg(v).contains("host_pinned"), "{v:#}");
    let fix = v["fix"].as_str().expect("fix");
    // The fix names the exact line of the region's kind.
    let kind_line = text(cfg)
        .lines()
        .enumerate()
        .skip(line(cfg, "name: tx_buf"))
        .find(|(_, l)| l.contains("kind: device"))
        .map(|(i, _)| i + 1)
        .expect("kind line");
    assert!(
        fix.contains(&format!(":{kind_line}: set `kind: host_pinned`")),
        "{fix}"
    );
}

#[test]
fn host_pinned_on_spark_passes_and_unquoted_addresses_are_strings() {
    let cfg = "raw_spark_pinned.yaml";
    let rep = check("spark", "dgx-spark", cfg);
    for v in rep["checks"].as_array().expect("checks") {
        assert_eq!(status(v), "pass", "{v:#}");
    }
    // `address: 0000:01:00.0`, unquoted in the file, is read as the PCI address string.
    let v = at(
        &rep,
        "app.interfaces",
        cfg,
        line(cfg, "address: 0000:01:00.0"),
        "interfaces[0].address",
    );
    assert!(
        msg(v).starts_with("0000:01:00.0 is 0000:01:00.0 (enp1s0f0np0"),
        "{v:#}"
    );
    let v = at(
        &rep,
        "app.memory",
        cfg,
        line(cfg, "name: rx_buf"),
        "memory_regions[1]",
    );
    assert!(
        msg(v).contains("the right kind on the integrated NVIDIA GB10"),
        "{v:#}"
    );
}

#[test]
fn hugepages_above_what_is_free_fail_with_the_number_missing() {
    let cfg = "raw_big_huge.yaml";
    let rep = check("igx-tuned", "igx-orin", cfg);
    // DAQIRI's accounting: two regions of 600000 x (9000 + 128) B in 64 KiB units, 32 MiB per
    // pool (2 regions + 1 dummy TX queue), the dummy queue's 32768 x 9100 B, 64 MiB of EAL.
    let mib = 1024 * 1024u64;
    let region = (600_000u64 * 9128).div_ceil(65536) * 65536;
    let total = 2 * region + 3 * 32 * mib + 32768 * 9100 + 64 * mib;
    let missing = (total - 4096 * mib).div_ceil(mib);
    let v = at(
        &rep,
        "app.memory",
        cfg,
        line(cfg, "memory_regions:"),
        "memory_regions",
    );
    assert_eq!(status(v), "fail", "{v:#}");
    assert!(
        msg(v).contains(&format!("{missing} MiB missing")),
        "{v:#} vs {missing}"
    );
    // Per node: both huge regions on node 0 with their pool overhead.
    let node_missing = (2 * region + 2 * 32 * mib - 4096 * mib).div_ceil(mib);
    let v = at(
        &rep,
        "app.memory",
        cfg,
        line(cfg, "name: ring_a"),
        "memory_regions[0]",
    );
    assert_eq!(status(v), "fail");
    assert!(
        msg(v).contains(&format!("{node_missing} MiB missing")),
        "{v:#}"
    );
    assert!(v["fix"]
        .as_str()
        .expect("fix")
        .contains("/sys/devices/system/node/node0/hugepages/hugepages-1048576kB/nr_hugepages"));
}

#[test]
fn placeholders_are_reported_with_their_line() {
    let cfg = "raw_template.yaml";
    let rep = check("igx-tuned", "igx-orin", cfg);
    let v = at(
        &rep,
        "app.config",
        cfg,
        line(cfg, "<0000:00:00.0>"),
        "interfaces[0].address",
    );
    assert_eq!(status(v), "fail");
    assert_eq!(msg(v), "unreplaced placeholder `<0000:00:00.0>`");
    // The fix lists this host's ConnectX functions.
    assert!(
        v["fix"]
            .as_str()
            .expect("fix")
            .contains("0005:03:00.0 (cx7_0, mlx5_0)"),
        "{v:#}"
    );
    let v = at(
        &rep,
        "app.config",
        cfg,
        line(cfg, "<CPU_CORE>"),
        "interfaces[0].rx.queues[0].cpu_core",
    );
    assert_eq!(status(v), "fail");
    // The checks that need the value skip it rather than guess.
    let v = at(
        &rep,
        "app.cores",
        cfg,
        line(cfg, "<CPU_CORE>"),
        "interfaces[0].rx.queues[0].cpu_core",
    );
    assert_eq!(status(v), "skip");
    // A placeholder left in a filled-in file (raw_hds_igx's bench_tx.eth_dst_addr).
    let cfg = "raw_hds_igx.yaml";
    let rep = check("igx-tuned", "igx-orin", cfg);
    let v = at(
        &rep,
        "app.config",
        cfg,
        line(cfg, "eth_dst_addr"),
        "bench_tx.eth_dst_addr",
    );
    assert_eq!(status(v), "fail");
}

#[test]
fn socket_udp_addresses_on_spark() {
    let cfg = "socket_udp_spark.yaml";
    let rep = check("spark", "dgx-spark", cfg);
    // DAQIRI's TCP/UDP engine does not pin its queue threads: those cores are n/a, the rest
    // passes.
    for v in rep["checks"].as_array().expect("checks") {
        let queue = v["subject"].as_str().expect("s").contains(".queues[");
        let want = if v["id"] == "app.cores" && queue {
            "n/a"
        } else {
            "pass"
        };
        assert_eq!(status(v), want, "{v:#}");
    }
    let v = at(
        &rep,
        "app.interfaces",
        cfg,
        line(cfg, "address: 2.2.2.2"),
        "interfaces[0].address",
    );
    // daqiri-rx on p1 of domain 0002 since NVIDIA/daqiri PR #108.
    assert!(msg(v).contains("2.2.2.2 is on enP2p1s0f1np1"), "{v:#}");
    let v = at(
        &rep,
        "app.cores",
        cfg,
        line(cfg, "cpu_core: 16"),
        "interfaces[0].rx.queues[0].cpu_core",
    );
    assert!(msg(v).contains("does not pin"), "{v:#}");
    let v = at(
        &rep,
        "app.cores",
        cfg,
        line(cfg, "cpu_core: 18"),
        "socket_bench_server.cpu_core",
    );
    assert_eq!(status(v), "pass");
    // On the untuned IGX these addresses are nowhere.
    let rep = check("igx-untuned", "igx-orin", cfg);
    let v = at(
        &rep,
        "app.interfaces",
        cfg,
        line(cfg, "address: 1.1.1.1"),
        "interfaces[1].address",
    );
    assert_eq!(status(v), "fail");
    assert!(
        msg(v).contains("not configured on any netdev in this network namespace"),
        "{v:#}"
    );
}

#[test]
fn socket_tcp_on_the_far_numa_node() {
    let cfg = "socket_tcp_x86.yaml";
    let rep = check("x86-2s", "generic-dgpu", cfg);
    // ens1f0np0 is on node 1, the isolated CPUs 2-5 on node 0.
    let v = at(
        &rep,
        "app.cores",
        cfg,
        line(cfg, "cpu_core: 3"),
        "socket_bench_client.cpu_core",
    );
    assert_eq!(status(v), "warn", "{v:#}");
    assert!(msg(v).contains("not on NUMA node 1"), "{v:#}");
    let v = at(
        &rep,
        "app.interfaces",
        cfg,
        line(cfg, "address: 10.200.0.1"),
        "interfaces[0].address",
    );
    assert_eq!(status(v), "pass");
    // 128 KiB messages into 64 KiB buffers.
    let v = at(
        &rep,
        "app.sizes",
        cfg,
        line(cfg, "message_size"),
        "socket_bench_client.message_size",
    );
    assert_eq!(status(v), "fail");
    assert!(
        msg(v).contains("message_size 131072 does not fit buf_size 65536"),
        "{v:#}"
    );
}

#[test]
fn rdma_needs_the_address_on_an_rdma_netdev() {
    let cfg = "rdma_igx.yaml";
    let rep = check("igx-tuned", "igx-orin", cfg);
    let v = at(
        &rep,
        "app.interfaces",
        cfg,
        line(cfg, "address: 10.100.3.1"),
        "interfaces[1].address",
    );
    assert_eq!(status(v), "pass");
    assert!(msg(v).contains("RDMA device mlx5_1"), "{v:#}");
    // Both benchmark workers on CPU 11.
    let v = at(
        &rep,
        "app.cores",
        cfg,
        line(cfg, "cpu_core: 11"),
        "rdma_bench_server.cpu_core",
    );
    assert_eq!(status(v), "fail");
    assert!(
        msg(v).contains("shares CPU 11 with the `rdma_bench_client` worker"),
        "{v:#}"
    );
    let rep = check("igx-untuned", "igx-orin", cfg);
    let v = at(
        &rep,
        "app.interfaces",
        cfg,
        line(cfg, "address: 10.100.3.1"),
        "interfaces[1].address",
    );
    assert_eq!(status(v), "fail");
}

/// What `plan --config` proposes on an untuned root: the derived profile's kernel arguments.
#[test]
fn derived_profile_on_an_untuned_root() {
    let host = daqtune_engine::hostroot::open_root(Some(&fixture("igx-untuned"))).expect("root");
    let base = profile::load("igx-orin").expect("profile");
    let ctx = Context::new(&host, &base);

    let app = AppConfig::load(&config("raw_hds_igx.yaml")).expect("config");
    let (derived, notes) = derive_loaded(&app, &base, &ctx);
    let dctx = Context::new(&host, &derived);
    let iso = isolation_args(&dctx).expect("isolation");
    // Exactly the queue (8, 11) and worker (9, 10) cores; the master core (3) stays out.
    assert_eq!(
        iso,
        vec![
            "isolcpus=8-11",
            "irqaffinity=0-7",
            "nohz_full=8-11",
            "rcu_nocbs=8-11",
            "rcu_nocb_poll"
        ]
    );
    // 837 MiB of DAQIRI's DPDK preflight -> one 1 GiB page.
    let est = daqtune_engine::appconfig::estimate::hugepages(&app);
    assert_eq!(
        hugepage_args(&dctx),
        vec!["default_hugepagesz=1G", "hugepagesz=1G", "hugepages=1"]
    );
    assert!(
        est.total <= 1 << 30 && est.total > 512 << 20,
        "{}",
        est.total
    );
    // 1536-byte frames need IP MTU 1522; the profile's 9000 already carries them.
    assert_eq!(derived.profile.nic.mtu, 9000);
    assert_eq!(derived.profile.nic.interfaces, vec!["cx7_0", "cx7_1"]);
    assert!(
        notes.iter().any(|n| n.contains("isolated CPUs 8-11")),
        "{notes:?}"
    );

    // A configuration that needs more than the defaults: 11 x 1G pages.
    let app = AppConfig::load(&config("raw_big_huge.yaml")).expect("config");
    let (derived, _) = derive_loaded(&app, &base, &ctx);
    let dctx = Context::new(&host, &derived);
    assert_eq!(hugepage_args(&dctx)[2], "hugepages=11");
    assert_eq!(isolation_args(&dctx).expect("iso")[0], "isolcpus=10-11");
}

#[test]
fn derived_mtu_grows_for_jumbo_frames() {
    let host = daqtune_engine::hostroot::open_root(Some(&fixture("spark"))).expect("root");
    let mut base = profile::load("dgx-spark").expect("profile");
    base.profile.nic.mtu = 1500;
    let ctx = Context::new(&host, &base);
    let app = AppConfig::load(&config("raw_spark_pinned.yaml")).expect("config");
    let (derived, notes) = derive_loaded(&app, &base, &ctx);
    // 64 + 8000 B frames: 8050-byte IP packets.
    assert_eq!(derived.profile.nic.mtu, 8050, "{notes:?}");
    assert_eq!(
        derived.profile.nic.interfaces,
        vec!["enp1s0f0np0", "enP2p1s0f1np1"]
    );
    // No kind: huge region, but DPDK's EAL and pools still need hugepages.
    assert_eq!(
        hugepage_args(&Context::new(&host, &derived))[2],
        "hugepages=1"
    );
}

#[test]
fn device_regions_beyond_bar1_fail() {
    // 60000 x 120000 B of GPU memory: 6.7 GiB with DPDK's headroom, which needs a BAR1 of
    // 8.4 GiB (registrations under 80 %); the tuned IGX's A6000 has 8 GiB.
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = dir.path().join("gpu.yaml");
    std::fs::write(
        &cfg,
        "daqiri:\n  cfg:\n    version: 1\n    stream_type: raw\n    master_core: 3\n    memory_regions:\n    - name: frames\n      kind: device\n      affinity: 0\n      num_bufs: 60000\n      buf_size: 120000\n    interfaces:\n    - name: rx\n      address: 0005:03:00.0\n      rx:\n        queues:\n        - name: q\n          id: 0\n          cpu_core: 9\n          batch_size: 1024\n          memory_regions: [frames]\n",
    )
    .expect("write");
    let (rep, _) = evaluate(&fixture("igx-tuned"), "igx-orin", &cfg, &["app.memory"]);
    let subject = format!("{}:7 memory_regions[0]", cfg.display());
    let v = verdicts(&rep, "app.memory")
        .into_iter()
        .find(|v| v["subject"] == subject.as_str())
        .expect("region verdict");
    assert_eq!(status(v), "fail", "{v:#}");
    let bytes = (60_000u64 * 120_128).div_ceil(65536) * 65536;
    let need = (bytes * 5).div_ceil(4).div_ceil(1 << 20);
    assert!(
        msg(v).contains(&format!("needs BAR1 >= {need} MiB")),
        "{v:#}"
    );
    assert!(msg(v).contains("BAR1 is 8192 MiB"), "{v:#}");
}

#[test]
fn absurd_values_do_not_crash_the_checks() {
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = dir.path().join("absurd.yaml");
    std::fs::write(
        &cfg,
        "daqiri:\n  cfg:\n    version: 1\n    stream_type: raw\n    master_core: 99999\n    memory_regions:\n    - name: a\n      kind: huge\n      affinity: 4294967296\n      num_bufs: 9223372036854775807\n      buf_size: 9223372036854775807\n    - name: b\n      kind: device\n      affinity: -3\n      num_bufs: 9223372036854775807\n      buf_size: 9223372036854775807\n    interfaces:\n    - name: x\n      address: zzzz:zz:zz.z\n      rx:\n        queues:\n        - name: q\n          id: 0\n          cpu_core: -7\n          memory_regions: [a, b]\n        flows:\n        - name: f\n          id: 0\n          action: {type: queue, id: 0}\n          match: {ipv4_len: 9223372036854775807}\nbench_tx:\n  interface_name: x\n  cpu_core: 4294967297\n  header_size: 9223372036854775807\n  payload_size: 9223372036854775807\n  message_size: 9223372036854775807\n",
    )
    .expect("write");
    for (root, prof) in [
        ("igx-tuned", "igx-orin"),
        ("spark", "dgx-spark"),
        ("x86-2s", "generic-dgpu"),
    ] {
        let (rep, code) = evaluate(&fixture(root), prof, &cfg, &[]);
        assert_eq!(code, 1, "{rep:#}");
        for v in rep["checks"].as_array().expect("checks") {
            assert_ne!(status(v), "error", "{v:#}");
        }
        // A core number beyond u32 is not silently truncated to another CPU: past NR_CPUS it
        // is out of range where the configuration is read (issue 42 row 6).
        let v = verdicts(&rep, "app.cores")
            .into_iter()
            .find(|v| {
                v["subject"]
                    .as_str()
                    .expect("s")
                    .ends_with("bench_tx.cpu_core")
            })
            .expect("worker verdict");
        assert!(
            msg(v).contains("`4294967297` is not 0 .. 8191 (a CPU number)"),
            "{v:#}"
        );
    }
}

/// NVML sees the GB10 but the CUDA driver cannot be used: cudaHostAlloc would fail, so a
/// host_pinned region is not judged (it passed on the GPU list alone).
#[test]
fn host_pinned_without_cuda_is_not_a_pass() {
    let dir = tempfile::tempdir().expect("tmp");
    copy_tree(&fixture("spark"), dir.path());
    let facts = dir.path().join("daqtune/gpu.json");
    let mut v: Value =
        serde_json::from_str(&std::fs::read_to_string(&facts).expect("facts")).expect("json");
    v["cuda"] = serde_json::json!({"status": "unavailable", "reason": "libcuda.so.1: cannot open shared object file"});
    std::fs::write(&facts, v.to_string()).expect("write facts");
    let cfg = "raw_spark_pinned.yaml";
    let (rep, _) = evaluate(dir.path(), "dgx-spark", &config(cfg), &["app.memory"]);
    let r = at(
        &rep,
        "app.memory",
        cfg,
        line(cfg, "name: rx_buf"),
        "memory_regions[1]",
    );
    assert_eq!(status(r), "skip", "{r:#}");
    assert!(msg(r).contains("libcuda.so.1"), "{r:#}");
}
