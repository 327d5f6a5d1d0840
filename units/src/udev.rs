//! The udev rule that restores MRRS when a data-port physical function appears.
//!
//! A function reset (driver reload, FLR, DGX Spark's hotplug service re-adding the CX-7 PFs on
//! cable events, seed 000) puts Max Read Request Size back to its default, so a boot-time unit
//! is not enough. The rule matches the exact PF addresses (never VFs: MRRS is reserved there),
//! whatever their vendor (the ConnectX PFs, or the ports a profile names), and has udev run
//! daqtune itself with the device name: no shell, no `setpci`, and the write is the
//! capability-relative read-modify-write of DevCtl bits 14:12 that `apply` does.

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
ACTION==\"add\", SUBSYSTEM==\"pci\", KERNEL==\"{list}\", RUN+=\"{exe} apply --profile {profile} --only pcie.mrrs --runtime-only --device %k --yes\"
",
        mark = crate::OWNER_MARK,
        list = bdfs.join("|"),
    ))
}

/// The programs a rules file's `RUN` assignments start (`RUN+="/usr/bin/x args"`,
/// `RUN{program}+=...`), in order; `RUN{builtin}` is not a program and is left out.
pub fn run_programs(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('#') {
            continue;
        }
        let mut rest = t;
        while let Some(pos) = rest.find("RUN") {
            let after = &rest[pos + 3..];
            // A key starts a line or follows `, ` (never a longer word like `PRERUN`).
            let starts_key = pos == 0 || rest[..pos].ends_with([' ', ',', '\t']);
            let (attr, tail) = match after.strip_prefix('{') {
                Some(a) => match a.split_once('}') {
                    Some((attr, tail)) => (attr, tail),
                    None => break,
                },
                None => ("program", after),
            };
            let tail = tail.trim_start();
            let value = tail
                .strip_prefix("+=")
                .or_else(|| tail.strip_prefix(":="))
                .or_else(|| tail.strip_prefix('='))
                .map(str::trim_start)
                .and_then(|v| v.strip_prefix('"'))
                .and_then(|v| v.split_once('"'));
            match value {
                Some((v, next)) if starts_key => {
                    if attr == "program" {
                        if let Some(p) = v.split_whitespace().next() {
                            if !out.iter().any(|o| o == p) {
                                out.push(p.to_string());
                            }
                        }
                    }
                    rest = next;
                }
                _ => rest = after,
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_programs_read_back() {
        let pfs: Vec<PciAddr> = vec!["0000:01:00.0".parse().expect("bdf")];
        let r = mrrs_rule("/usr/local/bin/daqtune", "x", &pfs).expect("rule");
        assert_eq!(run_programs(&r), ["/usr/local/bin/daqtune"]);
        assert_eq!(
            run_programs(
                "# RUN+=\"/no\"\nACTION==\"add\", RUN{builtin}+=\"kmod load x\", RUN{program}+=\"/a b\", RUN+=\"/c\"\nPRERUN+=\"/d\"\nRUN=\"/e\"\nRUN+=\"unterminated\n"
            ),
            ["/a", "/c", "/e"]
        );
        assert!(run_programs("").is_empty());
    }

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
