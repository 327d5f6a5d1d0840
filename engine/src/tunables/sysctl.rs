//! `net.sysctl`: socket buffer sizes for the Linux-socket data path (seed 003). Plan: each
//! value below the profile's now, and a sysctl.d file that keeps them.

use crate::model::context::Context;
use crate::model::facts::Facts;
use crate::model::plan::{Action, Change, NoteLevel, Plan, PlanCx, PlanError};
use crate::model::profile::LoadedProfile;
use crate::model::tunable::{Planner, Tunable};
use crate::model::verdict::{Area, Verdict};
use daqtune_units::etc;

pub const NET_SYSCTL: Tunable = Tunable {
    id: "net.sysctl",
    area: Area::Network,
    title: "Socket buffer sysctls for the socket data path",
    aliases: &["sysctl"],
    doc: include_str!("../../../docs/checks/net.sysctl.md"),
    needs_root: false,
    profile_keys: &["sysctl.enabled", "sysctl.values"],
    check: run,
    planner: Some(Planner {
        order: 9,
        with: &[],
        plan: plan_sysctl,
        artifacts: &[crate::model::tunable::Artifact {
            kind: "sysctl",
            help: "sysctl.d drop-in with the socket buffer sizes",
            render: |g| {
                let v: Vec<(&str, &str)> =
                    g.lp.profile
                        .sysctl
                        .values
                        .iter()
                        .map(|(k, v)| (k.as_str(), v.as_str()))
                        .collect();
                Ok(dropin(&v, g.profile_ref)?)
            },
        }],
        port_reset: crate::model::tunable::PortReset::None,
        owned_files: |_| vec![etc::SYSCTL_PATH.to_string()],
    }),
};

/// Compare field by field: every numeric field of `have` must reach the one in `want`
/// (`tcp_rmem` is min/default/max).
pub fn meets(have: &str, want: &str) -> Option<bool> {
    let h: Vec<u64> = have
        .split_whitespace()
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    let w: Vec<u64> = want
        .split_whitespace()
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    if h.len() != w.len() || h.is_empty() {
        return None;
    }
    Some(h.iter().zip(&w).all(|(a, b)| a >= b))
}

/// The files systemd-sysctl applies at boot, in order, with their text.
pub(crate) fn boot_files(facts: &Facts) -> Vec<(String, String)> {
    let dirs: Vec<(&str, Vec<String>)> = etc::SYSCTL_DIRS
        .iter()
        .map(|d| {
            (
                *d,
                facts.read_dir(d).map(|v| v.to_vec()).unwrap_or_default(),
            )
        })
        .collect();
    etc::sysctl_files(&dirs)
        .into_iter()
        .filter_map(|p| facts.read_string(&p).ok().map(|t| (p, t)))
        .collect()
}

/// The profile's sysctls another file sets after daqtune's drop-in to a value below the
/// profile's: at boot that file wins. One sentence each (file and line), with the key.
pub fn boot_overrides(facts: &Facts, lp: &LoadedProfile) -> Vec<(String, String)> {
    let s = &lp.profile.sysctl;
    if !s.enabled || s.values.is_empty() {
        return Vec::new();
    }
    let keys: Vec<&str> = s.values.keys().map(String::as_str).collect();
    let found = boot_settings(facts, etc::SYSCTL_PATH, &keys);
    let mut out = Vec::new();
    for (key, want) in &s.values {
        // The last setting of the key is its value at boot.
        let Some(o) = found.iter().rev().find(|o| &o.key == key) else {
            continue;
        };
        if meets(&o.value, want) == Some(true) {
            continue;
        }
        out.push((
            key.clone(),
            format!(
                "{}:{} sets {key} = {} after daqtune's {} (systemd-sysctl applies the sysctl.d files in name order and the last setting wins): at boot {key} is {}, below {want}",
                o.file,
                o.line,
                o.value,
                etc::SYSCTL_PATH,
                o.value
            ),
        ));
    }
    out
}

