//! The `daqtune.selftest/v1` report: its records are `daqtune-report`'s (re-exported here), its
//! text and JUnit renderings ([`Render`]) and the verdict against thresholds ([`judge`]) are here.

use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

pub use daqtune_report::selftest::{
    Batching, CounterCause, DefectRecord, EngineResult, PortBytes, Report, Status, StreamFigures,
    Summary, ZeroCopy, MAX_DEFECTS_LISTED, SCHEMA,
};

/// Share of the pinned-copy peak below which the `copy` sink's copies get a note (a warning
/// only when the GPU path limited the rate: `GpuSinkResult::gpu_limited`).
pub const MIN_COPY_OF_PEAK: f64 = 0.9;

/// What a run must reach. Profile values feed this (the `selftest` section).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Thresholds {
    /// Minimum Gb/s for reliable modes (0 = integrity only).
    pub min_tcp_gbps: f64,
    /// UDP (and raw) loss tolerated at the paced rate, percent.
    pub max_udp_loss_pct: f64,
    /// Minimum share of the requested paced rate a paced run must deliver, in (0, 1].
    pub min_paced_fraction: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            min_tcp_gbps: 0.0,
            max_udp_loss_pct: 0.1,
            min_paced_fraction: 0.9,
        }
    }
}

/// Sets `r.status` and notes from the measurements. A record already skipped or errored keeps
/// its status.
pub fn judge(r: &mut EngineResult, t: &Thresholds) {
    if matches!(r.status, Status::Skip | Status::Error) {
        return;
    }
    let mut status = Status::Pass;
    if r.packets == 0 {
        status = Status::Fail;
        r.notes.push("no message arrived".into());
    }
    if r.injected_corruptions > 0 {
        // The run's point is the verifier: it must count exactly the planted messages.
        if r.integrity_errors == r.injected_corruptions {
            r.notes.push(format!(
                "all {} planted corrupt message(s) detected",
                r.injected_corruptions
            ));
        } else {
            status = Status::Fail;
            r.notes.push(format!(
                "{} integrity error(s) counted for {} planted corrupt message(s)",
                r.integrity_errors, r.injected_corruptions
            ));
        }
    } else if r.integrity_errors > 0 {
        status = Status::Fail;
        r.notes.push(format!(
            "{} message(s) failed the checksum",
            r.integrity_errors
        ));
    }
    if let Some(g) = &r.gpu {
        if !g.totals_agree {
            status = Status::Fail;
            r.notes
                .push("the GPU kernel's totals disagree with its per-message results".to_string());
        }
        if r.mode.reliable() && g.seq_breaks > 0 {
            status = Status::Fail;
            r.notes.push(format!(
                "the GPU saw {} break(s) in the sequence of a reliable stream",
                g.seq_breaks
            ));
        }
        match g.gpu_limited(r.duration_s) {
            Some(why) => {
                if status == Status::Pass {
                    status = Status::Warn;
                }
                r.notes.push(why);
            }
            None => {
                // Slower copies than the peak are worth knowing, but the sink kept up with
                // the wire: the rate was not theirs to limit.
                if let Some(f) = g.h2d_of_peak.filter(|f| *f < MIN_COPY_OF_PEAK) {
                    r.notes.push(format!(
                        "host-to-device copies ran at {:.0} % of the pinned-copy peak at {} bytes; the sink kept up with the wire{}",
                        f * 100.0,
                        g.batch_bytes,
                        g.receiver_wait_of_window
                            .map(|w| format!(" (the receiver waited {:.1} % of the run for GPU batches)", w * 100.0))
                            .unwrap_or_default()
                    ));
                }
            }
        }
    }
    if let Some(p) = r.port_bytes {
        // The wire counters prove more than the netdev ones; use them where they exist.
        let (tx, rx, what) = match (p.tx_port_tx_phy, p.rx_port_rx_phy) {
            (Some(t), Some(x)) => (t, x, "phy"),
            _ => (p.tx_port_tx, p.rx_port_rx, "interface"),
        };
        if rx < r.bytes || tx < r.bytes {
            status = Status::Fail;
            r.notes.push(format!(
                "the ports' {what} counters saw {tx} B sent and {rx} B received for {} B of payload: the traffic did not cross them",
                r.bytes
            ));
        }
    }
    if let Some(c) = r.causes.first() {
        // Where the frames went: the ports' own counts, not a figure of the run.
        r.notes.push(format!(
            "the ports counted frames lost: {}{}",
            c.message,
            match r.causes.len() {
                1 => String::new(),
                n => format!(" (and {} more counter(s), see causes)", n - 1),
            }
        ));
    }
    if r.mode.reliable() {
        // A planted corrupt message is never accepted, so it also shows as one lost.
        let lost = r.lost.saturating_sub(r.injected_corruptions);
        if lost > 0 || r.reordered > 0 {
            status = Status::Fail;
            r.notes.push(format!(
                "reliable transport lost {} and reordered {} message(s)",
                lost, r.reordered
            ));
        }
        if t.min_tcp_gbps > 0.0 && r.gbps < t.min_tcp_gbps {
            status = Status::Fail;
            r.notes.push(format!(
                "{:.2} Gb/s below the required {:.2} Gb/s",
                r.gbps, t.min_tcp_gbps
            ));
        }
    } else {
        let loss = r.loss_pct();
        if loss > t.max_udp_loss_pct && r.rate_gbps.is_none() {
            // An unpaced flood loses whatever the sender offers beyond what the receiver
            // takes: a figure about the path, not a defect. The loss-free rate is what
            // --find-max searches (and a paced run at that rate is judged on its loss).
            if status == Status::Pass {
                status = Status::Warn;
            }
            r.notes.push(format!(
                "unpaced: loss {loss:.3} %, the sender outran the receiving side; --find-max finds the highest loss-free rate"
            ));
        } else if loss > t.max_udp_loss_pct {
            status = Status::Fail;
            r.notes.push(format!(
                "loss {:.3} % above the allowed {:.3} %",
                loss, t.max_udp_loss_pct
            ));
        }
        if r.reordered > 0 && status == Status::Pass {
            status = Status::Warn;
            r.notes
                .push(format!("{} message(s) arrived out of order", r.reordered));
        }
    }
    if let Some(rate) = r.rate_gbps {
        if rate > 0.0 && r.gbps < rate * t.min_paced_fraction && status == Status::Pass {
            status = Status::Warn;
            r.notes.push(format!(
                "delivered {:.2} Gb/s of the {:.2} Gb/s asked for",
                r.gbps, rate
            ));
        }
    }
    r.status = status;
}

