//! A profile derived from the application instead of the platform's defaults: the cores to
//! isolate are the configuration's queue and worker cores, the hugepages cover its regions
//! (with DAQIRI's overheads), the MTU carries its largest frame, and the data-path
//! interfaces are the ports it names. `plan`/`apply --config` feed this profile to the same
//! planner as any other.

use crate::model::appconfig::estimate::{self, MIB};
use crate::model::appconfig::{AppConfig, Transport};
use crate::model::context::Context;
use crate::model::profile::{CoreSpec, LoadedProfile, Profile};
use crate::tunables::app::data_cores;
use daqtune_probe::mem::{format_size_kb, parse_size_kb};

#[derive(Debug, Clone)]
pub struct Derived {
    pub profile: Profile,
    /// One sentence per parameter taken from the application, for the plan's header.
    pub notes: Vec<String>,
}

/// The IP MTU the configuration's largest frame or datagram needs, if it states sizes.
pub fn needed_mtu(app: &AppConfig) -> Option<u32> {
    let mut need: Option<u64> = None;
    let mut up = |v: u64| need = Some(need.map_or(v, |n| n.max(v)));
    for w in &app.workers {
        if let (Some(h), Some(p)) = (
            w.header_size.as_ref().and_then(|f| f.ok()),
            w.payload_size.as_ref().and_then(|f| f.ok()),
        ) {
            up(h.saturating_add(*p).saturating_sub(estimate::ETH_HDR));
        }
        let udp = app
            .worker_interface(w)
            .is_some_and(|i| i.transport == Transport::Udp);
        if let (true, Some(m)) = (udp, w.message_size.as_ref().and_then(|f| f.ok())) {
            if *m <= estimate::MAX_UDP_PAYLOAD {
                up(m + 28);
            }
        }
    }
    for i in &app.interfaces {
        for f in &i.flows {
            if let Some(l) = f.ipv4_len.ok() {
                up(*l);
            }
        }
    }
    need.map(|n| u32::try_from(n.min(65535)).unwrap_or(65535))
}

/// Derive the profile's isolated cores, hugepages, MTU and interfaces from the application.
/// `base` supplies everything else (governor, page size, persistence, ...).
pub fn derive_profile(app: &AppConfig, base: &Profile, ctx: &Context) -> Derived {
    let mut p = base.clone();
    let mut notes = Vec::new();
    let file = &app.file;

    let cores = data_cores(app);
    if !cores.is_empty() {
        p.cpu.isolated = Some(CoreSpec::List(cores.to_string()));
        // Housekeeping and IRQs go to every other online CPU: a base irqaffinity may
        // overlap the application's cores.
        p.cpu.irqaffinity = None;
        notes.push(format!(
            "isolated CPUs {cores}: the queue and worker cores of {file} (master core not isolated)"
        ));
    }

    let est = estimate::hugepages(app);
    // The configuration's regions are sized in pages of the profile's first pool; a
    // configuration-derived profile has that one pool.
    if let Some(first) = p.hugepages.pools().into_iter().next() {
        p.hugepages.size = first.size;
    }
    p.hugepages.pools.clear();
    let page_kb = parse_size_kb(&p.hugepages.size).unwrap_or(1024 * 1024);
    let page = page_kb.saturating_mul(1024).max(1);
    let count = est.total.div_ceil(page);
    p.hugepages.count = count;
    notes.push(if count == 0 {
        format!("no hugepages: {file} has no kind: huge region and no DPDK engine")
    } else {
        format!(
            "{count} x {} hugepages ({} MiB) for {}: {}",
            format_size_kb(page_kb),
            count.saturating_mul(page) / MIB,
            file,
            est.breakdown()
        )
    });

    if let Some(need) = needed_mtu(app) {
        if need > p.nic.mtu {
            notes.push(format!(
                "MTU {need}: the largest frame of {file} (the profile's {} is smaller)",
                p.nic.mtu
            ));
            p.nic.mtu = need.max(68);
        } else {
            notes.push(format!(
                "MTU {}: carries the largest frame of {file} ({need}-byte IP packets)",
                p.nic.mtu
            ));
        }
    }

    // The ports the app.* checks judge: one derivation (`context::nics::app_ports`).
    let nds = crate::model::context::nics::app_netdevs(app, ctx.pci().ok(), ctx.local_addrs().ok());
    if !nds.is_empty() {
        notes.push(format!(
            "data-path interfaces {} (from {file})",
            nds.join(", ")
        ));
        p.nic.interfaces = nds;
    }
    p.description = format!("{} (derived from {file})", p.description);
    Derived { profile: p, notes }
}

/// The loaded profile `plan`/`apply --config` use: `lp` with the derived parameters.
pub fn derive_loaded(
    app: &AppConfig,
    lp: &LoadedProfile,
    ctx: &Context,
) -> (LoadedProfile, Vec<String>) {
    let d = derive_profile(app, &lp.profile, ctx);
    let mut out = lp.clone();
    out.profile = d.profile;
    out.origin = format!("{} + derived from {}", lp.origin, app.file);
    (out, d.notes)
}