fn run(ctx: &Context) -> Vec<Verdict> {
    const ID: &str = "net.sysctl";
    let s = &ctx.profile.profile.sysctl;
    if !s.enabled {
        return vec![Verdict::na(
            ID,
            "host",
            "this profile does not judge socket buffers (DPDK and RDMA bypass them); set sysctl.enabled: true for the socket path",
        )];
    }
    let mut out = Vec::new();
    for (name, want) in &s.values {
        let v = match ctx.read_attr(&format!("/proc/sys/{}", name.replace('.', "/"))) {
            Err(e) => Verdict::skip(ID, name.clone(), e.to_string()),
            Ok(have) => match meets(&have, want) {
                Some(true) => Verdict::pass(ID, name.clone(), format!("{name} = {have}")),
                Some(false) => {
                    Verdict::warn(ID, name.clone(), format!("{name} = {have}, below {want}")).fix(
                        format!(
                    "sudo daqtune apply --only net.sysctl   (or: sudo sysctl -w {name}=\"{want}\")"
                ),
                    )
                }
                None => Verdict::skip(
                    ID,
                    name.clone(),
                    format!("{name} = `{have}` is not comparable with `{want}`"),
                ),
            }
            .observed(have)
            .expected(format!(">= {want}")),
        };
        out.push(v);
    }
    for (key, msg) in boot_overrides(ctx.facts(), ctx.profile) {
        out.push(
            Verdict::warn(ID, format!("{key} at boot"), msg)
                .expected(format!(
                    ">= {}",
                    s.values.get(&key).cloned().unwrap_or_default()
                ))
                .fix(format!(
                    "remove {key} from that file, or set it to at least the profile's value there"
                )),
        );
    }
    out
}

fn plan_sysctl(cx: &PlanCx, plan: &mut Plan) -> Result<(), PlanError> {
    const ID: &str = "net.sysctl";
    let s = &cx.lp.profile.sysctl;
    if !s.enabled {
        return Ok(());
    }
    let mut persist = Vec::new();
    for (k, v) in &s.values {
        daqtune_units::validate::sysctl_name(k)?;
        daqtune_units::validate::sysctl_value(v)?;
        persist.push((k.as_str(), v.as_str()));
        if !cx.opts.runtime {
            continue;
        }
        let path = format!("/proc/sys/{}", k.replace('.', "/"));
        let Ok(raw) = cx.facts.read_string(&path) else {
            plan.note(ID, NoteLevel::Skip, format!("{k}: not present"));
            continue;
        };
        // The check's comparison: below the profile's is set; a value it cannot compare
        // (the check's skip) is left, since after the write it could not be judged either.
        let below = match meets(raw.trim(), v) {
            Some(ok) => !ok,
            None => {
                plan.note(
                    ID,
                    NoteLevel::Skip,
                    format!("{k} = `{}` is not comparable with `{v}`", raw.trim()),
                );
                false
            }
        };
        if below {
            plan.changes.push(Change {
                check: ID.into(),
                subject: k.clone(),
                action: Action::Attr {
                    path,
                    from: raw,
                    to: v.clone(),
                    shared_count: false,
                },
                reboot: false,
                note: None,
            });
        }
    }
    for (_, msg) in boot_overrides(cx.facts, cx.lp) {
        plan.note(ID, NoteLevel::Warn, msg);
    }
    if cx.opts.persist && !persist.is_empty() {
        let text = dropin(&persist, &cx.profile_ref())?;
        cx.file_change(plan, ID, "sysctl.d", etc::SYSCTL_PATH, text, 0o644, false);
    }
    Ok(())
}

/// The sysctl.d drop-in carrying `values` across reboots: net.sysctl's and each kernel latency
/// tunable's own file are made here, the one place the engine calls the renderer.
pub(crate) fn dropin(
    values: &[(&str, &str)],
    profile_ref: &str,
) -> Result<String, daqtune_units::InvalidValue> {
    etc::sysctl_conf(values, profile_ref)
}

/// The settings of `keys` in the files read at boot (`boot_files`), `ours` being the drop-in
/// whose keys they may override: net.sysctl's and the kernel latency tunables' precedence.
pub(crate) fn boot_settings(facts: &Facts, ours: &str, keys: &[&str]) -> Vec<etc::SysctlOverride> {
    etc::sysctl_overrides(&boot_files(facts), ours, keys)
}

#[cfg(test)]
mod tests {
    use super::meets;

    #[test]
    fn triples() {
        assert_eq!(
            meets("4096 131072 6291456", "4096 87380 268435456"),
            Some(false)
        );
        assert_eq!(
            meets("4096 87380 268435456", "4096 87380 268435456"),
            Some(true)
        );
        assert_eq!(meets("garbage", "1"), None);
        assert_eq!(meets("", ""), None);
    }
}
