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

#[cfg(test)]
mod tests {
    use super::*;

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
