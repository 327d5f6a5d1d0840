//! `daqtune-rdma`: the RDMA self-test as its own executable, so that the main `daqtune` binary
//! starts on hosts without libibverbs (this one links it when built with feature `rdma`).
//!
//!   daqtune-rdma --dev rxe0 --peer-dev rxe1            two local ports (or rxe on a veth pair)
//!   daqtune-rdma --listen 0.0.0.0:18515 --dev mlx5_0   receiver for a remote run
//!   daqtune-rdma --dev mlx5_0 --peer host:18515        sender against it
//!
//! Exit status: 0 when every run passed or was skipped, 1 when one failed or errored, 2 on bad
//! usage.

use clap::Parser;
use daqtune_probe::Host;
use daqtune_rdma::run::mode_of;
use daqtune_rdma::{EndpointConfig, RdmaEngine, Topology, Transfer};
use daqtune_report::rdma::RdmaReport;
use daqtune_selftest::engine::{RunControl, RunSpec};
use daqtune_selftest::report::{emit, judge, EngineResult, Render, Report, Thresholds};
use std::net::Ipv4Addr;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    Text,
    Json,
    Junit,
}

#[derive(Parser, Debug)]
#[command(
    name = "daqtune-rdma",
    version,
    about = "RDMA RC WRITE/SEND self-test (ibverbs)"
)]
struct Cli {
    /// Sending device (or the serving device with --listen).
    #[arg(long)]
    dev: Option<String>,
    /// Receiving local device: two ports cabled back to back, or two rxe devices on a veth pair.
    #[arg(long, conflicts_with_all = ["peer", "listen"])]
    peer_dev: Option<String>,
    #[arg(long, default_value_t = 1)]
    port: u8,
    #[arg(long, default_value_t = 1)]
    peer_port: u8,
    /// Force the source GID index (default: the RoCE v2 GID of the port's IPv4 address).
    #[arg(long)]
    gid_index: Option<u32>,
    #[arg(long)]
    peer_gid_index: Option<u32>,
    /// Use the RoCE v2 GID of this address on --dev.
    #[arg(long)]
    ipv4: Option<Ipv4Addr>,
    #[arg(long)]
    peer_ipv4: Option<Ipv4Addr>,
    /// Remote receiver (host:port of `daqtune-rdma --listen`).
    #[arg(long, conflicts_with = "listen")]
    peer: Option<String>,
    /// Serve as the receiver for remote runs.
    #[arg(long)]
    listen: Option<String>,
    /// With --listen: exit after one run.
    #[arg(long)]
    once: bool,
    /// Runs to make, comma separated: write, send, pingpong.
    #[arg(long, value_delimiter = ',', default_value = "write,send,pingpong")]
    test: Vec<String>,
    /// Message size for the bandwidth runs, bytes (header of 32 included).
    #[arg(long, default_value_t = 65536)]
    size: usize,
    /// Message size for the ping-pong, bytes.
    #[arg(long, default_value_t = 64)]
    lat_size: usize,
    /// Seconds per run.
    #[arg(long, default_value_t = 3.0)]
    duration: f64,
    /// Receive ring depth (messages in flight).
    #[arg(long, default_value_t = 64)]
    slots: usize,
    #[arg(long)]
    tx_cpu: Option<usize>,
    #[arg(long)]
    rx_cpu: Option<usize>,
    /// Fail a bandwidth run below this many Gb/s.
    #[arg(long, default_value_t = 0.0)]
    min_gbps: f64,
    /// Output on stdout (json: daqtune.selftest/v1 plus an `rdma` section per run).
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
    /// Same as --format json.
    #[arg(long)]
    json: bool,
    /// Also write a JUnit file.
    #[arg(long)]
    junit: Option<std::path::PathBuf>,
    /// Also write the JSON report to this file.
    #[arg(long)]
    json_out: Option<std::path::PathBuf>,
    /// ACK timeout exponent: 4.096 us * 2^N per retry (14 = 67 ms, perftest's default; use 18
    /// on emulated soft-RoCE, which is slow enough to trigger spurious retransmissions).
    #[arg(long, default_value_t = daqtune_rdma::endpoint_defaults::QP_TIMEOUT, value_parser = clap::value_parser!(u8).range(0..=31))]
    qp_timeout: u8,
    /// Test hook: send every N-th bandwidth message with a broken checksum (the run must fail).
    #[arg(long, hide = true)]
    inject_corruption: Option<u64>,
    /// List RDMA devices (or say why there are none) and exit.
    #[arg(long)]
    list: bool,
    /// Wait up to this many seconds for the ports to be active with a RoCE v2 GID (a port
    /// just moved into a namespace and addressed gets both asynchronously).
    #[arg(long, default_value_t = 0.0)]
    wait_ready: f64,
    /// Memory the runs register: host, host_pinned (cuMemHostAlloc) or device (GPU memory,
    /// GPUDirect: dma-buf where the driver exports it, else nvidia-peermem). Both sides of a
    /// local run use it; a `--listen` receiver uses its own.
    #[arg(long, default_value = "host", value_parser = daqtune_rdma::buffer::KINDS)]
    memory: String,
    /// GPU (CUDA ordinal) for --memory host_pinned or device.
    #[arg(long, default_value_t = 0)]
    gpu: u32,
    /// Register a little GPU memory (--gpu) with every RDMA device (or --dev) the way a
    /// `--memory device` run would, report whether each accepted it, and exit (JSON with
    /// --format json: schema daqtune.gpudirect-probe/v1).
    #[arg(long)]
    probe_gpudirect: bool,
    /// Topology text for the report (set by `daqtune selftest rdma` for its namespaced ports).
    #[arg(long, hide = true)]
    describe: Option<String>,
}

