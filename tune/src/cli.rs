//! The command-line definition. Help, completions and the man page are generated from it.

use crate::gate::FailOn;
use crate::report::Format;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "daqtune",
    version,
    about = "Check, tune and prove GPU + NIC data-acquisition hosts (IGX Orin, DGX Spark, servers with ConnectX)",
    long_about = None,
    after_help = "tune_system.py habits work too: `daqtune --check all`, `--check mrrs`, `--set mrrs`,\n`--check schematic --schematic-output x.svg`."
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Args)]
pub struct GlobalArgs {
    /// Read (and write) the host under DIR instead of / (a fixture or a snapshot).
    #[arg(long, global = true, value_name = "DIR", env = "DAQTUNE_ROOT")]
    pub root: Option<PathBuf>,
    /// Profile: a built-in name (igx-orin, dgx-spark, generic-dgpu) or a YAML file.
    #[arg(long, short = 'p', global = true, value_name = "NAME|FILE")]
    pub profile: Option<String>,
}

/// Recognises `daqtune [GLOBAL...] selftest rdma [ARGS...]` (the RDMA engine's flags are its
/// own, see `selftest_cmd::RdmaArgs`) and splits off the global options, wherever they stand.
/// `--root` also comes from `DAQTUNE_ROOT`, as for every other command.
pub fn split_rdma_invocation(argv: &[String]) -> Option<(GlobalArgs, Vec<String>)> {
    let mut g = GlobalArgs {
        root: std::env::var_os("DAQTUNE_ROOT").map(Into::into),
        profile: None,
    };
    let mut words = Vec::new();
    let mut it = argv.iter().skip(1);
    while let Some(a) = it.next() {
        if let Some(v) = a.strip_prefix("--root=") {
            g.root = Some(v.into());
        } else if let Some(v) = a.strip_prefix("--profile=") {
            g.profile = Some(v.to_string());
        } else if a == "--root" {
            g.root = it.next().map(Into::into);
        } else if a == "--profile" || a == "-p" {
            g.profile = it.next().cloned();
        } else {
            words.push(a.clone());
        }
    }
    (words.first().map(String::as_str) == Some("selftest")
        && words.get(1).map(String::as_str) == Some("rdma"))
    .then(|| (g, words.split_off(2)))
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check this host against the profile and print every verdict with its fix.
    Check(CheckArgs),
    /// Print the documentation of a check.
    Explain(ExplainArgs),
    /// List or show the built-in profiles.
    Profiles(ProfilesArgs),
    /// Show what `apply` would change: runtime writes and file diffs.
    Plan(crate::apply::PlanArgs),
    /// Change the host to its profile (journaled; undo with `revert`).
    Apply(crate::apply::ApplyArgs),
    /// Undo every `apply` recorded in the journal, newest first.
    Revert(crate::apply::RevertArgs),
    /// Print one persistent artifact (grub drop-in, unit, udev rule, ...) for image builders.
    Generate(crate::apply::GenerateArgs),
    /// Prove the data path with real traffic (socket: TCP and UDP over a veth pair, two
    /// cabled ports, or loopback; dpdk; and `selftest rdma`, whose own options `daqtune
    /// selftest rdma --help` lists). Needs root for namespaces.
    Selftest(Box<crate::selftest_cmd::SelftestArgs>),
    /// GPU / NIC / NVMe topology matrix (like `nvidia-smi topo -m`) and the PCIe tree as SVG.
    Topo(crate::topo::TopoArgs),
    /// Hardware-qualification gate for CI: checks (level 1), + short self-tests (2), + soak (3).
    Qualify(crate::qualify::QualifyArgs),
    /// Capture what the checks read as a host root (a directory or a .tar.zst).
    Snapshot(SnapshotArgs),
    /// Compare two reports (JSON) or snapshots, check by check.
    Diff(DiffArgs),
    /// Print shell completions.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff).
    Man,
}

