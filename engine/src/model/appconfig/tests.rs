use super::estimate::MIB;
use super::*;
use proptest::prelude::*;
use serde_yaml_ng::Value;

/// The 1-based line of the first line containing `needle` (an independent way to find the
/// line the locator must report).
fn line_of(text: &str, needle: &str) -> usize {
    text.lines()
        .position(|l| l.contains(needle))
        .map(|i| i + 1)
        .unwrap_or_else(|| panic!("`{needle}` not in the text"))
}

const RAW: &str = r#"%YAML 1.2
---
daqiri:
  cfg:
    version: 1
    stream_type: "raw"
    master_core: 3
    memory_regions:
    - name: "hdr"
      kind: huge
      affinity: 0
      num_bufs: 51200
      buf_size: 64
    - name: "pay"
      kind: device
      affinity: 0
      num_bufs: "51200"
      buf_size: 1000
    interfaces:
    - name: tx_port
      address: 0000:01:00.0
      tx:
        queues:
        - name: q
          id: 0
          cpu_core: 11
          batch_size: 10
          memory_regions: [hdr, pay]
    - name: rx_port
      address: 01:00.1
      rx:
        queues:
        - name: q
          id: 0
          cpu_core: "9"
          batch_size: 10
          memory_regions:
            - hdr
            - pay
        flows:
        - name: f
          id: 0
          action: {type: queue, id: 0}
          match: {udp_src: 4096, ipv4_len: 1050}
bench_rx:
  interface_name: rx_port
  cpu_core: 8
bench_tx:
  interface_name: tx_port
  cpu_core: 10
  header_size: 64
  payload_size: 1000
"#;

#[test]
fn unquoted_pci_addresses_stay_strings() {
    let a = AppConfig::parse("APP.yaml", RAW).expect("parse");
    // YAML 1.1 would read `01:00.1`'s `01:00` as base-60; YAML 1.2 keeps the text.
    assert_eq!(a.interfaces[0].address(), Some("0000:01:00.0"));
    assert_eq!(a.interfaces[1].address(), Some("01:00.1"));
    let f = a.interfaces[0].address.as_ref().expect("address");
    assert_eq!(f.line, line_of(RAW, "address: 0000:01:00.0"));
    assert_eq!(f.path, "interfaces[0].address");
    // The raw value too, before any of our conversions.
    let v: Value = serde_yaml_ng::from_str("a: 0000:01:00.0\nb: 1:20\nc: 01:00\n").expect("yaml");
    assert_eq!(v["a"].as_str(), Some("0000:01:00.0"));
    assert_eq!(v["b"].as_str(), Some("1:20"));
    assert_eq!(v["c"].as_str(), Some("01:00"));
}

#[test]
fn fields_keep_their_lines() {
    let a = AppConfig::parse("APP.yaml", RAW).expect("parse");
    assert!(a.problems.is_empty(), "{:?}", a.problems);
    assert_eq!(a.engine, Engine::Dpdk);
    let mc = a.master_core.as_ref().expect("master");
    assert_eq!(
        (mc.line, mc.value.clone()),
        (line_of(RAW, "master_core"), Ok(3))
    );
    let q = &a.interfaces[1].queues[0];
    let cc = q.cpu_core.as_ref().expect("core");
    assert_eq!(cc.path, "interfaces[1].rx.queues[0].cpu_core");
    assert_eq!(cc.line, line_of(RAW, "cpu_core: \"9\""));
    // yaml-cpp reads "9" as 9; so do we.
    assert_eq!(cc.value, Ok(9));
    assert_eq!(q.regions, vec!["hdr", "pay"]);
    assert_eq!(a.regions[1].num_bufs(), Some(51200));
    assert_eq!(a.regions[1].kind(), Some(MemKind::Device));
    assert_eq!(a.regions[1].line, line_of(RAW, "name: \"pay\""));
    let fl = &a.interfaces[1].flows[0];
    assert_eq!(fl.ipv4_len.value, Ok(1050));
    assert_eq!(fl.ipv4_len.line, line_of(RAW, "ipv4_len"));
    assert_eq!(fl.queues, vec![0]);
    assert_eq!(a.workers.len(), 2);
    assert_eq!(a.workers[0].path, "bench_rx");
    assert_eq!(a.workers[0].cpu_core.line, line_of(RAW, "cpu_core: 8"));
    assert_eq!(
        a.workers[1]
            .payload_size
            .as_ref()
            .and_then(|f| f.ok().copied()),
        Some(1000)
    );
    assert_eq!(
        a.worker_interface(&a.workers[1]).map(|i| i.name.as_str()),
        Some("tx_port")
    );
    assert_eq!(a.subject(42, "x"), "APP.yaml:42 x");
}

