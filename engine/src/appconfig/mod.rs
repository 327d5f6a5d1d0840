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

use locate::LineIndex;
use serde_yaml_ng::Value;
use std::fmt;

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

fn scalar_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Tagged(t) => scalar_text(&t.value),
        _ => None,
    }
}

fn untag(v: &Value) -> &Value {
    match v {
        Value::Tagged(t) => untag(&t.value),
        other => other,
    }
}

fn get<'v>(v: &'v Value, key: &str) -> Option<&'v Value> {
    match untag(v) {
        Value::Mapping(m) => m.get(key).map(untag),
        _ => None,
    }
}

fn seq(v: Option<&Value>) -> &[Value] {
    match v.map(untag) {
        Some(Value::Sequence(s)) => s.as_slice(),
        _ => &[],
    }
}

/// Nesting depth a DAQIRI configuration may have (its schema is about eight levels deep).
pub const CONFIG_MAX_DEPTH: usize = 32;
/// Entries one list of a DAQIRI configuration may have (queues, flows, regions).
pub const CONFIG_MAX_ITEMS: usize = 4096;

struct Builder<'a> {
    index: &'a LineIndex,
    /// YAML path prefix of the network node (`daqiri.cfg.` or empty).
    prefix: String,
    problems: Vec<Problem>,
}

impl Builder<'_> {
    fn full(&self, shown: &str, net: bool) -> String {
        if net {
            format!("{}{}", self.prefix, shown)
        } else {
            shown.to_string()
        }
    }

    fn line(&self, shown: &str, net: bool) -> usize {
        self.index.line(&self.full(shown, net))
    }

    fn field<T>(
        &mut self,
        v: Option<&Value>,
        shown: String,
        net: bool,
        expected: &str,
        conv: impl Fn(&Value) -> Option<T>,
    ) -> Option<Field<T>> {
        let v = v?;
        let line = self.line(&shown, net);
        let value = match conv(v) {
            Some(t) => Ok(t),
            None => {
                let raw = scalar_text(v).unwrap_or_else(|| {
                    serde_yaml_ng::to_string(v)
                        .unwrap_or_default()
                        .trim()
                        .to_string()
                });
                match find_placeholder(&raw) {
                    // Placeholders are reported once, by the document scan.
                    Some(p) => Err(Bad::Placeholder(p.to_string())),
                    None => {
                        // Digits that do not fit are a number, just too large for one.
                        let digits = raw.strip_prefix('-').unwrap_or(&raw);
                        let message = if expected.contains("integer")
                            && !digits.is_empty()
                            && digits.bytes().all(|b| b.is_ascii_digit())
                            && raw.parse::<i64>().is_err()
                        {
                            format!("`{raw}` is out of range (at most {})", i64::MAX)
                        } else {
                            format!("`{raw}` is not {expected}")
                        };
                        self.problems.push(Problem {
                            path: shown.clone(),
                            line,
                            message,
                            placeholder: false,
                        });
                        Err(Bad::Invalid {
                            raw,
                            expected: expected.to_string(),
                        })
                    }
                }
            }
        };
        Some(Field {
            path: shown,
            line,
            value,
        })
    }

    fn int(&mut self, v: Option<&Value>, shown: String, net: bool) -> Option<Field<i64>> {
        self.field(v, shown, net, "an integer", as_int)
    }

    fn uint(&mut self, v: Option<&Value>, shown: String, net: bool) -> Option<Field<u64>> {
        self.field(v, shown, net, "a non-negative integer", |v| {
            as_int(v).and_then(|i| u64::try_from(i).ok())
        })
    }

    fn missing(&mut self, shown: String, net: bool, what: &str) {
        let line = self.line(&shown, net);
        self.problems.push(Problem {
            path: shown,
            line,
            message: format!("missing: {what}"),
            placeholder: false,
        });
    }
}

