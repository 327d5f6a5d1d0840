//! `daqtune qualify --level 1|2|3`: a hardware-qualification gate for CI, like
//! `dcgmi diag -r 1..3`.
//!
//! Level 1 runs every check with the profile's required checks as a gate (seconds). Level 2
//! adds a short self-test of every data path this binary can drive (socket, DPDK, RDMA), about a
//! minute. Level 3 adds a long soak. Self-tests run as child processes of this binary, so a
//! signal or crash in a data path cannot leave this process holding namespaces.

use crate::check::commands::{GlobalOptions, UsageError};
use crate::check::report::{self, xml_escape, Report};
use crate::check::run_info::{now_unix, RunInfo};
use crate::hostroot::open_host;
use crate::model::causes::{self, Cause, Symptom};
use crate::model::gate::{self, FailOn};
use crate::model::known_states;
use crate::model::profile::Profile;
use crate::model::verdict::{Status, Verdict};
use daqtune_report::selftest::{Assessment, EngineResult, Report as SelftestReport};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Debug, Clone)]
pub struct QualifyOptions {
    /// 1 = checks; 2 = + a short self-test of every data path; 3 = + a long soak.
    pub level: u8,
    /// Write the JUnit report (one testcase per verdict and per self-test result).
    pub junit: Option<PathBuf>,
    /// Write the JSON report (`daqtune.qualify/v1`).
    pub json: Option<PathBuf>,
    /// Exit 1 when any verdict is at or above this level.
    pub fail_on: FailOn,
    /// Seconds per self-test mode at level 2 (level 3 soaks 20 times as long).
    pub selftest_duration: f64,
    /// Write the text report to this file (atomically, mode 0644) instead of `out`.
    pub output: Option<PathBuf>,
    /// Only these check ids (empty: every check). Validated by [`Subset::new`].
    pub only: Vec<String>,
    /// Only these self-test engines (`None`: every engine at level 2 and 3). Naming engines
    /// runs the self-test stage even at level 1.
    pub selftest: Option<Vec<String>>,
}

/// The self-test engines qualify drives, in the order it runs them.
pub const ENGINES: &[&str] = &["socket", "dpdk", "rdma"];

/// A named part of the qualification (`--only`, `--selftest`), as the JSON report and the
/// JUnit's testsuite properties name it, so a CI result says what it did not run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subset {
    /// The check ids run (empty: all).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<String>,
    /// The self-test engines run (`None`: all that the level runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selftest: Option<Vec<String>>,
}

impl Subset {
    /// The subset the options name: check ids through the registry (a tune_system.py name
    /// stands for its id), engines among [`ENGINES`]; an unknown name is a usage error (exit
    /// 2) that lists the known ones.
    pub fn new(only: &[String], selftest: Option<&[String]>) -> Result<Subset, UsageError> {
        let mut checks: Vec<String> = Vec::new();
        for id in only.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
            match crate::tunables::find(id) {
                Some(c) if !checks.iter().any(|x| x == c.id) => checks.push(c.id.to_string()),
                Some(_) => {}
                None => {
                    let known: Vec<&str> = crate::tunables::REGISTRY.iter().map(|c| c.id).collect();
                    return Err(UsageError::Other(format!(
                        "qualify --only: unknown check `{id}`{}; known: {}",
                        crate::model::suggest::hint(id, crate::tunables::names()),
                        known.join(", ")
                    )));
                }
            }
        }
        let selftest = match selftest {
            None => None,
            Some(names) => {
                let mut v: Vec<String> = Vec::new();
                for e in names.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
                    if !ENGINES.contains(&e) {
                        return Err(UsageError::Other(format!(
                            "qualify --selftest: unknown engine `{e}`; known: {}",
                            ENGINES.join(", ")
                        )));
                    }
                    if !v.iter().any(|x| x == e) {
                        v.push(e.to_string());
                    }
                }
                if v.is_empty() {
                    return Err(UsageError::Other(format!(
                        "qualify --selftest: no engine named; known: {}",
                        ENGINES.join(", ")
                    )));
                }
                // Run in the usual order whatever order they were named in.
                v.sort_by_key(|e| ENGINES.iter().position(|k| k == e));
                Some(v)
            }
        };
        Ok(Subset { checks, selftest })
    }

    /// Whether this is the whole qualification of its level.
    pub fn is_whole(&self) -> bool {
        self.checks.is_empty() && self.selftest.is_none()
    }

    /// The engines the self-test stage runs.
    fn engines(&self) -> Vec<&str> {
        match &self.selftest {
            Some(v) => v.iter().map(String::as_str).collect(),
            None => ENGINES.to_vec(),
        }
    }

    /// One line for the text report: `checks pcie.mrrs, hugepages; self-tests socket`.
    pub fn describe(&self) -> String {
        let checks = if self.checks.is_empty() {
            "all checks".to_string()
        } else {
            format!("checks {}", self.checks.join(", "))
        };
        match &self.selftest {
            Some(e) => format!("{checks}; self-tests {}", e.join(", ")),
            None => checks,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Stage {
    pub name: String,
    pub seconds: f64,
    /// pass, fail, skip or error.
    pub status: String,
    pub detail: String,
}

/// One entry of the qualification's `selftest` list (`daqtune.qualify/v1`): a self-test result
/// (`daqtune_report::selftest::EngineResult`, the type the self-test writes and qualify reads)
/// as the gate records it, with the host's likely causes where it fell short. `mode` and
/// `status` are words: a self-test that gave no report is recorded as mode `-`, status `error`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SelftestEntry {
    pub engine: String,
    pub mode: String,
    pub status: String,
    #[serde(default)]
    pub gbps: f64,
    #[serde(default)]
    pub packets: u64,
    #[serde(default)]
    pub lost: u64,
    #[serde(default)]
    pub integrity_errors: u64,
    #[serde(default)]
    pub notes: Vec<String>,
    /// `veth`, `ports`, `loopback`, `peer`.
    #[serde(default)]
    pub topology: String,
    #[serde(default)]
    pub message_size: usize,
    /// Pacing asked for, Gb/s (absent = unpaced).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_gbps: Option<f64>,
    /// The GPU sink's figures when payloads landed in GPU memory (the result's `gpu`, keys
    /// in alphabetical order as qualify has always written them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<serde_json::Value>,
    /// The result against its line rate and the profile's reference; every field written,
    /// `null` included (`daqtune.qualify/v1` writes `pcie_gbps: null` where the self-test
    /// leaves it out).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "every_field"
    )]
    pub reference: Option<Assessment>,
    /// When the result fell below its floor or lost messages: the host's verdicts that can
    /// explain it, most likely first (`crate::model::causes`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<Cause>,
    /// The ports' counter deltas of the run (the self-test's `results[].port_counters`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub port_counters: Vec<daqtune_probe::net::counters::PortDelta>,
}