#[derive(Debug, Clone, Args)]
pub struct CheckArgs {
    /// Check ids (or tune_system.py names) to run; all when none. `all` means all.
    #[arg(value_name = "ID")]
    pub ids: Vec<String>,
    #[arg(long, short = 'f', value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Exit 1 when any verdict is at or above this level.
    #[arg(long, value_enum, default_value_t = FailOn::Fail)]
    pub fail_on: FailOn,
    /// Also write a JUnit report to FILE.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Also write the JSON report to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Print every verdict (passing ones are folded per check otherwise).
    #[arg(long, short = 'v')]
    pub verbose: bool,
    /// Treat the profile's required checks as a gate: one that ends in skip or error fails.
    #[arg(long)]
    pub gate: bool,
    /// Also check the host against this DAQIRI configuration (the app.* checks): its cores,
    /// memory regions, interfaces and packet sizes, each finding with its YAML line.
    #[arg(long, value_name = "APP.yaml")]
    pub config: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct SnapshotArgs {
    /// Output: a new directory, or FILE.tar.zst.
    #[arg(short = 'o', long, value_name = "DIR|FILE.tar.zst")]
    pub output: PathBuf,
    /// Replace serial numbers, MACs, GUIDs and the hostname, consistently.
    #[arg(long)]
    pub redact: bool,
}

#[derive(Debug, Clone, Args)]
pub struct DiffArgs {
    /// A JSON report, a snapshot directory or a .tar.zst snapshot.
    pub before: PathBuf,
    pub after: PathBuf,
    /// Print the differences as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Args)]
pub struct ExplainArgs {
    /// Check id or tune_system.py name.
    #[arg(required_unless_present = "list")]
    pub id: Option<String>,
    /// List every check id with its title.
    #[arg(long)]
    pub list: bool,
    /// With --list: print the catalogue as a Markdown table.
    #[arg(long, requires = "list")]
    pub markdown: bool,
}

#[derive(Debug, Clone, Args)]
pub struct ProfilesArgs {
    #[command(subcommand)]
    pub action: Option<ProfilesAction>,
}

#[derive(Debug, Clone, Subcommand)]
pub enum ProfilesAction {
    /// List the built-in profiles.
    List,
    /// Print a profile after `extends:` is merged (YAML).
    Show { name: String },
}

/// Rewrite tune_system.py's flags into subcommands before clap sees them.
pub fn translate_legacy(args: Vec<String>) -> Vec<String> {
    let Some(first) = args.get(1) else {
        return args;
    };
    let map_check = |name: &str| -> Vec<String> {
        match name {
            "all" => vec![],
            "mrrs" => vec!["pcie.mrrs".into()],
            "mps" => vec!["pcie.mps".into()],
            "topo" | "topology" => vec!["pcie.topology".into()],
            "mtu" => vec!["nic.mtu".into()],
            "cmdline" => vec!["kernel.cmdline".into()],
            "cpu-freq" => vec!["cpu.governor".into()],
            "gpu-clocks" => vec!["gpu.clocks".into()],
            "bar1" | "bar1-size" => vec!["gpu.bar1".into()],
            other => vec![other.to_string()],
        }
    };
    let mut rest: Vec<String> = args[2..].to_vec();
    let value_of = |flag: &str, inline: Option<&str>, rest: &mut Vec<String>| -> Option<String> {
        if let Some(v) = inline {
            return Some(v.to_string());
        }
        let _ = flag;
        if rest.is_empty() {
            None
        } else {
            Some(rest.remove(0))
        }
    };
    let (flag, inline) = match first.split_once('=') {
        Some((f, v)) => (f.to_string(), Some(v.to_string())),
        None => (first.clone(), None),
    };
    match flag.as_str() {
        "--check" => {
            let Some(name) = value_of("--check", inline.as_deref(), &mut rest) else {
                return args;
            };
            if name == "schematic" {
                let mut out = vec![args[0].clone(), "topo".into()];
                let mut it = rest.into_iter();
                while let Some(a) = it.next() {
                    if a == "--schematic-output" {
                        out.push("--svg".into());
                        if let Some(v) = it.next() {
                            out.push(v);
                        }
                    } else if let Some(v) = a.strip_prefix("--schematic-output=") {
                        out.push(format!("--svg={v}"));
                    } else {
                        out.push(a);
                    }
                }
                return out;
            }
            let mut out = vec![args[0].clone(), "check".into()];
            out.extend(map_check(&name));
            out.extend(rest);
            out
        }
        "--set" => {
            let Some(name) = value_of("--set", inline.as_deref(), &mut rest) else {
                return args;
            };
            let mut out = vec![args[0].clone(), "apply".into(), "--only".into()];
            out.extend(map_check(&name));
            out.extend(rest);
            out
        }
        _ => args,
    }
}

#[cfg(test)]
mod tests {
    use super::split_rdma_invocation;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn rdma_invocation_with_globals_anywhere() {
        let (g, rest) =
            split_rdma_invocation(&argv("daqtune --profile igx-orin selftest rdma --dev rxe0"))
                .expect("rdma");
        assert_eq!(g.profile.as_deref(), Some("igx-orin"));
        assert_eq!(rest, argv("--dev rxe0"));
        let (g, rest) = split_rdma_invocation(&argv(
            "daqtune selftest rdma --tx-if a -p dgx-spark --rx-if b --root=/r",
        ))
        .expect("rdma");
        assert_eq!(g.profile.as_deref(), Some("dgx-spark"));
        assert_eq!(g.root.as_deref(), Some(std::path::Path::new("/r")));
        assert_eq!(rest, argv("--tx-if a --rx-if b"));
        assert!(split_rdma_invocation(&argv("daqtune selftest socket --veth")).is_none());
        assert!(split_rdma_invocation(&argv("daqtune --profile x check")).is_none());
        assert!(split_rdma_invocation(&argv("daqtune")).is_none());
    }

    use super::*;

    fn v(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn legacy_flags() {
        assert_eq!(
            translate_legacy(v("daqtune --check all")),
            v("daqtune check")
        );
        assert_eq!(
            translate_legacy(v("daqtune --check mrrs")),
            v("daqtune check pcie.mrrs")
        );
        assert_eq!(
            translate_legacy(v("daqtune --check=mtu --format json")),
            v("daqtune check nic.mtu --format json")
        );
        assert_eq!(
            translate_legacy(v("daqtune --set mrrs")),
            v("daqtune apply --only pcie.mrrs")
        );
        assert_eq!(
            translate_legacy(v("daqtune --check schematic --schematic-output x.svg")),
            v("daqtune topo --svg x.svg")
        );
        assert_eq!(translate_legacy(v("daqtune check")), v("daqtune check"));
        assert_eq!(translate_legacy(v("daqtune --check")), v("daqtune --check"));
    }

    #[test]
    fn cli_definition_is_valid() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
