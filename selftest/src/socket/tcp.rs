//! The TCP half of the socket engine: the sender (copying or MSG_ZEROCOPY, paced or not) and
//! the receiver that verifies every message on the CPU or in a GPU's memory.

use super::*;

/// Accepts one connection, giving up when `gone` is set (the sender failed before connecting).
pub(super) fn accept_until(l: &TcpListener, gone: &AtomicBool) -> Result<TcpStream> {
    l.set_nonblocking(true)
        .map_err(|e| Error::io("listener", e))?;
    loop {
        match l.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false)
                    .map_err(|e| Error::io("accepted stream", e))?;
                return Ok(s);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if gone.load(Ordering::SeqCst) {
                    return Err(Error::Invalid("the sender never connected".into()));
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::io("accept", e)),
        }
    }
}

/// Batch buffers of a zero-copy sender: a buffer is stamped again only once the kernel said
/// it is done with every send made from it.
pub(super) const ZC_BUFFERS: usize = 8;
/// How long after the run's end a zero-copy sender waits for a buffer's completions.
pub(super) const ZC_STALL_NS: u64 = 10_000_000_000;

pub(crate) fn tcp_send(stream: TcpStream, spec: &RunSpec, ctl: &RunControl) -> TxOut {
    if !spec.socket.zerocopy {
        let mut out = tcp_send_copy(stream, spec, ctl);
        out.batching
            .push(batching("zerocopy", false, Err("off".into())));
        return out;
    }
    if let Err(e) = kbatch::enable_zerocopy(stream.as_raw_fd()) {
        let mut out = tcp_send_copy(stream, spec, ctl);
        out.batching.push(batching(
            "zerocopy",
            true,
            Err(format!(
                "the kernel refused SO_ZEROCOPY ({e}): copying sends"
            )),
        ));
        return out;
    }
    tcp_send_zerocopy(stream, spec, ctl)
}

/// Which zero-copy sends the kernel has finished with (completion records may come out of
/// order and cover ranges).
#[derive(Debug, Default)]
pub(super) struct Completions {
    /// Every send numbered below this is complete.
    below: u32,
    ahead: Vec<(u32, u32)>,
    completed: u64,
    copied: u64,
}

impl Completions {
    fn add(&mut self, c: kbatch::Completion) {
        self.completed += c.count();
        if c.copied {
            self.copied += c.count();
        }
        self.ahead.push((c.lo, c.hi));
        while let Some(i) = self.ahead.iter().position(|r| r.0 <= self.below) {
            let (_, hi) = self.ahead.swap_remove(i);
            self.below = self.below.max(hi.wrapping_add(1));
        }
    }

    fn covers(&self, id: u32) -> bool {
        id < self.below
    }

    /// Reads every completion queued on `fd` (never blocks).
    fn drain(&mut self, fd: std::os::fd::RawFd) {
        while let Ok(Some(rec)) = kbatch::read_completion(fd) {
            if let Some(c) = rec {
                self.add(c);
            }
        }
    }
}

