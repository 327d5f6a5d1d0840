//! extlinux (L4T / U-Boot hosts): a new `LABEL` carrying the tuning arguments, made the
//! default, with the previous default entry left as it was so it stays one menu choice away
//! if the new arguments do not boot.

use crate::grub::KernelArgs;

/// The label daqtune owns in extlinux.conf.
pub const LABEL: &str = "daqtune";
const BASE_MARK: &str = "# daqtune: copy of LABEL ";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExtlinuxError {
    #[error("extlinux.conf has no LABEL entry to copy")]
    NoEntry,
    #[error("DEFAULT names `{0}`, which no LABEL defines")]
    MissingDefault(String),
}

/// Why the entry a boot starts cannot be told from extlinux.conf.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DefaultEntryError {
    /// No `DEFAULT`/`ONTIMEOUT`/`MENU DEFAULT`: U-Boot tries the labels in turn, from the first.
    #[error("no DEFAULT or ONTIMEOUT line: which entry boots depends on the boot loader (U-Boot tries the labels in turn, starting with `{0}`)")]
    NoDefault(String),
    #[error("no LABEL entry")]
    NoLabel,
    /// The default names no label of this file, and an `INCLUDE` may define it.
    #[error("{via} (line {line}) names `{label}`, which is not in this file; the INCLUDE at line {include} may define it")]
    MaybeIncluded {
        via: String,
        line: usize,
        label: String,
        include: usize,
    },
    /// The default names a label nothing defines: the boot falls back to another entry.
    #[error("{via} (line {line}) names `{label}`, which no LABEL defines")]
    Undefined {
        via: String,
        line: usize,
        label: String,
    },
}

fn keyword(line: &str) -> Option<(String, &str)> {
    let t = line.trim_start();
    if t.starts_with('#') || t.is_empty() {
        return None;
    }
    let (k, rest) = t.split_once(char::is_whitespace).unwrap_or((t, ""));
    Some((k.to_ascii_uppercase(), rest.trim()))
}

struct Parsed<'a> {
    header: Vec<&'a str>,
    /// (label, lines including the LABEL line)
    blocks: Vec<(String, Vec<&'a str>)>,
}

fn parse(conf: &str) -> Parsed<'_> {
    let mut p = Parsed {
        header: Vec::new(),
        blocks: Vec::new(),
    };
    for line in conf.lines() {
        match keyword(line) {
            Some((k, v)) if k == "LABEL" => p.blocks.push((v.to_string(), vec![line])),
            _ => match p.blocks.last_mut() {
                Some((_, b)) => b.push(line),
                None => p.header.push(line),
            },
        }
    }
    p
}

