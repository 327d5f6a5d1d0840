//! CPUs: which exist and are online, their frequency governor, idle states and SMT siblings.

use crate::cpulist::{parse_cpulist, CpuSet};
use crate::host::{Host, ReadError};

const CPU_DIR: &str = "/sys/devices/system/cpu";

#[derive(Debug, Clone, serde::Serialize)]
pub struct IdleState {
    pub index: u32,
    pub name: String,
    /// Exit latency in microseconds; states deeper than a few µs hurt NIC polling.
    pub latency_us: Option<u64>,
    pub disabled: Option<bool>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Cpu {
    pub id: u32,
    /// `None` when the cpufreq directory is absent (no driver, VM).
    pub governor: Option<String>,
    pub available_governors: Vec<String>,
    pub freq_driver: Option<String>,
    pub max_freq_khz: Option<u64>,
    pub idle_states: Vec<IdleState>,
    pub siblings: Option<CpuSet>,
    pub package: Option<u32>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct CpuFacts {
    pub online: CpuSet,
    pub possible: Option<CpuSet>,
    pub present: Option<CpuSet>,
    /// Effective isolation as the kernel applied it (domain isolation).
    pub isolated: Option<CpuSet>,
    pub nohz_full: Option<CpuSet>,
    pub cpus: Vec<Cpu>,
    /// The cpuidle driver (`intel_idle`, `acpi_idle`, `psci_idle`, `none`).
    pub idle_driver: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum CpuError {
    #[error("cannot read the online CPU list: {0}")]
    Online(#[from] ReadError),
    #[error("online CPU list `{value}` is unreadable: {why}")]
    BadOnline { value: String, why: String },
}

/// A list quoted in a message: a hostile one can be kilobytes long.
fn shown(s: &str) -> String {
    match s.char_indices().nth(60) {
        Some((at, _)) => format!("{}...", &s[..at]),
        None => s.to_string(),
    }
}

fn read_set(host: &Host, path: &str, nr: Option<u32>) -> Option<CpuSet> {
    let s = host.read_attr(path).ok()?;
    // sysfs writes "(null)" for an empty nohz_full on some kernels.
    if s == "(null)" {
        return Some(CpuSet::new());
    }
    let set = parse_cpulist(&s, nr).ok()?;
    // A CPU the host cannot have makes the whole list garbage.
    match nr {
        Some(n) if set.check_possible(n).is_err() => None,
        _ => Some(set),
    }
}

pub fn read_cpus(host: &Host) -> Result<CpuFacts, CpuError> {
    let online_s = host.read_attr(&format!("{CPU_DIR}/online"))?;
    let bad = |why: String| CpuError::BadOnline {
        value: shown(&online_s),
        why,
    };
    let online = parse_cpulist(&online_s, None).map_err(|e| bad(e.to_string()))?;
    let possible = read_set(host, &format!("{CPU_DIR}/possible"), None);
    if let Some(n) = possible.as_ref().and_then(|p| p.last()) {
        online
            .check_possible(n + 1)
            .map_err(|e| bad(format!("{e} (cpu/possible)")))?;
    }
    let nr = possible
        .as_ref()
        .and_then(|p| p.last())
        .map(|l| l + 1)
        .or(online.last().map(|l| l + 1));
    let present = read_set(host, &format!("{CPU_DIR}/present"), nr);
    let isolated = read_set(host, &format!("{CPU_DIR}/isolated"), nr);
    let nohz_full = read_set(host, &format!("{CPU_DIR}/nohz_full"), nr);
    let idle_driver = host
        .read_attr(&format!("{CPU_DIR}/cpuidle/current_driver"))
        .ok();
    let mut cpus = Vec::with_capacity(online.len());
    for id in online.iter() {
        cpus.push(read_cpu(host, id));
    }
    Ok(CpuFacts {
        online,
        possible,
        present,
        isolated,
        nohz_full,
        cpus,
        idle_driver,
    })
}

fn read_cpu(host: &Host, id: u32) -> Cpu {
    let base = format!("{CPU_DIR}/cpu{id}");
    let freq = format!("{base}/cpufreq");
    let governor = host.read_attr(&format!("{freq}/scaling_governor")).ok();
    let available_governors = host
        .read_attr(&format!("{freq}/scaling_available_governors"))
        .map(|s| s.split_whitespace().map(String::from).collect())
        .unwrap_or_default();
    let freq_driver = host.read_attr(&format!("{freq}/scaling_driver")).ok();
    let max_freq_khz = host.read_parsed(&format!("{freq}/cpuinfo_max_freq"));
    let mut idle_states = Vec::new();
    if let Ok(names) = host.read_dir(&format!("{base}/cpuidle")) {
        for n in names {
            let Some(index) = n.strip_prefix("state").and_then(|i| i.parse().ok()) else {
                continue;
            };
            let sdir = format!("{base}/cpuidle/{n}");
            idle_states.push(IdleState {
                index,
                name: host.read_attr(&format!("{sdir}/name")).unwrap_or_default(),
                latency_us: host.read_parsed(&format!("{sdir}/latency")),
                disabled: host
                    .read_attr(&format!("{sdir}/disable"))
                    .ok()
                    .map(|v| v != "0"),
            });
        }
        idle_states.sort_by_key(|s| s.index);
    }
    let siblings = read_set(host, &format!("{base}/topology/thread_siblings_list"), None);
    let package = host.read_parsed(&format!("{base}/topology/physical_package_id"));
    Cpu {
        id,
        governor,
        available_governors,
        freq_driver,
        max_freq_khz,
        idle_states,
        siblings,
        package,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root(files: &[(&str, &str)]) -> tempfile::TempDir {
        let d = tempfile::tempdir().expect("tempdir");
        for (p, v) in files {
            let at = d.path().join(p.trim_start_matches('/'));
            std::fs::create_dir_all(at.parent().expect("parent")).expect("mkdir");
            std::fs::write(at, v).expect("write");
        }
        d
    }

    #[test]
    fn lists_beyond_possible_are_garbage() {
        let d = root(&[
            ("sys/devices/system/cpu/online", "0-3\n"),
            ("sys/devices/system/cpu/possible", "0-3\n"),
            ("sys/devices/system/cpu/isolated", "2-40\n"),
        ]);
        let host = Host::at(d.path()).expect("host");
        let f = read_cpus(&host).expect("cpus");
        assert_eq!(f.online.to_string(), "0-3");
        assert!(f.isolated.is_none(), "{:?}", f.isolated);

        let d = root(&[
            ("sys/devices/system/cpu/online", "0-7\n"),
            ("sys/devices/system/cpu/possible", "0-3\n"),
        ]);
        let host = Host::at(d.path()).expect("host");
        let e = read_cpus(&host).expect_err("online beyond possible");
        assert!(e.to_string().contains("CPU 7 is beyond"), "{e}");
    }

    #[test]
    fn online_bomb_is_refused_and_quoted_short() {
        let bomb = "0-65535,".repeat(7000);
        let d = root(&[("sys/devices/system/cpu/online", &bomb)]);
        let host = Host::at(d.path()).expect("host");
        let e = read_cpus(&host).expect_err("bomb").to_string();
        assert!(e.contains("beyond the kernel's limit of 8192"), "{e}");
        assert!(e.len() < 300, "{e}");
    }
}
