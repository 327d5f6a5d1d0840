//! `daqtune selftest`: its options, the run loop (set-up, engines, progress, restore), output.
//!
//! The command line is the `daqtune` crate's (tune/src/selftest_cli.rs parses the flags into
//! [`Options`]): `daqtune selftest` maps the active profile onto [`Defaults`]
//! (tune/src/selftest_cmd.rs); the `daqtune-selftest` binary (tune/src/bin/) runs it with the
//! built-in defaults, for tests and benchmarks.

use crate::cpuplan;
use crate::engine::{Engine, Mode, RunControl, RunSpec};
use crate::report::{judge, EngineResult, Render, Report, Status, Thresholds};
use crate::socket::SocketEngine;
use crate::sys;
use crate::sys::hostname;
use crate::topology::{self, Topology};
use daqtune_probe::signals;
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The data paths a run proves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineChoice {
    /// TCP and UDP through the kernel's socket path.
    Socket,
    /// DPDK through the separate `daqtune-dpdk` executable (skipped with the reason when it
    /// is missing or built without DPDK).
    Dpdk,
    /// Every engine: socket, then DPDK.
    All,
}

/// The report's rendering on stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
    Junit,
}

/// What a self-test run is asked to do: the flags of `daqtune selftest` and `daqtune-selftest`
/// once parsed. The command line itself (flag names, help, defaults, value checks through
/// [`crate::flagnum`]) is the `daqtune` crate's (tune/src/selftest_cli.rs): this library has
/// no argument parser, as the engine has none.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Which data path to prove.
    pub engine: EngineChoice,

    /// A veth pair between two private namespaces (CI, laptops).
    pub veth: bool,
    /// Sending port of two ports cabled back to back (moved into a private namespace).
    pub tx_if: Option<String>,
    /// Receiving port of the pair.
    pub rx_if: Option<String>,
    /// Over 127.0.0.1, where namespaces cannot be made (containers without CAP_SYS_ADMIN).
    pub loopback: bool,
    /// Send to another host running `daqtune selftest socket --serve` (ADDR or ADDR:PORT,
    /// port 5299 by default).
    pub peer: Option<String>,
    /// Receive and verify for `--peer` runs from another host, until SIGINT/SIGTERM.
    pub serve: bool,
    /// Address the server listens on.
    pub listen: String,
    /// Serve one session, then exit.
    pub once: bool,
    /// Set up the topology, print its namespaces and addresses (JSON), and keep it until
    /// SIGINT/SIGTERM, then restore: run other tools on the same path with
    /// `nsenter --net=/run/netns/NAME`.
    pub hold: bool,

    /// DPDK: transmitting port by PCI address (ConnectX, mlx5 is bifurcated: no rebinding);
    /// without it DPDK runs over a veth pair in a private namespace.
    pub tx_pci: Option<String>,
    /// DPDK: receiving port by PCI address.
    pub rx_pci: Option<String>,

    /// Modes to run (default: tcp and udp).
    pub mode: Vec<Mode>,
    /// Seconds per mode.
    pub duration: f64,
    /// Bytes per message, 32-byte header included (default: the profile's, 8192).
    pub message_size: Option<usize>,
    /// Parallel streams, each with its own TX and RX thread and CPUs (seed 002 uses 4).
    pub streams: u16,
    /// Pacing in Gb/s for every mode (default: TCP unpaced, UDP at the profile's rate).
    pub rate: Option<f64>,
    /// MTU of the veth pair / ports (default: the profile's).
    pub mtu: Option<u32>,
    /// CPU of the transmit thread (default: from the profile's isolated CPUs).
    pub tx_cpu: Option<usize>,
    /// CPU of the receive thread.
    pub rx_cpu: Option<usize>,
    /// Do not pin the threads.
    pub no_pin: bool,
    /// Minimum TCP rate of this run in Gb/s (default: none; the profile's `selftest.floor` x
    /// `selftest.reference` judge the rate where the link has a speed).
    pub min_tcp_gbps: Option<f64>,
    /// UDP loss allowed, percent (default: the profile's `selftest.max_udp_loss_pct`).
    pub max_udp_loss: Option<f64>,

    /// Land received messages in this GPU's memory and verify them there with a GPU kernel:
    /// nvidia-smi's index, a UUID (`GPU-...`) or a PCI bus id. Without a usable GPU every mode
    /// is reported as `skip` and the exit code is 3.
    pub gpu: Option<String>,
    /// Where messages land for `--gpu`: `host_pinned` (pinned host memory the kernel reads in
    /// place), `copy` (pinned staging + host-to-device copies of >= 4 MiB batches), `device`
    /// (GPUDirect RDMA: not applicable to sockets).
    pub gpu_memory: crate::gpu_sink::MemoryKind,
    /// Bytes per GPU batch, rounded up to whole messages (`copy` needs at least 4 MiB; the
    /// default 8 MiB is where copies in a live stream reach the pinned-copy peak).
    pub gpu_batch: usize,
    /// Test aid: the sender corrupts N messages (one body byte each, after the CRC was
    /// computed); the run passes only if the verifier counts exactly N integrity errors.
    pub inject_corruption: u64,

    /// Search the highest rate whose loss stays within --loss (RFC 2544-style throughput
    /// search for UDP and DPDK): an unpaced probe, a binary search over paced trials, then
    /// five confirmation trials in a row at a claim kept below the loss edge by the spread
    /// measured, lowered while confirmations fail; every trial is reported.
    pub find_max: bool,
    /// --find-max: loss a trial may have and still pass, percent (RFC 2544: 0).
    pub loss: f64,
    /// --find-max: stop when the bounds are within this percent of the upper start bound.
    pub precision: f64,
    /// --find-max: shortest trial in seconds; a trial also lasts at least four times the time
    /// the receive buffer takes to fill at its rate (capped at 30 s).
    pub trial_duration: f64,
    /// --find-max: trials at most, probe and confirmations included; the search ends without
    /// a claim when its next step would need more.
    pub max_trials: usize,

    /// UDP sender: one datagram per send instead of UDP GSO (`UDP_SEGMENT`, on by default
    /// where the kernel has it: up to 64 messages per send, cut by the kernel).
    pub no_gso: bool,
    /// UDP sender: one system call per send instead of `sendmmsg`.
    pub no_sendmmsg: bool,
    /// UDP receiver: no UDP GRO (coalesced reads, split back into datagrams and each verified).
    pub no_gro: bool,
    /// UDP receiver: one system call per read instead of `recvmmsg`.
    pub no_recvmmsg: bool,
    /// TCP sender: send with `MSG_ZEROCOPY` and read the completions (the report says whether
    /// copies were avoided; on a veth pair or loopback the kernel copies anyway).
    pub zerocopy: bool,
    /// Receive buffer (SO_RCVBUF) in bytes, suffix K or M allowed (64K..1024M). Default: sized
    /// from the path (UDP: the rate times a 10 ms stall, at least two recvmmsg batches; TCP:
    /// the kernel's autotuning); the report says what was used and why.
    pub rcvbuf: Option<usize>,

    /// Output format on stdout.
    pub format: Format,
    /// Also write a JUnit file.
    pub junit: Option<std::path::PathBuf>,
    /// Never draw a progress bar.
    pub no_progress: bool,
}

