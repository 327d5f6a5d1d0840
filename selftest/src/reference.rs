//! What a result is worth: the rate the port's link can carry (its payload rate at the MTU) and
//! the profile's reference for the same engine and message shape, with the floor a gate holds
//! it to (docs/selftest.md, "Line rate, references and the floor").
//!
//! The figures are pure functions of the link speed, the MTU and the message shape; reading the
//! speed (sysfs `speed`, which the kernel answers from the driver's ethtool link settings) is
//! the caller's. A link without a speed (veth, loopback, a peer across the network) gives an
//! explicit "no reference": the result says so and is never passed on a reference it was not
//! compared with.

use crate::engine::Mode;
use crate::report::{EngineResult, Status};
use serde::{Deserialize, Serialize};

/// Test aid, never set on a real host: the link speed (Mb/s) a self-test veth pair reports to
/// daqtune. The veth driver itself answers a constant 10000 Mb/s that limits nothing, so daqtune
/// never takes a veth's own speed (docs/selftest.md).
pub const TEST_VETH_SPEED_ENV: &str = "DAQTUNE_TEST_VETH_SPEED_MBPS";
/// Test aid: shape the sending veth end with a token-bucket filter at this many Mbit/s, so a
/// test can make a port slow on purpose.
pub const TEST_VETH_SHAPE_ENV: &str = "DAQTUNE_TEST_VETH_SHAPE_MBIT";

/// The share of its reference a result must reach when the profile names none.
pub const DEFAULT_FLOOR: f64 = 0.9;

/// A rate a tuned platform reaches on one engine, mode and message shape (profile
/// `selftest.reference`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reference {
    pub engine: String,
    pub mode: String,
    /// Bytes per message the figure was measured with; None = any.
    pub message_size: Option<usize>,
    /// Parallel streams; None = any.
    pub streams: Option<usize>,
    /// Payload Gb/s; None = the payload rate of the port's link (where nothing is published).
    pub gbps: Option<f64>,
    /// The loss the reference run itself saw, percent (seed 002: unpaced UDP lost ~51 %): a
    /// run at line rate may lose this much before its loss fails it.
    pub loss_pct: Option<f64>,
    /// Share of `gbps` a run must reach (None = the profile's `selftest.floor`).
    pub floor: Option<f64>,
    /// Where the figure comes from.
    pub source: String,
}

impl Reference {
    fn shape(&self) -> String {
        shape_words(self.message_size, self.streams)
    }
}

fn shape_words(size: Option<usize>, streams: Option<usize>) -> String {
    let size = size
        .map(|s| format!("{s}-byte messages"))
        .unwrap_or_else(|| "any message size".into());
    match streams {
        Some(1) => format!("{size}, 1 stream"),
        Some(n) => format!("{size}, {n} streams"),
        None => size,
    }
}

/// The link a run crossed, as far as it is known.
#[derive(Debug, Clone, PartialEq)]
pub struct Link {
    /// Mb/s; None = no speed (with the reason in `source`).
    pub speed_mbps: Option<u64>,
    /// How the speed is known, or why there is none.
    pub source: String,
    /// MTU of the path; None where the self-test does not set it (loopback, peer).
    pub mtu: Option<u32>,
    /// What the port's PCIe link carries, Gb/s, with how it is known (the NIC's own
    /// `current_link_speed` x `current_link_width`); None where unknown.
    pub pcie: Option<(f64, String)>,
}

impl Link {
    pub fn none(why: &str) -> Link {
        Link {
            speed_mbps: None,
            source: why.into(),
            mtu: None,
            pcie: None,
        }
    }
}

/// Ethernet framing around each frame: 14 header, 4 FCS, 8 preamble, 12 inter-frame gap.
const FRAMING: u64 = 38;

