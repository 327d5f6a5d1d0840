//! `nic.driver`, `nic.link-layer`, `nic.link`: the ConnectX ports of the data path, found from
//! the PCI tree (vendor 0x15b3, class 0x0200/0x0207) without ibdev2netdev. Observations;
//! `nic.mtu` has a module of its own.

use crate::model::context::nics::{
    data_path_nics, data_path_nics_or_skip, no_nic_reason, pci_or_skip,
};
use crate::model::context::Context;
use crate::model::tunable::Tunable;
use crate::model::verdict::{Area, Verdict};
use daqtune_probe::pci::nic::NicFunction;

pub const DRIVER: Tunable = Tunable {
    id: "nic.driver",
    area: Area::Nic,
    title: "ConnectX drivers, verbs device nodes and user-space provider",
    aliases: &["driver", "ofed"],
    doc: include_str!("../../../docs/checks/nic.driver.md"),
    needs_root: false,
    profile_keys: &[],
    check: run_driver,
    planner: None,
};

pub const LINK_LAYER: Tunable = Tunable {
    id: "nic.link-layer",
    area: Area::Nic,
    title: "ConnectX ports in the profile's link layer (Ethernet)",
    aliases: &["link-layer", "link_layer"],
    doc: include_str!("../../../docs/checks/nic.link-layer.md"),
    needs_root: false,
    profile_keys: &["nic.link_layer", "nic.interfaces"],
    check: run_link_layer,
    planner: None,
};

pub const LINK: Tunable = Tunable {
    id: "nic.link",
    area: Area::Nic,
    title: "Carrier and speed of the data-path ports; ports in other namespaces",
    aliases: &["link", "carrier"],
    doc: include_str!("../../../docs/checks/nic.link.md"),
    needs_root: false,
    profile_keys: &["nic.interfaces", "nic.expected_pfs", "nic.cable_preflight"],
    check: run_link,
    planner: None,
};

/// The data ports the profile names that are not ConnectX: the ConnectX/RDMA-only checks say
/// `n/a` for them, with the reason.
fn other_ports<'f>(ctx: &Context, f: &'f daqtune_probe::pci::PciFacts) -> Vec<&'f NicFunction> {
    if ctx.profile.profile.nic.interfaces.is_empty() {
        return Vec::new();
    }
    data_path_nics(ctx, f)
        .into_iter()
        .filter(|n| !n.connectx)
        .collect()
}

fn not_connectx(n: &NicFunction) -> String {
    format!(
        "{} ({:04x}:{:04x}, driver {}) is not a ConnectX",
        n.model,
        n.vendor,
        n.device,
        n.driver.as_deref().unwrap_or("none")
    )
}