#[test]
fn placeholders_are_reported_with_their_lines() {
    let text = "daqiri:\n  cfg:\n    version: 1\n    stream_type: raw\n    master_core: 3\n    interfaces:\n    - name: p\n      address: <0000:00:00.0>\n      rx:\n        queues:\n        - name: q\n          cpu_core: <CPU_CORE>\n          batch_size: 1\nbench_tx:\n  interface_name: p\n  cpu_core: 4\n  eth_dst_addr: <00:00:00:00:00:00>\n  ip_dst_addr: \"udp://<IP>:5000\"\n";
    let a = AppConfig::parse("t.yaml", text).expect("parse");
    let ph: Vec<(usize, &str, &str)> = a
        .problems
        .iter()
        .filter(|p| p.placeholder)
        .map(|p| (p.line, p.path.as_str(), p.message.as_str()))
        .collect();
    assert_eq!(
        ph,
        vec![
            (
                8,
                "interfaces[0].address",
                "unreplaced placeholder `<0000:00:00.0>`"
            ),
            (
                12,
                "interfaces[0].rx.queues[0].cpu_core",
                "unreplaced placeholder `<CPU_CORE>`"
            ),
            (
                17,
                "bench_tx.eth_dst_addr",
                "unreplaced placeholder `<00:00:00:00:00:00>`"
            ),
            (18, "bench_tx.ip_dst_addr", "unreplaced placeholder `<IP>`"),
        ]
    );
    // The typed fields carry the placeholder instead of a value, and no duplicate problem.
    let cc = a.interfaces[0].queues[0].cpu_core.as_ref().expect("core");
    assert_eq!(cc.value, Err(Bad::Placeholder("<CPU_CORE>".into())));
    assert_eq!(a.problems.len(), 4, "{:?}", a.problems);
}

#[test]
fn schema_problems() {
    let text = "daqiri:\n  cfg:\n    version: 2\n    stream_type: rawest\n    memory_regions:\n    - name: a\n      kind: HUGE\n      affinity: 0\n      num_bufs: -5\n    interfaces:\n    - name: p\n      address: 0000:01:00.0\n      tx:\n        queues:\n        - name: q\n          cpu_core: nine\n          memory_regions: [a, nope]\n";
    let a = AppConfig::parse("t.yaml", text).expect("parse");
    let msgs: Vec<String> = a
        .problems
        .iter()
        .map(|p| format!("{}:{} {}", p.line, p.path, p.message))
        .collect();
    let has = |s: &str| msgs.iter().any(|m| m.contains(s));
    assert!(
        has("3:version version `2`: DAQIRI accepts only 1"),
        "{msgs:?}"
    );
    assert!(
        has("4:stream_type `rawest` is not raw or socket"),
        "{msgs:?}"
    );
    assert!(has("master_core missing"), "{msgs:?}");
    assert!(
        has("7:memory_regions[0].kind `HUGE` is not a memory kind"),
        "{msgs:?}"
    );
    assert!(
        has("9:memory_regions[0].num_bufs `-5` is not a non-negative integer"),
        "{msgs:?}"
    );
    assert!(has("memory_regions[0].buf_size missing"), "{msgs:?}");
    assert!(
        has("16:interfaces[0].tx.queues[0].cpu_core `nine` is not an integer"),
        "{msgs:?}"
    );
    assert!(
        has("17:interfaces[0].tx.queues[0].memory_regions[1] names memory region `nope`"),
        "{msgs:?}"
    );
}

