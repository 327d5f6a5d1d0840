//! What each profile key means, for `docs/profiles.md` (`daqtune profiles keys --markdown`).
//! The schema itself (the structs in this module's parent) decides which keys exist; a unit
//! test asks it for every key and fails when one has no entry here, or an entry names a key
//! the schema lacks. The defaults are not written here: the page renders them from
//! [`super::Profile::default`]. The checks that read a key come from the tunables' registry
//! (`profile_keys`), not from here.

/// One key of the profile schema. `key` is dotted; `[]` marks the fields of a list's entries
/// (`hugepages.pools[].size`).
pub struct KeyDoc {
    pub key: &'static str,
    /// The YAML type, in words.
    pub ty: &'static str,
    /// The unit of a number ("" where it has none).
    pub unit: &'static str,
    /// A value as it would be written.
    pub example: &'static str,
    /// Who reads it besides the checks the registry names ("" when only they do).
    pub used_by: &'static str,
    /// What it means, in a sentence or two.
    pub what: &'static str,
    /// The default where [`super::Profile::default`] cannot show it (an entry's field, a
    /// deprecated key); `None`: rendered from the default profile.
    pub default: Option<&'static str>,
}

const fn k(
    key: &'static str,
    ty: &'static str,
    unit: &'static str,
    example: &'static str,
    used_by: &'static str,
    what: &'static str,
) -> KeyDoc {
    KeyDoc {
        key,
        ty,
        unit,
        example,
        used_by,
        what,
        default: None,
    }
}

const fn kd(
    key: &'static str,
    ty: &'static str,
    unit: &'static str,
    example: &'static str,
    used_by: &'static str,
    what: &'static str,
    default: &'static str,
) -> KeyDoc {
    KeyDoc {
        key,
        ty,
        unit,
        example,
        used_by,
        what,
        default: Some(default),
    }
}

const QUALIFY: &str = "`qualify --level 2|3`, `selftest`";

