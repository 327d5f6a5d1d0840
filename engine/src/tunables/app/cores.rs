//! `app.cores`: the configuration's master, queue and worker cores on this host.

use super::*;

pub const CORES: Tunable = Tunable {
    id: ID,
    area: Area::Cpu,
    title:
        "The configuration's master, queue and worker cores: online, isolated, unshared, NIC-local",
    aliases: &[],
    doc: include_str!("../../../../docs/checks/app.cores.md"),
    needs_root: false,
    profile_keys: &[],
    check: run_cores,
    planner: None,
};

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

const ID: &str = "app.cores";

fn run_cores(ctx: &Context) -> Vec<Verdict> {
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
    let host = HostCores::new(ctx, app, &uses);
    uses.iter().map(|u| host.verdict(u)).collect()
}

/// What every core's verdict is judged against: the host's CPUs, isolation, NICs and NUMA
/// nodes, read once, and the configuration's pinned uses by CPU.
struct HostCores<'a> {
    app: &'a AppConfig,
    uses: &'a [CoreUse<'a>],
    cpus: Result<&'a daqtune_probe::cpu::CpuFacts, &'a str>,
    iso: Option<CpuSet>,
    cmdline_ok: bool,
    facts: Option<&'a PciFacts>,
    addrs: Option<&'a LocalAddrs>,
    nodes: &'a [daqtune_probe::mem::NumaNode],
    /// What to isolate: the configuration's data cores that exist here, plus what already is.
    iso_union: CpuSet,
    /// Pinned uses by CPU, so that sharing is found per CPU rather than across all pairs.
    by_core: std::collections::HashMap<i64, Vec<usize>>,
}

/// What one core's checks found, worded; the verdict is the worst of them.
#[derive(Default)]
struct Findings {
    fails: Vec<String>,
    warns: Vec<String>,
    goods: Vec<String>,
    fix: Option<String>,
}

