//! Reading a DAQIRI configuration into an [`AppConfig`]: the document, then the network
//! node's parts (head, memory regions, interfaces with their queues and flows), then the
//! application sections' workers. Each part records the problems it finds with their lines.

use super::locate::LineIndex;
use super::*;
use serde_yaml_ng::Value;

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

/// The keys DAQIRI reads from the network node (`daqiri.cfg`), from each of its
/// `memory_regions[]` and from each of its `interfaces[]`: DAQIRI's YAML decoder
/// (include/daqiri/common.h `convert<NetworkConfig>::decode`, src/common.cpp
/// `parse_memory_region_config`) and docs/api-reference/configuration.md. Any other key at
/// these places is ignored by DAQIRI, so a misspelt one silently keeps its default.
const NODE_KEYS: &[&str] = &[
    "version",
    "master_core",
    "stream_type",
    "engine",
    "protocol",
    "manager",
    "loopback",
    "debug",
    "log_level",
    "tx_meta_buffers",
    "rx_meta_buffers",
    "memory_regions",
    "interfaces",
];
const REGION_KEYS: &[&str] = &[
    "name", "kind", "buf_size", "num_bufs", "affinity", "access", "owned",
];
const INTERFACE_KEYS: &[&str] = &[
    "name",
    "address",
    "rdma_config",
    "socket_config",
    "roce_config",
    "rx",
    "tx",
];

/// The highest CPU number a kernel can have (NR_CPUS at most 8192).
const MAX_CPU: i64 = daqtune_probe::cpulist::MAX_CPU as i64;
/// The largest buffer, payload or message a configuration may name: 1 GiB.
const MAX_BYTES: u64 = 1 << 30;

/// Nesting depth a DAQIRI configuration may have (its schema is about eight levels deep).
pub const CONFIG_MAX_DEPTH: usize = 32;
/// Entries one list of a DAQIRI configuration may have (queues, flows, regions).
pub const CONFIG_MAX_ITEMS: usize = 4096;

struct Builder<'a> {
    index: &'a LineIndex,
    /// YAML path prefix of the network node (`daqiri.cfg.` or empty).
    prefix: String,
    problems: Vec<Problem>,
    unknown: Vec<Problem>,
}