#[test]
fn document_errors_have_positions() {
    let e = AppConfig::parse("bad.yaml", "daqiri:\n  cfg: [unclosed\n").unwrap_err();
    assert_eq!(e.file, "bad.yaml");
    assert!(e.line >= 2, "{e}");
    let e = AppConfig::parse("list.yaml", "- a\n- b\n").unwrap_err();
    assert!(e.message.contains("mapping"), "{e}");
    // Empty and null documents are not configurations either.
    assert!(AppConfig::parse("e.yaml", "").is_err());
    assert!(AppConfig::parse("n.yaml", "~").is_err());
}

#[test]
fn root_without_daqiri_key_is_the_network_node() {
    let text = "version: 1\nstream_type: socket\nmaster_core: 2\ninterfaces:\n- name: s\n  address: 127.0.0.1\n  socket_config:\n    mode: server\n    local_addr: \"udp://127.0.0.1:5000\"\n  rx:\n    queues:\n    - name: q\n      cpu_core: 5\n";
    let a = AppConfig::parse("r.yaml", text).expect("parse");
    assert_eq!(a.interfaces[0].transport, Transport::Udp);
    assert_eq!(a.engine, Engine::Socket);
    assert_eq!(
        a.interfaces[0].queues[0].cpu_core.as_ref().map(|f| f.line),
        Some(13)
    );
    assert!(a.workers.is_empty());
}

#[test]
fn endpoints() {
    let e = Endpoint::parse("roce://10.100.1.1").expect("roce");
    assert_eq!(
        (e.transport(), e.host.as_str(), e.port),
        (Transport::Roce, "10.100.1.1", None)
    );
    let e = Endpoint::parse("udp://10.0.0.2:5021").expect("udp");
    assert_eq!((e.transport(), e.port), (Transport::Udp, Some(5021)));
    let e = Endpoint::parse("rdma://1.2.3.4:4096?engine=ibverbs").expect("legacy");
    assert_eq!((e.transport(), e.port), (Transport::Roce, Some(4096)));
    let e = Endpoint::parse("tcp://[fe80::1]:80").expect("v6");
    assert_eq!(e.host, "fe80::1");
    assert!(Endpoint::parse("10.0.0.1:5").is_none());
    assert!(Endpoint::parse("udp://:5").is_none());
    assert!(Endpoint::parse("udp://h:notaport").is_none());
}

#[test]
fn placeholder_finder() {
    assert_eq!(find_placeholder("<CPU_CORE>"), Some("<CPU_CORE>"));
    assert_eq!(find_placeholder("udp://<IP>:5"), Some("<IP>"));
    assert_eq!(find_placeholder("<PCIe BDF>"), Some("<PCIe BDF>"));
    assert_eq!(find_placeholder("a << b <x>"), Some("<x>"));
    assert_eq!(find_placeholder("a <> b"), None);
    assert_eq!(find_placeholder("1 < 2"), None);
    assert_eq!(find_placeholder("plain"), None);
}

#[test]
fn dpdk_hugepage_estimate_matches_daqiri_accounting() {
    let a = AppConfig::parse("APP.yaml", RAW).expect("parse");
    let e = estimate::hugepages(&a);
    // 51200 x (64 + 128) rounded to 64 KiB, on node 0.
    let hdr = (51200u64 * 192).div_ceil(65536) * 65536;
    assert_eq!(e.huge_regions, 1);
    assert_eq!(e.huge_bytes, hdr);
    // Two regions (huge and device), plus one dummy pool per interface missing a direction.
    assert_eq!(e.dummy_queues, 2);
    assert_eq!(e.pools, 4);
    assert_eq!(e.pool_overhead, 4 * 32 * MIB);
    assert_eq!(e.dummy_bytes, 2 * 32768 * 9100);
    assert_eq!(e.eal_bytes, 64 * MIB);
    assert_eq!(e.total, hdr + 4 * 32 * MIB + 2 * 32768 * 9100 + 64 * MIB);
    assert_eq!(e.per_node.get(&0), Some(&(hdr + 32 * MIB)));
    let dev = estimate::device_bytes(&a);
    assert_eq!(
        dev.get(&0),
        Some(&((51200u64 * 1128).div_ceil(65536) * 65536))
    );
}

