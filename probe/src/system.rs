//! Platform identity and system-wide facts: DMI / device tree, kernel version, Secure Boot,
//! kernel lockdown, containers, loaded modules, services that manage CPU frequency, sysctls.

use crate::host::Host;

#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct PlatformFacts {
    pub dmi_product: Option<String>,
    pub dmi_board: Option<String>,
    pub dmi_vendor: Option<String>,
    /// /proc/device-tree/model (NUL-terminated on disk; Tegra/Jetson/IGX and DGX Spark set it).
    pub dt_model: Option<String>,
    pub dt_compatible: Vec<String>,
    pub arch: Option<String>,
    pub kernel_release: Option<String>,
    pub hostname: Option<String>,
    /// `none`, `integrity` or `confidentiality`; `None` when the LSM is absent.
    pub lockdown: Option<String>,
    /// `Some(true)` when the EFI SecureBoot variable says enabled; `None` on non-EFI hosts.
    pub secure_boot: Option<bool>,
    /// Why this looks like a container (`/.dockerenv`, cgroup path, ...), if it does.
    pub container: Option<String>,
}

/// Parse the kernel release `6.1.0-28-amd64` into (major, minor, patch).
pub fn parse_kernel_version(rel: &str) -> Option<(u32, u32, u32)> {
    let core = rel.trim().split(['-', '+', ' ', '_']).next()?;
    let mut it = core.split('.');
    let major = it.next()?.parse().ok()?;
    let minor = it.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    let patch = it
        .next()
        .and_then(|s| {
            let d: String = s.chars().take_while(|c| c.is_ascii_digit()).collect();
            d.parse().ok()
        })
        .unwrap_or(0);
    Some((major, minor, patch))
}

/// Parse /sys/kernel/security/lockdown: `none [integrity] confidentiality`.
pub fn parse_lockdown(text: &str) -> Option<String> {
    let start = text.find('[')?;
    let end = text[start..].find(']')? + start;
    Some(text[start + 1..end].to_string())
}

/// The EFI variable file is 4 bytes of attributes followed by the value byte.
pub fn parse_efi_bool(bytes: &[u8]) -> Option<bool> {
    bytes.get(4).map(|b| *b == 1)
}

fn dt_string(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .trim_end_matches('\0')
        .trim()
        .to_string()
}

const SECURE_BOOT_VAR: &str =
    "/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c";

pub fn read_platform(host: &Host) -> PlatformFacts {
    let dmi = |a: &str| {
        host.read_attr(&format!("/sys/class/dmi/id/{a}"))
            .ok()
            .filter(|s| !s.is_empty())
    };
    let dt_model = host
        .read_bytes("/proc/device-tree/model")
        .or_else(|_| host.read_bytes("/sys/firmware/devicetree/base/model"))
        .ok()
        .map(|b| dt_string(&b))
        .filter(|s| !s.is_empty());
    let dt_compatible = host
        .read_bytes("/proc/device-tree/compatible")
        .or_else(|_| host.read_bytes("/sys/firmware/devicetree/base/compatible"))
        .map(|b| {
            b.split(|c| *c == 0)
                .filter(|s| !s.is_empty())
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect()
        })
        .unwrap_or_default();
    let secure_boot = host
        .read_bytes(SECURE_BOOT_VAR)
        .ok()
        .and_then(|b| parse_efi_bool(&b));
    PlatformFacts {
        dmi_product: dmi("product_name"),
        dmi_board: dmi("board_name"),
        dmi_vendor: dmi("sys_vendor"),
        dt_model,
        dt_compatible,
        arch: detect_arch(host),
        kernel_release: host.read_attr("/proc/sys/kernel/osrelease").ok(),
        hostname: host.read_attr("/proc/sys/kernel/hostname").ok(),
        lockdown: host
            .read_string("/sys/kernel/security/lockdown")
            .ok()
            .and_then(|t| parse_lockdown(&t)),
        secure_boot,
        container: detect_container(host),
    }
}

fn detect_arch(host: &Host) -> Option<String> {
    if host.is_live() {
        return Some(std::env::consts::ARCH.to_string());
    }
    host.read_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| arch_from_cpuinfo(&t))
}

