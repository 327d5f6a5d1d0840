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
         [--mbufs N] [--descriptors N] [--max-loss PCT] [--no-reserve] [--log-level L]\n       daqtune-dpdk --probe"
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

fn print(out: &DpdkOutput) {
    match serde_json::to_string_pretty(out) {
        Ok(s) => println!("{s}"),
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
        println!("{v}");
        return;
    }
    if args.iter().any(|a| a == "-h" || a == "--help") {
        usage("DPDK data-path self-test");
    }
    let (spec, _) = load_spec(&args).unwrap_or_else(|e| usage(&e));
    let (out, code) = run(&spec);
    print(&out);
    std::process::exit(code);
}

#[cfg(feature = "dpdk")]
fn run(spec: &DpdkRunSpec) -> (DpdkOutput, i32) {
    daqtune_dpdk::signals::install();
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
