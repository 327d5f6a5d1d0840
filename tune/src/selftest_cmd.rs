//! `daqtune selftest`: the data-path self-test (selftest crate) with the active profile's
//! values (message size, MTU, UDP rate and loss limit, TCP minimum, data cores).

use crate::cli::GlobalArgs;
use daqtune_engine::commands::choose_profile;
use daqtune_engine::context::Context;
use daqtune_engine::hostroot::open_host;
use daqtune_engine::profile::LoadedProfile;
use daqtune_engine::qualify;
use daqtune_engine::UsageError;
use daqtune_selftest::command::Defaults;
use daqtune_selftest::reference::Reference;
use daqtune_selftest::Thresholds;

pub use crate::selftest_cli::SelftestArgs;

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
            max_udp_loss_pct: p.selftest.max_udp_loss_pct,
            ..Thresholds::default()
        },
        isolated_cpus: isolated,
        references: references(&p.selftest),
        floor: p.selftest.floor,
    };
    (d, note)
}

/// The profile's reference figures for the self-test: `selftest.reference` with its shapes
/// (the loader has mapped the deprecated `min_tcp_gbps` / `reference_gbps` onto it).
pub fn references(st: &daqtune_engine::profile::SelftestProfile) -> Vec<Reference> {
    let split = |path: &str| {
        let (e, m) = path.split_once('.').unwrap_or((path, ""));
        (e.to_string(), m.to_string())
    };
    st.reference
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
        .collect()
}

/// qualify's self-tests as children of this binary (`current_exe() selftest ...`): a signal or a
/// crash in a data path cannot leave qualify holding namespaces.
pub struct ChildSelftest;

impl qualify::SelftestRunner for ChildSelftest {
    fn run(
        &self,
        req: &qualify::SelftestRequest,
    ) -> Result<daqtune_report::selftest::Report, qualify::SelftestRunError> {
        let exe = std::env::current_exe().map_err(qualify::SelftestRunError::Exe)?;
        let out = std::process::Command::new(exe)
            .args(req.args())
            .output()
            .map_err(qualify::SelftestRunError::Spawn)?;
        qualify::read_child_report(&req.engine, &out.stdout, &out.stderr, out.status.code())
    }
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
    let code = daqtune_selftest::command::run(&args.options(), &d);
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
        // No absolute TCP minimum besides the references (one floor mechanism).
        assert_eq!(d.thresholds.min_tcp_gbps, 0.0);
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

    /// Issue 46: one floor mechanism. A profile's legacy `min_tcp_gbps: 40` still holds a TCP
    /// run to 40 Gb/s, through the references: 30 Gb/s on a 100 Gb/s port fails, 50 passes;
    /// `reference_gbps` keeps its shapeless figure. Each is said with file:line.
    #[test]
    fn legacy_floor_keys_become_references() {
        use daqtune_selftest::engine::Mode;
        use daqtune_selftest::reference::{assess, Link};
        use daqtune_selftest::report::{EngineResult, Status};
        let lp = profile::load_source(
            "lab.yaml",
            "name: lab\nextends: generic-dgpu\nselftest:\n  min_tcp_gbps: 40\n  reference_gbps:\n    rdma.write: 95\n",
        )
        .expect("legacy keys still load");
        let refs = references(&lp.profile.selftest);
        let tcp = refs
            .iter()
            .find(|r| r.engine == "socket" && r.mode == "tcp" && r.message_size.is_none())
            .expect("min_tcp_gbps as a socket.tcp reference");
        assert_eq!((tcp.gbps, tcp.floor), (Some(40.0), Some(1.0)));
        let w = refs
            .iter()
            .find(|r| r.engine == "rdma" && r.mode == "write" && r.gbps == Some(95.0))
            .expect("reference_gbps as a reference");
        assert_eq!((w.message_size, w.streams, w.floor), (None, None, None));
        // generic-dgpu's own references stay beside them.
        assert!(refs.iter().any(|r| r.engine == "dpdk"), "{refs:?}");
        let link = Link {
            speed_mbps: Some(100_000),
            source: "test".into(),
            mtu: Some(9000),
            pcie: None,
        };
        for (gbps, want) in [(30.0, Status::Fail), (50.0, Status::Pass)] {
            let mut r = EngineResult::new("socket", Mode::Tcp, "ports");
            r.message_size = 8192;
            r.gbps = gbps;
            r.packets = 1000;
            r.status = Status::Pass;
            assess(&mut r, &link, &refs, lp.profile.selftest.floor);
            assert_eq!(r.status, want, "{gbps} Gb/s: {:?}", r.reference);
        }
        assert_eq!(lp.deprecations.len(), 2, "{:?}", lp.deprecations);
        assert!(
            lp.deprecations[0]
                .starts_with("lab.yaml:4:3: `selftest.min_tcp_gbps: 40` is deprecated")
                && lp.deprecations[0].contains("write instead"),
            "{}",
            lp.deprecations[0]
        );
        assert!(
            lp.deprecations[1].starts_with("lab.yaml:5:3: `selftest.reference_gbps` is deprecated")
                && lp.deprecations[1].contains("{path: rdma.write, gbps: 95"),
            "{}",
            lp.deprecations[1]
        );
    }

