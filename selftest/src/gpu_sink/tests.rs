use super::*;
use crate::payload::Generator;

fn batch_of(len: usize, n: usize, first_seq: u64) -> Vec<u8> {
    let mut g = Generator::new(len, 0);
    g.rewind(first_seq);
    let mut out = Vec::new();
    for _ in 0..n {
        out.extend_from_slice(g.next(1));
    }
    out
}

#[test]
fn ptx_text_is_what_the_loader_expects() {
    assert!(PTX.contains(&format!(".visible .entry {ENTRY}(")));
    assert!(PTX.contains(".target sm_52"));
    assert!(PTX.contains(".address_size 64"));
    // Nine parameters, in verify.cu's order, as CudaBackend::submit passes them.
    for i in 0..9 {
        assert!(PTX.contains(&format!("{ENTRY}_param_{i}")), "param {i}");
    }
    assert!(!PTX.contains(&format!("{ENTRY}_param_9")));
    assert!(!PTX.contains('\0'));
    // The source it was generated from is in the tree next to it.
    let src = include_str!("verify.cu");
    assert!(src.contains(ENTRY));
    assert!(src.contains("#define WARPS_PER_BLOCK 4"));
    assert!(src.contains("#define LANES 32"));
}

#[test]
fn crc_table_matches_crc32c() {
    let t = crc_table();
    let reg = b"123456789".iter().fold(!0u32, |r, &b| {
        t[((r ^ u32::from(b)) & 0xff) as usize] ^ (r >> 8)
    });
    assert_eq!(!reg, 0xE306_9283);
    assert_eq!(!reg, crc32c::crc32c(b"123456789"));
}

#[test]
fn model_agrees_with_payload_check_for_every_length_class() {
    for len in [
        32usize, 33, 63, 64, 65, 95, 96, 97, 1000, 4096, 8192, 8193, 9000, 65000,
    ] {
        let geo = Geometry::new(len, 1, MemoryKind::HostPinned).expect("geometry");
        let t = Tables::new(&geo);
        let m = batch_of(len, 1, 41);
        assert_eq!(model_verify(&m, &t), MsgStatus::Ok, "len {len}");
        assert!(payload::check(&m).is_ok());
        let step = (len / 50).max(1);
        for pos in (0..len).step_by(step) {
            let mut bad = m.clone();
            bad[pos] ^= 0x04;
            let st = model_verify(&bad, &t);
            assert_ne!(st, MsgStatus::Ok, "len {len} flip at {pos}");
            assert_eq!(st == MsgStatus::Ok, payload::check(&bad).is_ok());
        }
    }
}

#[test]
fn model_classifies_defects() {
    let geo = Geometry::new(256, 1, MemoryKind::HostPinned).expect("geometry");
    let t = Tables::new(&geo);
    let m = batch_of(256, 1, 0);
    let mut magic = m.clone();
    magic[1] ^= 1;
    assert_eq!(model_verify(&magic, &t), MsgStatus::BadMagic);
    let mut len = m.clone();
    len[4] ^= 1;
    assert_eq!(model_verify(&len, &t), MsgStatus::BadLength);
    let mut crc = m.clone();
    crc[200] ^= 1;
    assert_eq!(model_verify(&crc, &t), MsgStatus::BadCrc);
    assert_eq!(model_verify(&[0u8; 10], &t), MsgStatus::BadMagic);
}

#[test]
fn tables_layout_is_the_kernels() {
    let geo = Geometry::new(8192, MIN_COPY_BATCH, MemoryKind::Copy).expect("geometry");
    let t = Tables::new(&geo);
    let b = t.to_bytes();
    assert_eq!(b.len(), 4 * (256 + 3 * 1024));
    assert_eq!(&b[4..8], &crc_table()[1].to_le_bytes());
    // shift_last starts after crc + shift_chunk.
    let at = 4 * (256 + 1024);
    assert_eq!(&b[at..at + 4], &t.last.tables()[0][0].to_le_bytes());
    assert_eq!(geo.chunk(), (8192 - 32) / 32);
    assert_eq!(geo.last_chunk(), 8160 - 31 * 255);
}

