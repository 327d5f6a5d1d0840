//! What the five NIC-settings tunables (`nic.rings`, `nic.coalesce`, `nic.pause`,
//! `nic.offloads`, `nic.channels`) share: each reads one ethtool group of each data port
//! ([`Facts::ethtool`]: ethtool netlink live, `daqtune/ethtool/IF/GROUP.json` under a root),
//! decides what the profile wants of it (its own `wants` function), and [`judge`] compares;
//! [`check`] turns that into verdicts and [`plan`] into changes, so a port that passes is never
//! planned for. The runtime change is an ethtool-netlink SET (this module's setter hook, read
//! back and journaled) or, under a root, the recorded file rewritten as the kernel would show
//! it. Persistence is the port's network file (`.link` keys, NetworkManager `[ethtool]`),
//! which `nic.mtu` writes with [`persist_keys`] added.

use crate::hostio::journal::{Entry, Journal};
use crate::hostio::setters::Done;
use crate::hostio::setters::{
    ethtool_reads_back, set_ethtool_worded, EthtoolError, Target, Writer,
};
use crate::model::context::nics::{
    data_interfaces, management_note, management_port, management_ports,
};
use crate::model::context::Context;
use crate::model::plan::{
    Action, ActionKind, Change, NoteLevel, Plan, PlanCx, PlanError, SetCx, SetError,
};
use crate::model::profile::LoadedProfile;
use crate::model::verdict::Verdict;
use daqtune_probe::net::ethtool::{
    recorded_path, shown_change, shown_settings, Group, GroupState, Settings,
};

/// One of the five tunables, as this module drives it.
pub struct Spec {
    pub id: &'static str,
    pub group: Group,
    /// What the profile wants of a port in this state.
    pub wants: fn(&WantCx) -> Wants,
    /// The group's values as a verdict shows them.
    pub shown: fn(&GroupState) -> String,
}

/// What a `wants` function decides from.
pub struct WantCx<'a> {
    pub lp: &'a LoadedProfile,
    pub state: &'a GroupState,
    /// How many data cores the profile's core rule gives on this host (`nic.channels`).
    pub data_cores: Option<u32>,
}

/// The values the profile wants (absolute), and what it wants that this port cannot say or do.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Wants {
    pub set: Settings,
    pub cannot: Vec<String>,
}

/// The judgement: the keys whose value differs from the profile's, with both values.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Judged {
    pub from: Settings,
    pub to: Settings,
    pub wanted: Settings,
    pub cannot: Vec<String>,
    /// Keys the profile wants that the driver does not report: nothing was read for them, so
    /// the setting cannot pass.
    pub unread: Vec<String>,
}

/// The one judgement check and plan share.
pub fn judge(spec: &Spec, cx: &WantCx) -> Judged {
    let w = (spec.wants)(cx);
    let mut j = Judged {
        cannot: w.cannot,
        wanted: w.set.clone(),
        ..Default::default()
    };
    for (k, v) in &w.set {
        match cx.state.get(k) {
            Some(cur) if cur == *v => {}
            Some(cur) => {
                j.from.insert(k.clone(), cur);
                j.to.insert(k.clone(), *v);
            }
            None => j.unread.push(format!("{k}: not reported by the driver")),
        }
    }
    j
}

/// The data cores' count, when the profile's rule resolves on this host.
pub fn data_core_count(ctx: &Context) -> Option<u32> {
    ctx.data_cores()
        .ok()
        .flatten()
        .map(|c| c.len() as u32)
        .filter(|n| *n > 0)
}

