//! The fact sources each check declares (`capture::needs`) hold what it reads: every check is
//! run alone on every fixture root under every built-in profile with the host's read
//! recording on, and each path it touched (beyond what every check's run touches: the
//! profile's platform match, the report header) must belong to a declared source. A check
//! that read more than it declares would run on a capture lacking part of its facts and judge
//! the absence (issue 41).

use daqtune_engine::capture::{needs, refines, Source};
use daqtune_probe::Host;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

fn source_of(p: &str) -> Option<Source> {
    use Source::*;
    let procs = p
        .strip_prefix("/proc/")
        .and_then(|r| r.split('/').next())
        .is_some_and(|pid| pid.parse::<u32>().is_ok());
    if procs {
        return Some(Processes);
    }
    let table: &[(&str, Source)] = &[
        ("/sys/bus/pci/", Pci),
        ("/sys/devices/pci", Pci),
        ("/sys/devices/platform/", Pci),
        ("/sys/devices/system/node", Memory),
        ("/sys/devices/system/cpu", Cpus),
        ("/sys/kernel/iommu_groups", Iommu),
        ("/sys/class/iommu", Iommu),
        ("/sys/kernel/mm/hugepages", Memory),
        ("/sys/kernel/mm/", KernelMm),
        ("/sys/class/net", Net),
        ("/sys/class/infiniband", Rdma),
        ("/dev/infiniband", Rdma),
        ("/sys/module", Modules),
        ("/proc/modules", Modules),
        ("/proc/cmdline", Cmdline),
        ("/proc/meminfo", Memory),
        ("/proc/mounts", Memory),
        ("/proc/cpuinfo", Cpus),
        ("/proc/stat", Cpus),
        ("/proc/sys/", Sysctl),
        ("/proc/irq", Irq),
        ("/proc/interrupts", Irq),
        ("/proc/net/", Addresses),
        ("/proc/driver/nvidia", NvidiaDriver),
        ("/daqtune/gpu.json", Gpu),
        ("/daqtune/ethtool", Ethtool),
        ("/daqtune/kmsg.txt", KernelLog),
        ("/daqtune/units.json", Units),
        ("/daqtune/arch", Platform),
        ("/sys/class/dmi", Platform),
        ("/proc/device-tree", Platform),
        ("/proc/version", Platform),
        ("/etc/os-release", Platform),
        ("/etc/", Etc),
        ("/usr/lib/", Etc),
        ("/lib/", Etc),
        ("/boot/", Etc),
    ];
    table
        .iter()
        .find(|(pre, _)| p.starts_with(pre))
        .map(|(_, s)| *s)
}

/// Reads that only refine what a PCI reading gives (the host's NUMA node count, the NICs'
/// interface names, the ASPM policy shown beside AER): a capture without them still judges.
fn refines_pci(p: &str) -> bool {
    p.starts_with("/sys/devices/system/node")
        || p.starts_with("/sys/class/net")
        || p.starts_with("/sys/module/pcie_aspm")
}

#[test]
fn each_check_reads_only_the_sources_it_declares() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures");
    let mut roots: Vec<_> = std::fs::read_dir(&fixtures)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.join("sys").is_dir() || p.join("proc").is_dir())
        .collect();
    roots.sort();
    assert!(roots.len() >= 5, "{roots:?}");
    let profiles: Vec<_> = daqtune_engine::profile::builtin_names()
        .filter_map(|n| daqtune_engine::profile::load(n).ok())
        .collect();
    let ids: Vec<&str> = daqtune_engine::tunables::ids()
        .filter(|id| !id.starts_with("app."))
        .collect();
    let mut extra: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for root in &roots {
        let host = Host::at(root).unwrap();
        for p in &profiles {
            let mut per: Vec<(&str, BTreeSet<String>)> = Vec::new();
            for id in &ids {
                let (rec_host, rec) = host.recording();
                let _ =
                    daqtune_engine::commands::evaluate(&rec_host, p, vec![id.to_string()], false);
                let r = rec.lock().unwrap().clone();
                per.push((id, r.accesses.keys().cloned().collect()));
            }
            let common: BTreeSet<String> = per
                .iter()
                .map(|(_, s)| s.clone())
                .reduce(|a, b| a.intersection(&b).cloned().collect())
                .unwrap_or_default();
            for (id, paths) in &per {
                let declared = needs(id).unwrap_or_else(|| panic!("{id} declares nothing"));
                for path in paths.difference(&common) {
                    let Some(s) = source_of(path) else { continue };
                    if declared.contains(&s)
                        || refines(id).contains(&s)
                        || (declared.contains(&Source::Pci) && refines_pci(path))
                    {
                        continue;
                    }
                    extra
                        .entry((id.to_string(), format!("{s:?}")))
                        .or_default()
                        .insert(format!(
                            "{} {path}",
                            root.file_name().unwrap().to_string_lossy()
                        ));
                }
            }
        }
    }
    let msg: Vec<String> = extra
        .iter()
        .map(|((id, s), p)| {
            format!(
                "{id} reads {s}, undeclared: {}",
                p.iter().take(3).cloned().collect::<Vec<_>>().join(", ")
            )
        })
        .collect();
    assert!(msg.is_empty(), "{}", msg.join("\n"));
}