#[test]
fn geometry_rounds_to_whole_messages_and_guards_copy() {
    let g = Geometry::new(8192, MIN_COPY_BATCH, MemoryKind::Copy).expect("geometry");
    assert_eq!(g.batch_msgs, 512);
    assert_eq!(g.batch_bytes(), 4 << 20);
    let g = Geometry::new(9000, MIN_COPY_BATCH, MemoryKind::Copy).expect("geometry");
    assert!(g.batch_bytes() >= MIN_COPY_BATCH);
    assert!(g.batch_bytes() - MIN_COPY_BATCH < 9000);
    assert!(Geometry::new(8192, 1 << 20, MemoryKind::Copy).is_err());
    assert!(Geometry::new(8192, 1 << 20, MemoryKind::HostPinned).is_ok());
    assert!(Geometry::new(16, MIN_COPY_BATCH, MemoryKind::HostPinned).is_err());
    assert!(Geometry::new(8192, 2 << 30, MemoryKind::HostPinned).is_err());
    assert_eq!(Geometry::grid(512), 128);
    assert_eq!(Geometry::grid(513), 129);
    assert_eq!(Geometry::grid(1), 1);
}

/// Feeds `stream` into a batcher in reads of `read` bytes, as the TCP receiver does.
fn feed(stream: &[u8], len: usize, batch: usize, read: usize) -> (Accounting, Totals) {
    let geo = Geometry::new(len, batch, MemoryKind::HostPinned).expect("geometry");
    let mut b = Batcher::new(CpuBackend::new(geo), geo);
    let mut off = 0;
    while off < stream.len() {
        let w = b.writable().expect("writable");
        let n = w.len().min(read).min(stream.len() - off);
        w[..n].copy_from_slice(&stream[off..off + n]);
        b.commit(n).expect("commit");
        off += n;
    }
    b.finish().expect("finish")
}

#[test]
fn batcher_verifies_every_message_across_batches_and_odd_reads() {
    let stream = batch_of(1000, 1037, 0);
    for read in [1usize, 999, 1000, 4096, 65536, 1 << 20] {
        let (a, t) = feed(&stream, 1000, 64 * 1000, read);
        assert_eq!(a.verified, 1037, "read {read}");
        assert_eq!(a.tracker.received, 1037);
        assert_eq!(a.tracker.lost, 0);
        assert_eq!(a.tracker.reordered, 0);
        assert_eq!(a.trailing_bytes, 0);
        // 16 full batches of 64 and one of 13.
        assert_eq!(a.batches, 17);
        assert_eq!(t.ok, 1037);
        assert_eq!(t.seq_breaks, 0);
        assert_eq!((t.min_seq, t.max_seq), (Some(0), Some(1036)));
        assert_eq!(t.bytes_ok, a.verified_bytes);
    }
}

#[test]
fn batcher_counts_planted_corruption_and_trailing_bytes() {
    let mut stream = batch_of(512, 300, 0);
    for m in [3usize, 150, 299] {
        stream[m * 512 + 100] ^= 0xff;
    }
    stream.extend_from_slice(&[1, 2, 3]);
    let (a, t) = feed(&stream, 512, 64 * 512, 7000);
    assert_eq!(a.bad_crc, 3);
    assert_eq!(t.bad_crc, 3);
    assert_eq!(a.verified, 297);
    assert_eq!(a.tracker.integrity_errors, 3);
    assert_eq!(a.trailing_bytes, 3);
    // The corrupt messages' headers are intact, so the sequence has no break.
    assert_eq!(t.seq_breaks, 0);
}

#[test]
fn batcher_sees_gaps_and_reorder_across_batches() {
    let len = 256;
    let mut msgs: Vec<Vec<u8>> = batch_of(len, 200, 0)
        .chunks(len)
        .map(|c| c.to_vec())
        .collect();
    msgs.remove(130); // loss in the third batch
    msgs.swap(63, 64); // reorder across the first batch boundary
    let stream: Vec<u8> = msgs.concat();
    let (a, t) = feed(&stream, len, 64 * len, 4096);
    assert_eq!(a.verified, 199);
    assert_eq!(a.tracker.reordered, 1);
    assert_eq!(a.tracker.lost, 1);
    // 64 after 62, 63 after 64, 65 after 63, 131 after 129.
    assert_eq!(t.seq_breaks, 4);
    assert_eq!((t.min_seq, t.max_seq), (Some(0), Some(199)));
}

