//! The rules no type can express, each error located in the layer that set the key.

use super::{
    merge::locate, parse_date, ChannelCount, CoreSpec, LoadedProfile, ProfileError, ReferenceRate,
    RingSize, REFERENCE_PATHS,
};
use daqtune_probe::cpulist::parse_cpulist;

/// The most memory one hugepage pool may ask for: 64 TiB, the physical address space of
/// x86-64 with 4-level paging (46 bits) and more than any host daqtune targets holds. What
/// this host can hold is bounded again when planning (docs/checks/hugepages.md).
pub const MAX_POOL_BYTES: u128 = 64 << 40;
/// The most descriptors a ring may ask for: more than any driver offers (mlx5 8192, ice 8160,
/// virtio 32768); the port's own maximum (`ethtool -g`) is checked when planning.
pub const MAX_RING: u32 = 65536;
/// The longest interrupt moderation a profile may ask for, in µs: 8160 µs is the longest ITR
/// Intel's drivers accept (i40e/ice `ICE_ITR_MAX`) and within mlx5's CQ period; at 100 Gb/s
/// an 8192-entry ring of 9000-byte frames fills in 5.9 ms, so longer only drops packets.
pub const MAX_RX_USECS: u32 = 8160;
/// The most queues a profile may ask for (ethtool's channel counts are u32; no NIC has more).
pub const MAX_CHANNELS: u32 = 4096;
/// A self-test message: the payload header (32 bytes) at least, the peer's 1 MiB at most.
pub const MESSAGE_SIZE: std::ops::RangeInclusive<u32> = 32..=(1 << 20);

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
        self.validate_selftest()?;
        self.validate_references()?;
        self.validate_waivers()?;
        self.validate_strings()
    }

    /// No string of any layer carries a control character or a bidirectional override: they
    /// reach file names, files and the terminal. Free text (descriptions, reasons, sources)
    /// may span lines.
    fn validate_strings(&self) -> Result<(), ProfileError> {
        for (file, src) in &self.layers {
            let Ok(v) = serde_yaml_ng::from_str::<serde_yaml_ng::Value>(src) else {
                continue;
            };
            let mut path = Vec::new();
            if let Some((at, msg)) = bad_string(&v, &mut path) {
                let keys: Vec<&str> = at.iter().map(String::as_str).collect();
                return Err(ProfileError::at(file, locate(src, &keys), msg));
            }
        }
        Ok(())
    }

    /// The `selftest` thresholds: finite, in their range.
    fn validate_selftest(&self) -> Result<(), ProfileError> {
        let st = &self.profile.selftest;
        if !MESSAGE_SIZE.contains(&st.message_size) {
            return Err(self.err(
                &["selftest", "message_size"],
                format!(
                    "message_size {} (expected {} .. {} bytes: the 32-byte header at least)",
                    st.message_size,
                    MESSAGE_SIZE.start(),
                    MESSAGE_SIZE.end()
                ),
            ));
        }
        // `contains` is false for NaN, and the upper bounds keep infinity out.
        if !(0.0..=100.0).contains(&st.max_udp_loss_pct) {
            return Err(self.err(
                &["selftest", "max_udp_loss_pct"],
                format!(
                    "max_udp_loss_pct {} (expected a percentage 0 .. 100)",
                    st.max_udp_loss_pct
                ),
            ));
        }
        if let Some(m) = st.min_tcp_gbps.filter(|m| !(0.0..=10_000.0).contains(m)) {
            return Err(self.err(
                &["selftest", "min_tcp_gbps"],
                format!("min_tcp_gbps {m} (expected 0 (no minimum) .. 10000 Gb/s)"),
            ));
        }
        Ok(())
    }

    /// One floor mechanism (issue 46): the legacy `selftest.min_tcp_gbps` and
    /// `selftest.reference_gbps` become `selftest.reference` entries, each said in
    /// [`LoadedProfile::deprecations`] with where it was written and what to write instead.
    /// `reference_gbps` entries were always appended as shapeless references, so that mapping
    /// is exact; `min_tcp_gbps: X` becomes a socket.tcp reference of X Gb/s with floor 1.0,
    /// which, like every reference, is compared only where the link has a speed. Called after
    /// [`LoadedProfile::validate`], which checked the legacy values' ranges.
    pub(super) fn map_legacy_floor(&mut self) {
        let st = &mut self.profile.selftest;
        let min_tcp = st.min_tcp_gbps.take();
        let by_path = st.reference_gbps.take();
        if let Some(x) = min_tcp {
            let (file, at) = self.where_is(&["selftest", "min_tcp_gbps"]);
            if x > 0.0 {
                self.profile.selftest.reference.push(ReferenceRate {
                    path: "socket.tcp".into(),
                    message_size: None,
                    streams: None,
                    gbps: Some(x),
                    loss_pct: None,
                    floor: Some(1.0),
                    source: format!("selftest.min_tcp_gbps {x} ({file}, deprecated)"),
                });
                self.deprecations.push(format!(
                    "{at}: `selftest.min_tcp_gbps: {x}` is deprecated (one floor mechanism: `selftest.floor` x `selftest.reference`); read as a socket.tcp reference of {x} Gb/s with floor 1.0, compared where the link has a speed like every reference; write instead `selftest: {{reference: [{{path: socket.tcp, gbps: {x}, floor: 1.0, source: \"...\"}}]}}`"
                ));
            } else {
                self.deprecations.push(format!(
                    "{at}: `selftest.min_tcp_gbps: {x}` is deprecated and set no minimum: remove it (`selftest.floor` x `selftest.reference` judge the rate)"
                ));
            }
        }
        if let Some(map) = by_path.filter(|m| !m.is_empty()) {
            let (file, at) = self.where_is(&["selftest", "reference_gbps"]);
            let mut written = Vec::new();
            for (path, gbps) in map {
                written.push(format!("{{path: {path}, gbps: {gbps}, source: \"...\"}}"));
                self.profile.selftest.reference.push(ReferenceRate {
                    path: path.clone(),
                    message_size: None,
                    streams: None,
                    gbps: Some(gbps),
                    loss_pct: None,
                    floor: None,
                    source: format!("selftest.reference_gbps {path} ({file}, deprecated)"),
                });
            }
            self.deprecations.push(format!(
                "{at}: `selftest.reference_gbps` is deprecated (one floor mechanism: `selftest.floor` x `selftest.reference`); read as shapeless references; write instead `selftest: {{reference: [{}]}}`",
                written.join(", ")
            ));
        }
    }

    /// The layer that sets a key, and `file:line:column` (or `file` where no line is found).
    fn where_is(&self, path: &[&str]) -> (String, String) {
        let (f, pos) = self.locate_key(path);
        let at = match pos {
            Some((l, c)) => format!("{f}:{l}:{c}"),
            None => f.clone(),
        };
        (f, at)
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
                if r.count > daqtune_probe::cpulist::NR_CPUS_MAX {
                    return Err(self.err(
                        &["cpu", "isolated", "count"],
                        format!(
                            "count {} is more CPUs than a host has (at most {})",
                            r.count,
                            daqtune_probe::cpulist::NR_CPUS_MAX
                        ),
                    ));
                }
                None
            }
            None => None,
        };
        if p.cpu.max_idle_latency_us > 100_000 {
            return Err(self.err(
                &["cpu", "max_idle_latency_us"],
                format!(
                    "max_idle_latency_us {} (expected 0 .. 100000 µs: no idle state takes longer to leave)",
                    p.cpu.max_idle_latency_us
                ),
            ));
        }
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
        let single_kb = page_size(&p.hugepages.size, &["hugepages", "size"])?;
        let bounded = |count: u64, kb: u64, size: &str, at: &[&str]| {
            if u128::from(count) * u128::from(kb) * 1024 > MAX_POOL_BYTES {
                return Err(self.err(
                    at,
                    format!(
                        "{count} x {size} pages is more memory than a host holds (at most 64 TiB a pool)"
                    ),
                ));
            }
            Ok(())
        };
        if p.hugepages.pools.is_empty() {
            bounded(
                p.hugepages.count,
                single_kb,
                &p.hugepages.size,
                &["hugepages", "count"],
            )?;
        }
        if let Some(m) = &p.hugepages.mount {
            mount_point(m).map_err(|why| self.err(&["hugepages", "mount"], why.to_string()))?;
        }
        let mut sizes = Vec::new();
        let mut mounts = Vec::new();
        for pool in &p.hugepages.pools {
            let kb = page_size(&pool.size, &["hugepages", "pools"])?;
            bounded(pool.count, kb, &pool.size, &["hugepages", "pools"])
                .map_err(|e| e.relocate(&self.layers, &format!("count: {}", pool.count)))?;
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
                mount_point(m).map_err(|why| {
                    self.err(&["hugepages", "pools"], why.to_string())
                        // The text up to an escape is what the source shows.
                        .relocate(&self.layers, m.split(char::is_control).next().unwrap_or(m))
                })?;
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
        for (port, addrs) in &p.nic.addresses {
            if daqtune_units::validate::interface_name(port).is_err() {
                return Err(self.err(
                    &["nic", "addresses"],
                    format!("`{port}` is not an interface name (1-15 characters, no `/` or space)"),
                ));
            }
            if addrs.len() > 16 {
                return Err(self.err(
                    &["nic", "addresses", port],
                    format!("{} addresses for {port} (at most 16)", addrs.len()),
                ));
            }
            for a in addrs {
                if daqtune_units::network::ipv4_cidr(a).is_err() {
                    return Err(self.err(
                        &["nic", "addresses", port],
                        format!("`{a}` is not an IPv4 address with its prefix length (expected a.b.c.d/len, len 1..32)"),
                    ));
                }
            }
        }
        if let Some(n) = p.nic.expected_pfs.filter(|n| !(1..=256).contains(n)) {
            return Err(self.err(
                &["nic", "expected_pfs"],
                format!("expected_pfs {n} (expected 1 .. 256 physical functions)"),
            ));
        }
        for iface in &p.nic.interfaces {
            if let Err(why) = interface_ref(iface) {
                return Err(self
                    .err(
                        &["nic", "interfaces"],
                        format!("interface {iface:?}: {why}"),
                    )
                    .relocate(&self.layers, iface));
            }
        }
        for (key, ring) in [("rx", p.nic.rings.rx), ("tx", p.nic.rings.tx)] {
            if let Some(RingSize::Count(n)) = ring {
                if !(1..=MAX_RING).contains(&n) {
                    return Err(self.err(
                        &["nic", "rings", key],
                        format!(
                            "{key} ring of {n} descriptors (expected 1 .. {MAX_RING}, or `max`)"
                        ),
                    ));
                }
            }
        }
        if let Some(u) = p.nic.coalesce.rx_usecs.filter(|u| *u > MAX_RX_USECS) {
            return Err(self.err(
                &["nic", "coalesce", "rx_usecs"],
                format!("rx_usecs {u} (expected 0 .. {MAX_RX_USECS} µs; longer moderation only overruns the ring)"),
            ));
        }
        if let Some(ChannelCount::Count(n)) = p.nic.channels.combined {
            if !(1..=MAX_CHANNELS).contains(&n) {
                return Err(self.err(
                    &["nic", "channels", "combined"],
                    format!("combined {n} queues (expected 1 .. {MAX_CHANNELS}, or `data-cores`)"),
                ));
            }
        }
        // 64 TiB in MiB: no BAR maps more than the physical address space.
        const MAX_BAR_MIB: u64 = 64 << 20;
        let bars = [
            ("bar1_min_mib", Some(p.gpu.bar1_min_mib)),
            ("bar1_recommended_mib", p.gpu.bar1_recommended_mib),
        ];
        for (key, v) in bars {
            if let Some(v) = v.filter(|v| *v > MAX_BAR_MIB) {
                return Err(self.err(
                    &["gpu", key],
                    format!("{key} {v} (expected at most {MAX_BAR_MIB} MiB)"),
                ));
            }
        }
        for (name, v) in &p.gpu.bar1_min_by_name {
            if *v > MAX_BAR_MIB {
                return Err(self
                    .err(
                        &["gpu", "bar1_min_by_name"],
                        format!(
                            "bar1_min_by_name `{name}: {v}` (expected at most {MAX_BAR_MIB} MiB)"
                        ),
                    )
                    .relocate(&self.layers, name));
            }
        }
        if p.gpu.clock_tolerance_mhz > 5000 {
            return Err(self.err(
                &["gpu", "clock_tolerance_mhz"],
                format!(
                    "clock_tolerance_mhz {} (expected 0 .. 5000 MHz: no GPU clock is faster)",
                    p.gpu.clock_tolerance_mhz
                ),
            ));
        }
        for arch in p.gpu.bar1_min_by_arch.keys() {
            if !crate::model::profile::GPU_ARCHITECTURES.contains(&arch.as_str()) {
                return Err(self.err(
                    &["gpu", "bar1_min_by_arch"],
                    format!(
                        "GPU architecture `{arch}` (expected one of {})",
                        crate::model::profile::GPU_ARCHITECTURES.join(", ")
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
        // One file name directly in grub.d: update-grub sources `grub.d/*.cfg`, and a name with
        // `/` or `..` would write outside it (and outside --root).
        let name = p.persist.grub_dropin.strip_prefix("/etc/default/grub.d/");
        if let Some(why) = match name {
            None => Some("must be in /etc/default/grub.d/".to_string()),
            Some(n) if !n.ends_with(".cfg") || n.len() <= 4 => {
                Some("must be a .cfg file (update-grub sources grub.d/*.cfg)".into())
            }
            Some(n) => file_name(n).err(),
        } {
            return Err(self.err(
                &["persist", "grub_dropin"],
                format!(
                    "grub_dropin {:?} {why} (expected a file name like /etc/default/grub.d/99-daqtune.cfg)",
                    p.persist.grub_dropin
                ),
            ));
        }
        // The prefix names NetworkManager connection files (`<prefix>-<port>.nmconnection`).
        let prefix = &p.persist.nm_prefix;
        if prefix.is_empty()
            || prefix.len() > 32
            || !prefix
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(self.err(
                &["persist", "nm_prefix"],
                format!("nm_prefix {prefix:?} (expected 1 to 32 letters, digits, `-` and `_`: it names a file)"),
            ));
        }
        for (key, want) in &p.sysctl.values {
            let at = |why: String| {
                self.err(&["sysctl", "values"], why)
                    .relocate(&self.layers, key)
            };
            let name_ok = key.split('.').count() >= 2
                && key.split('.').all(|seg| {
                    !seg.is_empty()
                        && seg
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
                });
            if !name_ok {
                return Err(at(format!(
                    "sysctl name {key:?} (expected dotted words like net.core.rmem_max: it names a file under /proc/sys)"
                )));
            }
            let fields: Vec<&str> = want.split_whitespace().collect();
            if fields.is_empty()
                || fields.len() > 3
                || fields.iter().any(|f| f.parse::<u64>().is_err())
            {
                return Err(at(format!(
                    "{key}: {want:?} (expected a non-negative integer, or up to three like \"4096 87380 268435456\")"
                )));
            }
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
        for (k, g) in st.reference_gbps.iter().flatten() {
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

/// A hugetlbfs mount point that is not one ([`mount_point`]).
#[derive(Debug, thiserror::Error)]
#[error("mount {mount:?}: {source} (expected an absolute path like /mnt/huge)")]
struct MountPointError {
    mount: String,
    source: daqtune_units::validate::InvalidValue,
}

/// A hugetlbfs mount point: absolute, no `.`/`..`, letters, digits and `_.+-` (what its
/// `.mount` unit's name can carry).
fn mount_point(m: &str) -> Result<(), MountPointError> {
    daqtune_units::validate::abs_path(m)
        .map(|_| ())
        .map_err(|source| MountPointError {
            mount: m.to_string(),
            source,
        })
}

/// One file name: no directory part, no leading dot, letters, digits and `_.+-`.
fn file_name(n: &str) -> Result<(), String> {
    if n.starts_with('.') {
        return Err("must not start with `.`".into());
    }
    if let Some(c) = n
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '+')))
    {
        return Err(format!(
            "has {c:?} (a file name of letters, digits and `_.+-`, in that directory)"
        ));
    }
    Ok(())
}

/// A data-path interface as a profile names it: an interface name or a PCI address. The host's
/// own names are judged when found; these only have to be names at all.
fn interface_ref(s: &str) -> Result<(), String> {
    if s.is_empty() || s.len() > 64 {
        return Err("expected an interface name or a PCI address".into());
    }
    if s == "." || s == ".." || s.contains('/') {
        return Err("`.`, `..` and `/` are in no interface name".into());
    }
    if s.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("whitespace and control characters are in no interface name".into());
    }
    Ok(())
}

/// Keys whose text is prose: it may span lines.
const FREE_TEXT: &[&str] = &["description", "reason", "source"];

/// The first string (key path, message) with a control character or a bidirectional
/// override. Mapping keys count as strings too.
fn bad_string(v: &serde_yaml_ng::Value, path: &mut Vec<String>) -> Option<(Vec<String>, String)> {
    use serde_yaml_ng::Value;
    let check = |s: &str, prose: bool| {
        s.chars()
            .find(|c| {
                (c.is_control() && !(prose && matches!(c, '\n' | '\t')))
                    || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
            })
            .map(|c| format!("{:?} has the control character U+{:04X}", s, c as u32))
    };
    match v {
        Value::String(s) => {
            let prose = path.last().is_some_and(|k| FREE_TEXT.contains(&k.as_str()))
                || path.first().is_some_and(|k| k == "not_applicable");
            check(s, prose).map(|m| (path.clone(), m))
        }
        Value::Sequence(items) => items.iter().find_map(|it| bad_string(it, path)),
        Value::Mapping(m) => {
            for (k, it) in m {
                let key = match k {
                    Value::String(s) => s.clone(),
                    other => serde_yaml_ng::to_string(other)
                        .unwrap_or_default()
                        .trim()
                        .to_string(),
                };
                if let Some(msg) = check(&key, false) {
                    return Some((path.clone(), format!("key {msg}")));
                }
                path.push(key);
                let found = bad_string(it, path);
                path.pop();
                if found.is_some() {
                    return found;
                }
            }
            None
        }
        Value::Tagged(t) => bad_string(&t.value, path),
        _ => None,
    }
}
