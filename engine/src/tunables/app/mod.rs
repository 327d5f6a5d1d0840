//! The `app.*` checks: this host against the DAQIRI configuration given with `--config`.
//! Every verdict's subject is `FILE:LINE key.path`, the key the finding comes from.

use crate::appconfig::estimate::{self, MIB};
use crate::appconfig::netaddr::LocalAddrs;
use crate::appconfig::{
    AppConfig, Bad, Dir, Engine, Field, Interface, MemKind, Queue, Transport, Worker,
};
use crate::context::nics::{app_ports, nic_by_netdev, socket_hosts, AppPort};
use crate::context::Context;
use crate::tunable::Tunable;
use crate::verdict::{Area, Verdict};
use daqtune_probe::pci::{PciAddr, PciFacts};
use daqtune_probe::CpuSet;
use std::collections::BTreeMap;
use std::net::IpAddr;

pub const CONFIG: Tunable = Tunable {
    id: "app.config",
    area: Area::Platform,
    title: "The DAQIRI configuration (--config) reads cleanly: no placeholders left",
    aliases: &[],
    doc: include_str!("../../../docs/checks/app.config.md"),
    needs_root: false,
    profile_keys: &[],
    check: run_config,
    planner: None,
};

pub const CORES: Tunable = Tunable {
    id: "app.cores",
    area: Area::Cpu,
    title:
        "The configuration's master, queue and worker cores: online, isolated, unshared, NIC-local",
    aliases: &[],
    doc: include_str!("../../../docs/checks/app.cores.md"),
    needs_root: false,
    profile_keys: &[],
    check: run_cores,
    planner: None,
};

pub const MEMORY: Tunable = Tunable {
    id: "app.memory",
    area: Area::Memory,
    title: "The configuration's memory regions fit the host: hugepages, GPU BAR1, GPUDirect",
    aliases: &[],
    doc: include_str!("../../../docs/checks/app.memory.md"),
    needs_root: false,
    profile_keys: &[],
    check: run_memory,
    planner: None,
};

pub const INTERFACES: Tunable = Tunable {
    id: "app.interfaces",
    area: Area::Nic,
    title: "The configuration's interface addresses exist on this host",
    aliases: &[],
    doc: include_str!("../../../docs/checks/app.interfaces.md"),
    needs_root: false,
    profile_keys: &[],
    check: run_interfaces,
    planner: None,
};

pub const SIZES: Tunable = Tunable {
    id: "app.sizes",
    area: Area::Nic,
    title: "The configuration's packet and message sizes fit its buffers and the MTU",
    aliases: &[],
    doc: include_str!("../../../docs/checks/app.sizes.md"),
    needs_root: false,
    profile_keys: &[],
    check: run_sizes,
    planner: None,
};

fn app<'c>(ctx: &'c Context, id: &str) -> Result<&'c AppConfig, Vec<Verdict>> {
    ctx.app.ok_or_else(|| {
        vec![Verdict::na(
            id,
            "host",
            "no --config given: pass the experiment's DAQIRI YAML to check the host against it",
        )]
    })
}

fn mib(b: u64) -> u64 {
    b.div_ceil(MIB)
}

/// The verdict for a field whose value is unusable (reported in full by `app.config`).
fn bad_field(id: &str, app: &AppConfig, path: &str, line: usize, bad: &Bad) -> Verdict {
    Verdict::skip(
        id,
        app.subject(line, path),
        format!("{bad}: cannot judge it (see app.config)"),
    )
}

// ---------------------------------------------------------------------------------------------
// Resolving the configuration's interfaces on this host

/// What an interface of the configuration is on this host: its first port.
type Resolved<'f> = AppPort<'f>;

fn resolve<'f>(
    i: &Interface,
    facts: Option<&'f PciFacts>,
    addrs: Option<&LocalAddrs>,
) -> Resolved<'f> {
    app_ports(i, facts, addrs)
        .into_iter()
        .next()
        .unwrap_or_default()
}

fn netdev_mtu(ctx: &Context, r: &Resolved) -> Option<u32> {
    let nd = r.netdev.as_deref()?;
    if let Some(m) = r
        .nic
        .and_then(|n| n.netdevs.iter().find(|d| d.name == nd))
        .and_then(|d| d.mtu)
    {
        return Some(m);
    }
    ctx.read_parsed::<u32>(&format!("/sys/class/net/{nd}/mtu"))
}

// ---------------------------------------------------------------------------------------------
// app.config

fn placeholder_hint(ctx: &Context, app: &AppConfig, path: &str) -> String {
    let key = path.rsplit('.').next().unwrap_or(path);
    let key = key.split('[').next().unwrap_or(key);
    let raw = app.stream_type.as_ref().and_then(|f| f.ok().copied())
        == Some(crate::appconfig::StreamType::Raw);
    match key {
        "address" if raw => {
            let here: Vec<String> = ctx
                .pci()
                .map(|f| {
                    f.nics
                        .iter()
                        .filter(|n| n.connectx)
                        .map(|n| n.label())
                        .collect()
                })
                .unwrap_or_default();
            if here.is_empty() {
                "the PCI address (DDDD:BB:DD.F) of the ConnectX port to use".into()
            } else {
                format!(
                    "the PCI address of the ConnectX port to use; this host has {}",
                    here.join(", ")
                )
            }
        }
        "address" | "local_addr" | "remote_addr" | "ip_src_addr" | "ip_dst_addr"
        | "server_address" | "client_address" => {
            "an IPv4 address configured on the data-path port (see `daqtune check app.interfaces`)"
                .into()
        }
        "cpu_core" | "master_core" => match ctx.cmdline_isolated() {
            Some(iso) => format!(
                "a CPU number: queue and worker threads on isolated CPUs ({iso} here), the master core on another"
            ),
            None => "a CPU number (queue and worker threads belong on isolated CPUs)".into(),
        },
        "eth_dst_addr" | "eth_src_addr" => {
            "the port's MAC address (cat /sys/class/net/IFACE/address)".into()
        }
        _ => "this host's value".into(),
    }
}