impl Builder<'_> {
    /// The keys of the mapping at `path` (network-node relative) that DAQIRI does not read
    /// there, with the nearest it does.
    fn unknown_keys(&mut self, v: &Value, path: &str, known: &[&str]) {
        let Value::Mapping(m) = untag(v) else {
            return;
        };
        for k in m.keys() {
            let Some(key) = scalar_text(k) else { continue };
            // `<<:` merges are resolved before this; anything else unknown is reported.
            if known.contains(&key.as_str()) || key == "<<" {
                continue;
            }
            let shown = if path.is_empty() {
                key.clone()
            } else {
                format!("{path}.{key}")
            };
            let line = self.line(&shown, true);
            let near = crate::model::suggest::nearest(&key, known.iter().copied())
                .map(|n| format!("; did you mean `{n}`?"))
                .unwrap_or_else(|| format!(" (keys read here: {})", known.join(", ")));
            self.unknown.push(Problem {
                path: shown,
                line,
                message: format!("unknown key `{key}`: DAQIRI does not read it{near}"),
                placeholder: false,
            });
        }
    }

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

    /// A parsed number outside what the key can mean (0 buffers, a CPU past NR_CPUS, an
    /// IPv4 length below its header) becomes a problem on its line, and its value unusable:
    /// nothing is derived from it (hugepages, isolated cores, MTU).
    fn bound<T: PartialOrd + std::fmt::Display + Copy>(
        &mut self,
        f: Option<Field<T>>,
        range: std::ops::RangeInclusive<T>,
        what: &str,
    ) -> Option<Field<T>> {
        let mut f = f?;
        if let Ok(v) = f.value {
            if !range.contains(&v) {
                let expected = format!("{} .. {} ({what})", range.start(), range.end());
                self.problems.push(Problem {
                    path: f.path.clone(),
                    line: f.line,
                    message: format!("`{v}` is out of range (expected {expected})"),
                    placeholder: false,
                });
                f.value = Err(Bad::Invalid {
                    raw: v.to_string(),
                    expected,
                });
            }
        }
        Some(f)
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
    /// Parse a configuration's text; `file` names it in every finding.
    pub fn parse(file: &str, text: &str) -> Result<AppConfig, AppConfigError> {
        let root = read_document(file, text)?;
        let index = LineIndex::build(text);
        let (net, prefix) = match get(&root, "daqiri").and_then(|d| get(d, "cfg")) {
            Some(cfg) => (cfg, "daqiri.cfg.".to_string()),
            None => (untag(&root), String::new()),
        };
        let mut b = Builder {
            index: &index,
            prefix,
            problems: Vec::new(),
            unknown: Vec::new(),
        };
        // The order of the parts is the order problems on one line are reported in.
        b.placeholders(&root);
        // Without `daqiri: cfg:` the application sections sit beside the node's keys, so
        // only the wrapped node is held to DAQIRI's list.
        if !b.prefix.is_empty() {
            b.unknown_keys(net, "", NODE_KEYS);
        }
        for (i, r) in seq(get(net, "memory_regions")).iter().enumerate() {
            b.unknown_keys(r, &format!("memory_regions[{i}]"), REGION_KEYS);
        }
        for (i, it) in seq(get(net, "interfaces")).iter().enumerate() {
            b.unknown_keys(it, &format!("interfaces[{i}]"), INTERFACE_KEYS);
        }
        let head = b.head(net);
        let regions = b.regions(net);
        let regions_line = b.line("memory_regions", true);
        let interfaces = b.interfaces(net, &head, &regions);
        let workers = b.workers(&root);
        let st = head.stream_type.as_ref().and_then(|f| f.ok().copied());
        let engine = match (st, head.engine_key.as_deref()) {
            (Some(StreamType::Raw), Some("ibverbs")) => Engine::Ibverbs,
            (Some(StreamType::Raw), _) => Engine::Dpdk,
            _ if interfaces.iter().any(|i| i.transport == Transport::Roce) => Engine::Rdma,
            _ => Engine::Socket,
        };
        let mut problems = b.problems;
        problems.sort_by_key(|p| p.line);
        problems.dedup();
        let mut unknown_keys = b.unknown;
        unknown_keys.sort_by_key(|p| p.line);
        Ok(AppConfig {
            file: file.to_string(),
            stream_type: head.stream_type,
            engine,
            loopback_sw: head.loopback_sw,
            master_core: head.master_core,
            regions,
            interfaces,
            workers,
            problems,
            unknown_keys,
            regions_line,
            index,
        })
    }
}

