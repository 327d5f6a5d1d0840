//! The receiving end for `--peer`: `daqtune-rdma --listen ADDR:PORT --dev DEV` accepts one
//! TCP side-channel connection per run, opens a QP on its device, exchanges QP number, GID and
//! keys, receives and verifies, and sends its figures back.

use crate::buffer::BufferProvider;
use crate::error::RdmaError;
use crate::proto::EndpointConfig;
use daqtune_probe::Host;
use std::sync::atomic::AtomicBool;

/// Serves runs until `stop` is set (checked between connections) or, with `once`, after one.
pub fn serve(
    listen: &str,
    cfg: &EndpointConfig,
    provider: &dyn BufferProvider,
    host: &Host,
    once: bool,
    stop: &AtomicBool,
) -> Result<(), RdmaError> {
    imp::serve(listen, cfg, provider, host, once, stop)
}

#[cfg(not(feature = "rdma"))]
mod imp {
    use super::*;

    pub fn serve(
        _listen: &str,
        _cfg: &EndpointConfig,
        _provider: &dyn BufferProvider,
        _host: &Host,
        _once: bool,
        _stop: &AtomicBool,
    ) -> Result<(), RdmaError> {
        Err(RdmaError::NotBuilt)
    }
}

#[cfg(feature = "rdma")]
mod imp {
    use super::*;
    use crate::counters::{delta, read_port_counters};
    use crate::endpoint::Endpoint;
    use crate::proto::{recv_line, send_line, Outcome, Reply, Request, PROTO_VERSION};
    use crate::verbs::DeviceList;
    use std::io::{BufReader, Read};
    use std::net::{Shutdown, TcpListener, TcpStream};
    use std::sync::atomic::Ordering;
    use std::time::Duration;

    pub fn serve(
        listen: &str,
        cfg: &EndpointConfig,
        provider: &dyn BufferProvider,
        host: &Host,
        once: bool,
        stop: &AtomicBool,
    ) -> Result<(), RdmaError> {
        let l = TcpListener::bind(listen)
            .map_err(|e| RdmaError::SideChannel(format!("listen on {listen}: {e}")))?;
        eprintln!(
            "daqtune-rdma: listening on {listen} with {}:{}",
            cfg.device, cfg.port
        );
        for conn in l.incoming() {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let stream = match conn {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("daqtune-rdma: accept: {e}");
                    continue;
                }
            };
            let who = stream
                .peer_addr()
                .map(|a| a.to_string())
                .unwrap_or_else(|_| "?".into());
            match one(stream, cfg, provider, host, stop) {
                Ok(()) => eprintln!("daqtune-rdma: run for {who} done"),
                Err(e) => eprintln!("daqtune-rdma: run for {who}: {e}"),
            }
            if once {
                break;
            }
        }
        Ok(())
    }

    fn one(
        stream: TcpStream,
        cfg: &EndpointConfig,
        provider: &dyn BufferProvider,
        host: &Host,
        stop: &AtomicBool,
    ) -> Result<(), RdmaError> {
        let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
        let mut w = stream.try_clone()?;
        let mut r = BufReader::new(stream);
        let req: Request = recv_line(&mut r).map_err(RdmaError::SideChannel)?;
        let fail = |w: &mut TcpStream, e: &RdmaError| {
            let _ = send_line(
                w,
                &Reply {
                    conn: None,
                    error: Some(e.to_string()),
                    skip: e.is_skip(),
                },
            );
        };
        if req.version != PROTO_VERSION {
            let e = RdmaError::SideChannel(format!(
                "protocol version {} (this side speaks {PROTO_VERSION})",
                req.version
            ));
            fail(&mut w, &e);
            return Err(e);
        }
        let setup = || -> Result<Endpoint, RdmaError> {
            let list = DeviceList::get()?;
            let mut ep = Endpoint::open(&list, cfg, req.slots, req.msg_size, provider)?;
            ep.qp_timeout = req.qp_timeout;
            ep.connect(&req.conn)?;
            ep.arm_receiver(req.transfer, req.msg_size)?;
            Ok(ep)
        };
        let mut ep = match setup() {
            Ok(ep) => ep,
            Err(e) => {
                fail(&mut w, &e);
                return Err(e);
            }
        };
        let c0 = read_port_counters(host, ep.device(), ep.port());
        let netdev = |ep: &Endpoint| {
            let g = ep.gid();
            crate::counters::netdev_sample(host, ep.device(), ep.port(), g.index, g.ndev_ifindex)
        };
        let n0 = (netdev(&ep), std::time::Instant::now());
        send_line(
            &mut w,
            &Reply {
                conn: Some(ep.info()),
                error: None,
                skip: false,
            },
        )?;
        let abort = AtomicBool::new(false);
        let done = AtomicBool::new(false);
        let limit = Duration::from_millis(req.duration_ms) + Duration::from_secs(30);
        let watch = w.try_clone()?;
        let res = std::thread::scope(|s| {
            s.spawn(|| watch_for_abort(&watch, &abort, &done));
            let res = ep.run_receiver(req.transfer, req.msg_size, limit, false, stop, &abort);
            done.store(true, Ordering::Relaxed);
            // Wakes the watcher's read.
            let _ = watch.shutdown(Shutdown::Read);
            res
        });
        let out = match res {
            Ok(receiver) => {
                let c1 = read_port_counters(host, ep.device(), ep.port());
                let n1 = netdev(&ep);
                let p = format!("{}/{}", ep.device(), ep.port());
                Outcome {
                    receiver,
                    counters: delta(&c0, &c1)
                        .into_iter()
                        .map(|(k, v)| (format!("{p}/{k}"), v))
                        .collect(),
                    error: None,
                    netdev: Some(daqtune_probe::net::counters::PortDelta::new(
                        "rx",
                        &n0.0,
                        &n1,
                        n0.1.elapsed().as_secs_f64(),
                    )),
                }
            }
            Err(e) => Outcome {
                error: Some(e.to_string()),
                ..Default::default()
            },
        };
        send_line(&mut w, &out)?;
        Ok(())
    }

    /// While the receiver runs, a byte from the sender (its [`crate::proto::ABORT_LINE`]) or
    /// the connection's end means the sender's QP failed: stop waiting for the end marker.
    fn watch_for_abort(stream: &TcpStream, abort: &AtomicBool, done: &AtomicBool) {
        let mut b = [0u8; 16];
        loop {
            if done.load(Ordering::Relaxed) {
                return;
            }
            match (&*stream).read(&mut b) {
                Ok(_) => {
                    if !done.load(Ordering::Relaxed) {
                        abort.store(true, Ordering::Relaxed);
                    }
                    return;
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock
                            | std::io::ErrorKind::TimedOut
                            | std::io::ErrorKind::Interrupted
                    ) => {}
                Err(_) => return,
            }
        }
    }
}