/// [`SelftestEntry::reference`] with every field of the assessment, `null` included. The
/// destructuring names each field, so a field added to the assessment fails to compile here
/// until it is written too.
fn every_field<S: serde::Serializer>(a: &Option<Assessment>, s: S) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct All<'a> {
        link_mbps: &'a Option<u64>,
        link_source: &'a str,
        mtu: &'a Option<u32>,
        line_gbps: &'a Option<f64>,
        pcie_gbps: &'a Option<f64>,
        of_line_pct: &'a Option<f64>,
        reference_gbps: &'a Option<f64>,
        reference_stated_gbps: &'a Option<f64>,
        reference_source: &'a Option<String>,
        of_reference_pct: &'a Option<f64>,
        floor: &'a Option<f64>,
        floor_gbps: &'a Option<f64>,
        shortfall_gbps: &'a Option<f64>,
        verdict: &'a str,
        why: &'a str,
    }
    let Some(Assessment {
        link_mbps,
        link_source,
        mtu,
        line_gbps,
        pcie_gbps,
        of_line_pct,
        reference_gbps,
        reference_stated_gbps,
        reference_source,
        of_reference_pct,
        floor,
        floor_gbps,
        shortfall_gbps,
        verdict,
        why,
    }) = a
    else {
        return s.serialize_none();
    };
    s.serialize_some(&All {
        link_mbps,
        link_source,
        mtu,
        line_gbps,
        pcie_gbps,
        of_line_pct,
        reference_gbps,
        reference_stated_gbps,
        reference_source,
        of_reference_pct,
        floor,
        floor_gbps,
        shortfall_gbps,
        verdict,
        why,
    })
}

impl SelftestEntry {
    /// The gate's record of one self-test result. The self-test's own counter causes are not
    /// carried over: the port counters are, and [`attach_causes`] ranks them with the host's
    /// verdicts.
    pub fn from_result(r: EngineResult) -> SelftestEntry {
        SelftestEntry {
            engine: r.engine,
            mode: r.mode.as_str().to_string(),
            status: r.status.as_str().to_string(),
            gbps: r.gbps,
            packets: r.packets,
            lost: r.lost,
            integrity_errors: r.integrity_errors,
            notes: r.notes,
            topology: r.topology,
            message_size: r.message_size,
            rate_gbps: r.rate_gbps,
            // A record of numbers and strings: to_value cannot fail on it.
            gpu: r.gpu.and_then(|g| serde_json::to_value(g).ok()),
            reference: r.reference,
            causes: Vec::new(),
            port_counters: r.port_counters,
        }
    }

    /// The entry for an engine whose self-test gave no report: `why` is the reason.
    fn no_report(engine: &str, why: String) -> SelftestEntry {
        SelftestEntry {
            engine: engine.into(),
            mode: "-".into(),
            status: "error".into(),
            gbps: 0.0,
            packets: 0,
            lost: 0,
            integrity_errors: 0,
            notes: vec![why],
            topology: String::new(),
            message_size: 0,
            rate_gbps: None,
            gpu: None,
            reference: None,
            causes: Vec::new(),
            port_counters: Vec::new(),
        }
    }
}

impl SelftestEntry {
    /// Below its floor, or messages lost: what the causes are listed for.
    pub fn symptoms(&self) -> Vec<Symptom> {
        if matches!(self.status.as_str(), "skip" | "error") {
            return Vec::new();
        }
        let mut s = Vec::new();
        if self
            .reference
            .as_ref()
            .is_some_and(|a| a.verdict == "below")
        {
            s.push(Symptom::Shortfall);
        }
        if self.lost > 0 {
            s.push(Symptom::Loss);
        }
        s
    }

    /// `(x % of line, y % of reference)`, `(no reference)` or nothing.
    fn shares(&self) -> String {
        let Some(a) = &self.reference else {
            return String::new();
        };
        let mut parts = Vec::new();
        if let Some(l) = a.of_line_pct {
            parts.push(format!("{l:.1} % of line"));
        }
        match a.of_reference_pct {
            Some(r) => parts.push(format!("{r:.1} % of reference")),
            None => parts.push("no reference".into()),
        }
        format!(" ({})", parts.join(", "))
    }
}

/// Lists the likely causes on every result that fell below its floor or lost messages.
pub fn attach_causes(results: &mut [SelftestEntry], verdicts: &[Verdict]) {
    for r in results.iter_mut() {
        let symptoms = r.symptoms();
        if symptoms.is_empty() {
            continue;
        }
        let mut path: Vec<Verdict> = causes::path_counters(&r.port_counters);
        path.extend(
            r.reference
                .as_ref()
                .and_then(|a| a.mtu)
                .and_then(|mtu| causes::path_mtu(mtu, r.message_size, &r.mode)),
        );
        let run = causes::Run {
            engine: &r.engine,
            hardware: !matches!(r.topology.as_str(), "veth" | "loopback" | ""),
            gpu_sink: r.gpu.is_some(),
        };
        r.causes = causes::rank(verdicts, &path, run, &symptoms);
    }
}