impl<'a> HostCores<'a> {
    fn new(ctx: &'a Context, app: &'a AppConfig, uses: &'a [CoreUse<'a>]) -> Self {
        let cpus = ctx.cpus();
        let iso = ctx.cmdline_isolated();
        let wanted = data_cores(app);
        let wanted = match cpus {
            Ok(c) => wanted.intersection(&c.online),
            Err(_) => wanted,
        };
        let iso_union = iso.clone().unwrap_or_default().union(&wanted);
        let mut by_core: std::collections::HashMap<i64, Vec<usize>> = Default::default();
        for (i, o) in uses.iter().enumerate() {
            if let (Ok(c), false) = (o.core, unpinned(app, o.role)) {
                by_core.entry(*c).or_default().push(i);
            }
        }
        HostCores {
            app,
            uses,
            cpus,
            iso,
            cmdline_ok: ctx.cmdline().is_ok(),
            facts: ctx.pci().ok(),
            addrs: ctx.local_addrs().ok(),
            nodes: &ctx.mem().nodes,
            iso_union,
            by_core,
        }
    }

    /// One use's verdict: its value read (a skip, n/a or fail when it names no CPU this
    /// host can run the thread on), then online, isolated, unshared and NIC-local.
    fn verdict(&self, u: &CoreUse) -> Verdict {
        let app = self.app;
        let subject = app.subject(u.line, u.path);
        let core = match u.core {
            Ok(c) => *c,
            Err(b) => return bad_field(ID, app, u.path, u.line, b),
        };
        if unpinned(app, u.role) {
            return Verdict::na(
                ID,
                subject,
                "DAQIRI's TCP/UDP socket engine does not pin its threads to cpu_core (the application's workers are the pinned threads)",
            )
            .observed(format!("cpu {core}"));
        }
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
            return v.observed(core);
        }
        let Ok(cpu) = u32::try_from(core) else {
            return Verdict::fail(
                ID,
                subject,
                format!("CPU {core} does not exist on this host"),
            )
            .observed(core);
        };
        let data = u.role != Role::Master;
        let mut f = Findings::default();
        self.online(cpu, &mut f);
        if data && f.fails.is_empty() {
            self.isolated(u, cpu, &mut f);
        }
        self.sharing(u, core, cpu, &mut f);
        if data {
            self.locality(u, cpu, &mut f);
        }
        let v = if !f.fails.is_empty() {
            f.fails.extend(f.warns);
            Verdict::fail(ID, subject, f.fails.join("; ")).maybe_fix(f.fix)
        } else if !f.warns.is_empty() {
            Verdict::warn(ID, subject, f.warns.join("; "))
        } else {
            Verdict::pass(
                ID,
                subject,
                format!(
                    "CPU {cpu} for {}: {}",
                    role_name(app, u),
                    f.goods.join(", ")
                ),
            )
        };
        v.observed(format!("cpu {cpu}")).expected(if data {
            "online, isolated, not shared, on the NIC's node"
        } else {
            "online, not shared with a queue or worker"
        })
    }

    /// The CPU exists and is online.
    fn online(&self, cpu: u32, f: &mut Findings) {
        match self.cpus {
            Ok(c) if c.online.contains(cpu) => f.goods.push("online".into()),
            Ok(c) => {
                let exists = c
                    .present
                    .as_ref()
                    .or(c.possible.as_ref())
                    .is_some_and(|p| p.contains(cpu));
                if exists {
                    f.fails
                        .push(format!("CPU {cpu} is offline (online: {})", c.online));
                    f.fix = Some(format!(
                        "echo 1 | sudo tee /sys/devices/system/cpu/cpu{cpu}/online"
                    ));
                } else {
                    f.fails.push(format!(
                        "CPU {cpu} does not exist on this host (CPUs {})",
                        c.online
                    ));
                }
            }
            Err(e) => f.warns.push(format!("cannot read the CPU list ({e})")),
        }
    }

    /// A data core is isolated (`isolcpus=`); the fix names every data core to isolate.
    fn isolated(&self, u: &CoreUse, cpu: u32, f: &mut Findings) {
        match &self.iso {
            Some(set) if set.contains(cpu) => f.goods.push("isolated".into()),
            Some(set) => {
                f.fails.push(format!(
                    "CPU {cpu} is not isolated (isolcpus={set}): the scheduler and unbound kernel work interrupt {}",
                    role_name(self.app, u)
                ));
            }
            None if self.cmdline_ok => f.fails.push(format!(
                "CPU {cpu} is not isolated: the kernel command line has no isolcpus="
            )),
            None => f
                .warns
                .push("cannot read /proc/cmdline to see whether it is isolated".into()),
        }
        if f.fails.iter().any(|x| x.contains("not isolated")) {
            let iso_union = &self.iso_union;
            f.fix = Some(format!(
                "isolate the configuration's data cores: put `isolcpus={iso_union} nohz_full={iso_union} rcu_nocbs={iso_union} rcu_nocb_poll` on the kernel command line (a profile with cpu.isolated: \"{iso_union}\" and `sudo daqtune apply`), then reboot"
            ));
        }
    }

    /// Sharing: only the uses of this CPU are visited, and a few sharers are named, the rest
    /// counted (thousands of queues on one core made every verdict list all others).
    fn sharing(&self, u: &CoreUse, core: i64, cpu: u32, f: &mut Findings) {
        let app = self.app;
        let (mut hidden_fails, mut hidden_warns) = (0usize, 0usize);
        let (mut named_fails, mut named_warns) = (0usize, 0usize);
        for &oi in self.by_core.get(&core).map(Vec::as_slice).unwrap_or(&[]) {
            let o = &self.uses[oi];
            if std::ptr::eq(o, u) {
                continue;
            }
            let Some((fail, why)) = conflict(app, u.role, o.role) else {
                continue;
            };
            let (list, named, hidden) = if fail {
                (&mut f.fails, &mut named_fails, &mut hidden_fails)
            } else {
                (&mut f.warns, &mut named_warns, &mut hidden_warns)
            };
            if *named >= SHARERS_NAMED {
                *hidden += 1;
                continue;
            }
            *named += 1;
            let other = format!("{} ({}:{})", role_name(app, o), app.file, o.line);
            list.push(format!("shares CPU {cpu} with {other}: {why}"));
        }
        for (n, list) in [(hidden_fails, &mut f.fails), (hidden_warns, &mut f.warns)] {
            if n > 0 {
                list.push(format!(
                    "shares CPU {cpu} with {n} more thread(s) of the configuration"
                ));
            }
        }
    }

    /// NUMA locality of the data path: the core is on the node of its interface's NIC.
    fn locality(&self, u: &CoreUse, cpu: u32, f: &mut Findings) {
        let multi_node = self.nodes.len() > 1;
        let iface = match u.role {
            Role::Queue { iface } => Some(iface),
            Role::Worker { iface } => iface,
            Role::Master => None,
        };
        let Some(n) =
            iface.and_then(|i| resolve(&self.app.interfaces[i], self.facts, self.addrs).nic)
        else {
            return;
        };
        match n.numa_node.and_then(|x| u32::try_from(x).ok()) {
            Some(node) if multi_node => match self.nodes.iter().find(|x| x.id == node) {
                Some(nd) if nd.cpus.contains(cpu) => {
                    f.goods.push(format!("on node {node} with {}", n.label()))
                }
                Some(nd) => f.warns.push(format!(
                    "CPU {cpu} is not on NUMA node {node} of {} (node {node} has CPUs {}): every packet crosses the socket interconnect",
                    n.label(),
                    nd.cpus
                )),
                None => {}
            },
            Some(_) => f.goods.push(format!("same node as {}", n.label())),
            None if multi_node => f.warns.push(format!(
                "the firmware reports no NUMA node for {}: locality cannot be judged",
                n.label()
            )),
            None => {}
        }
    }
}

