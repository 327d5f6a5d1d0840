//! The boot configuration: which boot loader configuration daqtune writes (a grub drop-in or an
//! extlinux entry), the kernel arguments the profile implies on this host, and what a written
//! configuration still waits for (the next boot). Shared by `kernel.cmdline`, `hugepages`,
//! `cpu.governor` and `pcie.acs`, whose settings persist through the kernel arguments.

use super::Context;
use crate::model::facts::Facts;
use crate::model::profile::{CoreSpec, LoadedProfile};
use daqtune_units::extlinux;
use daqtune_units::grub::{self, HugepageArgs, IsolationArgs, KernelArgSpec};

/// The data cores as a CPU list: the profile's list, or its rule resolved on this host the
/// way the checks resolve it (so apply and check agree on the cores).
pub fn data_core_list(
    facts: &Facts,
    lp: &LoadedProfile,
) -> Result<Option<String>, crate::model::cores::CoresError> {
    match &lp.profile.cpu.isolated {
        None => Ok(None),
        Some(CoreSpec::List(s)) => Ok(Some(s.clone())),
        Some(CoreSpec::Rule(_)) => Context::with_facts(facts, lp)
            .data_cores()
            .map(|o| o.filter(|s| !s.is_empty()).map(|s| s.to_string())),
    }
}

/// The isolation arguments the profile implies on this host (seed 000 Step 5 as NVIDIA/daqiri
/// c7ddd12 corrected it: `isolcpus=8-11 irqaffinity=0-7 nohz_full=8-11 rcu_nocbs=8-11
/// rcu_nocb_poll`): the one source of what
/// `kernel.cmdline` expects and of what its plan writes, so `pending_args` finds the written
/// words. `None` when the profile isolates no cores.
///
/// The data cores as the checks resolve them, in the kernel's canonical spelling (`9,10,11`
/// in a profile is written `9-11`, as the check compares it). `irqaffinity=` is the profile's
/// list, else every online CPU outside the data cores; left out when that is empty, or the
/// online CPUs cannot be read: the kernel parses an empty `irqaffinity=` as the boot CPU alone
/// (`irq_affinity_setup` always adds it), which no profile means.
pub fn isolation(ctx: &Context) -> Result<Option<IsolationArgs>, crate::model::cores::CoresError> {
    let Some(iso) = ctx.data_cores()?.filter(|s| !s.is_empty()) else {
        return Ok(None);
    };
    // A bound: every node keeps a housekeeping CPU (nohz_full and rcu_nocbs need one, and
    // the node's kernel threads and interrupts run there).
    if let Ok(cpus) = ctx.cpus() {
        let nodes: Vec<(String, &daqtune_probe::cpulist::CpuSet)> = ctx
            .mem()
            .nodes
            .iter()
            .map(|n| (format!("node{}", n.id), &n.cpus))
            .collect();
        let whole = [("the host".to_string(), &cpus.online)];
        let groups = if nodes.is_empty() {
            &whole[..]
        } else {
            &nodes[..]
        };
        for (node, set) in groups {
            let online = set.intersection(&cpus.online);
            if !online.is_empty() && online.difference(&iso).is_empty() {
                return Err(crate::model::cores::CoresError::NoHousekeeping {
                    isolated: iso.to_string(),
                    node: node.clone(),
                    cpus: online.to_string(),
                });
            }
        }
    }
    let cpu = &ctx.profile.profile.cpu;
    let irq = match &cpu.irqaffinity {
        Some(s) => Some(s.clone()),
        None => ctx
            .cpus()
            .ok()
            .map(|c| c.online.difference(&iso).to_string()),
    };
    Ok(Some(IsolationArgs {
        isolated: iso.to_string(),
        irqaffinity: irq.filter(|s| !s.trim().is_empty()),
        nohz_full: cpu.nohz_full,
        rcu_nocbs: cpu.rcu_nocbs,
        rcu_nocb_poll: cpu.rcu_nocb_poll,
    }))
}

