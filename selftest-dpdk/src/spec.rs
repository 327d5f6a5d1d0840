//! What `daqtune-dpdk` is asked to do (a JSON run spec or the same as flags) and what it prints.
//! Pure data and parsing: built and tested with or without the `dpdk` feature.

use serde::{Deserialize, Serialize};

pub use daqtune_report::dpdk::{exit, DpdkDetails, DpdkOutput, PortReport, OUTPUT_SCHEMA};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Topology {
    /// af_packet vdevs on a veth pair in a private namespace of this process.
    Veth,
    /// Physical ports by PCI address (ConnectX/mlx5).
    Ports,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DpdkRunSpec {
    pub topology: Topology,
    /// PCI address of the sending port (topology `ports`).
    pub tx_port: Option<String>,
    /// PCI address of the receiving port (topology `ports`); may equal tx_port with a loopback.
    pub rx_port: Option<String>,
    /// Self-test message bytes per frame (payload after Ethernet/IPv4/UDP headers).
    pub message_size: usize,
    pub duration_s: f64,
    /// Pacing in Gb/s of self-test payload.
    pub rate_gbps: Option<f64>,
    /// Pacing in packets/s (alternative to rate_gbps).
    pub pps: Option<f64>,
    pub main_cpu: Option<usize>,
    pub tx_cpu: Option<usize>,
    pub rx_cpu: Option<usize>,
    /// Mbufs per pool (one pool per port).
    pub mbufs: u32,
    /// RX and TX descriptors per queue.
    pub descriptors: u16,
    /// Reserve 2 MiB hugepages for the run when too few are free (root only).
    pub reserve_hugepages: bool,
    /// Loss tolerated at the paced rate, percent.
    pub max_loss_pct: f64,
    /// EAL log level.
    pub log_level: String,
    /// Topology veth: steer the receiving end's kernel work to the RX CPU (RPS).
    pub rps: bool,
    /// Search the loss-free maximum (daqtune_selftest::findmax) instead of one run.
    pub find_max: bool,
    /// find_max: loss a trial may have and still pass, percent.
    pub loss_pct: f64,
    /// find_max: stopping precision, percent of the upper start bound.
    pub precision_pct: f64,
    /// find_max: shortest trial, seconds.
    pub trial_duration_s: f64,
    /// find_max: trials at most, probe and confirmations included.
    pub max_trials: usize,
}

impl Default for DpdkRunSpec {
    fn default() -> Self {
        DpdkRunSpec {
            topology: Topology::Veth,
            tx_port: None,
            rx_port: None,
            // A packet-rate test by default (64-byte messages, 106-byte frames, like testpmd's
            // 64-byte default); --message-size up to 8976 for jumbo frames.
            message_size: 64,
            duration_s: 3.0,
            rate_gbps: None,
            pps: Some(400_000.0),
            main_cpu: None,
            tx_cpu: None,
            rx_cpu: None,
            mbufs: 8191,
            descriptors: 1024,
            reserve_hugepages: true,
            max_loss_pct: 0.1,
            log_level: "notice".into(),
            rps: true,
            find_max: false,
            loss_pct: 0.0,
            precision_pct: 2.0,
            trial_duration_s: 2.0,
            max_trials: daqtune_selftest::findmax::MAX_TRIALS,
        }
    }
}

impl DpdkRunSpec {
    /// Checks ranges; returns the first problem in words.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.duration_s > 0.0 && self.duration_s <= 86_400.0) {
            return Err(format!(
                "duration {} s out of range (0, 86400]",
                self.duration_s
            ));
        }
        let max_msg = crate::eal_args::MAX_JUMBO_FRAME - crate::eal_args::L2_L4_HEADERS;
        if self.message_size < daqtune_selftest::payload::HEADER_LEN || self.message_size > max_msg
        {
            return Err(format!(
                "message size {} out of range [{}, {max_msg}]",
                self.message_size,
                daqtune_selftest::payload::HEADER_LEN
            ));
        }
        if self.rate_gbps.is_some() && self.pps.is_some() {
            return Err("give rate_gbps or pps, not both".into());
        }
        for (what, v) in [("rate_gbps", self.rate_gbps), ("pps", self.pps)] {
            if let Some(v) = v {
                if !(v > 0.0 && v.is_finite()) {
                    return Err(format!("{what} must be positive"));
                }
            }
        }
        if self.mbufs < 1024 {
            return Err("mbufs must be at least 1024".into());
        }
        if !self.descriptors.is_power_of_two() || self.descriptors < 64 {
            return Err("descriptors must be a power of two >= 64".into());
        }
        if self.topology == Topology::Ports {
            let tx = self
                .tx_port
                .as_deref()
                .ok_or("topology ports needs tx_port (PCI address)")?;
            let rx = self.rx_port.as_deref().unwrap_or(tx);
            for p in [tx, rx] {
                crate::eal_args::normalize_bdf(p).map_err(|e| e.to_string())?;
            }
        }
        if !(0.0..=100.0).contains(&self.max_loss_pct) {
            return Err("max_loss_pct must be within 0..100".into());
        }
        if self.find_max {
            if !(0.0..100.0).contains(&self.loss_pct) {
                return Err("loss_pct must be within 0..100".into());
            }
            if !(self.precision_pct > 0.0 && self.precision_pct <= 50.0) {
                return Err("precision_pct must be within (0, 50]".into());
            }
            if !(self.trial_duration_s > 0.0 && self.trial_duration_s <= 600.0) {
                return Err("trial_duration_s must be within (0, 600]".into());
            }
            // Named as the spec's other fields are: a JSON spec (--spec) sets it as max_trials.
            if let Some(why) =
                daqtune_selftest::findmax::max_trials_problem("max_trials", self.max_trials)
            {
                return Err(why);
            }
        }
        Ok(())
    }

    /// Target packets per second, if paced.
    pub fn target_pps(&self) -> Option<f64> {
        self.pps.or_else(|| {
            self.rate_gbps
                .map(|g| g * 1e9 / (self.message_size as f64 * 8.0))
        })
    }

    /// Pacing as payload Gb/s (what EngineResult reports).
    pub fn target_gbps(&self) -> Option<f64> {
        self.rate_gbps
            .or_else(|| self.pps.map(|p| p * self.message_size as f64 * 8.0 / 1e9))
    }
}