fn run_driver(ctx: &Context) -> Vec<Verdict> {
    const ID: &str = "nic.driver";
    let f = match pci_or_skip(ctx, ID) {
        Ok(f) => f,
        Err(v) => return v,
    };
    // Named data ports of another make: the mlx5 stack is not theirs to need.
    let mut out: Vec<Verdict> = other_ports(ctx, f)
        .into_iter()
        .map(|n| {
            Verdict::na(
                ID,
                n.label(),
                format!(
                    "{}: the mlx5 drivers, verbs device nodes and provider this check judges are ConnectX/RDMA requirements",
                    not_connectx(n)
                ),
            )
        })
        .collect();
    let cx: Vec<&NicFunction> = f.nics.iter().filter(|n| n.connectx).collect();
    if cx.is_empty() {
        if out.is_empty() {
            out.push(Verdict::skip(ID, "host", no_nic_reason(ctx)));
        }
        return out;
    }
    // Problems get a verdict each; a healthy stack is one line.
    let mut good = Vec::new();
    let mods = ctx.modules();
    let need = ["mlx5_core", "mlx5_ib", "ib_core", "ib_uverbs"];
    if !mods.readable {
        out.push(Verdict::skip(
            ID,
            "modules",
            "/proc/modules is not readable; cannot tell which drivers are loaded",
        ));
    } else {
        let missing: Vec<&str> = need
            .iter()
            .copied()
            .filter(|m| !ctx.module_present(m))
            .collect();
        if missing.is_empty() {
            good.push(format!("{} loaded", need.join(", ")));
        } else {
            out.push(
                Verdict::fail(ID, "modules", format!("not loaded: {}", missing.join(", ")))
                    .expected(need.join(" "))
                    .fix(format!(
                        "sudo modprobe -a {}   # not installed? `sudo apt install doca-ofed` (DOCA) or rdma-core, then reboot",
                        missing.iter().map(|m| daqtune_probe::text::shell_quote(m)).collect::<Vec<_>>().join(" ")
                    )),
            );
        }
    }
    let uverbs: Vec<String> = ctx
        .read_dir("/dev/infiniband")
        .unwrap_or_default()
        .iter()
        .filter(|n| n.starts_with("uverbs"))
        .cloned()
        .collect();
    if uverbs.is_empty() {
        out.push(
            Verdict::fail(ID, "/dev/infiniband", "no /dev/infiniband/uverbs* device nodes: RDMA and DPDK's mlx5 driver cannot open the NIC")
                .fix("sudo modprobe ib_uverbs mlx5_ib"),
        );
    } else {
        good.push(format!("{} uverbs node(s)", uverbs.len()));
    }
    let provider = ctx.exists("/etc/libibverbs.d/mlx5.driver")
        || [
            "/usr/lib/x86_64-linux-gnu",
            "/usr/lib/aarch64-linux-gnu",
            "/usr/lib64",
            "/usr/lib",
        ]
        .iter()
        .any(|d| {
            ctx.read_dir(&format!("{d}/libibverbs"))
                .unwrap_or_default()
                .iter()
                .any(|n| n.starts_with("libmlx5"))
        });
    if provider {
        good.push("mlx5 verbs provider installed".into());
    } else {
        out.push(
            Verdict::warn(ID, "verbs provider", "the user-space mlx5 verbs provider (libmlx5) was not found: ibverbs applications will report no devices")
                .fix("sudo apt install ibverbs-providers libibverbs1 rdma-core"),
        );
    }
    let mut bound = Vec::new();
    let mut fws = Vec::new();
    for n in cx.iter().filter(|n| !n.is_vf) {
        match n.driver.as_deref() {
            Some("mlx5_core") => {
                bound.push(n.addr.to_string());
                for fw in n.rdma.iter().filter_map(|r| r.fw_ver.clone()) {
                    if !fws.contains(&fw) {
                        fws.push(fw);
                    }
                }
            }
            other => out.push(
                Verdict::fail(
                    ID,
                    n.label(),
                    format!("{} is bound to {} instead of mlx5_core", n.model, other.unwrap_or("no driver")),
                )
                .observed(other.unwrap_or("none"))
                .expected("mlx5_core")
                .fix(format!(
                    "sudo modprobe mlx5_core; if another driver holds it: echo {} | sudo tee /sys/bus/pci/drivers/{}/unbind",
                    n.addr,
                    other.map(daqtune_probe::text::shell_quote).unwrap_or("DRIVER".into())
                )),
            ),
        }
    }
    if !bound.is_empty() {
        let fw = if fws.is_empty() {
            "firmware unknown (no RDMA device)".to_string()
        } else {
            format!("firmware {}", fws.join(", "))
        };
        good.push(format!("{} PF(s) on mlx5_core, {fw}", bound.len()));
    }
    if !good.is_empty() {
        out.push(Verdict::pass(ID, "ConnectX stack", good.join("; ")).observed(bound.join(" ")));
    }
    out
}

/// The link layer of every RDMA port of a capture that holds RDMA devices but not the PCI
/// functions and interfaces they belong to (an `ibstat` / `ibv_devinfo` paste): which are data
/// ports is not in the capture, so each is judged, and the verdict says where it came from.
fn rdma_only_link_layer(ctx: &Context, want_label: &str, want_mlx: &str) -> Vec<Verdict> {
    const ID: &str = "nic.link-layer";
    let devs = daqtune_probe::pci::nic::read_class_rdma(ctx.facts().host);
    let mut out = Vec::new();
    for r in &devs {
        for p in &r.ports {
            let subject = format!("{}/{}", r.name, p.port);
            let from = "(RDMA port of the capture; its PCI function and interfaces are not in it)";
            match p.link_layer.as_deref() {
                Some(ll) if ll.eq_ignore_ascii_case(want_label) => out.push(
                    Verdict::pass(ID, subject, format!("link layer {ll} {from}")).observed(ll),
                ),
                Some(ll) => out.push(
                    Verdict::fail(
                        ID,
                        subject,
                        format!("port runs {ll}; the data path needs {want_label} {from}"),
                    )
                    .observed(ll)
                    .expected(want_label)
                    .fix(format!(
                        "sudo mlxconfig -d {} set LINK_TYPE_P{}={want_mlx}   # then reboot",
                        daqtune_probe::text::shell_quote(&r.name),
                        p.port
                    )),
                ),
                None => out.push(Verdict::skip(ID, subject, "link_layer not in this capture")),
            }
        }
    }
    if out.is_empty() {
        out.push(Verdict::skip(
            ID,
            "host",
            "not in this capture (no RDMA port in it)",
        ));
    }
    out
}

