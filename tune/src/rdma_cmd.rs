//! `daqtune selftest rdma`: the profile's values, the helper's arguments, and the run of the
//! `daqtune-rdma` executable (split off the other self-tests: its flags are its own).

use crate::cli::GlobalArgs;
use daqtune_engine::commands::choose_profile;
use daqtune_engine::hostroot::open_host;
use daqtune_engine::profile::LoadedProfile;
use daqtune_engine::UsageError;
use daqtune_selftest::launch::rdma::{NamespacedTopology, Relay};
use daqtune_selftest::reference::Link;
use daqtune_selftest::sys::hostname;
use daqtune_selftest::Render;

/// `daqtune selftest rdma`: the verbs engine lives in the `daqtune-rdma` executable (it links
/// libibverbs, which the main binary must not need), so this finds it, runs it with the
/// profile's values and relays its report. Ports are never picked automatically: name two
/// netdevs cabled back to back (`--tx-if/--rx-if`: they move into private namespaces with
/// their RDMA devices), two RDMA devices (`--dev/--peer-dev`: rxe devices on a veth pair, or
/// ports already isolated), or a peer.
#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "daqtune selftest rdma",
    about = "RDMA RC WRITE/SEND/ping-pong self-test (ibverbs)"
)]
pub struct RdmaArgs {
    /// Sending netdev of two ports cabled back to back; both move into private namespaces with
    /// their RDMA devices for the run (exclusive RDMA netns mode, shared where refused).
    #[arg(long, value_name = "IF", requires = "rx_if", conflicts_with_all = ["dev", "peer_dev", "peer", "listen", "veth"])]
    pub tx_if: Option<String>,
    /// Receiving netdev (see --tx-if).
    #[arg(long, value_name = "IF", requires = "tx_if")]
    pub rx_if: Option<String>,
    /// A veth pair between two private namespaces with a soft-RoCE device on each end, made
    /// for the run: the RDMA path without RDMA hardware (needs rdma_rxe with network-namespace
    /// support, which Linux 6.1 lacks).
    #[arg(long, conflicts_with_all = ["dev", "peer_dev", "peer", "listen"])]
    pub veth: bool,
    /// With --tx-if/--rx-if or --veth: MTU during the run (default: the profile's).
    #[arg(long, value_parser = daqtune_selftest::flagnum::mtu)]
    pub mtu: Option<u32>,
    /// With --tx-if/--rx-if: `auto` tries the exclusive RDMA netns mode first (devices move
    /// with their ports); `shared` keeps every device visible everywhere.
    #[arg(long, default_value = "auto", value_parser = ["auto", "shared"])]
    pub rdma_netns: String,
    /// With --tx-if/--rx-if: put soft-RoCE (rxe) devices on ports that have no RDMA device,
    /// for the run only.
    #[arg(long)]
    pub soft_roce: bool,
    /// With --tx-if/--rx-if: TCP port of the side channel between the two namespaces.
    #[arg(long, default_value_t = 18519, value_parser = clap::value_parser!(u16).range(1..))]
    pub control_port: u16,
    /// Sending RDMA device (e.g. mlx5_0, rxe0), or the serving one with --listen.
    #[arg(long, value_name = "DEV")]
    pub dev: Option<String>,
    /// Receiving local RDMA device.
    #[arg(long, value_name = "DEV", conflicts_with = "peer")]
    pub peer_dev: Option<String>,
    /// A remote `daqtune selftest rdma --listen HOST:PORT` receiver instead of a local device.
    #[arg(long, value_name = "HOST:PORT")]
    pub peer: Option<String>,
    /// Serve as the receiver of --peer runs on --dev.
    #[arg(long, value_name = "ADDR:PORT", conflicts_with_all = ["peer", "peer_dev"])]
    pub listen: Option<String>,
    /// With --listen: exit after one run.
    #[arg(long, requires = "listen")]
    pub once: bool,
    /// Runs: write, send, pingpong.
    #[arg(long, value_delimiter = ',', default_value = "write,send,pingpong")]
    pub test: Vec<String>,
    /// Seconds per run.
    #[arg(long, default_value_t = 3.0, value_parser = daqtune_selftest::flagnum::seconds)]
    pub duration: f64,
    /// Message size for the bandwidth runs (default: the profile's message size).
    #[arg(long, value_name = "BYTES", value_parser = daqtune_selftest::flagnum::rdma_size)]
    pub size: Option<usize>,
    /// Message size of the ping-pong.
    #[arg(long, value_name = "BYTES", value_parser = daqtune_selftest::flagnum::rdma_size)]
    pub lat_size: Option<usize>,
    /// Receive ring depth (messages in flight).
    #[arg(long, value_parser = daqtune_selftest::flagnum::slots)]
    pub slots: Option<usize>,
    /// Pin the sender's polling thread to this CPU (default: unpinned).
    #[arg(long, value_name = "CPU", value_parser = daqtune_selftest::flagnum::cpu)]
    pub tx_cpu: Option<usize>,
    /// Pin the receiver's polling thread to this CPU.
    #[arg(long, value_name = "CPU", value_parser = daqtune_selftest::flagnum::cpu)]
    pub rx_cpu: Option<usize>,
    /// Fail a bandwidth run below this many Gb/s (the profile's minimum is a TCP-over-veth
    /// figure and does not apply to RDMA).
    #[arg(long, value_name = "GBPS", value_parser = daqtune_selftest::flagnum::gbps)]
    pub min_gbps: Option<f64>,
    /// text or json (daqtune.selftest/v1 with an `rdma` section per run).
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    pub format: String,
    /// Also write a JUnit file.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<std::path::PathBuf>,
    /// Also write the JSON report to this file.
    #[arg(long, value_name = "FILE")]
    pub json_out: Option<std::path::PathBuf>,
    /// ACK timeout exponent (4.096 µs x 2^N); emulated soft-RoCE needs 18 or more.
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=31))]
    pub qp_timeout: Option<u8>,
    /// Seconds to wait for the ports to be active with a RoCE v2 GID.
    #[arg(long, value_name = "SECS", value_parser = daqtune_selftest::flagnum::seconds)]
    pub wait_ready: Option<f64>,
    /// Memory the runs register: host, host_pinned (cuMemHostAlloc) or device (GPU memory,
    /// GPUDirect: dma-buf where the driver exports it, else nvidia-peermem).
    #[arg(long, value_parser = ["host", "host_pinned", "device"])]
    pub memory: Option<String>,
    /// GPU (CUDA ordinal) for --memory host_pinned or device.
    #[arg(long, value_name = "ID")]
    pub gpu: Option<u32>,
    /// Restore what killed self-test runs left behind (ports, namespaces, RDMA devices, the
    /// RDMA netns mode), as every namespaced run does first, and exit.
    #[arg(long, conflicts_with_all = ["tx_if", "veth", "peer", "peer_dev", "listen", "dev", "probe_gpudirect"])]
    pub recover: bool,
    /// The live GPUDirect probe: register a little memory of GPU --gpu with every RDMA device
    /// (or --dev) as a `--memory device` run would, and report which accepted it.
    #[arg(long, conflicts_with_all = ["tx_if", "veth", "peer", "peer_dev", "listen"])]
    pub probe_gpudirect: bool,
    /// Test hook: every N-th bandwidth message carries a broken checksum (the run must fail).
    #[arg(long, hide = true)]
    pub inject_corruption: Option<u64>,
}

