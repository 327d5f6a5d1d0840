//! `daqtune selftest`: the data-path self-test (selftest crate) with the active profile's
//! values (message size, MTU, UDP rate and loss limit, TCP minimum, data cores).

use crate::checks::Context;
use crate::cli::GlobalArgs;
use crate::commands::{choose_profile, open_host, UsageError};
use crate::profile::LoadedProfile;
use daqtune_selftest::cli::Defaults;
use daqtune_selftest::sys::hostname;
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
    let host = open_host(g)?;
    let lp = choose_profile(&host, g)?;
    let ctx = Context::new(&host, &lp);
    let (d, note) = defaults(&ctx, &lp);
    if let Some(n) = note {
        eprintln!("daqtune selftest: {n}");
    }
    let code = daqtune_selftest::cli::run(args, &d);
    Ok(u8::try_from(code).unwrap_or(2))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile;
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
            profile: None,
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

/// `daqtune selftest rdma`: the verbs engine lives in the `daqtune-rdma` executable (it links
/// libibverbs, which the main binary must not need), so this finds it, runs it with the
/// profile's values and relays its report. Ports are never picked automatically: name the two
/// RDMA devices (two ports cabled back to back, or two rxe devices on a veth pair) or a peer.
#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "daqtune selftest rdma",
    about = "RDMA RC WRITE/SEND/ping-pong self-test (ibverbs)"
)]
pub struct RdmaArgs {
    /// Sending RDMA device (e.g. mlx5_0, rxe0).
    #[arg(long, value_name = "DEV")]
    pub dev: Option<String>,
    /// Receiving local RDMA device.
    #[arg(long, value_name = "DEV", conflicts_with = "peer")]
    pub peer_dev: Option<String>,
    /// A remote `daqtune-rdma --listen HOST:PORT` receiver instead of a local device.
    #[arg(long, value_name = "HOST:PORT")]
    pub peer: Option<String>,
    /// Runs: write, send, pingpong.
    #[arg(long, value_delimiter = ',', default_value = "write,send,pingpong")]
    pub test: Vec<String>,
    /// Seconds per run.
    #[arg(long, default_value_t = 3.0)]
    pub duration: f64,
    /// Message size for the bandwidth runs (default: the profile's message size).
    #[arg(long, value_name = "BYTES")]
    pub size: Option<usize>,
    #[arg(long)]
    pub tx_cpu: Option<usize>,
    #[arg(long)]
    pub rx_cpu: Option<usize>,
    /// text or json (daqtune.selftest/v1).
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    pub format: String,
    /// Also write a JUnit file.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<std::path::PathBuf>,
    /// ACK timeout exponent (4.096 µs x 2^N); emulated soft-RoCE needs 18 or more.
    #[arg(long)]
    pub qp_timeout: Option<u8>,
}

/// The helper's arguments for a run (pure, so it is tested without the helper).
pub fn rdma_helper_args(a: &RdmaArgs, profile_size: usize) -> Vec<std::ffi::OsString> {
    let mut v: Vec<String> = Vec::new();
    if let Some(d) = &a.dev {
        v.extend(["--dev".into(), d.clone()]);
    }
    if let Some(d) = &a.peer_dev {
        v.extend(["--peer-dev".into(), d.clone()]);
    }
    if let Some(p) = &a.peer {
        v.extend(["--peer".into(), p.clone()]);
    }
    v.extend(["--test".into(), a.test.join(",")]);
    v.extend(["--duration".into(), a.duration.to_string()]);
    v.extend(["--size".into(), a.size.unwrap_or(profile_size).to_string()]);
    for (flag, cpu) in [("--tx-cpu", a.tx_cpu), ("--rx-cpu", a.rx_cpu)] {
        if let Some(c) = cpu {
            v.extend([flag.into(), c.to_string()]);
        }
    }
    if let Some(t) = a.qp_timeout {
        v.extend(["--qp-timeout".into(), t.to_string()]);
    }
    v.extend(["--format".into(), a.format.clone()]);
    if let Some(j) = &a.junit {
        v.extend(["--junit".into(), j.display().to_string()]);
    }
    v.into_iter().map(Into::into).collect()
}

pub fn run_rdma(g: &GlobalArgs, argv: &[String]) -> Result<u8, UsageError> {
    let a = match <RdmaArgs as clap::Parser>::try_parse_from(
        std::iter::once("daqtune selftest rdma".to_string()).chain(argv.iter().cloned()),
    ) {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            return Ok(if e.use_stderr() { 2 } else { 0 });
        }
    };
    let host = open_host(g)?;
    let lp = choose_profile(&host, g)?;
    if a.dev.is_none() && a.peer.is_none() {
        let why = "no RDMA devices named: give --dev A --peer-dev B (two ports cabled back to back, or rxe devices on a veth pair) or --peer HOST:PORT; ports are never picked automatically";
        let modes = [
            daqtune_selftest::engine::Mode::Write,
            daqtune_selftest::engine::Mode::Send,
        ];
        let r = daqtune_rdma::launcher::skip_report(&hostname(), why, &modes);
        print!(
            "{}",
            if a.format == "json" {
                r.to_json() + "\n"
            } else {
                r.to_text()
            }
        );
        return Ok(0);
    }
    let args = rdma_helper_args(&a, lp.profile.selftest.message_size as usize);
    let code = daqtune_rdma::launcher::run_helper(&args, a.format == "json");
    Ok(u8::try_from(code).unwrap_or(2))
}

#[cfg(test)]
mod rdma_tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn helper_args_carry_devices_and_profile_size() {
        let a = RdmaArgs::try_parse_from([
            "x",
            "--dev",
            "rxe0",
            "--peer-dev",
            "rxe1",
            "--duration",
            "2",
        ])
        .expect("parse");
        let v: Vec<String> = rdma_helper_args(&a, 8192)
            .into_iter()
            .map(|s| s.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            v,
            [
                "--dev",
                "rxe0",
                "--peer-dev",
                "rxe1",
                "--test",
                "write,send,pingpong",
                "--duration",
                "2",
                "--size",
                "8192",
                "--format",
                "text"
            ]
        );
        assert!(RdmaArgs::try_parse_from(["x", "--peer-dev", "a", "--peer", "h:1"]).is_err());
    }
}