    /// Issue 44: what qualify asks of `daqtune selftest` (`SelftestRequest::args`, which the
    /// spawning runner passes as it is) is this binary's command line: each engine, with and
    /// without the soak's GPU sink, parses, and to the values asked for.
    #[test]
    fn qualify_requests_parse_as_the_selftest_command_line() {
        use crate::cli::{Cli, Command};
        use clap::Parser;
        let spark = profile::load("dgx-spark").expect("spark").profile;
        for engine in qualify::ENGINES {
            for gpu_sink in [false, true] {
                let req = qualify::SelftestRequest {
                    engine: engine.to_string(),
                    profile: Some("dgx-spark".into()),
                    duration: 2.5,
                    veth: gpu_sink,
                    gpu_sink,
                    shape: qualify::shape_args(&spark, engine, gpu_sink),
                };
                let argv: Vec<String> = std::iter::once("daqtune".to_string())
                    .chain(req.args())
                    .collect();
                if let Some((g, args)) = crate::legacy::split_rdma_invocation(&argv) {
                    assert_eq!(*engine, "rdma");
                    assert_eq!(g.profile.as_deref(), Some("dgx-spark"));
                    let a = crate::rdma_cmd::RdmaArgs::try_parse_from(
                        std::iter::once("daqtune selftest rdma".to_string()).chain(args),
                    )
                    .unwrap_or_else(|e| panic!("{argv:?}: {e}"));
                    assert_eq!((a.duration, a.size), (2.5, Some(8_388_608)));
                    assert_eq!(a.format, "json");
                    continue;
                }
                let cli = Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
                let g = cli.command.globals().over(&cli.global);
                assert_eq!(g.profile.as_deref(), Some("dgx-spark"), "{argv:?}");
                let Command::Selftest(c) = cli.command else {
                    panic!("{argv:?}: not the selftest command");
                };
                let a = &c.args;
                assert_eq!(a.duration, 2.5, "{argv:?}");
                assert!(a.no_progress, "{argv:?}");
                assert_eq!(a.format, crate::selftest_cli::Format::Json, "{argv:?}");
                assert_eq!(
                    a.message_size,
                    Some(if *engine == "dpdk" { 4096 } else { 8192 })
                );
                if *engine == "socket" {
                    assert_eq!((a.veth, a.loopback), (gpu_sink, !gpu_sink), "{argv:?}");
                    assert_eq!(a.gpu.as_deref(), gpu_sink.then_some("0"), "{argv:?}");
                    assert_eq!(a.streams, if gpu_sink { 1 } else { 4 }, "{argv:?}");
                }
            }
        }
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

    /// The flags reach the library's options: `--gpu-memory`'s spellings (docs/selftest.md:
    /// `host_pinned`, `copy`, `device`; `host-pinned` as an alias), `--mode`'s list and the
    /// defaults the help names.
    #[test]
    fn flags_become_the_library_options() {
        use daqtune_report::gpu::MemoryKind;
        use daqtune_selftest::command::{EngineChoice, Format};
        use daqtune_selftest::engine::Mode;
        let parse = |args: &[&str]| {
            <SelftestHarness as clap::Parser>::try_parse_from(
                std::iter::once("x").chain(args.iter().copied()),
            )
            .map(|h| h.args.options())
        };
        for (flag, kind) in [
            ("host_pinned", MemoryKind::HostPinned),
            ("host-pinned", MemoryKind::HostPinned),
            ("copy", MemoryKind::Copy),
            ("device", MemoryKind::Device),
        ] {
            let o = parse(&["--gpu", "0", "--gpu-memory", flag]).expect(flag);
            assert_eq!(o.gpu_memory, kind, "{flag}");
        }
        assert!(parse(&["--gpu", "0", "--gpu-memory", "pinned"]).is_err());
        let o = parse(&[]).expect("no flags");
        assert_eq!(o.engine, EngineChoice::Socket);
        assert_eq!(o.format, Format::Text);
        assert_eq!(
            (o.duration, o.streams, o.listen.as_str()),
            (3.0, 1, "0.0.0.0:5299")
        );
        assert_eq!((o.gpu_memory, o.gpu_batch), (MemoryKind::Copy, 8 << 20));
        assert_eq!((o.loss, o.precision, o.trial_duration), (0.0, 2.0, 2.0));
        assert!(o.mode.is_empty() && o.rcvbuf.is_none() && !o.find_max);
        let o = parse(&[
            "dpdk", "--mode", "udp,tcp", "--rcvbuf", "4M", "--format", "junit",
        ])
        .expect("flags");
        assert_eq!(o.engine, EngineChoice::Dpdk);
        assert_eq!(o.mode, [Mode::Udp, Mode::Tcp]);
        assert_eq!(o.rcvbuf, Some(4 << 20));
        assert_eq!(o.format, Format::Junit);
    }

    #[derive(clap::Parser)]
    struct SelftestHarness {
        #[command(flatten)]
        args: SelftestArgs,
    }
}
