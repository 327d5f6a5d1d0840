//! `daqtune-dpdk`: runs the DPDK self-test and prints one JSON record on stdout.
//!
//! Usage: `daqtune-dpdk [--spec FILE|-] [flags]` (flags override the spec; see spec.rs) or
//! `daqtune-dpdk --probe` (what this build supports, as JSON). Exit codes: 0 pass, 1 fail,
//! 2 usage, 3 skipped (reason in the JSON), 4 error.

use daqtune_dpdk::spec::{self, exit, DpdkOutput, DpdkRunSpec};
use std::io::Read;

fn usage(msg: &str) -> ! {
    eprintln!("daqtune-dpdk: {msg}");
    eprintln!(
        "usage: daqtune-dpdk [--spec FILE|-] [--veth | --tx-port BDF --rx-port BDF] [--duration S] \
         [--message-size N] [--pps N | --rate GBPS | --unpaced] [--main-cpu N] [--tx-cpu N] [--rx-cpu N] \
         [--mbufs N] [--descriptors N] [--max-loss PCT] [--no-reserve] [--no-rps] [--log-level L] \
         [--find-max [--loss PCT] [--precision PCT] [--trial-duration S] [--max-trials N]]\n       daqtune-dpdk --probe | --dry-run [flags] | --veth-exec [--mtu N] [--rps-cpu N] -- CMD..."
    );
    std::process::exit(exit::USAGE)
}

fn load_spec(args: &[String]) -> Result<(DpdkRunSpec, Vec<String>), String> {
    let mut base = DpdkRunSpec::default();
    let mut rest = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--spec" {
            let path = it.next().ok_or("--spec needs a file (or - for stdin)")?;
            let text = if path == "-" {
                let mut s = String::new();
                std::io::stdin()
                    .read_to_string(&mut s)
                    .map_err(|e| format!("reading the spec from stdin: {e}"))?;
                s
            } else {
                std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?
            };
            base = serde_json::from_str(&text).map_err(|e| format!("spec: {e}"))?;
        } else {
            rest.push(a.clone());
        }
    }
    let spec = spec::parse_flags(&rest, base)?;
    Ok((spec, rest))
}

/// `--veth-exec [--mtu N] [--rps-cpu N] -- CMD ARGS...`: runs CMD in a private network namespace holding the
/// veth pair dqt0 <-> dqt1 (the topology of `--veth`), for comparisons such as dpdk-testpmd on
/// the same vdevs (bench/dpdk_vs_testpmd.sh) without iproute2. The namespace ends with CMD.
fn veth_exec(args: &[String]) -> ! {
    use std::os::unix::process::CommandExt;
    let mut mtu: u32 = 9000;
    let mut rps_cpu: Option<usize> = None;
    let mut it = args.iter();
    let mut cmd: Vec<String> = Vec::new();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--mtu" => {
                mtu = it
                    .next()
                    .and_then(|v| v.parse().ok())
                    .filter(|m| (68..=9000).contains(m))
                    .unwrap_or_else(|| usage("--mtu needs a number in 68..9000"))
            }
            "--rps-cpu" => {
                rps_cpu = Some(
                    it.next()
                        .and_then(|v| v.parse().ok())
                        .unwrap_or_else(|| usage("--rps-cpu needs a CPU number")),
                )
            }
            "--" => {
                cmd = it.by_ref().cloned().collect();
                break;
            }
            other => usage(&format!(
                "--veth-exec: unexpected {other:?} (put the command after --)"
            )),
        }
    }
    if cmd.is_empty() {
        usage("--veth-exec needs a command after --");
    }
    if let Err(e) = daqtune_dpdk::netns::enter_private_netns() {
        eprintln!("daqtune-dpdk: cannot create a private network namespace: {e}");
        std::process::exit(exit::SKIP);
    }
    if let Err(e) = daqtune_dpdk::netns::create_veth_pair("dqt0", "dqt1", mtu) {
        eprintln!("daqtune-dpdk: cannot create the veth pair: {e}");
        std::process::exit(exit::ERROR);
    }
    if let Some(cpu) = rps_cpu {
        if let Err(e) = daqtune_dpdk::netns::steer_rx_to("dqt1", cpu) {
            eprintln!("daqtune-dpdk: receive steering to CPU {cpu} not set: {e}");
        }
    }
    let err = std::process::Command::new(&cmd[0]).args(&cmd[1..]).exec();
    eprintln!("daqtune-dpdk: cannot run {}: {err}", cmd[0]);
    std::process::exit(exit::ERROR)
}

fn print(out: &DpdkOutput) {
    match serde_json::to_string_pretty(out) {
        Ok(s) => daqtune_selftest::report::emit(&format!("{s}\n")),
        Err(e) => eprintln!("daqtune-dpdk: cannot render the result: {e}"),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--probe") {
        let v = serde_json::json!({
            "dpdk_compiled": daqtune_dpdk::DPDK_COMPILED,
            "dpdk_version": daqtune_dpdk::dpdk_version(),
            "schema": spec::OUTPUT_SCHEMA,
        });
        daqtune_selftest::report::emit(&format!("{v}\n"));
        return;
    }
    if args.first().map(String::as_str) == Some("--veth-exec") {
        veth_exec(&args[1..]);
    }
    if args.iter().any(|a| a == "-h" || a == "--help") {
        usage("DPDK data-path self-test");
    }
    let dry_run = args.iter().any(|a| a == "--dry-run");
    let args: Vec<String> = args.into_iter().filter(|a| a != "--dry-run").collect();
    let (spec, _) = load_spec(&args).unwrap_or_else(|e| usage(&e));
    if dry_run {
        // The EAL arguments a run would use (bench scripts reuse the vdev geometry).
        let plan = spec::eal_plan(
            &spec,
            "daqtune-dry-run",
            &daqtune_selftest::sys::allowed_cpus(),
        )
        .unwrap_or_else(|e| usage(&e));
        match daqtune_dpdk::eal_args::eal_args(&plan) {
            Ok(a) => daqtune_selftest::report::emit(&format!(
                "{}\n",
                serde_json::json!({ "eal_args": a, "mtu": daqtune_dpdk::eal_args::mtu_for_frame(plan.frame_len) })
            )),
            Err(e) => usage(&e.to_string()),
        }
        return;
    }
    let (out, code) = run(&spec);
    print(&out);
    // A report that standard output refused fails the run whatever it found.
    std::process::exit(if daqtune_selftest::report::emit_failed() {
        2
    } else {
        code
    });
}

#[cfg(feature = "dpdk")]
fn run(spec: &DpdkRunSpec) -> (DpdkOutput, i32) {
    // Ports stopped, EAL cleaned up and hugepages given back on SIGINT/SIGTERM/SIGHUP too.
    if let Err(e) = daqtune_probe::signals::watch_termination() {
        eprintln!("daqtune-dpdk: signal handlers: {e}");
    }
    daqtune_dpdk::runner::run(spec)
}

#[cfg(not(feature = "dpdk"))]
fn run(spec: &DpdkRunSpec) -> (DpdkOutput, i32) {
    use daqtune_selftest::{EngineResult, Mode};
    let topo = match spec.topology {
        spec::Topology::Veth => "veth",
        spec::Topology::Ports => "ports",
    };
    (
        DpdkOutput::new(
            EngineResult::skipped(
                "dpdk",
                Mode::Raw,
                topo,
                "DPDK support was not compiled in (build daqtune-dpdk with --features dpdk and libdpdk-dev installed)",
            ),
            None,
        ),
        exit::SKIP,
    )
}