/// x86 cpuinfo names a `vendor_id`; arm64 names a `CPU implementer`.
pub fn arch_from_cpuinfo(text: &str) -> Option<String> {
    for l in text.lines() {
        let key = l.split(':').next().unwrap_or("").trim();
        match key {
            "vendor_id" | "flags" => return Some("x86_64".into()),
            "CPU implementer" | "Features" => return Some("aarch64".into()),
            _ => {}
        }
    }
    None
}

/// Container detection from files a container runtime leaves, never from spawning tools.
pub fn detect_container(host: &Host) -> Option<String> {
    if host.exists("/.dockerenv") {
        return Some("/.dockerenv present".into());
    }
    if host.exists("/run/.containerenv") {
        return Some("/run/.containerenv present (podman)".into());
    }
    if let Ok(c) = host.read_attr("/run/systemd/container") {
        if !c.is_empty() {
            return Some(format!("systemd reports container `{c}`"));
        }
    }
    if let Ok(cg) = host.read_string("/proc/1/cgroup") {
        for l in cg.lines() {
            for k in ["docker", "kubepods", "containerd", "libpod", "lxc"] {
                if l.contains(k) {
                    return Some(format!("/proc/1/cgroup mentions {k}"));
                }
            }
        }
    }
    None
}

/// A loaded kernel module from /proc/modules.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Module {
    pub name: String,
    pub size: u64,
    pub refcount: Option<u32>,
    pub users: Vec<String>,
    pub state: String,
}

pub fn parse_modules(text: &str) -> Vec<Module> {
    text.lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let name = it.next()?.to_string();
            let size = it.next()?.parse().ok()?;
            let refcount = it.next().and_then(|s| s.parse().ok());
            let users = it
                .next()
                .map(|u| {
                    u.split(',')
                        .filter(|s| !s.is_empty() && *s != "-")
                        .map(String::from)
                        .collect()
                })
                .unwrap_or_default();
            let state = it.next().unwrap_or("").to_string();
            Some(Module {
                name,
                size,
                refcount,
                users,
                state,
            })
        })
        .collect()
}

/// Loaded modules: /proc/modules, plus built-in ones that appear only under /sys/module.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Modules {
    pub loaded: Vec<Module>,
    pub readable: bool,
}

impl Modules {
    pub fn read(host: &Host) -> Modules {
        match host.read_string("/proc/modules") {
            Ok(t) => Modules {
                loaded: parse_modules(&t),
                readable: true,
            },
            Err(_) => Modules::default(),
        }
    }
    /// Loaded as a module, or built in (present under /sys/module without being in /proc/modules).
    pub fn present(&self, host: &Host, name: &str) -> bool {
        let n = name.replace('-', "_");
        self.loaded.iter().any(|m| m.name == n) || host.is_dir(&format!("/sys/module/{n}"))
    }
}

/// A service that manages CPU frequency or power and would undo a governor setting.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ServiceState {
    pub name: String,
    pub enabled: bool,
    pub running: bool,
}

/// Whether a systemd unit is enabled: a symlink in some `*.wants` directory.
pub fn unit_enabled(host: &Host, unit: &str) -> bool {
    unit_enabled_with(|d| host.read_dir(d).ok(), |p| host.exists(p), unit)
}

/// The directories whose `*.wants/` subdirectories enable units (systemd.unit(5): the system
/// unit search path's administrator and package directories; /lib is /usr/lib's old place).
pub const UNIT_DIRS: [&str; 3] = [
    "/etc/systemd/system",
    "/usr/lib/systemd/system",
    "/lib/systemd/system",
];

/// [`unit_enabled`] over any reader: the engine's facts pass their memoised listings, so the
/// rule (which directories, which link) exists once.
pub fn unit_enabled_with(
    read_dir: impl Fn(&str) -> Option<Vec<String>>,
    exists: impl Fn(&str) -> bool,
    unit: &str,
) -> bool {
    UNIT_DIRS.iter().any(|dir| {
        read_dir(dir).is_some_and(|entries| {
            entries
                .iter()
                .any(|e| e.ends_with(".wants") && exists(&format!("{dir}/{e}/{unit}")))
        })
    })
}