/// The kernel arguments the profile implies on this host.
pub fn kernel_arg_spec(
    facts: &Facts,
    lp: &LoadedProfile,
) -> Result<(KernelArgSpec, Vec<String>), String> {
    let p = &lp.profile;
    let mut notes = Vec::new();
    let mut spec = KernelArgSpec::default();
    if !lp.profile.not_applicable.contains_key("hugepages") {
        // A `hugepagesz=` of a size the kernel does not offer is ignored at boot (with a line
        // in dmesg): never written. The `hugepages` check says which sizes there are.
        let (offered, missing) = offered_pools(facts.mem(), lp);
        for pool in missing {
            notes.push(format!(
                "hugepagesz={} left out: {}",
                pool.size,
                facts.mem().size_not_offered(&pool.size)
            ));
        }
        let (offered, refused) = boot_bounded(facts.mem(), offered);
        notes.extend(refused);
        spec.hugepages = offered
            .into_iter()
            .enumerate()
            .map(|(i, pool)| HugepageArgs {
                default_size: i == 0 && p.hugepages.default_size,
                size: pool.size,
                count: pool.count,
            })
            .collect();
    }
    spec.isolation = match isolation(&Context::with_facts(facts, lp)) {
        Ok(i) => i,
        Err(e) => {
            notes.push(format!("isolation arguments left out: {e}"));
            None
        }
    };
    // cpufreq.default_governor= exists from 5.9; older kernels get a unit instead.
    let kv = facts.kernel_version();
    if p.cpu.governor == "performance" && kv.is_some_and(|v| (v.0, v.1) >= (5, 9)) {
        spec.governor_performance = true;
    }
    Ok((spec, notes))
}

/// The profile's pools split into those whose page size this kernel offers and those it
/// does not (all offered when the pools cannot be read). Only the first get kernel arguments,
/// runtime reservations and mount units.
pub fn offered_pools(
    mem: &daqtune_probe::mem::MemFacts,
    lp: &LoadedProfile,
) -> (
    Vec<crate::model::profile::HugepagePool>,
    Vec<crate::model::profile::HugepagePool>,
) {
    lp.profile
        .hugepages
        .pools()
        .into_iter()
        .partition(|p| daqtune_probe::mem::parse_size_kb(&p.size).is_none_or(|kb| mem.offers(kb)))
}

/// What a boot-time reservation leaves every NUMA node at least: 512 MiB, or an eighth of the
/// node's memory where that is more (docs/checks/hugepages.md says why).
pub const BOOT_KEEP_MIN_KB: u64 = 512 * 1024;

/// The kB a boot reservation must leave a node of `total_kb`.
pub fn boot_keep_kb(total_kb: u64) -> u64 {
    (total_kb / 8).max(BOOT_KEEP_MIN_KB)
}

/// The pools whose boot reservation (`hugepages=N`, which the kernel spreads evenly over the
/// nodes with memory) leaves every node its minimum ([`boot_keep_kb`]), pools taken in order
/// and each counted against what the earlier ones took; the others, each with a sentence
/// saying why it gets no kernel argument. Pages reserved at boot are not memory the kernel or
/// anything else can use, and a reservation larger than a node leaves the next boot without
/// memory. Where the host's memory cannot be read (a captured root without /proc/meminfo),
/// nothing can be bounded and the pools pass.
pub fn boot_bounded(
    mem: &daqtune_probe::mem::MemFacts,
    pools: Vec<crate::model::profile::HugepagePool>,
) -> (Vec<crate::model::profile::HugepagePool>, Vec<String>) {
    let mut nodes: Vec<(String, u64)> = mem
        .nodes
        .iter()
        .filter_map(|n| Some((format!("node{}", n.id), n.mem_total_kb.filter(|t| *t > 0)?)))
        .collect();
    if nodes.is_empty() {
        if let Some(t) = mem.mem_total_kb.filter(|t| *t > 0) {
            nodes.push(("the host".into(), t));
        }
    }
    let mut notes = Vec::new();
    if nodes.is_empty() {
        // Only a captured root lacks /proc/meminfo; `hugepages` already says its memory is
        // unreadable (the runtime reservation's note).
        return (pools, notes);
    }
    let n = nodes.len() as u64;
    // kB each node gives the pools accepted so far.
    let mut taken = vec![0u64; nodes.len()];
    let mut ok = Vec::new();
    for pool in pools {
        let Some(size_kb) = daqtune_probe::mem::parse_size_kb(&pool.size) else {
            ok.push(pool);
            continue;
        };
        let per_node = pool.count.div_ceil(n).saturating_mul(size_kb);
        let short = nodes.iter().zip(&taken).find(|((_, total), t)| {
            t.saturating_add(per_node) > total.saturating_sub(boot_keep_kb(*total))
        });
        // The most pages of this size every node can still give, times the nodes.
        let most = nodes
            .iter()
            .zip(&taken)
            .map(|((_, total), t)| {
                total
                    .saturating_sub(boot_keep_kb(*total))
                    .saturating_sub(*t)
                    / size_kb
            })
            .min()
            .unwrap_or(0)
            .saturating_mul(n);
        match short {
            Some(((name, total), t)) => notes.push(format!(
                "hugepages={} of {} not written: the kernel spreads a boot reservation over the {n} node(s) with memory, {} on each, and {name} has {} of which at least {} stays for the kernel and everything else (max(512M, an eighth)){}; at most {most} x {} fit here (docs/checks/hugepages.md)",
                pool.count,
                pool.size,
                daqtune_probe::mem::format_size_kb(per_node),
                daqtune_probe::mem::format_size_kb(*total),
                daqtune_probe::mem::format_size_kb(boot_keep_kb(*total)),
                if *t > 0 {
                    format!(", and {} went to the pools before it", daqtune_probe::mem::format_size_kb(*t))
                } else {
                    String::new()
                },
                pool.size
            )),
            None => {
                for t in taken.iter_mut() {
                    *t += per_node;
                }
                ok.push(pool);
            }
        }
    }
    (ok, notes)
}

