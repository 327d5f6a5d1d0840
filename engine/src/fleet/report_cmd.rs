//! `daqtune report`: one check run, every fleet output the admin asked for, written
//! atomically. The systemd timer runs it with its outputs in /etc/default/daqtune (read by
//! systemd as environment, parsed by the binary's command line: no shell ever sees the
//! values); the Kubernetes DaemonSet runs it with `--interval`, a loop of child processes the
//! binary runs (each child is one [`run_once`]).
//!
//! Exit status: 0 when every output was written (the gate's result is *in* the outputs, so a
//! failing host does not make the timer's service fail every period), 1 when an output could
//! not be written, 2 for a usage error (nothing to write, bad profile, bad root).

use crate::check::commands::{choose_profile_with, evaluate_facts, GlobalOptions, UsageError};
use crate::check::report;
use crate::check::run_info::{now_unix, RunInfo};
use crate::fleet::{nfd, output, prometheus};
use crate::hostroot::open_host;
use crate::model::appconfig::AppConfig;
use crate::model::gate::{self, FailOn};
use std::path::PathBuf;
use std::time::Duration;

/// What `daqtune report` writes, and how it judges the host.
#[derive(Debug, Clone)]
pub struct ReportOptions {
    /// The node_exporter textfile (`.../node-exporter/daqtune.prom`).
    pub prometheus: Option<PathBuf>,
    /// The Node Feature Discovery feature file
    /// (`/etc/kubernetes/node-feature-discovery/features.d/daqtune`).
    pub nfd: Option<PathBuf>,
    /// The JSON report (Ansible local facts: `/etc/ansible/facts.d/daqtune.fact`).
    pub json: Option<PathBuf>,
    /// The JUnit report.
    pub junit: Option<PathBuf>,
    /// How long the NFD labels stay valid after the run.
    pub nfd_expiry: Duration,
    /// The gate fails on verdicts at or above this level (required checks always count).
    pub fail_on: FailOn,
    /// Also judge the host against this DAQIRI configuration (the app.* checks).
    pub config: Option<PathBuf>,
    /// Before the checks, record this machine's NVML/CUDA facts into ROOT/daqtune/gpu.json
    /// (a container whose root is the host's filesystem mounted read-only beside a writable
    /// ROOT/daqtune).
    pub live_gpu_facts: bool,
}

impl Default for ReportOptions {
    fn default() -> Self {
        ReportOptions {
            prometheus: None,
            nfd: None,
            json: None,
            junit: None,
            nfd_expiry: nfd::DEFAULT_EXPIRY,
            fail_on: FailOn::Fail,
            config: None,
            live_gpu_facts: false,
        }
    }
}

/// One kind of output file of `report`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    Prometheus,
    Nfd,
    Json,
    Junit,
}

impl ReportOptions {
    /// The outputs given, in a fixed order; an empty path (an environment line `VAR=`) is
    /// "not this output".
    pub fn outputs(&self) -> Vec<(Output, PathBuf)> {
        [
            (Output::Prometheus, &self.prometheus),
            (Output::Nfd, &self.nfd),
            (Output::Json, &self.json),
            (Output::Junit, &self.junit),
        ]
        .into_iter()
        .filter_map(|(k, p)| {
            p.as_ref()
                .filter(|p| !p.as_os_str().is_empty())
                .map(|p| (k, p.clone()))
        })
        .collect()
    }
}