fn run_config(ctx: &Context) -> Vec<Verdict> {
    const ID: &str = "app.config";
    let app = match app(ctx, ID) {
        Ok(a) => a,
        Err(v) => return v,
    };
    if app.problems.is_empty() {
        let queues: usize = app.interfaces.iter().map(|i| i.queues.len()).sum();
        let st = match app.stream_type.as_ref().and_then(|f| f.ok()) {
            Some(crate::appconfig::StreamType::Raw) => "raw",
            _ => "socket",
        };
        return vec![Verdict::pass(
            ID,
            app.file.clone(),
            format!(
                "stream_type {st} ({} engine): {} memory region(s), {} interface(s), {queues} queue(s), {} application worker(s); no placeholders left",
                app.engine.name(),
                app.regions.len(),
                app.interfaces.len(),
                app.workers.len()
            ),
        )];
    }
    app.problems
        .iter()
        .map(|p| {
            let v = Verdict::fail(ID, app.subject(p.line, &p.path), p.message.clone());
            if p.placeholder {
                v.fix(format!(
                    "edit {}:{}: replace the placeholder with {}",
                    app.file,
                    p.line,
                    placeholder_hint(ctx, app, &p.path)
                ))
            } else {
                v.fix(format!(
                    "edit {}:{} (DAQIRI's configuration reference: docs/api-reference/configuration.md)",
                    app.file, p.line
                ))
            }
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// app.cores

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Master,
    Queue { iface: usize },
    Worker { iface: Option<usize> },
}

struct CoreUse<'a> {
    path: &'a str,
    line: usize,
    role: Role,
    core: &'a Result<i64, Bad>,
}

fn core_uses(app: &AppConfig) -> Vec<CoreUse<'_>> {
    let mut out = Vec::new();
    if let Some(f) = &app.master_core {
        out.push(CoreUse {
            path: &f.path,
            line: f.line,
            role: Role::Master,
            core: &f.value,
        });
    }
    for (i, itf) in app.interfaces.iter().enumerate() {
        for q in &itf.queues {
            if let Some(f) = &q.cpu_core {
                out.push(CoreUse {
                    path: &f.path,
                    line: f.line,
                    role: Role::Queue { iface: i },
                    core: &f.value,
                });
            }
        }
    }
    for w in &app.workers {
        let iface = app
            .worker_interface(w)
            .and_then(|x| app.interfaces.iter().position(|y| std::ptr::eq(x, y)));
        out.push(CoreUse {
            path: &w.cpu_core.path,
            line: w.cpu_core.line,
            role: Role::Worker { iface },
            core: &w.cpu_core.value,
        });
    }
    out
}

/// The queue and worker cores of a configuration (what isolcpus= must cover).
pub fn data_cores(app: &AppConfig) -> CpuSet {
    core_uses(app)
        .iter()
        .filter(|u| u.role != Role::Master)
        .filter_map(|u| u.core.as_ref().ok())
        .filter_map(|c| u32::try_from(*c).ok())
        .collect()
}

/// A queue of a TCP/UDP interface: DAQIRI's socket engine never applies its cpu_core
/// (src/engines/socket has no affinity call), so no thread runs there.
fn unpinned(app: &AppConfig, role: Role) -> bool {
    match role {
        Role::Queue { iface } => matches!(
            app.interfaces[iface].transport,
            Transport::Udp | Transport::Tcp
        ),
        _ => false,
    }
}

/// Sharers of one CPU named in a verdict; the rest are counted.
const SHARERS_NAMED: usize = 3;

fn role_name(app: &AppConfig, u: &CoreUse) -> String {
    match u.role {
        Role::Master => "the master core".into(),
        Role::Queue { iface } => format!(
            "the queue thread of interface `{}`",
            app.interfaces[iface].name
        ),
        Role::Worker { .. } => format!("the `{}` worker", u.path.trim_end_matches(".cpu_core")),
    }
}

