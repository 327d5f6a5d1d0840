//! The udev rule that restores MRRS when a ConnectX physical function appears.
//!
//! A function reset (driver reload, FLR, DGX Spark's hotplug service re-adding the CX-7 PFs on
//! cable events, seed 000) puts Max Read Request Size back to its default, so a boot-time unit
//! is not enough. The rule matches the exact PF addresses (never VFs: MRRS is reserved there)
//! and has udev run daqtune itself with the device name: no shell, no `setpci`, and the write
//! is the capability-relative read-modify-write of DevCtl bits 14:12 that `apply` does.

use crate::validate::{self, InvalidValue, PciAddr};

/// Where the rule goes.
pub const RULE_PATH: &str = "/etc/udev/rules.d/90-daqtune-mrrs.rules";

/// One rule line for all `pfs`.
pub fn mrrs_rule(exe: &str, profile: &str, pfs: &[PciAddr]) -> Result<String, InvalidValue> {
    let exe = validate::abs_path(exe)?;
    let profile = validate::profile_ref(profile)?;
    if pfs.is_empty() {
        return Err(InvalidValue::new(
            "PCI address list",
            "",
            "no physical function to match",
        ));
    }
    let mut bdfs: Vec<String> = pfs.iter().map(|p| p.to_string()).collect();
    bdfs.sort();
    bdfs.dedup();
    Ok(format!(
        "# {mark} (profile {profile}); `daqtune revert` removes it.
# Max Read Request Size goes back to its default when a function is reset or re-added
# (DGX Spark re-adds its CX-7 PFs on cable events); set it again each time one appears.
ACTION==\"add\", SUBSYSTEM==\"pci\", ATTR{{vendor}}==\"0x15b3\", KERNEL==\"{list}\", RUN+=\"{exe} apply --profile {profile} --only pcie.mrrs --runtime-only --device %k --yes\"
",
        mark = crate::OWNER_MARK,
        list = bdfs.join("|"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_rule_for_all_pfs() {
        let pfs: Vec<PciAddr> = [
            "0002:01:00.1",
            "0000:01:00.0",
            "0000:01:00.1",
            "0002:01:00.0",
        ]
        .iter()
        .map(|s| s.parse().expect("bdf"))
        .collect();
        let r = mrrs_rule("/usr/bin/daqtune", "dgx-spark", &pfs).expect("rule");
        let rules: Vec<&str> = r.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(rules.len(), 1);
        assert!(
            rules[0].contains("KERNEL==\"0000:01:00.0|0000:01:00.1|0002:01:00.0|0002:01:00.1\"")
        );
        assert!(mrrs_rule("/usr/bin/daqtune", "dgx-spark", &[]).is_err());
        assert!(mrrs_rule("daqtune", "dgx-spark", &pfs).is_err());
        assert!(mrrs_rule("/usr/bin/daqtune", "a\"b", &pfs).is_err());
    }
}