/// The text and JUnit renderings of a self-test report (the records are `daqtune-report`'s).
pub trait Render {
    fn to_text(&self) -> String;
    fn to_junit(&self) -> String;
}

impl Render for Report {
    fn to_text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "self-test on {}: {}", self.hostname, self.topology);
        let _ = writeln!(s, "cpus: {}", self.cpu_plan);
        for r in &self.results {
            let _ = writeln!(
                s,
                "{:<5} {}/{:<4} {:>8.2} Gb/s {:>10.0} msg/s  sent {} recv {} lost {} reord {} bad {}{}",
                r.status.as_str(),
                r.engine,
                r.mode.as_str(),
                r.gbps,
                r.packets_per_s,
                r.sent,
                r.packets,
                r.lost,
                r.reordered,
                r.integrity_errors,
                r.retransmits
                    .map(|x| format!(" retrans {x}"))
                    .unwrap_or_default(),
            );
            if let Some(p) = &r.port_bytes {
                let phy = match (p.tx_port_tx_phy, p.rx_port_rx_phy) {
                    (Some(t), Some(x)) => format!(" (wire: {t} B out, {x} B in)"),
                    _ => String::new(),
                };
                let _ = writeln!(
                    s,
                    "      ports: {} B out, {} B in{phy}",
                    p.tx_port_tx, p.rx_port_rx
                );
            }
            for c in &r.causes {
                let _ = writeln!(s, "      cause {}: {}", c.rank, c.message);
            }
            if let Some(g) = &r.gpu {
                let _ = writeln!(
                    s,
                    "      gpu {} ({}) {}: {} verified {:.2} Gb/s, {} bad, {} seq breaks, kernel {:.1} Gb/s, {} batches of {} B",
                    g.name,
                    g.uuid,
                    g.memory.as_str(),
                    g.verified,
                    g.verified_gbps,
                    g.integrity_errors,
                    g.seq_breaks,
                    g.kernel_gbps,
                    g.batches,
                    g.batch_bytes
                );
                if let Some(c) = &g.pinned_peak {
                    let copy = match (g.h2d_gbps, g.h2d_of_peak) {
                        (Some(h), Some(f)) => {
                            format!("h2d {h:.1} Gb/s = {:.1} % of ", f * 100.0)
                        }
                        _ => String::new(),
                    };
                    let _ = writeln!(
                        s,
                        "      {copy}pinned-copy peak {:.1} Gb/s (median {:.1}) at {} B",
                        c.peak_gbps, c.median_gbps, c.bytes
                    );
                }
            }
            if let Some(l) = &r.latency {
                let _ = writeln!(
                    s,
                    "      latency p50 {:.1} us  p99 {:.1} us  p99.9 {:.1} us  max {:.1} us",
                    l.p50_us, l.p99_us, l.p999_us, l.max_us
                );
            }
            if !r.threads.is_empty() {
                let parts: Vec<String> = r
                    .threads
                    .iter()
                    .map(|t| {
                        format!(
                            "{}{} {:.0} %",
                            t.role,
                            t.cpu.map(|c| format!("@cpu{c}")).unwrap_or_default(),
                            t.utilization * 100.0
                        )
                    })
                    .collect();
                let _ = writeln!(
                    s,
                    "      cpu {} = {:.2} cores{}{}",
                    parts.join(", "),
                    r.cpu_cores,
                    r.gbps_per_core
                        .map(|x| format!(", {x:.2} Gb/s per core"))
                        .unwrap_or_default(),
                    r.roi
                        .map(|x| format!(", ROI {x:.1} Gb/s^2 per core"))
                        .unwrap_or_default()
                );
            }
            if !r.batching.is_empty() {
                let parts: Vec<String> = r
                    .batching
                    .iter()
                    .map(|b| {
                        format!(
                            "{} {} ({})",
                            b.name,
                            if b.used { "used" } else { "not used" },
                            b.detail
                        )
                    })
                    .collect();
                let _ = writeln!(s, "      kernel batching: {}", parts.join("; "));
            }
            if let Some(why) = &r.rx_buffer_sizing {
                let _ = writeln!(s, "      receive buffer: {why}");
            }
            if let Some(z) = &r.zerocopy {
                let _ = writeln!(
                    s,
                    "      zero-copy: {} sends, {} completed, {} copied by the kernel: {}",
                    z.sends,
                    z.completed,
                    z.copied,
                    if z.copies_avoided() {
                        "copies avoided"
                    } else {
                        "the kernel fell back to copying"
                    }
                );
            }
            for d in &r.defects {
                let _ = writeln!(
                    s,
                    "      bad message: stream {} seq {} ({}, {} B{})",
                    d.stream,
                    d.seq.map(|q| q.to_string()).unwrap_or_else(|| "?".into()),
                    d.defect,
                    d.bytes,
                    match (d.segment, d.segments) {
                        (Some(i), Some(n)) =>
                            format!(", datagram {} of {n} in one GRO read", i + 1),
                        _ => String::new(),
                    }
                );
            }
            if !r.streams.is_empty() {
                s.push_str(&streams_table(r));
            }
            if !r.trials.is_empty() {
                let _ = writeln!(
                    s,
                    "      max loss-free: {}",
                    match (
                        r.max_loss_free_gbps,
                        r.search.as_ref().and_then(|x| x.fraction_of_limit)
                    ) {
                        (Some(g), Some(f)) =>
                            format!("{g:.3} Gb/s ({:.1} % of the limit)", f * 100.0),
                        (Some(g), None) => format!("{g:.3} Gb/s"),
                        (None, _) => "none confirmed".into(),
                    }
                );
                s.push_str(&crate::findmax::trials_table(r));
            }
            for n in &r.notes {
                let _ = writeln!(s, "      {n}");
            }
        }
        let m = &self.summary;
        let _ = writeln!(
            s,
            "summary: {} pass, {} warn, {} fail, {} skip, {} error",
            m.pass, m.warn, m.fail, m.skip, m.error
        );
        s
    }

    fn to_junit(&self) -> String {
        let mut s = String::new();
        let failures = self.summary.fail;
        let errors = self.summary.error;
        let skipped = self.summary.skip;
        let _ = writeln!(s, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>");
        let _ = writeln!(
            s,
            "<testsuite name=\"daqtune.selftest\" tests=\"{}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"{skipped}\">",
            self.results.len()
        );
        for r in &self.results {
            let name = format!("{}.{}", r.engine, r.mode.as_str());
            let _ = write!(
                s,
                "  <testcase classname=\"selftest.{}\" name=\"{}\" time=\"{:.3}\"",
                xml_escape(&r.topology),
                xml_escape(&name),
                r.duration_s
            );
            let detail = xml_escape(&format!(
                "{:.2} Gb/s, {} received, {} lost, {} reordered, {} integrity errors. {}",
                r.gbps,
                r.packets,
                r.lost,
                r.reordered,
                r.integrity_errors,
                r.notes.join("; ")
            ));
            match r.status {
                Status::Pass | Status::Warn => {
                    let _ = writeln!(s, ">\n    <system-out>{detail}</system-out>\n  </testcase>");
                }
                Status::Fail | Status::Pending => {
                    let _ = writeln!(s, ">\n    <failure message=\"{detail}\"/>\n  </testcase>");
                }
                Status::Error => {
                    let _ = writeln!(s, ">\n    <error message=\"{detail}\"/>\n  </testcase>");
                }
                Status::Skip => {
                    let _ = writeln!(s, ">\n    <skipped message=\"{detail}\"/>\n  </testcase>");
                }
            }
        }
        let _ = writeln!(s, "</testsuite>");
        s
    }
}