fn run_cores(ctx: &Context) -> Vec<Verdict> {
    const ID: &str = "app.cores";
    let app = match app(ctx, ID) {
        Ok(a) => a,
        Err(v) => return v,
    };
    let uses = core_uses(app);
    if uses.is_empty() {
        return vec![Verdict::skip(
            ID,
            app.file.clone(),
            "the configuration names no cores",
        )];
    }
    let cpus = ctx.cpus();
    let iso = ctx.cmdline_isolated();
    let cmdline_ok = ctx.cmdline().is_ok();
    let facts = ctx.pci().ok();
    let addrs = ctx.local_addrs().ok();
    let nodes = &ctx.mem().nodes;
    let multi_node = nodes.len() > 1;
    let wanted = data_cores(app);
    // What to isolate: the configuration's data cores that exist here, plus what already is.
    let wanted = match cpus {
        Ok(c) => wanted.intersection(&c.online),
        Err(_) => wanted,
    };
    let iso_union = iso.clone().unwrap_or_default().union(&wanted);
    // Pinned uses by CPU, so that sharing is found per CPU rather than across all pairs.
    let mut by_core: std::collections::HashMap<i64, Vec<usize>> = Default::default();
    for (i, o) in uses.iter().enumerate() {
        if let (Ok(c), false) = (o.core, unpinned(app, o.role)) {
            by_core.entry(*c).or_default().push(i);
        }
    }
    let mut out = Vec::new();
    for u in &uses {
        let subject = app.subject(u.line, u.path);
        let core = match u.core {
            Ok(c) => *c,
            Err(b) => {
                out.push(bad_field(ID, app, u.path, u.line, b));
                continue;
            }
        };
        if unpinned(app, u.role) {
            out.push(
                Verdict::na(
                    ID,
                    subject,
                    "DAQIRI's TCP/UDP socket engine does not pin its threads to cpu_core (the application's workers are the pinned threads)",
                )
                .observed(format!("cpu {core}")),
            );
            continue;
        }
        let data = u.role != Role::Master;
        if core < 0 {
            let v = if matches!(u.role, Role::Worker { .. }) && core == -1 {
                Verdict::warn(
                    ID,
                    subject,
                    "cpu_core -1: the worker is not pinned and the scheduler may move it onto a core DAQIRI polls",
                )
            } else {
                Verdict::fail(ID, subject, format!("cpu_core {core} is not a CPU"))
            };
            out.push(v.observed(core));
            continue;
        }
        let Ok(cpu) = u32::try_from(core) else {
            out.push(
                Verdict::fail(
                    ID,
                    subject,
                    format!("CPU {core} does not exist on this host"),
                )
                .observed(core),
            );
            continue;
        };
        let mut fails: Vec<String> = Vec::new();
        let mut warns: Vec<String> = Vec::new();
        let mut goods: Vec<String> = Vec::new();
        let mut fix: Option<String> = None;
        match cpus {
            Ok(c) if c.online.contains(cpu) => goods.push("online".into()),
            Ok(c) => {
                let exists = c
                    .present
                    .as_ref()
                    .or(c.possible.as_ref())
                    .is_some_and(|p| p.contains(cpu));
                if exists {
                    fails.push(format!("CPU {cpu} is offline (online: {})", c.online));
                    fix = Some(format!(
                        "echo 1 | sudo tee /sys/devices/system/cpu/cpu{cpu}/online"
                    ));
                } else {
                    fails.push(format!(
                        "CPU {cpu} does not exist on this host (CPUs {})",
                        c.online
                    ));
                }
            }
            Err(e) => warns.push(format!("cannot read the CPU list ({e})")),
        }
        let missing = !fails.is_empty();
        if data && !missing {
            match &iso {
                Some(set) if set.contains(cpu) => goods.push("isolated".into()),
                Some(set) => {
                    fails.push(format!(
                        "CPU {cpu} is not isolated (isolcpus={set}): the scheduler and unbound kernel work interrupt {}",
                        role_name(app, u)
                    ));
                }
                None if cmdline_ok => fails.push(format!(
                    "CPU {cpu} is not isolated: the kernel command line has no isolcpus="
                )),
                None => {
                    warns.push("cannot read /proc/cmdline to see whether it is isolated".into())
                }
            }
            if fails.iter().any(|f| f.contains("not isolated")) {
                fix = Some(format!(
                    "isolate the configuration's data cores: put `isolcpus={iso_union} nohz_full={iso_union} rcu_nocbs={iso_union} rcu_nocb_poll` on the kernel command line (a profile with cpu.isolated: \"{iso_union}\" and `sudo daqtune apply`), then reboot"
                ));
            }
        }
        // Sharing: only the uses of this CPU are visited, and a few sharers are named, the
        // rest counted (thousands of queues on one core made every verdict list all others).
        let (mut hidden_fails, mut hidden_warns) = (0usize, 0usize);
        let (mut named_fails, mut named_warns) = (0usize, 0usize);
        for &oi in by_core.get(&core).map(Vec::as_slice).unwrap_or(&[]) {
            let o = &uses[oi];
            if std::ptr::eq(o, u) {
                continue;
            }
            let (fail, why) = match (u.role, o.role) {
                (Role::Master, Role::Master) => continue,
                (Role::Master, _) | (_, Role::Master) => (
                    true,
                    "DAQIRI's master core must differ from the cores assigned to queues",
                ),
                (Role::Queue { iface: a }, Role::Queue { iface: b }) => {
                    let socket = app.interfaces[a].transport != Transport::Raw;
                    if a == b && socket {
                        continue;
                    }
                    (false, "one thread then polls both queues in turn")
                }
                _ => (
                    true,
                    "two busy-polling threads on one core halve each other's rate",
                ),
            };
            let (list, named, hidden) = if fail {
                (&mut fails, &mut named_fails, &mut hidden_fails)
            } else {
                (&mut warns, &mut named_warns, &mut hidden_warns)
            };
            if *named >= SHARERS_NAMED {
                *hidden += 1;
                continue;
            }
            *named += 1;
            let other = format!("{} ({}:{})", role_name(app, o), app.file, o.line);
            list.push(format!("shares CPU {cpu} with {other}: {why}"));
        }
        for (n, list) in [(hidden_fails, &mut fails), (hidden_warns, &mut warns)] {
            if n > 0 {
                list.push(format!(
                    "shares CPU {cpu} with {n} more thread(s) of the configuration"
                ));
            }
        }
        // NUMA locality of the data path.
        if data {
            let iface = match u.role {
                Role::Queue { iface } => Some(iface),
                Role::Worker { iface } => iface,
                Role::Master => None,
            };
            let nic = iface.and_then(|i| resolve(&app.interfaces[i], facts, addrs).nic);
            if let Some(n) = nic {
                match n.numa_node.and_then(|x| u32::try_from(x).ok()) {
                    Some(node) if multi_node => match nodes.iter().find(|x| x.id == node) {
                        Some(nd) if nd.cpus.contains(cpu) => {
                            goods.push(format!("on node {node} with {}", n.label()))
                        }
                        Some(nd) => warns.push(format!(
                            "CPU {cpu} is not on NUMA node {node} of {} (node {node} has CPUs {}): every packet crosses the socket interconnect",
                            n.label(),
                            nd.cpus
                        )),
                        None => {}
                    },
                    Some(_) => goods.push(format!("same node as {}", n.label())),
                    None if multi_node => warns.push(format!(
                        "the firmware reports no NUMA node for {}: locality cannot be judged",
                        n.label()
                    )),
                    None => {}
                }
            }
        }
        let v = if !fails.is_empty() {
            fails.extend(warns);
            Verdict::fail(ID, subject, fails.join("; ")).maybe_fix(fix)
        } else if !warns.is_empty() {
            Verdict::warn(ID, subject, warns.join("; "))
        } else {
            Verdict::pass(
                ID,
                subject,
                format!("CPU {cpu} for {}: {}", role_name(app, u), goods.join(", ")),
            )
        };
        out.push(v.observed(format!("cpu {cpu}")).expected(if data {
            "online, isolated, not shared, on the NIC's node"
        } else {
            "online, not shared with a queue or worker"
        }));
    }
    out
}

// ---------------------------------------------------------------------------------------------
// app.memory

/// Free hugepage bytes on a node (all page sizes); the host's pools on a one-node host that
/// has no per-node directories.
fn node_free(ctx: &Context, node: u32) -> Option<u64> {
    let mem = ctx.mem();
    let per: Vec<_> = mem.node_pools.iter().filter(|p| p.node == node).collect();
    if !per.is_empty() {
        return Some(
            per.iter()
                .map(|p| p.free.saturating_mul(p.size_kb).saturating_mul(1024))
                .sum(),
        );
    }
    if mem.nodes.len() <= 1 && node == 0 && mem.pools_error.is_none() {
        return Some(
            mem.pools
                .iter()
                .map(|p| p.free.saturating_mul(p.size_kb).saturating_mul(1024))
                .sum(),
        );
    }
    None
}

fn free_total(ctx: &Context) -> Option<u64> {
    let mem = ctx.mem();
    if mem.pools_error.is_some() {
        return None;
    }
    Some(
        mem.pools
            .iter()
            .map(|p| p.free.saturating_mul(p.size_kb).saturating_mul(1024))
            .sum(),
    )
}

fn largest_page_kb(ctx: &Context) -> u64 {
    ctx.mem()
        .pools
        .iter()
        .map(|p| p.size_kb)
        .max()
        .unwrap_or(2048)
}

fn hugepage_fix(ctx: &Context, node: Option<u32>, missing: u64) -> String {
    let page_kb = largest_page_kb(ctx);
    let pages = missing.div_ceil(page_kb.saturating_mul(1024).max(1));
    let label = daqtune_probe::mem::format_size_kb(page_kb);
    let current = match node {
        Some(n) => ctx
            .mem()
            .node_pools
            .iter()
            .find(|p| p.node == n && p.size_kb == page_kb)
            .map(|p| p.total),
        None => ctx.mem().pool(page_kb).map(|p| p.total),
    }
    .unwrap_or(0);
    let path = match node {
        Some(n) => {
            format!("/sys/devices/system/node/node{n}/hugepages/hugepages-{page_kb}kB/nr_hugepages")
        }
        None => format!("/sys/kernel/mm/hugepages/hugepages-{page_kb}kB/nr_hugepages"),
    };
    format!(
        "reserve {pages} more {label} page(s): echo {} | sudo tee {path} (at boot: hugepagesz={label} hugepages=N on the kernel command line; the hugepages check and `daqtune apply --only hugepages` keep it)",
        current.saturating_add(pages)
    )
}