/// Names the documented field failures (`crate::model::known_states`) each result and the host fit,
/// ahead of its other likely causes.
pub fn attach_known_states(results: &mut [SelftestEntry], host: &known_states::HostView) {
    for r in results.iter_mut() {
        let a = r.reference.as_ref();
        let run = known_states::RunResult {
            engine: &r.engine,
            mode: &r.mode,
            status: &r.status,
            topology: &r.topology,
            gbps: r.gbps,
            link_mbps: a.and_then(|a| a.link_mbps),
            link_source: a.map(|a| a.link_source.as_str()),
            pcie_gbps: a.and_then(|a| a.pcie_gbps),
        };
        let known: Vec<Cause> = known_states::matches(host, &run)
            .iter()
            .map(|m| m.cause(0))
            .collect();
        if !known.is_empty() {
            r.causes = causes::with_known(known, std::mem::take(&mut r.causes));
        }
    }
}

/// The shape of the profile's references for `engine` as self-test flags: qualify runs the
/// engine as the reference was measured (seed 002: TCP and UDP with 4 streams of 8 KB, RoCE
/// SEND with 8 MB messages).
pub fn shape_args(p: &Profile, engine: &str, gpu_sink: bool) -> Vec<String> {
    let refs: Vec<_> = p
        .selftest
        .reference
        .iter()
        .filter(|r| r.path.split('.').next() == Some(engine))
        .collect();
    let mut a = Vec::new();
    if let Some(m) = refs.iter().find_map(|r| r.message_size) {
        // The RDMA helper names its bandwidth runs' size `--size` (pingpong keeps its own).
        let flag = if engine == "rdma" {
            "--size"
        } else {
            "--message-size"
        };
        a.extend([flag.to_string(), m.to_string()]);
    }
    // The GPU sink verifies one stream.
    if engine == "socket" && !gpu_sink {
        if let Some(n) = refs.iter().find_map(|r| r.streams) {
            a.extend(["--streams".to_string(), n.to_string()]);
        }
    }
    a
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Qualification {
    pub schema: String,
    pub level: u8,
    pub passed: bool,
    pub stages: Vec<Stage>,
    pub checks: Report,
    pub selftest: Vec<SelftestEntry>,
    pub gate_failures: Vec<String>,
    /// The part of the qualification run (`--only`, `--selftest`); absent: all of the level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subset: Option<Subset>,
    /// Wall time of the whole qualification, seconds (a CI job budgets for it; level 2 with
    /// the default durations is meant to stay under 30 s, docs/ci-gate.md).
    #[serde(default)]
    pub wall_s: f64,
}

impl Qualification {
    /// `qualify`'s exit code: 0 passed, 1 a required check or a self-test failed.
    pub fn exit_code(&self) -> u8 {
        u8::from(!self.passed)
    }

    /// The JSON report (`--json`).
    pub fn json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default() + "\n"
    }
}

/// One self-test run qualify asks for: `daqtune selftest ENGINE` with these options.
#[derive(Debug, Clone, PartialEq)]
pub struct SelftestRequest {
    /// `socket`, `dpdk` or `rdma` ([`ENGINES`]).
    pub engine: String,
    /// The profile qualify runs with (`--profile`), handed on so the self-test judges by it.
    pub profile: Option<String>,
    /// Seconds per mode.
    pub duration: f64,
    /// Socket engine: a veth pair between namespaces (root), else loopback.
    pub veth: bool,
    /// Socket engine: land every payload in GPU memory and verify it there (the soak).
    pub gpu_sink: bool,
    /// The references' shape as self-test flags ([`shape_args`]).
    pub shape: Vec<String>,
}

impl SelftestRequest {
    /// The arguments of `daqtune selftest` for this run, after the program's name.
    pub fn args(&self) -> Vec<String> {
        let mut a = vec!["selftest".to_string(), self.engine.clone()];
        if let Some(p) = &self.profile {
            a.extend(["--profile".to_string(), p.clone()]);
        }
        if self.engine == "socket" {
            a.push(if self.veth { "--veth" } else { "--loopback" }.to_string());
            if self.gpu_sink {
                // The soak lands every payload in GPU memory and verifies it there.
                a.extend(["--gpu", "0", "--gpu-memory", "copy"].map(String::from));
            }
        }
        a.extend(self.shape.iter().cloned());
        a.extend([
            "--duration".to_string(),
            format!("{}", self.duration),
            "--format".to_string(),
            "json".to_string(),
        ]);
        // The RDMA helper draws no progress bar and does not take the flag.
        if self.engine != "rdma" {
            a.push("--no-progress".to_string());
        }
        a
    }
}

/// Runs one self-test for qualify and gives its report. The `daqtune` binary runs it as a
/// child process (`current_exe() selftest ...`, [`SelftestRequest::args`]), so a signal or
/// crash in a data path cannot leave qualify holding namespaces; tests give typed results.
pub trait SelftestRunner {
    fn run(&self, req: &SelftestRequest) -> Result<SelftestReport, SelftestRunError>;
}

/// Why a self-test child gave no results.
#[derive(Debug, thiserror::Error)]
pub enum SelftestRunError {
    #[error("cannot find this executable: {0}")]
    Exe(std::io::Error),
    #[error("cannot run the self-test: {0}")]
    Spawn(std::io::Error),
    /// No JSON report on its standard output: its exit status and standard error (or the
    /// JSON error when it wrote nothing there).
    #[error("the {engine} self-test gave no report (exit {code:?}): {why}")]
    NoReport {
        engine: String,
        code: Option<i32>,
        why: String,
    },
}

