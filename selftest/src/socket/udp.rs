//! The UDP half of the socket engine: the receive buffer sized from the path, the sender
//! (GSO and sendmmsg where the kernel has them), and the receiver that splits GRO reads back
//! into datagrams and verifies each on the CPU or in a GPU's memory.

use super::*;

/// The UDP receive buffer for a stream paced at `rate_gbps` (None: unpaced) of `size`-byte
/// datagrams read `batch` reads per `recvmmsg` call, with or without GRO; `user` (`--rcvbuf`)
/// wins. Returns the bytes to ask SO_RCVBUF for and why, in words.
///
/// The buffer must hold what arrives while the receiving thread is off its CPU
/// ([`UDP_STALL_BUDGET_MS`] of the rate), and never less than two batches of reads (one being
/// copied out while the next fills). The kernel doubles the size asked for and charges each
/// datagram its skb overhead from that double, so the payload figure is asked for as is.
pub fn udp_receive_buffer(
    rate_gbps: Option<f64>,
    size: usize,
    gro: bool,
    batch: usize,
    user: Option<usize>,
) -> (usize, String) {
    if let Some(u) = user {
        return (u, format!("{} KiB as --rcvbuf asked", u >> 10));
    }
    let read = if gro { GRO_READ_BYTES.max(size) } else { size };
    let batches = 2 * read * batch.max(1);
    let Some(rate) = rate_gbps.filter(|r| r.is_finite() && *r > 0.0) else {
        let b = UDP_RCVBUF.max(batches).min(UDP_RCVBUF_MAX);
        return (
            b,
            format!(
                "{} MiB: unpaced, no rate to size from (the fixed size, {:.1} ms of 40 Gb/s)",
                b >> 20,
                b as f64 * 8.0 / 40e9 * 1e3
            ),
        );
    };
    let stall = (rate * 1e9 / 8.0 * UDP_STALL_BUDGET_MS / 1e3) as usize;
    let want = stall
        .max(batches)
        .clamp(UDP_RCVBUF_MIN, UDP_RCVBUF_MAX)
        .div_ceil(1 << 20)
        .saturating_mul(1 << 20)
        .min(UDP_RCVBUF_MAX);
    let rule = if want == UDP_RCVBUF_MAX && stall > UDP_RCVBUF_MAX {
        "the cap".to_string()
    } else if stall >= batches && stall >= UDP_RCVBUF_MIN {
        format!("{UDP_STALL_BUDGET_MS} ms of {rate:.3} Gb/s")
    } else if batches >= UDP_RCVBUF_MIN {
        format!("two batches of {} reads of {} B", batch.max(1), read)
    } else {
        "the floor".to_string()
    };
    (want >> 20 << 20, format!("{} MiB: {rule}", want >> 20))
}

/// Asks for a `want`-byte receive buffer, forcing it past net.core.rmem_max where allowed
/// (root). Returns what the kernel granted (its doubled figure) and a note when forced.
pub(super) fn set_receive_buffer(fd: std::os::fd::RawFd, want: usize) -> (usize, Option<String>) {
    let granted = sys::set_socket_buffer(fd, true, want).unwrap_or(0);
    // The kernel reports twice the size asked for (bookkeeping overhead).
    if granted >= want * 2 {
        return (granted, None);
    }
    match sys::force_receive_buffer(fd, want) {
        Ok(forced) => (
            forced,
            Some(format!(
                "receive buffer forced to {} KiB (net.core.rmem_max allowed {} KiB; the net.sysctl check judges that)",
                forced / 2 / 1024,
                granted / 2 / 1024
            )),
        ),
        Err(_) => (granted, None),
    }
}

pub(crate) fn unspecified_like(a: IpAddr) -> IpAddr {
    match a {
        IpAddr::V4(_) => IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
        IpAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
    }
}