#[test]
fn batcher_datagram_slots() {
    let len = 300;
    let geo = Geometry::new(len, 10 * len, MemoryKind::HostPinned).expect("geometry");
    let mut b = Batcher::new(CpuBackend::new(geo), geo);
    let msgs = batch_of(len, 25, 5);
    for m in msgs.chunks(len) {
        b.message_slot().expect("slot").copy_from_slice(m);
        b.commit(len).expect("commit");
    }
    let (a, t) = b.finish().expect("finish");
    assert_eq!(a.verified, 25);
    assert_eq!(a.batches, 3);
    // The sender started at 5: the first message breaks the expected 0.
    assert_eq!(t.seq_breaks, 1);
}

/// A backend whose batches take `delay` on the "GPU": completing one blocks that long.
struct SlowBackend {
    inner: CpuBackend,
    delay: std::time::Duration,
}

impl Backend for SlowBackend {
    fn buffer(&mut self, slot: usize) -> &mut [u8] {
        self.inner.buffer(slot)
    }
    fn submit(&mut self, slot: usize, n: usize, expect_first: u64) -> Result<(), SinkError> {
        self.inner.submit(slot, n, expect_first)
    }
    fn complete(&mut self, slot: usize, n: usize, out: &mut Completion) -> Result<(), SinkError> {
        std::thread::sleep(self.delay);
        self.inner.complete(slot, n, out)
    }
    fn totals(&mut self) -> Result<Totals, SinkError> {
        self.inner.totals()
    }
}

#[test]
fn receiver_wait_counts_only_slots_still_on_the_gpu() {
    let len = 256;
    let geo = Geometry::new(len, 4 * len, MemoryKind::HostPinned).expect("geometry");
    let delay = std::time::Duration::from_millis(20);
    let mut b = Batcher::new(
        SlowBackend {
            inner: CpuBackend::new(geo),
            delay,
        },
        geo,
    );
    // 5 batches of 4: after the first two (both slots in flight) each new batch must wait for
    // its slot's previous one; the drain in finish() is not a wait.
    let stream = batch_of(len, 20, 0);
    for m in stream.chunks(len) {
        b.message_slot().expect("slot").copy_from_slice(m);
        b.commit(len).expect("commit");
    }
    let (a, _) = b.finish().expect("finish");
    assert_eq!(a.verified, 20);
    assert_eq!(a.batches, 5);
    // Batches 3, 4 and 5 each waited for a slot (at least `delay` each).
    assert!(
        a.receiver_wait_ns >= 3 * delay.as_nanos() as u64,
        "{} ns",
        a.receiver_wait_ns
    );
    // With a GPU that is never busy (every slot done before it is needed) nothing waits in
    // the accounting's sense beyond the bookkeeping: the CPU model returns at once.
    let (a, _) = feed(&stream, len, 4 * len, 4096);
    assert_eq!(a.verified, 20);
}

#[test]
fn judging_a_slow_gpu_path_warns_and_a_fast_one_does_not() {
    use crate::report::{judge, EngineResult, Status, Thresholds};
    let rec = |wait_share: f64, of_peak: f64| {
        let mut r = EngineResult::new("socket", crate::engine::Mode::Tcp, "veth");
        r.packets = 1000;
        r.sent = 1000;
        r.gbps = 40.0;
        r.duration_s = 2.0;
        r.gpu = Some(GpuSinkResult {
            uuid: "GPU-x".into(),
            name: "emulated".into(),
            pci_bus_id: None,
            memory: MemoryKind::Copy,
            batch_bytes: 8 << 20,
            batches: 10,
            verified: 1000,
            verified_gbps: 40.0,
            integrity_errors: 0,
            bad_magic: 0,
            bad_length: 0,
            bad_crc: 0,
            min_seq: Some(0),
            max_seq: Some(999),
            seq_breaks: 0,
            kernel_gbps: 2000.0,
            kernel_ms: 1.0,
            h2d_copies: 10,
            h2d_gbps: Some(400.0 * of_peak),
            pinned_peak: None,
            h2d_of_peak: Some(of_peak),
            receiver_wait_ms: Some(wait_share * 2000.0),
            receiver_wait_of_window: Some(wait_share),
            copy_busy_of_window: Some(0.1),
            totals_agree: true,
            setup_ms: 1.0,
        });
        judge(&mut r, &Thresholds::default());
        r
    };
    // The case: copies at 89 % of the pinned peak while the sink kept up.
    let r = rec(0.001, 0.89);
    assert_eq!(r.status, Status::Pass, "{:?}", r.notes);
    assert!(r.notes.iter().any(|n| n.contains("89 %")));
    let r = rec(0.3, 0.89);
    assert_eq!(r.status, Status::Warn);
    assert!(r.notes.iter().any(|n| n.contains("waited")));
}

