//! The command-line definition. Help, completions and the man page are generated from it. Each
//! struct converts into the engine's plain option struct (`daqtune_engine` has no clap).

use clap::{Args, Parser, Subcommand, ValueEnum};
use daqtune_engine::fleet::report_cmd::ReportOptions;
use daqtune_engine::run_info::parse_duration;
use daqtune_engine::{apply, gate, qualify, report, GlobalOptions};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Parser)]
#[command(
    name = "daqtune",
    version,
    about = "Check, tune and prove GPU + NIC data-acquisition hosts (IGX Orin, DGX Spark, servers with ConnectX)",
    long_about = None,
    after_help = "Outputs: -f/--format picks the format, -o FILE writes the main output instead of stdout,\n\
--json/--junit/--prometheus/--nfd/--svg FILE add files. Every file is replaced atomically (mode\n\
0644); a symlink (/dev/stdout) is written through, never replaced. A closed pipe ends a command\n\
quietly; a failed write to stdout exits 2. Empty DAQTUNE_* variables count as unset.\n\n\
Options go before or after the subcommand (`daqtune -f json check`). Lists of check ids take\n\
commas, spaces or both (`check nic.mtu,pcie.mrrs`, `--only \"hugepages nic.mtu\"`).\n\n\
tune_system.py habits work too: `daqtune --check all`, `--check mrrs`, `--set mrrs` (asks\n\
nothing; runtime only where no daqtune is installed), `--check schematic` (pcie_schematic.svg;\n\
--schematic-output x.svg)."
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// The options that choose the host and the profile. Given before the subcommand
/// (`daqtune --root X check`) they reach every command; each subcommand also takes, after its
/// name, those that mean something to it (and its `--help` lists only those). An environment
/// variable that is set but empty (`DAQTUNE_ROOT=` in /etc/default/daqtune) counts as unset.
#[derive(Debug, Clone, Default, Args)]
pub struct GlobalArgs {
    /// Read (and write) the host under DIR instead of / (a fixture or a snapshot).
    /// Default: $DAQTUNE_ROOT.
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// Profile: a built-in name (igx-orin, dgx-spark, generic-dgpu) or a YAML file.
    /// Default: $DAQTUNE_PROFILE, else the one detected.
    #[arg(long, short = 'p', value_name = "NAME|FILE")]
    pub profile: Option<String>,
    /// Read the GPUs' CUDA attributes afresh (cuInit) instead of from this boot's cache in
    /// /run/daqtune; the fresh result replaces the cache.
    #[arg(long)]
    pub no_cache: bool,
}

impl GlobalArgs {
    pub fn engine(&self) -> GlobalOptions {
        GlobalOptions {
            root: self.root.clone(),
            profile: self.profile.clone(),
            no_cache: self.no_cache,
        }
    }

    /// `self` (given after the subcommand) over `top` (before it) over the environment.
    pub fn over(&self, top: &GlobalArgs) -> GlobalArgs {
        let env = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        GlobalArgs {
            root: self
                .root
                .clone()
                .or_else(|| top.root.clone())
                .or_else(|| env("DAQTUNE_ROOT").map(PathBuf::from)),
            profile: self
                .profile
                .clone()
                .or_else(|| top.profile.clone())
                .or_else(|| {
                    env("DAQTUNE_PROFILE")
                        .map(|p| p.to_string_lossy().trim().to_string())
                        .filter(|p| !p.is_empty())
                }),
            no_cache: self.no_cache || top.no_cache,
        }
    }
}

/// `--root` alone, for the commands that read a host but no profile (topo, revert).
#[derive(Debug, Clone, Default, Args)]
pub struct RootArg {
    /// Read (and write) the host under DIR instead of / (a fixture or a snapshot).
    /// Default: $DAQTUNE_ROOT.
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
}

/// `--profile` alone, for the commands that judge with a profile but read no host of their
/// own (diff evaluates its snapshots with it; selftest takes its limits from it).
#[derive(Debug, Clone, Default, Args)]
pub struct ProfileArg {
    /// Profile: a built-in name (igx-orin, dgx-spark, generic-dgpu) or a YAML file.
    /// Default: $DAQTUNE_PROFILE, else the one detected.
    #[arg(long, short = 'p', value_name = "NAME|FILE")]
    pub profile: Option<String>,
}