struct GpuPath {
    ok: bool,
    how: String,
}

/// The GPUDirect path of `g`, decided by the same judgement as `gpu.peermem`
/// (`context::gpus::gpudirect_path`), worded for a memory region.
fn gpudirect_path(ctx: &Context, g: &daqtune_probe::gpu::GpuFacts) -> GpuPath {
    let p = crate::context::gpus::gpudirect_path(ctx, g);
    if let (Some(m), true) = (p.module, p.peermem_ready()) {
        return GpuPath {
            ok: true,
            how: format!("{m} loaded (peer memory)"),
        };
    }
    if p.dmabuf_ready() {
        return GpuPath {
            ok: true,
            how: "dma-buf (DMA_BUF_SUPPORTED=1)".into(),
        };
    }
    let mut why = Vec::new();
    match p.module {
        _ if !p.peermem_allowed => {
            why.push("the profile's gpudirect_paths do not allow peermem".into())
        }
        Some(m) if !p.nv_mem => why.push(format!(
            "{m} is loaded but /sys/kernel/mm/memory_peers/nv_mem is absent"
        )),
        Some(_) => why.push("the GPU reports GPU_DIRECT_RDMA_SUPPORTED=0".into()),
        None => why.push("nvidia_peermem is not loaded".into()),
    }
    why.push(match (p.dmabuf_attr, &p.open_module) {
        (Some(true), _) if !p.dmabuf_allowed => {
            "dma-buf is supported but the profile's gpudirect_paths do not allow it".into()
        }
        (Some(true), Ok(false)) => {
            "DMA_BUF_SUPPORTED=1 but the proprietary kernel module cannot export dma-buf".into()
        }
        (Some(true), _) => "DMA_BUF_SUPPORTED=1, kernel module flavour unknown".into(),
        (Some(false), _) => "DMA_BUF_SUPPORTED=0".into(),
        (None, _) => "dma-buf support unknown (CUDA not available)".into(),
    });
    GpuPath {
        ok: false,
        how: why.join(", "),
    }
}

const HOST_PINNED_ADVICE: &str = "use `kind: host_pinned` (cudaHostAlloc'd host memory the NIC DMAs into; DAQIRI's configuration reference and seed 000's DGX Spark tab recommend it on integrated GPUs such as GB10)";

fn run_memory(ctx: &Context) -> Vec<Verdict> {
    const ID: &str = "app.memory";
    let app = match app(ctx, ID) {
        Ok(a) => a,
        Err(v) => return v,
    };
    if app.regions.is_empty() {
        return vec![Verdict::skip(
            ID,
            app.subject(app.regions_line, "memory_regions"),
            "the configuration defines no memory regions",
        )];
    }
    let est = estimate::hugepages(app);
    let dev = estimate::device_bytes(app);
    let dpdk = app.engine == Engine::Dpdk;
    let mut out = Vec::new();
    for r in &app.regions {
        let subject = app.subject(r.line, &r.path);
        let kind = match &r.kind {
            Some(Field { value: Ok(k), .. }) => *k,
            Some(Field {
                value: Err(b),
                path,
                line,
            }) => {
                out.push(bad_field(ID, app, path, *line, b));
                continue;
            }
            None => {
                out.push(Verdict::skip(
                    ID,
                    subject,
                    "no kind: cannot judge it (see app.config)",
                ));
                continue;
            }
        };
        let Some(bytes) = estimate::region_bytes(app, r) else {
            out.push(Verdict::skip(
                ID,
                subject,
                format!(
                    "`{}`: num_bufs or buf_size unusable (see app.config)",
                    r.name
                ),
            ));
            continue;
        };
        let n = estimate::effective_num_bufs(app, r).unwrap_or(0);
        let adj = estimate::adj_size(app.engine, kind, r.buf_size().unwrap_or(0));
        let bumped = if Some(n) != r.num_bufs() {
            format!(
                " (num_bufs {} is below 1.5 x the {}-descriptor ring: DAQIRI raises it to {n})",
                r.num_bufs().unwrap_or(0),
                estimate::NIC_RING
            )
        } else {
            String::new()
        };
        let sizing = format!(
            "{n} x {adj} B{} = {} MiB{bumped}",
            if adj != r.buf_size().unwrap_or(0) {
                format!(
                    " ({} engine padding of buf_size {})",
                    app.engine.name(),
                    r.buf_size().unwrap_or(0)
                )
            } else {
                String::new()
            },
            mib(bytes)
        );
        let v = match kind {
            MemKind::Huge => {
                let Some(aff) = r.affinity() else {
                    out.push(Verdict::skip(
                        ID,
                        subject,
                        "affinity (the NUMA node) unusable: see app.config",
                    ));
                    continue;
                };
                let Ok(node) = u32::try_from(aff) else {
                    out.push(Verdict::fail(
                        ID,
                        subject,
                        format!("`{}`: affinity {aff} is not a NUMA node", r.name),
                    ));
                    continue;
                };
                let mem = ctx.mem();
                if !mem.nodes.is_empty() && !mem.nodes.iter().any(|x| x.id == node) {
                    let have: Vec<String> = mem.nodes.iter().map(|x| x.id.to_string()).collect();
                    out.push(
                        Verdict::fail(
                            ID,
                            subject,
                            format!(
                                "`{}` asks for NUMA node {node} (affinity), which this host does not have (nodes {})",
                                r.name,
                                have.join(", ")
                            ),
                        )
                        .fix(format!("edit {}:{}: set affinity to the NIC's node", app.file, r.line)),
                    );
                    continue;
                }
                let need = est.per_node.get(&node).copied().unwrap_or(bytes);
                let over = if dpdk { " with 32 MiB per-pool overhead each" } else { "" };
                match node_free(ctx, node) {
                    None => Verdict::skip(
                        ID,
                        subject,
                        format!(
                            "`{}` needs {sizing}; cannot read the free hugepages of node {node}",
                            r.name
                        ),
                    ),
                    Some(free) if need > free => {
                        let missing = need - free;
                        let msg = format!(
                            "`{}` needs {sizing}; the kind: huge regions on node {node} need {} MiB{over}, node {node} has {} MiB of hugepages free: {} MiB missing",
                            r.name,
                            mib(need),
                            free / MIB,
                            mib(missing)
                        );
                        if dpdk {
                            Verdict::fail(ID, subject, msg)
                        } else {
                            Verdict::warn(
                                ID,
                                subject,
                                format!(
                                    "{msg}; the {} engine then falls back to regular pages (slower, not IOVA-contiguous)",
                                    app.engine.name()
                                ),
                            )
                        }
                        .fix(hugepage_fix(ctx, Some(node), missing))
                        .observed(format!("{} MiB free on node {node}", free / MIB))
                        .expected(format!(">= {} MiB", mib(need)))
                    }
                    Some(free) => Verdict::pass(
                        ID,
                        subject,
                        format!(
                            "`{}` needs {sizing}; node {node} has {} MiB of hugepages free for the {} MiB its kind: huge regions need{over}",
                            r.name,
                            free / MIB,
                            mib(need)
                        ),
                    ),
                }
            }
            MemKind::Device => device_region(ctx, app, r, &subject, bytes, &sizing, &dev),
            MemKind::HostPinned => match ctx.gpus() {
                Err(e) => Verdict::skip(
                    ID,
                    subject,
                    format!("host_pinned needs CUDA (cudaHostAlloc); cannot see the GPUs: {e}"),
                ),
                Ok(snap) if snap.gpus.is_empty() => Verdict::fail(
                    ID,
                    subject,
                    format!(
                        "`{}` is host_pinned, which DAQIRI allocates with cudaHostAlloc, but no NVIDIA GPU is visible{}",
                        r.name,
                        snap.unavailable_reason()
                            .map(|x| format!(" ({x})"))
                            .unwrap_or_default()
                    ),
                )
                .fix(format!("edit {}:{}: use `kind: huge` on a host without a GPU", app.file, r.line)),
                // NVML can list GPUs while the CUDA driver cannot be used: cudaHostAlloc
                // would then fail, so CUDA itself must have been seen.
                Ok(snap) if snap.cuda.reason().is_some() => Verdict::skip(
                    ID,
                    subject,
                    format!(
                        "`{}` is host_pinned, which needs the CUDA driver (cudaHostAlloc): {}",
                        r.name,
                        snap.cuda.reason().unwrap_or_default()
                    ),
                ),
                Ok(snap) => {
                    let g = gpu_for(snap, r.affinity());
                    match g {
                        Some(g) if g.integrated() == Some(true) => Verdict::pass(
                            ID,
                            subject,
                            format!(
                                "`{}` is host_pinned ({sizing}): the right kind on the integrated {}",
                                r.name,
                                g.display_name()
                            ),
                        ),
                        Some(g) => Verdict::pass(
                            ID,
                            subject,
                            format!(
                                "`{}` is host_pinned ({sizing}) on the discrete {}: it works; `device` memory avoids the extra PCIe hop on high-rate paths",
                                r.name,
                                g.display_name()
                            ),
                        ),
                        None => Verdict::pass(
                            ID,
                            subject,
                            format!("`{}` is host_pinned ({sizing}); CUDA is present", r.name),
                        ),
                    }
                }
            },
            MemKind::Host => {
                if app.engine == Engine::Socket {
                    Verdict::pass(
                        ID,
                        subject,
                        format!("`{}` is host memory ({sizing}): the kernel socket path copies into it", r.name),
                    )
                } else {
                    Verdict::warn(
                        ID,
                        subject,
                        format!(
                            "`{}` is `kind: host` ({sizing}): regular pages, which DAQIRI's reference marks not recommended for a {} data path",
                            r.name,
                            app.engine.name()
                        ),
                    )
                    .fix(format!("edit {}:{}: use `kind: huge` (CPU) or `device`/`host_pinned` (GPU)", app.file, r.line))
                }
            }
        };
        out.push(v);
    }
    if dpdk {
        let subject = app.subject(app.regions_line, "memory_regions");
        let v = match free_total(ctx) {
            None => Verdict::skip(
                ID,
                subject,
                format!(
                    "DAQIRI's DPDK preflight needs {}; cannot read the hugepage pools",
                    est.breakdown()
                ),
            ),
            Some(free) if est.total > free => {
                let missing = est.total - free;
                Verdict::fail(
                    ID,
                    subject,
                    format!(
                        "DAQIRI's DPDK hugepage preflight needs {}; the host has {} MiB of hugepages free: {} MiB missing (DAQIRI refuses to start)",
                        est.breakdown(),
                        free / MIB,
                        mib(missing)
                    ),
                )
                .observed(format!("{} MiB free", free / MIB))
                .expected(format!(">= {} MiB", mib(est.total)))
                .fix(hugepage_fix(ctx, None, missing))
            }
            Some(free) => Verdict::pass(
                ID,
                subject,
                format!(
                    "DAQIRI's DPDK hugepage preflight needs {}; {} MiB free",
                    est.breakdown(),
                    free / MIB
                ),
            )
            .observed(format!("{} MiB free", free / MIB))
            .expected(format!(">= {} MiB", mib(est.total))),
        };
        out.push(v);
    }
    out
}

