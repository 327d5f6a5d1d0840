//! `platform`: which profile applies, and what on this host will refuse later writes.

use crate::model::context::Context;
use crate::model::profile::glob_match;
use crate::model::tunable::Tunable;
use crate::model::verdict::{Area, Verdict};

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
    if let Some(why) = contradiction(ctx, ident, arch) {
        out.push(
            Verdict::warn(ID, "profile", why)
                .observed(ident)
                .expected(&ctx.profile.profile.name)
                .fix("run without --profile to use the detected one, or name the profile of this platform: daqtune check --profile igx-orin|dgx-spark|generic-dgpu|FILE (a FILE for this host can `extends:` the detected one)"),
        );
    }

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

/// Why a profile given with `--profile` contradicts this host, if it does: its match rules
/// (its own or inherited) name hosts this one is not, or the host is detected as a built-in
/// platform the profile does not extend. A detected or fallback profile cannot contradict
/// the detection that chose it; any other (`--profile`, a file, a derived one) can.
fn contradiction(ctx: &Context, ident: &str, arch: &str) -> Option<String> {
    let origin = &ctx.profile.origin;
    if origin.starts_with("detected") || origin.starts_with("fallback") {
        return None;
    }
    let p = ctx.platform();
    let names = ctx.facts().gpu_names();
    let lp = &ctx.profile;
    let name = &lp.profile.name;
    let gpus = if names.is_empty() {
        "no GPU named".to_string()
    } else {
        format!("GPU {}", names.join(", "))
    };
    let host = format!("{ident} ({arch}, {gpus})");
    let m = &lp.profile.matches;
    let rules: Vec<String> = [
        ("DMI product", &m.dmi_product),
        ("device-tree model", &m.dt_model),
        ("GPU", &m.gpu_name),
    ]
    .iter()
    .filter(|(_, pats)| !pats.is_empty())
    .map(|(what, pats)| format!("{what} `{}`", pats.join("` or `")))
    .collect();
    let any = |pats: &[String], text: Option<&str>| {
        text.is_some_and(|t| pats.iter().any(|pat| glob_match(pat, t)))
    };
    let matched = any(&m.dmi_product, p.dmi_product.as_deref())
        || any(&m.dt_model, p.dt_model.as_deref())
        || names.iter().any(|n| any(&m.gpu_name, Some(n)));
    if !rules.is_empty() && !matched {
        return Some(format!(
            "profile `{name}` ({}) is for hosts matching {}; this host is {host}: its values (isolated cores, GPUDirect paths, what does not apply) are another platform's",
            lp.origin,
            rules.join(", or ")
        ));
    }
    let (detected, why) = crate::model::profile::detect(p, names)?;
    let lineage: Vec<&str> = std::iter::once(name.as_str())
        .chain(lp.layers.iter().filter_map(|(f, _)| {
            f.strip_prefix("platforms/")
                .and_then(|f| f.strip_suffix(".yaml"))
        }))
        .collect();
    if lineage.contains(&detected.as_str()) {
        return None;
    }
    Some(format!(
        "this host is detected as `{detected}` ({why}), but profile `{name}` ({}) neither is nor extends it: {host}",
        lp.origin
    ))
}
