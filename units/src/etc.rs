//! Small configuration drop-ins: /etc/modules-load.d and /etc/sysctl.d.

use crate::validate::{self, InvalidValue};

pub const MODULES_LOAD_PATH: &str = "/etc/modules-load.d/daqtune.conf";
pub const SYSCTL_PATH: &str = "/etc/sysctl.d/90-daqtune.conf";

/// Modules loaded at boot by systemd-modules-load (seed 000: nvidia-peermem; the seed's
/// `>> /etc/modules` edits a file daqtune does not own).
pub fn modules_load(modules: &[&str], profile: &str) -> Result<String, InvalidValue> {
    let profile = validate::profile_ref(profile)?;
    let mut s = format!(
        "# {} (profile {profile}); `daqtune revert` removes it.\n",
        crate::OWNER_MARK
    );
    for m in modules {
        s.push_str(validate::module_name(m)?);
        s.push('\n');
    }
    Ok(s)
}

/// sysctl values applied at boot by systemd-sysctl (seed 003's socket buffers).
pub fn sysctl_conf(values: &[(&str, &str)], profile: &str) -> Result<String, InvalidValue> {
    let profile = validate::profile_ref(profile)?;
    let mut s = format!(
        "# {} (profile {profile}); `daqtune revert` removes it.\n",
        crate::OWNER_MARK
    );
    for (k, v) in values {
        s.push_str(&format!(
            "{} = {}\n",
            validate::sysctl_name(k)?,
            validate::sysctl_value(v)?.trim()
        ));
    }
    Ok(s)
}

/// The directories systemd-sysctl reads at boot, highest priority first. A file name in an
/// earlier directory masks the same name in a later one; the files left are applied sorted by
/// name, so of two settings of one key the one in the file sorting last wins. Debian's
/// `/etc/sysctl.conf` takes part as `/etc/sysctl.d/99-sysctl.conf`, a link to it.
pub const SYSCTL_DIRS: &[&str] = &[
    "/etc/sysctl.d",
    "/run/sysctl.d",
    "/usr/local/lib/sysctl.d",
    "/usr/lib/sysctl.d",
    "/lib/sysctl.d",
];

/// The files systemd-sysctl applies, in order, from the listing of each of [`SYSCTL_DIRS`]
/// (`(directory, entry names)`, directories in that order): `*.conf`, masked by name.
pub fn sysctl_files<S: AsRef<str>>(dirs: &[(&str, Vec<S>)]) -> Vec<String> {
    let mut by_name: std::collections::BTreeMap<String, String> = Default::default();
    for (dir, names) in dirs {
        for n in names {
            let n = n.as_ref();
            if n.ends_with(".conf") && !n.starts_with('.') && !n.contains('/') {
                by_name
                    .entry(n.to_string())
                    .or_insert_with(|| format!("{dir}/{n}"));
            }
        }
    }
    // BTreeMap iterates in byte order of the names, which is systemd's order.
    by_name.into_values().collect()
}

/// A setting of one of daqtune's keys in a file applied after daqtune's: it is the value at
/// boot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SysctlOverride {
    pub key: String,
    pub file: String,
    pub line: usize,
    pub value: String,
}

/// `net/core/rmem_max` and `net.core.rmem_max` name the same key (systemd normalises the
/// separator by the first one used).
fn sysctl_key(k: &str) -> String {
    let k = k.trim().trim_start_matches('-');
    match k.find(['.', '/']) {
        Some(i) if k.as_bytes()[i] == b'/' => k.replace('/', "."),
        _ => k.to_string(),
    }
}

/// `*` in a key (systemd 245+: `net.ipv4.conf.*.rp_filter`) matches within one component.
fn key_matches(pattern: &str, key: &str) -> bool {
    let p: Vec<&str> = pattern.split('.').collect();
    let k: Vec<&str> = key.split('.').collect();
    p.len() == k.len()
        && p.iter().zip(&k).all(|(p, k)| {
            if let Some((a, b)) = p.split_once('*') {
                k.len() >= a.len() + b.len() && k.starts_with(a) && k.ends_with(b)
            } else {
                p == k
            }
        })
}