fn gpu_for(
    snap: &daqtune_probe::gpu::GpuSnapshot,
    id: Option<i64>,
) -> Option<&daqtune_probe::gpu::GpuFacts> {
    let id = id.unwrap_or(0);
    snap.gpus
        .iter()
        .find(|g| g.cuda.as_ref().and_then(|c| c.ordinal).map(i64::from) == Some(id))
        .or_else(|| usize::try_from(id).ok().and_then(|i| snap.gpus.get(i)))
}

fn device_region(
    ctx: &Context,
    app: &AppConfig,
    r: &crate::appconfig::Region,
    subject: &str,
    _bytes: u64,
    sizing: &str,
    dev: &BTreeMap<i64, u64>,
) -> Verdict {
    const ID: &str = "app.memory";
    let snap = match ctx.gpus() {
        Ok(s) => s,
        Err(e) => {
            return Verdict::skip(ID, subject, format!("cannot see the GPUs: {e}"));
        }
    };
    let Some(gid) = r.affinity() else {
        return Verdict::skip(
            ID,
            subject,
            "affinity (the GPU id) unusable: see app.config",
        );
    };
    let Some(g) = gpu_for(snap, Some(gid)) else {
        let why = snap
            .unavailable_reason()
            .map(|x| format!(" ({x})"))
            .unwrap_or_default();
        return Verdict::fail(
            ID,
            subject,
            format!(
                "`{}` is device memory on GPU {gid}, but this host shows {} GPU(s){why}",
                r.name,
                snap.gpus.len()
            ),
        );
    };
    if g.integrated() == Some(true) {
        return Verdict::fail(
            ID,
            subject,
            format!(
                "`{}` is `kind: device` on the integrated {}: the NIC cannot peer-DMA into its memory (no BAR1, nvidia_peermem does not load, DMA_BUF_SUPPORTED=0), so registering the region fails; {HOST_PINNED_ADVICE}",
                r.name,
                g.display_name()
            ),
        )
        .observed("kind: device")
        .expected("kind: host_pinned")
        .fix(format!(
            "edit {}:{}: set `kind: host_pinned` for memory region `{}`",
            app.file,
            app.line_of(&format!("daqiri.cfg.{}.kind", r.path)),
            r.name
        ));
    }
    let path = gpudirect_path(ctx, g);
    let total = dev.get(&gid).copied().unwrap_or(0);
    let need = estimate::bar1_needed(total);
    let mut fails = Vec::new();
    let mut notes = vec![format!(
        "`{}` needs {sizing} on {}",
        r.name,
        g.display_name()
    )];
    if path.ok {
        notes.push(format!("GPUDirect via {}", path.how));
    } else {
        fails.push(format!(
            "no GPUDirect path to {} ({}): the NIC cannot DMA into `device` memory",
            g.display_name(),
            path.how
        ));
    }
    match g.bar1 {
        Some(b) if b.total_bytes < need => fails.push(format!(
            "the device regions on GPU {gid} total {} MiB, which needs BAR1 >= {} MiB (registrations stay under 80 %), and BAR1 is {} MiB",
            mib(total),
            mib(need),
            b.total_mib()
        )),
        Some(b) => notes.push(format!(
            "BAR1 {} MiB >= {} MiB for the {} MiB of device regions on GPU {gid}",
            b.total_mib(),
            mib(need),
            mib(total)
        )),
        None => notes.push("BAR1 size unknown".into()),
    }
    if fails.is_empty() {
        Verdict::pass(ID, subject, notes.join("; "))
    } else {
        let bar1_fix = "BAR1 is firmware's: enable Resizable BAR (see `daqtune explain gpu.bar1`) or lower num_bufs/buf_size of the device regions";
        let fix = if path.ok {
            bar1_fix.to_string()
        } else {
            format!("sudo modprobe nvidia_peermem (see `daqtune explain gpu.peermem`), or {HOST_PINNED_ADVICE}")
        };
        Verdict::fail(
            ID,
            subject,
            format!("{}; {}", notes.join("; "), fails.join("; ")),
        )
        .fix(fix)
    }
}