#[test]
fn totals_round_trip_device_image() {
    let t = Totals::from_bytes(&Totals::initial_bytes());
    assert_eq!(t, Totals::default());
    let mut b = [0u8; TOTALS_BYTES];
    for (i, v) in [5u64, 1, 2, 3, 5000, 10, 14, 1].iter().enumerate() {
        b[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
    }
    let t = Totals::from_bytes(&b);
    assert_eq!(t.errors(), 6);
    assert_eq!((t.min_seq, t.max_seq), (Some(10), Some(14)));
    assert_eq!(MsgStatus::from_code(3), MsgStatus::BadCrc);
    assert_eq!(MsgStatus::from_code(9), MsgStatus::Unknown(9));
    assert_eq!(MsgStatus::BadLength.code(), 2);
}

#[test]
fn rates_and_medians() {
    assert_eq!(gbps_of(4 << 20, 0.0), 0.0);
    let r = gbps_of(4 << 20, 1.0);
    assert!((r - 33.554432).abs() < 1e-9);
    assert_eq!(median(&[]), 0.0);
    assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
    assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
}

fn facts(uuid: &str, nvml: Option<u32>, ord: Option<u32>, bus: Option<&str>) -> GpuFacts {
    GpuFacts {
        uuid: uuid.into(),
        nvml_index: nvml,
        pci_bus_id: bus.map(String::from),
        cuda: Some(daqtune_probe::gpu::CudaAttrs {
            ordinal: ord,
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn resolve_by_index_uuid_and_bus_id() {
    let gpus = vec![
        facts(
            "GPU-aaaa1111-0000-0000-0000-000000000000",
            Some(0),
            Some(1),
            Some("0000:c1:00.0"),
        ),
        facts(
            "GPU-bbbb2222-0000-0000-0000-000000000000",
            Some(1),
            Some(0),
            Some("0000:09:00.0"),
        ),
    ];
    // nvidia-smi's index, not CUDA's ordinal.
    assert_eq!(resolve("0", &gpus).map(|g| &g.uuid), Ok(&gpus[0].uuid));
    assert_eq!(
        resolve("GPU-bbbb", &gpus).map(|g| &g.uuid),
        Ok(&gpus[1].uuid)
    );
    assert_eq!(
        resolve("gpu-AAAA1111", &gpus).map(|g| &g.uuid),
        Ok(&gpus[0].uuid)
    );
    assert!(resolve("GPU-", &gpus).is_err()); // ambiguous
    assert_eq!(
        resolve("00000000:09:00.0", &gpus).map(|g| &g.uuid),
        Ok(&gpus[1].uuid)
    );
    assert_eq!(
        resolve("C1:00.0", &gpus).map(|g| &g.uuid),
        Ok(&gpus[0].uuid)
    );
    assert!(resolve("2", &gpus).is_err());
    assert!(resolve("", &gpus).is_err());
    assert!(resolve("eth0", &gpus).is_err());
    assert!(resolve("0000:ff:00.0", &gpus).is_err());
    // Without NVML an index is the CUDA ordinal.
    let no_nvml = vec![facts("GPU-cccc", None, Some(0), None)];
    assert!(resolve("0", &no_nvml).is_ok());
    assert!(resolve("0", &[]).is_err());
}

#[test]
fn memory_kind_names() {
    // The flag's spellings (`host_pinned`, `host-pinned`, `copy`, `device`) are the command
    // line's (tune/src/selftest_cli.rs tests them); the report names the kind like this.
    assert_eq!(
        serde_json::to_string(&MemoryKind::HostPinned).expect("json"),
        "\"host_pinned\""
    );
    assert_eq!(MemoryKind::HostPinned.as_str(), "host_pinned");
    assert_eq!(MemoryKind::Copy.as_str(), "copy");
    assert_eq!(MemoryKind::Device.as_str(), "device");
}

#[test]
fn without_a_gpu_choose_gives_a_reason_not_a_panic() {
    // On GPU hosts this finds GPU 0; on CI it must say why not.
    match choose("0") {
        Ok(g) => assert!(g.uuid.starts_with("GPU-")),
        Err(why) => assert!(!why.is_empty()),
    }
    assert!(choose("not-a-gpu").is_err());
}