/// The verdicts of one tunable: one per data port.
pub fn check(ctx: &Context, spec: &Spec) -> Vec<Verdict> {
    let id = spec.id;
    // A capture of `ethtool -g/-l/-c/-a/-k` without the PCI functions and interfaces: every
    // port it recorded is judged (which are data ports is not in it, and each verdict says so).
    let captured = !crate::model::capture::holds_needs(ctx.facts(), id);
    let ports: Vec<String> = if captured {
        let mut names: Vec<String> = ctx
            .facts()
            .read_dir("/daqtune/ethtool")
            .map(|v| v.iter().cloned().collect())
            .unwrap_or_default();
        names.retain(|n| {
            ctx.facts()
                .read_string(&recorded_path(n, spec.group))
                .is_ok()
        });
        names.sort();
        if names.is_empty() {
            return vec![Verdict::skip(
                id,
                "host",
                format!(
                    "not in this capture (no port's {} in it)",
                    spec.group.name()
                ),
            )];
        }
        names
    } else {
        match data_interfaces(ctx.facts(), ctx.profile) {
            Ok(p) => p.into_iter().map(|(n, _, _)| n).collect(),
            Err(e) => return vec![Verdict::skip(id, "host", e.to_string())],
        }
    };
    if ports.is_empty() {
        return vec![Verdict::skip(
            id,
            "host",
            "no data-path interface (no ConnectX netdev in this namespace, and the profile names none)",
        )];
    }
    let cores = data_core_count(ctx);
    let mgmt_ports = management_ports(ctx.facts());
    let mut out = Vec::new();
    for name in &ports {
        let state = match ctx.facts().ethtool(name, spec.group) {
            Ok(s) => s,
            Err(e) => {
                out.push(Verdict::skip(
                    id,
                    name.as_str(),
                    format!("{} unreadable: {}", spec.group.name(), e.message),
                ));
                continue;
            }
        };
        let cx = WantCx {
            lp: ctx.profile,
            state: &state,
            data_cores: cores,
        };
        let j = judge(spec, &cx);
        let now = if captured {
            format!(
                "{} (ethtool output of the capture; its PCI function and addresses are not in it)",
                (spec.shown)(&state)
            )
        } else {
            (spec.shown)(&state)
        };
        let cannot = if j.cannot.is_empty() && j.unread.is_empty() {
            String::new()
        } else {
            let all: Vec<&str> = j
                .cannot
                .iter()
                .chain(&j.unread)
                .map(String::as_str)
                .collect();
            format!(" ({})", all.join("; "))
        };
        let mgmt = management_port(&mgmt_ports, name);
        let v = if let (false, Some(why)) = (j.to.is_empty(), mgmt) {
            Verdict::skip(
                id,
                name.as_str(),
                format!(
                    "{now}; the profile wants {}: {}",
                    shown_settings(spec.group, &j.to),
                    management_note(name, why)
                ),
            )
            .observed(shown_settings(spec.group, &j.from))
            .expected(shown_settings(spec.group, &j.wanted))
        } else if !j.to.is_empty() {
            Verdict::warn(
                id,
                name.as_str(),
                format!(
                    "{now}; the profile wants {}{cannot}",
                    shown_settings(spec.group, &j.to)
                ),
            )
            .observed(shown_settings(spec.group, &j.from))
            .expected(shown_settings(spec.group, &j.wanted))
            .fix(format!("sudo daqtune apply --only {id}"))
        } else if !j.unread.is_empty() {
            // What was read matches, but a wanted key was not read at all: not a pass.
            Verdict::skip(
                id,
                name.as_str(),
                format!(
                    "{now}; cannot confirm the profile's {}{cannot}",
                    shown_settings(spec.group, &j.wanted)
                ),
            )
            .observed(now)
            .expected(shown_settings(spec.group, &j.wanted))
        } else if j.wanted.is_empty() && !j.cannot.is_empty() {
            Verdict::skip(id, name.as_str(), format!("{now}{cannot}")).observed(now)
        } else if j.wanted.is_empty() {
            Verdict::pass(
                id,
                name.as_str(),
                format!("{now} (the profile asks nothing here: reported only)"),
            )
            .observed(now)
        } else {
            Verdict::pass(id, name.as_str(), format!("{now}{cannot}"))
                .expected(shown_settings(spec.group, &j.wanted))
                .observed(now)
        };
        out.push(v);
    }
    out
}

