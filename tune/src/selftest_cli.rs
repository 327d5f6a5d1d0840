//! The self-test's command line: the flags of `daqtune selftest` and of the `daqtune-selftest`
//! binary (src/bin/daqtune-selftest.rs includes this file), parsed by clap into the selftest
//! library's plain [`Options`] (the library has no argument parser, as the engine has none: see
//! docs/architecture.md). The numbers are checked by `daqtune_selftest::flagnum`, the same
//! functions whichever binary parses them.

use daqtune_report::gpu::MemoryKind;
use daqtune_report::selftest::Mode;
use daqtune_selftest::command::{self, Options};

/// The positional engine argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EngineChoice {
    /// TCP and UDP through the kernel's socket path.
    Socket,
    /// DPDK through the separate `daqtune-dpdk` executable (skipped with the reason when it
    /// is missing or built without DPDK).
    Dpdk,
    /// Every engine: socket, then DPDK.
    All,
}

/// `--format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
    Junit,
}

/// `--gpu-memory`: where messages land (`MemoryKind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GpuMemoryArg {
    /// Pinned host memory the GPU reads in place (cuMemHostAlloc DEVICEMAP).
    #[value(name = "host_pinned", alias = "host-pinned")]
    HostPinned,
    /// Pinned staging and asynchronous host-to-device copies.
    Copy,
    /// GPU memory the NIC writes (GPUDirect RDMA): DPDK and RDMA engines only.
    Device,
}

/// `--mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ModeArg {
    Tcp,
    Udp,
}

/// Arguments of `daqtune selftest` and of `daqtune-selftest`.
#[derive(Debug, Clone, clap::Args)]
pub struct SelftestArgs {
    /// Which data path to prove.
    #[arg(value_enum, default_value = "socket")]
    pub engine: EngineChoice,