// ---------------------------------------------------------------------------------------------
// app.interfaces

fn run_interfaces(ctx: &Context) -> Vec<Verdict> {
    const ID: &str = "app.interfaces";
    let app = match app(ctx, ID) {
        Ok(a) => a,
        Err(v) => return v,
    };
    if app.interfaces.is_empty() {
        return vec![Verdict::skip(
            ID,
            app.file.clone(),
            "the configuration defines no interfaces",
        )];
    }
    let facts = ctx.pci();
    let addrs = ctx.local_addrs();
    let mut out = Vec::new();
    for i in &app.interfaces {
        match i.transport {
            Transport::Raw => out.push(raw_interface(ctx, app, i, facts)),
            Transport::Unknown => out.push(Verdict::skip(
                ID,
                app.subject(i.line, &i.path),
                format!(
                    "`{}`: no tcp://, udp:// or roce:// endpoint tells its transport",
                    i.name
                ),
            )),
            _ => out.extend(socket_interface(app, i, facts.ok(), &addrs)),
        }
    }
    out
}

fn raw_interface(
    _ctx: &Context,
    app: &AppConfig,
    i: &Interface,
    facts: Result<&PciFacts, &str>,
) -> Verdict {
    const ID: &str = "app.interfaces";
    let Some(f) = &i.address else {
        if app.loopback_sw {
            return Verdict::na(
                ID,
                app.subject(i.line, &i.path),
                "software loopback (loopback: sw): no NIC is used",
            );
        }
        return Verdict::skip(
            ID,
            app.subject(i.line, &i.path),
            "no address (see app.config)",
        );
    };
    let subject = app.subject(f.line, &f.path);
    let addr = match &f.value {
        Ok(a) => a,
        Err(b) => return bad_field(ID, app, &f.path, f.line, b),
    };
    if app.loopback_sw && addr == "loopback" {
        return Verdict::na(
            ID,
            subject,
            "software loopback (loopback: sw): no NIC is used",
        );
    }
    let facts = match facts {
        Ok(x) => x,
        Err(e) => return Verdict::skip(ID, subject, e.to_string()),
    };
    let connectx: Vec<String> = facts
        .nics
        .iter()
        .filter(|n| n.connectx)
        .map(|n| n.label())
        .collect();
    let here = if connectx.is_empty() {
        "this host has no ConnectX function".to_string()
    } else {
        format!("ConnectX functions here: {}", connectx.join(", "))
    };
    match addr.parse::<PciAddr>() {
        Ok(pa) => {
            if let Some(n) = facts.nics.iter().find(|n| n.addr == pa) {
                if !n.connectx {
                    return Verdict::fail(
                        ID,
                        subject,
                        format!(
                            "{addr} is {} ({:04x}:{:04x}), not a ConnectX: DAQIRI's raw engines drive mlx5 NICs; {here}",
                            n.model, n.vendor, n.device
                        ),
                    );
                }
                let driver = n.driver.as_deref().unwrap_or("no driver");
                if driver != "mlx5_core" {
                    return Verdict::fail(
                        ID,
                        subject,
                        format!(
                            "{} is bound to {driver}: DPDK's mlx5 driver is bifurcated and needs the function on mlx5_core (not vfio-pci)",
                            n.label()
                        ),
                    )
                    .fix(format!(
                        "echo {addr} | sudo tee {}; echo {addr} | sudo tee /sys/bus/pci/drivers/mlx5_core/bind",
                        daqtune_probe::text::shell_quote(&format!("/sys/bus/pci/drivers/{driver}/unbind"))
                    ));
                }
                let vf = if n.is_vf { " (a virtual function)" } else { "" };
                return Verdict::pass(
                    ID,
                    subject,
                    format!("{addr} is {}{vf} on mlx5_core", n.label()),
                )
                .observed(n.label());
            }
            let what = facts
                .tree
                .get(pa)
                .map(|d| format!("{addr} is {} ({}), not a network function", d.display_name(), d.driver.as_deref().unwrap_or("no driver")))
                .unwrap_or_else(|| format!("no PCI function {addr} on this host"));
            Verdict::fail(ID, subject, format!("{what}; {here}"))
                .fix(format!("edit {}:{}: set the address of the ConnectX port to use", app.file, f.line))
        }
        Err(_) => match nic_by_netdev(facts, addr) {
            Some(n) if app.engine == Engine::Dpdk => Verdict::fail(
                ID,
                subject,
                format!(
                    "`{addr}` is {}, but DAQIRI's DPDK engine takes only a PCI address here",
                    n.label()
                ),
            )
            .fix(format!("edit {}:{}: address: {}", app.file, f.line, n.addr)),
            Some(n) => Verdict::pass(ID, subject, format!("`{addr}` is {}", n.label())),
            None => Verdict::fail(
                ID,
                subject,
                format!("`{addr}` is neither a PCI address nor a ConnectX netdev or RDMA device here; {here}"),
            ),
        },
    }
}