/// The runtime changes of one tunable (persistence is `nic.mtu`'s port file, planned with it).
pub fn plan(cx: &PlanCx, plan: &mut Plan, spec: &Spec) -> Result<(), PlanError> {
    let id = spec.id;
    let ports = match data_interfaces(cx.facts, cx.lp) {
        Ok(p) => p,
        Err(e) => {
            plan.note(id, NoteLevel::Skip, e.to_string());
            return Ok(());
        }
    };
    let ctx = cx.context();
    let cores = data_core_count(&ctx);
    let mut wanted = false;
    let mgmt = management_ports(cx.facts);
    for (name, _, _) in &ports {
        // One port whose name no file or command can carry is left out, not the plan.
        if let Err(e) = daqtune_units::validate::interface_name(name) {
            plan.note(id, NoteLevel::Skip, format!("{name:?} left out: {e}"));
            continue;
        }
        let Ok(state) = cx.facts.ethtool(name, spec.group) else {
            continue; // the check's skip says why
        };
        let j = judge(
            spec,
            &WantCx {
                lp: cx.lp,
                state: &state,
                data_cores: cores,
            },
        );
        if let Some(why) = management_port(&mgmt, name) {
            if !j.to.is_empty() {
                plan.note(id, NoteLevel::Skip, management_note(name, why));
            }
            continue;
        }
        wanted |= !j.wanted.is_empty();
        for c in j.cannot.iter().chain(&j.unread) {
            plan.note(id, NoteLevel::Skip, format!("{name}: {c}"));
        }
        if j.to.is_empty() || !cx.opts.runtime {
            continue;
        }
        let action = match cx.target {
            Target::Live => Action::owned(SetEthtool {
                ifname: name.clone(),
                group: spec.group,
                from: j.from.clone(),
                to: j.to.clone(),
            }),
            Target::Root => {
                let path = recorded_path(name, spec.group);
                let (from, after) = match (cx.facts.read_string(&path), state.with(&j.to)) {
                    (Ok(f), Ok(a)) => (f, a),
                    (Err(e), _) => {
                        plan.note(id, NoteLevel::Skip, format!("{path}: {}", e.message));
                        continue;
                    }
                    (_, Err(e)) => {
                        plan.note(id, NoteLevel::Skip, format!("{name}: {e}"));
                        continue;
                    }
                };
                Action::Attr {
                    path,
                    from,
                    to: after.to_json(),
                    shared_count: false,
                }
            }
        };
        let note = (cx.target == Target::Root).then(|| {
            format!(
                "{} {}",
                spec.group.name(),
                shown_change(spec.group, &j.from, &j.to)
            )
        });
        plan.changes.push(Change {
            check: id.into(),
            subject: name.clone(),
            action,
            reboot: false,
            note,
        });
    }
    if wanted && cx.opts.persist && super::mtu::network_style(cx.facts, cx.lp) == "netplan" {
        plan.note(
            id,
            NoteLevel::Warn,
            format!("netplan manages the ports and has no key for the {} settings daqtune sets: the runtime change is not kept through a reboot (docs/checks/{id}.md)", spec.group.name()),
        );
    }
    Ok(())
}

/// A port's ethtool group set through ethtool netlink (live hosts; under a root it is an
/// `Attr` on the recorded `daqtune/ethtool/IF/GROUP.json`). `from`: the keys' values now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetEthtool {
    pub ifname: String,
    pub group: Group,
    pub from: Settings,
    pub to: Settings,
}

impl ActionKind for SetEthtool {
    fn execute(&self, cx: SetCx<'_>) -> Result<Done, SetError> {
        set_group(cx.journal, cx.writer, &self.ifname, self.group, &self.to).map(Done::from)
    }
    fn plan_json(&self) -> serde_json::Value {
        serde_json::json!({
            "kind": "ethtool", "interface": self.ifname, "group": self.group.name(),
            "from": self.from, "to": self.to,
        })
    }
    fn describe(&self) -> String {
        format!(
            "{} of {}: {} (ethtool netlink)",
            self.group.name(),
            self.ifname,
            daqtune_probe::net::ethtool::shown_change(self.group, &self.from, &self.to)
        )
    }
    fn port(&self) -> Option<&str> {
        Some(&self.ifname)
    }
}

/// The setter hook of [`SetEthtool`]: journal the keys' values now, set, read back.
pub(crate) fn set_group(
    j: &mut Journal,
    w: &mut dyn Writer,
    ifname: &str,
    group: Group,
    to: &Settings,
) -> Result<String, crate::model::tunable::SetError> {
    let jerr = crate::model::tunable::SetError::Journal;
    let before = w
        .ethtool(ifname, group)
        .map_err(|source| EthtoolError::Read {
            ifname: ifname.to_string(),
            group,
            source,
        })?;
    let original: Settings = to
        .keys()
        .filter_map(|k| before.get(k).map(|v| (k.clone(), v)))
        .collect();
    let idx = j
        .record(
            w,
            Entry::Ethtool {
                ifname: ifname.to_string(),
                group,
                original,
                new: to.clone(),
            },
        )
        .map_err(jerr)?;
    set_ethtool_worded(w, ifname, group, to)?;
    j.mark_done(w, idx).map_err(jerr)?;
    ethtool_reads_back(w, ifname, group, to)?;
    Ok(format!(
        "{} of {ifname}: {}",
        group.name(),
        shown_settings(group, to)
    ))
}