/// The profile values a run uses where the flags are silent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RdmaProfileDefaults {
    pub message_size: usize,
    pub mtu: u32,
}

/// The helper's arguments for a run (pure, so it is tested without the helper). A test run's
/// report format and files are not among them: the helper answers in JSON, and the launcher
/// assesses the report and writes them ([`relay`]).
pub fn rdma_helper_args(a: &RdmaArgs, d: &RdmaProfileDefaults) -> Vec<std::ffi::OsString> {
    let mut v: Vec<String> = Vec::new();
    let mut opt = |flag: &str, val: Option<String>| {
        if let Some(x) = val {
            v.extend([flag.to_string(), x]);
        }
    };
    opt("--dev", a.dev.clone());
    opt("--peer-dev", a.peer_dev.clone());
    opt("--peer", a.peer.clone());
    opt("--listen", a.listen.clone());
    opt("--memory", a.memory.clone());
    opt("--gpu", a.gpu.map(|g| g.to_string()));
    if a.probe_gpudirect {
        v.extend([
            "--probe-gpudirect".into(),
            "--format".into(),
            a.format.clone(),
        ]);
        return v.into_iter().map(Into::into).collect();
    }
    if a.listen.is_some() {
        // A receiver takes its sizes and tests from each sender's request.
        if a.once {
            v.push("--once".into());
        }
        if let Some(c) = a.rx_cpu {
            v.extend(["--rx-cpu".into(), c.to_string()]);
        }
        if let Some(w) = a.wait_ready {
            v.extend(["--wait-ready".into(), w.to_string()]);
        }
        return v.into_iter().map(Into::into).collect();
    }
    v.extend(["--test".into(), a.test.join(",")]);
    v.extend(["--duration".into(), a.duration.to_string()]);
    v.extend([
        "--size".into(),
        a.size.unwrap_or(d.message_size).to_string(),
    ]);
    let mut opt = |flag: &str, val: Option<String>| {
        if let Some(x) = val {
            v.extend([flag.to_string(), x]);
        }
    };
    opt("--lat-size", a.lat_size.map(|x| x.to_string()));
    opt("--slots", a.slots.map(|x| x.to_string()));
    opt("--tx-cpu", a.tx_cpu.map(|x| x.to_string()));
    opt("--rx-cpu", a.rx_cpu.map(|x| x.to_string()));
    opt("--qp-timeout", a.qp_timeout.map(|x| x.to_string()));
    opt("--wait-ready", a.wait_ready.map(|x| x.to_string()));
    opt(
        "--inject-corruption",
        a.inject_corruption.map(|x| x.to_string()),
    );
    opt("--min-gbps", a.min_gbps.map(|g| g.to_string()));
    v.into_iter().map(Into::into).collect()
}

