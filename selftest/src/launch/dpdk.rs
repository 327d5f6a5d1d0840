//! `daqtune selftest dpdk`: finds the separate `daqtune-dpdk` executable (next to `daqtune`,
//! else on PATH), runs it, and turns what it prints into an [`EngineResult`]. The DPDK engine
//! is a separate program so that `daqtune` itself starts on hosts without libdpdk; every way
//! it cannot run (not installed, built without DPDK, libdpdk missing, no hugepages, not root)
//! ends as `skip` with the reason, never as a crash.

use crate::engine::Mode;
use crate::report::{EngineResult, Status};
use daqtune_report::dpdk::DpdkOutput;
use std::ffi::OsStr;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Name of the DPDK engine executable.
pub const ENGINE_EXE: &str = "daqtune-dpdk";
/// Exit code `daqtune-dpdk` uses for "could not run here" (reason in its JSON).
pub const EXIT_SKIP: i32 = daqtune_report::dpdk::exit::SKIP;
/// The exit status the dynamic loader gives when a shared library is missing.
const EXIT_LOADER: i32 = 127;

/// What to ask the DPDK engine for.
#[derive(Debug, Clone, PartialEq)]
pub struct DpdkRequest {
    /// `None` = veth pair in a private namespace (CI); `Some((tx, rx))` = ports by PCI address.
    pub ports: Option<(String, String)>,
    pub duration: Duration,
    /// Self-test message bytes per frame; `None` = the engine's default.
    pub message_size: Option<usize>,
    /// Pacing in packets/s; `None` = the engine's default pacing.
    pub pps: Option<f64>,
    /// Pacing in Gb/s of payload (overrides pps).
    pub rate_gbps: Option<f64>,
    pub tx_cpu: Option<usize>,
    pub rx_cpu: Option<usize>,
    pub main_cpu: Option<usize>,
    /// Loss tolerated at the paced rate, percent; `None` = the engine's default (0.1 %).
    pub max_loss_pct: Option<f64>,
    /// Search the loss-free maximum instead of one run (`--find-max`).
    pub find_max: Option<FindMaxRequest>,
    /// Copy the engine's progress lines (`progress: ...` on its stderr) to ours as they come.
    pub relay_progress: bool,
}

/// `--find-max` settings handed to the DPDK engine (see [`crate::findmax`]).
#[derive(Debug, Clone, PartialEq)]
pub struct FindMaxRequest {
    pub loss_pct: f64,
    pub precision_pct: f64,
    pub trial_floor: Duration,
    pub max_trials: usize,
}

/// Prefix of the engine's progress lines on stderr.
pub const PROGRESS_PREFIX: &str = "progress: ";

impl Default for DpdkRequest {
    fn default() -> Self {
        DpdkRequest {
            ports: None,
            duration: Duration::from_secs(3),
            message_size: None,
            pps: None,
            rate_gbps: None,
            tx_cpu: None,
            rx_cpu: None,
            main_cpu: None,
            max_loss_pct: None,
            find_max: None,
            relay_progress: false,
        }
    }
}