/// Which boot configuration the host uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BootConfig {
    Grub { dropin: String },
    Extlinux { path: String },
    Unknown,
}

pub const EXTLINUX_CONF: &str = "/boot/extlinux/extlinux.conf";

pub fn boot_config(facts: &Facts, lp: &LoadedProfile) -> BootConfig {
    if facts.exists("/etc/default/grub") {
        BootConfig::Grub {
            dropin: lp.profile.persist.grub_dropin.clone(),
        }
    } else if facts.exists(EXTLINUX_CONF) {
        BootConfig::Extlinux {
            path: EXTLINUX_CONF.into(),
        }
    } else {
        BootConfig::Unknown
    }
}

/// /etc/default/grub and the drop-ins, in sourcing order, with `ours` replaced by (or added
/// as) `our_text` when given.
pub fn grub_files(facts: &Facts, ours: &str, our_text: Option<&str>) -> Vec<(String, String)> {
    let mut files = Vec::new();
    if let Ok(t) = facts.read_string("/etc/default/grub") {
        files.push(("/etc/default/grub".to_string(), t));
    }
    let mut names: Vec<String> = facts
        .read_dir("/etc/default/grub.d")
        .map(|d| d.to_vec())
        .unwrap_or_default();
    let our_name = ours.rsplit('/').next().unwrap_or(ours).to_string();
    if our_text.is_some() && !names.contains(&our_name) {
        names.push(our_name.clone());
    }
    for n in grub::dropin_order(&names) {
        let path = format!("/etc/default/grub.d/{n}");
        let text = if n == our_name {
            match our_text {
                Some(t) => t.to_string(),
                None => match facts.read_string(&path) {
                    Ok(t) => t,
                    Err(_) => continue,
                },
            }
        } else {
            match facts.read_string(&path) {
                Ok(t) => t,
                Err(_) => continue,
            }
        };
        files.push((path, text));
    }
    files
}

/// The grub.cfg files grub reads at boot (Debian's, then Fedora's place).
pub const GRUB_CFGS: &[&str] = &["/boot/grub/grub.cfg", "/boot/grub2/grub.cfg"];

/// Whether the next boot passes daqtune's kernel arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NextBoot {
    /// It does; how that is known.
    Carries { how: String },
    /// It does not; each reason names the file (and line) that decides otherwise.
    Drops { reasons: Vec<String> },
    /// It cannot be told; why.
    Unknown { reason: String },
}

/// daqtune's kernel arguments as written, and what the next boot will make of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootOutlook {
    /// The file daqtune wrote them into (its grub drop-in, or extlinux.conf).
    pub written_to: String,
    /// daqtune's words there, as the kernel will see them.
    pub ours: Vec<String>,
    pub next: NextBoot,
    /// What could not be confirmed (no grub.cfg to read), for messages.
    pub notes: Vec<String>,
}

/// The words of `line` missing from `have`.
fn lacking(ours: &[String], have: &[String]) -> Vec<String> {
    ours.iter().filter(|w| !have.contains(w)).cloned().collect()
}

/// Grub words as the kernel sees them (`\;` is `;`).
fn kernel_words(s: &str) -> Vec<String> {
    s.split_whitespace()
        .map(|w| w.replace("\\;", ";"))
        .collect()
}