/// Values the active profile supplies (tune maps its `Profile` onto this).
#[derive(Debug, Clone, PartialEq)]
pub struct Defaults {
    pub message_size: usize,
    pub mtu: u32,
    /// UDP pacing in Gb/s; None = the payload rate of the port's link at the MTU (where the
    /// link has no speed: [`PROBE_SHARE`] of what a short unpaced probe delivered).
    pub udp_rate_gbps: Option<f64>,
    pub thresholds: Thresholds,
    /// The profile's isolated CPUs as resolved on this host (may name CPUs it lacks).
    pub isolated_cpus: Vec<usize>,
    /// Reference rates by engine, mode and message shape (profile `selftest.reference`,
    /// seed 002): each result states its share of the one that applies.
    pub references: Vec<crate::reference::Reference>,
    /// Share of its reference a result must reach (profile `selftest.floor`).
    pub floor: f64,
}

impl Default for Defaults {
    fn default() -> Self {
        Defaults {
            message_size: 8192,
            mtu: 9000,
            udp_rate_gbps: None,
            thresholds: Thresholds::default(),
            isolated_cpus: Vec::new(),
            references: Vec::new(),
            floor: crate::reference::DEFAULT_FLOOR,
        }
    }
}

/// Exit codes: 0 pass, 1 a result failed (or the host could not be restored), 2 could not run,
/// 3 `--gpu` was asked for but no usable GPU (or the memory kind does not apply): every result
/// is a `skip`, 128+N interrupted by signal N (after restoring).
pub const EXIT_GPU_SKIPPED: i32 = 3;

