//! Types both sides of a test share, and the TCP side channel's messages (one JSON object per
//! line), used with `--peer` the way perftest exchanges QP numbers, GIDs and keys.

use daqtune_selftest::metrics::Histogram;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::net::Ipv4Addr;

/// Which transfer a run makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Transfer {
    /// RDMA WRITE with immediate (bandwidth).
    Write,
    /// SEND/RECV (bandwidth).
    Send,
    /// SEND ping-pong, one message in flight (latency).
    PingPong,
}

impl Transfer {
    pub fn as_str(self) -> &'static str {
        match self {
            Transfer::Write => "write",
            Transfer::Send => "send",
            Transfer::PingPong => "pingpong",
        }
    }
}

/// Which device and port one side uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointConfig {
    pub device: String,
    pub port: u8,
    /// Force a GID index (else: RoCE v2 IPv4, see gid::select_gid).
    pub gid_index: Option<u32>,
    /// Pick the RoCE v2 GID of this address.
    pub ipv4: Option<Ipv4Addr>,
}

/// What the peer needs to connect its QP to ours (exchanged in memory or over the TCP side
/// channel, as perftest does).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnInfo {
    pub device: String,
    pub qpn: u32,
    pub psn: u32,
    pub gid: String,
    pub gid_index: u32,
    pub lid: u16,
    /// ibv_mtu enum value of the port's active MTU.
    pub mtu: u32,
    pub ethernet: bool,
    pub addr: u64,
    pub rkey: u32,
    pub slots: u32,
    pub slot_size: u32,
}

/// Completion-queue side of a run: completions seen and errors by status name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CqStats {
    pub completions: u64,
    pub errors: BTreeMap<String, u64>,
}

impl CqStats {
    pub fn error_count(&self) -> u64 {
        self.errors.values().sum()
    }

    pub fn merge(&mut self, o: &CqStats) {
        self.completions += o.completions;
        for (k, v) in &o.errors {
            *self.errors.entry(k.clone()).or_default() += v;
        }
    }
}

/// The sending side's figures.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SenderStats {
    pub sent: u64,
    /// Ping-pong replies that failed verification on the way back.
    #[serde(default)]
    pub integrity_errors: u64,
    pub bytes: u64,
    pub wall_s: f64,
    pub cpu_s: f64,
    pub cq: CqStats,
    /// Round trips (ping-pong only), RTT/2 in ns is what the histogram holds.
    #[serde(skip)]
    pub latency: Option<Histogram>,
    pub notes: Vec<String>,
}

/// The receiving side's figures.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ReceiverStats {
    pub received: u64,
    pub bytes: u64,
    pub lost: u64,
    pub reordered: u64,
    pub integrity_errors: u64,
    /// First to last arrival.
    pub active_s: f64,
    pub wall_s: f64,
    pub cpu_s: f64,
    pub cq: CqStats,
    /// Whether the end marker arrived (a run cut short by an error has not).
    pub ended: bool,
    /// One-way latency from the sender's stamps, ns; only when both sides share a clock.
    #[serde(skip)]
    pub latency: Option<Histogram>,
    pub notes: Vec<String>,
}

/// Version of the side-channel protocol; both ends must speak the same.
pub const PROTO_VERSION: u32 = 1;

/// What a sender writes on the side channel, after the request, when its QP failed: the
/// receiver stops waiting for the end marker. (Older receivers ignore it and time out.)
pub const ABORT_LINE: &[u8] = b"abort\n";

/// Client -> server: what to run, and the client's QP.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    pub version: u32,
    pub transfer: Transfer,
    pub msg_size: usize,
    pub slots: usize,
    pub duration_ms: u64,
    pub conn: ConnInfo,
    /// ACK timeout exponent both QPs use.
    #[serde(default = "default_qp_timeout")]
    pub qp_timeout: u8,
}

fn default_qp_timeout() -> u8 {
    14
}

/// Server -> client: the server's QP, armed and connected, or why not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reply {
    pub conn: Option<ConnInfo>,
    pub error: Option<String>,
    /// The server could not run this at all (no device, no RDMA support): a skip.
    #[serde(default)]
    pub skip: bool,
}

/// Server -> client after the run: the receiver's figures and port counter deltas.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Outcome {
    pub receiver: ReceiverStats,
    pub counters: BTreeMap<String, u64>,
    pub error: Option<String>,
    /// The drop and error counters of the netdev under the receiving port, before and after
    /// the run (absent from a peer of an older build).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netdev: Option<daqtune_probe::net::counters::PortDelta>,
}

/// Longest line the side channel accepts (a ConnInfo is a few hundred bytes).
const MAX_LINE: usize = 64 * 1024;

/// Writes one message as a JSON line.
pub fn send_line<T: Serialize>(w: &mut impl Write, msg: &T) -> std::io::Result<()> {
    let mut s = serde_json::to_string(msg).map_err(std::io::Error::other)?;
    s.push('\n');
    w.write_all(s.as_bytes())?;
    w.flush()
}

/// Reads one JSON line; errors on EOF, oversize lines and garbage.
pub fn recv_line<T: for<'de> Deserialize<'de>>(r: &mut impl BufRead) -> Result<T, String> {
    let mut line = String::new();
    let mut limited = std::io::Read::take(&mut *r, MAX_LINE as u64 + 1);
    let n = limited.read_line(&mut line).map_err(|e| e.to_string())?;
    if n == 0 {
        return Err("connection closed".into());
    }
    if n > MAX_LINE {
        return Err("line too long".into());
    }
    parse_line(&line)
}

pub fn parse_line<T: for<'de> Deserialize<'de>>(line: &str) -> Result<T, String> {
    serde_json::from_str(line.trim()).map_err(|e| format!("bad message: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn() -> ConnInfo {
        ConnInfo {
            device: "rxe0".into(),
            qpn: 17,
            psn: 0x123456,
            gid: "0000:0000:0000:0000:0000:ffff:c612:0001".into(),
            gid_index: 1,
            lid: 0,
            mtu: 3,
            ethernet: true,
            addr: 0x7f00_0000_1000,
            rkey: 0xabcd,
            slots: 64,
            slot_size: 65536,
        }
    }

    #[test]
    fn request_round_trip() {
        let req = Request {
            version: PROTO_VERSION,
            transfer: Transfer::Write,
            msg_size: 65536,
            slots: 64,
            duration_ms: 2000,
            conn: conn(),
            qp_timeout: 18,
        };
        let mut buf = Vec::new();
        send_line(&mut buf, &req).expect("write");
        assert_eq!(buf.last(), Some(&b'\n'));
        let back: Request = recv_line(&mut &buf[..]).expect("read");
        assert_eq!(back, req);
    }

    #[test]
    fn garbage_and_eof_are_errors() {
        assert!(recv_line::<Request>(&mut &b""[..]).is_err());
        assert!(recv_line::<Request>(&mut &b"(null)\n"[..]).is_err());
        assert!(recv_line::<Request>(&mut &b"{}\n"[..]).is_err());
        let long = vec![b'x'; MAX_LINE + 10];
        assert_eq!(
            recv_line::<Request>(&mut &long[..]).err().as_deref(),
            Some("line too long")
        );
    }

    #[test]
    fn cq_stats_merge() {
        let mut a = CqStats {
            completions: 3,
            ..Default::default()
        };
        a.errors.insert("retry counter exceeded".into(), 1);
        let mut b = a.clone();
        b.errors.insert("remote access error".into(), 2);
        a.merge(&b);
        assert_eq!(a.completions, 6);
        assert_eq!(a.error_count(), 4);
        assert_eq!(a.errors["retry counter exceeded"], 2);
    }
}
