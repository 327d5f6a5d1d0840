//! `platform`: which profile applies, and what on this host will refuse later writes.

use crate::context::Context;
use crate::tunable::Tunable;
use crate::verdict::{Area, Verdict};

pub const PLATFORM: Tunable = Tunable {
    id: "platform",
    area: Area::Platform,
    title: "Platform, profile match, Secure Boot / lockdown, container",
    aliases: &["platform"],
    doc: include_str!("../../../docs/checks/platform.md"),
    needs_root: false,
    profile_keys: &[],
    check: run,
    planner: None,
};

fn run(ctx: &Context) -> Vec<Verdict> {
    const ID: &str = "platform";
    let p = ctx.platform();
    let mut out = Vec::new();
    let ident = p
        .dmi_product
        .as_deref()
        .or(p.dt_model.as_deref())
        .unwrap_or("unknown machine");
    let kernel = p.kernel_release.as_deref().unwrap_or("unknown kernel");
    let arch = p.arch.as_deref().unwrap_or("unknown arch");
    let origin = &ctx.profile.origin;
    let v = if origin.starts_with("fallback") {
        Verdict::warn(
            ID,
            "host",
            format!("{ident} ({arch}, {kernel}): no built-in profile matches; using `{}` ({origin})", ctx.profile.profile.name),
        )
        .fix("pick the profile explicitly: daqtune check --profile igx-orin|dgx-spark|generic-dgpu|FILE")
    } else {
        Verdict::pass(
            ID,
            "host",
            format!(
                "{ident} ({arch}, {kernel}): profile `{}` ({origin})",
                ctx.profile.profile.name
            ),
        )
    };
    out.push(v.observed(ident).expected(&ctx.profile.profile.name));

    let sb = match p.secure_boot {
        Some(true) => "Secure Boot on",
        Some(false) => "Secure Boot off",
        None => "Secure Boot state unknown (no EFI variable)",
    };
    match p.lockdown.as_deref() {
        Some(mode) if mode != "none" => out.push(
            Verdict::warn(
                ID,
                "lockdown",
                format!(
                    "kernel lockdown `{mode}` ({sb}): PCI config-space writes (MRRS, ACS), mlxconfig and unsigned modules (nvidia-peermem builds) will be refused"
                ),
            )
            .observed(mode)
            .expected("none")
            .fix("disable Secure Boot in the firmware setup for the tuning steps (seed 000: it can be re-enabled afterwards), or sign the modules with an enrolled MOK"),
        ),
        Some(mode) => out.push(
            Verdict::pass(ID, "lockdown", format!("kernel lockdown `{mode}` ({sb})")).observed(mode),
        ),
        None => out.push(
            Verdict::pass(ID, "lockdown", format!("no lockdown LSM ({sb})")).observed("absent"),
        ),
    }
    if let Some(why) = &p.container {
        out.push(
            Verdict::warn(
                ID,
                "container",
                format!("running inside a container ({why}): sysfs shows the host's devices but writes and module loads may be refused; tune the host itself"),
            )
            .observed("container"),
        );
    }
    out
}
