//! irqbalance's configuration, the other thing that decides where interrupts go besides the
//! kernel's `irqaffinity=` and `isolcpus=`.
//!
//! irqbalance keeps interrupts off the isolated and adaptive-ticks CPUs it finds itself
//! (isolcpus=, nohz_full=) — unless `IRQBALANCE_BANNED_CPULIST` (a CPU list) or the older
//! `IRQBALANCE_BANNED_CPUS` (a hex mask; ignored when the list is set) is given in its
//! environment file: that set then *replaces* the detection. A list written for another core
//! layout therefore unbans the data cores, and one naming housekeeping CPUs crowds every
//! interrupt onto the rest.

use crate::model::facts::Facts;
use daqtune_probe::cpulist::parse_cpulist;
use daqtune_probe::CpuSet;

/// Where irqbalance's unit reads its environment (Debian, then Red Hat).
pub const FILES: &[&str] = &["/etc/default/irqbalance", "/etc/sysconfig/irqbalance"];

/// What an irqbalance environment file bans, and from where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bans {
    pub file: String,
    pub line: usize,
    /// `IRQBALANCE_BANNED_CPULIST` or `IRQBALANCE_BANNED_CPUS`.
    pub var: String,
    pub cpus: CpuSet,
}

/// A value in an irqbalance environment file that does not parse.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum BansError {
    #[error("`{0}` is not a hex CPU mask")]
    Mask(String),
    #[error(transparent)]
    List(#[from] daqtune_probe::cpulist::CpuListError),
    /// Either of the above, with where it was set.
    #[error("{file}:{line}: {var}={value}: {why}")]
    At {
        file: String,
        line: usize,
        var: String,
        value: String,
        why: Box<BansError>,
    },
}

/// A cpumask as the kernel and irqbalance write it: hex, 32-bit groups separated by commas,
/// most significant first (`ff,00000001`), `0x` allowed.
pub fn parse_mask(s: &str) -> Result<CpuSet, BansError> {
    let s = s.trim();
    let s = s
        .strip_prefix("0x")
        .or_else(|| s.strip_prefix("0X"))
        .unwrap_or(s);
    if s.is_empty() {
        return Ok(CpuSet::new());
    }
    let groups: Vec<&str> = s.split(',').collect();
    let mut set = CpuSet::new();
    for (i, g) in groups.iter().rev().enumerate() {
        let v = u32::from_str_radix(g, 16).map_err(|_| BansError::Mask(s.to_string()))?;
        for b in 0..32 {
            if v & (1 << b) != 0 {
                set.insert(i as u32 * 32 + b);
            }
        }
    }
    Ok(set)
}

/// The bans `text` (an irqbalance environment file named `file`) sets: the list when given,
/// else the mask; `None` when it sets neither (irqbalance then detects the isolated CPUs
/// itself). `Err` for a value that does not parse.
pub fn bans(file: &str, text: &str) -> Option<Result<Bans, BansError>> {
    let ev = daqtune_units::grub::evaluate(&[(file.to_string(), text.to_string())]);
    for var in ["IRQBALANCE_BANNED_CPULIST", "IRQBALANCE_BANNED_CPUS"] {
        let Some(a) = ev.assignments.iter().rev().find(|a| a.var == var) else {
            continue;
        };
        let value = a.value.trim();
        if value.is_empty() {
            continue;
        }
        let cpus = if var.ends_with("LIST") {
            parse_cpulist(value, None).map_err(BansError::from)
        } else {
            parse_mask(value)
        };
        return Some(
            cpus.map(|cpus| Bans {
                file: file.to_string(),
                line: a.line,
                var: var.to_string(),
                cpus,
            })
            .map_err(|why| BansError::At {
                file: file.to_string(),
                line: a.line,
                var: var.to_string(),
                value: value.to_string(),
                why: Box::new(why),
            }),
        );
    }
    None
}

/// What `bans` does to an isolation of `isolated` on a host whose online CPUs are `online`:
/// one sentence per problem (isolated CPUs unbanned, housekeeping CPUs banned).
pub fn findings(b: &Bans, isolated: &CpuSet, online: &CpuSet) -> Vec<String> {
    let mut out = Vec::new();
    let unbanned = isolated.difference(&b.cpus);
    let where_ = format!("{}:{} sets {}={}", b.file, b.line, b.var, b.cpus);
    if !unbanned.is_empty() {
        out.push(format!(
            "{where_}, which replaces irqbalance's own detection of isolcpus/nohz_full and leaves the isolated CPUs {unbanned} unbanned: irqbalance moves interrupts onto them"
        ));
    }
    let housekeeping = online.difference(isolated);
    let banned_hk = b.cpus.intersection(&housekeeping);
    if !banned_hk.is_empty() {
        out.push(format!(
            "{where_}, which also bans the housekeeping CPUs {banned_hk}: every interrupt crowds onto {}",
            housekeeping.difference(&b.cpus)
        ));
    }
    out
}

/// irqbalance is enabled or running.
pub fn active(facts: &Facts) -> bool {
    facts.unit_enabled("irqbalance.service") || facts.processes().iter().any(|p| p == "irqbalance")
}

/// The findings on this host for `isolated` (empty when irqbalance is neither enabled nor
/// running, or its configuration leaves the detection to it).
pub fn host_findings(facts: &Facts, isolated: &CpuSet) -> Vec<String> {
    if isolated.is_empty() || !active(facts) {
        return Vec::new();
    }
    let online = facts
        .cpus()
        .map(|c| c.online.clone())
        .unwrap_or_else(|_| isolated.clone());
    for f in FILES {
        let Ok(text) = facts.read_string(f) else {
            continue;
        };
        return match bans(f, &text) {
            None => Vec::new(),
            Some(Ok(b)) => findings(&b, isolated, &online),
            Some(Err(e)) => vec![format!("irqbalance's configuration does not parse ({e})")],
        };
    }
    Vec::new()
}

