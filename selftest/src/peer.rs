//! Two-host runs: `daqtune selftest socket --serve` receives and verifies, `--peer ADDR` sends.
//!
//! A control connection (TCP, default port 5299) carries one JSON object per line:
//! client `{"op":"start","mode":"tcp","message_size":8192}`, server
//! `{"ok":true,"port":P}` (a data port bound on the address the client reached), the client
//! streams to P, then sends `{"op":"done","sent":N}` and the server answers with what it
//! received (`RxStats`). The receiver runs the same verifier as a local run.

use crate::engine::{Mode, RunControl, RunSpec};
use crate::error::{Error, Result};
use crate::payload::SeqTracker;
use crate::socket::{
    enter, tcp_receive, tcp_send, thread_result, udp_receive, udp_send, unspecified_like, RxOut,
    TxOut,
};
use crate::sys;
use crate::topology::Topology;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub const DEFAULT_PORT: u16 = 5299;
/// Largest message a server accepts (bounds its buffers).
const MAX_MESSAGE: usize = 1 << 20;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum Request {
    Start { mode: Mode, message_size: usize },
    Done { sent: u64 },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ready {
    pub ok: bool,
    pub port: u16,
    pub error: Option<String>,
}

/// What the server measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RxStats {
    pub tracker: SeqTracker,
    pub bytes: u64,
    pub cpu_s: f64,
    pub wall_s: f64,
    pub notes: Vec<String>,
}

/// `ADDR`, `ADDR:PORT` or `[V6]:PORT`; the port defaults to [`DEFAULT_PORT`].
pub fn parse_peer(s: &str) -> std::result::Result<SocketAddr, String> {
    if let Ok(sa) = s.parse::<SocketAddr>() {
        return Ok(sa);
    }
    s.trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<std::net::IpAddr>()
        .map(|ip| SocketAddr::new(ip, DEFAULT_PORT))
        .map_err(|_| format!("{s:?} is not an address (ADDR or ADDR:PORT)"))
}

fn send_line<T: Serialize>(s: &mut TcpStream, v: &T) -> Result<()> {
    let mut line = serde_json::to_string(v).map_err(|e| Error::Invalid(e.to_string()))?;
    line.push('\n');
    s.write_all(line.as_bytes())
        .map_err(|e| Error::io("control connection write", e))
}

fn read_line<T: for<'de> Deserialize<'de>>(r: &mut BufReader<TcpStream>) -> Result<T> {
    let mut line = String::new();
    // Bounded: a peer that sends garbage without a newline cannot grow this forever.
    let n = r
        .by_ref()
        .take(64 * 1024)
        .read_line(&mut line)
        .map_err(|e| Error::io("control connection read", e))?;
    if n == 0 {
        return Err(Error::Invalid("control connection closed".into()));
    }
    serde_json::from_str(line.trim()).map_err(|e| Error::Invalid(format!("control message: {e}")))
}

/// The sending side of a `--peer` run.
pub(crate) fn run_client(t: &Topology, spec: &RunSpec, ctl: &RunControl) -> Result<(TxOut, RxOut)> {
    let ctrl = SocketAddr::new(t.rx_addr, t.peer_port);
    let mut control = TcpStream::connect_timeout(&ctrl, Duration::from_secs(5))
        .map_err(|e| Error::io(format!("connect to the --serve peer at {ctrl}"), e))?;
    let _ = control.set_read_timeout(Some(Duration::from_secs(30)));
    let mut reader = BufReader::new(
        control
            .try_clone()
            .map_err(|e| Error::io("control connection", e))?,
    );
    send_line(
        &mut control,
        &Request::Start {
            mode: spec.mode,
            message_size: spec.message_size,
        },
    )?;
    let ready: Ready = read_line(&mut reader)?;
    if !ready.ok {
        return Err(Error::Refused(format!(
            "peer: {}",
            ready.error.unwrap_or_else(|| "refused".into())
        )));
    }
    let data = SocketAddr::new(t.rx_addr, ready.port);
    let tx = std::thread::scope(|s| {
        let h = s.spawn(|| -> Result<TxOut> {
            let note = enter(None, spec.tx_cpu, "tx")?;
            let mut out = match spec.mode {
                Mode::Tcp => {
                    let stream = TcpStream::connect_timeout(&data, Duration::from_secs(5))
                        .map_err(|e| Error::io(format!("connect to {data}"), e))?;
                    tcp_send(stream, spec, ctl)
                }
                _ => {
                    let sock = UdpSocket::bind(SocketAddr::new(unspecified_like(data.ip()), 0))
                        .map_err(|e| Error::io("bind udp sender", e))?;
                    sock.connect(data)
                        .map_err(|e| Error::io(format!("udp connect {data}"), e))?;
                    udp_send(&sock, spec, ctl, &AtomicU64::new(0))
                }
            };
            out.notes.extend(note);
            Ok(out)
        });
        thread_result(h, "tx")
    })?;
    send_line(&mut control, &Request::Done { sent: tx.sent })?;
    let stats: RxStats = read_line(&mut reader)?;
    let rx = RxOut {
        tracker: stats.tracker,
        bytes: stats.bytes,
        cpu_ns: (stats.cpu_s * 1e9) as u64,
        wall_ns: (stats.wall_s * 1e9) as u64,
        notes: stats
            .notes
            .into_iter()
            .map(|n| format!("peer: {n}"))
            .collect(),
        ..RxOut::default()
    };
    Ok((tx, rx))
}