#[test]
fn small_queue_regions_are_bumped_like_daqiri() {
    let text = RAW.replace("num_bufs: 51200", "num_bufs: 1000");
    let a = AppConfig::parse("APP.yaml", &text).expect("parse");
    assert_eq!(estimate::effective_num_bufs(&a, &a.regions[0]), Some(24576));
    // The socket engine does not bump.
    let s = text.replace("stream_type: \"raw\"", "stream_type: \"socket\"");
    let a = AppConfig::parse("APP.yaml", &s).expect("parse");
    assert_eq!(estimate::effective_num_bufs(&a, &a.regions[0]), Some(1000));
    assert_eq!(estimate::hugepages(&a).eal_bytes, 0);
}

#[test]
fn engine_padding() {
    assert_eq!(estimate::adj_size(Engine::Dpdk, MemKind::Huge, 1000), 1128);
    assert_eq!(
        estimate::adj_size(Engine::Ibverbs, MemKind::Huge, 1000),
        1024
    );
    assert_eq!(
        estimate::adj_size(Engine::Rdma, MemKind::HostPinned, 9_000_000),
        9_043_968
    );
    assert_eq!(
        estimate::adj_size(Engine::Socket, MemKind::Host, 2048),
        2048
    );
    assert_eq!(estimate::bar1_needed(800), 1000);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn any_text_never_panics(s in "\\PC{0,200}") {
        let _ = AppConfig::parse("p.yaml", &s);
        let _ = locate::LineIndex::build(&s);
    }

    #[test]
    fn parsing_never_panics(s in "[ a-z0-9:\\-\\[\\]{}<>\"'#|.\n]{0,200}") {
        let _ = AppConfig::parse("p.yaml", &s);
        let _ = locate::LineIndex::build(&s);
    }

    /// Whatever block-style document we generate, every key the locator places is on the
    /// line where the key is written.
    #[test]
    fn located_lines_hold_the_key(
        keys in proptest::collection::vec(("[a-z]{1,6}", 0usize..3, any::<bool>()), 1..20)
    ) {
        let mut text = String::new();
        let mut depth = 0usize;
        for (k, d, item) in &keys {
            let d = (*d).min(depth);
            let indent = "  ".repeat(d);
            if *item {
                text.push_str(&format!("{indent}- {k}: 1\n"));
            } else {
                text.push_str(&format!("{indent}{k}:\n"));
                depth = d + 1;
            }
        }
        let idx = locate::LineIndex::build(&text);
        let lines: Vec<&str> = text.lines().collect();
        for (k, _, _) in &keys {
            // Every path ending in this key points at a line that writes it.
            for (path, pos) in idx.debug_entries() {
                if path.rsplit(['.', ']']).next() == Some(k.as_str()) {
                    prop_assert!(lines[pos.line - 1].contains(&format!("{k}:")), "{path} -> {:?}\n{text}", pos);
                }
            }
        }
    }
}

/// One derivation of the data-path interfaces (issue 18): a socket interface named only by its
/// `local_addr` is found by the app.* checks and by `--config`'s derived profile alike. (Before,
/// the derivation read `address` alone, so `plan --config` fell back to every ConnectX port.)
#[test]
fn local_addr_only_interfaces_are_data_path_interfaces() {
    use crate::model::context::Context;
    let base = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let text =
        std::fs::read_to_string(base.join("tests/configs/socket_udp_spark.yaml")).expect("config");
    // The same configuration with the interfaces named by their local addresses only.
    let text: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("address:"))
        .map(|l| format!("{l}\n"))
        .collect();
    let app = AppConfig::parse("socket_udp_spark.yaml", &text).expect("parse");
    assert!(app.interfaces.iter().all(|i| i.address.is_none()));
    let host = daqtune_probe::Host::at(base.join("tests/fixtures/spark")).expect("root");
    let facts = crate::model::facts::Facts::new(&host);
    let lp = crate::model::profile::load("dgx-spark").expect("profile");
    let ctx = Context::with_facts(&facts, &lp).with_app(Some(&app));
    // What app.interfaces finds: each local_addr on its port.
    let found: Vec<String> = (crate::tunables::app::INTERFACES.check)(&ctx)
        .into_iter()
        .filter(|v| v.subject.ends_with("local_addr"))
        .map(|v| {
            assert_eq!(v.status, crate::model::verdict::Status::Pass, "{v:?}");
            v.message
        })
        .collect();
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(
        found[0].starts_with("2.2.2.2 is on enP2p1s0f1np1"),
        "{}",
        found[0]
    );
    assert!(
        found[1].starts_with("1.1.1.1 is on enp1s0f0np0"),
        "{}",
        found[1]
    );
    // ... and the derived profile's data-path interfaces are those ports, not every ConnectX
    // port of the Spark (four PFs).
    let d = crate::tunables::app_profile::derive_profile(&app, &lp.profile, &ctx);
    assert_eq!(d.profile.nic.interfaces, ["enP2p1s0f1np1", "enp1s0f0np0"]);
    assert!(
        d.notes
            .iter()
            .any(|n| n.contains("data-path interfaces enP2p1s0f1np1, enp1s0f0np0")),
        "{:?}",
        d.notes
    );
}