/// See [`EXIT_GPU_SKIPPED`] and the other codes above.
pub fn run(args: &Options, d: &Defaults) -> i32 {
    let mut err = std::io::stderr();
    if let Err(e) = signals::watch_termination() {
        let _ = writeln!(err, "daqtune selftest: cannot install signal handlers: {e}");
        return 2;
    }
    if !(args.duration > 0.0 && args.duration.is_finite()) {
        let _ = writeln!(
            err,
            "daqtune selftest: --duration must be a positive number of seconds"
        );
        return 2;
    }
    if let Some(r) = args.rate {
        if !(r >= 0.0 && r.is_finite()) {
            let _ = writeln!(
                err,
                "daqtune selftest: --rate must be >= 0 Gb/s (0 = unpaced)"
            );
            return 2;
        }
    }
    if args.find_max {
        if let Some(e) = find_max_problem(args) {
            let _ = writeln!(err, "daqtune selftest: {e}");
            return 2;
        }
    }
    if args.gpu.is_some() && args.streams > 1 {
        let _ = writeln!(
            err,
            "daqtune selftest: --gpu takes one stream (the GPU sink verifies a single sequence \
             space in one set of GPU buffers); drop --streams or use --streams 1"
        );
        return 2;
    }
    if args.engine != EngineChoice::Socket && (args.gpu.is_some() || args.inject_corruption > 0) {
        let _ = writeln!(
            err,
            "daqtune selftest: --gpu and --inject-corruption apply to the socket engine only \
             (daqtune-dpdk has no GPU sink and plants no corruption); use --engine socket"
        );
        return 2;
    }
    if args.serve {
        return serve(args, d);
    }
    if args.engine == EngineChoice::Dpdk {
        let mut report = Report::new(&hostname(), "dpdk", "daqtune-dpdk");
        report.push(run_dpdk(args, d));
        if !emit(args, &report) {
            return 2;
        }
        return match signals::pending() {
            Some(sig) => signals::exit_code(sig),
            None => exit_of(&report),
        };
    }
    let peer = match args.peer.as_deref().map(crate::peer::parse_peer) {
        None => None,
        Some(Ok(p)) => Some(p),
        Some(Err(e)) => {
            let _ = writeln!(err, "daqtune selftest: --peer {e}");
            return 2;
        }
    };
    let needs_ns = !args.loopback && peer.is_none();
    if needs_ns && !sys::is_root() {
        let _ = writeln!(
            err,
            "daqtune selftest: network namespaces need root (CAP_SYS_ADMIN, CAP_NET_ADMIN); \
             run with sudo, or use --loopback"
        );
        return 2;
    }
    if needs_ns {
        for note in topology::recover_leftovers() {
            let _ = writeln!(err, "daqtune selftest: {note}");
        }
    }
    let mtu = args.mtu.unwrap_or(d.mtu);
    // Read before the ports move into private namespaces, where this sysfs no longer sees them.
    let port_speed = args.tx_if.as_deref().map(|i| {
        (
            i,
            crate::portlink::link_speed_mbps(i).map(|s| (s, crate::portlink::pcie_of(i))),
        )
    });
    let topo = if let Some(p) = peer {
        Ok(Topology::peer(p))
    } else if args.loopback {
        Ok(Topology::loopback())
    } else if let (Some(a), Some(b)) = (&args.tx_if, &args.rx_if) {
        Topology::ports(a, b, Some(mtu))
    } else {
        Topology::veth(mtu)
    };
    let mut topo = match topo {
        Ok(t) => t,
        Err(e) => {
            let _ = writeln!(err, "daqtune selftest: {e}");
            // Machine-readable consumers (a CI gate) still get a report saying why.
            if args.format != Format::Text && !args.hold {
                let kind = if args.tx_if.is_some() {
                    "ports"
                } else {
                    "veth"
                };
                let mut report = Report::new(&hostname(), kind, "not started");
                for mode in modes_of(args) {
                    report.push(EngineResult::errored("socket", mode, kind, &e.to_string()));
                }
                emit(args, &report);
            }
            return 2;
        }
    };
    let link = match path_link(&mut topo, port_speed, mtu) {
        Ok(l) => l,
        Err(e) => {
            let _ = writeln!(err, "daqtune selftest: {e}");
            let warnings = topo.teardown();
            for w in &warnings {
                let _ = writeln!(err, "daqtune selftest: restore: {w}");
            }
            return 2;
        }
    };
    if args.hold {
        return hold(topo);
    }
    let (mut report, interrupted) = run_on(&topo, args, d, &link);
    let warnings = topo.teardown();
    drop(topo);
    if args.engine == EngineChoice::All && interrupted.is_none() {
        report.push(run_dpdk(args, d));
    }
    let interrupted = interrupted.or_else(signals::pending);
    for w in &warnings {
        let _ = writeln!(err, "daqtune selftest: restore: {w}");
    }
    if !emit(args, &report) {
        return 2;
    }
    if let Some(sig) = interrupted {
        let _ = writeln!(err, "daqtune selftest: interrupted; network restored");
        return signals::exit_code(sig);
    }
    if !warnings.is_empty() || !report.passed() {
        return 1;
    }
    if args.gpu.is_some()
        && report.summary.skip > 0
        && report.summary.pass + report.summary.warn == 0
    {
        return EXIT_GPU_SKIPPED;
    }
    0
}

/// The kernel batching paths the flags leave on.
fn socket_options(args: &Options) -> crate::engine::SocketOptions {
    crate::engine::SocketOptions {
        gso: !args.no_gso,
        sendmmsg: !args.no_sendmmsg,
        gro: !args.no_gro,
        recvmmsg: !args.no_recvmmsg,
        zerocopy: args.zerocopy,
        rcvbuf: args.rcvbuf,
    }
}