/// Picks (main, tx, rx) CPUs: the spec's, else the two highest allowed CPUs for TX and RX and
/// the lowest for the main lcore (which may coincide with TX on a two-core host).
pub fn pick_cpus(spec: &DpdkRunSpec, allowed: &[usize]) -> Result<(usize, usize, usize), String> {
    let mut sorted = allowed.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let (Some(&lo), Some(&hi)) = (sorted.first(), sorted.last()) else {
        return Err("no CPU allowed for this process".into());
    };
    let second = if sorted.len() >= 2 {
        sorted[sorted.len() - 2]
    } else {
        hi
    };
    let tx = spec.tx_cpu.unwrap_or(second);
    let rx = spec.rx_cpu.unwrap_or(hi);
    let main = spec.main_cpu.unwrap_or(lo);
    for (what, c) in [("main", main), ("tx", tx), ("rx", rx)] {
        if !sorted.contains(&c) {
            return Err(format!(
                "{what} CPU {c} is not in this process's affinity mask {sorted:?}"
            ));
        }
    }
    Ok((main, tx, rx))
}

/// Interface names of the veth topology (inside the run's private namespace).
pub const VETH_TX: &str = "dqt0";
pub const VETH_RX: &str = "dqt1";

/// The EAL plan for `spec` on a host whose process may use `allowed` CPUs.
pub fn eal_plan(
    spec: &DpdkRunSpec,
    file_prefix: &str,
    allowed: &[usize],
) -> Result<crate::eal_args::EalPlan, String> {
    use crate::eal_args::{frame_for_message, EalPlan, Ports};
    let (main_cpu, tx_cpu, rx_cpu) = pick_cpus(spec, allowed)?;
    let ports = match spec.topology {
        Topology::Veth => Ports::Veth {
            tx_iface: VETH_TX.into(),
            rx_iface: VETH_RX.into(),
        },
        Topology::Ports => {
            let tx = spec
                .tx_port
                .clone()
                .ok_or("topology ports needs tx_port (PCI address)")?;
            let rx = spec.rx_port.clone().unwrap_or_else(|| tx.clone());
            Ports::Pci {
                tx_bdf: tx,
                rx_bdf: rx,
            }
        }
    };
    Ok(EalPlan {
        file_prefix: file_prefix.to_string(),
        main_cpu,
        tx_cpu,
        rx_cpu,
        ports,
        frame_len: frame_for_message(spec.message_size),
        in_memory: true,
        log_level: spec.log_level.clone(),
    })
}