fn socket_interface(
    app: &AppConfig,
    i: &Interface,
    facts: Option<&PciFacts>,
    addrs: &Result<&LocalAddrs, &str>,
) -> Vec<Verdict> {
    const ID: &str = "app.interfaces";
    let mut out = Vec::new();
    let bads = [
        i.address
            .as_ref()
            .and_then(|f| f.value.as_ref().err().map(|b| (&f.path, f.line, b))),
        i.local_addr
            .as_ref()
            .and_then(|f| f.value.as_ref().err().map(|b| (&f.path, f.line, b))),
    ];
    for (path, line, b) in bads.into_iter().flatten() {
        out.push(bad_field(ID, app, path, line, b));
    }
    let hosts = socket_hosts(i);
    if hosts.is_empty() && out.is_empty() {
        out.push(Verdict::skip(
            ID,
            app.subject(i.line, &i.path),
            format!("`{}` names no local address", i.name),
        ));
    }
    for (path, line, host) in hosts {
        let subject = app.subject(line, &path);
        let ip = match host.parse::<IpAddr>() {
            Ok(ip) => ip,
            Err(_) => {
                out.push(Verdict::fail(
                    ID,
                    subject,
                    format!("`{host}` is not an IP address: DAQIRI parses IPv4 literals (inet_pton), never names"),
                ));
                continue;
            }
        };
        if ip.is_unspecified() {
            out.push(Verdict::pass(
                ID,
                subject,
                format!("`{host}` binds every local address"),
            ));
            continue;
        }
        let a = match addrs {
            Ok(a) => a,
            Err(e) => {
                out.push(Verdict::skip(ID, subject, e.to_string()));
                continue;
            }
        };
        let v4 = if ip.is_ipv6() {
            " (DAQIRI's socket engines take IPv4 addresses only)"
        } else {
            ""
        };
        if !a.is_local(ip) {
            out.push(
                Verdict::fail(
                    ID,
                    subject,
                    format!(
                        "{host} is not configured on any netdev in this network namespace{v4}: {} cannot bind it",
                        i.name
                    ),
                )
                .fix(format!(
                    "configure {host} on the data-path port (netplan / nmcli / `ip addr add {host}/24 dev IFACE`), or run the application in the namespace that holds it"
                )),
            );
            continue;
        }
        let nd = a.netdev_of(ip);
        let nic = nd
            .as_deref()
            .and_then(|n| facts.and_then(|f| nic_by_netdev(f, n)));
        let on = nd.clone().unwrap_or_else(|| "a local netdev".into());
        let v = if i.transport == Transport::Roce {
            match nic {
                Some(n) if !n.rdma.is_empty() => Verdict::pass(
                    ID,
                    subject,
                    format!(
                        "{host} is on {on}, RDMA device {} ({})",
                        n.rdma_names().join(", "),
                        n.label()
                    ),
                ),
                Some(n) => Verdict::fail(
                    ID,
                    subject,
                    format!("{host} is on {on} ({}), which has no RDMA device: load mlx5_ib (see nic.driver)", n.label()),
                )
                .fix("sudo modprobe mlx5_ib"),
                None => Verdict::fail(
                    ID,
                    subject,
                    format!("{host} is on {on}, which is not a ConnectX port with an RDMA device: RoCE needs one (roce:// endpoints use ibverbs)"),
                ),
            }
        } else if ip.is_ipv6() {
            Verdict::warn(ID, subject, format!("{host} is on {on}{v4}"))
        } else {
            Verdict::pass(
                ID,
                subject,
                format!(
                    "{host} is on {on}{}",
                    nic.map(|n| format!(" ({})", n.label())).unwrap_or_default()
                ),
            )
        };
        out.push(v);
    }
    out
}

// ---------------------------------------------------------------------------------------------
// app.sizes

fn segments<'a>(app: &'a AppConfig, q: &Queue) -> Vec<(&'a str, u64)> {
    q.regions
        .iter()
        .filter_map(|n| app.region(n))
        .filter_map(|r| r.buf_size().map(|b| (r.name.as_str(), b)))
        .collect()
}

fn frame_limits(
    id: &str,
    subject: &str,
    l2: u64,
    what: &str,
    mtu: Option<(u32, String)>,
    out: &mut Vec<Verdict>,
) {
    if l2.saturating_add(estimate::ETH_FCS) > estimate::JUMBO_FRAME {
        out.push(Verdict::fail(
            id,
            subject.to_string(),
            format!(
                "{what}: a {l2}-byte frame (+4 B FCS) exceeds DAQIRI's {}-byte frame limit (JUMBOFRAME_SIZE)",
                estimate::JUMBO_FRAME
            ),
        ));
    }
    if let Some((mtu, nd)) = mtu {
        let l3 = l2.saturating_sub(estimate::ETH_HDR);
        if l3 > u64::from(mtu) {
            out.push(
                Verdict::warn(
                    id,
                    subject.to_string(),
                    format!(
                        "{what}: {l3}-byte IP packets ({l2}-byte frames) exceed {nd}'s MTU {mtu}; DAQIRI's DPDK port setup raises the port MTU to its buffer size when it starts, but the kernel side, the peer and any switch must carry these frames too"
                    ),
                )
                .observed(format!("MTU {mtu}"))
                .expected(format!(">= {l3}"))
                .fix(format!("set the data-path MTU (profile nic.mtu >= {l3}; `sudo daqtune apply --only nic.mtu`)")),
            );
        }
    }
}