/// The report a self-test child printed on its standard output (`daqtune.selftest/v1`, read
/// as the self-test's own type); when there is none, why, from its exit status and standard
/// error.
pub fn read_child_report(
    engine: &str,
    stdout: &[u8],
    stderr: &[u8],
    code: Option<i32>,
) -> Result<SelftestReport, SelftestRunError> {
    serde_json::from_slice(stdout).map_err(|e| {
        let err = String::from_utf8_lossy(stderr);
        SelftestRunError::NoReport {
            engine: engine.to_string(),
            code,
            why: if err.trim().is_empty() {
                e.to_string()
            } else {
                err.trim().to_string()
            },
        }
    })
}

/// What the self-test stages need of the run: the level and duration asked for, the profile
/// (its name is handed on, its references shape the runs), whether a GPU is there for the
/// soak's GPU sink, and whether the socket engine can make a veth pair (root).
#[derive(Clone, Copy)]
struct StageOptions<'a> {
    level: u8,
    selftest_duration: f64,
    profile_name: Option<&'a str>,
    profile: &'a Profile,
    has_gpu: bool,
    veth: bool,
}

/// Levels 2 and 3: each self-test engine as a child, one stage each; a child that gives no
/// report is an `error` result with the reason.
fn selftest_stages(
    runner: &dyn SelftestRunner,
    st: &StageOptions<'_>,
    engines: &[&str],
    stages: &mut Vec<Stage>,
) -> Vec<SelftestEntry> {
    let StageOptions {
        level,
        selftest_duration,
        profile_name,
        profile,
        has_gpu,
        veth,
    } = *st;
    let mut selftest = Vec::new();
    let soak = level >= 3;
    let duration = if soak {
        selftest_duration * 20.0
    } else {
        selftest_duration
    };
    for &engine in engines {
        let t = Instant::now();
        let name = format!("selftest {engine}{}", if soak { " (soak)" } else { "" });
        let req = SelftestRequest {
            engine: engine.to_string(),
            profile: profile_name.map(str::to_string),
            duration,
            veth,
            gpu_sink: soak && has_gpu,
            shape: shape_args(profile, engine, soak && has_gpu),
        };
        match runner.run(&req) {
            Ok(report) => {
                let results: Vec<SelftestEntry> = report
                    .results
                    .into_iter()
                    .map(SelftestEntry::from_result)
                    .collect();
                let status = if results
                    .iter()
                    .any(|r| matches!(r.status.as_str(), "fail" | "error"))
                {
                    "fail"
                } else if results.iter().all(|r| r.status == "skip") {
                    "skip"
                } else {
                    "pass"
                };
                stages.push(Stage {
                    name,
                    seconds: t.elapsed().as_secs_f64(),
                    status: status.into(),
                    detail: results
                        .iter()
                        .map(|r| {
                            format!(
                                "{} {}: {} {:.2} Gb/s{}",
                                r.engine,
                                r.mode,
                                r.status,
                                r.gbps,
                                r.shares()
                            )
                        })
                        .collect::<Vec<_>>()
                        .join("; "),
                });
                selftest.extend(results);
            }
            Err(e) => {
                let e = e.to_string();
                stages.push(Stage {
                    name,
                    seconds: t.elapsed().as_secs_f64(),
                    status: "error".into(),
                    detail: e.clone(),
                });
                selftest.push(SelftestEntry::no_report(engine, e));
            }
        }
    }
    selftest
}

/// Run the qualification. The binary prints its text (`daqtune-render`) and writes the files
/// asked for (`-o`, `--junit`, `--json`); the exit code is [`Qualification::exit_code`].
pub fn run(
    g: &GlobalOptions,
    a: &QualifyOptions,
    runner: &dyn SelftestRunner,
) -> Result<Qualification, UsageError> {
    let started = Instant::now();
    // Named before anything is read: a typo costs nothing.
    let subset = Subset::new(&a.only, a.selftest.as_deref())?;
    let runs_selftest = a.level >= 2 || subset.selftest.is_some();
    if g.root.is_some() && runs_selftest {
        return Err(UsageError::Other(
            "qualify --level 2 and 3 (and --selftest) move real traffic and cannot run against --root".into(),
        ));
    }
    let host = open_host(g)?;
    let facts = g.facts(&host);
    let profile = crate::check::commands::choose_profile_with(&facts, g)?;
    let mut stages = Vec::new();

    let t = Instant::now();
    let mut checks =
        crate::check::commands::evaluate_facts(&facts, &profile, subset.checks.clone(), true, None);
    let check_code = gate::exit_code(&checks.checks, a.fail_on, true, &profile.profile);
    // The gate's failures as `ID (SUBJECT): STATUS: MESSAGE`, for the Ansible role's message.
    checks.run = Some(RunInfo::new(
        &checks.checks,
        &checks.gate_failures,
        check_code == 0,
        a.fail_on,
        true,
        now_unix(),
    ));
    stages.push(Stage {
        name: "checks".into(),
        seconds: t.elapsed().as_secs_f64(),
        status: if check_code == 0 { "pass" } else { "fail" }.into(),
        detail: format!(
            "{} verdicts; {} required-check failures",
            checks.checks.len(),
            checks.gate_failures.len()
        ),
    });

    let mut selftest = Vec::new();
    if runs_selftest {
        let has_gpu = facts.gpus().is_ok_and(|s| !s.gpus.is_empty());
        let st = StageOptions {
            level: a.level,
            selftest_duration: a.selftest_duration,
            profile_name: g.profile.as_deref(),
            profile: &profile.profile,
            has_gpu,
            veth: daqtune_probe::sys::is_root(),
        };
        selftest = selftest_stages(runner, &st, &subset.engines(), &mut stages);
    }
    attach_causes(&mut selftest, &checks.checks);
    attach_known_states(&mut selftest, &known_states::HostView::read(&facts));
    let selftest_failed = selftest
        .iter()
        .any(|r| matches!(r.status.as_str(), "fail" | "error"));
    let passed = check_code == 0 && !selftest_failed;
    let q = Qualification {
        schema: "daqtune.qualify/v1".into(),
        level: a.level,
        passed,
        stages,
        gate_failures: checks.gate_failures.clone(),
        checks,
        selftest,
        subset: (!subset.is_whole()).then_some(subset),
        wall_s: started.elapsed().as_secs_f64(),
    };
    Ok(q)
}