/// The edit of irqbalance's environment file that keeps it off `isolated`, where its
/// configuration decides against the isolation (what [`host_findings`] reports): the
/// `IRQBALANCE_BANNED_CPULIST` line set to the isolated CPUs (replaced where the file sets it,
/// else appended: the list wins over the older mask). `(path, text now, text after)`; `None`
/// when irqbalance is inactive or already keeps off them.
pub fn ban_edit(facts: &Facts, isolated: &CpuSet) -> Option<(String, String, String)> {
    if isolated.is_empty() || !active(facts) {
        return None;
    }
    let online = facts
        .cpus()
        .map(|c| c.online.clone())
        .unwrap_or_else(|_| isolated.clone());
    let (file, text) = FILES
        .iter()
        .find_map(|f| facts.read_string(f).ok().map(|t| (*f, t)))?;
    let line = match bans(file, &text)? {
        Ok(b) if findings(&b, isolated, &online).is_empty() => return None,
        Ok(b) => (b.var == "IRQBALANCE_BANNED_CPULIST").then_some(b.line),
        Err(BansError::At { line, var, .. }) => {
            (var == "IRQBALANCE_BANNED_CPULIST").then_some(line)
        }
        Err(_) => None,
    };
    Some((
        file.to_string(),
        text.clone(),
        set_list(&text, line, isolated),
    ))
}

/// `text` with line `line` (1-based) replaced by the ban of `cpus`, or the ban appended.
pub fn set_list(text: &str, line: Option<usize>, cpus: &CpuSet) -> String {
    let ban = format!("IRQBALANCE_BANNED_CPULIST={cpus}");
    match line {
        Some(n) if n >= 1 && n <= text.lines().count() => {
            let mut out: Vec<String> = text.lines().map(str::to_string).collect();
            out[n - 1] = ban;
            let mut s = out.join("\n");
            if text.ends_with('\n') {
                s.push('\n');
            }
            s
        }
        _ => {
            let mut s = text.to_string();
            if !s.is_empty() && !s.ends_with('\n') {
                s.push('\n');
            }
            s.push_str("# daqtune (irq.affinity): keep interrupts off the isolated CPUs.\n");
            s.push_str(&ban);
            s.push('\n');
            s
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(s: &str) -> CpuSet {
        parse_cpulist(s, None).expect("cpulist")
    }

    #[test]
    fn masks() {
        assert_eq!(parse_mask("00000e00").expect("m"), set("9-11"));
        assert_eq!(parse_mask("0x1").expect("m"), set("0"));
        assert_eq!(parse_mask("1,00000001").expect("m"), set("0,32"));
        assert!(parse_mask("xyz").is_err());
        assert!(parse_mask("").expect("m").is_empty());
    }

    /// Debian's /etc/default/irqbalance, with the list set for another layout.
    const DEBIAN: &str = "# irqbalance is a daemon process that distributes interrupts across\n#IRQBALANCE_ONESHOT=\n#IRQBALANCE_BANNED_CPULIST=\nIRQBALANCE_BANNED_CPUS=\"00000e00\"\nIRQBALANCE_BANNED_CPULIST=\"0,10-11\"\n";

    #[test]
    fn the_list_wins_over_the_mask() {
        let b = bans("/etc/default/irqbalance", DEBIAN)
            .expect("set")
            .expect("parses");
        assert_eq!(b.var, "IRQBALANCE_BANNED_CPULIST");
        assert_eq!(b.line, 5);
        assert_eq!(b.cpus, set("0,10-11"));
        let f = findings(&b, &set("9-11"), &set("0-11"));
        assert_eq!(f.len(), 2, "{f:#?}");
        assert!(
            f[0].contains("/etc/default/irqbalance:5") && f[0].contains("isolated CPUs 9 unbanned"),
            "{f:#?}"
        );
        assert!(f[1].contains("housekeeping CPUs 0"), "{f:#?}");
        // The mask alone, banning exactly the isolated CPUs: nothing to say.
        let b = bans("f", "IRQBALANCE_BANNED_CPUS=00000e00\n")
            .expect("s")
            .expect("p");
        assert!(findings(&b, &set("9-11"), &set("0-11")).is_empty());
        // Commented out: irqbalance detects for itself.
        assert!(bans("f", "#IRQBALANCE_BANNED_CPULIST=0\n").is_none());
        assert!(bans("f", "IRQBALANCE_BANNED_CPUS=zz\n")
            .expect("s")
            .is_err());
    }

    #[test]
    fn the_ban_is_set_in_place_or_appended() {
        let t = set_list(DEBIAN, Some(5), &set("9-11"));
        assert!(
            t.ends_with("IRQBALANCE_BANNED_CPUS=\"00000e00\"\nIRQBALANCE_BANNED_CPULIST=9-11\n")
        );
        let b = bans("f", &t).expect("s").expect("p");
        assert!(findings(&b, &set("9-11"), &set("0-11")).is_empty());
        // Only the mask: the list is appended and wins.
        let t = set_list("IRQBALANCE_BANNED_CPUS=1\n", None, &set("9-11"));
        let b = bans("f", &t).expect("s").expect("p");
        assert_eq!(
            (b.var.as_str(), b.cpus.clone()),
            ("IRQBALANCE_BANNED_CPULIST", set("9-11"))
        );
        assert_eq!(
            set_list("", None, &set("2")).lines().last(),
            Some("IRQBALANCE_BANNED_CPULIST=2")
        );
    }
}