impl DpdkRequest {
    pub fn topology(&self) -> &'static str {
        if self.ports.is_some() {
            "ports"
        } else {
            "veth"
        }
    }

    /// The engine's command-line arguments for this request.
    pub fn args(&self) -> Vec<String> {
        let mut a = Vec::new();
        match &self.ports {
            None => a.push("--veth".to_string()),
            Some((tx, rx)) => {
                a.extend(["--tx-port".to_string(), tx.clone()]);
                a.extend(["--rx-port".to_string(), rx.clone()]);
            }
        }
        a.extend([
            "--duration".to_string(),
            format!("{}", self.duration.as_secs_f64()),
        ]);
        if let Some(m) = self.message_size {
            a.extend(["--message-size".to_string(), m.to_string()]);
        }
        if let Some(r) = self.rate_gbps {
            a.extend(["--rate".to_string(), r.to_string()]);
        } else if let Some(p) = self.pps {
            a.extend(["--pps".to_string(), p.to_string()]);
        }
        for (flag, v) in [
            ("--tx-cpu", self.tx_cpu),
            ("--rx-cpu", self.rx_cpu),
            ("--main-cpu", self.main_cpu),
        ] {
            if let Some(c) = v {
                a.extend([flag.to_string(), c.to_string()]);
            }
        }
        if let Some(l) = self.max_loss_pct {
            a.extend(["--max-loss".to_string(), l.to_string()]);
        }
        if let Some(f) = &self.find_max {
            a.extend([
                "--find-max".to_string(),
                "--loss".to_string(),
                f.loss_pct.to_string(),
                "--precision".to_string(),
                f.precision_pct.to_string(),
                "--trial-duration".to_string(),
                f.trial_floor.as_secs_f64().to_string(),
                "--max-trials".to_string(),
                f.max_trials.to_string(),
            ]);
        }
        a
    }

    /// How long the engine may take before it is stopped: the run, or every trial a search
    /// may make at its longest, plus EAL start-up and hugepages.
    pub fn time_limit(&self) -> Duration {
        let run = match &self.find_max {
            Some(f) => (f.trial_floor.max(crate::findmax::MAX_TRIAL) + Duration::from_secs(1))
                .saturating_mul(u32::try_from(f.max_trials).unwrap_or(u32::MAX)),
            None => self.duration,
        };
        run + Duration::from_secs(60)
    }
}

/// The outcome of one launch.
#[derive(Debug, Clone)]
pub struct DpdkRun {
    pub result: EngineResult,
    /// The engine's DPDK details (EAL arguments, port counters, xstats, hugepages), as printed.
    pub details: Option<serde_json::Value>,
    /// The executable that ran, if one was found.
    pub exe: Option<PathBuf>,
}

/// Looks for `daqtune-dpdk` next to `self_exe`, then on `path_var` (probe's one helper lookup).
pub fn find_engine(self_exe: Option<&Path>, path_var: Option<&OsStr>) -> Option<PathBuf> {
    daqtune_probe::helpers::find_in(ENGINE_EXE, self_exe, path_var)
}

/// Classifies a run that printed no result: the loader's "cannot open shared object file"
/// means libdpdk (or one of its libraries) is not installed.
pub fn classify_failure(code: Option<i32>, stderr: &str) -> (Status, String) {
    let line = stderr
        .lines()
        .find(|l| l.contains("error while loading shared libraries"))
        .map(str::trim);
    if let Some(l) = line {
        return (
            Status::Skip,
            format!("libdpdk is missing on this host ({l}); install the DPDK runtime (Debian/Ubuntu: the librte-* packages or dpdk)"),
        );
    }
    if code == Some(EXIT_LOADER) {
        return (
            Status::Skip,
            format!(
                "{ENGINE_EXE} could not be loaded (exit 127): {}",
                last_line(stderr)
            ),
        );
    }
    let how = match code {
        Some(c) => format!("exit status {c}"),
        None => "killed by a signal".to_string(),
    };
    (
        Status::Error,
        format!(
            "{ENGINE_EXE} printed no result ({how}): {}",
            last_line(stderr)
        ),
    )
}

fn last_line(s: &str) -> String {
    s.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("no output")
        .trim()
        .to_string()
}

/// Parses what the engine printed (`daqtune_report::dpdk::DpdkOutput`, the type the engine
/// prints): its result and its DPDK details as JSON; `None` when it is not the engine's JSON.
pub fn parse_output(stdout: &str) -> Option<(EngineResult, Option<serde_json::Value>)> {
    let o: DpdkOutput = serde_json::from_str(stdout.trim()).ok()?;
    let details = o.dpdk.and_then(|d| serde_json::to_value(d).ok());
    Some((o.result, details))
}