/// What the next boot makes of the kernel arguments daqtune wrote: `None` when it wrote none
/// (no owned grub drop-in, no `daqtune` extlinux entry).
///
/// grub: the defaults files are evaluated in sourcing order (a later file that assigns
/// `GRUB_CMDLINE_LINUX`, or a conflicting value, decides otherwise), and where grub.cfg exists
/// its default entry's `linux` line is read (what the next boot really passes: without our
/// words there, update-grub has not run since the drop-in changed). extlinux: the label
/// `DEFAULT`/`ONTIMEOUT`/`MENU DEFAULT` choose, and its `APPEND`.
pub fn boot_outlook(facts: &Facts, lp: &LoadedProfile) -> Option<BootOutlook> {
    match boot_config(facts, lp) {
        BootConfig::Grub { dropin } => grub_outlook(facts, &dropin),
        BootConfig::Extlinux { path } => extlinux_outlook(facts, lp, &path),
        BootConfig::Unknown => None,
    }
}

fn grub_outlook(facts: &Facts, dropin: &str) -> Option<BootOutlook> {
    let text = facts
        .read_string(dropin)
        .ok()
        .filter(|t| t.contains(daqtune_units::OWNER_MARK))?;
    let ours = kernel_words(grub::evaluate(&[(dropin.to_string(), text)]).get(grub::CMDLINE));
    let mut reasons = Vec::new();
    let mut notes = Vec::new();
    let mut unmodelled = None;
    let files = grub_files(facts, dropin, None);
    if let Ok(args) = grub::KernelArgs::from_words(&ours) {
        for f in grub::analyze(&files, dropin, &args) {
            match &f {
                grub::Finding::Unmodelled { .. } => unmodelled = Some(f.to_string()),
                f if f.is_blocking() => reasons.push(f.to_string()),
                _ => {}
            }
        }
    }
    let line = kernel_words(&grub::evaluate(&files).default_entry_line());
    let dropped = lacking(&ours, &line);
    if !dropped.is_empty() && reasons.is_empty() {
        reasons.push(format!(
            "the grub defaults files leave `{}` off the default entry's line",
            dropped.join(" ")
        ));
    }
    let mut confirmed = None;
    let mut found_cfg = false;
    for cfg_path in GRUB_CFGS {
        let cfg = match facts.read_string(cfg_path) {
            Ok(c) => c,
            Err(e) if e.not_found => continue,
            Err(e) => {
                found_cfg = true;
                notes.push(format!("cannot read {cfg_path}: {}", e.message));
                break;
            }
        };
        found_cfg = true;
        let dir = cfg_path.rsplit_once('/').map_or("", |(d, _)| d);
        let env = facts.read_string(&format!("{dir}/grubenv")).ok();
        match daqtune_units::grubcfg::default_entry(&cfg, env.as_deref()) {
            Ok(e) => {
                let missing = lacking(&ours, &e.args);
                if missing.is_empty() {
                    confirmed = Some(format!(
                        "the default entry `{}` of {cfg_path} carries them",
                        e.title()
                    ));
                } else {
                    reasons.push(format!(
                        "the default entry `{}` of {cfg_path} (line {}; {}) lacks `{}`: grub.cfg was not regenerated since {dropin} changed (run `sudo update-grub`)",
                        e.title(),
                        e.line,
                        e.chosen_by,
                        missing.join(" ")
                    ));
                }
            }
            Err(e) => notes.push(format!("{cfg_path}: {e}")),
        }
        break;
    }
    if !found_cfg {
        notes.push(format!(
            "no {} to confirm it (what update-grub makes of the defaults files is assumed)",
            GRUB_CFGS[0]
        ));
    }
    let next = if !reasons.is_empty() {
        NextBoot::Drops { reasons }
    } else if let Some(how) = confirmed {
        NextBoot::Carries { how }
    } else if let Some(u) = unmodelled {
        NextBoot::Unknown { reason: u }
    } else {
        NextBoot::Carries {
            how: "the grub defaults files put them on the default entry's line".into(),
        }
    };
    Some(BootOutlook {
        written_to: dropin.to_string(),
        ours,
        next,
        notes,
    })
}