/// How a test run's report is assessed and where it goes: the link its traffic crosses (read
/// before any port moves), the profile's references and floor, and the formats asked for.
pub fn relay(a: &RdmaArgs, lp: &LoadedProfile, link: Link) -> Relay {
    Relay {
        json: a.format == "json",
        json_out: a.json_out.clone(),
        junit: a.junit.clone(),
        tests: a.test.clone(),
        link,
        references: crate::selftest_cmd::references(&lp.profile.selftest),
        floor: lp.profile.selftest.floor,
    }
}

/// The link of a run with named devices: the sending device's port, or none across a peer.
fn device_link(a: &RdmaArgs) -> Link {
    match (&a.dev, &a.peer) {
        (_, Some(_)) => Link::none("a --peer run crosses links this host does not see end to end"),
        (Some(dev), None) => daqtune_selftest::portlink::rdma_device_link(dev),
        (None, None) => Link::none("no RDMA device named"),
    }
}

/// The namespaced modes' receiver (a `--listen` helper) registers the same kind of memory as
/// the sender and pins its loop where `--rx-cpu` says.
fn receiver_args(a: &RdmaArgs) -> Vec<std::ffi::OsString> {
    let mut v = Vec::new();
    if let Some(c) = a.rx_cpu {
        v.extend(["--rx-cpu".into(), c.to_string().into()]);
    }
    if let Some(m) = &a.memory {
        v.extend(["--memory".into(), m.into()]);
    }
    if let Some(g) = a.gpu {
        v.extend(["--gpu".into(), g.to_string().into()]);
    }
    v
}