/// Payload Gb/s a link of `speed_mbps` at `mtu` carries in `mode` with `message`-byte messages:
/// TCP fills MSS-sized segments (IPv4 + TCP with timestamps = 52 bytes per segment); UDP and raw
/// frames carry one message per datagram, IP-fragmented when it does not fit the MTU; RoCE v2
/// packets carry the largest IB MTU that fits (44 bytes of IP, UDP, BTH and ICRC each). None
/// when the MTU cannot carry the headers.
pub fn payload_gbps(speed_mbps: u64, mtu: u32, mode: Mode, message: usize) -> Option<f64> {
    let mtu = u64::from(mtu);
    let speed = speed_mbps as f64 / 1000.0;
    match mode {
        Mode::Tcp => {
            let mss = mtu.checked_sub(52).filter(|m| *m > 0)?;
            Some(speed * mss as f64 / (mtu + FRAMING) as f64)
        }
        Mode::Udp | Mode::Raw => {
            let per_frame = mtu.checked_sub(20).filter(|m| *m >= 8)?;
            let m = message.max(1) as u64;
            let datagram = m + 8;
            let frames = datagram.div_ceil(per_frame);
            let wire = datagram + frames * (20 + FRAMING);
            Some(speed * m as f64 / wire as f64)
        }
        Mode::Write | Mode::Send => {
            let room = mtu.checked_sub(44)?;
            let pmtu = [4096u64, 2048, 1024, 512, 256]
                .into_iter()
                .find(|p| *p <= room)?;
            Some(speed * pmtu as f64 / (pmtu + 44 + FRAMING) as f64)
        }
    }
}

/// Data Gb/s a PCIe link carries in 256-byte writes: [`daqtune_probe::pci::payload_gbps`].
pub use daqtune_probe::pci::payload_gbps as pcie_payload_gbps;

/// The reference that applies to a run of `engine`/`mode` with this shape: the most specific
/// entry whose stated shape matches.
pub fn find<'a>(
    refs: &'a [Reference],
    engine: &str,
    mode: &str,
    message_size: usize,
    streams: usize,
) -> Option<&'a Reference> {
    refs.iter()
        .filter(|r| {
            r.engine == engine
                && r.mode == mode
                && r.message_size.is_none_or(|m| m == message_size)
                && r.streams.is_none_or(|s| s == streams)
        })
        .max_by_key(|r| u8::from(r.message_size.is_some()) + u8::from(r.streams.is_some()))
}

pub use daqtune_report::assessment::Assessment;

/// Measures `r` against `link` and the references, records the assessment on it, adds its
/// sentence to the notes and fails a result below its floor. A skipped or errored result keeps
/// its status (and is not assessed).
pub fn assess(r: &mut EngineResult, link: &Link, refs: &[Reference], global_floor: f64) {
    if matches!(r.status, Status::Skip | Status::Error) {
        return;
    }
    let streams = r.streams.len().max(1);
    let mode = r.mode.as_str();
    let line = match (link.speed_mbps, link.mtu) {
        (Some(s), Some(m)) => payload_gbps(s, m, r.mode, r.message_size),
        _ => None,
    };
    // The NIC's PCIe link caps what its port carries (seed 002: a 200G cable, ~100 Gb/s).
    let pcie_cap = link
        .pcie
        .as_ref()
        .filter(|(p, _)| line.is_some_and(|l| *p < l));
    let line = match pcie_cap {
        Some((p, _)) => Some(*p),
        None => line,
    };
    let of_line = line.filter(|l| *l > 0.0).map(|l| r.gbps * 100.0 / l);
    let found = find(refs, &r.engine, mode, r.message_size, streams);
    let mut a = Assessment {
        link_mbps: link.speed_mbps,
        link_source: link.source.clone(),
        mtu: link.mtu,
        line_gbps: line,
        pcie_gbps: link.pcie.as_ref().map(|(p, _)| *p),
        of_line_pct: of_line,
        reference_gbps: None,
        reference_stated_gbps: found.and_then(|f| f.gbps),
        reference_source: found.map(|f| f.source.clone()),
        of_reference_pct: None,
        floor: None,
        floor_gbps: None,
        shortfall_gbps: None,
        verdict: "none".into(),
        why: String::new(),
    };
    let line_words = match (link.speed_mbps, line, pcie_cap) {
        (Some(s), Some(l), Some((_, how))) => format!(
            "{:.1} % of {l:.2} Gb/s, what the port's PCIe link carries ({how}), below the payload rate of the {s} Mb/s link at MTU {}",
            of_line.unwrap_or(0.0),
            link.mtu.unwrap_or(0)
        ),
        (Some(s), Some(l), None) => format!(
            "{:.1} % of the {l:.2} Gb/s payload rate of the {s} Mb/s link at MTU {}",
            of_line.unwrap_or(0.0),
            link.mtu.unwrap_or(0)
        ),
        _ => format!("no line rate ({})", link.source),
    };
    let what = format!("{}.{mode}", r.engine);
    a.why = match (found, line) {
        (None, _) => {
            let others: Vec<String> = refs
                .iter()
                .filter(|x| x.engine == r.engine && x.mode == mode)
                .map(Reference::shape)
                .collect();
            if others.is_empty() {
                format!("{line_words}; no reference: the profile has none for {what}")
            } else {
                format!(
                    "{line_words}; no reference: the profile's {what} reference is for {}, this run used {}",
                    others.join(" / "),
                    shape_words(Some(r.message_size), Some(streams))
                )
            }
        }
        (Some(f), None) => format!(
            "no reference: the profile's {} for {what} is a port's figure and this path has no link speed ({})",
            f.gbps
                .map(|g| format!("{g:.1} Gb/s"))
                .unwrap_or_else(|| "line rate".into()),
            link.source
        ),
        (Some(_), Some(_)) if r.packets == 0 => {
            format!("{line_words}; no reference compared: nothing arrived")
        }
        (Some(f), Some(l)) => {
            let reference = f.gbps.unwrap_or(l).min(l);
            let floor = f.floor.unwrap_or(global_floor);
            let floor_gbps = reference * floor;
            let pct = r.gbps * 100.0 / reference;
            a.reference_gbps = Some(reference);
            a.of_reference_pct = Some(pct);
            a.floor = Some(floor);
            a.floor_gbps = Some(floor_gbps);
            let capped = match f.gbps {
                Some(g) if reference < g => format!(" (the profile's {g:.1} Gb/s capped at the line)"),
                Some(_) => String::new(),
                None => " (the line's payload rate)".into(),
            };
            if r.gbps < floor_gbps {
                let short = floor_gbps - r.gbps;
                a.shortfall_gbps = Some(short);
                a.verdict = "below".into();
                r.status = Status::Fail;
                format!(
                    "{:.2} Gb/s is {pct:.1} % of the reference {reference:.2} Gb/s{capped} ({}), below the floor of {:.0} % = {floor_gbps:.2} Gb/s by {short:.2} Gb/s; {line_words}",
                    r.gbps,
                    f.source,
                    floor * 100.0
                )
            } else {
                a.verdict = "met".into();
                format!(
                    "{:.2} Gb/s is {pct:.1} % of the reference {reference:.2} Gb/s{capped} ({}), floor {:.0} %; {line_words}",
                    r.gbps,
                    f.source,
                    floor * 100.0
                )
            }
        }
    };
    r.notes.push(a.why.clone());
    r.reference = Some(a);
}

