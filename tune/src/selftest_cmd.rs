//! `daqtune selftest`: the data-path self-test (selftest crate) with the active profile's
//! values (message size, MTU, UDP rate and loss limit, TCP minimum, data cores).

use crate::cli::GlobalArgs;
use daqtune_engine::commands::choose_profile;
use daqtune_engine::context::Context;
use daqtune_engine::hostroot::open_host;
use daqtune_engine::profile::LoadedProfile;
use daqtune_engine::UsageError;
use daqtune_selftest::cli::Defaults;
use daqtune_selftest::reference::Reference;
use daqtune_selftest::Thresholds;

pub use daqtune_selftest::cli::SelftestArgs;

/// Maps the profile onto the self-test's defaults. The data cores are resolved the way the
/// checks resolve them (an explicit list, or the rule on this host); the self-test remaps them
/// when the host lacks some (documented in docs/selftest.md).
pub fn defaults(ctx: &Context<'_>, lp: &LoadedProfile) -> (Defaults, Option<String>) {
    let p = &lp.profile;
    let (isolated, note) = match ctx.data_cores() {
        Ok(Some(set)) => (set.iter().map(|c| c as usize).collect(), None),
        Ok(None) => (Vec::new(), None),
        Err(e) => (Vec::new(), Some(format!("data cores: {e}"))),
    };
    let d = Defaults {
        message_size: p.selftest.message_size as usize,
        mtu: p.nic.mtu,
        udp_rate_gbps: p.selftest.udp_rate_gbps,
        thresholds: Thresholds {
            min_tcp_gbps: p.selftest.min_tcp_gbps,
            max_udp_loss_pct: p.selftest.max_udp_loss_pct,
            ..Thresholds::default()
        },
        isolated_cpus: isolated,
        references: references(&p.selftest),
        floor: p.selftest.floor,
    };
    (d, note)
}

/// The profile's reference figures for the self-test: `selftest.reference` with its shapes,
/// then the shapeless `reference_gbps` entries.
pub fn references(st: &daqtune_engine::profile::SelftestProfile) -> Vec<Reference> {
    let split = |path: &str| {
        let (e, m) = path.split_once('.').unwrap_or((path, ""));
        (e.to_string(), m.to_string())
    };
    let mut out: Vec<Reference> = st
        .reference
        .iter()
        .map(|r| {
            let (engine, mode) = split(&r.path);
            Reference {
                engine,
                mode,
                message_size: r.message_size.map(|m| m as usize),
                streams: r.streams.map(usize::from),
                gbps: r.gbps,
                loss_pct: r.loss_pct,
                floor: r.floor,
                source: r.source.clone(),
            }
        })
        .collect();
    for (path, gbps) in &st.reference_gbps {
        let (engine, mode) = split(path);
        out.push(Reference {
            engine,
            mode,
            message_size: None,
            streams: None,
            gbps: Some(*gbps),
            loss_pct: None,
            floor: None,
            source: format!("profile selftest.reference_gbps {path}"),
        });
    }
    out
}

/// Runs the self-test; the exit code is the self-test's (0 pass, 1 fail, 2 could not run,
/// 3 `--gpu` without a usable GPU (every result `skip`), 128+N interrupted by signal N after
/// restoring the network).
pub fn run(g: &GlobalArgs, args: &SelftestArgs) -> Result<u8, UsageError> {
    if g.root.is_some() {
        return Err(UsageError::Other(
            "selftest moves real traffic and cannot run against --root".into(),
        ));
    }
    let host = open_host(&g.engine())?;
    let lp = choose_profile(&host, &g.engine())?;
    let ctx = Context::new(&host, &lp);
    let (d, note) = defaults(&ctx, &lp);
    if let Some(n) = note {
        crate::out::eprint(&format!("daqtune selftest: {n}\n"));
    }
    let code = daqtune_selftest::cli::run(args, &d);
    Ok(u8::try_from(code).unwrap_or(2))
}

#[cfg(test)]
mod tests {
    use super::*;
    use daqtune_engine::profile;
    use daqtune_probe::Host;

    #[test]
    fn profile_values_reach_the_self_test() {
        let mut lp = profile::load("dgx-spark").expect("built-in profile");
        lp.profile.selftest.message_size = 4096;
        lp.profile.selftest.max_udp_loss_pct = 0.5;
        lp.profile.selftest.min_tcp_gbps = 40.0;
        lp.profile.selftest.floor = 0.8;
        let host = Host::live();
        let ctx = Context::new(&host, &lp);
        let (d, note) = defaults(&ctx, &lp);
        assert_eq!(note, None);
        // The Spark profile isolates 16-19 (seed 000); the self-test remaps on smaller hosts.
        assert_eq!(d.isolated_cpus, vec![16, 17, 18, 19]);
        assert_eq!(d.message_size, 4096);
        assert_eq!(d.mtu, 9000);
        assert_eq!(d.thresholds.max_udp_loss_pct, 0.5);
        assert_eq!(d.thresholds.min_tcp_gbps, 40.0);
        assert_eq!(d.floor, 0.8);
        // The Spark's figures (seed 002) reach the self-test with their shapes.
        let tcp = d
            .references
            .iter()
            .find(|r| r.engine == "socket" && r.mode == "tcp")
            .expect("socket.tcp reference");
        assert_eq!(
            (tcp.gbps, tcp.message_size, tcp.streams),
            (Some(97.2), Some(8192), Some(4))
        );
        assert!(tcp.source.contains("seed 002"), "{}", tcp.source);
        // UDP is paced at the link's payload rate unless the profile names a rate.
        assert_eq!(d.udp_rate_gbps, None);
    }

    #[test]
    fn root_is_refused() {
        let g = GlobalArgs {
            root: Some("/nonexistent".into()),
            ..Default::default()
        };
        let args = <SelftestHarness as clap::Parser>::parse_from(["x", "socket"]).args;
        assert!(run(&g, &args).is_err());
    }

    #[derive(clap::Parser)]
    struct SelftestHarness {
        #[command(flatten)]
        args: SelftestArgs,
    }
}