fn extlinux_outlook(facts: &Facts, lp: &LoadedProfile, path: &str) -> Option<BootOutlook> {
    let conf = facts.read_string(path).ok()?;
    // daqtune's entry: its words are the profile's kernel arguments it carries.
    let mut in_ours = false;
    let mut label_words: Option<Vec<String>> = None;
    for l in conf.lines() {
        let mut it = l.split_whitespace();
        match it.next().map(|k| k.to_ascii_uppercase()) {
            Some(k) if k == "LABEL" => in_ours = it.next() == Some(extlinux::LABEL),
            Some(k) if k == "APPEND" && in_ours => {
                label_words = Some(it.map(String::from).collect());
            }
            _ => {}
        }
    }
    let label_words = label_words?;
    let profile_words: Option<Vec<String>> = kernel_arg_spec(facts, lp)
        .ok()
        .and_then(|(spec, _)| spec.build().ok())
        .map(|a| a.words().to_vec());
    let ours: Vec<String> = match profile_words {
        Some(p) => p.into_iter().filter(|w| label_words.contains(w)).collect(),
        None => label_words
            .iter()
            .filter(|w| !w.starts_with('$'))
            .cloned()
            .collect(),
    };
    let next = match extlinux::default_entry(&conf) {
        Ok(d) if d.label != extlinux::LABEL => NextBoot::Drops {
            reasons: vec![format!(
                "{path}:{}: {} boots `{}`, not daqtune's entry `{}`",
                d.line,
                d.via,
                d.label,
                extlinux::LABEL
            )],
        },
        Ok(d) => {
            let missing = lacking(&ours, &d.append.unwrap_or_default());
            if missing.is_empty() {
                NextBoot::Carries {
                    how: format!(
                        "{path}: {} (line {}) boots `{}`, whose APPEND carries them",
                        d.via, d.line, d.label
                    ),
                }
            } else {
                NextBoot::Drops {
                    reasons: vec![format!(
                        "{path}: the APPEND of the default entry `{}` lacks `{}`",
                        d.label,
                        missing.join(" ")
                    )],
                }
            }
        }
        // A default naming no label: U-Boot falls back to another entry, not daqtune's.
        Err(e @ extlinux::DefaultEntryError::Undefined { .. }) => NextBoot::Drops {
            reasons: vec![format!("{path}: {e}")],
        },
        Err(e) => NextBoot::Unknown {
            reason: format!("{path}: {e}"),
        },
    };
    Some(BootOutlook {
        written_to: path.to_string(),
        ours,
        next,
        notes: Vec::new(),
    })
}

/// What the kernel arguments `args` wait for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pending {
    /// daqtune has not written them (all of them) into the boot configuration.
    NotWritten,
    /// Written, and the next boot carries them: a reboot applies them.
    Waits,
    /// Written, but the next boot will not carry them (or it cannot be told): why, naming the
    /// file that decides.
    WontBoot(String),
}

/// Whether `args` wait for a reboot: written by daqtune, and carried by the next boot.
pub fn pending_args(facts: &Facts, lp: &LoadedProfile, args: &[String]) -> Pending {
    if args.is_empty() {
        return Pending::NotWritten;
    }
    let Some(o) = boot_outlook(facts, lp) else {
        return Pending::NotWritten;
    };
    if !args.iter().all(|a| o.ours.contains(a)) {
        return Pending::NotWritten;
    }
    match o.next {
        NextBoot::Carries { .. } => Pending::Waits,
        NextBoot::Drops { reasons } => Pending::WontBoot(format!(
            "{} carries `{}`, but the next boot will not: {}",
            o.written_to,
            args.join(" "),
            reasons.join("; ")
        )),
        NextBoot::Unknown { reason } => Pending::WontBoot(format!(
            "{} carries `{}`, but whether the next boot does cannot be told: {reason}",
            o.written_to,
            args.join(" ")
        )),
    }
}

/// Words the next boot will pass that the running kernel did not get: what waits for a
/// reboot. `None` when daqtune wrote no kernel arguments, or the next boot will not carry them.
pub fn pending_kernel_args(facts: &Facts, lp: &LoadedProfile) -> Option<Vec<String>> {
    let running = facts.cmdline().ok()?;
    let has = |w: &str| {
        let (k, v) = w.split_once('=').map_or((w, None), |(k, v)| (k, Some(v)));
        let k = k.replace('-', "_");
        running
            .params
            .iter()
            .any(|p| p.key == k && p.value.as_deref() == v)
    };
    let o = boot_outlook(facts, lp)?;
    if !matches!(o.next, NextBoot::Carries { .. }) {
        return None;
    }
    Some(o.ours.into_iter().filter(|w| !has(w)).collect())
}
