//! The `app.*` checks: this host against the DAQIRI configuration given with `--config`.
//! Every verdict's subject is `FILE:LINE key.path`, the key the finding comes from.

use crate::model::appconfig::estimate::{self, MIB};
use crate::model::appconfig::netaddr::LocalAddrs;
use crate::model::appconfig::{
    AppConfig, Bad, Dir, Engine, Field, Interface, MemKind, Queue, Transport, Worker,
};
use crate::model::context::nics::{app_ports, nic_by_netdev, socket_hosts, AppPort};
use crate::model::context::Context;
use crate::model::tunable::Tunable;
use crate::model::verdict::{Area, Verdict};

mod config;
mod cores;
mod interfaces;
mod memory;
mod sizes;

pub use config::CONFIG;
pub use cores::{data_cores, CORES};
use daqtune_probe::pci::{PciAddr, PciFacts};
use daqtune_probe::CpuSet;
pub use interfaces::INTERFACES;
pub use memory::MEMORY;
pub use sizes::SIZES;
use std::collections::BTreeMap;
use std::net::IpAddr;

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

/// What the `app.*` modules' tests judge: the DGX Spark fixture against
/// tests/configs/socket_udp_spark.yaml, as given or edited.
#[cfg(test)]
mod testkit {
    use super::*;
    use crate::model::verdict::Status;

    /// The verdicts of `check` with the configuration after `edit`.
    pub fn judge(
        check: fn(&Context) -> Vec<Verdict>,
        edit: &dyn Fn(&str) -> String,
    ) -> Vec<Verdict> {
        judge_file("socket_udp_spark.yaml", check, edit)
    }

    /// [`judge`] with another configuration of tests/configs.
    pub fn judge_file(
        file: &str,
        check: fn(&Context) -> Vec<Verdict>,
        edit: &dyn Fn(&str) -> String,
    ) -> Vec<Verdict> {
        let base = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let text = std::fs::read_to_string(base.join("tests/configs").join(file)).expect("config");
        let app = AppConfig::parse(file, &edit(&text)).expect("parse");
        let host = daqtune_probe::Host::at(base.join("tests/fixtures/spark")).expect("root");
        let facts = crate::model::facts::Facts::new(&host);
        let lp = crate::model::profile::load("dgx-spark").expect("profile");
        let ctx = Context::with_facts(&facts, &lp).with_app(Some(&app));
        check(&ctx)
    }

    /// The failures among `vs`, as "subject: message".
    pub fn failures(vs: &[Verdict]) -> Vec<String> {
        vs.iter()
            .filter(|v| v.status == Status::Fail)
            .map(|v| format!("{}: {}", v.subject, v.message))
            .collect()
    }
}
