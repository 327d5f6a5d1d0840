//! What every command starts from: the host root to read, the profile to judge it by, and the
//! evaluation of the checks into a report. Errors that are the user's (bad profile, unknown
//! id, bad root) are [`UsageError`]s and exit 2.

use crate::check::report::{self, HostInfo, Report, SCHEMA};
use crate::model::context::Context;
use crate::model::facts::Facts;
use crate::model::gate;
use crate::model::profile::{self, LoadedProfile};
use crate::tunables::{self, run_checks, RunOptions};
use daqtune_probe::Host;
use std::path::PathBuf;
use std::time::Instant;

/// The options every command takes: the host root (`--root`) and the profile (`--profile`).
#[derive(Debug, Clone, Default)]
pub struct GlobalOptions {
    /// Read (and write) the host under this directory (or snapshot archive) instead of `/`.
    pub root: Option<PathBuf>,
    /// A built-in profile name or a YAML file.
    pub profile: Option<String>,
    /// Read the CUDA attributes afresh instead of from this boot's cache (`--no-cache`).
    pub no_cache: bool,
}

impl GlobalOptions {
    /// The run's facts about `host`, with the GPU cache setting these options ask for.
    pub fn facts<'h>(&self, host: &'h Host) -> Facts<'h> {
        Facts::new(host).without_gpu_cache(self.no_cache)
    }

    /// How the live GPU probe may use the CUDA attribute cache.
    pub fn gpu_cache_mode(&self) -> daqtune_probe::gpu::CacheMode {
        if self.no_cache {
            daqtune_probe::gpu::CacheMode::Refresh
        } else {
            daqtune_probe::gpu::CacheMode::Use
        }
    }
}

