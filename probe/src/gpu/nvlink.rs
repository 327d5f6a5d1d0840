//! NVLink between GPUs: which links are up and what is at their far end (NVML), and the
//! `NV#` count per GPU pair that `nvidia-smi topo -m` prints.
//!
//! A link's far end is another GPU (a bridge or a direct board link: its PCI bus id names
//! it), an NVSwitch (HGX/DGX boards: every GPU's links go to the switches, so every pair of
//! GPUs on the fabric is joined by as many links as the GPU with fewer switch links has), or
//! a CPU (IBM POWER NPU, not a GPU pair). In a virtual machine the switches are not on the
//! guest's PCI bus and NVML reports their bus id as `FFFFFFFF:FF:FF.0`, which no PCI address
//! can be; such a link is counted as a switch link when NVML says the far end is a switch,
//! or cannot say what it is.

use super::{GpuFacts, GpuSnapshot, FACTS_PATH};
use crate::host::Host;
use serde::{Deserialize, Serialize};

/// What NVML says is at the far end of a link (nvmlIntNvLinkDeviceType_t).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RemoteKind {
    Gpu,
    /// IBM POWER NPU: a CPU, not a GPU.
    Cpu,
    Switch,
    /// NVML answered UNKNOWN, or has no nvmlDeviceGetNvLinkRemoteDeviceType.
    Unknown,
}

impl RemoteKind {
    pub fn from_nvml(v: u32) -> RemoteKind {
        match v {
            0 => RemoteKind::Gpu,
            1 => RemoteKind::Cpu,
            2 => RemoteKind::Switch,
            _ => RemoteKind::Unknown,
        }
    }
}

/// One active NVLink of a GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NvLink {
    /// Link index, 0 .. NVML_NVLINK_MAX_LINKS (18 on Hopper).
    pub link: u32,
    /// The far end's PCI bus id in sysfs form; `None` where NVML gave none or one that is not
    /// a PCI address (a switch outside a VM guest's bus: `FFFFFFFF:FF:FF.0`).
    #[serde(default)]
    pub remote_bus_id: Option<String>,
    pub remote_kind: RemoteKind,
}

/// One GPU pair joined by NVLink, by index into the GPU list it was computed from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NvPair {
    pub a: usize,
    pub b: usize,
    /// Links between the two: direct ones plus, where both are on an NVSwitch fabric, the
    /// smaller of their switch-link counts.
    pub links: u32,
    pub direct: u32,
    pub via_switch: u32,
}

/// The switch side of a link: NVML says switch, or the far end is neither a GPU it names nor
/// a CPU (see the module comment).
fn is_switch_link(l: &NvLink, gpu_buses: &[Option<&str>]) -> bool {
    match l.remote_kind {
        RemoteKind::Switch => true,
        RemoteKind::Cpu => false,
        RemoteKind::Gpu => false,
        RemoteKind::Unknown => match &l.remote_bus_id {
            None => true,
            Some(b) => !gpu_buses.contains(&Some(b.as_str())),
        },
    }
}

/// The GPU pairs joined by NVLink, as `nvidia-smi topo -m` counts them (`NV#`): `links[i]` is
/// GPU i's active links (`None`: not read), `buses[i]` its PCI bus id.
pub fn nvlink_pairs(buses: &[Option<&str>], links: &[Option<&[NvLink]>]) -> Vec<NvPair> {
    let n = buses.len().min(links.len());
    let switch_links: Vec<u32> = (0..n)
        .map(|i| {
            links[i].map_or(0, |ls| {
                ls.iter().filter(|l| is_switch_link(l, buses)).count() as u32
            })
        })
        .collect();
    let direct = |i: usize, j: usize| -> u32 {
        let Some(target) = buses[j] else { return 0 };
        links[i].map_or(0, |ls| {
            ls.iter()
                .filter(|l| {
                    l.remote_kind != RemoteKind::Switch
                        && l.remote_kind != RemoteKind::Cpu
                        && l.remote_bus_id.as_deref() == Some(target)
                })
                .count() as u32
        })
    };
    let mut out = Vec::new();
    for a in 0..n {
        for b in a + 1..n {
            // Both ends report the same bond; a driver that shows only one side still counts.
            let d = direct(a, b).max(direct(b, a));
            let s = switch_links[a].min(switch_links[b]);
            if d + s > 0 {
                out.push(NvPair {
                    a,
                    b,
                    links: d + s,
                    direct: d,
                    via_switch: s,
                });
            }
        }
    }
    out
}