pub(super) fn tcp_send_zerocopy(mut stream: TcpStream, spec: &RunSpec, ctl: &RunControl) -> TxOut {
    let size = spec.message_size;
    let fd = stream.as_raw_fd();
    let mut gen = Generator::new(size, 0);
    let k = batch_len(size, spec.rate_gbps, TCP_BATCH_BYTES);
    let mut bufs: Vec<Vec<u8>> = (0..ZC_BUFFERS).map(|_| gen.template().repeat(k)).collect();
    let mut last_id: Vec<Option<u32>> = vec![None; ZC_BUFFERS];
    let mut next_id = 0u32;
    let mut done = Completions::default();
    let mut out = TxOut::default();
    let cpu0 = sys::thread_cpu_ns();
    let start = sys::monotonic_ns();
    let deadline = start + spec.duration.as_nanos() as u64;
    let mut bytes = 0u64;
    let mut inject = Injector::new(spec.inject_corruption);
    let mut planted: Vec<usize> = Vec::new();
    let mut planted_in: Vec<Vec<usize>> = vec![Vec::new(); ZC_BUFFERS];
    let mut round = 0usize;
    'run: loop {
        if sys::monotonic_ns() >= deadline || ctl.stopped() {
            break;
        }
        let b = round % ZC_BUFFERS;
        round += 1;
        // The kernel may still be reading this buffer's pages: wait for its completions.
        if let Some(id) = last_id[b] {
            loop {
                done.drain(fd);
                if done.covers(id) {
                    break;
                }
                if ctl.stopped() {
                    break 'run;
                }
                // Completions come as the receiver acknowledges; a path that stopped moving
                // must not hold the run past its time.
                if sys::monotonic_ns() > deadline + ZC_STALL_NS {
                    out.notes.push(format!(
                        "zero-copy completions stopped arriving (send {id} still pending {} s after the run's end)",
                        ZC_STALL_NS / 1_000_000_000
                    ));
                    break 'run;
                }
                kbatch::wait_error_queue(fd, 10);
            }
        }
        for i in planted_in[b].drain(..) {
            Injector::flip(&mut bufs[b][i * size..(i + 1) * size]);
        }
        pace(start, bytes, spec.rate_gbps);
        let ts = sys::monotonic_ns();
        let buf = &mut bufs[b];
        stamp_round(&mut gen, &mut inject, ts, buf, size, &mut planted);
        let mut off = 0usize;
        let mut failed = None;
        while off < buf.len() {
            match kbatch::send_flags(fd, &buf[off..], true) {
                Ok(n) => {
                    off += n;
                    last_id[b] = Some(next_id);
                    next_id = next_id.wrapping_add(1);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // Too much pinned memory outstanding (optmem): let completions come back.
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                    done.drain(fd);
                    kbatch::wait_error_queue(fd, 1);
                }
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        // The kernel may still be reading the pages: a planted byte is restored only when the
        // buffer comes round again, after its completions.
        if failed.is_none() {
            out.corrupted += planted.len() as u64;
        }
        planted_in[b].append(&mut planted);
        if let Some(e) = failed {
            out.notes.push(format!("tcp send: {e}"));
            break;
        }
        out.sent += k as u64;
        bytes += buf.len() as u64;
        ctl.add_tx(buf.len() as u64);
        done.drain(fd);
    }
    let _ = stream.flush();
    let _ = stream.shutdown(Shutdown::Write);
    out.wall_ns = sys::monotonic_ns() - start;
    out.cpu_ns = sys::thread_cpu_ns() - cpu0;
    // Collect the last completions (the receiver's ACKs release the pages).
    let until = sys::monotonic_ns() + 2_000_000_000;
    while !done.covers(next_id.wrapping_sub(1)) && next_id > 0 && sys::monotonic_ns() < until {
        kbatch::wait_error_queue(fd, 10);
        done.drain(fd);
    }
    let z = ZeroCopy {
        sends: u64::from(next_id),
        completed: done.completed,
        copied: done.copied,
    };
    out.batching.push(batching(
        "zerocopy",
        true,
        Ok(if z.copies_avoided() {
            format!(
                "{} of {} completed sends left uncopied",
                z.completed - z.copied,
                z.completed
            )
        } else {
            format!(
                "the kernel copied all {} completed sends (SO_EE_CODE_ZEROCOPY_COPIED: the \
                 receiver is a local socket, as on a veth pair or loopback)",
                z.completed
            )
        }),
    ));
    out.zerocopy = Some(z);
    let mut sink = [0u8; 64];
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let _ = stream.read(&mut sink);
    out
}

pub(super) fn tcp_send_copy(mut stream: TcpStream, spec: &RunSpec, ctl: &RunControl) -> TxOut {
    let size = spec.message_size;
    let mut gen = Generator::new(size, 0);
    let k = batch_len(size, spec.rate_gbps, TCP_BATCH_BYTES);
    let mut batch = gen.template().repeat(k);
    let mut out = TxOut::default();
    let cpu0 = sys::thread_cpu_ns();
    let start = sys::monotonic_ns();
    let deadline = start + spec.duration.as_nanos() as u64;
    let mut bytes = 0u64;
    let mut inject = Injector::new(spec.inject_corruption);
    let mut planted: Vec<usize> = Vec::new();
    loop {
        let now = sys::monotonic_ns();
        if now >= deadline || ctl.stopped() {
            break;
        }
        pace(start, bytes, spec.rate_gbps);
        let ts = sys::monotonic_ns();
        stamp_round(&mut gen, &mut inject, ts, &mut batch, size, &mut planted);
        let sent = stream.write_all(&batch);
        // The batch buffer is reused and only headers are restamped: undo the planted bytes.
        for i in planted.drain(..) {
            Injector::flip(&mut batch[i * size..(i + 1) * size]);
            if sent.is_ok() {
                out.corrupted += 1;
            }
        }
        if let Err(e) = sent {
            out.notes.push(format!("tcp send: {e}"));
            break;
        }
        out.sent += k as u64;
        bytes += batch.len() as u64;
        ctl.add_tx(batch.len() as u64);
    }
    let _ = stream.flush();
    let _ = stream.shutdown(Shutdown::Write);
    out.wall_ns = sys::monotonic_ns() - start;
    out.cpu_ns = sys::thread_cpu_ns() - cpu0;
    // Wait for the receiver to close, so the retransmission count covers the whole transfer.
    let mut sink = [0u8; 64];
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let _ = stream.read(&mut sink);
    out
}

/// Raises the receiver's low-water mark to [`RX_LOW_WATER`] (best effort: without it the
/// reader is only woken more often). A read still returns at the end of the stream, and the
/// kernel caps the mark at the space the read offers, so a partial message never waits.
pub(super) fn low_water(stream: &TcpStream) {
    let _ = sys::set_receive_low_water(stream.as_raw_fd(), RX_LOW_WATER);
}

pub(crate) fn tcp_receive(
    mut stream: TcpStream,
    size: usize,
    latency: bool,
    ctl: &RunControl,
    batch_wakeups: bool,
) -> RxOut {
    let mut out = RxOut::default();
    let mut buf = vec![0u8; RX_READ_BYTES.max(size * 2)];
    if batch_wakeups {
        low_water(&stream);
    }
    // Same verdict as payload::check at about a third of its cost (payload::Verifier).
    let verifier = payload::Verifier::new(size);
    let mut filled = 0usize;
    let cpu0 = sys::thread_cpu_ns();
    let start = sys::monotonic_ns();
    loop {
        let n = match stream.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                out.notes.push(format!("tcp receive: {e}"));
                break;
            }
        };
        let now = sys::monotonic_ns();
        filled += n;
        ctl.add_rx(n as u64);
        let mut off = 0;
        while filled - off >= size {
            match verifier.check(&buf[off..off + size]) {
                Ok(h) => {
                    out.tracker.accept(h.seq);
                    out.bytes += size as u64;
                    if latency && h.tx_ns != 0 {
                        out.hist.record(now.saturating_sub(h.tx_ns));
                    }
                }
                // The stream is framed by the configured size: skip one message and go on.
                Err(_) => out.tracker.defect(),
            }
            off += size;
        }
        buf.copy_within(off..filled, 0);
        filled -= off;
    }
    if filled > 0 {
        out.tracker.defect();
        out.notes
            .push(format!("{filled} trailing byte(s): a truncated message"));
    }
    out.wall_ns = sys::monotonic_ns() - start;
    out.cpu_ns = sys::thread_cpu_ns() - cpu0;
    out
}