    /// A veth pair between two private namespaces (CI, laptops).
    #[arg(long, conflicts_with_all = ["tx_if", "loopback"])]
    pub veth: bool,
    /// Sending port of two ports cabled back to back (moved into a private namespace).
    #[arg(long, value_name = "IFACE", requires = "rx_if")]
    pub tx_if: Option<String>,
    /// Receiving port of the pair.
    #[arg(long, value_name = "IFACE", requires = "tx_if")]
    pub rx_if: Option<String>,
    /// Over 127.0.0.1, where namespaces cannot be made (containers without CAP_SYS_ADMIN).
    #[arg(long, conflicts_with = "tx_if")]
    pub loopback: bool,
    /// Send to another host running `daqtune selftest socket --serve` (ADDR or ADDR:PORT,
    /// port 5299 by default).
    #[arg(long, value_name = "ADDR", conflicts_with_all = ["veth", "tx_if", "loopback", "serve"])]
    pub peer: Option<String>,
    /// Receive and verify for `--peer` runs from another host, until SIGINT/SIGTERM.
    #[arg(long, conflicts_with_all = ["veth", "tx_if", "loopback"])]
    pub serve: bool,
    /// Address the server listens on.
    #[arg(
        long,
        value_name = "ADDR:PORT",
        default_value = "0.0.0.0:5299",
        requires = "serve"
    )]
    pub listen: String,
    /// Serve one session, then exit.
    #[arg(long, requires = "serve")]
    pub once: bool,
    /// Set up the topology, print its namespaces and addresses (JSON), and keep it until
    /// SIGINT/SIGTERM, then restore: run other tools on the same path with
    /// `nsenter --net=/run/netns/NAME`.
    #[arg(long, conflicts_with_all = ["peer", "serve", "loopback"])]
    pub hold: bool,

    /// DPDK: transmitting port by PCI address (ConnectX, mlx5 is bifurcated: no rebinding);
    /// without it DPDK runs over a veth pair in a private namespace.
    #[arg(long, value_name = "BDF", requires = "rx_pci")]
    pub tx_pci: Option<String>,
    /// DPDK: receiving port by PCI address.
    #[arg(long, value_name = "BDF", requires = "tx_pci")]
    pub rx_pci: Option<String>,

    /// Modes to run (default: tcp and udp).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub mode: Vec<ModeArg>,
    /// Seconds per mode.
    #[arg(long, default_value_t = 3.0, value_parser = daqtune_selftest::flagnum::seconds)]
    pub duration: f64,
    /// Bytes per message, 32-byte header included (default: the profile's, 8192).
    #[arg(long, value_name = "BYTES", value_parser = daqtune_selftest::flagnum::message_size)]
    pub message_size: Option<usize>,
    /// Parallel streams, each with its own TX and RX thread and CPUs (seed 002 uses 4).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub streams: u16,
    /// Pacing in Gb/s for every mode (default: TCP unpaced, UDP at the profile's rate).
    #[arg(long, value_name = "GBPS", value_parser = daqtune_selftest::flagnum::gbps)]
    pub rate: Option<f64>,
    /// MTU of the veth pair / ports (default: the profile's).
    #[arg(long, value_parser = daqtune_selftest::flagnum::mtu)]
    pub mtu: Option<u32>,
    /// CPU of the transmit thread (default: from the profile's isolated CPUs).
    #[arg(long, value_name = "CPU", value_parser = daqtune_selftest::flagnum::cpu)]
    pub tx_cpu: Option<usize>,
    /// CPU of the receive thread.
    #[arg(long, value_name = "CPU", value_parser = daqtune_selftest::flagnum::cpu)]
    pub rx_cpu: Option<usize>,
    /// Do not pin the threads.
    #[arg(long)]
    pub no_pin: bool,
    /// Minimum TCP rate of this run in Gb/s (default: none; the profile's `selftest.floor` x
    /// `selftest.reference` judge the rate where the link has a speed).
    #[arg(long, value_name = "GBPS", value_parser = daqtune_selftest::flagnum::gbps)]
    pub min_tcp_gbps: Option<f64>,
    /// UDP loss allowed, percent (default: the profile's `selftest.max_udp_loss_pct`).
    #[arg(long, value_name = "PCT", value_parser = daqtune_selftest::flagnum::percent)]
    pub max_udp_loss: Option<f64>,

    /// Land received messages in this GPU's memory and verify them there with a GPU kernel:
    /// nvidia-smi's index, a UUID (`GPU-...`) or a PCI bus id. Without a usable GPU every mode
    /// is reported as `skip` and the exit code is 3.
    #[arg(long, value_name = "ID", conflicts_with_all = ["peer", "serve", "hold"])]
    pub gpu: Option<String>,
    /// Where messages land for `--gpu`: `host_pinned` (pinned host memory the kernel reads in
    /// place), `copy` (pinned staging + host-to-device copies of >= 4 MiB batches), `device`
    /// (GPUDirect RDMA: not applicable to sockets).
    #[arg(
        long,
        value_enum,
        value_name = "KIND",
        default_value = "copy",
        requires = "gpu"
    )]
    pub gpu_memory: GpuMemoryArg,
    /// Bytes per GPU batch, rounded up to whole messages (`copy` needs at least 4 MiB; the
    /// default 8 MiB is where copies in a live stream reach the pinned-copy peak).
    #[arg(long, value_name = "BYTES", default_value_t = daqtune_selftest::gpu_sink::DEFAULT_BATCH, requires = "gpu")]
    pub gpu_batch: usize,
    /// Test aid: the sender corrupts N messages (one body byte each, after the CRC was
    /// computed); the run passes only if the verifier counts exactly N integrity errors.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub inject_corruption: u64,

    /// Search the highest rate whose loss stays within --loss (RFC 2544-style throughput
    /// search for UDP and DPDK): an unpaced probe, a binary search over paced trials, then
    /// five confirmation trials in a row at a claim kept below the loss edge by the spread
    /// measured, lowered while confirmations fail; every trial is reported.
    #[arg(long, conflicts_with_all = ["hold", "serve", "rate", "gpu", "inject_corruption"])]
    pub find_max: bool,
    /// --find-max: loss a trial may have and still pass, percent (RFC 2544: 0).
    #[arg(long, value_name = "PCT", default_value_t = 0.0, requires = "find_max")]
    pub loss: f64,
    /// --find-max: stop when the bounds are within this percent of the upper start bound.
    #[arg(long, value_name = "PCT", default_value_t = 2.0, requires = "find_max")]
    pub precision: f64,
    /// --find-max: shortest trial in seconds; a trial also lasts at least four times the time
    /// the receive buffer takes to fill at its rate (capped at 30 s).
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = 2.0,
        requires = "find_max"
    )]
    pub trial_duration: f64,
    /// --find-max: trials at most, probe and confirmations included (7..=200); the search
    /// ends without a claim when its next step would need more.
    #[arg(
        long,
        value_name = "N",
        default_value_t = daqtune_selftest::findmax::MAX_TRIALS,
        requires = "find_max"
    )]
    pub max_trials: usize,

    /// UDP sender: one datagram per send instead of UDP GSO (`UDP_SEGMENT`, on by default
    /// where the kernel has it: up to 64 messages per send, cut by the kernel).
    #[arg(long)]
    pub no_gso: bool,
    /// UDP sender: one system call per send instead of `sendmmsg`.
    #[arg(long)]
    pub no_sendmmsg: bool,
    /// UDP receiver: no UDP GRO (coalesced reads, split back into datagrams and each verified).
    #[arg(long)]
    pub no_gro: bool,
    /// UDP receiver: one system call per read instead of `recvmmsg`.
    #[arg(long)]
    pub no_recvmmsg: bool,
    /// TCP sender: send with `MSG_ZEROCOPY` and read the completions (the report says whether
    /// copies were avoided; on a veth pair or loopback the kernel copies anyway).
    #[arg(long)]
    pub zerocopy: bool,
    /// Receive buffer (SO_RCVBUF) in bytes, suffix K or M allowed (64K..1024M). Default: sized
    /// from the path (UDP: the rate times a 10 ms stall, at least two recvmmsg batches; TCP:
    /// the kernel's autotuning); the report says what was used and why.
    #[arg(long, value_name = "BYTES", value_parser = daqtune_selftest::flagnum::rcvbuf)]
    pub rcvbuf: Option<usize>,

    /// Output format on stdout.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// Also write a JUnit file.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<std::path::PathBuf>,
    /// Never draw a progress bar.
    #[arg(long)]
    pub no_progress: bool,
}