/// NVLink as `topo` sees it: per GPU (by PCI bus id) its links, or why none were read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NvLinkView {
    /// (PCI bus id, active links or `None` when not read) for each GPU NVML reported.
    pub gpus: Vec<(Option<String>, Option<Vec<NvLink>>)>,
    /// Why NVLink could not be read at all, or for any GPU (said once, not per GPU).
    pub unavailable: Option<String>,
}

impl NvLinkView {
    /// The NVLink part of a facts snapshot (live or recorded).
    pub fn from_snapshot(s: &GpuSnapshot) -> NvLinkView {
        view_of(&s.gpus, s.nvml.reason())
    }

    /// The pairs, with `a`/`b` as PCI bus ids.
    pub fn pairs(&self) -> Vec<(String, String, NvPair)> {
        let buses: Vec<Option<&str>> = self.gpus.iter().map(|g| g.0.as_deref()).collect();
        let links: Vec<Option<&[NvLink]>> = self.gpus.iter().map(|g| g.1.as_deref()).collect();
        nvlink_pairs(&buses, &links)
            .into_iter()
            .filter_map(|p| Some((buses[p.a]?.to_string(), buses[p.b]?.to_string(), p)))
            .collect()
    }
}

fn view_of(gpus: &[GpuFacts], nvml_down: Option<&str>) -> NvLinkView {
    let mut v = NvLinkView {
        gpus: gpus
            .iter()
            .map(|g| (g.pci_bus_id.clone(), g.nvlink.clone()))
            .collect(),
        unavailable: None,
    };
    if let Some(r) = nvml_down {
        v.unavailable = Some(format!("NVML: {r}"));
    } else if gpus.is_empty() {
        v.unavailable = Some("NVML sees no GPU".into());
    } else if gpus.iter().all(|g| g.nvlink.is_none()) {
        // One reason for the whole host: the GPUs of one host share the driver, so the
        // first GPU's reason is the host's.
        let why = gpus
            .iter()
            .find_map(|g| g.unavailable.get("nvlink"))
            .cloned()
            .unwrap_or_else(|| "the GPU facts carry no NVLink record".into());
        v.unavailable = Some(why);
    }
    v
}

