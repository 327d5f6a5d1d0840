//! The kernel command line (/proc/cmdline) and the CPU-isolation parameters on it.
//!
//! The kernel splits the line on whitespace, but a double quote protects spaces until the next
//! quote (`dyndbg="file foo.c +p"`); the quotes are dropped from the value. Everything after a
//! bare `--` goes to init and is not a kernel parameter. A parameter given twice: the last one
//! wins for the isolation parameters (each `__setup` handler overwrites its mask).

use crate::cpulist::{parse_cpulist, CpuListError, CpuSet};

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Param {
    pub key: String,
    /// `None` for a bare flag such as `rcu_nocb_poll`; `Some("")` for `key=`.
    pub value: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Cmdline {
    pub params: Vec<Param>,
    /// Words after `--` (arguments for init).
    pub init_args: Vec<String>,
}

/// Split a command line into words, honouring double quotes as the kernel's `next_arg` does.
pub fn split_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_quote = false;
    let mut has_word = false;
    for ch in line.chars() {
        match ch {
            '"' => {
                in_quote = !in_quote;
                has_word = true;
            }
            c if c.is_whitespace() && !in_quote => {
                if has_word {
                    words.push(std::mem::take(&mut cur));
                    has_word = false;
                }
            }
            c => {
                cur.push(c);
                has_word = true;
            }
        }
    }
    if has_word {
        words.push(cur);
    }
    words
}

pub fn parse_cmdline(line: &str) -> Cmdline {
    let mut out = Cmdline::default();
    let mut after_dashes = false;
    for w in split_words(line) {
        if after_dashes {
            out.init_args.push(w);
            continue;
        }
        if w == "--" {
            after_dashes = true;
            continue;
        }
        let (key, value) = match w.split_once('=') {
            Some((k, v)) => (k.to_string(), Some(v.to_string())),
            None => (w, None),
        };
        // The kernel treats '-' and '_' in parameter names alike.
        out.params.push(Param {
            key: key.replace('-', "_"),
            value,
        });
    }
    out
}

impl Cmdline {
    /// The last value given for `key` (dashes and underscores alike).
    pub fn get(&self, key: &str) -> Option<&Param> {
        let key = key.replace('-', "_");
        self.params.iter().rev().find(|p| p.key == key)
    }
    pub fn has(&self, key: &str) -> bool {
        self.get(key).is_some()
    }
    pub fn value(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(|p| p.value.as_deref())
    }
    /// The boot-time hugepage reservations, `(page size in kB, count)`: each `hugepages=`
    /// counts pages of the `hugepagesz=` before it, or of `default_hugepagesz=` (else
    /// `default_kb`, the architecture's default) when none precedes it. A later reservation
    /// of a size replaces an earlier one, as in the kernel.
    pub fn hugepage_reservations(&self, default_kb: Option<u64>) -> Vec<(u64, u64)> {
        let default = self
            .value("default_hugepagesz")
            .and_then(crate::mem::parse_size_kb)
            .or(default_kb);
        let mut size = None;
        let mut out: Vec<(u64, u64)> = Vec::new();
        for p in &self.params {
            match (p.key.as_str(), p.value.as_deref()) {
                ("hugepagesz", Some(v)) => size = crate::mem::parse_size_kb(v),
                ("hugepages", Some(v)) => {
                    let (Some(kb), Ok(n)) = (size.or(default), v.parse::<u64>()) else {
                        continue;
                    };
                    out.retain(|(k, _)| *k != kb);
                    out.push((kb, n));
                }
                _ => {}
            }
        }
        out
    }

    /// Every value given for `key`, in order (hugepagesz=/hugepages= pairs repeat).
    pub fn values<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.params
            .iter()
            .filter(move |p| p.key == key)
            .filter_map(|p| p.value.as_deref())
    }
}

/// `isolcpus=[flag,...,]cpulist`. Flags: `nohz`, `domain`, `managed_irq`; no flag means
/// `domain`. Old kernels also accepted the unprefixed list.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Isolcpus {
    pub cpus: CpuSet,
    pub nohz: bool,
    pub domain: bool,
    pub managed_irq: bool,
    /// Flags the kernel does not know (it refuses the whole parameter for those).
    pub unknown_flags: Vec<String>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ParamError {
    #[error("{key}= has no value")]
    Missing { key: String },
    #[error("{key}={value}: {source}")]
    BadList {
        key: String,
        value: String,
        source: CpuListError,
    },
}

pub fn parse_isolcpus(value: &str, nr_cpus: Option<u32>) -> Result<Isolcpus, ParamError> {
    let mut flags = Vec::new();
    let mut rest = value;
    // Flags are alphabetic words before the list; the list starts at the first word that
    // begins with a digit (or is `N`/`all`).
    loop {
        let (head, tail) = match rest.split_once(',') {
            Some((h, t)) => (h, Some(t)),
            None => (rest, None),
        };
        let is_flag = !head.is_empty()
            && head.chars().all(|c| c.is_ascii_alphabetic() || c == '_')
            && head != "N"
            && head != "all";
        match (is_flag, tail) {
            (true, Some(t)) => {
                flags.push(head.to_string());
                rest = t;
            }
            (true, None) => {
                flags.push(head.to_string());
                rest = "";
                break;
            }
            (false, _) => break,
        }
    }
    let cpus = parse_cpulist(rest, nr_cpus).map_err(|source| ParamError::BadList {
        key: "isolcpus".into(),
        value: crate::cpulist::clip(value),
        source,
    })?;
    let mut iso = Isolcpus {
        cpus,
        nohz: false,
        domain: flags.is_empty(),
        managed_irq: false,
        unknown_flags: Vec::new(),
    };
    for f in flags {
        match f.as_str() {
            "nohz" => iso.nohz = true,
            "domain" => iso.domain = true,
            "managed_irq" => iso.managed_irq = true,
            _ => iso.unknown_flags.push(f),
        }
    }
    Ok(iso)
}