/// Every key of the schema, in the order of the page.
pub const KEYS: &[KeyDoc] = &[
    kd("name", "string", "", "lab-dgx", "every command (the report's header)", "The profile's name; required.", "(none: required)"),
    k("description", "string", "", "\"DGX H100 lab hosts\"", "`profiles list`", "One line about the profile."),
    k("extends", "string", "", "generic-dgpu", "the loader", "A built-in profile this one builds on: its keys are merged as YAML mappings, this file's keys win (a list replaces the list)."),
    k("match.dmi_product", "list of globs", "", "[\"*IGX*\"]", "profile detection", "Patterns (`*`, `?`, any case) on /sys/class/dmi/id/product_name that select this built-in profile when no `--profile` is given."),
    k("match.dt_model", "list of globs", "", "[\"*DGX Spark*\"]", "profile detection", "Patterns on the device-tree model."),
    k("match.gpu_name", "list of globs", "", "[\"*GB10*\"]", "profile detection", "Patterns on GPU names, for platforms only recognisable by their GPU."),
    k("cpu.governor", "string", "", "performance", "", "The cpufreq governor the data cores (and every CPU) should run: performance, powersave, schedutil, ondemand, conservative, userspace."),
    k("cpu.isolated", "CPU list, or {rule, count}", "", "\"8-11\" or {rule: nic-local, count: 4}", "`selftest` (its data cores)", "The data cores, isolated from the scheduler (`isolcpus=`, and `nohz_full=`/`rcu_nocbs=` when those keys are on): a list, or a rule resolved on the host (`nic-local`: the highest cores of the NIC's NUMA node; `highest`: the host's highest), never CPU 0. Unset: nothing isolated is asked."),
    k("cpu.irqaffinity", "CPU list", "", "\"0-7\"", "", "`irqaffinity=`; unset: every CPU that is not isolated. Must not overlap `isolated`."),
    k("cpu.rcu_nocb_poll", "bool", "", "true", "", "Ask for `rcu_nocb_poll` on the kernel line."),
    k("cpu.nohz_full", "bool", "", "true", "", "Ask for `nohz_full=` on the data cores."),
    k("cpu.rcu_nocbs", "bool", "", "true", "", "Ask for `rcu_nocbs=` on the data cores."),
    k("cpu.max_idle_latency_us", "integer", "µs", "10", "", "The deepest idle state's exit latency tolerated on a data core; deeper states are reported."),
    k("hugepages.size", "page size", "", "1G", "", "Page size (`1G`, `2M`) of the one pool `size`/`count` describe; give either these or `pools`."),
    k("hugepages.count", "integer", "pages", "4", "", "Pages of `size` to reserve (0: no hugepages asked)."),
    k("hugepages.mount", "path", "", "/mnt/huge", "", "The hugetlbfs mount point `apply` mounts for the first pool (the others: `MOUNT-SIZE`); unset: apply mounts nothing."),
    k("hugepages.require_mount", "bool", "", "true", "", "The check insists on each pool's own mount point; off: any hugetlbfs mount of the page size serves (DPDK uses every one)."),
    k("hugepages.default_size", "bool", "", "true", "", "Also set `default_hugepagesz=` (the first pool's size) on the kernel line."),
    k("hugepages.pools", "list of {size, count, mount}", "", "[{size: 1G, count: 2}, {size: 2M, count: 512}]", "", "Several pools; a layer that gives `pools` replaces the `size`/`count` of the layers it extends (one layer may not give both)."),
    kd("hugepages.pools[].size", "page size", "", "2M", "", "The pool's page size.", "(none: required)"),
    kd("hugepages.pools[].count", "integer", "pages", "512", "", "Pages to reserve.", "(none: required)"),
    kd("hugepages.pools[].mount", "path", "", "/mnt/huge-2M", "", "This pool's mount point.", "`mount` for the first pool, `MOUNT-SIZE` for the others"),
    k("pcie.mrrs", "integer", "bytes", "4096", "", "Max Read Request Size of the data-path NIC functions: 128, 256, 512, 1024, 2048 or 4096."),
    k("pcie.topology_pass", "list of path classes", "", "[PIX, PXB]", "", "GPU-NIC path classes (`PIX`, `PXB`, `PHB`, `NODE`, `SYS`) that pass."),
    k("pcie.topology_fail", "list of path classes", "", "[SYS]", "", "Path classes that fail; the others warn."),
    k("pcie.allow_acs", "bool", "", "false", "nothing (parsed, not read: `apply --allow-acs` allows ACS changes)", "Kept for old profiles; has no effect."),
    k("pcie.aer_correctable_warn", "integer", "errors", "100", "", "Correctable AER errors since boot above which a device warns."),
    k("nic.mtu", "integer", "bytes", "9000", "`selftest` (its MTU)", "The data ports' MTU (68 .. 65535)."),
    k("nic.link_layer", "string", "", "ethernet", "", "The link layer the data ports must run (`ethernet`, `infiniband`)."),
    k("nic.interfaces", "list of names or PCI addresses", "", "[enp1s0f0np0, 0000:01:00.1]", "`selftest`, `check --config`", "The data-path ports by netdev, RDMA device or PCI address, any make; empty: every ConnectX physical function."),
    k("nic.addresses", "map of interface to list of a.b.c.d/len", "", "{enp1s0f0np0: [192.168.100.1/24]}", "", "Static IPv4 addresses of data ports, written into the port's network file (NetworkManager `ipv4.method=manual`, netplan `addresses:`; systemd-networkd: a warning, not written). A port not named keeps the addresses it has. Prefix 1..32, no 0.0.0.0, multicast or broadcast, at most 16 per port."),
    k("nic.cable_preflight", "bool", "", "true", "", "A missing ConnectX function is a cabling problem (DGX Spark removes its CX-7 PFs without a cable)."),
    k("nic.expected_pfs", "integer", "functions", "4", "", "How many ConnectX physical functions the platform has; fewer is reported."),
    k("nic.rings.rx", "integer or max", "descriptors", "max", "", "RX ring size of the data ports; unset: reported, not judged."),
    k("nic.rings.tx", "integer or max", "descriptors", "4096", "", "TX ring size; unset: reported, not judged."),
    k("nic.coalesce.adaptive_rx", "bool", "", "false", "", "Adaptive RX interrupt coalescing on or off; unset: reported."),
    k("nic.coalesce.adaptive_tx", "bool", "", "false", "", "Adaptive TX interrupt coalescing; unset: reported."),
    k("nic.coalesce.rx_usecs", "integer", "µs", "8", "", "RX interrupt moderation (at most 8160); unset: reported."),
    k("nic.pause.autoneg", "bool", "", "false", "", "Pause-frame autonegotiation; unset: reported."),
    k("nic.pause.rx", "bool", "", "true", "", "RX pause frames (flow control); unset: reported."),
    k("nic.pause.tx", "bool", "", "true", "", "TX pause frames; unset: reported."),
    k("nic.offloads.gro", "bool", "", "true", "", "Generic receive offload; unset: reported."),
    k("nic.offloads.lro", "bool", "", "false", "", "Large receive offload; unset: reported."),
    k("nic.offloads.header_split", "bool", "", "true", "", "TCP header/data split where the driver has it (TCP zero-copy receive needs it); unset: reported."),
    k("nic.channels.combined", "integer or data-cores", "queues", "data-cores", "", "Combined (or RX) queues of the data ports; `data-cores`: at least one per data core; unset: reported."),
    k("gpu.lock_sm_clock", "bool", "", "true", "", "Lock the SM clock at its maximum."),
    k("gpu.lock_memory_clock", "bool", "", "true", "", "Lock the memory clock at its maximum (GB10 has no memory clock domain)."),
    k("gpu.persistence", "bool", "", "true", "", "Persistence mode on."),
    k("gpu.bar1_min_mib", "integer", "MiB", "1024", "", "The BAR1 size below which a GPU fails."),
    k("gpu.bar1_recommended_mib", "integer", "MiB", "16384", "", "The BAR1 size below which a GPU warns; unset: none."),
    k("gpu.gpudirect_paths", "list of strings", "", "[peermem, dmabuf]", "", "GPUDirect paths the data path may use: `peermem`, `dmabuf`."),
    k("gpu.clock_tolerance_mhz", "integer", "MHz", "250", "", "How far below its maximum a locked clock may read and still pass (boost, rounding)."),
    k("gpu.bar1_min_by_name", "map of glob to integer", "MiB", "{\"*B200*\": 32768}", "", "Larger BAR1 minimums for GPUs whose name matches; the largest matching of these, `bar1_min_by_arch` and `bar1_min_mib` applies."),
    k("gpu.bar1_min_by_arch", "map of architecture to integer", "MiB", "{blackwell: 32768}", "", "Larger BAR1 minimums by GPU architecture (kepler .. blackwell, orin); a GPU with a smaller framebuffer is held to its framebuffer rounded up to a power of two."),
    k("sysctl.enabled", "bool", "", "true", "", "Judge the socket-path buffers (DPDK and RDMA bypass them)."),
    k("sysctl.values", "map of sysctl name to value", "", "{net.core.rmem_max: \"268435456\"}", "", "Minimum values by dotted sysctl name; a triple (`tcp_rmem`) compares field by field. A layer's map merges into the one it extends."),
    k("kernel.thp", "always, madvise or never", "", "madvise", "", "/sys/kernel/mm/transparent_hugepage/enabled; unset: not judged."),
    k("kernel.thp_defrag", "always, defer, defer+madvise, madvise or never", "", "madvise", "", "/sys/kernel/mm/transparent_hugepage/defrag; unset: not judged."),
    k("kernel.numa_balancing", "bool", "", "false", "", "`kernel.numa_balancing`; unset: not judged."),
    k("kernel.watchdog", "off or cpumask", "", "cpumask", "", "Lockup detectors off everywhere (`off`) or kept off the data cores (`cpumask`); unset: not judged."),
    k("kernel.nmi_watchdog", "bool", "", "false", "", "`kernel.nmi_watchdog`; unset: not judged."),
    k("kernel.timer_migration", "bool", "", "false", "", "`kernel.timer_migration`; unset: not judged."),
    k("kernel.stat_interval", "integer", "s", "10", "", "`vm.stat_interval` at least this; unset: not judged."),
    k("kernel.ksm", "bool", "", "false", "", "ksmd running (true) or stopped (false); unset: not judged."),
    k("selftest.message_size", "integer", "bytes", "8192", QUALIFY, "Message size of the socket and DPDK self-tests (32 .. 1048576)."),
    k("selftest.max_udp_loss_pct", "number", "%", "0.1", QUALIFY, "UDP loss tolerated at the paced rate."),
    kd("selftest.min_tcp_gbps", "number", "Gb/s", "(deprecated)", QUALIFY, "Deprecated. Read with a note (file:line) and mapped onto the references: a rate above 0 becomes `{path: socket.tcp, gbps: RATE, floor: 1.0}` in `selftest.reference`; 0 sets nothing. Never printed.", "(deprecated)"),
    k("selftest.udp_rate_gbps", "number", "Gb/s", "25", QUALIFY, "UDP pacing; unset: the payload rate of the port's link at the MTU (1 Gb/s where the link has no speed); 0: unpaced."),
    kd("selftest.reference_gbps", "map of path to number", "Gb/s", "(deprecated)", QUALIFY, "Deprecated. Read with a note (file:line) and mapped onto shapeless `selftest.reference` entries (`{path: PATH, gbps: RATE}`). Never printed.", "(deprecated)"),
    k("selftest.floor", "number in (0, 1]", "share", "0.9", QUALIFY, "The share of its reference a self-test result must reach; below it the result fails (the one floor mechanism)."),
    k("selftest.reference", "list of references", "", "[{path: socket.tcp, message_size: 8192, streams: 4, gbps: 97.2, source: \"seed 002\"}]", QUALIFY, "What a tuned host of this platform reaches, per engine, mode and message shape, with the source of each figure; capped at the port's line rate."),
    kd("selftest.reference[].path", "string", "", "socket.tcp", QUALIFY, "`engine.mode`: socket.tcp, socket.udp, dpdk.raw, rdma.send, rdma.write.", "(none: required)"),
    kd("selftest.reference[].message_size", "integer", "bytes", "8192", QUALIFY, "The message size the figure was measured with.", "any size"),
    kd("selftest.reference[].streams", "integer", "streams", "4", QUALIFY, "Parallel streams; `qualify` runs the socket engine with this many.", "any"),
    kd("selftest.reference[].gbps", "number", "Gb/s", "97.2", QUALIFY, "The payload rate.", "the payload rate of the port's link at the MTU"),
    kd("selftest.reference[].loss_pct", "number", "%", "51", QUALIFY, "Loss the reference run itself saw (an unpaced UDP figure).", "unset"),
    kd("selftest.reference[].floor", "number in (0, 1]", "share", "0.8", QUALIFY, "This figure's own floor.", "`selftest.floor`"),
    kd("selftest.reference[].source", "string", "", "\"seed 002: TCP, 8 KB x 4 pairs\"", QUALIFY, "Where the figure comes from; required.", "(none: required)"),
    k("persist.grub_dropin", "path", "", "/etc/default/grub.d/99-daqtune.cfg", "`apply`", "The GRUB drop-in `apply` writes the kernel arguments to."),
    k("persist.network", "auto, netplan, networkmanager or networkd", "", "auto", "`apply`", "Which network stack keeps the data ports' settings; `auto`: the one that manages the port."),
    k("persist.nm_prefix", "string", "", "daqiri", "`apply`", "Name prefix of the NetworkManager connections `apply` writes."),
    k("not_applicable", "map of check id to reason", "", "{kernel.cmdline: \"CI container\"}", "every check", "Checks that do not apply here: each reports `n/a` with the reason."),
    k("required", "list of check ids", "", "[kernel.cmdline, hugepages]", "`check --gate`, `qualify`", "Checks that must end in pass or warn for the gate (skip and error fail it)."),
    k("waivers", "list of waivers", "", "[{check: pcie.aer, until: 2027-01-31, reason: \"RMA pending\"}]", "every check", "Known failures accepted until a date: a waived `fail` becomes `warn`, saying so; an expired waiver is named and not applied; an `error` is never waived."),
    kd("waivers[].check", "check id", "", "pcie.aer", "every check", "The check waived.", "(none: required)"),
    kd("waivers[].subject", "string", "", "0000:01:00.0", "every check", "Only verdicts whose subject contains this text.", "every subject"),
    kd("waivers[].until", "date", "", "2027-01-31", "every check", "The last day (YYYY-MM-DD, UTC) the waiver applies.", "(none: required)"),
    kd("waivers[].reason", "string", "", "\"RMA pending\"", "every check", "Why; shown with the verdict.", "(none: required)"),
];