/// The TCP receiver with a GPU sink: reads go straight into the batch buffers (pinned host
/// memory); the kernel verifies every message.
pub(crate) fn tcp_receive_gpu(
    mut stream: TcpStream,
    ctl: &RunControl,
    mut g: GpuRx,
    batch_wakeups: bool,
) -> Result<RxOut> {
    let mut out = RxOut::default();
    if batch_wakeups {
        low_water(&stream);
    }
    let cpu0 = sys::thread_cpu_ns();
    let start = sys::monotonic_ns();
    let gpu_err = |e: crate::gpu_sink::SinkError| Error::Gpu(e.to_string());
    loop {
        let w = g.batcher.writable().map_err(gpu_err)?;
        let n = match stream.read(w) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                out.notes.push(format!("tcp receive: {e}"));
                break;
            }
        };
        ctl.add_rx(n as u64);
        g.batcher.commit(n).map_err(gpu_err)?;
    }
    // The window ends when the last batch is verified.
    let res = g.finish_into(&mut out, 0, |_| sys::monotonic_ns() - start);
    out.cpu_ns = sys::thread_cpu_ns() - cpu0;
    res?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completions_out_of_order_and_in_ranges() {
        let mut c = Completions::default();
        let rec = |lo, hi, copied| kbatch::Completion { lo, hi, copied };
        c.add(rec(2, 4, true));
        assert!(!c.covers(0), "0 and 1 are still out");
        c.add(rec(0, 0, false));
        assert!(c.covers(0) && !c.covers(1));
        c.add(rec(1, 1, true));
        assert!(c.covers(4) && !c.covers(5));
        assert_eq!((c.completed, c.copied), (5, 4));
    }
}