/// Parses `--flag value` style arguments (after the program name) on top of `base`.
pub fn parse_flags(args: &[String], mut spec: DpdkRunSpec) -> Result<DpdkRunSpec, String> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let (key, inline) = match a.split_once('=') {
            Some((k, v)) if k.starts_with("--") => (k, Some(v.to_string())),
            _ => (a.as_str(), None),
        };
        let mut val = || -> Result<String, String> {
            inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or_else(|| format!("{key} needs a value"))
        };
        fn num<T: std::str::FromStr>(k: &str, v: &str) -> Result<T, String> {
            v.parse().map_err(|_| format!("{k}: not a number: {v:?}"))
        }
        match key {
            "--veth" => spec.topology = Topology::Veth,
            "--tx-port" => {
                spec.topology = Topology::Ports;
                spec.tx_port = Some(val()?);
            }
            "--rx-port" => {
                spec.topology = Topology::Ports;
                spec.rx_port = Some(val()?);
            }
            "--duration" => spec.duration_s = num(key, &val()?)?,
            "--message-size" | "--size" => spec.message_size = num(key, &val()?)?,
            "--rate" => {
                spec.rate_gbps = Some(num(key, &val()?)?);
                spec.pps = None;
            }
            "--pps" => {
                spec.pps = Some(num(key, &val()?)?);
                spec.rate_gbps = None;
            }
            "--unpaced" => {
                spec.pps = None;
                spec.rate_gbps = None;
            }
            "--main-cpu" => spec.main_cpu = Some(num(key, &val()?)?),
            "--tx-cpu" => spec.tx_cpu = Some(num(key, &val()?)?),
            "--rx-cpu" => spec.rx_cpu = Some(num(key, &val()?)?),
            "--mbufs" => spec.mbufs = num(key, &val()?)?,
            "--descriptors" => spec.descriptors = num(key, &val()?)?,
            "--max-loss" => spec.max_loss_pct = num(key, &val()?)?,
            "--no-reserve" => spec.reserve_hugepages = false,
            "--no-rps" => spec.rps = false,
            "--log-level" => spec.log_level = val()?,
            "--find-max" => spec.find_max = true,
            "--loss" => spec.loss_pct = num(key, &val()?)?,
            "--precision" => spec.precision_pct = num(key, &val()?)?,
            "--trial-duration" => spec.trial_duration_s = num(key, &val()?)?,
            "--max-trials" => spec.max_trials = num(key, &val()?)?,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    spec.validate()?;
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    /// A spec's search settings: loss, precision, trial floor, trials at most.
    fn find_max_settings(p: &DpdkRunSpec) -> (f64, f64, f64, usize) {
        assert!(p.find_max);
        (
            p.loss_pct,
            p.precision_pct,
            p.trial_duration_s,
            p.max_trials,
        )
    }

    #[test]
    fn defaults_validate_and_pace() {
        let d = DpdkRunSpec::default();
        assert_eq!(d.validate(), Ok(()));
        assert_eq!(d.target_pps(), Some(400_000.0));
        assert!((d.target_gbps().expect("paced") - 0.2048).abs() < 1e-9);
    }

    #[test]
    fn flags() {
        let p = parse_flags(
            &s(&[
                "--veth",
                "--duration",
                "3",
                "--rate=2.5",
                "--message-size",
                "64",
            ]),
            DpdkRunSpec::default(),
        )
        .expect("ok");
        assert_eq!(p.duration_s, 3.0);
        assert_eq!(p.rate_gbps, Some(2.5));
        assert_eq!(p.pps, None);
        assert_eq!(p.message_size, 64);
        let p = parse_flags(
            &s(&["--tx-port", "0000:01:00.0", "--rx-port", "01:00.1"]),
            DpdkRunSpec::default(),
        )
        .expect("ok");
        assert_eq!(p.topology, Topology::Ports);
        assert!(parse_flags(&s(&["--tx-port", "eth0"]), DpdkRunSpec::default()).is_err());
        assert!(parse_flags(&s(&["--duration"]), DpdkRunSpec::default()).is_err());
        assert!(parse_flags(&s(&["--duration", "x"]), DpdkRunSpec::default()).is_err());
        assert!(parse_flags(&s(&["--bogus"]), DpdkRunSpec::default()).is_err());
        assert!(parse_flags(&s(&["--message-size", "9000"]), DpdkRunSpec::default()).is_err());
        assert!(parse_flags(&s(&["--descriptors", "1000"]), DpdkRunSpec::default()).is_err());
        let p = parse_flags(
            &s(&[
                "--find-max",
                "--loss",
                "0.5",
                "--precision=1",
                "--trial-duration",
                "1.5",
                "--max-trials",
                "12",
            ]),
            DpdkRunSpec::default(),
        )
        .expect("ok");
        assert_eq!(find_max_settings(&p), (0.5, 1.0, 1.5, 12));
        // Fewer than a probe, a bisection step and five confirmations, or more than the cap.
        for n in ["6", "201"] {
            assert!(parse_flags(
                &s(&["--find-max", "--max-trials", n]),
                DpdkRunSpec::default()
            )
            .is_err());
        }
        assert!(parse_flags(
            &s(&["--find-max", "--precision", "0"]),
            DpdkRunSpec::default()
        )
        .is_err());
        assert!(parse_flags(&s(&["--find-max", "--loss", "100"]), DpdkRunSpec::default()).is_err());
    }

    #[test]
    fn the_launchers_find_max_flags_are_what_this_parser_reads() {
        // The launcher (daqtune selftest dpdk) and this engine are two processes: the search's
        // settings cross as flags, so each must reach the spec the engine runs.
        use daqtune_selftest::dpdk_launcher::{DpdkRequest, FindMaxRequest};
        let req = DpdkRequest {
            find_max: Some(FindMaxRequest {
                loss_pct: 0.25,
                precision_pct: 5.0,
                trial_floor: std::time::Duration::from_millis(1500),
                max_trials: 12,
            }),
            ..DpdkRequest::default()
        };
        let p = parse_flags(&req.args(), DpdkRunSpec::default()).expect("the launcher's flags");
        assert_eq!(find_max_settings(&p), (0.25, 5.0, 1.5, 12));
    }

    #[test]
    fn a_json_specs_trial_cap_is_refused_by_its_own_name() {
        let j = r#"{"topology":"veth","find_max":true,"max_trials":6}"#;
        let p: DpdkRunSpec = serde_json::from_str(j).expect("json");
        let e = p
            .validate()
            .expect_err("6 trials leave no room for a confirmation round");
        assert!(e.starts_with("max_trials must be within 7..=200"), "{e}");
    }

    #[test]
    fn json_spec_rejects_unknown_keys() {
        let j = r#"{"topology":"ports","tx_port":"0000:01:00.0","duration_s":1}"#;
        let p: DpdkRunSpec = serde_json::from_str(j).expect("json");
        assert_eq!(p.topology, Topology::Ports);
        assert_eq!(p.validate(), Ok(()));
        assert!(serde_json::from_str::<DpdkRunSpec>(r#"{"nope":1}"#).is_err());
        let p: DpdkRunSpec = serde_json::from_str(r#"{"topology":"ports"}"#).expect("json");
        assert!(p.validate().is_err());
    }

    #[test]
    fn cpu_choice() {
        let d = DpdkRunSpec::default();
        assert_eq!(pick_cpus(&d, &[0, 1]), Ok((0, 0, 1)));
        assert_eq!(pick_cpus(&d, &[0, 1, 2, 3]), Ok((0, 2, 3)));
        assert_eq!(pick_cpus(&d, &[5]), Ok((5, 5, 5)));
        assert!(pick_cpus(&d, &[]).is_err());
        let mut d2 = d.clone();
        d2.tx_cpu = Some(9);
        assert!(pick_cpus(&d2, &[0, 1]).is_err());
    }
}
