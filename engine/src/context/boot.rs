//! The boot configuration: which boot loader configuration daqtune writes (a grub drop-in or an
//! extlinux entry), the kernel arguments the profile implies on this host, and what a written
//! configuration still waits for (the next boot). Shared by `kernel.cmdline`, `hugepages`,
//! `cpu.governor` and `pcie.acs`, whose settings persist through the kernel arguments.

use super::Context;
use crate::facts::Facts;
use crate::profile::{CoreSpec, LoadedProfile};
use daqtune_probe::CpuSet;
use daqtune_units::extlinux;
use daqtune_units::grub::{self, HugepageArgs, IsolationArgs, KernelArgSpec};

/// The data cores as a CPU list: the profile's list, or its rule resolved on this host the
/// way the checks resolve it (so apply and check agree on the cores).
pub fn data_core_list(facts: &Facts, lp: &LoadedProfile) -> Result<Option<String>, String> {
    match &lp.profile.cpu.isolated {
        None => Ok(None),
        Some(CoreSpec::List(s)) => Ok(Some(s.clone())),
        Some(CoreSpec::Rule(_)) => Context::with_facts(facts, lp)
            .data_cores()
            .map(|o| o.filter(|s| !s.is_empty()).map(|s| s.to_string())),
    }
}

/// The kernel arguments the profile implies on this host.
pub fn kernel_arg_spec(
    facts: &Facts,
    lp: &LoadedProfile,
) -> Result<(KernelArgSpec, Vec<String>), String> {
    let p = &lp.profile;
    let mut notes = Vec::new();
    let mut spec = KernelArgSpec::default();
    if p.hugepages.count > 0 && !lp.profile.not_applicable.contains_key("hugepages") {
        spec.hugepages = Some(HugepageArgs {
            default_size: p.hugepages.default_size,
            size: p.hugepages.size.clone(),
            count: p.hugepages.count,
        });
    }
    let iso = match data_core_list(facts, lp) {
        Ok(v) => v,
        Err(e) => {
            notes.push(format!("isolation arguments left out: {e}"));
            None
        }
    };
    if let Some(iso) = iso {
        let irq = match &p.cpu.irqaffinity {
            Some(s) => Some(s.clone()),
            None => {
                let iso_set =
                    daqtune_probe::cpulist::parse_cpulist(&iso, None).map_err(|e| e.to_string())?;
                facts
                    .cpus()
                    .ok()
                    .map(|c| c.online.difference(&iso_set))
                    .filter(|s: &CpuSet| !s.is_empty())
                    .map(|s| s.to_string())
            }
        };
        spec.isolation = Some(IsolationArgs {
            isolated: iso,
            irqaffinity: irq,
            nohz_full: p.cpu.nohz_full,
            rcu_nocbs: p.cpu.rcu_nocbs,
            rcu_nocb_poll: p.cpu.rcu_nocb_poll,
        });
    }
    // cpufreq.default_governor= exists from 5.9; older kernels get a unit instead.
    let kv = facts.kernel_version();
    if p.cpu.governor == "performance" && kv.is_some_and(|v| (v.0, v.1) >= (5, 9)) {
        spec.governor_performance = true;
    }
    Ok((spec, notes))
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

/// Words the next boot will pass that the running kernel did not get: what waits for a
/// reboot. `None` when daqtune wrote no kernel arguments (or they cannot be evaluated).
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
    let words: Vec<String> = match boot_config(facts, lp) {
        BootConfig::Grub { dropin } => {
            let ours = facts.read_string(&dropin).ok()?;
            if !ours.contains(daqtune_units::OWNER_MARK) {
                return None;
            }
            let ev = grub::evaluate(&grub_files(facts, &dropin, None));
            let ours_words: Vec<String> = grub::evaluate(&[(dropin.clone(), ours)])
                .get(grub::CMDLINE)
                .split_whitespace()
                .map(|w| w.replace("\\;", ";"))
                .collect();
            let line: Vec<String> = ev
                .default_entry_line()
                .split_whitespace()
                .map(|w| w.replace("\\;", ";"))
                .collect();
            // Only what our drop-in contributes and survives to the boot entry.
            ours_words
                .into_iter()
                .filter(|w| line.contains(w))
                .collect()
        }
        BootConfig::Extlinux { path } => {
            let t = facts.read_string(&path).ok()?;
            let mut in_ours = false;
            let mut words = Vec::new();
            for l in t.lines() {
                let tl = l.trim();
                if let Some(label) = tl.strip_prefix("LABEL ") {
                    in_ours = label.trim() == extlinux::LABEL;
                } else if in_ours {
                    if let Some(a) = tl.strip_prefix("APPEND ") {
                        words = a
                            .split_whitespace()
                            .filter(|w| !w.starts_with('$'))
                            .map(String::from)
                            .collect();
                    }
                }
            }
            words
        }
        BootConfig::Unknown => return None,
    };
    Some(words.into_iter().filter(|w| !has(w)).collect())
}

/// A grub drop-in daqtune wrote that already carries `arg`, waiting for a reboot.
pub fn pending_in_dropin(ctx: &Context, args: &[String]) -> bool {
    if args.is_empty() {
        return false;
    }
    let Ok(text) = ctx.read_string(&ctx.profile.profile.persist.grub_dropin) else {
        return false;
    };
    let words = daqtune_probe::cmdline::split_words(&text.replace(['"', '\''], " "));
    args.iter().all(|a| words.iter().any(|w| w == a))
}