/// What is wrong with a `--find-max` request, if anything.
fn find_max_problem(args: &Options) -> Option<String> {
    if args.mode.contains(&Mode::Tcp) {
        return Some(
            "--find-max searches the loss-free rate of an unreliable mode (udp, or dpdk's raw \
             frames); TCP never loses, it slows down: drop --mode tcp"
                .into(),
        );
    }
    if !(0.0..100.0).contains(&args.loss) || !args.loss.is_finite() {
        return Some("--loss must be a percentage in 0..100".into());
    }
    if !(args.precision > 0.0 && args.precision <= 50.0) {
        return Some("--precision must be a percentage in (0, 50]".into());
    }
    if !(args.trial_duration > 0.0 && args.trial_duration <= 600.0) {
        return Some("--trial-duration must be in (0, 600] seconds".into());
    }
    if let Some(why) = crate::findmax::max_trials_problem("--max-trials", args.max_trials) {
        return Some(why);
    }
    if args.peer.is_some() {
        return Some(
            "--find-max runs many trials against one receiver it controls; it cannot drive a \
             --serve peer"
                .into(),
        );
    }
    None
}

/// The search settings of a `--find-max` run.
fn find_max_params(args: &Options) -> crate::findmax::Params {
    crate::findmax::Params {
        loss_pct: args.loss,
        precision_pct: args.precision,
        link_gbps: None,
        max_trials: args.max_trials,
    }
}

/// The sending port's name with its link speed (Mb/s) and its PCIe link (Gb/s, in words),
/// read before the port moves into a namespace.
type PortLink<'a> = (&'a str, Option<(u64, Option<(f64, String)>)>);

/// The link a topology's traffic crosses, for the line rate and the reference
/// (`crate::reference`); the test overrides of a veth pair are applied here.
fn path_link(
    topo: &mut Topology,
    port_speed: Option<PortLink<'_>>,
    mtu: u32,
) -> Result<crate::reference::Link, String> {
    use crate::reference::{self, Link};
    Ok(match topo.kind {
        topology::Kind::Veth => {
            if let Some(shape) = reference::test_veth_shape() {
                let mbit = shape?;
                shape_tx(topo, mbit, mtu)?;
                topo.description.push_str(&format!(
                    "; test shaping: tbf at {mbit} Mbit/s on the sending end ({})",
                    reference::TEST_VETH_SHAPE_ENV
                ));
            }
            match reference::test_veth_speed() {
                Some(speed) => {
                    let speed = speed?;
                    topo.description.push_str(&format!(
                        "; test link speed {speed} Mb/s ({})",
                        reference::TEST_VETH_SPEED_ENV
                    ));
                    Link {
                        speed_mbps: Some(speed),
                        source: format!(
                            "test override {} (a veth pair has no link speed of its own)",
                            reference::TEST_VETH_SPEED_ENV
                        ),
                        mtu: Some(mtu),
                        pcie: None,
                    }
                }
                None => Link {
                    speed_mbps: None,
                    source: "veth pair: no link speed (the veth driver answers a constant 10000 Mb/s that limits nothing)".into(),
                    mtu: Some(mtu),
                    pcie: None,
                },
            }
        }
        topology::Kind::Ports => match port_speed {
            Some((iface, Some((speed, pcie)))) => Link {
                speed_mbps: Some(speed),
                source: format!("sysfs speed of {iface}"),
                mtu: Some(mtu),
                pcie,
            },
            Some((iface, None)) => Link {
                speed_mbps: None,
                source: format!(
                    "{iface} reported no link speed (link down, a virtual interface, or a driver without one)"
                ),
                mtu: Some(mtu),
                pcie: None,
            },
            None => Link::none("no port named"),
        },
        topology::Kind::Loopback => Link::none("loopback: no link"),
        topology::Kind::Peer => {
            Link::none("a --peer run crosses links this host does not see end to end")
        }
    })
}

/// Test aid ([`crate::reference::TEST_VETH_SHAPE_ENV`]): a token-bucket filter on the sending
/// veth end, through the namespace's own rtnetlink socket.
fn shape_tx(topo: &Topology, mbit: u64, mtu: u32) -> Result<(), String> {
    let (Some(ns), Some(port)) = (topo.tx_ns.as_ref(), topo.tx_port.as_deref()) else {
        return Err("test shaping needs the veth pair's sending namespace".into());
    };
    let mut nl = crate::netlink::open_in(ns).map_err(|e| e.to_string())?;
    let link = nl
        .link_by_name(port)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("test shaping: {port} is gone"))?;
    nl.set_root_tbf(
        link.index,
        &crate::netlink::Tbf::at(mbit.saturating_mul(1_000_000), mtu),
    )
    .map_err(|e| format!("test shaping: {e}"))
}

/// Prints each trial of a search on stderr (a terminal only).
struct TrialLines {
    what: String,
}

impl crate::findmax::Progress for TrialLines {
    fn trial_start(
        &mut self,
        n: usize,
        phase: crate::findmax::Phase,
        asked: Option<f64>,
        length: Duration,
    ) {
        let _ = write!(
            std::io::stderr(),
            "\r{} trial {n} ({}) {} for {:.1} s ...",
            self.what,
            phase.as_str(),
            asked
                .map(|a| format!("at {a:.3} Gb/s"))
                .unwrap_or_else(|| "unpaced".into()),
            length.as_secs_f64()
        );
    }

