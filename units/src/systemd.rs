//! systemd units: oneshot services that run daqtune itself (never a shell script), and the
//! hugetlbfs `.mount` unit (an owned unit instead of an fstab line: a bad fstab line can drop
//! a boot to emergency mode; a failing mount unit only fails that unit). The mount is ordered
//! after local-fs-pre.target, as fstab's mounts are: before it the root file system may still
//! be read-only (`ro` on the kernel line), systemd cannot create the mount point and the mount
//! fails (found by tests/vm/host-lifecycle.sh on a booted Debian).

use crate::validate::{self, InvalidValue};

/// `systemd-escape --path`: the unit name of a path.
pub fn escape_path(path: &str) -> String {
    let trimmed = path.trim_matches('/');
    if trimmed.is_empty() {
        return "-".into();
    }
    // Collapse duplicate slashes as systemd's path_simplify does.
    let parts: Vec<&str> = trimmed.split('/').filter(|p| !p.is_empty()).collect();
    let joined = parts.join("/");
    let mut out = String::new();
    for (i, b) in joined.bytes().enumerate() {
        match b {
            b'/' => out.push('-'),
            b'.' if i == 0 => out.push_str("\\x2e"),
            b if b.is_ascii_alphanumeric() || b == b':' || b == b'_' || b == b'.' => {
                out.push(b as char)
            }
            b => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out
}

/// The unit name of a mount point (`/mnt/huge` -> `mnt-huge.mount`).
pub fn mount_unit_name(mount_point: &str) -> Result<String, InvalidValue> {
    let p = validate::abs_path(mount_point)?;
    Ok(format!("{}.mount", escape_path(p)))
}

/// A hugetlbfs mount of `page_size` pages at `mount_point`: (unit file name, content).
pub fn hugetlbfs_mount(
    mount_point: &str,
    page_size: &str,
    profile: &str,
) -> Result<(String, String), InvalidValue> {
    let name = mount_unit_name(mount_point)?;
    let size = validate::page_size(page_size)?;
    let profile = validate::profile_ref(profile)?;
    let kb = size_kb(size);
    let text = format!(
        "# {mark} (profile {profile}); `daqtune revert` removes it.
[Unit]
Description=Huge pages of {size} for the data path (daqtune)
Documentation=man:daqtune(8)
DefaultDependencies=no
After=local-fs-pre.target
Before=local-fs.target umount.target
Conflicts=umount.target
ConditionPathExists=/sys/kernel/mm/hugepages/hugepages-{kb}kB
ConditionCapability=CAP_SYS_ADMIN

[Mount]
What=hugetlbfs
Where={mount_point}
Type=hugetlbfs
Options=pagesize={size},nosuid,nodev

[Install]
WantedBy=local-fs.target
",
        mark = crate::OWNER_MARK,
    );
    Ok((name, text))
}

fn size_kb(size: &str) -> u64 {
    let (n, u) = size.split_at(size.len() - 1);
    let n: u64 = n.parse().unwrap_or(0);
    match u {
        "G" | "g" => n * 1024 * 1024,
        "M" | "m" => n * 1024,
        _ => n,
    }
}

/// A oneshot service that runs `exe args...` once per boot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Oneshot {
    /// File name, `daqtune-*.service`.
    pub name: String,
    pub description: String,
    pub after: Vec<String>,
    pub wants: Vec<String>,
    pub exe: String,
    pub args: Vec<String>,
    pub profile: String,
}

fn unit_name(n: &str) -> Result<&str, InvalidValue> {
    let ok = n.len() <= 255
        && n.contains('.')
        && n.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, ':' | '-' | '_' | '.' | '@'))
        && !n.starts_with('.');
    if ok {
        Ok(n)
    } else {
        Err(InvalidValue::new(
            "unit name",
            n,
            "letters, digits and `:-_.@`, with a suffix",
        ))
    }
}