pub fn run_rdma(g: &GlobalArgs, argv: &[String]) -> Result<u8, UsageError> {
    let a = match <RdmaArgs as clap::Parser>::try_parse_from(
        std::iter::once("daqtune selftest rdma".to_string()).chain(argv.iter().cloned()),
    ) {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            return Ok(if e.use_stderr() { 2 } else { 0 });
        }
    };
    if g.root.is_some() {
        return Err(UsageError::Other(
            "selftest moves real traffic and cannot run against --root".into(),
        ));
    }
    let host = open_host(&g.engine())?;
    let lp = choose_profile(&host, &g.engine())?;
    let d = RdmaProfileDefaults {
        message_size: lp.profile.selftest.message_size as usize,
        mtu: lp.profile.nic.mtu,
    };
    let json = a.format == "json";
    let namespaced = match (&a.tx_if, &a.rx_if) {
        (Some(tx), Some(rx)) => Some(NamespacedTopology::Ports(
            daqtune_selftest::topology::RdmaPortsRequest {
                tx_if: tx.clone(),
                rx_if: rx.clone(),
                mtu: Some(a.mtu.unwrap_or(d.mtu)).filter(|m| *m > 0),
                try_exclusive: a.rdma_netns == "auto",
                soft_roce: a.soft_roce,
            },
        )),
        _ if a.veth => Some(NamespacedTopology::Veth(
            Some(a.mtu.unwrap_or(d.mtu))
                .filter(|m| *m > 0)
                .unwrap_or(9000),
        )),
        _ => None,
    };
    if let Some(topology) = namespaced {
        // Everything the helpers would refuse is refused before the host is reconfigured.
        if let Some(t) = a.test.iter().find(|t| {
            !matches!(
                t.trim().to_ascii_lowercase().as_str(),
                "write" | "send" | "pingpong" | "ping-pong" | "lat" | "latency"
            )
        }) {
            return Err(UsageError::Other(format!(
                "--test {t}: expected write, send or pingpong"
            )));
        }
        if !(a.duration.is_finite() && a.duration > 0.0) {
            return Err(UsageError::Other(
                "--duration must be a positive number of seconds".into(),
            ));
        }
        if let Some(kind) = &a.memory {
            if let Err(e) = daqtune_rdma::buffer::provider(kind, a.gpu.unwrap_or(0)) {
                if !e.is_skip() {
                    return Err(UsageError::Other(format!("--memory {kind}: {e}")));
                }
                let r = daqtune_selftest::launch::rdma::skip_report(
                    &hostname(),
                    &format!("--memory {kind}: {e}"),
                    &[
                        daqtune_selftest::engine::Mode::Write,
                        daqtune_selftest::engine::Mode::Send,
                    ],
                );
                daqtune_selftest::report::emit(&if json {
                    r.to_json() + "\n"
                } else {
                    r.to_text()
                });
                return Ok(0);
            }
        }
        // Read before the ports move into private namespaces, where this sysfs loses them.
        let link = match &topology {
            NamespacedTopology::Ports(req) => {
                daqtune_selftest::portlink::port_link(&req.tx_if, req.mtu.unwrap_or(0))
            }
            NamespacedTopology::Veth(mtu) => Link {
                mtu: Some(*mtu),
                ..Link::none("veth pair with soft-RoCE: no link speed")
            },
        };
        let run = daqtune_selftest::launch::rdma::PortsRun {
            topology,
            client_args: rdma_helper_args(&a, &d),
            receiver_args: receiver_args(&a),
            control_port: a.control_port,
            relay: relay(&a, &lp, link),
        };
        let code = daqtune_selftest::launch::rdma::run_ports(&run);
        return Ok(u8::try_from(code).unwrap_or(2));
    }
    if a.recover {
        if !daqtune_selftest::sys::is_root() {
            return Err(UsageError::Other(
                "--recover puts ports and devices back: it needs root".into(),
            ));
        }
        let notes = daqtune_selftest::topology::recover_leftovers();
        if notes.is_empty() {
            crate::out::print("nothing left behind by earlier runs\n");
        }
        for n in &notes {
            crate::out::print(&format!("{n}\n"));
        }
        // A journal that could not be replayed is kept, and said so.
        return Ok(u8::from(notes.iter().any(|n| n.contains("kept"))));
    }
    if a.probe_gpudirect {
        let code = daqtune_selftest::launch::rdma::run_helper(&rdma_helper_args(&a, &d), json);
        return Ok(u8::try_from(code).unwrap_or(2));
    }
    if a.dev.is_none() && a.peer.is_none() {
        let why = "no ports named: give --tx-if A --rx-if B (two ports cabled back to back), --dev A --peer-dev B (RDMA devices, e.g. rxe on a veth pair), --peer HOST:PORT, or --veth (soft-RoCE on a veth pair made for the run); ports are never picked automatically";
        let modes = [
            daqtune_selftest::engine::Mode::Write,
            daqtune_selftest::engine::Mode::Send,
        ];
        let r = daqtune_selftest::launch::rdma::skip_report(&hostname(), why, &modes);
        daqtune_selftest::report::emit(&if json {
            r.to_json() + "\n"
        } else {
            r.to_text()
        });
        return Ok(0);
    }
    if a.dev.is_none() {
        return Err(UsageError::Other(
            "--peer needs the local RDMA device: --dev DEV".into(),
        ));
    }
    let args = rdma_helper_args(&a, &d);
    let code = if a.listen.is_some() {
        // A receiver makes no report of its own: the sender's side assesses the run.
        daqtune_selftest::launch::rdma::run_helper(&args, json)
    } else {
        daqtune_selftest::launch::rdma::run_assessed(&args, &relay(&a, &lp, device_link(&a)))
    };
    Ok(u8::try_from(code).unwrap_or(2))
}

#[cfg(test)]
mod rdma_tests {
    use super::*;
    use clap::Parser;

    const D: RdmaProfileDefaults = RdmaProfileDefaults {
        message_size: 8192,
        mtu: 9000,
    };

