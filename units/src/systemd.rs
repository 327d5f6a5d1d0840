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

/// The names of daqtune's oneshot units (the artifacts check looks for them by name too).
pub const GOVERNOR_UNIT: &str = "daqtune-governor.service";
pub const GPU_CLOCKS_UNIT: &str = "daqtune-gpu-clocks.service";
pub const ACS_UNIT: &str = "daqtune-acs.service";
/// Every oneshot unit daqtune writes.
pub const ONESHOT_UNITS: &[&str] = &[GOVERNOR_UNIT, GPU_CLOCKS_UNIT, ACS_UNIT];

/// The governor unit, for kernels older than 5.9 (no `cpufreq.default_governor=`) or a
/// cpufreq driver loaded as a module after boot.
pub fn governor_unit(exe: &str, profile: &str) -> Oneshot {
    Oneshot {
        name: GOVERNOR_UNIT.into(),
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
        name: GPU_CLOCKS_UNIT.into(),
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
        name: ACS_UNIT.into(),
        description: "Disable PCIe ACS redirect between GPU and NIC (daqtune)".into(),
        after: vec!["systemd-udev-settle.service".into()],
        wants: vec![],
        exe: exe.into(),
        args: daqtune_args(profile, "pcie.acs", &["--allow-acs"]),
        profile: profile.into(),
    }
}

/// What a unit file says about how it runs: the programs its `Exec*=` lines start and the
/// targets its `[Install]` section names (`WantedBy=`, `RequiredBy=`), read back from a file on
/// the host (daqtune's own, or edited since).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UnitFile {
    /// The program of each `ExecStart=`, `ExecStartPre=`, `ExecStartPost=`, `ExecStop=`,
    /// `ExecStopPost=`, `ExecReload=` line, with systemd's `-@:+!` prefixes removed.
    pub programs: Vec<String>,
    /// (`WantedBy` or `RequiredBy`, target).
    pub installed_by: Vec<(String, String)>,
}

/// Parse a unit file's `Exec*=` programs and `[Install]` targets. Comments, continuation
/// lines and sections are honoured; an empty assignment (`ExecStart=`) resets the list, as
/// systemd does.
pub fn parse_unit(text: &str) -> UnitFile {
    let mut u = UnitFile::default();
    let mut section = String::new();
    let mut logical = String::new();
    let mut lines: Vec<String> = Vec::new();
    for raw in text.lines() {
        let t = raw.trim();
        if logical.is_empty() && (t.starts_with('#') || t.starts_with(';')) {
            continue;
        }
        if let Some(cont) = t.strip_suffix('\\') {
            logical.push_str(cont);
            logical.push(' ');
            continue;
        }
        logical.push_str(t);
        lines.push(std::mem::take(&mut logical));
    }
    if !logical.is_empty() {
        lines.push(logical);
    }
    for l in lines {
        if l.starts_with('[') && l.ends_with(']') {
            section = l[1..l.len() - 1].to_string();
            continue;
        }
        let Some((k, v)) = l.split_once('=') else {
            continue;
        };
        let (k, v) = (k.trim(), v.trim());
        match (section.as_str(), k) {
            (
                _,
                "ExecStart" | "ExecStartPre" | "ExecStartPost" | "ExecStop" | "ExecStopPost"
                | "ExecReload",
            ) => {
                if v.is_empty() {
                    u.programs.clear();
                    continue;
                }
                let v = v.trim_start_matches(['-', '@', ':', '+', '!']);
                let prog = match v.strip_prefix('"') {
                    Some(q) => q.split('"').next().unwrap_or(""),
                    None => v.split_whitespace().next().unwrap_or(""),
                };
                if !prog.is_empty() && !u.programs.iter().any(|p| p == prog) {
                    u.programs.push(prog.to_string());
                }
            }
            ("Install", "WantedBy" | "RequiredBy") => {
                if v.is_empty() {
                    u.installed_by.retain(|(kind, _)| kind != k);
                }
                for t in v.split_whitespace() {
                    u.installed_by.push((k.to_string(), t.to_string()));
                }
            }
            _ => {}
        }
    }
    u
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_files_read_back() {
        let u = governor_unit("/usr/bin/daqtune", "igx-orin")
            .render()
            .expect("render");
        let p = parse_unit(&u);
        assert_eq!(p.programs, ["/usr/bin/daqtune"]);
        assert_eq!(
            p.installed_by,
            [("WantedBy".to_string(), "multi-user.target".to_string())]
        );
        let (_, m) = hugetlbfs_mount("/mnt/huge", "1G", "x").expect("mount");
        let p = parse_unit(&m);
        assert!(p.programs.is_empty());
        assert_eq!(p.installed_by[0].1, "local-fs.target");
        let p = parse_unit(
            "# ExecStart=/bin/no\n[Service]\nExecStartPre=-/usr/sbin/x a\nExecStart=\nExecStart=!!\"/opt/my tool\" b \\\n  c\n[Install]\nWantedBy=a.target b.target\nRequiredBy=c.target\n",
        );
        assert_eq!(p.programs, ["/opt/my tool"]);
        assert_eq!(p.installed_by.len(), 3);
        assert_eq!(parse_unit("garbage\n=\n[\n"), UnitFile::default());
    }

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
