//! An experiment's DAQIRI configuration (`daqtune check --config APP.yaml`): the cores,
//! interfaces, memory regions and packet sizes it names, each with the line it came from, so
//! the `app.*` checks can say "APP.yaml:42 interfaces[0].rx.queues[1].cpu_core: CPU 9 is not
//! isolated" instead of "a core is not isolated".
//!
//! The schema is DAQIRI's (docs/api-reference/configuration.md in NVIDIA/daqiri): the network
//! node is `daqiri.cfg` (or the document root, as DAQIRI accepts), and application sections
//! beside it (`bench_rx`, `bench_tx`, `socket_bench_server`, `rdma_bench_client`, ...) carry
//! the worker cores and message sizes of the program that uses it.
//!
//! Values are read with serde_yaml_ng, whose scalar resolution follows YAML 1.2: an unquoted
//! `0000:01:00.0` is a string (a YAML 1.1 reader would take `01:00`-style scalars as base-60
//! integers). DAQIRI itself reads through yaml-cpp, which converts on access, so a number given
//! as a quoted string (`cpu_core: "9"`) is accepted here as it is there.

pub mod estimate;
pub mod locate;
pub mod netaddr;
mod parse;

use locate::LineIndex;
use std::fmt;

pub use parse::{CONFIG_MAX_DEPTH, CONFIG_MAX_ITEMS};

/// The configuration could not be read at all (exit 2): file:line:column and why (`file: why`
/// with line 0, where the file itself could not be read: an I/O error has no position).
#[derive(Debug, thiserror::Error)]
#[error("{file}{}: {message}", position(*.line, *.column))]
pub struct AppConfigError {
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

/// `:line:column` after a file name, or nothing for line 0 (no position: an I/O error).
pub(crate) fn position(line: usize, column: usize) -> String {
    if line == 0 {
        String::new()
    } else {
        format!(":{line}:{column}")
    }
}

/// Why a field's value is unusable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bad {
    /// An unreplaced `<...>` marker from DAQIRI's templates.
    Placeholder(String),
    /// Present, but not what the schema allows.
    Invalid { raw: String, expected: String },
}

impl fmt::Display for Bad {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Bad::Placeholder(p) => write!(f, "unreplaced placeholder `{p}`"),
            Bad::Invalid { raw, expected } => write!(f, "`{raw}` is not {expected}"),
        }
    }
}

/// One value of the configuration with the key path and line it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Field<T> {
    /// The path as shown to users: relative to `daqiri.cfg` for network keys.
    pub path: String,
    pub line: usize,
    pub value: Result<T, Bad>,
}