/// An integer the way yaml-cpp's `as<int>` reads one: a YAML integer, or a string of digits.
fn as_int(v: &Value) -> Option<i64> {
    match untag(v) {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn as_string(v: &Value) -> Option<String> {
    match untag(v) {
        Value::String(s) if find_placeholder(s).is_none() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn as_bool(v: Option<&Value>) -> Option<bool> {
    match v.map(untag)? {
        Value::Bool(b) => Some(*b),
        Value::String(s) => match s.as_str() {
            "true" | "True" | "TRUE" | "yes" | "on" => Some(true),
            "false" | "False" | "FALSE" | "no" | "off" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

/// Walk the document for `<...>` markers, with the path of each.
fn scan_placeholders(v: &Value, path: &str, out: &mut Vec<(String, String)>) {
    match v {
        Value::String(s) => {
            if let Some(p) = find_placeholder(s) {
                out.push((path.to_string(), p.to_string()));
            }
        }
        Value::Sequence(items) => {
            for (i, it) in items.iter().enumerate() {
                scan_placeholders(it, &format!("{path}[{i}]"), out);
            }
        }
        Value::Mapping(m) => {
            for (k, it) in m {
                let key = scalar_text(k).unwrap_or_else(|| "?".into());
                let p = if path.is_empty() {
                    key
                } else {
                    format!("{path}.{key}")
                };
                scan_placeholders(it, &p, out);
            }
        }
        Value::Tagged(t) => scan_placeholders(&t.value, path, out),
        _ => {}
    }
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

    /// Parse a configuration's text; `file` names it in every finding.
    pub fn parse(file: &str, text: &str) -> Result<AppConfig, AppConfigError> {
        // Bounded before the YAML parser sees it: DPDK has at most 1024 queues a port and 32
        // ports by default, so 4096 entries in one list is garbage, as is deep nesting.
        daqtune_probe::text::yaml_shape(text, CONFIG_MAX_DEPTH, CONFIG_MAX_ITEMS).map_err(|e| {
            AppConfigError {
                file: file.to_string(),
                line: e.line,
                column: e.column,
                message: format!(
                    "{} (a DAQIRI configuration is refused past these bounds)",
                    e.message
                ),
            }
        })?;
        let root: Value = serde_yaml_ng::from_str(text).map_err(|e| {
            let (line, column) = e
                .location()
                .map(|l| (l.line(), l.column()))
                .unwrap_or((1, 1));
            let msg = e.to_string();
            let msg = match msg.split_once(" at line ") {
                Some((head, _)) => head.to_string(),
                None => msg,
            };
            AppConfigError {
                file: file.to_string(),
                line,
                column,
                message: format!("not valid YAML: {msg}"),
            }
        })?;
        let mut root = root;
        // `<<: *anchor` merge keys, which yaml-cpp resolves too.
        let _ = root.apply_merge();
        if !matches!(untag(&root), Value::Mapping(_)) {
            return Err(AppConfigError {
                file: file.to_string(),
                line: 1,
                column: 1,
                message: "expected a mapping with `daqiri: cfg:` (DAQIRI's configuration schema)"
                    .into(),
            });
        }
        let index = LineIndex::build(text);
        let (net, prefix) = match get(&root, "daqiri").and_then(|d| get(d, "cfg")) {
            Some(cfg) => (cfg, "daqiri.cfg.".to_string()),
            None => (untag(&root), String::new()),
        };
        let mut b = Builder {
            index: &index,
            prefix: prefix.clone(),
            problems: Vec::new(),
        };

        let mut placeholders = Vec::new();
        scan_placeholders(untag(&root), "", &mut placeholders);
        for (full, p) in placeholders {
            let shown = full
                .strip_prefix(&prefix)
                .map(String::from)
                .unwrap_or(full.clone());
            b.problems.push(Problem {
                line: index.line(&full),
                path: shown,
                message: format!("unreplaced placeholder `{p}`"),
                placeholder: true,
            });
        }

        if get(net, "version").is_none() {
            b.missing("version".into(), true, "version: 1 (DAQIRI requires it)");
        }
        if let Some(v) = get(net, "version") {
            if as_int(v) != Some(1) {
                let raw = scalar_text(v).unwrap_or_default();
                if find_placeholder(&raw).is_none() {
                    let line = b.line("version", true);
                    b.problems.push(Problem {
                        path: "version".into(),
                        line,
                        message: format!("version `{raw}`: DAQIRI accepts only 1"),
                        placeholder: false,
                    });
                }
            }
        }
        let stream_type = b.field(
            get(net, "stream_type"),
            "stream_type".into(),
            true,
            "raw or socket",
            |v| match as_string(v)?.as_str() {
                "raw" => Some(StreamType::Raw),
                "socket" => Some(StreamType::Socket),
                _ => None,
            },
        );
        if stream_type.is_none() {
            b.missing("stream_type".into(), true, "stream_type (raw or socket)");
        }
        let engine_key = get(net, "engine").and_then(as_string);
        let loopback_sw = get(net, "loopback")
            .and_then(as_string)
            .is_some_and(|s| s == "sw");
        let master_core = b.int(get(net, "master_core"), "master_core".into(), true);
        if master_core.is_none() {
            b.missing(
                "master_core".into(),
                true,
                "master_core (DAQIRI requires it)",
            );
        }

        let mut regions = Vec::new();
        for (i, r) in seq(get(net, "memory_regions")).iter().enumerate() {
            let path = format!("memory_regions[{i}]");
            let line = b.line(&path, true);
            let name = get(r, "name").and_then(as_string).unwrap_or_default();
            if name.is_empty() {
                b.missing(format!("{path}.name"), true, "the region's name");
            }
            let kind = b.field(
                get(r, "kind"),
                format!("{path}.kind"),
                true,
                "a memory kind (huge, device, host_pinned or host)",
                |v| MemKind::parse(&as_string(v)?),
            );
            if kind.is_none() {
                b.missing(
                    format!("{path}.kind"),
                    true,
                    "kind (huge, device, host_pinned or host)",
                );
            }
            let affinity = b.int(get(r, "affinity"), format!("{path}.affinity"), true);
            let num_bufs = b.uint(get(r, "num_bufs"), format!("{path}.num_bufs"), true);
            let buf_size = b.uint(get(r, "buf_size"), format!("{path}.buf_size"), true);
            for (key, present) in [
                ("affinity", affinity.is_some()),
                ("num_bufs", num_bufs.is_some()),
                ("buf_size", buf_size.is_some()),
            ] {
                if !present {
                    b.missing(
                        format!("{path}.{key}"),
                        true,
                        &format!("{key} (DAQIRI requires it)"),
                    );
                }
            }
            regions.push(Region {
                path,
                line,
                name,
                kind,
                affinity,
                num_bufs,
                buf_size,
            });
        }
        let regions_line = b.line("memory_regions", true);

        let mut interfaces = Vec::new();
        for (i, it) in seq(get(net, "interfaces")).iter().enumerate() {
            let path = format!("interfaces[{i}]");
            let line = b.line(&path, true);
            let name = get(it, "name").and_then(as_string).unwrap_or_default();
            let address = b.field(
                get(it, "address"),
                format!("{path}.address"),
                true,
                "an address",
                as_string,
            );
            let sc = get(it, "socket_config");
            let mode = sc.and_then(|s| get(s, "mode")).and_then(as_string);
            let local_addr = b.field(
                sc.and_then(|s| get(s, "local_addr")),
                format!("{path}.socket_config.local_addr"),
                true,
                "an endpoint URI (udp://, tcp:// or roce://HOST[:PORT])",
                |v| Endpoint::parse(&as_string(v)?),
            );
            let remote = sc
                .and_then(|s| get(s, "remote_addr"))
                .and_then(as_string)
                .and_then(|s| Endpoint::parse(&s));
            let max_payload_size = b.uint(
                sc.and_then(|s| get(s, "max_payload_size")),
                format!("{path}.socket_config.max_payload_size"),
                true,
            );
            let transport = match stream_type.as_ref().and_then(|f| f.ok()) {
                Some(StreamType::Raw) => Transport::Raw,
                _ => local_addr
                    .as_ref()
                    .and_then(|f| f.ok())
                    .map(Endpoint::transport)
                    .or(remote.as_ref().map(Endpoint::transport))
                    .unwrap_or(if get(it, "roce_config").is_some() {
                        Transport::Roce
                    } else {
                        Transport::Unknown
                    }),
            };
            if address.is_none() && !(loopback_sw && transport == Transport::Raw) {
                b.missing(format!("{path}.address"), true, "address");
            }
            let mut queues = Vec::new();
            let mut flows = Vec::new();
            for dir in [Dir::Rx, Dir::Tx] {
                let d = get(it, dir.key());
                for (j, q) in seq(d.and_then(|d| get(d, "queues"))).iter().enumerate() {
                    let qpath = format!("{path}.{}.queues[{j}]", dir.key());
                    let direct = get(q, "poll_mode")
                        .and_then(as_string)
                        .is_some_and(|m| m == "direct");
                    let cpu_core = b.int(get(q, "cpu_core"), format!("{qpath}.cpu_core"), true);
                    if cpu_core.is_none() && !direct {
                        b.missing(
                            format!("{qpath}.cpu_core"),
                            true,
                            "cpu_core (required in indirect poll mode)",
                        );
                    }
                    if get(q, "batch_size").is_none() && !direct {
                        b.missing(
                            format!("{qpath}.batch_size"),
                            true,
                            "batch_size (required in indirect poll mode)",
                        );
                    }
                    let qregions: Vec<String> = seq(get(q, "memory_regions"))
                        .iter()
                        .filter_map(as_string)
                        .collect();
                    for (k, r) in qregions.iter().enumerate() {
                        if !regions.iter().any(|x: &Region| &x.name == r) {
                            let p = format!("{qpath}.memory_regions[{k}]");
                            let line = b.line(&p, true);
                            b.problems.push(Problem {
                                path: p,
                                line,
                                message: format!(
                                    "names memory region `{r}`, which memory_regions does not define"
                                ),
                                placeholder: false,
                            });
                        }
                    }
                    queues.push(Queue {
                        dir,
                        line: b.line(&qpath, true),
                        path: qpath,
                        name: get(q, "name").and_then(as_string).unwrap_or_default(),
                        id: get(q, "id").and_then(as_int),
                        cpu_core,
                        regions: qregions,
                    });
                }
                if dir == Dir::Rx {
                    for (j, f) in seq(d.and_then(|d| get(d, "flows"))).iter().enumerate() {
                        let fpath = format!("{path}.rx.flows[{j}]");
                        let Some(ipv4_len) = b.uint(
                            get(f, "match").and_then(|m| get(m, "ipv4_len")),
                            format!("{fpath}.match.ipv4_len"),
                            true,
                        ) else {
                            continue;
                        };
                        let mut targets = Vec::new();
                        let actions = std::iter::once(get(f, "action"))
                            .flatten()
                            .chain(seq(get(f, "actions")).iter());
                        for a in actions {
                            if let Some(id) = get(a, "id").and_then(as_int) {
                                targets.push(id);
                            }
                            targets.extend(seq(get(a, "ids")).iter().filter_map(as_int));
                        }
                        flows.push(Flow {
                            path: fpath,
                            ipv4_len,
                            queues: targets,
                        });
                    }
                }
            }
            interfaces.push(Interface {
                path,
                line,
                name,
                address,
                transport,
                mode,
                local_addr,
                max_payload_size,
                queues,
                flows,
            });
        }

        let mut workers = Vec::new();
        if let Value::Mapping(m) = untag(&root) {
            for (k, v) in m {
                let Some(section) = scalar_text(k) else {
                    continue;
                };
                // The network node; without `daqiri:` the root is the node, and its own
                // keys (memory_regions, interfaces) hold no `cpu_core` at their top level.
                if section == "daqiri" {
                    continue;
                }
                let items: Vec<(String, &Value)> = match untag(v) {
                    Value::Mapping(_) => vec![(section.clone(), untag(v))],
                    Value::Sequence(s) => s
                        .iter()
                        .enumerate()
                        .map(|(i, x)| (format!("{section}[{i}]"), untag(x)))
                        .collect(),
                    _ => continue,
                };
                for (path, item) in items {
                    let Some(core) = get(item, "cpu_core") else {
                        continue;
                    };
                    let Some(cpu_core) = b.int(Some(core), format!("{path}.cpu_core"), false)
                    else {
                        continue;
                    };
                    workers.push(Worker {
                        line: b.line(&path, false),
                        cpu_core,
                        interface_name: get(item, "interface_name").and_then(as_string),
                        queue_id: get(item, "queue_id").and_then(as_int),
                        server: as_bool(get(item, "server")),
                        server_address: get(item, "server_address").and_then(as_string),
                        client_address: get(item, "client_address").and_then(as_string),
                        header_size: b.uint(
                            get(item, "header_size"),
                            format!("{path}.header_size"),
                            false,
                        ),
                        payload_size: b.uint(
                            get(item, "payload_size"),
                            format!("{path}.payload_size"),
                            false,
                        ),
                        message_size: b.uint(
                            get(item, "message_size"),
                            format!("{path}.message_size"),
                            false,
                        ),
                        path,
                    });
                }
            }
        }

        let st = stream_type.as_ref().and_then(|f| f.ok().copied());
        let engine = match (st, engine_key.as_deref()) {
            (Some(StreamType::Raw), Some("ibverbs")) => Engine::Ibverbs,
            (Some(StreamType::Raw), _) => Engine::Dpdk,
            _ if interfaces.iter().any(|i| i.transport == Transport::Roce) => Engine::Rdma,
            _ => Engine::Socket,
        };
        let mut problems = b.problems;
        problems.sort_by_key(|p| p.line);
        problems.dedup();
        Ok(AppConfig {
            file: file.to_string(),
            stream_type,
            engine,
            loopback_sw,
            master_core,
            regions,
            interfaces,
            workers,
            problems,
            regions_line,
            index,
        })
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