    fn trial_end(&mut self, t: &crate::findmax::Trial) {
        let _ = writeln!(
            std::io::stderr(),
            " achieved {:.3} Gb/s, loss {:.4} %: {}",
            t.achieved_gbps,
            t.loss_pct,
            if t.passed { "pass" } else { "fail" }
        );
    }
}

/// Why a `--gpu` run cannot happen here, or the GPU it will use.
fn gpu_run(args: &Options) -> Option<Result<crate::engine::GpuRun, String>> {
    use crate::gpu_sink::{self, MemoryKind};
    let id = args.gpu.as_deref()?;
    if args.gpu_memory == MemoryKind::Device {
        return Some(Err(
            "n/a: device memory is written by the NIC through GPUDirect RDMA (nvidia-peermem or \
             dma-buf); the socket engine receives through the kernel, so it cannot land data in \
             GPU memory directly: use host_pinned or copy"
                .into(),
        ));
    }
    Some(gpu_sink::choose(id).map(|gpu| crate::engine::GpuRun {
        gpu,
        memory: args.gpu_memory,
        batch_bytes: args.gpu_batch,
        calibration_copies: 20,
    }))
}

/// The DPDK engine through its launcher, with this run's flags and the profile's defaults.
fn run_dpdk(args: &Options, d: &Defaults) -> EngineResult {
    // The profile's data cores, as for the socket engine (EAL lcores are always pinned).
    let plan = cpuplan::plan(
        &d.isolated_cpus,
        &sys::allowed_cpus(),
        args.tx_cpu,
        args.rx_cpu,
        true,
    );
    let req = crate::launch::dpdk::DpdkRequest {
        ports: match (&args.tx_pci, &args.rx_pci) {
            (Some(a), Some(b)) => Some((a.clone(), b.clone())),
            _ => None,
        },
        duration: Duration::from_secs_f64(args.duration),
        message_size: args.message_size,
        rate_gbps: args.rate,
        tx_cpu: plan.tx,
        rx_cpu: plan.rx,
        max_loss_pct: args.max_udp_loss.or(Some(d.thresholds.max_udp_loss_pct)),
        find_max: args.find_max.then(|| crate::launch::dpdk::FindMaxRequest {
            loss_pct: args.loss,
            precision_pct: args.precision,
            trial_floor: Duration::from_secs_f64(args.trial_duration),
            max_trials: args.max_trials,
        }),
        relay_progress: !args.no_progress && std::io::stderr().is_terminal(),
        ..Default::default()
    };
    let mut r = crate::launch::dpdk::run_dpdk(&req, None).result;
    let link = match (
        &args.tx_pci,
        args.tx_pci
            .as_deref()
            .map(crate::portlink::pci_link_speed_mbps),
    ) {
        (Some(bdf), Some(Some((netdev, speed)))) => crate::reference::Link {
            speed_mbps: Some(speed),
            source: format!("sysfs speed of {netdev} ({bdf})"),
            mtu: Some(args.mtu.unwrap_or(d.mtu)),
            pcie: crate::portlink::pcie_of(&netdev),
        },
        (Some(bdf), _) => crate::reference::Link::none(&format!(
            "{bdf} has no network device reporting a link speed"
        )),
        (None, _) => crate::reference::Link::none("net_af_packet over a veth pair: no link speed"),
    };
    crate::reference::assess(&mut r, &link, &d.references, d.floor);
    r
}

/// 0 when every result passed (warn and skip included), 1 otherwise.
fn exit_of(report: &Report) -> i32 {
    if report.passed() {
        0
    } else {
        1
    }
}

fn hold(mut topo: Topology) -> i32 {
    let ns = |n: &Option<crate::netns::NetNs>| {
        n.as_ref()
            .and_then(|n| n.path())
            .map(|p| p.display().to_string())
    };
    let v = serde_json::json!({
        "topology": topo.description,
        "tx_netns": ns(&topo.tx_ns),
        "rx_netns": ns(&topo.rx_ns),
        "tx_addr": topo.tx_addr.to_string(),
        "rx_addr": topo.rx_addr.to_string(),
    });
    println!("{v}");
    let _ = std::io::stdout().flush();
    while signals::pending().is_none() {
        std::thread::sleep(Duration::from_millis(50));
    }
    let warnings = topo.teardown();
    for w in &warnings {
        let _ = writeln!(std::io::stderr(), "daqtune selftest: restore: {w}");
    }
    if warnings.is_empty() {
        0
    } else {
        1
    }
}

fn serve(args: &Options, d: &Defaults) -> i32 {
    let listen = match crate::peer::parse_peer(&args.listen) {
        Ok(a) => a,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "daqtune selftest: --listen {e}");
            return 2;
        }
    };
    let plan = cpuplan::plan(
        &d.isolated_cpus,
        &sys::allowed_cpus(),
        args.tx_cpu,
        args.rx_cpu,
        !args.no_pin,
    );
    let ctl = RunControl::watching_signals();
    let log = |l: &str| {
        let _ = writeln!(std::io::stderr(), "daqtune selftest: {l}");
    };
    log(&format!("receiver cpu: {}", plan.description));
    match crate::peer::serve(listen, plan.rx, &ctl, args.once, log) {
        Ok(()) => signals::pending().map(signals::exit_code).unwrap_or(0),
        Err(e) => {
            log(&e.to_string());
            2
        }
    }
}