/// The document as YAML, bounded before the parser sees it, `<<:` merges resolved; refused
/// (exit 2) when it is not a mapping.
fn read_document(file: &str, text: &str) -> Result<Value, AppConfigError> {
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
    let mut root: Value = serde_yaml_ng::from_str(text).map_err(|e| {
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
    Ok(root)
}

/// The network node's scalar keys.
struct Head {
    stream_type: Option<Field<StreamType>>,
    engine_key: Option<String>,
    loopback_sw: bool,
    master_core: Option<Field<i64>>,
}

impl Builder<'_> {
    /// Every `<...>` left in the document, wherever it is.
    fn placeholders(&mut self, root: &Value) {
        let mut placeholders = Vec::new();
        scan_placeholders(untag(root), "", &mut placeholders);
        for (full, p) in placeholders {
            let shown = full
                .strip_prefix(&self.prefix)
                .map(String::from)
                .unwrap_or(full.clone());
            self.problems.push(Problem {
                line: self.index.line(&full),
                path: shown,
                message: format!("unreplaced placeholder `{p}`"),
                placeholder: true,
            });
        }
    }

    /// `version`, `stream_type`, `engine`, `loopback`, `master_core`.
    fn head(&mut self, net: &Value) -> Head {
        let b = self;
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
        let master_core = b.bound(master_core, 0..=MAX_CPU, "a CPU number");
        if master_core.is_none() {
            b.missing(
                "master_core".into(),
                true,
                "master_core (DAQIRI requires it)",
            );
        }
        Head {
            stream_type,
            engine_key,
            loopback_sw,
            master_core,
        }
    }

    /// `memory_regions[]`.
    fn regions(&mut self, net: &Value) -> Vec<Region> {
        let b = self;
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
            let num_bufs = b.bound(
                num_bufs,
                1..=u64::from(u32::MAX),
                "buffers: DPDK's mempool counts them in 32 bits",
            );
            let buf_size = b.uint(get(r, "buf_size"), format!("{path}.buf_size"), true);
            let buf_size = b.bound(buf_size, 1..=MAX_BYTES, "bytes a buffer");
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
        regions
    }

    /// `interfaces[]`, each with its queues and flows.
    fn interfaces(&mut self, net: &Value, head: &Head, regions: &[Region]) -> Vec<Interface> {
        let b = self;
        let stream_type = &head.stream_type;
        let loopback_sw = head.loopback_sw;
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
            let max_payload_size = b.bound(max_payload_size, 1..=MAX_BYTES, "bytes");
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
                queues.extend(b.queues(d, &path, dir, regions));
                if dir == Dir::Rx {
                    flows = b.flows(d, &path);
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
        interfaces
    }

    /// One direction's `queues[]` of the interface at `path`.
    fn queues(
        &mut self,
        d: Option<&Value>,
        path: &str,
        dir: Dir,
        regions: &[Region],
    ) -> Vec<Queue> {
        let b = self;
        let mut queues = Vec::new();
        for (j, q) in seq(d.and_then(|d| get(d, "queues"))).iter().enumerate() {
            let qpath = format!("{path}.{}.queues[{j}]", dir.key());
            let direct = get(q, "poll_mode")
                .and_then(as_string)
                .is_some_and(|m| m == "direct");
            let cpu_core = b.int(get(q, "cpu_core"), format!("{qpath}.cpu_core"), true);
            let cpu_core = b.bound(cpu_core, 0..=MAX_CPU, "a CPU number");
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
        queues
    }

    /// `rx.flows[]` of the interface at `path`: the queues each flow steers to.
    fn flows(&mut self, d: Option<&Value>, path: &str) -> Vec<Flow> {
        let b = self;
        let mut flows = Vec::new();
        for (j, f) in seq(d.and_then(|d| get(d, "flows"))).iter().enumerate() {
            let fpath = format!("{path}.rx.flows[{j}]");
            let ipv4_len = b.uint(
                get(f, "match").and_then(|m| get(m, "ipv4_len")),
                format!("{fpath}.match.ipv4_len"),
                true,
            );
            // An IPv4 total length: the 20-byte header at least, 65535 at most.
            let Some(ipv4_len) = b.bound(ipv4_len, 20..=65535, "an IPv4 packet's total length")
            else {
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
        flows
    }

    /// The application sections beside the network node: their worker cores and sizes.
    fn workers(&mut self, root: &Value) -> Vec<Worker> {
        let b = self;
        let mut workers = Vec::new();
        if let Value::Mapping(m) = untag(root) {
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
                    let cpu_core = b.int(Some(core), format!("{path}.cpu_core"), false);
                    let Some(cpu_core) = b.bound(cpu_core, 0..=MAX_CPU, "a CPU number") else {
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
                        header_size: {
                            let f = b.uint(
                                get(item, "header_size"),
                                format!("{path}.header_size"),
                                false,
                            );
                            b.bound(f, 0..=65535, "bytes of headers")
                        },
                        payload_size: {
                            let f = b.uint(
                                get(item, "payload_size"),
                                format!("{path}.payload_size"),
                                false,
                            );
                            b.bound(f, 1..=MAX_BYTES, "bytes")
                        },
                        message_size: {
                            let f = b.uint(
                                get(item, "message_size"),
                                format!("{path}.message_size"),
                                false,
                            );
                            b.bound(f, 1..=MAX_BYTES, "bytes")
                        },
                        path,
                    });
                }
            }
        }
        workers
    }
}