    fn strings(v: Vec<std::ffi::OsString>) -> Vec<String> {
        v.into_iter()
            .map(|s| s.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn helper_args_carry_devices_and_profile_size() {
        let a = RdmaArgs::try_parse_from([
            "x",
            "--dev",
            "rxe0",
            "--peer-dev",
            "rxe1",
            "--duration",
            "2",
        ])
        .expect("parse");
        assert_eq!(
            strings(rdma_helper_args(&a, &D)),
            [
                "--dev",
                "rxe0",
                "--peer-dev",
                "rxe1",
                "--test",
                "write,send,pingpong",
                "--duration",
                "2",
                "--size",
                "8192"
            ]
        );
        assert!(RdmaArgs::try_parse_from(["x", "--peer-dev", "a", "--peer", "h:1"]).is_err());
    }

    #[test]
    fn every_run_option_reaches_the_helper() {
        let a = RdmaArgs::try_parse_from([
            "x",
            "--dev",
            "rxe0",
            "--peer-dev",
            "rxe1",
            "--test",
            "write",
            "--size",
            "4096",
            "--lat-size",
            "128",
            "--slots",
            "32",
            "--qp-timeout",
            "19",
            "--wait-ready",
            "5",
            "--inject-corruption",
            "5",
            "--min-gbps",
            "10",
            "--json-out",
            "/o/r.json",
            "--memory",
            "device",
            "--gpu",
            "1",
            "--format",
            "json",
        ])
        .expect("parse");
        let v = strings(rdma_helper_args(&a, &D)).join(" ");
        for want in [
            "--size 4096",
            "--lat-size 128",
            "--slots 32",
            "--qp-timeout 19",
            "--wait-ready 5",
            "--inject-corruption 5",
            "--min-gbps 10",
            "--memory device",
            "--gpu 1",
        ] {
            assert!(v.contains(want), "{want} missing from {v}");
        }
        // The report's format and files are the launcher's: it assesses the report first.
        for not in ["--format", "--json-out", "--junit"] {
            assert!(!v.contains(not), "{not} passed to the helper: {v}");
        }
        let a = RdmaArgs::try_parse_from(["x", "--dev", "a", "--peer-dev", "b"]).expect("parse");
        assert!(!strings(rdma_helper_args(&a, &D))
            .join(" ")
            .contains("--min-gbps"));
    }

    #[test]
    fn listen_and_ports_modes() {
        let a = RdmaArgs::try_parse_from(["x", "--listen", "0.0.0.0:18516", "--dev", "rxe1"])
            .expect("parse");
        assert_eq!(
            strings(rdma_helper_args(&a, &D)),
            ["--dev", "rxe1", "--listen", "0.0.0.0:18516"]
        );
        let a = RdmaArgs::try_parse_from(["x", "--listen", "h:1", "--dev", "d", "--rx-cpu", "3"])
            .expect("parse");
        assert!(strings(rdma_helper_args(&a, &D))
            .join(" ")
            .ends_with("--rx-cpu 3"));
        let a = RdmaArgs::try_parse_from(["x", "--tx-if", "p0", "--rx-if", "p1", "--rx-cpu", "5"])
            .expect("parse");
        assert_eq!(strings(receiver_args(&a)), ["--rx-cpu", "5"]);
        let a = RdmaArgs::try_parse_from(["x", "--tx-if", "p0", "--rx-if", "p1"]).expect("parse");
        let v = strings(rdma_helper_args(&a, &D));
        assert!(!v.iter().any(|s| s == "--dev" || s == "--peer"), "{v:?}");
        assert_eq!(a.rdma_netns, "auto");
        let a = RdmaArgs::try_parse_from(["x", "--veth", "--mtu", "4200"]).expect("parse");
        assert!(a.veth);
        assert!(RdmaArgs::try_parse_from(["x", "--veth", "--dev", "d"]).is_err());
        assert!(RdmaArgs::try_parse_from(["x", "--veth", "--tx-if", "a", "--rx-if", "b"]).is_err());
        // Ports and devices are two different topologies; one port alone is not one.
        assert!(RdmaArgs::try_parse_from(["x", "--tx-if", "p0", "--dev", "d"]).is_err());
        assert!(RdmaArgs::try_parse_from(["x", "--tx-if", "p0"]).is_err());
        assert!(RdmaArgs::try_parse_from(["x", "--once"]).is_err());
        let a = RdmaArgs::try_parse_from(["x", "--probe-gpudirect", "--gpu", "1"]).expect("parse");
        assert_eq!(
            strings(rdma_helper_args(&a, &D)),
            ["--gpu", "1", "--probe-gpudirect", "--format", "text"]
        );
        assert!(RdmaArgs::try_parse_from(["x", "--probe-gpudirect", "--veth"]).is_err());
        assert!(RdmaArgs::try_parse_from([
            "x",
            "--tx-if",
            "a",
            "--rx-if",
            "b",
            "--rdma-netns",
            "x"
        ])
        .is_err());
    }
}