/// Escapes text for XML (JUnit here and in the main binary's reports): one escaper for the
/// workspace, in daqtune-probe, which both crates already use.
pub use daqtune_probe::text::xml_escape;

/// Set by [`emit`] when standard output refused a report for another reason than a reader that
/// went away (a full disk, an I/O error): the program's exit status must say so.
static EMIT_FAILED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Writes a report to stdout. A reader that went away (`daqtune ... | head`) is not an error
/// worth a panic (what `print!` does on EPIPE, since Rust ignores SIGPIPE): the rest is dropped.
/// Any other failure (`> /dev/full`) is said on stderr once and remembered: each program's
/// `main` ends with exit 2 when [`emit_failed`] says so, as coreutils do.
pub fn emit(text: &str) {
    use std::io::Write;
    if EMIT_FAILED.load(std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("cannot write to standard output: {e}");
            EMIT_FAILED.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// Whether a report written by [`emit`] was lost to a failed standard output.
pub fn emit_failed() -> bool {
    EMIT_FAILED.load(std::sync::atomic::Ordering::Relaxed)
}

/// Each stream of a multi-stream result and their sum, one line each.
pub fn streams_table(r: &EngineResult) -> String {
    let mut s = String::new();
    let cpu = |c: Option<usize>| c.map(|c| c.to_string()).unwrap_or_else(|| "-".into());
    let _ = writeln!(
        s,
        "      {:<6} {:>7} {:>9} {:>10} {:>10} {:>8} {:>6} {:>4} {:>6} {:>6}",
        "stream", "tx->rx", "Gb/s", "sent", "recv", "lost", "reord", "bad", "tx cpu", "rx cpu"
    );
    for st in &r.streams {
        let _ = writeln!(
            s,
            "      {:<6} {:>7} {:>9.3} {:>10} {:>10} {:>8} {:>6} {:>4} {:>5.0}% {:>5.0}%",
            st.stream,
            format!("{}->{}", cpu(st.tx_cpu), cpu(st.rx_cpu)),
            st.gbps,
            st.sent,
            st.packets,
            st.lost,
            st.reordered,
            st.integrity_errors,
            st.tx_utilization * 100.0,
            st.rx_utilization * 100.0
        );
    }
    let sum = |f: fn(&StreamFigures) -> u64| r.streams.iter().map(f).sum::<u64>();
    let _ = writeln!(
        s,
        "      {:<6} {:>7} {:>9.3} {:>10} {:>10} {:>8} {:>6} {:>4}",
        "sum",
        "",
        r.streams.iter().map(|x| x.gbps).sum::<f64>(),
        sum(|x| x.sent),
        sum(|x| x.packets),
        sum(|x| x.lost),
        sum(|x| x.reordered),
        sum(|x| x.integrity_errors)
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Mode;

    fn tcp(gbps: f64, packets: u64) -> EngineResult {
        let mut r = EngineResult::new("socket", Mode::Tcp, "veth");
        r.gbps = gbps;
        r.packets = packets;
        r.sent = packets;
        r
    }

    fn gpu_part(h2d_of_peak: Option<f64>) -> crate::gpu_sink::GpuSinkResult {
        crate::gpu_sink::GpuSinkResult {
            uuid: "GPU-x".into(),
            name: "test".into(),
            pci_bus_id: None,
            memory: crate::gpu_sink::MemoryKind::Copy,
            batch_bytes: 4 << 20,
            batches: 1,
            verified: 100,
            verified_gbps: 10.0,
            integrity_errors: 0,
            bad_magic: 0,
            bad_length: 0,
            bad_crc: 0,
            min_seq: Some(0),
            max_seq: Some(99),
            seq_breaks: 0,
            kernel_gbps: 100.0,
            kernel_ms: 1.0,
            h2d_copies: 1,
            h2d_gbps: Some(100.0),
            pinned_peak: None,
            h2d_of_peak,
            receiver_wait_ms: Some(0.0),
            receiver_wait_of_window: Some(0.0),
            copy_busy_of_window: Some(0.01),
            totals_agree: true,
            setup_ms: 1.0,
        }
    }

    #[test]
    fn planted_corruption_must_be_counted_exactly() {
        let t = Thresholds::default();
        let mut r = tcp(10.0, 100);
        r.injected_corruptions = 3;
        r.integrity_errors = 3;
        r.lost = 3;
        judge(&mut r, &t);
        assert_eq!(r.status, Status::Pass, "{:?}", r.notes);
        let mut r = tcp(10.0, 100);
        r.injected_corruptions = 3;
        r.integrity_errors = 2;
        judge(&mut r, &t);
        assert_eq!(r.status, Status::Fail);
        // Loss beyond the planted messages is still loss.
        let mut r = tcp(10.0, 100);
        r.injected_corruptions = 3;
        r.integrity_errors = 3;
        r.lost = 4;
        judge(&mut r, &t);
        assert_eq!(r.status, Status::Fail);
    }

    #[test]
    fn gpu_record_judged() {
        let t = Thresholds::default();
        let mut r = tcp(10.0, 100);
        r.gpu = Some(gpu_part(Some(0.97)));
        judge(&mut r, &t);
        assert_eq!(r.status, Status::Pass);
        // Copies at half the peak, but the receiver never waited for the GPU: the sink kept
        // up with the wire, so the shortfall is a note, not a warning.
        let mut r = tcp(10.0, 100);
        r.gpu = Some(gpu_part(Some(0.5)));
        judge(&mut r, &t);
        assert_eq!(r.status, Status::Pass, "{:?}", r.notes);
        assert!(r.notes.iter().any(|n| n.contains("kept up with the wire")));
        // 89 % of the peak, no waiting: pass.
        let mut r = tcp(10.0, 100);
        r.gpu = Some(gpu_part(Some(0.89)));
        judge(&mut r, &t);
        assert_eq!(r.status, Status::Pass, "{:?}", r.notes);
        // The receiver waited a fifth of the run for GPU slots: the copy path limited the
        // rate, whatever share of the peak the copies reached.
        for f in [0.5, 0.97] {
            let mut r = tcp(10.0, 100);
            let mut g = gpu_part(Some(f));
            g.receiver_wait_ms = Some(200.0);
            g.receiver_wait_of_window = Some(0.2);
            r.gpu = Some(g);
            judge(&mut r, &t);
            assert_eq!(r.status, Status::Warn, "{f}");
            assert!(r.notes[0].contains("limited the rate"), "{:?}", r.notes);
        }
        // Just under the wait limit: pass.
        let mut r = tcp(10.0, 100);
        let mut g = gpu_part(Some(0.5));
        g.receiver_wait_of_window = Some(crate::gpu_sink::MAX_WAIT_SHARE * 0.9);
        r.gpu = Some(g);
        judge(&mut r, &t);
        assert_eq!(r.status, Status::Pass);
        // A record of an older version (no wait figures): judged by how busy the copies kept
        // the copy engine over the run.
        let older = |copies: u64| {
            let mut r = tcp(10.0, 100);
            r.duration_s = 1.0;
            let mut g = gpu_part(Some(0.8));
            g.receiver_wait_ms = None;
            g.receiver_wait_of_window = None;
            g.copy_busy_of_window = None;
            // 4 MiB at 100 Gb/s: 0.34 ms per copy.
            g.h2d_copies = copies;
            r.gpu = Some(g);
            judge(&mut r, &t);
            r.status
        };
        assert_eq!(older(100), Status::Pass);
        assert_eq!(older(2900), Status::Warn);
        let mut r = tcp(10.0, 100);
        let mut g = gpu_part(None);
        g.totals_agree = false;
        r.gpu = Some(g);
        judge(&mut r, &t);
        assert_eq!(r.status, Status::Fail);
        let mut r = tcp(10.0, 100);
        let mut g = gpu_part(None);
        g.seq_breaks = 1;
        r.gpu = Some(g);
        judge(&mut r, &t);
        assert_eq!(r.status, Status::Fail);
        // The record survives JSON (fixtures, peer protocol).
        let back: EngineResult =
            serde_json::from_str(&serde_json::to_string(&r).expect("json")).expect("parse");
        assert_eq!(back, r);
    }

    #[test]
    fn tcp_integrity_and_rate() {
        let t = Thresholds {
            min_tcp_gbps: 5.0,
            ..Thresholds::default()
        };
        let mut ok = tcp(10.0, 100);
        judge(&mut ok, &t);
        assert_eq!(ok.status, Status::Pass);
        let mut slow = tcp(1.0, 100);
        judge(&mut slow, &t);
        assert_eq!(slow.status, Status::Fail);
        let mut bad = tcp(10.0, 100);
        bad.integrity_errors = 1;
        judge(&mut bad, &t);
        assert_eq!(bad.status, Status::Fail);
        let mut none = tcp(0.0, 0);
        judge(&mut none, &Thresholds::default());
        assert_eq!(none.status, Status::Fail);
    }

    #[test]
    fn unpaced_loss_is_a_warning_paced_loss_a_failure() {
        let t = Thresholds::default();
        let mut r = EngineResult::new("dpdk", Mode::Raw, "veth");
        r.packets = 986;
        r.lost = 14;
        judge(&mut r, &t);
        assert_eq!(r.status, Status::Warn, "{:?}", r.notes);
        assert!(r.notes[0].contains("--find-max"));
        let mut r = EngineResult::new("dpdk", Mode::Raw, "veth");
        r.packets = 986;
        r.lost = 14;
        r.rate_gbps = Some(0.3);
        r.gbps = 0.3;
        judge(&mut r, &t);
        assert_eq!(r.status, Status::Fail);
        // Integrity still fails an unpaced run.
        let mut r = EngineResult::new("dpdk", Mode::Raw, "veth");
        r.packets = 986;
        r.lost = 14;
        r.integrity_errors = 1;
        judge(&mut r, &t);
        assert_eq!(r.status, Status::Fail);
    }

    #[test]
    fn udp_loss_limit() {
        let t = Thresholds::default();
        let mut r = EngineResult::new("socket", Mode::Udp, "veth");
        r.packets = 9_999;
        r.lost = 1;
        judge(&mut r, &t);
        assert_eq!(r.status, Status::Pass, "{:?}", r.notes);
        let mut r = EngineResult::new("socket", Mode::Udp, "veth");
        r.packets = 900;
        r.lost = 100;
        r.rate_gbps = Some(1.0);
        r.gbps = 1.0;
        judge(&mut r, &t);
        assert_eq!(r.status, Status::Fail);
        assert!((r.loss_pct() - 10.0).abs() < 1e-9);
    }

    #[test]
    fn traffic_must_cross_the_ports() {
        let mut r = tcp(1.0, 10);
        r.bytes = 81_920;
        r.port_bytes = Some(PortBytes {
            tx_port_tx: 90_000,
            rx_port_rx: 90_000,
            tx_port_tx_phy: None,
            rx_port_rx_phy: None,
        });
        judge(&mut r, &Thresholds::default());
        assert_eq!(r.status, Status::Pass);
        let mut r = tcp(1.0, 10);
        r.bytes = 81_920;
        r.port_bytes = Some(PortBytes {
            tx_port_tx: 90_000,
            rx_port_rx: 100,
            tx_port_tx_phy: None,
            rx_port_rx_phy: None,
        });
        judge(&mut r, &Thresholds::default());
        assert_eq!(r.status, Status::Fail);
        assert!(r.notes[0].contains("interface counters"));
        // Phy counters win when present: the netdev counters looked fine, the wire did not.
        let mut r = tcp(1.0, 10);
        r.bytes = 81_920;
        r.port_bytes = Some(PortBytes {
            tx_port_tx: 90_000,
            rx_port_rx: 90_000,
            tx_port_tx_phy: Some(90_000),
            rx_port_rx_phy: Some(0),
        });
        judge(&mut r, &Thresholds::default());
        assert_eq!(r.status, Status::Fail);
        assert!(r.notes[0].contains("phy counters"));
    }

    #[test]
    fn skip_is_kept_and_counted() {
        let mut r = EngineResult::skipped("rdma", Mode::Write, "ports", "no RDMA device");
        judge(&mut r, &Thresholds::default());
        assert_eq!(r.status, Status::Skip);
        let mut rep = Report::new("h", "veth", "unpinned");
        rep.push(r);
        assert!(rep.passed());
        assert_eq!(rep.summary.skip, 1);
    }

    #[test]
    fn json_has_schema_and_fields() {
        let mut rep = Report::new("h", "veth", "cpu 1 -> 2");
        let mut r = tcp(3.0, 10);
        judge(&mut r, &Thresholds::default());
        rep.push(r);
        let v: serde_json::Value = serde_json::from_str(&rep.to_json()).expect("json");
        assert_eq!(v["schema"], SCHEMA);
        let r0 = &v["results"][0];
        for k in [
            "engine",
            "mode",
            "gbps",
            "packets",
            "lost",
            "integrity_errors",
            "status",
        ] {
            assert!(!r0[k].is_null(), "missing {k}");
        }
        assert_eq!(r0["status"], "pass");
        assert_eq!(r0["mode"], "tcp");
        let back: Report = serde_json::from_value(v).expect("round trip");
        assert_eq!(back, rep);
    }

    #[test]
    fn junit_marks_failures_and_escapes() {
        let mut rep = Report::new("h", "a<b", "x");
        let mut r = tcp(0.0, 0);
        r.topology = "a<b".into();
        judge(&mut r, &Thresholds::default());
        rep.push(r);
        rep.push(EngineResult::skipped(
            "dpdk",
            Mode::Raw,
            "veth",
            "no \"libdpdk\"",
        ));
        let j = rep.to_junit();
        assert!(j.contains("failures=\"1\""));
        assert!(j.contains("<failure"));
        assert!(j.contains("<skipped message=\""));
        assert!(j.contains("&quot;libdpdk&quot;"));
        assert!(j.contains("selftest.a&lt;b"));
        let t = rep.to_text();
        assert!(t.contains("fail  socket/tcp"));
        assert!(t.contains("summary: 0 pass, 0 warn, 1 fail, 1 skip, 0 error"));
    }
}