/// Prints the report in the requested format (and the JUnit file); false when the file could
/// not be written.
fn emit(args: &Options, report: &Report) -> bool {
    let text = match args.format {
        Format::Text => report.to_text(),
        Format::Json => report.to_json() + "\n",
        Format::Junit => report.to_junit(),
    };
    // A reader that went away (`| head`) is not a failure; a full disk is (exit 2).
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            let _ = writeln!(
                std::io::stderr(),
                "daqtune selftest: cannot write to standard output: {e}"
            );
            return false;
        }
    }
    drop(out);
    if let Some(p) = &args.junit {
        // The workspace's one output writer: atomic, a symlink written through (docs/cli.md).
        let junit = report.to_junit();
        if let Err(e) =
            daqtune_probe::fsutil::write_output(p, 0o644, &mut |f| f.write_all(junit.as_bytes()))
        {
            let _ = writeln!(
                std::io::stderr(),
                "daqtune selftest: write {}: {e}",
                p.display()
            );
            return false;
        }
    }
    true
}

fn modes_of(args: &Options) -> Vec<Mode> {
    if args.mode.is_empty() {
        if args.find_max {
            return vec![Mode::Udp];
        }
        return vec![Mode::Tcp, Mode::Udp];
    }
    args.mode.clone()
}