/// What can never run, refused before any run (and before an `--interval` loop starts):
/// nothing to write, `--live-gpu-facts` without a root directory to record into.
pub fn validate(g: &GlobalOptions, a: &ReportOptions) -> Result<(), UsageError> {
    if a.outputs().is_empty() {
        return Err(UsageError::Other(
            "report: nothing to write: give --prometheus, --nfd, --json or --junit FILE, or set \
             DAQTUNE_REPORT_PROMETHEUS, DAQTUNE_REPORT_NFD, DAQTUNE_REPORT_JSON or \
             DAQTUNE_REPORT_JUNIT (the timer reads them from /etc/default/daqtune)"
                .into(),
        ));
    }
    if a.live_gpu_facts {
        match &g.root {
            None => {
                return Err(UsageError::Other(
                    "--live-gpu-facts records this machine's GPUs into a host root: it needs \
                     --root (without one the GPUs are read live anyway)"
                        .into(),
                ))
            }
            Some(r) if !r.is_dir() => {
                return Err(UsageError::Other(format!(
                    "--live-gpu-facts: --root {} is not a directory",
                    r.display()
                )))
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// What one report run did, for the line the binary says on stderr.
#[derive(Debug)]
pub struct ReportRun {
    pub profile: String,
    pub gate_passed: bool,
    /// The checks whose settings wait for a reboot.
    pub pending_reboot: Vec<String>,
    /// The files written.
    pub wrote: Vec<String>,
    /// Why each output that could not be written was not.
    pub failed: Vec<crate::fleet::output::OutputError>,
}

impl ReportRun {
    /// 0, or 1 when an output could not be written (the gate's result is in the files).
    pub fn exit_code(&self) -> u8 {
        u8::from(!self.failed.is_empty())
    }
}

/// One report run: the checks with the profile's required checks as a gate, then every
/// output.
pub fn run_once(g: &GlobalOptions, a: &ReportOptions) -> Result<ReportRun, UsageError> {
    validate(g, a)?;
    if a.live_gpu_facts {
        if let Some(root) = &g.root {
            let snap = daqtune_probe::gpu::gather_live_with(g.gpu_cache_mode());
            daqtune_probe::gpu::write_facts(root, &snap).map_err(|e| {
                UsageError::Other(format!("--live-gpu-facts: cannot record GPU facts: {e}"))
            })?;
        }
    }
    let host = open_host(g)?;
    // One set of facts for detection and every check.
    let facts = g.facts(&host);
    let profile = choose_profile_with(&facts, g)?;
    let app = match a.config.as_ref().filter(|p| !p.as_os_str().is_empty()) {
        Some(p) => Some(AppConfig::load(p).map_err(|e| UsageError::Other(e.to_string()))?),
        None => None,
    };
    let mut rep = evaluate_facts(&facts, &profile, Vec::new(), true, app.as_ref());
    drop(facts);
    drop(host);
    let code = gate::exit_code(&rep.checks, a.fail_on, true, &profile.profile);
    rep.run = Some(RunInfo::new(
        &rep.checks,
        &rep.gate_failures,
        code == 0,
        a.fail_on,
        true,
        now_unix(),
    ));
    let mut wrote = Vec::new();
    let mut failed = Vec::new();
    for (kind, path) in a.outputs() {
        let text = match kind {
            Output::Prometheus => prometheus::render(&rep),
            Output::Nfd => nfd::render(&rep, a.nfd_expiry),
            Output::Json => report::json(&rep),
            Output::Junit => report::junit(&rep),
        };
        match output::write(&path, &text) {
            Ok(()) => wrote.push(path.display().to_string()),
            Err(e) => failed.push(e),
        }
    }
    Ok(ReportRun {
        profile: rep.profile.clone(),
        gate_passed: code == 0,
        pending_reboot: rep
            .run
            .as_ref()
            .map(|r| r.pending_reboot.clone())
            .unwrap_or_default(),
        wrote,
        failed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_paths_are_not_outputs_and_nothing_is_refused() {
        let a = ReportOptions {
            prometheus: Some(PathBuf::new()),
            nfd: Some("/x/daqtune".into()),
            ..ReportOptions::default()
        };
        assert_eq!(a.outputs(), [(Output::Nfd, PathBuf::from("/x/daqtune"))]);
        let none = ReportOptions {
            json: Some(PathBuf::new()),
            ..ReportOptions::default()
        };
        let g = GlobalOptions::default();
        let e = validate(&g, &none).expect_err("nothing to write");
        assert!(e.to_string().contains("nothing to write"), "{e}");
        let live = ReportOptions {
            live_gpu_facts: true,
            ..a
        };
        let e = validate(&g, &live).expect_err("no root");
        assert!(e.to_string().contains("needs --root"), "{e}");
    }

    /// One run on a fixture root writes every output it was given, and says which.
    #[test]
    fn one_run_writes_each_output() {
        let d = tempfile::tempdir().expect("tmp");
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/spark");
        let g = GlobalOptions {
            root: Some(root),
            ..GlobalOptions::default()
        };
        let a = ReportOptions {
            prometheus: Some(d.path().join("tf/daqtune.prom")),
            nfd: Some(d.path().join("features.d/daqtune")),
            json: Some(d.path().join("facts.d/daqtune.fact")),
            junit: Some(d.path().join("junit.xml")),
            ..ReportOptions::default()
        };
        let r = run_once(&g, &a).expect("run");
        assert_eq!(r.exit_code(), 0);
        assert_eq!(r.profile, "dgx-spark");
        for (_, p) in a.outputs() {
            let body = std::fs::read_to_string(&p).expect("written");
            assert!(!body.is_empty(), "{}", p.display());
            assert!(r.wrote.contains(&p.display().to_string()), "{r:?}");
        }
        let facts: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(d.path().join("facts.d/daqtune.fact")).expect("read"),
        )
        .expect("json");
        assert_eq!(facts["run"]["gate"]["required_checks"], true);
        // An output that cannot be written is exit 1, the others still written.
        let blocked = d.path().join("file");
        std::fs::write(&blocked, "x").expect("write");
        let a = ReportOptions {
            prometheus: Some(blocked.join("daqtune.prom")),
            nfd: Some(d.path().join("features.d/again")),
            ..ReportOptions::default()
        };
        let r = run_once(&g, &a).expect("run");
        assert_eq!(r.exit_code(), 1);
        assert!(d.path().join("features.d/again").is_file());
        assert!(
            r.failed
                .iter()
                .any(|e| e.to_string().contains("cannot write")),
            "{r:?}"
        );
    }
}