/// Serves sessions one after the other until `ctl` stops (SIGINT/SIGTERM) or, with `once`,
/// after one session. `log` gets one line per session.
pub fn serve(
    listen: SocketAddr,
    rx_cpu: Option<usize>,
    ctl: &RunControl,
    once: bool,
    mut log: impl FnMut(&str),
) -> Result<()> {
    let listener =
        TcpListener::bind(listen).map_err(|e| Error::io(format!("listen on {listen}"), e))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| Error::io("listener", e))?;
    log(&format!(
        "serving self-test sessions on {}",
        listener
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default()
    ));
    while !ctl.stopped() {
        match listener.accept() {
            Ok((stream, from)) => {
                let _ = stream.set_nonblocking(false);
                match session(stream, rx_cpu, ctl) {
                    Ok(line) => log(&format!("{from}: {line}")),
                    Err(e) => log(&format!("{from}: {e}")),
                }
                if once {
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => return Err(Error::io("accept", e)),
        }
    }
    Ok(())
}

fn accept_within(l: &TcpListener, limit: Duration, ctl: &RunControl) -> Result<TcpStream> {
    l.set_nonblocking(true)
        .map_err(|e| Error::io("data listener", e))?;
    let t0 = Instant::now();
    loop {
        match l.accept() {
            Ok((s, _)) => {
                let _ = s.set_nonblocking(false);
                return Ok(s);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if t0.elapsed() > limit || ctl.stopped() {
                    return Err(Error::Invalid("the sender never connected".into()));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(Error::io("accept data connection", e)),
        }
    }
}

fn session(mut control: TcpStream, rx_cpu: Option<usize>, ctl: &RunControl) -> Result<String> {
    let _ = control.set_read_timeout(Some(Duration::from_secs(3600)));
    let mut reader = BufReader::new(
        control
            .try_clone()
            .map_err(|e| Error::io("control connection", e))?,
    );
    let (mode, size) = match read_line::<Request>(&mut reader)? {
        Request::Start { mode, message_size } => (mode, message_size),
        Request::Done { .. } => return Err(Error::Invalid("done before start".into())),
    };
    let bad = match mode {
        Mode::Tcp if (crate::payload::HEADER_LEN..=MAX_MESSAGE).contains(&size) => None,
        Mode::Udp if (crate::payload::HEADER_LEN..=65_000).contains(&size) => None,
        Mode::Tcp | Mode::Udp => Some(format!("message size {size} out of range")),
        m => Some(format!("mode {m} is not served by the socket engine")),
    };
    if let Some(e) = bad {
        send_line(
            &mut control,
            &Ready {
                ok: false,
                port: 0,
                error: Some(e.clone()),
            },
        )?;
        return Err(Error::Invalid(e));
    }
    let local_ip = control
        .local_addr()
        .map_err(|e| Error::io("control address", e))?
        .ip();
    let sent = AtomicU64::new(0);
    let tx_done = AtomicBool::new(false);
    let rx: RxOut = match mode {
        Mode::Tcp => {
            let l = TcpListener::bind(SocketAddr::new(local_ip, 0))
                .map_err(|e| Error::io("bind data port", e))?;
            let port = l
                .local_addr()
                .map_err(|e| Error::io("data port", e))?
                .port();
            send_line(
                &mut control,
                &Ready {
                    ok: true,
                    port,
                    error: None,
                },
            )?;
            let stream = accept_within(&l, Duration::from_secs(10), ctl)?;
            let rx = std::thread::scope(|s| {
                let h = s.spawn(|| -> Result<RxOut> {
                    let note = enter(None, rx_cpu, "rx")?;
                    // The server does not know the client's pacing; it reports no latency
                    // (two clocks), so fewer wake-ups cost nothing it shows.
                    let mut out = tcp_receive(stream, size, false, ctl, true);
                    out.notes.extend(note);
                    Ok(out)
                });
                thread_result(h, "rx")
            })?;
            if let Request::Done { sent: n } = read_line::<Request>(&mut reader)? {
                sent.store(n, Ordering::SeqCst);
            }
            rx
        }
        _ => {
            let sock = UdpSocket::bind(SocketAddr::new(local_ip, 0))
                .map_err(|e| Error::io("bind data port", e))?;
            // As in a local run: ask within net.core.rmem_max, force past it when privileged.
            if sys::set_socket_buffer(sock.as_raw_fd(), true, 32 << 20).unwrap_or(0) < 64 << 20 {
                let _ = sys::force_receive_buffer(sock.as_raw_fd(), 32 << 20);
            }
            sock.set_read_timeout(Some(Duration::from_millis(50)))
                .map_err(|e| Error::io("udp read timeout", e))?;
            let port = sock
                .local_addr()
                .map_err(|e| Error::io("data port", e))?
                .port();
            send_line(
                &mut control,
                &Ready {
                    ok: true,
                    port,
                    error: None,
                },
            )?;
            std::thread::scope(|s| {
                let h = s.spawn(|| -> Result<RxOut> {
                    let note = enter(None, rx_cpu, "rx")?;
                    let mut out = udp_receive(
                        &sock,
                        size,
                        false,
                        ctl,
                        &sent,
                        &tx_done,
                        crate::engine::SocketOptions::default(),
                    );
                    out.notes.extend(note);
                    Ok(out)
                });
                let done = read_line::<Request>(&mut reader);
                if let Ok(Request::Done { sent: n }) = &done {
                    sent.store(*n, Ordering::SeqCst);
                }
                tx_done.store(true, Ordering::SeqCst);
                thread_result(h, "rx")
            })?
        }
    };
    let mut tracker = rx.tracker.clone();
    tracker.finish(sent.load(Ordering::SeqCst));
    let stats = RxStats {
        tracker: tracker.clone(),
        bytes: rx.bytes,
        cpu_s: rx.cpu_ns as f64 / 1e9,
        wall_s: rx.wall_ns as f64 / 1e9,
        notes: rx.notes,
    };
    send_line(&mut control, &stats)?;
    Ok(format!(
        "{mode}: {} received, {} lost, {} integrity errors, {:.2} Gb/s",
        tracker.received,
        tracker.lost,
        tracker.integrity_errors,
        crate::metrics::gbps(rx.bytes, stats.wall_s)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Engine;
    use crate::socket::SocketEngine;

    #[test]
    fn peer_addresses() {
        assert_eq!(
            parse_peer("198.18.0.2"),
            Ok("198.18.0.2:5299".parse().expect("sa"))
        );
        assert_eq!(
            parse_peer("198.18.0.2:7000"),
            Ok("198.18.0.2:7000".parse().expect("sa"))
        );
        assert_eq!(parse_peer("[::1]"), Ok("[::1]:5299".parse().expect("sa")));
        assert!(parse_peer("host.example").is_err());
        assert!(parse_peer("").is_err());
    }

    #[test]
    fn control_messages_round_trip() {
        let r = Request::Start {
            mode: Mode::Udp,
            message_size: 8192,
        };
        let s = serde_json::to_string(&r).expect("json");
        assert_eq!(s, r#"{"op":"start","mode":"udp","message_size":8192}"#);
        assert_eq!(serde_json::from_str::<Request>(&s).expect("back"), r);
        assert!(serde_json::from_str::<Request>(r#"{"op":"nope"}"#).is_err());
    }

    fn serve_and_run(mode: Mode, size: usize) -> crate::report::EngineResult {
        // Port 0: the kernel picks a free port when the server binds, and the server's first
        // log line says which (a port probed beforehand could be taken by then).
        let listen: SocketAddr = "127.0.0.1:0".parse().expect("sa");
        let server_ctl = RunControl::new();
        let sc = server_ctl.clone();
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        let server = std::thread::spawn(move || {
            serve(listen, None, &sc, true, |l| {
                let _ = tx.send(l.to_string());
            })
        });
        let bound: SocketAddr = rx
            .recv()
            .expect("the server's first log line")
            .rsplit(' ')
            .next()
            .and_then(|a| a.parse().ok())
            .expect("the address the server listens on");
        let topo = Topology::peer(bound);
        let mut spec = RunSpec::new(mode);
        spec.duration = Duration::from_millis(300);
        spec.message_size = size;
        if mode == Mode::Udp {
            spec.rate_gbps = Some(0.3);
        }
        let result = SocketEngine::new(&topo).run(&spec, &RunControl::new());
        server_ctl.stop();
        server.join().expect("server thread").expect("serve");
        result.expect("a run against the server")
    }

    #[test]
    fn tcp_against_a_server() {
        let r = serve_and_run(Mode::Tcp, 8192);
        assert!(r.packets > 0);
        assert_eq!(r.packets, r.sent);
        assert_eq!(r.integrity_errors, 0);
        assert_eq!(r.lost, 0);
        assert!(r.latency.is_none());
        assert_eq!(r.topology, "peer");
    }

    #[test]
    fn udp_against_a_server() {
        let r = serve_and_run(Mode::Udp, 4000);
        assert!(r.packets > 0);
        assert_eq!(r.integrity_errors, 0);
        assert_eq!(r.packets + r.lost, r.sent);
    }
}