impl From<&RootArg> for GlobalArgs {
    fn from(r: &RootArg) -> Self {
        GlobalArgs {
            root: r.root.clone(),
            ..Default::default()
        }
    }
}

impl From<&ProfileArg> for GlobalArgs {
    fn from(p: &ProfileArg) -> Self {
        GlobalArgs {
            profile: p.profile.clone(),
            ..Default::default()
        }
    }
}

/// `daqtune selftest`: the self-test's own arguments and the profile its limits come from.
#[derive(Debug, Clone, Args)]
pub struct SelftestCmd {
    #[command(flatten)]
    pub profile: ProfileArg,
    #[command(flatten)]
    pub args: crate::selftest_cmd::SelftestArgs,
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
    Plan(PlanArgs),
    /// Change the host to its profile (journaled; undo with `revert`).
    Apply(ApplyArgs),
    /// Undo every `apply` recorded in the journal, newest first (or one run: --run, or one
    /// setting's changes: --only).
    Revert(RevertArgs),
    /// Print one persistent artifact (grub drop-in, unit, udev rule, ...) for image builders.
    Generate(GenerateArgs),
    /// What daqtune has applied and whether it still holds: the profile and apply runs in
    /// effect, what waits for a reboot, and drift (a setting changed since it was applied).
    /// Exit 0: no drift; 1: drift; 2: could not run.
    Status(StatusArgs),
    /// The GPU facts the checks judge (BAR1, clocks, persistence, GPUDirect and dma-buf,
    /// NUMA, PCIe link, NVLink), each value with its source (NVML, CUDA, cache, sysfs).
    Gpu(GpuArgs),
    /// Each port's drop and error counters with their source (interface statistics, the
    /// driver's `ethtool -S` counters, ethtool netlink), without the ethtool tool; with
    /// --interval, what rose between two reads.
    Nic(NicArgs),
    /// Prove the data path with real traffic (socket: TCP and UDP over a veth pair, two
    /// cabled ports, or loopback; dpdk; and `selftest rdma`, whose own options `daqtune
    /// selftest rdma --help` lists). Needs root for namespaces.
    Selftest(Box<SelftestCmd>),
    /// GPU / NIC / NVMe topology matrix (like `nvidia-smi topo -m`) and the PCIe tree as SVG.
    Topo(TopoArgs),
    /// Hardware-qualification gate for CI: checks (level 1), + short self-tests (2), + soak (3).
    Qualify(QualifyArgs),
    /// Capture what the checks read as a host root (a directory or a .tar.zst).
    Snapshot(SnapshotArgs),
    /// Turn captures (lspci -vv text, lspci -t trees, nvidia-smi -q / -q -x, an
    /// nvidia-bug-report.log(.gz), a sosreport) into a host root that `--root` reads;
    /// `--root` also takes a capture file or a directory of them directly.
    Import(ImportArgs),
    /// Compare two reports (JSON) or snapshots, check by check.
    Diff(DiffArgs),
    /// Write the fleet outputs (node_exporter textfile, NFD feature file, JSON facts, JUnit)
    /// from one check run, atomically; the daqtune-report timer runs it from /etc/default/daqtune.
    Report(ReportArgs),
    /// Print shell completions.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page, daqtune(8), as roff: every subcommand with its options.
    Man,
    /// Decide a pending kernel-argument trial on this boot (run by daqtune-trial.service):
    /// commit the arguments when the boot verifies, else keep the previous default.
    #[command(hide = true)]
    TrialVerify(TrialVerifyArgs),
}

#[derive(Debug, Clone, Args)]
pub struct TrialVerifyArgs {
    #[command(flatten)]
    pub root: RootArg,
    #[arg(long, value_name = "DIR", hide = true)]
    pub state_dir: Option<String>,
}