/// Add (or refresh) the daqtune entry and make it the default. Applying to its own output
/// gives the same text, so a second apply changes no byte.
pub fn add_entry(conf: &str, args: &KernelArgs) -> Result<String, ExtlinuxError> {
    let mut p = parse(conf);
    // An earlier daqtune entry: drop it and remember which entry it was copied from.
    let mut base_label: Option<String> = None;
    if let Some(pos) = p.blocks.iter().position(|(l, _)| l == LABEL) {
        let (_, lines) = p.blocks.remove(pos);
        base_label = lines.iter().find_map(|l| {
            l.trim()
                .strip_prefix(BASE_MARK)
                .map(|s| s.trim().to_string())
        });
    }
    if p.blocks.is_empty() {
        return Err(ExtlinuxError::NoEntry);
    }
    let default = p.header.iter().find_map(|l| {
        keyword(l)
            .filter(|(k, _)| k == "DEFAULT")
            .map(|(_, v)| v.to_string())
    });
    let base_name = match (base_label, default) {
        (Some(b), _) => b,
        (None, Some(d)) if d != LABEL => d,
        _ => p.blocks[0].0.clone(),
    };
    let base_idx = p
        .blocks
        .iter()
        .position(|(l, _)| *l == base_name)
        .ok_or_else(|| ExtlinuxError::MissingDefault(base_name.clone()))?;
    let base = &p.blocks[base_idx].1;
    let indent = base
        .get(1)
        .map(|l| &l[..l.len() - l.trim_start().len()])
        .unwrap_or("      ")
        .to_string();
    let keys = args.keys();
    let mut entry: Vec<String> = vec![
        format!("LABEL {LABEL}"),
        format!("{indent}{BASE_MARK}{base_name}"),
    ];
    let mut saw_append = false;
    for line in base.iter().skip(1) {
        match keyword(line) {
            Some((k, v)) if k == "MENU" && v.to_ascii_uppercase().starts_with("LABEL") => {
                entry.push(format!(
                    "{indent}MENU LABEL {} (daqtune tuning)",
                    v[5..].trim()
                ));
            }
            Some((k, v)) if k == "APPEND" => {
                saw_append = true;
                // The copied arguments lose the parameters daqtune sets, so each appears once.
                let kept: Vec<&str> = v
                    .split_whitespace()
                    .filter(|w| {
                        let key = w.split_once('=').map_or(*w, |(k, _)| k).replace('-', "_");
                        !keys.contains(&key)
                    })
                    .collect();
                let mut words: Vec<&str> = kept;
                words.extend(args.words().iter().map(|s| s.as_str()));
                entry.push(format!("{indent}APPEND {}", words.join(" ")));
            }
            _ => entry.push(line.to_string()),
        }
    }
    // Blank and comment lines after the base entry (separators, commented-out entries)
    // belong to the file, not to the entry: they are not copied.
    while entry.len() > 2 && entry.last().is_some_and(|l| keyword(l).is_none()) {
        entry.pop();
    }
    if !saw_append {
        entry.push(format!("{indent}APPEND {}", args.words().join(" ")));
    }
    entry.push(String::new());

    let mut out = String::new();
    let mut wrote_default = false;
    for l in &p.header {
        if keyword(l).is_some_and(|(k, _)| k == "DEFAULT") {
            if !wrote_default {
                out.push_str(&format!("DEFAULT {LABEL}\n"));
                wrote_default = true;
            }
        } else {
            out.push_str(l);
            out.push('\n');
        }
    }
    if !wrote_default {
        out = format!("DEFAULT {LABEL}\n{out}");
    }
    for (i, (_, lines)) in p.blocks.iter().enumerate() {
        if i == base_idx {
            for l in &entry {
                out.push_str(l);
                out.push('\n');
            }
        }
        for l in lines {
            out.push_str(l);
            out.push('\n');
        }
    }
    Ok(out)
}

/// The kernel arguments daqtune's entry adds to the entry it copies: the words of its last
/// `APPEND` that the copied entry's `APPEND` does not have, in order. `None` when the file has
/// no daqtune entry. (What `add_entry` put there, so a setting's words can be taken out again.)
pub fn entry_words(conf: &str) -> Option<Vec<String>> {
    let p = parse(conf);
    let (_, lines) = p.blocks.iter().find(|(l, _)| l == LABEL)?;
    let append = |lines: &[&str]| -> Vec<String> {
        lines
            .iter()
            .filter_map(|l| keyword(l).filter(|(k, _)| k == "APPEND").map(|(_, v)| v))
            .next_back()
            .map(|v| v.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default()
    };
    let base_name = lines.iter().find_map(|l| {
        l.trim()
            .strip_prefix(BASE_MARK)
            .map(|s| s.trim().to_string())
    });
    let base = base_name
        .and_then(|b| p.blocks.iter().find(|(l, _)| *l == b))
        .map(|(_, lines)| append(lines))
        .unwrap_or_default();
    Some(
        append(lines)
            .into_iter()
            .filter(|w| !base.contains(w))
            .collect(),
    )
}

/// The entry a boot of `extlinux.conf` starts, as U-Boot's parser decides it (the superset of
/// what L4TLauncher reads): `DEFAULT` and `ONTIMEOUT` name it, the last one in the file wins;
/// `MENU DEFAULT` inside a `LABEL` names its label only when nothing named one before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefaultEntry {
    pub label: String,
    /// The keyword that chose it (`DEFAULT`, `ONTIMEOUT`, `MENU DEFAULT`) and its 1-based line.
    pub via: String,
    pub line: usize,
    /// The label's last `APPEND` line (U-Boot keeps the last), split into words; `None` when
    /// the label has none.
    pub append: Option<Vec<String>>,
}