/// NVLink for `topo`: on the live host NVML alone (no cuInit, no CUDA cache), under a root the
/// recorded facts file, which `snapshot` wrote with the links in it.
pub fn read_nvlinks(host: &Host) -> NvLinkView {
    if host.is_live() {
        return super::nvml::gather_nvlinks();
    }
    let recorded = host
        .read_string(FACTS_PATH)
        .map_err(|e| e.to_string())
        .and_then(|t| GpuSnapshot::from_json(&t));
    match recorded {
        Ok(s) => NvLinkView::from_snapshot(&s),
        Err(e) => NvLinkView {
            gpus: Vec::new(),
            unavailable: Some(format!("{}: {e}", FACTS_PATH.trim_start_matches('/'))),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(link: u32, bus: Option<&str>, kind: RemoteKind) -> NvLink {
        NvLink {
            link,
            remote_bus_id: bus.map(str::to_string),
            remote_kind: kind,
        }
    }

    /// HGX in a VM, as the lent 4-GPU machine reported: 18 links per GPU, far end a switch
    /// with no bus id. Every pair is NV18, as nvidia-smi printed.
    #[test]
    fn switch_fabric_every_pair() {
        let buses = [
            "0000:00:06.0",
            "0000:00:07.0",
            "0000:00:08.0",
            "0000:00:09.0",
        ];
        let per: Vec<Vec<NvLink>> = (0..4)
            .map(|_| (0..18).map(|i| l(i, None, RemoteKind::Switch)).collect())
            .collect();
        let b: Vec<Option<&str>> = buses.iter().map(|s| Some(*s)).collect();
        let ls: Vec<Option<&[NvLink]>> = per.iter().map(|v| Some(v.as_slice())).collect();
        let p = nvlink_pairs(&b, &ls);
        assert_eq!(p.len(), 6);
        assert!(p.iter().all(|p| p.links == 18 && p.via_switch == 18));
    }

    /// Unknown far end without a bus id counts as the fabric; a GPU without NVLink pairs with
    /// nobody; a direct bridge pair counts its own links only; a CPU link is no pair.
    #[test]
    fn direct_bridge_unknown_and_cpu() {
        let b = [
            Some("0000:17:00.0"),
            Some("0000:65:00.0"),
            Some("0000:ca:00.0"),
            Some("0000:e3:00.0"),
        ];
        let g0 = vec![
            l(0, Some("0000:65:00.0"), RemoteKind::Gpu),
            l(1, Some("0000:65:00.0"), RemoteKind::Gpu),
            l(2, Some("0000:65:00.0"), RemoteKind::Unknown),
            l(3, Some("0004:00:00.0"), RemoteKind::Cpu),
        ];
        let g1 = vec![
            l(0, Some("0000:17:00.0"), RemoteKind::Gpu),
            l(1, Some("0000:17:00.0"), RemoteKind::Gpu),
        ];
        let g2: Vec<NvLink> = Vec::new();
        let ls: Vec<Option<&[NvLink]>> = vec![Some(&g0), Some(&g1), Some(&g2), None];
        let p = nvlink_pairs(&b, &ls);
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!((p[0].a, p[0].b, p[0].links, p[0].direct), (0, 1, 3, 3));
    }

    #[test]
    fn fabric_pairs_take_the_smaller_side() {
        let b = [Some("0000:01:00.0"), Some("0000:02:00.0")];
        let g0: Vec<NvLink> = (0..12).map(|i| l(i, None, RemoteKind::Unknown)).collect();
        let g1: Vec<NvLink> = (0..10)
            .map(|i| l(i, Some("0000:88:00.0"), RemoteKind::Switch))
            .collect();
        let ls: Vec<Option<&[NvLink]>> = vec![Some(&g0), Some(&g1)];
        let p = nvlink_pairs(&b, &ls);
        assert_eq!(p[0].links, 10);
    }

    #[test]
    fn view_says_why_once() {
        let mut g = GpuFacts {
            uuid: "GPU-a".into(),
            pci_bus_id: Some("0000:01:00.0".into()),
            ..Default::default()
        };
        g.unavailable.insert(
            "nvlink".into(),
            "Not Supported (NVML_ERROR_NOT_SUPPORTED)".into(),
        );
        let v = view_of(&[g.clone(), g], None);
        assert_eq!(
            v.unavailable.as_deref(),
            Some("Not Supported (NVML_ERROR_NOT_SUPPORTED)")
        );
        assert!(v.pairs().is_empty());
        let v = view_of(&[], Some("libnvidia-ml.so.1: cannot open"));
        assert!(v.unavailable.unwrap().starts_with("NVML: "));
    }

    proptest::proptest! {
        /// Any mix of links never panics, never pairs a GPU with itself, and never claims more
        /// links for a pair than either GPU has up.
        #[test]
        fn pairs_are_bounded(kinds in proptest::collection::vec((0u32..4, 0usize..5, 0usize..3), 0..40)) {
            let b = [Some("0000:01:00.0"), Some("0000:02:00.0"), None];
            let remotes = [Some("0000:01:00.0"), Some("0000:02:00.0"), None, Some("0000:99:00.0"), Some("0000:03:00.0")];
            let mut per: Vec<Vec<NvLink>> = vec![Vec::new(), Vec::new(), Vec::new()];
            for (i, (k, r, g)) in kinds.iter().enumerate() {
                per[*g].push(l(i as u32, remotes[*r], RemoteKind::from_nvml(*k)));
            }
            let ls: Vec<Option<&[NvLink]>> = per.iter().map(|v| Some(v.as_slice())).collect();
            for p in nvlink_pairs(&b, &ls) {
                proptest::prop_assert!(p.a < p.b);
                proptest::prop_assert!(p.links as usize <= per[p.a].len().max(per[p.b].len()));
            }
        }
    }
}
