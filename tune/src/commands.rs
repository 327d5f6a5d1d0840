//! What each subcommand does. Errors that are the user's (bad profile, unknown id, bad root)
//! are [`UsageError`]s and exit 2.

use crate::checks::{self, run_checks, Context, RunOptions, CHECKS};
use crate::cli::{CheckArgs, ExplainArgs, GlobalArgs, ProfilesAction, ProfilesArgs};
use crate::gate;
use crate::profile::{self, LoadedProfile};
use crate::report::{self, HostInfo, Report, SCHEMA};
use daqtune_probe::Host;
use std::io::IsTerminal;
use std::time::Instant;

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
    #[error("unknown check `{0}` (see `daqtune explain --list`)")]
    UnknownCheck(String),
    #[error("{0}")]
    Other(String),
}

pub fn open_host(g: &GlobalArgs) -> Result<Host, UsageError> {
    match &g.root {
        None => Ok(Host::live()),
        Some(p) => Host::at(p).map_err(|source| UsageError::Root {
            path: p.display().to_string(),
            source,
        }),
    }
}

/// The profile given with --profile, else the detected one, else generic-dgpu (said so).
pub fn choose_profile(host: &Host, g: &GlobalArgs) -> Result<LoadedProfile, UsageError> {
    if let Some(p) = &g.profile {
        let mut lp = profile::load(p)?;
        lp.origin = format!("--profile {p}");
        return Ok(lp);
    }
    let platform = daqtune_probe::system::read_platform(host);
    match profile::detect(&platform, &[]) {
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

pub fn resolve_ids(ids: &[String]) -> Result<Vec<String>, UsageError> {
    let mut out = Vec::new();
    for id in ids {
        if id == "all" {
            return Ok(Vec::new());
        }
        match checks::find(id) {
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
    let t0 = Instant::now();
    let ctx = Context::new(host, profile);
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
    }
}

fn write_file(path: &std::path::Path, text: &str) -> Result<(), UsageError> {
    std::fs::write(path, text)
        .map_err(|e| UsageError::Other(format!("cannot write {}: {e}", path.display())))
}

pub fn check(g: &GlobalArgs, a: &CheckArgs) -> Result<u8, UsageError> {
    let host = open_host(g)?;
    let profile = choose_profile(&host, g)?;
    let only = resolve_ids(&a.ids)?;
    let rep = evaluate(&host, &profile, only, a.gate);
    let color = report::want_color(std::io::stdout().is_terminal());
    print!("{}", report::render(&rep, a.format, color));
    if let Some(p) = &a.junit {
        write_file(p, &report::junit(&rep))?;
    }
    if let Some(p) = &a.json {
        write_file(p, &report::json(&rep))?;
    }
    Ok(gate::exit_code(
        &rep.checks,
        a.fail_on,
        a.gate,
        &profile.profile,
    ))
}

pub fn explain(a: &ExplainArgs) -> Result<u8, UsageError> {
    if a.list {
        if a.markdown {
            print!("{}", report::catalogue_markdown());
        } else {
            for c in CHECKS {
                println!("{:<16} {:<9} {}", c.id, c.area.title(), c.title);
            }
        }
        return Ok(0);
    }
    let id = a.id.as_deref().unwrap_or_default();
    let c = checks::find(id).ok_or_else(|| UsageError::UnknownCheck(id.to_string()))?;
    print!("{}", c.doc);
    if !c.doc.ends_with('\n') {
        println!();
    }
    Ok(0)
}

pub fn profiles(a: &ProfilesArgs) -> Result<u8, UsageError> {
    match &a.action {
        None | Some(ProfilesAction::List) => {
            for name in profile::builtin_names() {
                let lp = profile::load(name)?;
                println!("{:<14} {}", name, lp.profile.description);
            }
        }
        Some(ProfilesAction::Show { name }) => {
            let lp = profile::load(name)?;
            let y = serde_yaml_ng::to_string(&lp.profile)
                .map_err(|e| UsageError::Other(e.to_string()))?;
            print!("{y}");
        }
    }
    Ok(0)
}