impl Oneshot {
    pub fn render(&self) -> Result<String, InvalidValue> {
        unit_name(&self.name)?;
        if self.description.chars().any(|c| c.is_control() || c == '%') {
            return Err(InvalidValue::new(
                "description",
                &self.description,
                "one line without `%`",
            ));
        }
        let exe = validate::abs_path(&self.exe)?;
        let profile = validate::profile_ref(&self.profile)?;
        let mut cmd = vec![exe.to_string()];
        for a in &self.args {
            cmd.push(validate::exec_arg(a)?.to_string());
        }
        let mut s = format!("# {} (profile {profile}); `daqtune revert` removes it.\n[Unit]\nDescription={}\nDocumentation=man:daqtune(8)\n", crate::OWNER_MARK, self.description);
        for a in &self.after {
            s.push_str(&format!("After={}\n", unit_name(a)?));
        }
        for w in &self.wants {
            s.push_str(&format!("Wants={}\n", unit_name(w)?));
        }
        s.push_str(&format!(
            "\n[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart={}\n\n[Install]\nWantedBy=multi-user.target\n",
            cmd.join(" ")
        ));
        Ok(s)
    }
}

fn daqtune_args(profile: &str, only: &str, extra: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = [
        "apply",
        "--profile",
        profile,
        "--only",
        only,
        "--runtime-only",
        "--yes",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

/// The governor unit, for kernels older than 5.9 (no `cpufreq.default_governor=`) or a
/// cpufreq driver loaded as a module after boot.
pub fn governor_unit(exe: &str, profile: &str) -> Oneshot {
    Oneshot {
        name: "daqtune-governor.service".into(),
        description: "Set the CPU frequency governor (daqtune)".into(),
        after: vec!["systemd-modules-load.service".into()],
        wants: vec![],
        exe: exe.into(),
        args: daqtune_args(profile, "cpu.governor", &[]),
        profile: profile.into(),
    }
}

/// GPU clock lock and persistence after boot (seed 000 Step 7), after nvidia-persistenced
/// so the driver stays loaded and keeps the lock.
pub fn gpu_clocks_unit(exe: &str, profile: &str) -> Oneshot {
    Oneshot {
        name: "daqtune-gpu-clocks.service".into(),
        description: "Lock the GPU clocks at their maximum (daqtune)".into(),
        after: vec![
            "nvidia-persistenced.service".into(),
            "systemd-modules-load.service".into(),
        ],
        wants: vec!["nvidia-persistenced.service".into()],
        exe: exe.into(),
        args: daqtune_args(profile, "gpu.clocks", &[]),
        profile: profile.into(),
    }
}

/// ACS redirect off on the GPU-NIC path, where `pci=disable_acs_redir=` cannot be used.
pub fn acs_unit(exe: &str, profile: &str) -> Oneshot {
    Oneshot {
        name: "daqtune-acs.service".into(),
        description: "Disable PCIe ACS redirect between GPU and NIC (daqtune)".into(),
        after: vec!["systemd-udev-settle.service".into()],
        wants: vec![],
        exe: exe.into(),
        args: daqtune_args(profile, "pcie.acs", &["--allow-acs"]),
        profile: profile.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_matches_systemd_escape() {
        // Expected values from `systemd-escape --path` (systemd 252).
        assert_eq!(escape_path("/mnt/huge"), "mnt-huge");
        assert_eq!(escape_path("/mnt/huge-1G"), "mnt-huge\\x2d1G");
        assert_eq!(escape_path("/"), "-");
        assert_eq!(escape_path("/.hidden/x"), "\\x2ehidden-x");
        assert_eq!(escape_path("/a//b/"), "a-b");
        assert_eq!(escape_path("/a b+c"), "a\\x20b\\x2bc");
        assert_eq!(
            mount_unit_name("/mnt/huge").expect("name"),
            "mnt-huge.mount"
        );
        assert!(mount_unit_name("/mnt/../x").is_err());
    }

    #[test]
    fn oneshot_rejects_injection() {
        let mut u = governor_unit("/usr/bin/daqtune", "igx-orin");
        assert!(u.render().is_ok());
        u.args.push("$(reboot)".into());
        assert!(u.render().is_err());
        let u = governor_unit("usr/bin/daqtune", "igx-orin");
        assert!(u.render().is_err());
        let u = governor_unit("/usr/bin/daqtune", "x\nExecStart=/bin/sh");
        assert!(u.render().is_err());
        let mut u = governor_unit("/usr/bin/daqtune", "igx-orin");
        u.description = "a\nExecStart=/bin/sh".into();
        assert!(u.render().is_err());
    }
}