impl<T> Field<T> {
    pub fn ok(&self) -> Option<&T> {
        self.value.as_ref().ok()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamType {
    Raw,
    Socket,
}

/// The implementation DAQIRI will pick, which decides buffer padding and hugepage use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    Dpdk,
    Ibverbs,
    /// TCP/UDP through the kernel.
    Socket,
    /// RoCE (`roce://` endpoints): DAQIRI's RDMA engine.
    Rdma,
}

impl Engine {
    pub fn name(self) -> &'static str {
        match self {
            Engine::Dpdk => "dpdk",
            Engine::Ibverbs => "ibverbs",
            Engine::Socket => "socket",
            Engine::Rdma => "rdma",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemKind {
    Huge,
    Device,
    HostPinned,
    Host,
}

impl MemKind {
    pub fn parse(s: &str) -> Option<MemKind> {
        // DAQIRI compares exactly (GetMemoryKindFromString): `HUGE` is invalid there.
        match s {
            "huge" => Some(MemKind::Huge),
            "device" => Some(MemKind::Device),
            "host_pinned" => Some(MemKind::HostPinned),
            "host" => Some(MemKind::Host),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            MemKind::Huge => "huge",
            MemKind::Device => "device",
            MemKind::HostPinned => "host_pinned",
            MemKind::Host => "host",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Region {
    /// `memory_regions[2]`
    pub path: String,
    pub line: usize,
    pub name: String,
    pub kind: Option<Field<MemKind>>,
    /// NUMA node for CPU memory, GPU id for `device`.
    pub affinity: Option<Field<i64>>,
    pub num_bufs: Option<Field<u64>>,
    pub buf_size: Option<Field<u64>>,
}

impl Region {
    pub fn kind(&self) -> Option<MemKind> {
        self.kind.as_ref().and_then(|f| f.ok().copied())
    }
    pub fn num_bufs(&self) -> Option<u64> {
        self.num_bufs.as_ref().and_then(|f| f.ok().copied())
    }
    pub fn buf_size(&self) -> Option<u64> {
        self.buf_size.as_ref().and_then(|f| f.ok().copied())
    }
    pub fn affinity(&self) -> Option<i64> {
        self.affinity.as_ref().and_then(|f| f.ok().copied())
    }
    pub fn label(&self) -> String {
        format!("{} `{}`", self.path, self.name)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    Rx,
    Tx,
}

impl Dir {
    pub fn key(self) -> &'static str {
        match self {
            Dir::Rx => "rx",
            Dir::Tx => "tx",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Queue {
    pub dir: Dir,
    /// `interfaces[0].rx.queues[1]`
    pub path: String,
    pub line: usize,
    pub name: String,
    pub id: Option<i64>,
    /// Absent in `poll_mode: direct` (the caller's thread polls).
    pub cpu_core: Option<Field<i64>>,
    pub regions: Vec<String>,
}

/// An RX flow that names the IPv4 length it matches (so the frame size is known).
#[derive(Debug, Clone)]
pub struct Flow {
    pub path: String,
    pub ipv4_len: Field<u64>,
    /// The queue ids it steers to.
    pub queues: Vec<i64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Raw,
    Udp,
    Tcp,
    Roce,
    Unknown,
}

impl Transport {
    pub fn name(self) -> &'static str {
        match self {
            Transport::Raw => "raw",
            Transport::Udp => "udp",
            Transport::Tcp => "tcp",
            Transport::Roce => "roce",
            Transport::Unknown => "unknown",
        }
    }
}

/// A socket endpoint URI `udp://10.0.0.1:5000`, `roce://10.100.1.1`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub scheme: String,
    pub host: String,
    pub port: Option<u16>,
}

impl Endpoint {
    pub fn parse(s: &str) -> Option<Endpoint> {
        let (scheme, rest) = s.trim().split_once("://")?;
        let rest = rest.split(['?', '/']).next().unwrap_or_default();
        let (host, port) = if let Some(r) = rest.strip_prefix('[') {
            let (h, tail) = r.split_once(']')?;
            (h.to_string(), tail.strip_prefix(':'))
        } else {
            match rest.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), Some(p)),
                None => (rest.to_string(), None),
            }
        };
        let port = match port {
            Some(p) => Some(p.parse().ok()?),
            None => None,
        };
        if host.is_empty() {
            return None;
        }
        Some(Endpoint {
            scheme: scheme.to_ascii_lowercase(),
            host,
            port,
        })
    }
    pub fn transport(&self) -> Transport {
        match self.scheme.as_str() {
            "udp" => Transport::Udp,
            "tcp" => Transport::Tcp,
            "roce" | "rdma" => Transport::Roce,
            _ => Transport::Unknown,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Interface {
    /// `interfaces[0]`
    pub path: String,
    pub line: usize,
    pub name: String,
    pub address: Option<Field<String>>,
    pub transport: Transport,
    /// `server` / `client` for socket streams.
    pub mode: Option<String>,
    pub local_addr: Option<Field<Endpoint>>,
    pub max_payload_size: Option<Field<u64>>,
    pub queues: Vec<Queue>,
    pub flows: Vec<Flow>,
}

impl Interface {
    pub fn queues(&self, dir: Dir) -> impl Iterator<Item = &Queue> {
        self.queues.iter().filter(move |q| q.dir == dir)
    }
    pub fn address(&self) -> Option<&str> {
        self.address
            .as_ref()
            .and_then(|f| f.ok())
            .map(String::as_str)
    }
    pub fn label(&self) -> String {
        format!("{} `{}`", self.path, self.name)
    }
}

/// One application section beside `daqiri:` that runs a pinned worker (a benchmark's RX or TX
/// thread, a socket or RDMA client/server).
#[derive(Debug, Clone)]
pub struct Worker {
    /// `bench_rx`, `bench_rx[1]`, `socket_bench_server`
    pub path: String,
    pub line: usize,
    pub cpu_core: Field<i64>,
    pub interface_name: Option<String>,
    pub queue_id: Option<i64>,
    /// `server: true/false` of socket and RDMA benchmarks.
    pub server: Option<bool>,
    pub server_address: Option<String>,
    pub client_address: Option<String>,
    pub header_size: Option<Field<u64>>,
    pub payload_size: Option<Field<u64>>,
    pub message_size: Option<Field<u64>>,
}

/// Something wrong with the document itself (reported by `app.config`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub path: String,
    pub line: usize,
    pub message: String,
    pub placeholder: bool,
}

#[derive(Debug, Clone)]
pub struct AppConfig {
    /// The file as the user named it (used in every subject).
    pub file: String,
    pub stream_type: Option<Field<StreamType>>,
    pub engine: Engine,
    /// Software loopback (`loopback: sw`): no NIC is touched.
    pub loopback_sw: bool,
    pub master_core: Option<Field<i64>>,
    pub regions: Vec<Region>,
    pub interfaces: Vec<Interface>,
    pub workers: Vec<Worker>,
    pub problems: Vec<Problem>,
    /// Keys DAQIRI does not read (a typo such as `log_levl:`), each with its line and the
    /// nearest key it reads there: `app.config` warns about them.
    pub unknown_keys: Vec<Problem>,
    /// Line of `memory_regions:` (for verdicts about all regions together).
    pub regions_line: usize,
    index: LineIndex,
}

/// A `<...>` marker of DAQIRI's templates inside a string, if any.
pub fn find_placeholder(s: &str) -> Option<&str> {
    let start = s.find('<')?;
    let len = s[start + 1..].find(['>', '<'])?;
    let end = start + 1 + len;
    if s.as_bytes().get(end) != Some(&b'>') || len == 0 || len > 64 {
        // `<` followed by another `<` first: look further along.
        return find_placeholder(&s[start + 1..]);
    }
    Some(&s[start..=end])
}

impl AppConfig {
    /// Read and parse a configuration file.
    pub fn load(path: &std::path::Path) -> Result<AppConfig, AppConfigError> {
        let file = path.display().to_string();
        let text = daqtune_probe::fsutil::read_user_file(path).map_err(|e| AppConfigError {
            file: file.clone(),
            line: 0,
            column: 0,
            message: format!("cannot read the DAQIRI configuration: {e}"),
        })?;
        AppConfig::parse(&file, &text)
    }

    /// `APP.yaml:42 interfaces[0].rx.queues[1].cpu_core`
    pub fn subject(&self, line: usize, path: &str) -> String {
        format!("{}:{line} {path}", self.file)
    }

    pub fn region(&self, name: &str) -> Option<&Region> {
        self.regions.iter().find(|r| r.name == name)
    }

    pub fn interface_named(&self, name: &str) -> Option<&Interface> {
        self.interfaces.iter().find(|i| i.name == name)
    }

    /// The line of any key path of the document (as written, `daqiri.cfg....`).
    pub fn line_of(&self, full_path: &str) -> usize {
        self.index.line(full_path)
    }

    /// The interface a worker serves: by `interface_name`, else (socket and RDMA benchmarks)
    /// the server / client interface whose address is the worker's own.
    pub fn worker_interface(&self, w: &Worker) -> Option<&Interface> {
        if let Some(n) = &w.interface_name {
            return self.interface_named(n);
        }
        let (own, mode) = match w.server {
            Some(true) => (w.server_address.as_deref(), "server"),
            Some(false) => (w.client_address.as_deref(), "client"),
            None => (None, ""),
        };
        let by_mode = |i: &&Interface| i.mode.as_deref() == Some(mode);
        if let Some(a) = own {
            if let Some(i) = self
                .interfaces
                .iter()
                .filter(by_mode)
                .find(|i| i.address() == Some(a))
            {
                return Some(i);
            }
        }
        self.interfaces.iter().find(by_mode)
    }
}

#[cfg(test)]
mod tests;