/// Waits for the named endpoints as `--wait-ready` asks (the verbs build only).
fn wait_ready(cfgs: &[&EndpointConfig], secs: f64) {
    if !(secs.is_finite() && secs > 0.0) {
        return;
    }
    #[cfg(feature = "rdma")]
    for c in cfgs {
        if !daqtune_rdma::endpoint::wait_ready(c, Duration::from_secs_f64(secs)) {
            eprintln!(
                "daqtune-rdma: {}:{} not ready after {secs} s (port down or no GID yet)",
                c.device, c.port
            );
        }
    }
    #[cfg(not(feature = "rdma"))]
    let _ = cfgs;
}

fn parse_transfer(s: &str) -> Option<Transfer> {
    match s.trim().to_ascii_lowercase().as_str() {
        "write" => Some(Transfer::Write),
        "send" => Some(Transfer::Send),
        "pingpong" | "ping-pong" | "lat" | "latency" => Some(Transfer::PingPong),
        _ => None,
    }
}

fn main() -> ExitCode {
    let code = run_main();
    // A report that standard output refused (`> /dev/full`) fails the run whatever it found.
    if daqtune_selftest::report::emit_failed() {
        return ExitCode::from(2);
    }
    code
}

fn run_main() -> ExitCode {
    let cli = Cli::parse();
    if cli.list {
        return match RdmaEngine::devices() {
            Ok(names) => {
                emit(&names.iter().map(|n| format!("{n}\n")).collect::<String>());
                ExitCode::SUCCESS
            }
            Err(e) => {
                emit(&format!("skip: {e}\n"));
                ExitCode::SUCCESS
            }
        };
    }
    if cli.probe_gpudirect {
        let p = daqtune_rdma::gpudirect::probe(cli.gpu, cli.dev.as_deref());
        match (cli.json, cli.format) {
            (true, _) | (false, Format::Json) => emit(&format!(
                "{}\n",
                serde_json::to_string_pretty(&p)
                    .unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
            )),
            _ => emit(&format!("{} gpudirect: {}\n", p.status, p.reason)),
        }
        return match p.status {
            "fail" => ExitCode::from(1),
            "error" => ExitCode::from(2),
            _ => ExitCode::SUCCESS,
        };
    }
    let Some(dev) = cli.dev.clone() else {
        eprintln!("daqtune-rdma: --dev is required (or --list)");
        return ExitCode::from(2);
    };
    let local = EndpointConfig {
        device: dev,
        port: cli.port,
        gid_index: cli.gid_index,
        ipv4: cli.ipv4,
    };
    let host = Host::live();
    let provider = match daqtune_rdma::buffer::provider(&cli.memory, cli.gpu) {
        Ok(p) => p,
        Err(e) if e.is_skip() => {
            let why = format!("--memory {}: {e}", cli.memory);
            let r = daqtune_selftest::launch::rdma::skip_report(
                &daqtune_selftest::sys::hostname(),
                &why,
                &[
                    daqtune_selftest::engine::Mode::Write,
                    daqtune_selftest::engine::Mode::Send,
                ],
            );
            match (cli.json, cli.format) {
                (true, _) | (false, Format::Json) => emit(&(r.to_json() + "\n")),
                (false, Format::Junit) => emit(&r.to_junit()),
                (false, Format::Text) => emit(&r.to_text()),
            }
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("daqtune-rdma: --memory {}: {e}", cli.memory);
            return ExitCode::from(2);
        }
    };
    if let Some(addr) = &cli.listen {
        wait_ready(&[&local], cli.wait_ready);
        // The receiving loop runs on this thread.
        if let Some(cpu) = cli.rx_cpu {
            if let Err(e) = daqtune_selftest::sys::pin_current_thread(cpu) {
                eprintln!("daqtune-rdma: --rx-cpu {cpu}: {e} (left unpinned)");
            }
        }
        let stop = AtomicBool::new(false);
        return match daqtune_rdma::server::serve(
            addr,
            &local,
            provider.as_ref(),
            &host,
            cli.once,
            &stop,
        ) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("daqtune-rdma: {e}");
                ExitCode::from(1)
            }
        };
    }
    let topology = match (&cli.peer_dev, &cli.peer) {
        (Some(pd), None) => Topology::Ports {
            a: local,
            b: EndpointConfig {
                device: pd.clone(),
                port: cli.peer_port,
                gid_index: cli.peer_gid_index,
                ipv4: cli.peer_ipv4,
            },
        },
        (None, Some(addr)) => Topology::Peer {
            local,
            addr: addr.clone(),
        },
        _ => {
            eprintln!(
                "daqtune-rdma: name the receiver: --peer-dev DEV (local) or --peer HOST:PORT"
            );
            return ExitCode::from(2);
        }
    };
    let mut transfers = Vec::new();
    for t in &cli.test {
        match parse_transfer(t) {
            Some(t) => transfers.push(t),
            None => {
                eprintln!("daqtune-rdma: unknown test {t:?} (write, send, pingpong)");
                return ExitCode::from(2);
            }
        }
    }
    if !(cli.duration.is_finite() && cli.duration > 0.0) {
        eprintln!("daqtune-rdma: --duration must be a positive number of seconds");
        return ExitCode::from(2);
    }
    match &topology {
        Topology::Ports { a, b } => wait_ready(&[a, b], cli.wait_ready),
        Topology::Peer { local, .. } => wait_ready(&[local], cli.wait_ready),
    }
    let describe = cli.describe.clone().unwrap_or_else(|| topology.describe());
    let mut engine = RdmaEngine::new(topology);
    engine.slots = cli.slots.max(2);
    engine.host = host.clone();
    engine.provider = provider;
    engine.inject_corruption = cli.inject_corruption;
    engine.qp_timeout = cli.qp_timeout;
    let thresholds = Thresholds {
        min_tcp_gbps: cli.min_gbps,
        ..Thresholds::default()
    };
    let hostname = host
        .read_attr("/proc/sys/kernel/hostname")
        .unwrap_or_else(|_| "unknown".into());
    let cpu_plan = match (cli.tx_cpu, cli.rx_cpu) {
        (None, None) => "unpinned".to_string(),
        (t, r) => format!("tx {t:?}, rx {r:?}"),
    };
    let mut report = Report::new(&hostname, &describe, &cpu_plan);
    // SIGINT/SIGTERM/SIGHUP (or the one `daqtune selftest rdma` passes on) end the current run
    // like its duration would: end marker, receiver figures, a report. The endpoint loops poll
    // the control's stop flag, which the signal flag alone does not set. (A `--listen`
    // receiver keeps the default disposition: a signal ends it at once, which is what its
    // parent wants once the sender is done.)
    if let Err(e) = daqtune_probe::signals::watch_termination() {
        eprintln!("daqtune-rdma: signal handlers: {e}");
    }
    let ctl = RunControl::new();
    {
        let ctl = ctl.clone();
        std::thread::spawn(move || loop {
            if daqtune_probe::signals::pending().is_some() {
                ctl.stop();
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        });
    }
    for t in transfers {
        let mut spec = RunSpec::new(mode_of(t));
        spec.duration = Duration::from_secs_f64(cli.duration);
        spec.message_size = if t == Transfer::PingPong {
            cli.lat_size
        } else {
            cli.size
        };
        spec.tx_cpu = cli.tx_cpu;
        spec.rx_cpu = cli.rx_cpu;
        spec.latency = matches!(engine.topology, Topology::Ports { .. });
        let mut r: EngineResult = engine.run_transfer(t, &spec, &ctl);
        let mut t_ = thresholds.clone();
        if t == Transfer::PingPong {
            // A latency run is not a bandwidth run.
            t_.min_tcp_gbps = 0.0;
        }
        judge(&mut r, &t_);
        report.push(r);
    }
    let full = RdmaReport {
        report,
        rdma: Some(engine.details()),
    };
    let report = &full.report;
    let json =
        serde_json::to_string_pretty(&full).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
    if let Some(p) = &cli.json_out {
        if let Err(e) = std::fs::write(p, format!("{json}\n")) {
            eprintln!("daqtune-rdma: writing {}: {e}", p.display());
        }
    }
    if let Some(p) = &cli.junit {
        if let Err(e) = std::fs::write(p, report.to_junit()) {
            eprintln!("daqtune-rdma: writing {}: {e}", p.display());
        }
    }
    match (cli.json, cli.format) {
        (true, _) | (false, Format::Json) => emit(&format!("{json}\n")),
        (false, Format::Junit) => emit(&report.to_junit()),
        (false, Format::Text) => emit(&report.to_text()),
    }
    match daqtune_probe::signals::pending() {
        Some(sig) => {
            ExitCode::from(u8::try_from(daqtune_probe::signals::exit_code(sig)).unwrap_or(1))
        }
        None if report.passed() => ExitCode::SUCCESS,
        None => ExitCode::from(1),
    }
}