/// What a batching path does in this run: used with `detail`, or not and why.
pub(super) fn batching(
    name: &str,
    asked: bool,
    used: std::result::Result<String, String>,
) -> Batching {
    let (used, detail) = match (asked, used) {
        (false, _) => (false, "off".to_string()),
        (true, Ok(d)) => (true, d),
        (true, Err(why)) => (false, why),
    };
    Batching {
        name: name.into(),
        asked,
        used,
        detail,
    }
}

/// Super-datagrams (GSO sends) per `sendmmsg` call of an unpaced sender.
pub(super) const SENDS_PER_CALL: usize = 8;

pub(crate) fn udp_send(
    sock: &UdpSocket,
    spec: &RunSpec,
    ctl: &RunControl,
    sent: &AtomicU64,
) -> TxOut {
    let size = spec.message_size;
    let opts = spec.socket;
    let fd = sock.as_raw_fd();
    let mut out = TxOut::default();
    // GSO: messages per send, or why not. The segment must fit the path MTU.
    let v6 = sock.peer_addr().map(|a| a.is_ipv6()).unwrap_or(false);
    let mut gso: std::result::Result<usize, String> = if !opts.gso {
        Err("off".into())
    } else {
        kbatch::gso_segments(size, kbatch::path_mtu(fd, v6).ok()).and_then(|n| {
            kbatch::set_gso_segment(fd, size)
                .map(|_| n)
                .map_err(|e| format!("the kernel refused UDP_SEGMENT ({e}): one datagram per send"))
        })
    };
    let mut mmsg: std::result::Result<(), String> = if opts.sendmmsg {
        Ok(())
    } else {
        Err("off".into())
    };
    let segs = |g: &std::result::Result<usize, String>| *g.as_ref().unwrap_or(&1);
    let unpaced_max = SENDS_PER_CALL * segs(&gso) * size;
    let mut gen = Generator::new(size, 0);
    // Paced: ~20 µs of data per round, but at least one full GSO send (the kernel puts its
    // segments on the path back to back anyway). Unpaced: SENDS_PER_CALL GSO sends per call.
    let k = batch_len(size, spec.rate_gbps, unpaced_max.max(32 * size)).max(segs(&gso));
    let mut batch = gen.template().repeat(k);
    let cpu0 = sys::thread_cpu_ns();
    let start = sys::monotonic_ns();
    let deadline = start + spec.duration.as_nanos() as u64;
    let mut bytes = 0u64;
    let mut refused = 0u64;
    let mut inject = Injector::new(spec.inject_corruption);
    let mut planted: Vec<usize> = Vec::new();
    let (mut calls, mut units_sent) = (0u64, 0u64);
    'run: loop {
        if sys::monotonic_ns() >= deadline || ctl.stopped() {
            break;
        }
        pace(start, bytes, spec.rate_gbps);
        let ts = sys::monotonic_ns();
        // Every message of the round carries its own sequence number, stamp and CRC before
        // the kernel sees any of them: GSO only cuts the buffer at message boundaries.
        stamp_round(&mut gen, &mut inject, ts, &mut batch, size, &mut planted);
        let mut done = 0usize; // messages of this round handed to the kernel
        let mut fatal = false;
        while done < k {
            let per = segs(&gso);
            let units: Vec<&[u8]> = batch[done * size..].chunks(per * size).collect();
            match kbatch::send_units(fd, &units, mmsg.is_ok()) {
                Ok(n) => {
                    calls += 1;
                    units_sent += n as u64;
                    let msgs: usize = units[..n].iter().map(|u| u.len() / size).sum();
                    done += msgs;
                    out.sent += msgs as u64;
                    sent.store(out.sent, Ordering::Release);
                    bytes += (msgs * size) as u64;
                    ctl.add_tx((msgs * size) as u64);
                }
                Err(e) => match e.raw_os_error() {
                    Some(libc::ENOBUFS) | Some(libc::EAGAIN) | Some(libc::EINTR) => {
                        std::thread::yield_now();
                        if ctl.stopped() {
                            fatal = true;
                            break;
                        }
                    }
                    Some(libc::ECONNREFUSED) if refused < 100 => refused += 1,
                    // A device without checksum offload (EIO) or a route the segment does
                    // not fit (EINVAL): send one datagram per message from here on.
                    Some(libc::EIO) | Some(libc::EINVAL) if gso.is_ok() => {
                        let _ = kbatch::set_gso_segment(fd, 0);
                        gso = Err(format!(
                            "the kernel refused a GSO send ({e}); one datagram per send from message {}",
                            out.sent
                        ));
                    }
                    Some(libc::ENOSYS) if mmsg.is_ok() => {
                        mmsg = Err(format!(
                            "the kernel has no sendmmsg ({e}): one send per call"
                        ));
                    }
                    _ => {
                        out.notes.push(format!("udp send: {e}"));
                        fatal = true;
                        break;
                    }
                },
            }
        }
        // The round's buffer is reused and only headers are restamped: undo planted bytes.
        for i in planted.drain(..) {
            Injector::flip(&mut batch[i * size..(i + 1) * size]);
            if i < done {
                out.corrupted += 1;
            }
        }
        if fatal {
            break 'run;
        }
    }
    out.wall_ns = sys::monotonic_ns() - start;
    out.cpu_ns = sys::thread_cpu_ns() - cpu0;
    let per_call = if calls > 0 {
        out.sent as f64 / calls as f64
    } else {
        0.0
    };
    out.batching.push(batching(
        "gso",
        opts.gso,
        gso.map(|n| {
            format!(
                "up to {n} messages of {size} B per send, {:.1} on average",
                if units_sent > 0 {
                    out.sent as f64 / units_sent as f64
                } else {
                    0.0
                }
            )
        }),
    ));
    out.batching.push(batching(
        "sendmmsg",
        opts.sendmmsg,
        mmsg.map(|_| format!("{per_call:.1} messages per system call")),
    ));
    out
}