/// The entry of `key`.
pub fn doc(key: &str) -> Option<&'static KeyDoc> {
    KEYS.iter().find(|d| d.key == key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    const PROBE: &str = "zz_probe_key";

    /// The names a struct at `path` accepts, asked of the schema itself: a mapping there with
    /// one unknown key makes `deny_unknown_fields` list every known one. `None`: no struct
    /// there (a leaf, a map, an enum).
    fn fields_at(path: &[String], inner: serde_yaml_ng::Value) -> Option<Vec<String>> {
        use serde_yaml_ng::{Mapping, Value};
        let mut v = inner;
        for seg in path.iter().rev() {
            v = if seg == "[]" {
                Value::Sequence(vec![v])
            } else {
                let mut m = Mapping::new();
                m.insert(Value::String(seg.clone()), v);
                Value::Mapping(m)
            };
        }
        let e = serde_yaml_ng::from_value::<super::super::Profile>(v).err()?;
        let msg = e.to_string();
        let rest = msg
            .split_once(&format!("unknown field `{PROBE}`, expected"))?
            .1;
        Some(
            rest.split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_string)
                .collect(),
        )
    }

    fn probe() -> serde_yaml_ng::Value {
        let mut m = serde_yaml_ng::Mapping::new();
        m.insert(PROBE.into(), 1.into());
        serde_yaml_ng::Value::Mapping(m)
    }

    /// Every key of the schema, walked from the top: structs are entered, lists of structs
    /// are listed themselves and entered as `KEY[]`.
    fn schema_keys() -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        let mut todo: Vec<Vec<String>> = vec![vec![]];
        while let Some(path) = todo.pop() {
            let fields = fields_at(&path, probe()).expect("a struct");
            for f in fields {
                let mut p = path.clone();
                p.push(f);
                if fields_at(&p, probe()).is_some() {
                    todo.push(p);
                    continue;
                }
                let dotted = p.join(".").replace(".[]", "[]");
                let mut item = p.clone();
                item.push("[]".into());
                if fields_at(&item, probe()).is_some() {
                    todo.push(item);
                }
                out.insert(dotted);
            }
        }
        out
    }

    /// A key added to the schema without its entry here (or an entry for a key that went)
    /// fails: docs/profiles.md is generated from these entries.
    #[test]
    fn every_schema_key_has_its_entry() {
        let schema = schema_keys();
        // The walk itself reaches nested structs and list entries.
        for k in [
            "nic.rings.rx",
            "hugepages.pools[].mount",
            "selftest.reference[].source",
            "waivers[].until",
            "cpu.isolated",
        ] {
            assert!(schema.contains(k), "{k} not found by the walk: {schema:?}");
        }
        let documented: BTreeSet<String> = KEYS.iter().map(|d| d.key.to_string()).collect();
        let missing: Vec<&String> = schema.difference(&documented).collect();
        let stale: Vec<&String> = documented.difference(&schema).collect();
        assert!(
            missing.is_empty(),
            "profile keys without an entry in engine/src/model/profile/keys.rs: {missing:?}"
        );
        assert!(
            stale.is_empty(),
            "entries for keys the schema lacks: {stale:?}"
        );
        assert_eq!(documented.len(), KEYS.len(), "a key documented twice");
        for d in KEYS {
            assert!(
                !d.ty.is_empty() && !d.what.is_empty() && !d.example.is_empty(),
                "{}",
                d.key
            );
        }
    }
}