/// The speed a self-test veth pair is given by [`TEST_VETH_SPEED_ENV`], if set.
pub fn test_veth_speed() -> Option<Result<u64, String>> {
    env_mbps(TEST_VETH_SPEED_ENV)
}

/// The shaping rate of [`TEST_VETH_SHAPE_ENV`], if set.
pub fn test_veth_shape() -> Option<Result<u64, String>> {
    env_mbps(TEST_VETH_SHAPE_ENV)
}

fn env_mbps(name: &str) -> Option<Result<u64, String>> {
    let v = std::env::var_os(name)?;
    Some(parse_mbps(&v.to_string_lossy()).ok_or_else(|| {
        format!(
            "{name}={:?}: expected a whole number of Mb/s between 1 and 10000000",
            v.to_string_lossy()
        )
    }))
}

/// A positive whole number of Mb/s, at most 10 Tb/s.
pub fn parse_mbps(s: &str) -> Option<u64> {
    s.trim()
        .parse::<u64>()
        .ok()
        .filter(|v| (1..=10_000_000).contains(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spark_tcp() -> Reference {
        Reference {
            engine: "socket".into(),
            mode: "tcp".into(),
            message_size: Some(8192),
            streams: Some(4),
            gbps: Some(97.2),
            loss_pct: None,
            floor: None,
            source: "seed 002".into(),
        }
    }

    fn tcp_result(gbps: f64, streams: usize) -> EngineResult {
        let mut r = EngineResult::new("socket", Mode::Tcp, "ports");
        r.message_size = 8192;
        r.gbps = gbps;
        r.packets = 1000;
        r.status = Status::Pass;
        if streams > 1 {
            r.streams = (0..streams)
                .map(|i| crate::report::StreamFigures {
                    stream: i,
                    tx_cpu: None,
                    rx_cpu: None,
                    gbps: gbps / streams as f64,
                    bytes: 0,
                    packets: 0,
                    sent: 0,
                    lost: 0,
                    reordered: 0,
                    integrity_errors: 0,
                    tx_utilization: 0.0,
                    rx_utilization: 0.0,
                })
                .collect();
        }
        r
    }

    fn link(mbps: u64) -> Link {
        Link {
            speed_mbps: Some(mbps),
            source: "test".into(),
            mtu: Some(9000),
            pcie: None,
        }
    }

    #[test]
    fn the_pcie_link_caps_the_line() {
        let gen5x4 = pcie_payload_gbps(32.0, 4);
        assert!((gen5x4 - 114.4).abs() < 0.05, "{gen5x4}");
        assert!((pcie_payload_gbps(2.5, 1) - 2.0 * 256.0 / 282.0).abs() < 1e-9);
        // A 200G port behind Gen5 x4 (the Spark's shape, seed 002): held to 114.4 Gb/s, so
        // 105 Gb/s of TCP is 92 % of its line, and the 97.2 reference stands.
        let mut r = tcp_result(105.0, 4);
        let l = Link {
            pcie: Some((gen5x4, "x4 at 32.0 GT/s".into())),
            ..link(200_000)
        };
        assess(&mut r, &l, &[spark_tcp()], 0.9);
        let a = r.reference.as_ref().expect("assessment");
        assert_eq!(a.line_gbps, Some(gen5x4));
        assert_eq!(a.reference_gbps, Some(97.2));
        assert!(
            a.why
                .contains("what the port's PCIe link carries (x4 at 32.0 GT/s)"),
            "{}",
            a.why
        );
        // A line reference behind it is the PCIe rate.
        let mut r = tcp_result(50.0, 4);
        let line_ref = Reference {
            gbps: None,
            ..spark_tcp()
        };
        assess(&mut r, &l, &[line_ref], 0.9);
        assert_eq!(
            r.reference.as_ref().and_then(|a| a.reference_gbps),
            Some(gen5x4)
        );
        assert_eq!(r.status, Status::Fail);
    }

    #[test]
    fn payload_rates_at_the_mtu() {
        // One 8192-byte message per 9000-byte frame: 66 bytes of framing, as findmax had.
        let udp = payload_gbps(200_000, 9000, Mode::Udp, 8192).expect("udp");
        assert!((udp - 200.0 * 8192.0 / 8258.0).abs() < 1e-9, "{udp}");
        // The same message over a 1500-byte MTU: 6 fragments of 58 bytes of headers each.
        let frag = payload_gbps(10_000, 1500, Mode::Udp, 8192).expect("udp");
        assert!((frag - 10.0 * 8192.0 / (8200.0 + 6.0 * 58.0)).abs() < 1e-9);
        // TCP: 8948-byte segments in 9038 bytes of wire.
        let tcp = payload_gbps(100_000, 9000, Mode::Tcp, 8192).expect("tcp");
        assert!((tcp - 100.0 * 8948.0 / 9038.0).abs() < 1e-9);
        // RoCE: 4096-byte packets at MTU 9000, 1024 at 1500.
        let roce = payload_gbps(200_000, 9000, Mode::Send, 1 << 23).expect("roce");
        assert!((roce - 200.0 * 4096.0 / 4178.0).abs() < 1e-9);
        let roce = payload_gbps(200_000, 1500, Mode::Write, 1 << 23).expect("roce");
        assert!((roce - 200.0 * 1024.0 / 1106.0).abs() < 1e-9);
        assert_eq!(payload_gbps(1000, 40, Mode::Tcp, 8192), None);
        assert_eq!(payload_gbps(1000, 20, Mode::Udp, 8192), None);
    }

    #[test]
    fn the_most_specific_reference_of_the_same_shape_applies() {
        let any = Reference {
            message_size: None,
            streams: None,
            gbps: Some(50.0),
            ..spark_tcp()
        };
        let refs = vec![any.clone(), spark_tcp()];
        assert_eq!(
            find(&refs, "socket", "tcp", 8192, 4).and_then(|r| r.gbps),
            Some(97.2)
        );
        assert_eq!(
            find(&refs, "socket", "tcp", 4096, 1).and_then(|r| r.gbps),
            Some(50.0)
        );
        assert_eq!(find(&refs, "socket", "udp", 8192, 4), None);
        assert_eq!(find(&[spark_tcp()], "socket", "tcp", 8192, 1), None);
    }

    #[test]
    fn below_the_floor_fails_and_says_by_how_much() {
        let mut r = tcp_result(37.0, 4);
        assess(&mut r, &link(200_000), &[spark_tcp()], 0.9);
        assert_eq!(r.status, Status::Fail);
        let a = r.reference.as_ref().expect("assessment");
        assert_eq!(a.verdict, "below");
        assert_eq!(a.reference_gbps, Some(97.2));
        let short = a.shortfall_gbps.expect("shortfall");
        assert!((short - (97.2 * 0.9 - 37.0)).abs() < 1e-9);
        assert!(
            a.why.contains("38.1 % of the reference 97.20 Gb/s"),
            "{}",
            a.why
        );
        assert!(a.why.contains("by 50.48 Gb/s"), "{}", a.why);
        assert!(
            a.why.contains("of the 198.01 Gb/s payload rate"),
            "{}",
            a.why
        );
    }

    #[test]
    fn at_the_floor_passes_and_the_line_caps_the_reference() {
        let mut r = tcp_result(90.0, 4);
        assess(&mut r, &link(200_000), &[spark_tcp()], 0.9);
        assert_eq!(r.status, Status::Pass);
        assert_eq!(
            r.reference.as_ref().map(|a| a.verdict.as_str()),
            Some("met")
        );
        // A 50G port cannot carry the 97.2 Gb/s of a 200G cable's PCIe-bound run: the
        // reference becomes the line's payload rate.
        let mut r = tcp_result(40.0, 4);
        assess(&mut r, &link(50_000), &[spark_tcp()], 0.9);
        let a = r.reference.as_ref().expect("assessment");
        let line = 50.0 * 8948.0 / 9038.0;
        assert!((a.reference_gbps.expect("ref") - line).abs() < 1e-9);
        assert!(a.why.contains("capped at the line"), "{}", a.why);
        assert_eq!(r.status, Status::Fail);
        // A per-reference floor wins over the profile's.
        let mut r = tcp_result(80.0, 4);
        let lenient = Reference {
            floor: Some(0.5),
            ..spark_tcp()
        };
        assess(&mut r, &link(200_000), &[lenient], 0.9);
        assert_eq!(r.status, Status::Pass);
        // No published figure: the line itself is the reference.
        let mut r = tcp_result(5.0, 4);
        let line_ref = Reference {
            gbps: None,
            ..spark_tcp()
        };
        assess(&mut r, &link(10_000), &[line_ref], 0.9);
        let a = r.reference.as_ref().expect("assessment");
        assert!((a.reference_gbps.expect("ref") - 10.0 * 8948.0 / 9038.0).abs() < 1e-9);
        assert_eq!(a.verdict, "below");
        assert!(a.why.contains("the line's payload rate"), "{}", a.why);
    }

    #[test]
    fn no_speed_or_no_reference_is_said_never_passed_silently() {
        let mut r = tcp_result(1.0, 4);
        let veth = Link {
            speed_mbps: None,
            source: "veth pair: no link speed".into(),
            mtu: Some(9000),
            pcie: None,
        };
        assess(&mut r, &veth, &[spark_tcp()], 0.9);
        assert_eq!(r.status, Status::Pass);
        let a = r.reference.as_ref().expect("assessment");
        assert_eq!(a.verdict, "none");
        assert!(a.why.starts_with("no reference"), "{}", a.why);
        assert!(r.notes.iter().any(|n| n.contains("veth pair")));
        // Another shape than the reference's: named, not compared.
        let mut r = tcp_result(1.0, 1);
        assess(&mut r, &link(200_000), &[spark_tcp()], 0.9);
        let a = r.reference.as_ref().expect("assessment");
        assert_eq!(a.verdict, "none");
        assert!(a.why.contains("8192-byte messages, 4 streams"), "{}", a.why);
        assert!(a.of_line_pct.is_some());
        // A skipped result is left alone.
        let mut r = EngineResult::skipped("socket", Mode::Tcp, "veth", "why");
        assess(&mut r, &link(1000), &[spark_tcp()], 0.9);
        assert!(r.reference.is_none());
    }

    #[test]
    fn test_speeds_parse_strictly() {
        assert_eq!(parse_mbps("1000"), Some(1000));
        assert_eq!(parse_mbps(" 25000\n"), Some(25000));
        assert_eq!(parse_mbps("0"), None);
        assert_eq!(parse_mbps("-1"), None);
        assert_eq!(parse_mbps("1e3"), None);
        assert_eq!(parse_mbps("99999999"), None);
    }
}