fn run_link_layer(ctx: &Context) -> Vec<Verdict> {
    const ID: &str = "nic.link-layer";
    if !crate::model::capture::holds_needs(ctx.facts(), ID) {
        let want = ctx.profile.profile.nic.link_layer.to_ascii_lowercase();
        return if want == "infiniband" {
            rdma_only_link_layer(ctx, "InfiniBand", "IB")
        } else {
            rdma_only_link_layer(ctx, "Ethernet", "ETH")
        };
    }
    let nics = match data_path_nics_or_skip(ctx, ID) {
        Ok(n) => n,
        Err(v) => return v,
    };
    let want = ctx.profile.profile.nic.link_layer.to_ascii_lowercase();
    let (want_label, want_mlx) = if want == "infiniband" {
        ("InfiniBand", "IB")
    } else {
        ("Ethernet", "ETH")
    };
    let mut out = Vec::new();
    for n in nics {
        if n.rdma.is_empty() && !n.connectx {
            out.push(Verdict::na(
                ID,
                n.label(),
                format!(
                    "{} and has no RDMA device: the RoCE/InfiniBand link layer is a ConnectX setting (mlxconfig LINK_TYPE)",
                    not_connectx(n)
                ),
            ));
            continue;
        }
        if n.rdma.is_empty() {
            out.push(Verdict::skip(
                ID,
                n.label(),
                "no RDMA device under this function (mlx5_ib not loaded?): link layer unknown",
            ));
            continue;
        }
        for r in &n.rdma {
            for p in &r.ports {
                let subject = format!("{} {}/{}", n.addr, r.name, p.port);
                match p.link_layer.as_deref() {
                    Some(ll) if ll.eq_ignore_ascii_case(want_label) => out
                        .push(Verdict::pass(ID, subject, format!("link layer {ll}")).observed(ll)),
                    Some(ll) => {
                        // LINK_TYPE_P<n> is set on the device's first function; P1 = function 0.
                        let first = daqtune_probe::pci::PciAddr { func: 0, ..n.addr };
                        out.push(
                            Verdict::fail(ID, subject, format!("port runs {ll}; the data path needs {want_label}"))
                                .observed(ll)
                                .expected(want_label)
                                .fix(format!(
                                    "sudo mlxconfig -d {first} set LINK_TYPE_P{}={want_mlx}   # then reboot (IGX: also settable in the BIOS)",
                                    n.addr.func + 1
                                )),
                        )
                    }
                    None => out.push(Verdict::skip(ID, subject, "link_layer unreadable")),
                }
            }
        }
    }
    out
}

fn run_link(ctx: &Context) -> Vec<Verdict> {
    const ID: &str = "nic.link";
    let f = match pci_or_skip(ctx, ID) {
        Ok(f) => f,
        Err(v) => return v,
    };
    let p = &ctx.profile.profile.nic;
    let mut out = Vec::new();
    if let Some(expected) = p.expected_pfs {
        let pfs = f.nics.iter().filter(|n| n.connectx && !n.is_vf).count();
        if (pfs as u32) < expected {
            let mut v = Verdict::fail(
                ID,
                "host",
                format!("{pfs} of {expected} ConnectX physical functions present"),
            )
            .observed(pfs)
            .expected(expected);
            if p.cable_preflight {
                v.message.push_str(": DGX Spark removes the CX-7 PFs from the PCI bus when no QSFP cable is plugged in");
                v = v.fix("plug a QSFP cable into the chassis socket; the hotplug service brings the PFs back (seed 000 pre-flight)");
            }
            out.push(v);
        }
    }
    let nics = data_path_nics(ctx, f);
    if nics.is_empty() {
        if out.is_empty() {
            out.push(Verdict::skip(ID, "host", no_nic_reason(ctx)));
        }
        return out;
    }
    for n in nics {
        for name in &n.foreign_netdevs {
            out.push(
                Verdict::warn(
                    ID,
                    format!("{} ({name})", n.addr),
                    format!("{name} is in another network namespace; this namespace cannot see its carrier or MTU"),
                )
                .fix(format!(
                    "find it with `ip netns` / `ip -all netns exec ip -br link`; move it back with `ip -n NS link set {} netns 1`",
                    daqtune_probe::text::shell_quote(name)
                )),
            );
        }
        if n.netdevs.is_empty() && n.foreign_netdevs.is_empty() {
            out.push(Verdict::warn(
                ID,
                n.label(),
                n.notes
                    .first()
                    .cloned()
                    .unwrap_or_else(|| "no network interface".into()),
            ));
        }
        for nd in &n.netdevs {
            let subject = format!("{} ({})", n.addr, nd.name);
            let speed = nd
                .speed_mbps
                .map(|s| format!("{} Gb/s", s / 1000))
                .unwrap_or_else(|| "speed unknown".into());
            match nd.carrier {
                Some(true) => out.push(
                    Verdict::pass(ID, subject, format!("carrier up, {speed}"))
                        .observed(format!("up {speed}")),
                ),
                Some(false) => out.push(
                    Verdict::warn(
                        ID,
                        subject,
                        "no carrier: cable, transceiver or link partner down",
                    )
                    .observed("down")
                    .expected("up")
                    .fix(format!(
                        "check the cable and the peer; `ethtool {}` shows the negotiated state",
                        daqtune_probe::text::shell_quote(&nd.name)
                    )),
                ),
                None => out.push(
                    Verdict::warn(
                        ID,
                        subject,
                        format!(
                            "interface is administratively down (operstate {})",
                            nd.operstate.as_deref().unwrap_or("unknown")
                        ),
                    )
                    .observed("admin down")
                    .expected("up")
                    .fix(format!(
                        "sudo ip link set dev {} up",
                        daqtune_probe::text::shell_quote(&nd.name)
                    )),
                ),
            }
        }
    }
    out
}
