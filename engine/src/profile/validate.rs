//! The rules no type can express, each error located in the layer that set the key.

use super::{merge::locate, parse_date, CoreSpec, LoadedProfile, ProfileError, REFERENCE_PATHS};
use daqtune_probe::cpulist::parse_cpulist;

impl LoadedProfile {
    /// The layer (file, source) that sets a key path, most derived first.
    fn locate_key(&self, path: &[&str]) -> (String, Option<(usize, usize)>) {
        for (f, s) in &self.layers {
            if let Some(pos) = locate(s, path) {
                return (f.clone(), Some(pos));
            }
        }
        (self.layers[0].0.clone(), None)
    }

    fn err(&self, path: &[&str], msg: impl Into<String>) -> ProfileError {
        let (f, pos) = self.locate_key(path);
        ProfileError::at(&f, pos, msg)
    }

    /// Rules no type can express; the first broken one is reported.
    pub fn validate(&self) -> Result<(), ProfileError> {
        if self.profile.name.trim().is_empty() {
            return Err(self.err(&["name"], "a profile needs a `name`"));
        }
        self.validate_cpu()?;
        self.validate_hugepages()?;
        self.validate_devices()?;
        self.validate_persist()?;
        self.validate_kernel()?;
        self.validate_references()?;
        self.validate_waivers()
    }