/// A CPU-list parameter such as `nohz_full=`, `rcu_nocbs=`, `irqaffinity=`.
pub fn parse_list_param(
    cmd: &Cmdline,
    key: &str,
    nr_cpus: Option<u32>,
) -> Option<Result<CpuSet, ParamError>> {
    let p = cmd.get(key)?;
    Some(match p.value.as_deref() {
        // `rcu_nocbs` without a value is valid since 5.19 (offloading is then runtime-toggled).
        None | Some("") => Err(ParamError::Missing { key: key.into() }),
        Some(v) => parse_cpulist(v, nr_cpus).map_err(|source| ParamError::BadList {
            key: key.into(),
            value: crate::cpulist::clip(v),
            source,
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn quoted_words() {
        let c = parse_cmdline(
            "BOOT_IMAGE=/vmlinuz root=UUID=ab ro dyndbg=\"file foo.c +p\" quiet -- single x",
        );
        assert_eq!(c.value("dyndbg"), Some("file foo.c +p"));
        assert_eq!(c.value("root"), Some("UUID=ab"));
        assert!(c.has("quiet"));
        assert_eq!(c.init_args, vec!["single", "x"]);
        assert!(!c.has("single"));
    }

    #[test]
    fn last_wins_and_dashes() {
        let c = parse_cmdline("isolcpus=1 rcu-nocbs=2 isolcpus=3\n");
        assert_eq!(c.value("isolcpus"), Some("3"));
        assert_eq!(c.value("rcu_nocbs"), Some("2"));
    }

    #[test]
    fn isolcpus_flags() {
        let i = parse_isolcpus("managed_irq,domain,2-5", None).expect("parse");
        assert!(i.managed_irq && i.domain && !i.nohz);
        assert_eq!(i.cpus.to_string(), "2-5");
        let i = parse_isolcpus("9-11", None).expect("parse");
        assert!(i.domain);
        let i = parse_isolcpus("nohz,bogus,1", None).expect("parse");
        assert_eq!(i.unknown_flags, vec!["bogus"]);
        assert!(parse_isolcpus("domain,x-y", None).is_err());
    }

    #[test]
    fn empty_and_null() {
        assert!(parse_cmdline("").params.is_empty());
        let c = parse_cmdline("(null)");
        assert_eq!(c.params[0].key, "(null)");
        let c = parse_cmdline("nohz_full=");
        assert!(matches!(
            parse_list_param(&c, "nohz_full", None),
            Some(Err(ParamError::Missing { .. }))
        ));
    }

    #[test]
    fn cmdline_bomb_refused_quickly_and_quoted_short() {
        // The red-team /proc/cmdline: 38 KB of isolcpus ranges over 65536 CPUs.
        let line = format!("ro isolcpus=domain,{} quiet", "0-65535,".repeat(4750));
        let c = parse_cmdline(&line);
        let e = parse_isolcpus(c.value("isolcpus").expect("isolcpus"), Some(64)).expect_err("bomb");
        assert!(e.to_string().contains("limit of 8192"), "{e}");
        assert!(e.to_string().len() < 200, "{e}");
        let line = format!("nohz_full={}", "1-8191,".repeat(4750));
        let got = parse_list_param(&parse_cmdline(&line), "nohz_full", None);
        assert_eq!(got.expect("present").expect("list").len(), 8191);
    }

    #[test]
    fn unterminated_quote() {
        let c = parse_cmdline("a=\"b c");
        assert_eq!(c.value("a"), Some("b c"));
    }

    proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,80}") {
            let c = parse_cmdline(&s);
            for p in &c.params {
                if let Some(v) = &p.value {
                    let _ = parse_isolcpus(v, Some(8));
                }
            }
        }
    }

    #[test]
    fn hugepage_reservations_pair_sizes_and_counts() {
        let c = parse_cmdline(
            "quiet default_hugepagesz=1G hugepagesz=1G hugepages=1 hugepagesz=2M hugepages=512",
        );
        assert_eq!(
            c.hugepage_reservations(Some(2048)),
            vec![(1_048_576, 1), (2048, 512)]
        );
        // A bare hugepages= counts default-size pages; a later reservation of a size wins.
        let c = parse_cmdline("hugepages=64 hugepagesz=2M hugepages=128");
        assert_eq!(c.hugepage_reservations(Some(2048)), vec![(2048, 128)]);
        assert_eq!(parse_cmdline("ro").hugepage_reservations(None), vec![]);
    }
}