/// One cause as the text report and JUnit's failure message name it.
pub fn cause_line(c: &Cause) -> String {
    format!(
        "{}. {} ({}) {}: {} - {}",
        c.rank, c.id, c.subject, c.status, c.message, c.reason
    )
}

/// [`cause_line`] with a known state's recovery, for JUnit's one-line failure message.
fn cause_line_full(c: &Cause) -> String {
    match &c.recovery {
        Some(rec) => format!("{}; recovery: {rec}", cause_line(c)),
        None => cause_line(c),
    }
}

/// JUnit: the check report's testcases, one per self-test result, and the gate; a subset
/// (`--only`, `--selftest`) is named in the testsuite's properties.
pub fn junit(q: &Qualification) -> String {
    let xml = junit_cases(q);
    match &q.subset {
        Some(sub) => with_subset(&xml, sub),
        None => xml,
    }
}

/// `xml` with a `<properties>` block naming the subset at the top of its testsuite (where
/// JUnit readers look for it: before the first testcase).
fn with_subset(xml: &str, sub: &Subset) -> String {
    let mut props = String::from("    <properties>\n");
    let mut prop = |name: &str, value: &str| {
        let _ = writeln!(
            props,
            "      <property name=\"{name}\" value=\"{}\"/>",
            xml_escape(value)
        );
    };
    prop("daqtune.subset", &sub.describe());
    if !sub.checks.is_empty() {
        prop("daqtune.subset.checks", &sub.checks.join(","));
    }
    if let Some(e) = &sub.selftest {
        prop("daqtune.subset.selftest", &e.join(","));
    }
    props.push_str("    </properties>\n");
    let mut out = String::with_capacity(xml.len() + props.len());
    let mut done = false;
    for line in xml.lines() {
        out.push_str(line);
        out.push('\n');
        if !done && line.trim_start().starts_with("<testsuite ") {
            out.push_str(&props);
            done = true;
        }
    }
    out
}