impl Command {
    /// The host and profile options given after the subcommand's name (none for the commands
    /// that take none).
    pub fn globals(&self) -> GlobalArgs {
        match self {
            Command::Check(a) => a.host.clone(),
            Command::Plan(a) => a.host.clone(),
            Command::Apply(a) => a.host.clone(),
            Command::Generate(a) => a.host.clone(),
            Command::Qualify(a) => a.host.clone(),
            Command::Snapshot(a) => a.host.clone(),
            Command::Report(a) => a.host.clone(),
            Command::Revert(a) => (&a.root).into(),
            Command::Status(a) => a.host.clone(),
            Command::Gpu(a) => GlobalArgs {
                root: a.root.root.clone(),
                no_cache: a.no_cache,
                ..Default::default()
            },
            Command::Nic(a) => (&a.root).into(),
            Command::Topo(a) => (&a.root).into(),
            Command::TrialVerify(a) => (&a.root).into(),
            Command::Diff(a) => (&a.profile).into(),
            Command::Selftest(a) => (&a.profile).into(),
            Command::Explain(_)
            | Command::Import(_)
            | Command::Profiles(_)
            | Command::Completions { .. }
            | Command::Man => GlobalArgs::default(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Json,
    Junit,
    Prometheus,
    /// Node Feature Discovery feature file (labels, expiry).
    Nfd,
}

impl From<Format> for report::Format {
    fn from(f: Format) -> Self {
        match f {
            Format::Text => report::Format::Text,
            Format::Json => report::Format::Json,
            Format::Junit => report::Format::Junit,
            Format::Prometheus => report::Format::Prometheus,
            Format::Nfd => report::Format::Nfd,
        }
    }
}

/// Which severity fails the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FailOn {
    Warn,
    Fail,
}

impl From<FailOn> for gate::FailOn {
    fn from(f: FailOn) -> Self {
        match f {
            FailOn::Warn => gate::FailOn::Warn,
            FailOn::Fail => gate::FailOn::Fail,
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct CheckArgs {
    #[command(flatten)]
    pub host: GlobalArgs,
    /// Check ids (or tune_system.py names) to run, separated by spaces or commas; all when
    /// none. `all` means all.
    #[arg(value_name = "ID", value_delimiter = ',', value_parser = listed_id)]
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
    /// Write the report to FILE instead of stdout: atomically (a dotfile temp beside it,
    /// then rename) and mode 0644, so a timer can refresh it while a collector reads it.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// With --format nfd: how long the labels stay valid after this run (90s, 15m, 2h, 1d).
    #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = parse_duration)]
    pub nfd_expiry: Duration,
}

#[derive(Debug, Clone, Args)]
pub struct SnapshotArgs {
    #[command(flatten)]
    pub host: GlobalArgs,
    /// Output: FILE.tar.zst (any case: .TAR.ZST too) for an archive, written like every
    /// other output (atomically; a symlink is written through); any other name is a new or
    /// empty directory. Other archive names (.tar.gz, .tgz, .zip, .tar, ...) are refused.
    #[arg(short = 'o', long, value_name = "DIR|FILE.tar.zst")]
    pub output: PathBuf,
    /// Replace serial numbers, MACs, GUIDs and the hostname, consistently.
    #[arg(long)]
    pub redact: bool,
}

#[derive(Debug, Clone, Args)]
pub struct ImportArgs {
    /// Capture files (kinds told by content: `lspci -vvnn`/`-vvv`/`-nnDvvv` text with or
    /// without `-xxx` dumps, `lspci -t`/`-tv` trees, `nvidia-smi -q`, `-q -x` and `topo -m`,
    /// `ibstat`, `ibv_devinfo`, `ethtool -g/-l/-c/-a/-k/-i`, nvidia-bug-report.log(.gz), a
    /// pasted /proc/cmdline or /proc/meminfo), directories of them, or a
    /// sosreport (directory, .tar, .tar.gz, .tar.xz).
    #[arg(value_name = "CAPTURE", required = true)]
    pub captures: Vec<PathBuf>,
    /// Output: FILE.tar.zst for an archive, any other name a new or empty directory.
    #[arg(short = 'o', long, value_name = "DIR|FILE.tar.zst")]
    pub output: PathBuf,
}

#[derive(Debug, Clone, Args)]
pub struct DiffArgs {
    #[command(flatten)]
    pub profile: ProfileArg,
    /// The earlier side: a JSON report (`daqtune.report/v1`, from `check --format json`), a
    /// snapshot directory or a .tar.zst snapshot. Snapshots are judged with --profile (else
    /// the profile each one detects).
    #[arg(value_name = "BEFORE")]
    pub before: PathBuf,
    /// The later side, of the same kinds as BEFORE. Exit 1 when the two differ.
    #[arg(value_name = "AFTER")]
    pub after: PathBuf,
    /// text, or json (the list of differences).
    #[arg(long, short = 'f', value_enum, default_value_t = TopoFormat::Text)]
    pub format: TopoFormat,
    /// The same as `--format json` (kept for scripts that use it).
    #[arg(long, hide = true, conflicts_with = "format")]
    pub json: bool,
    /// Write the differences to FILE (atomically, mode 0644) instead of stdout.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct ExplainArgs {
    /// Check id or tune_system.py name; `known-states` for the table of documented field
    /// failures.
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
    /// Every profile key: type, default, unit and the checks that read it.
    Keys {
        /// The reference page as Markdown (docs/profiles.md is generated from it).
        #[arg(long)]
        markdown: bool,
    },
}

#[derive(Debug, Clone, Default, Args)]
pub struct Selection {
    // The ids come from the engine's registry: the planning tunables, in plan order.
    #[arg(long, value_delimiter = ',', value_name = "IDS", value_parser = listed_id, help = daqtune_engine::tunables::only_help())]
    pub only: Vec<String>,
    /// Only the runtime changes (sysfs, MTU, config space, modules); no files.
    #[arg(long, conflicts_with = "persist_only")]
    pub runtime_only: bool,
    /// Only the persistent files (grub drop-in, units, rules); no runtime change.
    #[arg(long)]
    pub persist_only: bool,
    /// Restrict device changes (MRRS) to one PCI function, as the udev rule does.
    #[arg(long, value_name = "BDF")]
    pub device: Option<String>,
    /// Allow ACS redirect changes (only where the IOMMU is off or in passthrough).
    #[arg(long)]
    pub allow_acs: bool,
    /// The daqtune binary that generated units and rules run (a regular executable file in
    /// the host root). Default: the installed one, /usr/bin/daqtune then
    /// /usr/local/bin/daqtune; with none installed, units and rules are refused (exit 2).
    #[arg(long, value_name = "PATH")]
    pub exe: Option<String>,
    /// Derive isolated cores, hugepages, MTU and data-path interfaces from this DAQIRI
    /// configuration instead of the profile's defaults. Kept for later applies and plans
    /// (they would otherwise rewrite the grub drop-in without it) until `--fresh` or a revert.
    #[arg(long, value_name = "APP.yaml")]
    pub config: Option<PathBuf>,
    /// Plan the profile alone: do not keep the `--config` and `--allow-acs` of the last apply
    /// that is still in effect.
    #[arg(long)]
    pub fresh: bool,
    /// Make kernel arguments the default at once. Without it, on GRUB they boot once through
    /// a one-time entry and become the default only when that boot verifies (docs/apply.md,
    /// "Trial boot").
    #[arg(long)]
    pub no_trial: bool,
}

impl Selection {
    pub fn engine(&self) -> apply::Selection {
        apply::Selection {
            only: self.only.clone(),
            runtime_only: self.runtime_only,
            persist_only: self.persist_only,
            device: self.device.clone(),
            allow_acs: self.allow_acs,
            exe: self.exe.clone(),
            config: self.config.clone(),
            fresh: self.fresh,
            no_trial: self.no_trial,
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct PlanArgs {
    #[command(flatten)]
    pub host: GlobalArgs,
    #[command(flatten)]
    pub sel: Selection,
    /// text, or json (`daqtune.plan/v1`: every change, note and what needs a reboot).
    #[arg(long, short = 'f', value_enum, default_value_t = PlanFormat::Text)]
    pub format: PlanFormat,
    /// Write the plan to FILE (atomically, mode 0644) instead of stdout.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// The `--format` of `plan`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum PlanFormat {
    #[default]
    Text,
    Json,
}

#[derive(Debug, Clone, Args)]
pub struct ApplyArgs {
    #[command(flatten)]
    pub host: GlobalArgs,
    #[command(flatten)]
    pub sel: Selection,
    /// Print the plan and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Do not ask (required when stdin is not a terminal).
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Journal and lock directory (host path; default /var/lib/daqtune).
    #[arg(long, value_name = "DIR", hide = true)]
    pub state_dir: Option<String>,
    /// tune_system.py's `--set NAME` (see `legacy`): asks nothing, and with no installed
    /// daqtune binary makes the runtime change alone, with a note.
    #[arg(long, hide = true)]
    pub tune_system_set: bool,
}

impl ApplyArgs {
    pub fn engine(&self) -> apply::ApplyOptions {
        apply::ApplyOptions {
            sel: self.sel.engine(),
            dry_run: self.dry_run,
            yes: self.yes || self.tune_system_set,
            state_dir: self.state_dir.clone(),
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct RevertArgs {
    #[command(flatten)]
    pub root: RootArg,
    /// Do not ask (required when stdin is not a terminal).
    #[arg(long, short = 'y')]
    pub yes: bool,
    #[arg(long, value_name = "DIR", hide = true)]
    pub state_dir: Option<String>,
    /// Undo only this apply run (its id, as `daqtune status` lists it). Refused, with the
    /// reason and nothing changed, where a later run changed the same file or setting.
    #[arg(long, value_name = "ID", conflicts_with = "only")]
    pub run: Option<String>,
    /// Undo only these checks' changes (comma-separated ids), in every run in effect; files
    /// come back byte for byte. Refused where a later run, or another check of the same run,
    /// changed the same file or setting.
    #[arg(long, value_delimiter = ',', value_name = "IDS", value_parser = listed_id)]
    pub only: Vec<String>,
}

impl RevertArgs {
    pub fn engine(&self) -> apply::RevertOptions {
        apply::RevertOptions {
            yes: self.yes,
            state_dir: self.state_dir.clone(),
        }
    }

    pub fn part(&self) -> apply::RevertPart {
        apply::RevertPart {
            run: self.run.clone(),
            only: self.only.clone(),
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct StatusArgs {
    /// --root reads a host root's journal; --profile judges what waits for a reboot with
    /// this profile instead of the newest run's.
    #[command(flatten)]
    pub host: GlobalArgs,
    /// text, or json (`daqtune.status/v1`).
    #[arg(long, short = 'f', value_enum, default_value_t = TopoFormat::Text)]
    pub format: TopoFormat,
    /// Write the report to FILE (atomically, mode 0644) instead of stdout.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    #[arg(long, value_name = "DIR", hide = true)]
    pub state_dir: Option<String>,
}

#[derive(Debug, Clone, Args)]
pub struct NicArgs {
    #[command(flatten)]
    pub root: RootArg,
    /// Only these interfaces (default: every interface but lo).
    #[arg(value_name = "IF")]
    pub interfaces: Vec<String>,
    /// Read the counters twice, SECONDS apart, and show what rose in between (live only).
    #[arg(long, value_name = "SECONDS")]
    pub interval: Option<f64>,
    /// Every counter, not only the drop and error counters that are not zero.
    #[arg(long)]
    pub all: bool,
    /// text (a list per port), or json (`daqtune.nic-view/v1`).
    #[arg(long, short = 'f', value_enum, default_value_t = TopoFormat::Text)]
    pub format: TopoFormat,
    /// Write the view to FILE (atomically, mode 0644) instead of stdout.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct GpuArgs {
    #[command(flatten)]
    pub root: RootArg,
    /// Read the GPUs' CUDA attributes afresh (cuInit) instead of from this boot's cache in
    /// /run/daqtune; the fresh result replaces the cache.
    #[arg(long)]
    pub no_cache: bool,
    /// text (a table per GPU), or json (`daqtune.gpu-view/v1`).
    #[arg(long, short = 'f', value_enum, default_value_t = TopoFormat::Text)]
    pub format: TopoFormat,
    /// Write the facts to FILE (atomically, mode 0644) instead of stdout.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// `generate`'s KIND argument: the names and help lines of the engine's one list.
fn kind_parser() -> impl clap::builder::TypedValueParser<Value = apply::Kind> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
    PossibleValuesParser::new(
        apply::Kind::all()
            .into_iter()
            .map(|(_, name, help)| PossibleValue::new(name).help(help)),
    )
    .try_map(|name| {
        apply::Kind::from_name(&name).ok_or_else(|| format!("unknown artifact kind {name}"))
    })
}

#[derive(Debug, Clone, Args)]
pub struct GenerateArgs {
    #[command(flatten)]
    pub host: GlobalArgs,
    #[arg(value_parser = kind_parser())]
    pub kind: apply::Kind,
    /// The daqtune binary that generated units and rules run (a regular executable file in
    /// the host root). Default: the installed one, /usr/bin/daqtune then
    /// /usr/local/bin/daqtune; with none installed, units and rules are refused (exit 2).
    #[arg(long, value_name = "PATH")]
    pub exe: Option<String>,
    /// Interfaces for network artifacts (default: the host's ConnectX ports).
    #[arg(long = "interface", value_name = "IF")]
    pub interfaces: Vec<String>,
    /// PCI functions for the udev rule (default: the data-path PFs: the profile's interfaces,
    /// else the host's ConnectX PFs).
    #[arg(long = "device", value_name = "BDF")]
    pub devices: Vec<String>,
}

impl GenerateArgs {
    pub fn engine(&self) -> apply::GenerateOptions {
        apply::GenerateOptions {
            kind: self.kind,
            exe: self.exe.clone(),
            interfaces: self.interfaces.clone(),
            devices: self.devices.clone(),
        }
    }
}

/// The `--format` of `topo` and `diff`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TopoFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, Args)]
pub struct TopoArgs {
    #[command(flatten)]
    pub root: RootArg,
    /// The matrix as text (default) or JSON.
    #[arg(long, short = 'f', value_enum)]
    pub format: Option<TopoFormat>,
    /// Write the matrix to FILE (atomically, mode 0644) instead of stdout.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Also draw the PCIe tree as SVG into FILE, written like -o; `-` puts the SVG on stdout
    /// instead of the matrix (then the matrix is printed only with -o).
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Draw every PCI function in the SVG, not only GPUs, NICs, NVMe and the bridges above them.
    #[arg(long)]
    pub all: bool,
}

#[derive(Debug, Clone, Args)]
pub struct QualifyArgs {
    #[command(flatten)]
    pub host: GlobalArgs,
    /// 1 = checks; 2 = + a short self-test of every data path; 3 = + a long soak (socket payloads verified on the GPU where one is present).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=3))]
    pub level: u8,
    /// Write the JUnit report (one testcase per verdict and per self-test result).
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Write the JSON report (`daqtune.qualify/v1`).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Exit 1 when any verdict is at or above this level.
    #[arg(long, value_enum, default_value_t = FailOn::Fail)]
    pub fail_on: FailOn,
    /// Seconds per self-test mode at level 2 (level 3 soaks 20 times as long).
    #[arg(long, default_value_t = 5.0, value_parser = daqtune_selftest::flagnum::seconds)]
    pub selftest_duration: f64,
    /// Write the text report to FILE (atomically, mode 0644) instead of stdout.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Run only these checks (comma-separated ids, as `daqtune explain --list` shows them);
    /// the JUnit and JSON reports name the subset. An unknown id exits 2 listing the known ones.
    #[arg(long, value_delimiter = ',', value_name = "IDS", value_parser = listed_id)]
    pub only: Vec<String>,
    /// Run only these self-test engines (comma-separated: socket, dpdk, rdma), also at
    /// level 1; the reports name the subset. An unknown engine exits 2.
    #[arg(long, value_delimiter = ',', value_name = "ENGINES", value_parser = listed_id)]
    pub selftest: Option<Vec<String>>,
}

impl QualifyArgs {
    pub fn engine(&self) -> qualify::QualifyOptions {
        qualify::QualifyOptions {
            level: self.level,
            junit: self.junit.clone(),
            json: self.json.clone(),
            fail_on: self.fail_on.into(),
            selftest_duration: self.selftest_duration,
            output: self.output.clone(),
            only: self.only.clone(),
            selftest: self.selftest.clone(),
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct ReportArgs {
    #[command(flatten)]
    pub host: GlobalArgs,
    /// Write the node_exporter textfile here (`.../node-exporter/daqtune.prom`).
    #[arg(long, value_name = "FILE", value_parser = any_path, env = "DAQTUNE_REPORT_PROMETHEUS")]
    pub prometheus: Option<PathBuf>,
    /// Write the Node Feature Discovery feature file here
    /// (`/etc/kubernetes/node-feature-discovery/features.d/daqtune`).
    #[arg(long, value_name = "FILE", value_parser = any_path, env = "DAQTUNE_REPORT_NFD")]
    pub nfd: Option<PathBuf>,
    /// Write the JSON report here (Ansible local facts: `/etc/ansible/facts.d/daqtune.fact`).
    #[arg(long, value_name = "FILE", value_parser = any_path, env = "DAQTUNE_REPORT_JSON")]
    pub json: Option<PathBuf>,
    /// Write the JUnit report here.
    #[arg(long, value_name = "FILE", value_parser = any_path, env = "DAQTUNE_REPORT_JUNIT")]
    pub junit: Option<PathBuf>,
    /// How long the NFD labels stay valid after the run (90s, 15m, 2h, 1d).
    #[arg(long, value_name = "DURATION", env = "DAQTUNE_REPORT_NFD_EXPIRY", default_value = "1h",
          value_parser = parse_duration)]
    pub nfd_expiry: Duration,
    /// The gate fails on verdicts at or above this level (required checks always count).
    #[arg(long, value_enum, env = "DAQTUNE_REPORT_FAIL_ON", default_value_t = FailOn::Fail)]
    pub fail_on: FailOn,
    /// Also judge the host against this DAQIRI configuration (the app.* checks).
    #[arg(long, value_name = "APP.yaml", value_parser = any_path, env = "DAQTUNE_REPORT_CONFIG")]
    pub config: Option<PathBuf>,
    /// Run again every DURATION (for a container; the timer runs `report` once per period).
    /// Each run is a child process of this one.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub interval: Option<Duration>,
    /// One run even with --interval (how the loop starts its runs).
    #[arg(long, hide = true)]
    pub once: bool,
    /// Before the checks, record this machine's NVML/CUDA facts into ROOT/daqtune/gpu.json:
    /// for a container whose --root is the host's filesystem mounted read-only beside a
    /// writable ROOT/daqtune (see deploy/kubernetes). Needs --root.
    #[arg(long)]
    pub live_gpu_facts: bool,
}

/// One list syntax for ids everywhere: commas (`A,B`, split by clap), spaces (`"A B"`, one
/// shell word) or both. Each word is trimmed and already known not to be empty.
fn split_words(ids: &mut Vec<String>) {
    *ids = ids
        .iter()
        .flat_map(|s| s.split_whitespace().map(String::from).collect::<Vec<_>>())
        .collect();
}

/// `--only`'s ids as `apply` and `plan` plan them: tune_system.py's names (`mrrs`) become
/// the registry's ids, as `check` and `revert` take them; an unknown word is left for the
/// plan to refuse with the nearest id.
fn canonical_ids(ids: &mut [String]) {
    for id in ids.iter_mut() {
        if let Some(t) = daqtune_engine::tunables::find(id) {
            *id = t.id.to_string();
        }
    }
}

impl Cli {
    /// The lists of ids in the one syntax (see [`split_words`]).
    pub fn normalize(&mut self) {
        match &mut self.command {
            Command::Check(a) => split_words(&mut a.ids),
            Command::Plan(PlanArgs { sel, .. }) | Command::Apply(ApplyArgs { sel, .. }) => {
                split_words(&mut sel.only);
                canonical_ids(&mut sel.only);
            }
            Command::Revert(a) => split_words(&mut a.only),
            Command::Qualify(a) => {
                split_words(&mut a.only);
                if let Some(s) = &mut a.selftest {
                    split_words(s);
                }
            }
            _ => {}
        }
    }
}

/// One id of a list (`--only A,B`): an empty one (`--only ""`, `" "`, `","`, `A,`) is a usage
/// error. It used to drop out of the list, and an empty list means every setting: `apply
/// --only ""` made all the changes and `revert --only ""` undid every run.
fn listed_id(s: &str) -> Result<String, String> {
    let id = s.trim();
    if id.is_empty() {
        return Err("an empty id: give at least one id, comma-separated without empty items (e.g. --only hugepages,nic.mtu); leave the option out for all".into());
    }
    Ok(id.to_string())
}

/// A path that may be empty: an environment line `DAQTUNE_REPORT_NFD=` means "not this
/// output", where clap's own path parser would refuse the empty value.
fn any_path(s: &str) -> Result<PathBuf, String> {
    Ok(PathBuf::from(s))
}

/// An empty path (`VAR=` in /etc/default/daqtune) is no path.
fn given(p: &Option<PathBuf>) -> Option<PathBuf> {
    p.clone().filter(|p| !p.as_os_str().is_empty())
}

impl ReportArgs {
    pub fn engine(&self) -> ReportOptions {
        ReportOptions {
            prometheus: given(&self.prometheus),
            nfd: given(&self.nfd),
            json: given(&self.json),
            junit: given(&self.junit),
            nfd_expiry: self.nfd_expiry,
            fail_on: self.fail_on.into(),
            config: given(&self.config),
            live_gpu_facts: self.live_gpu_facts,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_definition_is_valid() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