fn run_sizes(ctx: &Context) -> Vec<Verdict> {
    const ID: &str = "app.sizes";
    let app = match app(ctx, ID) {
        Ok(a) => a,
        Err(v) => return v,
    };
    let facts = ctx.pci().ok();
    let addrs = ctx.local_addrs().ok();
    let mtu_of = |i: &Interface| -> Option<(u32, String)> {
        let r = resolve(i, facts, addrs);
        let m = netdev_mtu(ctx, &r)?;
        Some((m, r.netdev.unwrap_or_default()))
    };
    let mut out = Vec::new();

    // Raw TX generators: header + payload against the TX queue's segments and the frame limits.
    for w in &app.workers {
        let (Some(h), Some(p)) = (&w.header_size, &w.payload_size) else {
            continue;
        };
        let (hv, pv) = match (&h.value, &p.value) {
            (Ok(a), Ok(b)) => (*a, *b),
            (Err(b), _) => {
                out.push(bad_field(ID, app, &h.path, h.line, b));
                continue;
            }
            (_, Err(b)) => {
                out.push(bad_field(ID, app, &p.path, p.line, b));
                continue;
            }
        };
        let subject = app.subject(p.line, &p.path);
        let Some(itf) = app.worker_interface(w) else {
            out.push(Verdict::skip(
                ID,
                subject,
                format!(
                    "{}: interface `{}` is not in the configuration",
                    w.path,
                    w.interface_name.as_deref().unwrap_or("?")
                ),
            ));
            continue;
        };
        let q = itf
            .queues(Dir::Tx)
            .find(|q| w.queue_id.is_none_or(|id| q.id == Some(id)))
            .or_else(|| itf.queues(Dir::Tx).next());
        let Some(q) = q else {
            out.push(Verdict::skip(
                ID,
                subject,
                format!("interface `{}` has no TX queue", itf.name),
            ));
            continue;
        };
        let segs = segments(app, q);
        let l2 = hv.saturating_add(pv);
        let v = match segs.as_slice() {
            [] => Verdict::skip(ID, subject.clone(), format!("{} names no usable memory region", q.path)),
            [(n, b)] if l2 > *b => Verdict::fail(
                ID,
                subject.clone(),
                format!("header_size {hv} + payload_size {pv} = {l2} B does not fit buf_size {b} of `{n}` ({})", q.path),
            )
            .fix(format!("raise buf_size of `{n}` to >= {l2}, or use header-data split (two regions)")),
            [(n, b)] => Verdict::pass(
                ID,
                subject.clone(),
                format!("header_size {hv} + payload_size {pv} = {l2} B fits buf_size {b} of `{n}`"),
            ),
            [(hn, hb), (pn, pb), ..] => {
                let mut bad = Vec::new();
                if hv > *hb {
                    bad.push(format!("header_size {hv} > buf_size {hb} of header segment `{hn}`"));
                }
                if pv > *pb {
                    bad.push(format!("payload_size {pv} > buf_size {pb} of payload segment `{pn}`"));
                }
                if bad.is_empty() {
                    Verdict::pass(
                        ID,
                        subject.clone(),
                        format!("header-data split: header {hv} B fits `{hn}` ({hb} B), payload {pv} B fits `{pn}` ({pb} B)"),
                    )
                } else {
                    Verdict::fail(ID, subject.clone(), format!("header-data split: {}", bad.join("; ")))
                }
            }
        };
        out.push(v.observed(format!("{l2} B frames")));
        frame_limits(
            ID,
            &subject,
            l2,
            &format!("{} frames", w.path),
            mtu_of(itf),
            &mut out,
        );
    }

    // RX flows that state their IPv4 length.
    for itf in &app.interfaces {
        for f in &itf.flows {
            let len = match &f.ipv4_len.value {
                Ok(l) => *l,
                Err(b) => {
                    out.push(bad_field(ID, app, &f.ipv4_len.path, f.ipv4_len.line, b));
                    continue;
                }
            };
            let subject = app.subject(f.ipv4_len.line, &f.ipv4_len.path);
            let l2 = len.saturating_add(estimate::ETH_HDR);
            for q in itf
                .queues(Dir::Rx)
                .filter(|q| q.id.is_some_and(|id| f.queues.contains(&id)))
            {
                let segs = segments(app, q);
                let cap: u64 = segs.iter().fold(0u64, |a, (_, b)| a.saturating_add(*b));
                if segs.is_empty() {
                    continue;
                }
                let names: Vec<&str> = segs.iter().map(|(n, _)| *n).collect();
                out.push(if l2 > cap {
                    Verdict::fail(
                        ID,
                        subject.clone(),
                        format!(
                            "ipv4_len {len} means {l2}-byte frames; {} holds {cap} B ({}): DAQIRI must scatter or drop them",
                            q.path,
                            names.join(" + ")
                        ),
                    )
                } else {
                    Verdict::pass(
                        ID,
                        subject.clone(),
                        format!("{l2}-byte frames fit {} ({cap} B in {})", q.path, names.join(" + ")),
                    )
                });
            }
            frame_limits(
                ID,
                &subject,
                l2,
                &format!("flow {}", f.path),
                mtu_of(itf),
                &mut out,
            );
        }
    }

    // Socket and RDMA messages. (`socket_config.max_payload_size` is a receive-buffer cap,
    // not a datagram size: DAQIRI's own UDP sweep sets 65535 for 65507-byte datagrams.)
    for w in &app.workers {
        let Some(ms) = &w.message_size else { continue };
        let m = match &ms.value {
            Ok(m) => *m,
            Err(b) => {
                out.push(bad_field(ID, app, &ms.path, ms.line, b));
                continue;
            }
        };
        let subject = app.subject(ms.line, &ms.path);
        let itf = app.worker_interface(w);
        out.extend(message_checks(
            app,
            w,
            itf,
            m,
            &subject,
            itf.and_then(&mtu_of),
        ));
    }
    if out.is_empty() {
        out.push(Verdict::na(
            ID,
            app.file.clone(),
            "the configuration states no packet or message sizes (no header_size/payload_size, ipv4_len or message_size)",
        ));
    }
    out
}

fn message_checks(
    app: &AppConfig,
    w: &Worker,
    itf: Option<&Interface>,
    m: u64,
    subject: &str,
    mtu: Option<(u32, String)>,
) -> Vec<Verdict> {
    const ID: &str = "app.sizes";
    let mut out = Vec::new();
    let transport = itf.map(|i| i.transport).unwrap_or(Transport::Unknown);
    if transport == Transport::Udp {
        if m > estimate::MAX_UDP_PAYLOAD {
            out.push(Verdict::fail(
                ID,
                subject.to_string(),
                format!("message_size {m} exceeds the largest UDP payload ({} B): DAQIRI's socket engine rejects it", estimate::MAX_UDP_PAYLOAD),
            ));
        } else if let Some((mtu, nd)) = mtu {
            if m + 28 > u64::from(mtu) {
                out.push(Verdict::warn(
                    ID,
                    subject.to_string(),
                    format!("{m}-byte UDP messages make {}-byte datagrams, above {nd}'s MTU {mtu}: each is fragmented (one lost fragment loses the message)", m + 28),
                ));
            }
        }
    }
    // The buffers the messages land in: the interface's queue regions, else (RDMA benchmarks
    // name regions in code) every region of the configuration.
    let mut names: Vec<&str> = itf
        .map(|i| {
            i.queues
                .iter()
                .flat_map(|q| q.regions.iter().map(String::as_str))
                .collect()
        })
        .unwrap_or_default();
    if names.is_empty() {
        names = app.regions.iter().map(|r| r.name.as_str()).collect();
    }
    let best = names
        .iter()
        .filter_map(|n| app.region(n))
        .filter_map(|r| r.buf_size().map(|b| (r.name.as_str(), b)))
        .max_by_key(|(_, b)| *b);
    match best {
        Some((n, b)) if m > b => out.push(
            Verdict::fail(
                ID,
                subject.to_string(),
                format!("message_size {m} does not fit buf_size {b} of `{n}` (the largest region {} can use)", w.path),
            )
            .fix(format!("raise buf_size of `{n}` to >= {m}, or send smaller messages")),
        ),
        Some((n, b)) => out.push(Verdict::pass(
            ID,
            subject.to_string(),
            format!("message_size {m} fits buf_size {b} of `{n}`"),
        )),
        None => out.push(Verdict::skip(ID, subject.to_string(), format!("{}: no region with a usable buf_size", w.path))),
    }
    out
}