/// The settings of `keys` in the files after `ours` (a path; where it is not among `files`,
/// the position its name would sort to). `files` are `(path, text)` in the order
/// [`sysctl_files`] gives. The last override of a key is what the key is at boot.
pub fn sysctl_overrides(
    files: &[(String, String)],
    ours: &str,
    keys: &[&str],
) -> Vec<SysctlOverride> {
    let base = |p: &str| p.rsplit('/').next().unwrap_or(p).to_string();
    let ours_name = base(ours);
    let mut out = Vec::new();
    for (path, text) in files {
        if path == ours || base(path).as_bytes() <= ours_name.as_bytes() {
            continue;
        }
        for (n, line) in text.lines().enumerate() {
            let t = line.trim();
            if t.is_empty() || t.starts_with('#') || t.starts_with(';') {
                continue;
            }
            let Some((k, v)) = t.split_once('=') else {
                continue;
            };
            let k = sysctl_key(k);
            for want in keys {
                if key_matches(&k, &sysctl_key(want)) {
                    out.push(SysctlOverride {
                        key: want.to_string(),
                        file: path.clone(),
                        line: n + 1,
                        value: v.trim().to_string(),
                    });
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn systemd_sysctl_order_and_masking() {
        let files = sysctl_files(&[
            (
                "/etc/sysctl.d",
                vec![
                    "99-sysctl.conf",
                    "90-daqtune.conf",
                    "README",
                    "10-local.conf",
                ],
            ),
            ("/run/sysctl.d", vec![]),
            ("/usr/local/lib/sysctl.d", vec![]),
            (
                "/usr/lib/sysctl.d",
                vec!["10-local.conf", "50-default.conf", "99-zz.conf"],
            ),
            ("/lib/sysctl.d", vec!["50-default.conf", "95-x.conf"]),
        ]);
        assert_eq!(
            files,
            [
                "/etc/sysctl.d/10-local.conf",
                "/usr/lib/sysctl.d/50-default.conf",
                "/etc/sysctl.d/90-daqtune.conf",
                "/lib/sysctl.d/95-x.conf",
                "/etc/sysctl.d/99-sysctl.conf",
                "/usr/lib/sysctl.d/99-zz.conf",
            ]
        );
    }

    #[test]
    fn later_files_setting_our_keys() {
        let f = |p: &str, t: &str| (p.to_string(), t.to_string());
        let files = vec![
            f("/usr/lib/sysctl.d/50-default.conf", "net.core.rmem_max = 1\n"),
            f("/etc/sysctl.d/90-daqtune.conf", "net.core.rmem_max = 268435456\n"),
            f("/etc/sysctl.d/95-tuning.conf", "# net.core.rmem_max = 5\n-net/core/rmem_max=212992\nnet.core.wmem_max = 7\nnet.ipv4.conf.*.rp_filter = 0\n"),
            f("/etc/sysctl.d/99-sysctl.conf", "net.core.rmem_max=4194304\n"),
        ];
        let o = sysctl_overrides(
            &files,
            "/etc/sysctl.d/90-daqtune.conf",
            &[
                "net.core.rmem_max",
                "net.ipv4.tcp_rmem",
                "net.ipv4.conf.eth0.rp_filter",
            ],
        );
        let got: Vec<(String, usize, String)> = o
            .iter()
            .map(|x| (x.file.clone(), x.line, x.value.clone()))
            .collect();
        assert_eq!(
            got,
            [
                (
                    "/etc/sysctl.d/95-tuning.conf".to_string(),
                    2,
                    "212992".to_string()
                ),
                (
                    "/etc/sysctl.d/95-tuning.conf".to_string(),
                    4,
                    "0".to_string()
                ),
                (
                    "/etc/sysctl.d/99-sysctl.conf".to_string(),
                    1,
                    "4194304".to_string()
                ),
            ]
        );
        // Before ours is written, the name it would sort to decides.
        assert_eq!(
            sysctl_overrides(
                &files[2..],
                "/etc/sysctl.d/90-daqtune.conf",
                &["net.core.rmem_max"]
            )
            .len(),
            2
        );
        assert!(
            sysctl_overrides(&files, "/etc/sysctl.d/zz.conf", &["net.core.rmem_max"]).is_empty()
        );
    }

    #[test]
    fn render_and_reject() {
        let m = modules_load(&["nvidia-peermem"], "igx-orin").expect("m");
        assert!(m.ends_with("\nnvidia-peermem\n"));
        assert!(modules_load(&["a\nb"], "igx-orin").is_err());
        let s = sysctl_conf(
            &[
                ("net.core.rmem_max", "268435456"),
                ("net.ipv4.tcp_rmem", "4096 87380 268435456"),
            ],
            "x",
        )
        .expect("s");
        assert!(s.contains("net.ipv4.tcp_rmem = 4096 87380 268435456\n"));
        assert!(sysctl_conf(&[("kernel.x", "1\nkernel.y = 2")], "x").is_err());
    }
}