/// Process names (comm) of running processes; empty on a recorded root without /proc/<pid>.
pub fn running_processes(host: &Host) -> Vec<String> {
    let Ok(entries) = host.read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .into_iter()
        .filter(|e| e.bytes().all(|b| b.is_ascii_digit()))
        .filter_map(|pid| host.read_attr(&format!("/proc/{pid}/comm")).ok())
        .collect()
}

/// Services known to fight a `performance` governor.
pub const GOVERNOR_FIGHTERS: &[(&str, &[&str])] = &[
    ("tuned.service", &["tuned"]),
    (
        "power-profiles-daemon.service",
        &["power-profiles-", "power-profiles-daemon"],
    ),
    ("tlp.service", &["tlp"]),
    ("auto-cpufreq.service", &["auto-cpufreq"]),
    ("thermald.service", &[]),
];

pub fn governor_fighters(host: &Host, procs: &[String]) -> Vec<ServiceState> {
    GOVERNOR_FIGHTERS
        .iter()
        // thermald caps frequency only under thermal stress; it is named nowhere else.
        .filter(|(unit, _)| *unit != "thermald.service")
        .filter_map(|(unit, comms)| {
            let enabled = unit_enabled(host, unit);
            let running = comms.iter().any(|c| procs.iter().any(|p| p == c));
            (enabled || running).then(|| ServiceState {
                name: unit.to_string(),
                enabled,
                running,
            })
        })
        .collect()
}

/// Read a sysctl by its dotted name (`net.core.rmem_max`).
pub fn read_sysctl(host: &Host, name: &str) -> Result<String, crate::host::ReadError> {
    host.read_attr(&format!("/proc/sys/{}", name.replace('.', "/")))
}

/// This boot's start, Unix seconds (`/proc/stat` btime); `None` where the root has no such
/// line (a bare fixture root). IRQ numbers, like everything of a boot, are given out again at
/// the next one: a record written before this time is of another boot.
pub fn boot_time(host: &Host) -> Option<u64> {
    host.read_string("/proc/stat").ok().and_then(|t| {
        t.lines()
            .find_map(|l| l.strip_prefix("btime "))
            .and_then(|v| v.trim().parse::<u64>().ok())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_versions() {
        assert_eq!(parse_kernel_version("6.1.0-28-amd64"), Some((6, 1, 0)));
        assert_eq!(parse_kernel_version("5.15.148-tegra"), Some((5, 15, 148)));
        assert_eq!(
            parse_kernel_version("6.8.0-1015-nvidia-64k"),
            Some((6, 8, 0))
        );
        assert_eq!(parse_kernel_version("6.11"), Some((6, 11, 0)));
        assert_eq!(parse_kernel_version("garbage"), None);
        assert_eq!(parse_kernel_version(""), None);
    }

    #[test]
    fn lockdown() {
        assert_eq!(
            parse_lockdown("none [integrity] confidentiality\n").as_deref(),
            Some("integrity")
        );
        assert_eq!(parse_lockdown("[none] integrity").as_deref(), Some("none"));
        assert_eq!(parse_lockdown("garbage"), None);
        assert_eq!(parse_lockdown("]["), None);
    }

    #[test]
    fn efi() {
        assert_eq!(parse_efi_bool(&[6, 0, 0, 0, 1]), Some(true));
        assert_eq!(parse_efi_bool(&[6, 0, 0, 0, 0]), Some(false));
        assert_eq!(parse_efi_bool(&[6]), None);
    }

    #[test]
    fn modules() {
        let m = parse_modules(
            "nvidia_peermem 16384 0 - Live 0x0000000000000000\n\
             mlx5_ib 450560 0 - Live 0x0\n\
             ib_core 434176 2 mlx5_ib,nvidia_peermem, Live 0x0\n\
             garbage\n",
        );
        assert_eq!(m.len(), 3);
        assert_eq!(m[2].users, vec!["mlx5_ib", "nvidia_peermem"]);
    }
}