/// A mistake in what the user asked for: exit code 2.
#[derive(Debug, thiserror::Error)]
pub enum UsageError {
    #[error(transparent)]
    Profile(#[from] profile::ProfileError),
    #[error("--root {path}: {source}")]
    Root {
        path: String,
        source: std::io::Error,
    },
    /// Another run holds daqtune's state directory, or it cannot be locked.
    #[error(transparent)]
    Lock(#[from] crate::hostio::lock::LockError),
    #[error("unknown check `{0}`{hint} (see `daqtune explain --list`)", hint = check_hint(.0))]
    UnknownCheck(String),
    /// A change asked for without a terminal to confirm it and without `--yes`.
    #[error("stdin is not a terminal and --yes was not given: refusing to change the host (run `daqtune plan` to see what would change)")]
    NoTerminal,
    #[error("{0}")]
    Other(String),
}

/// `; did you mean `ID`?` for a mistyped check id (ids and tune_system.py names).
fn check_hint(id: &str) -> String {
    crate::model::suggest::hint(id, tunables::names())
}

/// A profile by built-in name or file, its check ids validated against the tunables'
/// registry.
pub fn load_profile(name_or_path: &str) -> Result<LoadedProfile, UsageError> {
    let lp = profile::load(name_or_path)?;
    tunables::validate_profile(&lp)?;
    say_deprecations(&lp);
    Ok(lp)
}

/// Where the engine's notes that are no command's result go: each deprecated key a profile
/// uses, once per process (apply loads its profile for the plan and again under the lock,
/// status the run's profile beside the chosen one; built-in profiles use none). The binary
/// sets a sink that says them on stderr; a library caller that sets none hears nothing.
static NOTICE_SINK: std::sync::OnceLock<fn(&str)> = std::sync::OnceLock::new();

/// Sets where notes go (the first call wins: one process, one terminal).
pub fn set_notice_sink(sink: fn(&str)) {
    let _ = NOTICE_SINK.set(sink);
}

fn say_deprecations(lp: &LoadedProfile) {
    static SAID: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let Some(sink) = NOTICE_SINK.get() else {
        return;
    };
    let Ok(mut said) = SAID.lock() else { return };
    for n in &lp.deprecations {
        if !said.contains(n) {
            sink(n);
            said.push(n.clone());
        }
    }
}

/// The profile given with --profile, else the detected one, else generic-dgpu (said so).
pub fn choose_profile(host: &Host, g: &GlobalOptions) -> Result<LoadedProfile, UsageError> {
    choose_profile_with(&g.facts(host), g)
}

/// [`choose_profile_for`] on the run's facts (detection then reads nothing the checks or the
/// plan read again).
pub fn choose_profile_with(facts: &Facts, g: &GlobalOptions) -> Result<LoadedProfile, UsageError> {
    if let Some(p) = &g.profile {
        let mut lp = load_profile(p)?;
        lp.origin = format!("--profile {p}");
        return Ok(lp);
    }
    match detect_profile_with(facts) {
        Some((name, why)) => {
            let mut lp = profile::load(&name)?;
            lp.origin = format!("detected: {why}");
            Ok(lp)
        }
        None => {
            let mut lp = profile::load("generic-dgpu")?;
            lp.origin = "fallback: no built-in profile matched this host".into();
            Ok(lp)
        }
    }
}

/// The built-in profile this host matches, with why: by DMI / device tree, else by GPU name
/// (which only GB10 hosts need). Names come from the NVIDIA kernel driver's procfs files, so
/// detection never loads NVML or initialises CUDA (docs/performance.md).
pub fn detect_profile(host: &Host) -> Option<(String, String)> {
    detect_profile_with(&Facts::new(host))
}

/// [`detect_profile`] on the run's facts.
pub fn detect_profile_with(facts: &Facts) -> Option<(String, String)> {
    let found = profile::detect(facts.platform(), &[]);
    if found.is_some() {
        return found;
    }
    let names = facts.gpu_names();
    if names.is_empty() {
        return None;
    }
    profile::detect(facts.platform(), names)
}

pub fn resolve_ids(ids: &[String]) -> Result<Vec<String>, UsageError> {
    let mut out = Vec::new();
    for id in ids {
        if id == "all" {
            return Ok(Vec::new());
        }
        match tunables::find(id) {
            Some(c) => out.push(c.id.to_string()),
            None => return Err(UsageError::UnknownCheck(id.clone())),
        }
    }
    Ok(out)
}

/// Run the checks and build the report (no printing).
pub fn evaluate(
    host: &Host,
    profile: &LoadedProfile,
    only: Vec<String>,
    gate_mode: bool,
) -> Report {
    evaluate_with_app(host, profile, only, gate_mode, None)
}

/// [`evaluate`], also judging the host against a DAQIRI configuration (`--config`).
pub fn evaluate_with_app(
    host: &Host,
    profile: &LoadedProfile,
    only: Vec<String>,
    gate_mode: bool,
    app: Option<&crate::model::appconfig::AppConfig>,
) -> Report {
    evaluate_facts(&Facts::new(host), profile, only, gate_mode, app)
}

/// [`evaluate_with_app`] on the run's facts.
pub fn evaluate_facts(
    facts: &Facts,
    profile: &LoadedProfile,
    only: Vec<String>,
    gate_mode: bool,
    app: Option<&crate::model::appconfig::AppConfig>,
) -> Report {
    let t0 = Instant::now();
    let host = facts.host;
    let ctx = Context::with_facts(facts, profile).with_app(app);
    let verdicts = run_checks(&ctx, &RunOptions { only });
    let p = ctx.platform();
    let gate_failures = if gate_mode {
        gate::required_failures(&profile.profile, &verdicts)
    } else {
        Vec::new()
    };
    Report {
        schema: SCHEMA.into(),
        daqtune_version: env!("CARGO_PKG_VERSION").into(),
        host: HostInfo {
            hostname: p.hostname.clone(),
            kernel: p.kernel_release.clone(),
            arch: p.arch.clone(),
            product: p.dmi_product.clone().or(p.dt_model.clone()),
            root: host.root().display().to_string(),
        },
        profile: profile.profile.name.clone(),
        profile_origin: profile.origin.clone(),
        summary: report::summarize(&verdicts),
        checks: verdicts,
        gate_failures,
        elapsed_ms: t0.elapsed().as_millis() as u64,
        run: None,
        gpu_facts: facts
            .gpus_gathered()
            .map(|s| report::GpuFactsSource::of(s, host.is_live())),
    }
}
