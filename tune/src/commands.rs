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

/// A host root ready to read; a `.tar.zst` snapshot is unpacked into a temporary directory
/// that lives as long as this value.
pub struct OpenedHost {
    pub host: Host,
    _unpacked: Option<crate::snapshot::TempRoot>,
}

impl std::ops::Deref for OpenedHost {
    type Target = Host;
    fn deref(&self) -> &Host {
        &self.host
    }
}

pub fn open_root(path: Option<&std::path::Path>) -> Result<OpenedHost, UsageError> {
    let Some(p) = path else {
        return Ok(OpenedHost {
            host: Host::live(),
            _unpacked: None,
        });
    };
    let root_err = |source| UsageError::Root {
        path: p.display().to_string(),
        source,
    };
    if p.is_file() {
        let tmp = crate::snapshot::TempRoot::new("daqtune-snapshot-").map_err(root_err)?;
        crate::snapshot::unpack(p, tmp.path()).map_err(|e| {
            UsageError::Other(format!(
                "--root {}: cannot unpack the snapshot archive: {e}",
                p.display()
            ))
        })?;
        let host = Host::at(tmp.path()).map_err(root_err)?;
        return Ok(OpenedHost {
            host,
            _unpacked: Some(tmp),
        });
    }
    Ok(OpenedHost {
        host: Host::at(p).map_err(root_err)?,
        _unpacked: None,
    })
}

pub fn open_host(g: &GlobalArgs) -> Result<OpenedHost, UsageError> {
    open_root(g.root.as_deref())
}

/// The profile given with --profile, else the detected one, else generic-dgpu (said so).
pub fn choose_profile(host: &Host, g: &GlobalArgs) -> Result<LoadedProfile, UsageError> {
    choose_profile_for(host, g, true)
}

/// As [`choose_profile`]; `gpu_probe` allows detection by GPU name, which loads NVML and CUDA
/// (a few hundred ms), so a run of non-GPU checks on an unrecognised host does not pay for it.
pub fn choose_profile_for(
    host: &Host,
    g: &GlobalArgs,
    gpu_probe: bool,
) -> Result<LoadedProfile, UsageError> {
    if let Some(p) = &g.profile {
        let mut lp = profile::load(p)?;
        lp.origin = format!("--profile {p}");
        return Ok(lp);
    }
    match detect_profile(host, gpu_probe) {
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

/// The built-in profile this host matches, with why: by DMI / device tree, else (with
/// `gpu_probe`, which loads NVML and CUDA) by GPU name, which only GB10 hosts need.
pub fn detect_profile(host: &Host, gpu_probe: bool) -> Option<(String, String)> {
    let platform = daqtune_probe::system::read_platform(host);
    let found = profile::detect(&platform, &[]);
    if found.is_some() || !gpu_probe {
        return found;
    }
    let snap = crate::checks::read_gpus_once(host).ok()?;
    let names: Vec<String> = snap
        .gpus
        .iter()
        .map(|g| g.display_name().to_string())
        .collect();
    profile::detect(&platform, &names)
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
    evaluate_with_app(host, profile, only, gate_mode, None)
}

/// [`evaluate`], also judging the host against a DAQIRI configuration (`--config`).
pub fn evaluate_with_app(
    host: &Host,
    profile: &LoadedProfile,
    only: Vec<String>,
    gate_mode: bool,
    app: Option<&crate::appconfig::AppConfig>,
) -> Report {
    let t0 = Instant::now();
    let ctx = Context::new(host, profile).with_app(app);
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
    let only = resolve_ids(&a.ids)?;
    // `platform` reports which profile matched, so it needs the same detection as a full run.
    let gpu_probe = only.is_empty()
        || only
            .iter()
            .any(|id| id.starts_with("gpu.") || id == "platform");
    let profile = choose_profile_for(&host, g, gpu_probe)?;
    let app = match &a.config {
        Some(p) => Some(
            crate::appconfig::AppConfig::load(p).map_err(|e| UsageError::Other(e.to_string()))?,
        ),
        None => None,
    };
    let rep = evaluate_with_app(&host, &profile, only, a.gate, app.as_ref());
    drop(host);
    let color = report::want_color(std::io::stdout().is_terminal());
    print!("{}", report::render(&rep, a.format, color, a.verbose));
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

pub fn snapshot(g: &GlobalArgs, a: &crate::cli::SnapshotArgs) -> Result<u8, UsageError> {
    let host = open_host(g)?;
    let profile = choose_profile(&host, g)?;
    let out = &a.output;
    let is_archive = out.to_string_lossy().ends_with(".tar.zst");
    let fail = |e: crate::snapshot::SnapshotError| UsageError::Other(format!("snapshot: {e}"));
    let meta = if is_archive {
        let tmp = crate::snapshot::TempRoot::new("daqtune-snap-")
            .map_err(|e| UsageError::Other(e.to_string()))?;
        let m = crate::snapshot::write_dir(&host, &profile, tmp.path(), a.redact).map_err(fail)?;
        crate::snapshot::pack(tmp.path(), out).map_err(fail)?;
        m
    } else {
        if out.exists()
            && std::fs::read_dir(out)
                .map(|mut d| d.next().is_some())
                .unwrap_or(true)
        {
            return Err(UsageError::Other(format!(
                "{} exists and is not empty",
                out.display()
            )));
        }
        crate::snapshot::write_dir(&host, &profile, out, a.redact).map_err(fail)?
    };
    eprintln!(
        "daqtune: snapshot {}: {} files, {} links{}; replay with: daqtune check --root {}",
        out.display(),
        meta.files,
        meta.links,
        if meta.redacted { ", redacted" } else { "" },
        out.display()
    );
    Ok(0)
}

/// A report from a JSON file, or evaluated from a snapshot directory / archive.
fn load_side(g: &GlobalArgs, path: &std::path::Path) -> Result<Report, UsageError> {
    let is_json = path.is_file() && !path.to_string_lossy().ends_with(".tar.zst");
    if is_json {
        let text = daqtune_probe::fsutil::read_user_file(path)
            .map_err(|e| UsageError::Other(format!("{}: {e}", path.display())))?;
        let r: Report = serde_json::from_str(&text).map_err(|e| {
            UsageError::Other(format!(
                "{}:{}:{}: not a daqtune.report/v1 JSON report ({e})",
                path.display(),
                e.line(),
                e.column()
            ))
        })?;
        return Ok(r);
    }
    let host = open_root(Some(path))?;
    let profile = choose_profile(&host, g)?;
    Ok(evaluate(&host, &profile, Vec::new(), false))
}

pub fn diff(g: &GlobalArgs, a: &crate::cli::DiffArgs) -> Result<u8, UsageError> {
    let left = load_side(g, &a.before)?;
    let right = load_side(g, &a.after)?;
    let changes = crate::diff::diff(&left, &right);
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&changes).unwrap_or_default()
        );
    } else {
        print!("{}", crate::diff::render(&changes));
    }
    Ok(u8::from(!changes.is_empty()))
}