impl SelftestArgs {
    /// The parsed flags as the library's options (field for field).
    pub fn options(&self) -> Options {
        Options {
            engine: match self.engine {
                EngineChoice::Socket => command::EngineChoice::Socket,
                EngineChoice::Dpdk => command::EngineChoice::Dpdk,
                EngineChoice::All => command::EngineChoice::All,
            },
            veth: self.veth,
            tx_if: self.tx_if.clone(),
            rx_if: self.rx_if.clone(),
            loopback: self.loopback,
            peer: self.peer.clone(),
            serve: self.serve,
            listen: self.listen.clone(),
            once: self.once,
            hold: self.hold,
            tx_pci: self.tx_pci.clone(),
            rx_pci: self.rx_pci.clone(),
            mode: self
                .mode
                .iter()
                .map(|m| match m {
                    ModeArg::Tcp => Mode::Tcp,
                    ModeArg::Udp => Mode::Udp,
                })
                .collect(),
            duration: self.duration,
            message_size: self.message_size,
            streams: self.streams,
            rate: self.rate,
            mtu: self.mtu,
            tx_cpu: self.tx_cpu,
            rx_cpu: self.rx_cpu,
            no_pin: self.no_pin,
            min_tcp_gbps: self.min_tcp_gbps,
            max_udp_loss: self.max_udp_loss,
            gpu: self.gpu.clone(),
            gpu_memory: self.gpu_memory.into(),
            gpu_batch: self.gpu_batch,
            inject_corruption: self.inject_corruption,
            find_max: self.find_max,
            loss: self.loss,
            precision: self.precision,
            trial_duration: self.trial_duration,
            max_trials: self.max_trials,
            no_gso: self.no_gso,
            no_sendmmsg: self.no_sendmmsg,
            no_gro: self.no_gro,
            no_recvmmsg: self.no_recvmmsg,
            zerocopy: self.zerocopy,
            rcvbuf: self.rcvbuf,
            format: match self.format {
                Format::Text => command::Format::Text,
                Format::Json => command::Format::Json,
                Format::Junit => command::Format::Junit,
            },
            junit: self.junit.clone(),
            no_progress: self.no_progress,
        }
    }
}

impl From<GpuMemoryArg> for MemoryKind {
    fn from(a: GpuMemoryArg) -> Self {
        match a {
            GpuMemoryArg::HostPinned => MemoryKind::HostPinned,
            GpuMemoryArg::Copy => MemoryKind::Copy,
            GpuMemoryArg::Device => MemoryKind::Device,
        }
    }
}