/// Whether two threads pinned to one CPU conflict: `Some((true, why))` a failure, `Some((false,
/// why))` a warning, `None` when they may share it (the master with itself, two queues of one
/// socket interface).
fn conflict(app: &AppConfig, a: Role, b: Role) -> Option<(bool, &'static str)> {
    Some(match (a, b) {
        (Role::Master, Role::Master) => return None,
        (Role::Master, _) | (_, Role::Master) => (
            true,
            "DAQIRI's master core must differ from the cores assigned to queues",
        ),
        (Role::Queue { iface: a }, Role::Queue { iface: b }) => {
            let socket = app.interfaces[a].transport != Transport::Raw;
            if a == b && socket {
                return None;
            }
            (false, "one thread then polls both queues in turn")
        }
        _ => (
            true,
            "two busy-polling threads on one core halve each other's rate",
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{failures, judge};
    use super::*;

    #[test]
    fn a_worker_core_the_host_lacks_fails() {
        let before = failures(&judge(run_cores, &|t| t.to_string()));
        assert!(!before.iter().any(|f| f.contains("999")), "{before:?}");
        let after = failures(&judge(run_cores, &|t| {
            t.replace("cpu_core: 18", "cpu_core: 999")
        }));
        assert!(after.iter().any(|f| f.contains("999")), "{after:?}");
    }

    #[test]
    fn data_cores_are_the_queue_and_worker_cores() {
        let base = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let text = std::fs::read_to_string(base.join("tests/configs/socket_udp_spark.yaml"))
            .expect("config");
        let app = AppConfig::parse("socket_udp_spark.yaml", &text).expect("parse");
        let cores = data_cores(&app);
        let list: Vec<u32> = cores.iter().collect();
        for c in [16, 17] {
            assert!(cores.contains(c), "{list:?}");
        }
        assert!(
            !cores.contains(2),
            "the master core is not a data core: {list:?}"
        );
    }
}