fn run_on(
    topo: &Topology,
    args: &Options,
    d: &Defaults,
    link: &crate::reference::Link,
) -> (Report, Option<i32>) {
    let allowed = sys::allowed_cpus();
    let plan = cpuplan::plan(
        &d.isolated_cpus,
        &allowed,
        args.tx_cpu,
        args.rx_cpu,
        !args.no_pin,
    );
    let plan = cpuplan::extend(plan, &d.isolated_cpus, &allowed, args.streams as usize);
    let mut report = Report::new(&hostname(), &topo.description, &plan.description);
    let mut thresholds = d.thresholds.clone();
    if let Some(v) = args.min_tcp_gbps {
        thresholds.min_tcp_gbps = v;
    }
    if let Some(v) = args.max_udp_loss {
        thresholds.max_udp_loss_pct = v;
    }
    let modes = modes_of(args);
    let gpu = match gpu_run(args) {
        None => None,
        Some(Ok(g)) => Some(g),
        Some(Err(why)) => {
            for mode in modes {
                report.push(EngineResult::skipped(
                    "socket",
                    mode,
                    topo.kind.as_str(),
                    &format!("--gpu: {why}"),
                ));
            }
            return (report, signals::pending());
        }
    };
    let ctl = RunControl::watching_signals();
    let mut engine = SocketEngine::new(topo);
    let progress = !args.no_progress && std::io::stderr().is_terminal();
    for mode in modes {
        if let Some(sig) = signals::pending() {
            return (report, Some(sig));
        }
        let mut spec = RunSpec::new(mode);
        let message_size = args.message_size.unwrap_or(d.message_size);
        spec.message_size = message_size;
        spec.duration = Duration::from_secs_f64(args.duration);
        let line = match (link.speed_mbps, link.mtu) {
            (Some(s), Some(m)) => {
                crate::reference::payload_gbps(s, m, mode, message_size).map(|g| {
                    // The NIC's PCIe link caps the port (reference::assess does the same).
                    let cap = link.pcie.as_ref().map_or(f64::INFINITY, |(p, _)| *p);
                    (s, g.min(cap))
                })
            }
            _ => None,
        };
        let mut rate_note = None;
        spec.rate_gbps = match (args.rate, mode) {
            (Some(r), _) if r > 0.0 => Some(r),
            (Some(_), _) => None,
            (None, Mode::Udp) => match (d.udp_rate_gbps, line) {
                (Some(r), _) if r > 0.0 => Some(r),
                (Some(_), _) => None,
                (None, Some((speed, g))) => {
                    rate_note = Some(format!(
                        "paced at {g:.3} Gb/s, the payload rate of the {speed} Mb/s link at MTU {} ({})",
                        link.mtu.unwrap_or(0),
                        link.source
                    ));
                    Some(g)
                }
                // No link speed (veth, loopback): the rate comes from a short unpaced probe
                // below, never from a fixed figure that proves nothing about the host.
                (None, None) => None,
            },
            (None, _) => None,
        };
        let no_speed = mode == Mode::Udp
            && spec.rate_gbps.is_none()
            && args.rate.is_none()
            && d.udp_rate_gbps.is_none()
            && line.is_none()
            && !args.find_max;
        // A peer's server may serve one session (`--serve --once`): a probe would take it. The
        // run is unpaced there, judged as unpaced (loss warns): a pass says the path carried
        // all the sender offered, a figure about the path, not a rate picked for it.
        let probe_rate = no_speed && topo.kind != topology::Kind::Peer;
        if no_speed && !probe_rate {
            rate_note = Some(format!(
                "unpaced: the path has no link speed ({}) and a --peer server may serve one session, which a probe for a rate would take; --rate sets one",
                link.source
            ));
        }
        spec.tx_cpu = plan.tx;
        spec.rx_cpu = plan.rx;
        spec.streams = args.streams as usize;
        spec.stream_cpus = plan.pairs.clone();
        spec.gpu = gpu.clone();
        spec.inject_corruption = args.inject_corruption;
        spec.socket = socket_options(args);
        ctl.reset_counters();
        if !progress && args.find_max {
            let _ = writeln!(
                std::io::stderr(),
                "daqtune selftest: {}/{} searching the loss-free maximum over {} (trials >= {:.1} s)",
                engine.name(),
                mode,
                topo.kind.as_str(),
                args.trial_duration
            );
        } else if !progress {
            let _ = writeln!(
                std::io::stderr(),
                "daqtune selftest: {}/{} for {:.1} s over {}",
                engine.name(),
                mode,
                args.duration,
                topo.kind.as_str()
            );
        }
        let mut no_rate: Option<String> = None;
        // A probe that delivered corrupted data is itself the verdict: a corruption is never
        // hidden behind "no rate judged".
        let mut corrupt_probe = None;
        if probe_rate {
            let probe_s = probe_seconds(args.duration);
            let mut probe = spec.clone();
            probe.rate_gbps = None;
            probe.duration = Duration::from_secs_f64(probe_s);
            // Planted corruptions belong to the judged run: planted in the probe they made the
            // probe the verdict (a short one plants fewer than asked: 1 of 2 on a loaded host).
            // The probe still verifies every byte, so real corruption in it is still the verdict.
            probe.inject_corruption = 0;
            let delivered = engine.run(&probe, &ctl);
            ctl.reset_counters();
            if let Some(p) = delivered.as_ref().ok().filter(|p| p.integrity_errors > 0) {
                let mut p = p.clone();
                p.notes.push(format!(
                    "judged on the unpaced {probe_s:.1}-s probe that was to choose the rate (the path has no link speed: {}): it found {} integrity error(s)",
                    link.source, p.integrity_errors
                ));
                corrupt_probe = Some(p);
            }
            match delivered
                .as_ref()
                .map_err(|e| e.to_string())
                .and_then(rate_from_probe)
            {
                Ok((delivered, rate)) => {
                    rate_note = Some(format!(
                        "paced at {rate:.3} Gb/s: {:.0} % of the {delivered:.3} Gb/s an unpaced {probe_s:.1}-s probe delivered over this path, which has no link speed ({}); --rate sets one",
                        PROBE_SHARE * 100.0,
                        link.source
                    ));
                    spec.rate_gbps = Some(rate);
                }
                Err(why) => {
                    no_rate = Some(format!(
                        "no rate judged: the path has no link speed ({}) and the unpaced probe gave no rate to pace at ({why}); --rate sets one",
                        link.source
                    ));
                }
            }
        }
        if let Some(why) = no_rate.filter(|_| corrupt_probe.is_none()) {
            report.push(EngineResult::skipped(
                engine.name(),
                mode,
                topo.kind.as_str(),
                &why,
            ));
            continue;
        }
        let result = if let Some(p) = corrupt_probe {
            Ok(p)
        } else if args.find_max {
            let limit = line.map(|(mbps, gbps)| crate::findmax::Limit {
                gbps,
                source: format!(
                    "payload rate of the {mbps} Mb/s link at MTU {} ({}; {}-byte messages)",
                    link.mtu.unwrap_or(0),
                    link.source,
                    spec.message_size
                ),
            });
            let mut lines = TrialLines {
                what: format!("find-max {}/{mode}", engine.name()),
            };
            let mut quiet = crate::findmax::Quiet;
            let shown: &mut dyn crate::findmax::Progress =
                if progress { &mut lines } else { &mut quiet };
            crate::findmax::run(
                &mut engine,
                &spec,
                &ctl,
                &find_max_params(args),
                Duration::from_secs_f64(args.trial_duration),
                limit,
                shown,
            )
        } else {
            with_progress(progress, &ctl, &spec, engine.name(), || {
                engine.run(&spec, &ctl)
            })
        };
        let mut r = match result {
            Ok(r) => r,
            Err(e) => {
                EngineResult::errored(engine.name(), mode, topo.kind.as_str(), &e.to_string())
            }
        };
        if let Some(sig) = signals::pending() {
            r.notes.push(format!("interrupted by signal {sig}"));
        }
        if let Some(n) = rate_note {
            r.notes.push(n);
        }
        // A reference run that itself lost datagrams at line rate (seed 002: unpaced UDP)
        // allows that loss to a run at line rate.
        let reference_loss = line
            .and(crate::reference::find(
                &d.references,
                &r.engine,
                mode.as_str(),
                r.message_size,
                r.streams.len().max(1),
            ))
            .and_then(|x| x.loss_pct);
        if args.find_max {
            // The record is the confirmation trial's: judge it by the search's own loss limit.
            let mut t = thresholds.clone();
            t.max_udp_loss_pct = args.loss;
            judge(&mut r, &t);
            if r.max_loss_free_gbps.is_none() && !matches!(r.status, Status::Error | Status::Skip) {
                r.status = Status::Fail;
            }
        } else {
            let mut t = thresholds.clone();
            if let Some(l) = reference_loss.filter(|l| *l > t.max_udp_loss_pct) {
                t.max_udp_loss_pct = l;
                r.notes.push(format!(
                    "loss allowed up to {l} %: the profile's reference run lost that much"
                ));
            }
            judge(&mut r, &t);
        }
        crate::reference::assess(&mut r, link, &d.references, d.floor);
        report.push(r);
    }
    (report, signals::pending())
}