fn junit_cases(q: &Qualification) -> String {
    let base = report::junit(&q.checks);
    let mut cases = String::new();
    let mut failures = 0usize;
    let mut skipped = 0usize;
    for r in &q.selftest {
        let name = format!("{} {}", r.engine, r.mode);
        let mut detail = format!(
            "{} Gb/s, {} packets, {} lost, {} integrity errors{}",
            r.gbps,
            r.packets,
            r.lost,
            r.integrity_errors,
            if r.notes.is_empty() {
                String::new()
            } else {
                format!("; {}", r.notes.join("; "))
            }
        );
        if !r.causes.is_empty() {
            let _ = write!(
                detail,
                "; likely causes, most likely first: {}",
                r.causes
                    .iter()
                    .map(cause_line_full)
                    .collect::<Vec<_>>()
                    .join("; ")
            );
        }
        let _ = write!(
            cases,
            "    <testcase classname=\"daqtune.selftest\" name=\"{}\">",
            xml_escape(&name)
        );
        match r.status.as_str() {
            "fail" | "error" => {
                failures += 1;
                let _ = write!(
                    cases,
                    "<failure type=\"{}\" message=\"{}\"/>",
                    xml_escape(&r.status),
                    xml_escape(&detail)
                );
            }
            "skip" => {
                skipped += 1;
                let _ = write!(cases, "<skipped message=\"{}\"/>", xml_escape(&detail));
            }
            // As the checks' warnings (report::junit): a property and <system-err>.
            "warn" => {
                let _ = write!(
                    cases,
                    "<properties><property name=\"daqtune.status\" value=\"warn\"/></properties><system-err>warn: {}</system-err>",
                    xml_escape(&detail)
                );
            }
            _ => {
                let _ = write!(cases, "<system-out>{}</system-out>", xml_escape(&detail));
            }
        }
        let _ = writeln!(cases, "</testcase>");
    }
    if q.selftest.is_empty() {
        return base;
    }
    let tests = q.checks.checks.len() + q.checks.gate_failures.len() + q.selftest.len();
    let check_failures = q
        .checks
        .checks
        .iter()
        .filter(|v| matches!(v.status, Status::Fail | Status::Error))
        .count()
        + q.checks.gate_failures.len();
    let check_skipped = q
        .checks
        .checks
        .iter()
        .filter(|v| matches!(v.status, Status::Skip | Status::NotApplicable))
        .count();
    // Rebuild the two header lines with the combined counts and insert the self-test cases.
    let mut out = String::new();
    for (i, line) in base.lines().enumerate() {
        if i == 1 || i == 2 {
            let fixed = line
                .replacen(
                    &format!("tests=\"{}\"", tests - q.selftest.len()),
                    &format!("tests=\"{tests}\""),
                    1,
                )
                .replacen(
                    &format!("failures=\"{check_failures}\""),
                    &format!("failures=\"{}\"", check_failures + failures),
                    1,
                )
                .replacen(
                    &format!("skipped=\"{check_skipped}\""),
                    &format!("skipped=\"{}\"", check_skipped + skipped),
                    1,
                );
            out.push_str(&fixed);
            out.push('\n');
            continue;
        }
        if line.trim_start().starts_with("</testsuite>") {
            out.push_str(&cases);
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use daqtune_report::selftest::{Mode, Status as RunStatus};
    use std::cell::RefCell;

    #[test]
    fn qualify_runs_the_shape_of_the_references() {
        let spark = crate::model::profile::load("dgx-spark")
            .expect("spark")
            .profile;
        assert_eq!(
            shape_args(&spark, "socket", false),
            ["--message-size", "8192", "--streams", "4"]
        );
        // The GPU sink verifies one stream.
        assert_eq!(
            shape_args(&spark, "socket", true),
            ["--message-size", "8192"]
        );
        assert_eq!(
            shape_args(&spark, "dpdk", false),
            ["--message-size", "4096"]
        );
        // RoCE SEND was measured with 8 MB messages (seed 002).
        assert_eq!(shape_args(&spark, "rdma", false), ["--size", "8388608"]);
        assert!(shape_args(&crate::model::profile::Profile::default(), "socket", false).is_empty());
    }

    /// A self-test result with the fields of `over` (the assessment's too) over an empty
    /// one, read as the self-test's own type and recorded as the gate records it.
    fn result(over: serde_json::Value) -> SelftestEntry {
        SelftestEntry::from_result(engine_result(over))
    }

    fn engine_result(over: serde_json::Value) -> EngineResult {
        let base = EngineResult::new("socket", Mode::Tcp, "ports");
        let mut v = serde_json::to_value(base).expect("json");
        for (k, x) in over.as_object().expect("an object") {
            if k == "reference" {
                let mut a = serde_json::to_value(Assessment::default()).expect("json");
                for (ak, ax) in x.as_object().expect("an object") {
                    a[ak] = ax.clone();
                }
                v[k] = a;
            } else {
                v[k] = x.clone();
            }
        }
        serde_json::from_value(v).expect("an EngineResult")
    }

    #[test]
    fn causes_only_for_a_shortfall_or_loss() {
        let verdicts = vec![
            Verdict::fail("pcie.mrrs", "0000:01:00.0", "512"),
            Verdict::warn("cpu.governor", "cpu0-7", "powersave"),
        ];
        let below = serde_json::json!({
            "engine": "socket", "mode": "tcp", "status": "fail", "gbps": 30.0,
            "topology": "ports", "message_size": 8192,
            "reference": {"verdict": "below", "mtu": 9000, "why": "30.00 Gb/s is ..."}
        });
        let met = serde_json::json!({
            "engine": "socket", "mode": "tcp", "status": "pass", "gbps": 95.0,
            "topology": "ports", "message_size": 8192,
            "reference": {"verdict": "met", "mtu": 9000, "why": "95.00 Gb/s is ..."}
        });
        let lossy_veth = serde_json::json!({
            "engine": "socket", "mode": "udp", "status": "fail", "gbps": 1.0, "lost": 9,
            "topology": "veth", "message_size": 8192,
            "reference": {"verdict": "none", "mtu": 1500, "why": "no reference"}
        });
        let mut rs = vec![result(below), result(met), result(lossy_veth)];
        attach_causes(&mut rs, &verdicts);
        let ids = |r: &SelftestEntry| -> Vec<String> {
            r.causes
                .iter()
                .map(|c| format!("{} {}", c.id, c.subject))
                .collect()
        };
        assert_eq!(
            ids(&rs[0]),
            ["pcie.mrrs 0000:01:00.0", "cpu.governor cpu0-7"]
        );
        assert!(rs[1].causes.is_empty());
        // A veth pair: its own MTU first, never the NIC's MRRS.
        assert_eq!(
            ids(&rs[2]),
            ["nic.mtu self-test path", "cpu.governor cpu0-7"]
        );
        // JUnit's failure message carries them, ranked.
        let q = failed_qualification("generic-dgpu", rs, 12.25);
        let j = junit(&q);
        assert!(
            j.contains("likely causes, most likely first: 1. pcie.mrrs (0000:01:00.0) fail: 512"),
            "{j}"
        );
        // The text's cause lines (daqtune-render) are these.
        let first = cause_line(&q.selftest[2].causes[0]);
        assert!(
            first.starts_with("1. nic.mtu (self-test path) fail: the self-test path has MTU 1500"),
            "{first}"
        );
        assert_eq!(q.exit_code(), 1);
    }

    /// Issue 45 item 4: the Spark fixture in the degraded ConnectX-7 state. A TCP rail at
    /// 12.86 Gb/s (NVIDIA/dgx-spark-playbooks PR #108's measurement) through a 200G port behind
    /// Gen5 x4 names the documented state first, with its recovery and source, in the JSON, the
    /// text and the JUnit; the guide's healthy 92.57 Gb/s does not.
    #[test]
    fn a_spark_rail_near_13_gbps_names_the_degraded_connectx_state() {
        let host = daqtune_probe::Host::at(format!(
            "{}/../tests/fixtures/spark",
            env!("CARGO_MANIFEST_DIR")
        ))
        .expect("fixture");
        let facts = crate::model::facts::Facts::new(&host);
        let view = known_states::HostView::read(&facts);
        let pcie = daqtune_probe::pci::payload_gbps(32.0, 4);
        let at = |gbps: f64, verdict: &str| {
            result(serde_json::json!({
                "engine": "socket", "mode": "tcp",
                "status": if verdict == "below" { "fail" } else { "pass" },
                "gbps": gbps, "topology": "ports", "message_size": 8192,
                "reference": {"verdict": verdict, "mtu": 9000, "link_mbps": 200000,
                              "link_source": "sysfs speed of enp1s0f1np1",
                              "pcie_gbps": pcie, "why": "..."}
            }))
        };
        let verdicts = vec![Verdict::warn("cpu.governor", "cpu0-19", "powersave")];
        let mut rs = vec![at(12.86, "below"), at(92.57, "met")];
        attach_causes(&mut rs, &verdicts);
        attach_known_states(&mut rs, &view);
        let first = rs[0].causes.first().expect("a cause");
        assert_eq!(first.id, "known-state:spark-cx7-degraded-init");
        assert_eq!(first.rank, 1);
        assert_eq!(first.subject, "0000:01:00.1 (enp1s0f1np1)");
        let rec = first.recovery.as_deref().expect("recovery");
        assert!(rec.contains("reboot both endpoints"), "{rec}");
        assert!(rec.contains("at least 60 seconds"), "{rec}");
        let src = first.source.as_deref().expect("source");
        assert!(src.contains("dgx-spark-playbooks/pull/108"), "{src}");
        // The settings' causes follow, renumbered.
        assert_eq!(rs[0].causes[1].id, "cpu.governor");
        assert_eq!(rs[0].causes[1].rank, 2);
        assert!(rs[1].causes.is_empty(), "{:?}", rs[1].causes);
        let j = serde_json::to_value(&rs[0]).expect("json");
        assert_eq!(j["causes"][0]["recovery"].as_str(), Some(rec));
        assert!(j["causes"][1].get("recovery").is_none(), "{j}");
        let q = failed_qualification("dgx-spark", rs, 1.0);
        let cause = &q.selftest[0].causes[0];
        assert!(
            cause_line(cause).starts_with(
                "1. known-state:spark-cx7-degraded-init (0000:01:00.1 (enp1s0f1np1)) matches"
            ),
            "{}",
            cause_line(cause)
        );
        assert!(
            cause
                .recovery
                .as_deref()
                .is_some_and(|r| r.starts_with("keep the final QSFP cabling")),
            "{cause:?}"
        );
        let x = junit(&q);
        assert!(x.contains("recovery: keep the final QSFP cabling"), "{x}");
    }

    /// The RDMA self-test's results carry the same assessment (the launcher assesses the
    /// helper's report): one below its floor fails the stage and names the causes a hardware
    /// port can have; one without a reference does not.
    #[test]
    fn an_rdma_shortfall_gates_like_the_others() {
        let verdicts = vec![
            Verdict::fail("pcie.mrrs", "0000:01:00.0", "512"),
            Verdict::warn("cpu.governor", "cpu0-7", "powersave"),
        ];
        let below = serde_json::json!({
            "engine": "rdma", "mode": "write", "status": "fail", "gbps": 41.3,
            "topology": "ports", "message_size": 8388608,
            "reference": {"verdict": "below", "mtu": 9000, "of_line_pct": 21.1,
                          "of_reference_pct": 41.3, "shortfall_gbps": 48.7,
                          "why": "41.30 Gb/s is 41.3 % of the reference ..."}
        });
        let none = serde_json::json!({
            "engine": "rdma", "mode": "send", "status": "pass", "gbps": 99.6,
            "topology": "ports", "message_size": 8388608,
            "reference": {"verdict": "none", "why": "no reference: ..."}
        });
        let mut rs = vec![result(below), result(none)];
        attach_causes(&mut rs, &verdicts);
        assert_eq!(
            rs[0].causes.first().map(|c| c.id.as_str()),
            Some("pcie.mrrs")
        );
        assert!(rs[1].causes.is_empty());
        assert_eq!(rs[0].shares(), " (21.1 % of line, 41.3 % of reference)");
        assert_eq!(rs[1].shares(), " (no reference)");
    }

    /// A level-2 run that failed, with no checks of its own: the self-test results `rs` and
    /// their causes are what the renderers are asked about.
    fn failed_qualification(profile: &str, rs: Vec<SelftestEntry>, wall_s: f64) -> Qualification {
        Qualification {
            schema: "daqtune.qualify/v1".into(),
            level: 2,
            passed: false,
            stages: Vec::new(),
            checks: Report {
                schema: report::SCHEMA.into(),
                daqtune_version: "0".into(),
                host: report::HostInfo {
                    hostname: None,
                    kernel: None,
                    arch: None,
                    product: None,
                    root: "/".into(),
                },
                profile: profile.into(),
                profile_origin: "given".into(),
                checks: Vec::new(),
                summary: Default::default(),
                gate_failures: Vec::new(),
                elapsed_ms: 0,
                run: None,
                gpu_facts: None,
            },
            selftest: rs,
            gate_failures: Vec::new(),
            subset: None,
            wall_s,
        }
    }

    /// What a fake runner was asked and what it answers: typed reports (no child, no root).
    struct FakeRunner {
        asked: RefCell<Vec<SelftestRequest>>,
        answer: fn(&SelftestRequest) -> Result<SelftestReport, SelftestRunError>,
    }

    impl SelftestRunner for FakeRunner {
        fn run(&self, req: &SelftestRequest) -> Result<SelftestReport, SelftestRunError> {
            self.asked.borrow_mut().push(req.clone());
            (self.answer)(req)
        }
    }

    fn report_of(results: Vec<EngineResult>) -> SelftestReport {
        let mut rep = SelftestReport::new("host", "veth pair", "unpinned");
        for r in results {
            rep.push(r);
        }
        rep
    }

    /// Issue 44: the self-test contract on every run. qualify asks each engine through the
    /// runner with the profile's shape, reads typed results, and records a stage per engine;
    /// an engine that gives no report is an `error` entry with the reason.
    #[test]
    fn the_stages_run_through_the_runner_and_read_typed_results() {
        let spark = crate::model::profile::load("dgx-spark")
            .expect("spark")
            .profile;
        let runner = FakeRunner {
            asked: RefCell::new(Vec::new()),
            answer: |req| match req.engine.as_str() {
                "socket" => {
                    let mut tcp = EngineResult::new("socket", Mode::Tcp, "veth");
                    tcp.status = RunStatus::Pass;
                    tcp.gbps = 42.5;
                    tcp.packets = 1000;
                    let mut udp = EngineResult::new("socket", Mode::Udp, "veth");
                    udp.status = RunStatus::Fail;
                    udp.lost = 7;
                    udp.rate_gbps = Some(10.0);
                    Ok(report_of(vec![tcp, udp]))
                }
                "dpdk" => Ok(report_of(vec![EngineResult::skipped(
                    "dpdk",
                    Mode::Raw,
                    "veth",
                    "daqtune-dpdk not found",
                )])),
                _ => Err(SelftestRunError::NoReport {
                    engine: req.engine.clone(),
                    code: Some(2),
                    why: "daqtune-rdma: no device".into(),
                }),
            },
        };
        let st = StageOptions {
            level: 3,
            selftest_duration: 0.5,
            profile_name: Some("dgx-spark"),
            profile: &spark,
            has_gpu: true,
            veth: true,
        };
        let mut stages = Vec::new();
        let entries = selftest_stages(&runner, &st, ENGINES, &mut stages);
        let asked = runner.asked.borrow();
        assert_eq!(
            asked[0].args(),
            [
                "selftest",
                "socket",
                "--profile",
                "dgx-spark",
                "--veth",
                "--gpu",
                "0",
                "--gpu-memory",
                "copy",
                "--message-size",
                "8192",
                "--duration",
                "10",
                "--format",
                "json",
                "--no-progress"
            ]
        );
        // The RDMA helper takes `--size` and no `--no-progress`.
        assert_eq!(
            asked[2].args(),
            [
                "selftest",
                "rdma",
                "--profile",
                "dgx-spark",
                "--size",
                "8388608",
                "--duration",
                "10",
                "--format",
                "json"
            ]
        );
        let names: Vec<(&str, &str)> = stages
            .iter()
            .map(|s| (s.name.as_str(), s.status.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("selftest socket (soak)", "fail"),
                ("selftest dpdk (soak)", "skip"),
                ("selftest rdma (soak)", "error")
            ]
        );
        assert_eq!(
            stages[0].detail,
            "socket tcp: pass 42.50 Gb/s; socket udp: fail 0.00 Gb/s"
        );
        let got: Vec<(&str, &str, &str)> = entries
            .iter()
            .map(|e| (e.engine.as_str(), e.mode.as_str(), e.status.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("socket", "tcp", "pass"),
                ("socket", "udp", "fail"),
                ("dpdk", "raw", "skip"),
                ("rdma", "-", "error")
            ]
        );
        assert_eq!((entries[1].lost, entries[1].rate_gbps), (7, Some(10.0)));
        assert_eq!(
            entries[3].notes,
            ["the rdma self-test gave no report (exit Some(2)): daqtune-rdma: no device"]
        );
    }

    /// A result whose ports counted losses carries the self-test's own `causes` (port and
    /// counter). qualify read them into its host-cause type, which has other fields, so such
    /// a report was no report at all ("missing field `id`") and the run an error; read as the
    /// self-test's type it is the result it is, its counters ranked with the host's verdicts.
    #[test]
    fn a_result_with_port_counter_causes_is_read() {
        use daqtune_probe::net::counters::{Counter, PortCounters, Source};
        let port = |name: &str, v: u64| PortCounters {
            ifname: name.into(),
            counters: vec![Counter {
                source: Source::Statistics,
                name: "rx_dropped".into(),
                value: v,
            }],
            unavailable: Vec::new(),
        };
        let mut r = EngineResult::new("socket", Mode::Udp, "ports");
        r.status = RunStatus::Fail;
        r.packets = 900;
        r.lost = 100;
        r.set_port_counters(
            &[port("tx0", 0), port("rx0", 0)],
            &[port("tx0", 0), port("rx0", 100)],
            1.0,
        );
        assert!(
            !r.causes.is_empty(),
            "the self-test names its counter causes"
        );
        let stdout = report_of(vec![r]).to_json();
        let rep = read_child_report("socket", stdout.as_bytes(), b"", Some(1))
            .expect("a report with counter causes is a report");
        let mut entries: Vec<SelftestEntry> = rep
            .results
            .into_iter()
            .map(SelftestEntry::from_result)
            .collect();
        assert_eq!(entries[0].port_counters.len(), 2);
        attach_causes(&mut entries, &[]);
        assert_eq!(entries[0].causes[0].id, "nic.counters");
        assert_eq!(entries[0].causes[0].subject, "self-test port rx0");
        // No report: the child's standard error says why.
        let e = read_child_report("dpdk", b"", b"daqtune: not root\n", Some(2))
            .expect_err("nothing on stdout");
        assert_eq!(
            e.to_string(),
            "the dpdk self-test gave no report (exit Some(2)): daqtune: not root"
        );
    }

    /// The qualification JSON recorded on the lent H200 (docs/validation-data) reads back and
    /// is written again byte for byte: the entries' assessment with its `pcie_gbps: null`,
    /// whatever the self-test's own report leaves out.
    #[test]
    fn a_recorded_qualification_is_written_again_unchanged() {
        let path = format!(
            "{}/../docs/validation-data/check-h200-nvml-cache-2026-11-28/qualify.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).expect("recorded qualify.json");
        let q: Qualification = serde_json::from_str(&text).expect("a qualification");
        assert!(q.selftest.iter().any(|e| e.reference.is_some()));
        let again = serde_json::to_string_pretty(&q).expect("json") + "\n";
        assert!(
            again == text,
            "the recorded qualification changed when written again"
        );
    }
}