/// Datagrams (or GRO reads) per `recvmmsg` call.
pub(super) const RECVS_PER_CALL: usize = 16;

/// Turns GRO on for a receiving socket as `opts` asks; what the report says about it.
pub(crate) fn udp_receive_batching(sock: &UdpSocket, opts: crate::engine::SocketOptions) -> bool {
    opts.gro && kbatch::enable_gro(sock.as_raw_fd()).is_ok()
}

/// Verifies one datagram and accounts for it.
#[inline]
pub(super) fn udp_verify(
    out: &mut RxOut,
    verifier: &payload::Verifier,
    d: &[u8],
    now: u64,
    latency: bool,
    place: Option<(usize, usize)>,
) {
    match verifier.check(d) {
        Ok(h) => {
            out.tracker.accept(h.seq);
            out.bytes += d.len() as u64;
            if latency && h.tx_ns != 0 {
                out.hist.record(now.saturating_sub(h.tx_ns));
            }
        }
        Err(defect) => {
            out.tracker.defect();
            if out.defects.len() < MAX_DEFECTS_LISTED {
                out.defects.push(DefectRecord {
                    stream: 0,
                    seq: payload::peek_header(d).ok().map(|h| h.seq),
                    defect: defect_name(defect).into(),
                    bytes: d.len(),
                    segment: place.map(|p| p.0),
                    segments: place.map(|p| p.1),
                });
            }
        }
    }
}

pub(super) fn defect_name(d: payload::Defect) -> &'static str {
    match d {
        payload::Defect::Short => "short",
        payload::Defect::BadMagic => "magic",
        payload::Defect::BadLength => "length",
        payload::Defect::BadCrc => "crc",
    }
}