/// Runs the DPDK engine for `req`. `exe` overrides the search (tests, `--dpdk-engine PATH`).
pub fn run_dpdk(req: &DpdkRequest, exe: Option<PathBuf>) -> DpdkRun {
    let topo = req.topology();
    let exe = exe.or_else(|| {
        let me = std::env::current_exe().ok();
        find_engine(me.as_deref(), std::env::var_os("PATH").as_deref())
    });
    let Some(exe) = exe else {
        return DpdkRun {
            result: EngineResult::skipped(
                "dpdk",
                Mode::Raw,
                topo,
                &format!("{ENGINE_EXE} not found next to daqtune or on PATH (build it: cargo build --release -p daqtune-dpdk --features dpdk, with libdpdk-dev)"),
            ),
            details: None,
            exe: None,
        };
    };
    let spawn = || {
        Command::new(&exe)
            .args(req.args())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
    };
    let mut tries = 0;
    let spawned = loop {
        match spawn() {
            // ETXTBSY: the file was just written and another thread's fork still holds it
            // open for writing; it goes away within milliseconds.
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && tries < 20 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(10));
            }
            r => break r,
        }
    };
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            return DpdkRun {
                result: EngineResult::skipped(
                    "dpdk",
                    Mode::Raw,
                    topo,
                    &format!("cannot start {}: {e}", exe.display()),
                ),
                details: None,
                exe: Some(exe),
            }
        }
    };
    // Drain both pipes on threads so a chatty EAL can never block the child.
    let drain = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            if let Some(mut r) = r {
                let _ = r.read_to_string(&mut s);
            }
            s
        })
    };
    let out_t = drain(
        child
            .stdout
            .take()
            .map(|r| Box::new(r) as Box<dyn Read + Send>),
    );
    let relay = req.relay_progress;
    let err_t = child.stderr.take().map(|r| {
        std::thread::spawn(move || {
            // Line by line, so progress reaches the terminal while the engine runs.
            use std::io::{BufRead, Write};
            let mut s = String::new();
            for line in std::io::BufReader::new(r).lines().map_while(|l| l.ok()) {
                if let Some(p) = line.strip_prefix(PROGRESS_PREFIX) {
                    if relay {
                        let _ = writeln!(std::io::stderr(), "{p}");
                    }
                    continue;
                }
                s.push_str(&line);
                s.push('\n');
            }
            s
        })
    });
    // EAL start-up, hugepage reservation and the drain take a few seconds beyond the run.
    let deadline = Instant::now() + req.time_limit();
    let mut termed = false;
    let mut forwarded = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) => {}
            Err(_) => break None,
        }
        // A signal for us is one for the run: the engine stops and cleans up as on its own.
        if let (Some(sig), false) = (daqtune_probe::signals::pending(), forwarded) {
            let _ = crate::sys::signal_child(&child, sig);
            forwarded = true;
        }
        if Instant::now() > deadline {
            if !termed {
                // SIGTERM first: the engine stops its ports and gives back its hugepages.
                let _ = crate::sys::signal_child(&child, libc::SIGTERM);
                termed = true;
            } else if Instant::now() > deadline + Duration::from_secs(10) {
                let _ = child.kill();
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = out_t.join().unwrap_or_default();
    let stderr = err_t.and_then(|t| t.join().ok()).unwrap_or_default();
    let code = status.and_then(|s| s.code());
    match parse_output(&stdout) {
        Some((mut result, details)) => {
            if termed {
                result.notes.push(format!(
                    "{ENGINE_EXE} overran its time limit and was stopped"
                ));
            }
            DpdkRun {
                result,
                details,
                exe: Some(exe),
            }
        }
        None => {
            let (status, why) = classify_failure(code, &stderr);
            let result = match status {
                Status::Skip => EngineResult::skipped("dpdk", Mode::Raw, topo, &why),
                _ => EngineResult::errored("dpdk", Mode::Raw, topo, &why),
            };
            DpdkRun {
                result,
                details: None,
                exe: Some(exe),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn script(dir: &Path, body: &str) -> PathBuf {
        let p = dir.join(ENGINE_EXE);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).expect("write");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        p
    }

    #[test]
    fn args_for_both_topologies() {
        let r = DpdkRequest::default();
        assert_eq!(r.args(), vec!["--veth", "--duration", "3"]);
        let r = DpdkRequest {
            ports: Some(("0000:01:00.0".into(), "0000:01:00.1".into())),
            duration: Duration::from_millis(1500),
            message_size: Some(64),
            pps: Some(400000.0),
            tx_cpu: Some(9),
            rx_cpu: Some(10),
            ..DpdkRequest::default()
        };
        assert_eq!(
            r.args(),
            vec![
                "--tx-port",
                "0000:01:00.0",
                "--rx-port",
                "0000:01:00.1",
                "--duration",
                "1.5",
                "--message-size",
                "64",
                "--pps",
                "400000",
                "--tx-cpu",
                "9",
                "--rx-cpu",
                "10"
            ]
        );
        assert_eq!(r.topology(), "ports");
    }

    #[test]
    fn finds_next_to_self_then_on_path() {
        let (ta, tb) = (
            tempfile::tempdir().expect("tmp"),
            tempfile::tempdir().expect("tmp"),
        );
        let (a, b) = (ta.path().to_path_buf(), tb.path().to_path_buf());
        let on_path = script(&b, "exit 0");
        let me = a.join("daqtune");
        let path = std::env::join_paths([Path::new("/nonexistent"), b.as_path()]).expect("path");
        assert_eq!(find_engine(Some(&me), Some(&path)), Some(on_path));
        let beside = script(&a, "exit 0");
        assert_eq!(find_engine(Some(&me), Some(&path)), Some(beside));
        // Not executable = not found.
        std::fs::set_permissions(a.join(ENGINE_EXE), std::fs::Permissions::from_mode(0o644))
            .expect("chmod");
        std::fs::set_permissions(b.join(ENGINE_EXE), std::fs::Permissions::from_mode(0o644))
            .expect("chmod");
        assert_eq!(find_engine(Some(&me), Some(&path)), None);
        assert_eq!(find_engine(None, None), None);
    }

    #[test]
    fn missing_libdpdk_is_a_skip() {
        let (s, why) = classify_failure(
            Some(127),
            "./daqtune-dpdk: error while loading shared libraries: librte_eal.so.23: cannot open shared object file: No such file or directory\n",
        );
        assert_eq!(s, Status::Skip);
        assert!(why.contains("libdpdk is missing") && why.contains("librte_eal.so.23"));
        let (s, _) = classify_failure(Some(101), "thread 'main' panicked\n");
        assert_eq!(s, Status::Error);
        let (s, why) = classify_failure(None, "");
        assert_eq!(s, Status::Error);
        assert!(why.contains("signal"));
    }

    #[test]
    fn runs_an_engine_and_reads_its_result() {
        let td = tempfile::tempdir().expect("tmp");
        let d = td.path();
        let mut ok = EngineResult::new("dpdk", Mode::Raw, "veth");
        ok.packets = 5;
        ok.status = Status::Pass;
        let json = serde_json::json!({"schema": "daqtune.selftest.dpdk/v1", "result": ok, "dpdk": {"dpdk_version": "22.11.11"}});
        let exe = script(d, &format!("cat <<'EOF'\n{json}\nEOF\nexit 0"));
        let run = run_dpdk(&DpdkRequest::default(), Some(exe.clone()));
        assert_eq!(run.result.status, Status::Pass);
        assert_eq!(run.result.packets, 5);
        assert_eq!(
            run.details
                .and_then(|v| v["dpdk_version"].as_str().map(str::to_string)),
            Some("22.11.11".to_string())
        );

        let skipped = EngineResult::skipped(
            "dpdk",
            Mode::Raw,
            "veth",
            "DPDK support was not compiled in",
        );
        let json = serde_json::json!({"schema": "daqtune.selftest.dpdk/v1", "result": skipped, "dpdk": null});
        script(d, &format!("cat <<'EOF'\n{json}\nEOF\nexit 3"));
        let run = run_dpdk(&DpdkRequest::default(), Some(exe.clone()));
        assert_eq!(run.result.status, Status::Skip);
        assert!(run.result.notes[0].contains("not compiled in"));

        script(d, "echo 'x: error while loading shared libraries: librte_eal.so.24: cannot open shared object file' >&2; exit 127");
        let run = run_dpdk(&DpdkRequest::default(), Some(exe.clone()));
        assert_eq!(run.result.status, Status::Skip);

        script(d, "echo garbage; exit 1");
        let run = run_dpdk(&DpdkRequest::default(), Some(exe.clone()));
        assert_eq!(run.result.status, Status::Error);

        let run = run_dpdk(&DpdkRequest::default(), Some(d.join("absent")));
        assert_eq!(run.result.status, Status::Skip);
    }
}