/// Which entry boots. `Err` when none can be told: no `DEFAULT`/`ONTIMEOUT`/`MENU DEFAULT`
/// (U-Boot then tries the labels in turn), a default naming no `LABEL` of this file, or an
/// `INCLUDE` that could define it.
pub fn default_entry(conf: &str) -> Result<DefaultEntry, DefaultEntryError> {
    let mut chosen: Option<(String, String, usize)> = None;
    let mut labels: Vec<(String, Option<Vec<String>>)> = Vec::new();
    let mut in_label = false;
    let mut includes = Vec::new();
    for (n, line) in conf.lines().enumerate() {
        let Some((k, v)) = keyword(line) else {
            continue;
        };
        match k.as_str() {
            "LABEL" => {
                labels.push((v.to_string(), None));
                in_label = true;
            }
            "DEFAULT" | "ONTIMEOUT" => {
                chosen = Some((v.to_string(), k.clone(), n + 1));
                in_label = false;
            }
            // U-Boot takes a label's MENU DEFAULT only while nothing named a default.
            "MENU"
                if in_label
                    && chosen.is_none()
                    && v.to_ascii_uppercase().split_whitespace().next() == Some("DEFAULT") =>
            {
                if let Some((l, _)) = labels.last() {
                    chosen = Some((l.clone(), "MENU DEFAULT".into(), n + 1));
                }
            }
            "APPEND" if in_label => {
                if let Some((_, a)) = labels.last_mut() {
                    *a = Some(v.split_whitespace().map(String::from).collect());
                }
            }
            "INCLUDE" => includes.push(n + 1),
            "TIMEOUT" | "PROMPT" | "TOTALTIMEOUT" => in_label = false,
            _ => {}
        }
    }
    let Some((label, via, line)) = chosen else {
        return Err(match labels.first() {
            Some((l, _)) => DefaultEntryError::NoDefault(l.clone()),
            None => DefaultEntryError::NoLabel,
        });
    };
    match labels.iter().rev().find(|(l, _)| *l == label) {
        Some((_, append)) => Ok(DefaultEntry {
            label,
            via,
            line,
            append: append.clone(),
        }),
        None if !includes.is_empty() => Err(DefaultEntryError::MaybeIncluded {
            via,
            line,
            label,
            include: includes[0],
        }),
        None => Err(DefaultEntryError::Undefined { via, line, label }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_entry_as_u_boot_reads_it() {
        let e = default_entry(L4T).expect("default");
        assert_eq!(
            (e.label.as_str(), e.via.as_str(), e.line),
            ("primary", "DEFAULT", 2)
        );
        assert_eq!(
            e.append.as_deref().map(|a| a.len()),
            Some(6),
            "{:?}",
            e.append
        );
        // After add_entry: ours.
        let out = add_entry(L4T, &args()).expect("add");
        let e = default_entry(&out).expect("default");
        assert_eq!(e.label, LABEL);
        assert!(e
            .append
            .expect("append")
            .contains(&"isolcpus=9-11".to_string()));
        // ONTIMEOUT later in the file wins over DEFAULT (U-Boot: the last one).
        let t = format!("{out}ONTIMEOUT primary\n");
        let e = default_entry(&t).expect("default");
        assert_eq!((e.label.as_str(), e.via.as_str()), ("primary", "ONTIMEOUT"));
        // MENU DEFAULT counts only when nothing named a default before it.
        let m = "TIMEOUT 1\nLABEL a\n MENU DEFAULT\n APPEND x\nLABEL b\n APPEND y\n";
        let e = default_entry(m).expect("menu default");
        assert_eq!(
            (e.label.as_str(), e.via.as_str(), e.line),
            ("a", "MENU DEFAULT", 3)
        );
        let m2 = format!("DEFAULT b\n{m}");
        assert_eq!(default_entry(&m2).expect("d").label, "b");
        // Lower-case keywords, as U-Boot lowercases them.
        assert_eq!(
            default_entry("default x\nlabel x\n append q\n")
                .expect("d")
                .append,
            Some(vec!["q".to_string()])
        );
    }

    #[test]
    fn defaults_that_cannot_be_told() {
        let e = default_entry("LABEL a\n").expect_err("none");
        assert_eq!(e, DefaultEntryError::NoDefault("a".into()));
        assert!(e.to_string().contains("U-Boot tries"), "{e}");
        let e = default_entry("DEFAULT z\nLABEL a\n").expect_err("z");
        assert!(matches!(&e, DefaultEntryError::Undefined { label, .. } if label == "z"));
        assert_eq!(
            e.to_string(),
            "DEFAULT (line 1) names `z`, which no LABEL defines"
        );
        let e = default_entry("DEFAULT z\nINCLUDE other.cfg\nLABEL a\n").expect_err("inc");
        assert!(matches!(
            e,
            DefaultEntryError::MaybeIncluded { include: 2, .. }
        ));
        assert!(e.to_string().contains("INCLUDE at line 2"), "{e}");
        assert_eq!(default_entry(""), Err(DefaultEntryError::NoLabel));
    }

    const L4T: &str = "TIMEOUT 30\nDEFAULT primary\n\nMENU TITLE L4T boot options\n\nLABEL primary\n      MENU LABEL primary kernel\n      LINUX /boot/Image\n      INITRD /boot/initrd\n      APPEND ${cbootargs} root=PARTUUID=abc rw rootwait isolcpus=1 console=ttyTCU0,115200\n\n# LABEL backup\n#    MENU LABEL backup kernel\n";

    fn args() -> KernelArgs {
        KernelArgs::from_words(["isolcpus=9-11", "rcu_nocb_poll"]).expect("args")
    }

    #[test]
    fn new_default_label_old_kept() {
        let out = add_entry(L4T, &args()).expect("add");
        assert!(out.starts_with("TIMEOUT 30\nDEFAULT daqtune\n"), "{out}");
        assert!(
            out.contains("LABEL primary\n      MENU LABEL primary kernel\n"),
            "{out}"
        );
        assert!(
            out.contains("APPEND ${cbootargs} root=PARTUUID=abc rw rootwait isolcpus=1 console"),
            "{out}"
        );
        assert!(out.contains("LABEL daqtune\n      # daqtune: copy of LABEL primary\n      MENU LABEL primary kernel (daqtune tuning)\n      LINUX /boot/Image\n      INITRD /boot/initrd\n      APPEND ${cbootargs} root=PARTUUID=abc rw rootwait console=ttyTCU0,115200 isolcpus=9-11 rcu_nocb_poll\n\nLABEL primary"), "{out}");
        assert_eq!(add_entry(&out, &args()).expect("again"), out, "idempotent");
        let other = KernelArgs::from_words(["isolcpus=2"]).expect("a");
        let out2 = add_entry(&out, &other).expect("refresh");
        assert!(
            out2.contains("console=ttyTCU0,115200 isolcpus=2\n"),
            "{out2}"
        );
        assert_eq!(out2.matches("LABEL daqtune").count(), 1);
    }

    #[test]
    fn errors() {
        assert_eq!(
            add_entry("TIMEOUT 1\n", &args()),
            Err(ExtlinuxError::NoEntry)
        );
        assert!(matches!(
            add_entry("DEFAULT x\nLABEL y\n LINUX /i\n", &args()),
            Err(ExtlinuxError::MissingDefault(_))
        ));
        let out = add_entry("LABEL only\n LINUX /i\n", &args()).expect("no default line");
        assert!(out.starts_with("DEFAULT daqtune\n"), "{out}");
        assert!(
            out.contains(" APPEND isolcpus=9-11 rcu_nocb_poll\n"),
            "{out}"
        );
    }
}