pub(crate) fn udp_receive(
    sock: &UdpSocket,
    size: usize,
    latency: bool,
    ctl: &RunControl,
    sent: &AtomicU64,
    tx_done: &AtomicBool,
    opts: crate::engine::SocketOptions,
) -> RxOut {
    let mut out = RxOut::default();
    let gro = udp_receive_batching(sock, opts);
    let gro_why = if !opts.gro || gro {
        Ok(())
    } else {
        Err("the kernel refused UDP_GRO: one datagram per read".to_string())
    };
    // A GRO read holds up to one 64 KiB super-datagram; otherwise one byte more than a
    // message, so an oversized datagram shows as a length defect.
    let cap = if gro { 65_536 } else { size + 1 };
    let mut mmsg = opts.recvmmsg;
    let mut mmsg_why: std::result::Result<(), String> = Ok(());
    let mut rx = kbatch::MultiReceiver::new(RECVS_PER_CALL, cap, mmsg);
    let verifier = payload::Verifier::new(size);
    let fd = sock.as_raw_fd();
    // Read once up front, so a run that never filled a batch says "backlog stayed under one
    // batch" (a measured low peak) rather than "not measured": only a socket the kernel will
    // not answer SO_MEMINFO for leaves it unmeasured.
    out.peak_backlog = sys::receive_backlog(fd)
        .ok()
        .filter(|&(_, limit)| limit > 0)
        .map(|(alloc, limit)| f64::from(alloc) / f64::from(limit));
    let cpu0 = sys::thread_cpu_ns();
    let mut first = None;
    let mut last = sys::monotonic_ns();
    let mut idle_since: Option<u64> = None;
    let (mut calls, mut reads, mut coalesced) = (0u64, 0u64, 0u64);
    loop {
        match rx.recv(fd) {
            Ok(n) => {
                let now = sys::monotonic_ns();
                first.get_or_insert(now);
                last = now;
                idle_since = None;
                calls += 1;
                reads += n as u64;
                // A full batch means more may be queued: how much, against the limit, says how
                // near this run came to a drop (issue 43). A short batch emptied the queue, so
                // the probe is skipped there and costs nothing at rates the receiver keeps up
                // with. It reads after the batch: the peak is low by at most one batch. One
                // datagram per call (no recvmmsg): every RECVS_PER_CALL-th call, the same cost.
                let full = if mmsg {
                    n >= RECVS_PER_CALL
                } else {
                    calls % RECVS_PER_CALL as u64 == 0
                };
                if full {
                    if let Ok((alloc, limit)) = sys::receive_backlog(fd) {
                        if limit > 0 {
                            let f = f64::from(alloc) / f64::from(limit);
                            out.peak_backlog = Some(out.peak_backlog.map_or(f, |p| p.max(f)));
                        }
                    }
                }
                for i in 0..n {
                    let r = rx.get(i);
                    ctl.add_rx(r.bytes.len() as u64);
                    if r.truncated {
                        out.tracker.defect();
                        continue;
                    }
                    // Each datagram of a GRO read on its own: loss, order and integrity are
                    // per datagram, never per read.
                    let segs = kbatch::segments(r.bytes.len(), r.segment);
                    let count = if r.segment > 0 {
                        r.bytes.len().div_ceil(r.segment)
                    } else {
                        1
                    };
                    if count > 1 {
                        coalesced += 1;
                    }
                    for (j, range) in segs.enumerate() {
                        let place = (count > 1).then_some((j, count));
                        udp_verify(&mut out, &verifier, &r.bytes[range], now, latency, place);
                    }
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(e) if mmsg && e.raw_os_error() == Some(libc::ENOSYS) => {
                mmsg = false;
                mmsg_why = Err(format!(
                    "the kernel has no recvmmsg ({e}): one read per call"
                ));
                rx = kbatch::MultiReceiver::new(1, cap, false);
            }
            Err(e) => {
                out.notes.push(format!("udp receive: {e}"));
                break;
            }
        }
        if tx_done.load(Ordering::Acquire) {
            let total = sent.load(Ordering::Acquire);
            if out.tracker.received + out.tracker.integrity_errors >= total {
                break;
            }
            let now = sys::monotonic_ns();
            let idle = *idle_since.get_or_insert(now);
            if now - idle > UDP_DRAIN.as_nanos() as u64 {
                break;
            }
        }
    }
    out.wall_ns = first.map(|f| last - f).unwrap_or(0);
    // CPU over the receive window, not the drain wait (the thread mostly slept in it).
    out.cpu_ns = sys::thread_cpu_ns() - cpu0;
    let datagrams = out.tracker.received + out.tracker.integrity_errors;
    let avg = |n: u64| {
        if n > 0 {
            datagrams as f64 / n as f64
        } else {
            0.0
        }
    };
    out.batching.push(batching(
        "gro",
        opts.gro,
        gro_why.map(|_| {
            format!(
                "{:.1} datagrams per read, {coalesced} of {reads} reads coalesced",
                avg(reads)
            )
        }),
    ));
    out.batching.push(batching(
        "recvmmsg",
        opts.recvmmsg,
        mmsg_why.map(|_| format!("{:.1} datagrams per system call", avg(calls))),
    ));
    out
}

/// The UDP receiver with a GPU sink: each datagram lands in the next message slot of a batch
/// buffer. A datagram of the wrong size is counted as a defect on the CPU (it cannot be framed).
pub(crate) fn udp_receive_gpu(
    sock: &UdpSocket,
    size: usize,
    ctl: &RunControl,
    sent: &AtomicU64,
    tx_done: &AtomicBool,
    mut g: GpuRx,
    opts: crate::engine::SocketOptions,
) -> Result<RxOut> {
    let mut out = RxOut::default();
    let cpu0 = sys::thread_cpu_ns();
    let mut first = None;
    let mut last = sys::monotonic_ns();
    let mut idle_since: Option<u64> = None;
    let (mut committed, mut misframed) = (0u64, 0u64);
    let gpu_err = |e: crate::gpu_sink::SinkError| Error::Gpu(e.to_string());
    loop {
        let slot = g.batcher.message_slot().map_err(gpu_err)?;
        // The slot is exactly one message: MSG_TRUNC makes an oversized datagram report its
        // real length (plain recv would cut it to `size` and it could pass).
        match sys::recv_datagram(sock, slot) {
            Ok(n) => {
                let now = sys::monotonic_ns();
                first.get_or_insert(now);
                last = now;
                idle_since = None;
                ctl.add_rx(n as u64);
                if n == size {
                    g.batcher.commit(size).map_err(gpu_err)?;
                    committed += 1;
                } else {
                    misframed += 1;
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(e) => {
                out.notes.push(format!("udp receive: {e}"));
                break;
            }
        }
        if tx_done.load(Ordering::Acquire) {
            if committed + misframed >= sent.load(Ordering::Acquire) {
                break;
            }
            let now = sys::monotonic_ns();
            let idle = *idle_since.get_or_insert(now);
            if now - idle > UDP_DRAIN.as_nanos() as u64 {
                break;
            }
        }
    }
    // The receive window (drain wait excluded) plus the time the last batches took on the GPU.
    let res = g.finish_into(&mut out, misframed, |gpu_tail| {
        first.map(|f| last - f + gpu_tail).unwrap_or(0)
    });
    out.cpu_ns = sys::thread_cpu_ns() - cpu0;
    res?;
    if misframed > 0 {
        out.notes.push(format!(
            "{misframed} datagram(s) of the wrong size (counted on the CPU)"
        ));
    }
    for name in ["gro", "recvmmsg"] {
        let asked = if name == "gro" {
            opts.gro
        } else {
            opts.recvmmsg
        };
        out.batching.push(batching(
            name,
            asked,
            Err("the GPU sink reads one datagram into each message slot".into()),
        ));
    }
    Ok(out)
}
