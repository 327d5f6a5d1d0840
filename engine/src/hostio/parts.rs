//! Files that carry several settings, taken apart by setting (issue 42): the grub drop-in and
//! extlinux's daqtune entry (kernel arguments of `hugepages`, `kernel.cmdline`,
//! `cpu.governor`, `pcie.acs`), a port's systemd `.link` file and its NetworkManager keyfile
//! (`nic.mtu` and the `nic.*` ethtool settings). Each line or word daqtune writes there belongs
//! to one setting (its *part*), told by its key; the rest of the file (comments, `[Match]`,
//! the connection) is the file's skeleton.
//!
//! `apply --only X` writes `merge(current, wanted, [X])`: X's parts as the profile wants
//! them, every other part as it is. `revert --only X` writes `merge(current, original, [X])`,
//! and where that leaves the parts of the original file, the original itself (byte for byte,
//! or no file). The journal records which settings a write changed ([`FileParts`]).
//!
//! The owners are tunable ids as strings: this module knows the files, not the tunables.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How a multi-setting file is made of parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// `GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX words..."`: each word a part.
    GrubDropin,
    /// extlinux.conf with daqtune's `LABEL daqtune`: each word it adds a part.
    Extlinux,
    /// A systemd `.link` file: each `[Link]` key daqtune sets a part.
    NetworkdLink,
    /// A NetworkManager keyfile: `[ethernet] mtu=` and each `[ethtool]` key a part.
    NmKeyfile,
}

/// What a journaled write of a multi-setting file changed: the settings whose parts differ
/// between the file before and after.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileParts {
    pub format: Format,
    pub owners: Vec<String>,
}

/// The settings of the kernel-argument files, in the order their words are written.
pub const KERNEL_OWNERS: [&str; 4] = ["hugepages", "kernel.cmdline", "cpu.governor", "pcie.acs"];

/// The settings of a port's network file, in the order their keys are written.
pub const NIC_OWNERS: [&str; 6] = [
    "nic.mtu",
    "nic.rings",
    "nic.coalesce",
    "nic.pause",
    "nic.offloads",
    "nic.channels",
];

/// The setting a kernel argument belongs to.
pub fn kernel_word_owner(word: &str) -> &'static str {
    let key = word
        .split_once('=')
        .map_or(word, |(k, _)| k)
        .replace('-', "_");
    match key.as_str() {
        "default_hugepagesz" | "hugepagesz" | "hugepages" => "hugepages",
        "cpufreq.default_governor" => "cpu.governor",
        "pci" if word.contains("disable_acs_redir") => "pcie.acs",
        _ => "kernel.cmdline",
    }
}

/// The setting a `.link` `[Link]` key belongs to (`None`: the skeleton's).
fn link_key_owner(key: &str) -> Option<&'static str> {
    Some(match key {
        "MTUBytes" => "nic.mtu",
        "RxBufferSize" | "TxBufferSize" => "nic.rings",
        "UseAdaptiveRxCoalesce" | "UseAdaptiveTxCoalesce" | "RxCoalesceSec" => "nic.coalesce",
        "RxFlowControl" | "TxFlowControl" | "AutoNegotiationFlowControl" => "nic.pause",
        "GenericReceiveOffload" | "LargeReceiveOffload" => "nic.offloads",
        "RxChannels" | "CombinedChannels" => "nic.channels",
        _ => return None,
    })
}

/// The setting a NetworkManager keyfile key belongs to, by its section.
fn nm_key_owner(section: &str, key: &str) -> Option<&'static str> {
    match section {
        "ethernet" if key == "mtu" => Some("nic.mtu"),
        "ethtool" => Some(if key.starts_with("ring-") {
            "nic.rings"
        } else if key.starts_with("coalesce-") {
            "nic.coalesce"
        } else if key.starts_with("pause-") {
            "nic.pause"
        } else if key.starts_with("feature-") {
            "nic.offloads"
        } else if key.starts_with("channels-") {
            "nic.channels"
        } else {
            return None;
        }),
        _ => None,
    }
}