/// Share of the unpaced probe's delivered rate that a UDP run over a path without a link
/// speed is paced at. The probe's figure is the receiving side's ceiling at that moment (the
/// sender floods, the receiver takes what it can): pacing at it would judge scheduling noise
/// (issue 43 saw a loss-free maximum lose in 3 of 5 repeats), pacing far below proves little.
/// A quarter below the ceiling leaves room for the wake-up jitter of a loaded host, so a loss
/// there says the receive path is short of CPU or buffer. `--find-max` finds the edge itself.
pub const PROBE_SHARE: f64 = 0.75;

/// How long the unpaced probe runs: a quarter of the run, between 0.25 s and 1 s (enough
/// for thousands of datagrams at any rate a socket carries; `qualify --level 2` runs it for
/// each data path, so it stays short).
pub fn probe_seconds(duration: f64) -> f64 {
    (duration / 4.0).clamp(0.25, 1.0)
}

/// The rate a probe delivered and the pace taken from it, or why the probe gives none.
pub fn rate_from_probe(probe: &EngineResult) -> Result<(f64, f64), String> {
    if probe.integrity_errors > 0 {
        return Err(format!(
            "{} integrity error(s) in the probe",
            probe.integrity_errors
        ));
    }
    if probe.packets == 0 || !probe.gbps.is_finite() || probe.gbps <= 0.0 {
        return Err("nothing arrived in the probe".into());
    }
    Ok((probe.gbps, probe.gbps * PROBE_SHARE))
}

/// Draws `[####....] 1.2/3.0 s  12.3 Gb/s` on stderr while `f` runs (TTY only).
fn with_progress<T>(
    on: bool,
    ctl: &RunControl,
    spec: &RunSpec,
    engine: &str,
    f: impl FnOnce() -> T,
) -> T {
    if !on {
        return f();
    }
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            let start = std::time::Instant::now();
            let total = spec.duration.as_secs_f64();
            let mut last_bytes = 0u64;
            let mut last_t = 0.0f64;
            let mut rate = 0.0;
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(200));
                let t = start.elapsed().as_secs_f64();
                // A --peer run receives on the other host: show what left instead.
                let b = match ctl.rx_bytes() {
                    0 => ctl.tx_bytes(),
                    b => b,
                };
                if t > last_t {
                    rate = (b - last_bytes.min(b)) as f64 * 8.0 / (t - last_t) / 1e9;
                }
                last_bytes = b;
                last_t = t;
                let width = 30usize;
                let filled = ((t / total).min(1.0) * width as f64) as usize;
                let _ = write!(
                    std::io::stderr(),
                    "\r{engine}/{} [{}{}] {:.1}/{:.1} s {:>8.2} Gb/s ",
                    spec.mode,
                    "#".repeat(filled),
                    ".".repeat(width - filled),
                    t.min(total),
                    total,
                    rate
                );
            }
            let _ = write!(std::io::stderr(), "\r{}\r", " ".repeat(72));
        });
        let r = f();
        done.store(true, Ordering::Relaxed);
        r
    })
}

#[cfg(test)]
mod tests {
    use super::{probe_seconds, rate_from_probe, EngineResult, Mode};

    #[test]
    fn a_path_without_a_link_speed_is_paced_from_its_probe() {
        let mut p = EngineResult::new("socket", Mode::Udp, "veth");
        assert!(rate_from_probe(&p).unwrap_err().contains("nothing arrived"));
        p.packets = 1000;
        p.gbps = 8.0;
        assert_eq!(rate_from_probe(&p), Ok((8.0, 6.0)));
        p.integrity_errors = 1;
        assert!(rate_from_probe(&p).unwrap_err().contains("integrity"));
        p.integrity_errors = 0;
        p.gbps = f64::NAN;
        assert!(rate_from_probe(&p).is_err());
        assert_eq!(probe_seconds(3.0), 0.75);
        assert_eq!(probe_seconds(60.0), 1.0);
        assert_eq!(probe_seconds(0.5), 0.25);
    }
}