    /// The governor's name; isolated and irqaffinity CPU lists, disjoint.
    fn validate_cpu(&self) -> Result<(), ProfileError> {
        let p = &self.profile;
        if ![
            "performance",
            "powersave",
            "schedutil",
            "ondemand",
            "conservative",
            "userspace",
        ]
        .contains(&p.cpu.governor.as_str())
        {
            return Err(self.err(
                &["cpu", "governor"],
                format!("unknown governor `{}` (expected performance, schedutil, ondemand, powersave, ...)", p.cpu.governor),
            ));
        }
        let isolated = match &p.cpu.isolated {
            Some(CoreSpec::List(s)) => Some(parse_cpulist(s, None).map_err(|e| {
                self.err(
                    &["cpu", "isolated"],
                    format!("isolated: {e} (expected a CPU list like 9-11)"),
                )
            })?),
            Some(CoreSpec::Rule(r)) => {
                if r.count == 0 {
                    return Err(self.err(&["cpu", "isolated", "count"], "count must be at least 1"));
                }
                None
            }
            None => None,
        };
        if let Some(irq) = &p.cpu.irqaffinity {
            let irq = parse_cpulist(irq, None).map_err(|e| {
                self.err(
                    &["cpu", "irqaffinity"],
                    format!("irqaffinity: {e} (expected a CPU list like 0-8)"),
                )
            })?;
            if let Some(iso) = &isolated {
                let overlap = irq.intersection(iso);
                if !overlap.is_empty() {
                    return Err(self.err(
                        &["cpu", "irqaffinity"],
                        format!("irqaffinity overlaps the isolated CPUs on {overlap} (they must be disjoint)"),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Page sizes and mounts: one pool per page size, one page size per mount.
    fn validate_hugepages(&self) -> Result<(), ProfileError> {
        let p = &self.profile;
        let page_size = |size: &str, at: &[&str]| match daqtune_probe::mem::parse_size_kb(size) {
            Some(kb) if kb >= 4 => Ok(kb),
            _ => Err(self.err(
                at,
                format!("`{size}` is not a page size (expected 2M, 1G, ...)"),
            )),
        };
        page_size(&p.hugepages.size, &["hugepages", "size"])?;
        if let Some(m) = &p.hugepages.mount {
            if !m.starts_with('/') {
                return Err(self.err(&["hugepages", "mount"], "mount must be an absolute path"));
            }
        }
        let mut sizes = Vec::new();
        let mut mounts = Vec::new();
        for pool in &p.hugepages.pools {
            let kb = page_size(&pool.size, &["hugepages", "pools"])?;
            if sizes.contains(&kb) {
                return Err(self.err(
                    &["hugepages", "pools"],
                    format!("two pools of {} pages (one pool per page size)", pool.size),
                ));
            }
            sizes.push(kb);
        }
        for pool in p.hugepages.pools() {
            if let Some(m) = &pool.mount {
                if !m.starts_with('/') {
                    return Err(self.err(
                        &["hugepages", "pools"],
                        format!("mount `{m}` must be an absolute path"),
                    ));
                }
                if mounts.contains(m) {
                    return Err(self.err(
                        &["hugepages", "pools"],
                        format!(
                            "two pools mounted at {m} (a hugetlbfs mount serves one page size)"
                        ),
                    ));
                }
                mounts.push(m.clone());
            }
        }
        Ok(())
    }

    /// PCIe, NIC and GPU values the hardware can take.
    /// vm.stat_interval in seconds: 0 would refresh the per-CPU statistics at every tick.
    fn validate_kernel(&self) -> Result<(), ProfileError> {
        if let Some(s) = self.profile.kernel.stat_interval {
            if !(1..=3600).contains(&s) {
                return Err(self.err(
                    &["kernel", "stat_interval"],
                    format!("stat_interval {s} is impossible (expected 1..3600 seconds)"),
                ));
            }
        }
        Ok(())
    }

    fn validate_devices(&self) -> Result<(), ProfileError> {
        let p = &self.profile;
        if !p.pcie.mrrs.is_power_of_two() || !(128..=4096).contains(&p.pcie.mrrs) {
            return Err(self.err(
                &["pcie", "mrrs"],
                format!(
                    "mrrs {} is impossible (expected 128, 256, 512, 1024, 2048 or 4096)",
                    p.pcie.mrrs
                ),
            ));
        }
        for class in p.pcie.topology_pass.iter().chain(&p.pcie.topology_fail) {
            if !["PIX", "PXB", "PHB", "NODE", "SYS"].contains(&class.as_str()) {
                return Err(self.err(
                    &["pcie"],
                    format!("topology class `{class}` (expected PIX, PXB, PHB, NODE or SYS)"),
                ));
            }
        }
        if !(68..=65535).contains(&p.nic.mtu) {
            return Err(self.err(
                &["nic", "mtu"],
                format!("mtu {} is impossible (expected 68..65535)", p.nic.mtu),
            ));
        }
        if !["ethernet", "infiniband"].contains(&p.nic.link_layer.to_ascii_lowercase().as_str()) {
            return Err(self.err(
                &["nic", "link_layer"],
                "link_layer must be ethernet or infiniband",
            ));
        }
        for arch in p.gpu.bar1_min_by_arch.keys() {
            if !crate::profile::GPU_ARCHITECTURES.contains(&arch.as_str()) {
                return Err(self.err(
                    &["gpu", "bar1_min_by_arch"],
                    format!(
                        "GPU architecture `{arch}` (expected one of {})",
                        crate::profile::GPU_ARCHITECTURES.join(", ")
                    ),
                ));
            }
        }
        for path in &p.gpu.gpudirect_paths {
            if !["peermem", "dmabuf"].contains(&path.as_str()) {
                return Err(self.err(
                    &["gpu", "gpudirect_paths"],
                    format!("GPUDirect path `{path}` (expected peermem or dmabuf)"),
                ));
            }
        }
        Ok(())
    }

    /// Where the persistent files go.
    fn validate_persist(&self) -> Result<(), ProfileError> {
        let p = &self.profile;
        if !["auto", "netplan", "networkmanager", "networkd"].contains(&p.persist.network.as_str())
        {
            return Err(self.err(
                &["persist", "network"],
                "network must be auto, netplan, networkmanager or networkd",
            ));
        }
        if !p.persist.grub_dropin.starts_with("/etc/default/grub.d/")
            || !p.persist.grub_dropin.ends_with(".cfg")
        {
            return Err(self.err(
                &["persist", "grub_dropin"],
                "grub_dropin must be a .cfg file in /etc/default/grub.d/",
            ));
        }
        Ok(())
    }

    /// Every waiver ends on a calendar date.
    fn validate_waivers(&self) -> Result<(), ProfileError> {
        for w in &self.profile.waivers {
            if parse_date(&w.until).is_none() {
                return Err(self
                    .err(
                        &["waivers"],
                        format!(
                            "waiver date `{}` is not a calendar date (expected YYYY-MM-DD)",
                            w.until
                        ),
                    )
                    .relocate(&self.layers, &w.until));
            }
        }
        Ok(())
    }

    /// The `selftest` figures: a floor is a share, a reference names a known path, a rate and
    /// its source.
    fn validate_references(&self) -> Result<(), ProfileError> {
        let st = &self.profile.selftest;
        let share = |f: f64| f > 0.0 && f <= 1.0;
        if !share(st.floor) {
            return Err(self.err(
                &["selftest", "floor"],
                format!(
                    "floor {} (expected a share of the reference in (0, 1], e.g. 0.9)",
                    st.floor
                ),
            ));
        }
        if let Some(r) = st.udp_rate_gbps {
            if !(0.0..=10_000.0).contains(&r) {
                return Err(self.err(
                    &["selftest", "udp_rate_gbps"],
                    format!("udp_rate_gbps {r} (expected 0 (unpaced) to 10000 Gb/s)"),
                ));
            }
        }
        for (k, g) in &st.reference_gbps {
            if !(REFERENCE_PATHS.contains(&k.as_str()) && *g > 0.0 && *g <= 10_000.0) {
                return Err(self.err(
                    &["selftest", "reference_gbps"],
                    format!(
                        "reference_gbps `{k}: {g}` (expected one of {} and 0 < Gb/s <= 10000)",
                        REFERENCE_PATHS.join(", ")
                    ),
                ));
            }
        }
        for r in &st.reference {
            let at = |msg: String| {
                self.err(&["selftest", "reference"], msg)
                    .relocate(&self.layers, &r.path)
            };
            if !REFERENCE_PATHS.contains(&r.path.as_str()) {
                return Err(at(format!(
                    "reference path `{}` (expected one of {})",
                    r.path,
                    REFERENCE_PATHS.join(", ")
                )));
            }
            if let Some(g) = r.gbps.filter(|g| !(*g > 0.0 && *g <= 10_000.0)) {
                return Err(at(format!(
                    "{}: gbps {g} (expected 0 < Gb/s <= 10000, or unset for the link's payload rate)",
                    r.path
                )));
            }
            if r.floor.is_some_and(|f| !share(f)) {
                return Err(at(format!(
                    "{}: floor (expected a share in (0, 1])",
                    r.path
                )));
            }
            if r.loss_pct.is_some_and(|l| !(0.0..=100.0).contains(&l)) {
                return Err(at(format!("{}: loss_pct (expected 0..100)", r.path)));
            }
            if r.message_size
                .is_some_and(|m| !(32..=(1 << 30)).contains(&m))
            {
                return Err(at(format!(
                    "{}: message_size (expected 32 bytes .. 1 GiB)",
                    r.path
                )));
            }
            if r.streams.is_some_and(|n| !(1..=64).contains(&n)) {
                return Err(at(format!("{}: streams (expected 1..64)", r.path)));
            }
            if r.source.trim().is_empty() {
                return Err(at(format!("{}: a reference needs its `source`", r.path)));
            }
        }
        Ok(())
    }

    /// Refuse ids in `required:`, `not_applicable:` and `waivers:` that `known` lacks, naming
    /// the line of the layer that has them. The engine passes the tunables' registry (a profile
    /// knows no tunable: `tunables::validate_profile`).
    pub fn check_ids(&self, known: &[&str]) -> Result<(), ProfileError> {
        let p = &self.profile;
        for id in p
            .required
            .iter()
            .chain(p.not_applicable.keys())
            .chain(p.waivers.iter().map(|w| &w.check))
        {
            if !known.contains(&id.as_str()) {
                return Err(self
                    .err(
                        &[],
                        format!("unknown check id `{id}` (known: {})", known.join(", ")),
                    )
                    .relocate(&self.layers, id));
            }
        }
        Ok(())
    }
}