/// The comment `.link` files carry before the NIC settings' keys (scaffolding: there when
/// one of them is).
pub const LINK_NIC_COMMENT: &str =
    "# NIC settings (nic.rings, nic.coalesce, nic.pause, nic.offloads, nic.channels).";

const GRUB_PREFIX: &str = "GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX ";

/// The parts of `text`: each setting's lines (or words), in the file's order. A setting
/// without any is absent.
pub fn parts(format: Format, text: &str) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (owner, item) in items(format, text) {
        out.entry(owner.to_string()).or_default().push(item);
    }
    out
}

fn items(format: Format, text: &str) -> Vec<(&'static str, String)> {
    match format {
        Format::GrubDropin => grub_words(text)
            .into_iter()
            .map(|w| (kernel_word_owner(&w.replace("\\;", ";")), w))
            .collect(),
        Format::Extlinux => daqtune_units::extlinux::entry_words(text)
            .unwrap_or_default()
            .into_iter()
            .map(|w| (kernel_word_owner(&w), w))
            .collect(),
        Format::NetworkdLink | Format::NmKeyfile => {
            split_lines(format, text).1.into_iter().collect()
        }
    }
}

/// The words of the drop-in's `GRUB_CMDLINE_LINUX` line, as written (grub-escaped).
fn grub_words(text: &str) -> Vec<String> {
    text.lines()
        .find_map(|l| l.strip_prefix(GRUB_PREFIX))
        .and_then(|r| r.strip_suffix('"'))
        .map(|r| r.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

/// A key file's skeleton lines (scaffolding left out) and its owned lines with their owners.
fn split_lines(format: Format, text: &str) -> (Vec<String>, Vec<(&'static str, String)>) {
    let mut skeleton = Vec::new();
    let mut owned = Vec::new();
    let mut section = String::new();
    let lines: Vec<&str> = text.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim();
        if let Some(s) = t.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
            section = s.to_string();
            // NetworkManager's `[ethtool]` section is scaffolding, with the blank line before.
            if format == Format::NmKeyfile && section == "ethtool" {
                if skeleton.last().is_some_and(|l: &String| l.is_empty())
                    && i > 0
                    && lines[i - 1].is_empty()
                {
                    skeleton.pop();
                }
                continue;
            }
        }
        if format == Format::NetworkdLink && t == LINK_NIC_COMMENT {
            continue;
        }
        let owner = t.split_once('=').and_then(|(k, _)| match format {
            Format::NetworkdLink if section == "Link" => link_key_owner(k.trim()),
            Format::NmKeyfile => nm_key_owner(&section, k.trim()),
            _ => None,
        });
        match owner {
            Some(o) => owned.push((o, line.to_string())),
            None => skeleton.push(line.to_string()),
        }
    }
    (skeleton, owned)
}

fn rank(format: Format, owner: &str) -> usize {
    let order: &[&str] = match format {
        Format::GrubDropin | Format::Extlinux => &KERNEL_OWNERS,
        Format::NetworkdLink | Format::NmKeyfile => &NIC_OWNERS,
    };
    order
        .iter()
        .position(|o| *o == owner)
        .unwrap_or(order.len())
}

/// `base` (the file as it is, `None` when absent) with the parts of `owners` taken from
/// `from` (`None`: the file without them), every other part and the skeleton kept from `base`
/// (from `from` where `base` is absent). `None` when no part is left: the file has no reason
/// to exist.
pub fn merge(
    format: Format,
    base: Option<&str>,
    from: Option<&str>,
    owners: &[&str],
) -> Option<String> {
    let keep = |o: &str| !owners.contains(&o);
    let mut chosen: Vec<(&'static str, String)> = base
        .map(|b| items(format, b))
        .unwrap_or_default()
        .into_iter()
        .filter(|(o, _)| keep(o))
        .collect();
    chosen.extend(
        from.map(|f| items(format, f))
            .unwrap_or_default()
            .into_iter()
            .filter(|(o, _)| !keep(o)),
    );
    if chosen.is_empty() {
        return None;
    }
    // Stable: each setting's items keep their order.
    chosen.sort_by_key(|(o, _)| rank(format, o));
    render(format, base.or(from)?, chosen)
}

/// `text` with every setting's part taken out: its skeleton (the header, the `.link`'s match
/// and naming policy, the keyfile's connection), a file that changes nothing by itself.
pub fn without_parts(format: Format, text: &str) -> Option<String> {
    render(format, text, Vec::new())
}

/// The file `shell` with the parts `chosen` (in their order).
fn render(format: Format, shell: &str, chosen: Vec<(&'static str, String)>) -> Option<String> {
    match format {
        Format::GrubDropin => {
            let words: Vec<String> = chosen.into_iter().map(|(_, w)| w).collect();
            let mut out = String::new();
            let mut put = false;
            for l in shell.lines() {
                if l.starts_with(GRUB_PREFIX) {
                    out.push_str(&format!("{GRUB_PREFIX}{}\"\n", words.join(" ")));
                    put = true;
                } else {
                    out.push_str(l);
                    out.push('\n');
                }
            }
            if !put {
                out.push_str(&format!("{GRUB_PREFIX}{}\"\n", words.join(" ")));
            }
            Some(out)
        }
        Format::Extlinux => {
            let args =
                daqtune_units::grub::KernelArgs::from_words(chosen.iter().map(|(_, w)| w)).ok()?;
            daqtune_units::extlinux::add_entry(shell, &args).ok()
        }
        Format::NetworkdLink => {
            let (skeleton, _) = split_lines(format, shell);
            let mut out: Vec<String> = skeleton;
            // The skeleton ends with `[Link]`'s own keys: the MTU, then the NIC settings
            // under their comment.
            let mut nic_comment = false;
            for (o, l) in chosen {
                if o != "nic.mtu" && !nic_comment {
                    out.push(LINK_NIC_COMMENT.to_string());
                    nic_comment = true;
                }
                out.push(l);
            }
            Some(lines_text(&out))
        }
        Format::NmKeyfile => {
            let (skeleton, _) = split_lines(format, shell);
            let mut out = Vec::new();
            let mtu: Vec<String> = chosen
                .iter()
                .filter(|(o, _)| *o == "nic.mtu")
                .map(|(_, l)| l.clone())
                .collect();
            let mut section = String::new();
            let mut put_mtu = mtu.is_empty();
            for l in skeleton {
                if let Some(s) = l.trim().strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
                    section = s.to_string();
                }
                out.push(l);
                if section == "ethernet" && !put_mtu {
                    out.append(&mut mtu.clone());
                    put_mtu = true;
                }
            }
            if !put_mtu {
                out.push(String::new());
                out.push("[ethernet]".into());
                out.extend(mtu);
            }
            let ethtool: Vec<String> = chosen
                .into_iter()
                .filter(|(o, _)| *o != "nic.mtu")
                .map(|(_, l)| l)
                .collect();
            if !ethtool.is_empty() {
                out.push(String::new());
                out.push("[ethtool]".into());
                out.extend(ethtool);
            }
            Some(lines_text(&out))
        }
    }
}

fn lines_text(lines: &[String]) -> String {
    let mut s = String::new();
    for l in lines {
        s.push_str(l);
        s.push('\n');
    }
    s
}

/// The settings whose parts differ between `a` and `b` (either absent: no parts).
pub fn changed_owners(format: Format, a: Option<&str>, b: Option<&str>) -> Vec<String> {
    let pa = a.map(|t| parts(format, t)).unwrap_or_default();
    let pb = b.map(|t| parts(format, t)).unwrap_or_default();
    let mut owners: Vec<String> = pa
        .keys()
        .chain(pb.keys())
        .filter(|o| pa.get(*o) != pb.get(*o))
        .cloned()
        .collect();
    owners.sort_by_key(|o| rank(format, o));
    owners.dedup();
    owners
}

#[cfg(test)]
mod tests {
    use super::*;

    const DROPIN: &str = "# Written by daqtune (profile p); `daqtune revert` removes it.\n# x\nGRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX default_hugepagesz=1G hugepagesz=1G hugepages=4 isolcpus=2-3 nohz_full=2-3 cpufreq.default_governor=performance pci=disable_acs_redir=0000:00:01.0\\;0000:00:02.0\"\n";

    #[test]
    fn kernel_words_belong_to_their_settings() {
        let p = parts(Format::GrubDropin, DROPIN);
        assert_eq!(
            p["hugepages"],
            ["default_hugepagesz=1G", "hugepagesz=1G", "hugepages=4"]
        );
        assert_eq!(p["kernel.cmdline"], ["isolcpus=2-3", "nohz_full=2-3"]);
        assert_eq!(p["cpu.governor"], ["cpufreq.default_governor=performance"]);
        assert_eq!(p["pcie.acs"].len(), 1);
    }

    #[test]
    fn merging_takes_one_settings_words_and_keeps_the_rest() {
        let only_huge =
            merge(Format::GrubDropin, None, Some(DROPIN), &["hugepages"]).expect("some");
        assert!(only_huge.ends_with(
            "GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX default_hugepagesz=1G hugepagesz=1G hugepages=4\"\n"
        ));
        assert!(only_huge.starts_with("# Written by daqtune"));
        // Everything back from the full file: the full file, byte for byte.
        let all = merge(
            Format::GrubDropin,
            Some(&only_huge),
            Some(DROPIN),
            &KERNEL_OWNERS,
        );
        assert_eq!(all.as_deref(), Some(DROPIN));
        // Taking hugepages out of the hugepages-only file leaves nothing.
        assert_eq!(
            merge(Format::GrubDropin, Some(&only_huge), None, &["hugepages"]),
            None
        );
        assert_eq!(
            changed_owners(Format::GrubDropin, Some(&only_huge), Some(DROPIN)),
            ["kernel.cmdline", "cpu.governor", "pcie.acs"]
        );
    }

    const LINK: &str = "# Written by daqtune (profile p); `daqtune revert` removes it.\n[Match]\nMACAddress=aa:bb:cc:dd:ee:ff\n\n[Link]\nNamePolicy=keep\nMTUBytes=9000\n# NIC settings (nic.rings, nic.coalesce, nic.pause, nic.offloads, nic.channels).\nRxBufferSize=max\nRxFlowControl=no\n";

    #[test]
    fn a_link_file_is_merged_by_key() {
        let mtu = merge(Format::NetworkdLink, None, Some(LINK), &["nic.mtu"]).expect("mtu");
        assert!(mtu.ends_with("NamePolicy=keep\nMTUBytes=9000\n"), "{mtu}");
        let rings = merge(Format::NetworkdLink, None, Some(LINK), &["nic.rings"]).expect("rings");
        assert!(
            rings.ends_with("NamePolicy=keep\n# NIC settings (nic.rings, nic.coalesce, nic.pause, nic.offloads, nic.channels).\nRxBufferSize=max\n"),
            "{rings}"
        );
        let all = merge(Format::NetworkdLink, Some(&mtu), Some(LINK), &NIC_OWNERS);
        assert_eq!(all.as_deref(), Some(LINK));
        assert_eq!(
            merge(Format::NetworkdLink, Some(&mtu), None, &["nic.mtu"]),
            None
        );
    }

    const NM: &str = "# Written by daqtune\n[connection]\nid=x\n\n[ethernet]\nmtu=9000\n\n[ipv4]\nmethod=disabled\n\n[ipv6]\nmethod=ignore\n\n[ethtool]\nring-rx=8192\npause-rx=false\n";

    #[test]
    fn a_keyfile_is_merged_by_section_and_key() {
        let rings = merge(Format::NmKeyfile, None, Some(NM), &["nic.rings"]).expect("rings");
        assert!(!rings.contains("mtu="), "{rings}");
        assert!(
            rings.ends_with("method=ignore\n\n[ethtool]\nring-rx=8192\n"),
            "{rings}"
        );
        let mtu = merge(Format::NmKeyfile, None, Some(NM), &["nic.mtu"]).expect("mtu");
        assert!(mtu.ends_with("[ipv6]\nmethod=ignore\n"), "{mtu}");
        assert!(mtu.contains("[ethernet]\nmtu=9000\n"), "{mtu}");
        let all = merge(Format::NmKeyfile, Some(&rings), Some(NM), &NIC_OWNERS);
        assert_eq!(all.as_deref(), Some(NM));
    }
}
