//! `daqtune selftest`: the data-path self-test (selftest crate) with the active profile's
//! values (message size, MTU, UDP rate and loss limit, TCP minimum, data cores).

use crate::cli::GlobalArgs;
use daqtune_engine::commands::choose_profile;
use daqtune_engine::context::Context;
use daqtune_engine::hostroot::open_host;
use daqtune_engine::profile::LoadedProfile;
use daqtune_engine::UsageError;
use daqtune_selftest::cli::Defaults;
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
        reference_gbps: p.selftest.reference_gbps.clone(),
    };
    (d, note)
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
        lp.profile
            .selftest
            .reference_gbps
            .insert("socket.tcp".into(), 97.2);
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
        assert_eq!(d.reference_gbps.get("socket.tcp"), Some(&97.2));
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