/// The red-team configuration: one interface with `n` rx queues.
fn many_queues(n: usize) -> String {
    let mut t = String::from(
        "daqiri:\n  cfg:\n    version: 1\n    stream_type: raw\n    master_core: 3\n    interfaces:\n    - name: p\n      address: 0000:01:00.0\n      rx:\n        queues:\n",
    );
    for q in 0..n {
        t.push_str(&format!(
            "        - name: q{q}\n          id: {q}\n          cpu_core: 5\n          batch_size: 1\n"
        ));
    }
    t
}

#[test]
fn forty_thousand_queues_refused_at_the_list() {
    let e = AppConfig::parse("q.yaml", &many_queues(40_000)).expect_err("refused");
    assert_eq!(e.line, 11 + 4 * 4096, "{e:?}");
    assert!(e.message.contains("more than 4096 entries"), "{e:?}");
    // Up to the bound it parses.
    let a = AppConfig::parse("q.yaml", &many_queues(1024)).expect("1024 queues");
    assert_eq!(a.interfaces[0].queues.len(), 1024);
}

#[test]
fn nesting_bomb_refused() {
    let text = format!("daqiri:\n  cfg:\n    version: {}\n", "[".repeat(100_000));
    let e = AppConfig::parse("n.yaml", &text).expect_err("refused");
    assert_eq!(e.line, 3);
    assert!(e.message.contains("nested more than 32 levels"), "{e:?}");
}

#[test]
fn integer_out_of_range_is_said() {
    let text = "daqiri:\n  cfg:\n    version: 1\n    stream_type: raw\n    master_core: 18446744073709551615\n";
    let a = AppConfig::parse("t.yaml", text).expect("parse");
    let p = a
        .problems
        .iter()
        .find(|p| p.path == "master_core")
        .expect("master_core problem");
    assert_eq!(
        p.message,
        "`18446744073709551615` is out of range (at most 9223372036854775807)"
    );
}

#[test]
fn the_spark_example_needs_pr58s_overheads_not_its_buffers() {
    // DAQIRI issue #56 was hit on the Spark raw example: two host_pinned regions (extbuf pools,
    // nothing of the buffers in hugepages), a TX-only and an RX-only port. PR #58 (3eb6151)
    // counts, per `estimate_required_hugepages`: 32 MiB per pool (both regions and both dummy
    // queues), a 32768 x 9100 B dummy region for each port's missing direction, and EAL's
    // 64 MiB. Buffer count x size alone gives 0 here.
    let base = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let app = AppConfig::load(&base.join("tests/configs/raw_spark_pinned.yaml")).expect("config");
    let e = estimate::hugepages(&app);
    assert_eq!(e.huge_bytes, 0);
    assert_eq!((e.pools, e.dummy_queues), (4, 2));
    assert_eq!(
        e.total,
        4 * 32 * MIB + 2 * 32768 * 9100 + 64 * MIB,
        "{}",
        e.breakdown()
    );
    // ~761 MiB: PR #58's preflight passes the kernel-default 1024 x 2 MiB that issue #56 saw
    // fail; its own comment says passing "does NOT guarantee init will succeed". The tutorial
    // since PR #58 reserves 4 x 1 GiB for this example (docs/checks/app.memory.md).
    assert!(e.total < 1024 * 2 * MIB);
}
