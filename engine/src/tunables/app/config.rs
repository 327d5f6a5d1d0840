//! `app.config`: the DAQIRI configuration reads cleanly, no placeholders left.

use super::*;

pub const CONFIG: Tunable = Tunable {
    id: "app.config",
    area: Area::Platform,
    title: "The DAQIRI configuration (--config) reads cleanly: no placeholders left",
    aliases: &[],
    doc: include_str!("../../../../docs/checks/app.config.md"),
    needs_root: false,
    profile_keys: &[],
    check: run_config,
    planner: None,
};

// ---------------------------------------------------------------------------------------------
// app.config

fn placeholder_hint(ctx: &Context, app: &AppConfig, path: &str) -> String {
    let key = path.rsplit('.').next().unwrap_or(path);
    let key = key.split('[').next().unwrap_or(key);
    let raw = app.stream_type.as_ref().and_then(|f| f.ok().copied())
        == Some(crate::model::appconfig::StreamType::Raw);
    match key {
        "address" if raw => {
            let here: Vec<String> = ctx
                .pci()
                .map(|f| {
                    f.nics
                        .iter()
                        .filter(|n| n.connectx)
                        .map(|n| n.label())
                        .collect()
                })
                .unwrap_or_default();
            if here.is_empty() {
                "the PCI address (DDDD:BB:DD.F) of the ConnectX port to use".into()
            } else {
                format!(
                    "the PCI address of the ConnectX port to use; this host has {}",
                    here.join(", ")
                )
            }
        }
        "address" | "local_addr" | "remote_addr" | "ip_src_addr" | "ip_dst_addr"
        | "server_address" | "client_address" => {
            "an IPv4 address configured on the data-path port (see `daqtune check app.interfaces`)"
                .into()
        }
        "cpu_core" | "master_core" => match ctx.cmdline_isolated() {
            Some(iso) => format!(
                "a CPU number: queue and worker threads on isolated CPUs ({iso} here), the master core on another"
            ),
            None => "a CPU number (queue and worker threads belong on isolated CPUs)".into(),
        },
        "eth_dst_addr" | "eth_src_addr" => {
            "the port's MAC address (cat /sys/class/net/IFACE/address)".into()
        }
        _ => "this host's value".into(),
    }
}

fn run_config(ctx: &Context) -> Vec<Verdict> {
    const ID: &str = "app.config";
    let app = match app(ctx, ID) {
        Ok(a) => a,
        Err(v) => return v,
    };
    // A key DAQIRI does not read keeps its default silently there: a warning with its line.
    let unknown = app.unknown_keys.iter().map(|p| {
        Verdict::warn(ID, app.subject(p.line, &p.path), p.message.clone()).fix(format!(
            "edit {}:{}: DAQIRI ignores this key (DAQIRI's configuration reference: docs/api-reference/configuration.md)",
            app.file, p.line
        ))
    });
    if app.problems.is_empty() {
        let queues: usize = app.interfaces.iter().map(|i| i.queues.len()).sum();
        let st = match app.stream_type.as_ref().and_then(|f| f.ok()) {
            Some(crate::model::appconfig::StreamType::Raw) => "raw",
            _ => "socket",
        };
        let mut out = vec![Verdict::pass(
            ID,
            app.file.clone(),
            format!(
                "stream_type {st} ({} engine): {} memory region(s), {} interface(s), {queues} queue(s), {} application worker(s); no placeholders left",
                app.engine.name(),
                app.regions.len(),
                app.interfaces.len(),
                app.workers.len()
            ),
        )];
        out.extend(unknown);
        return out;
    }
    app.problems
        .iter()
        .map(|p| {
            let v = Verdict::fail(ID, app.subject(p.line, &p.path), p.message.clone());
            if p.placeholder {
                v.fix(format!(
                    "edit {}:{}: replace the placeholder with {}",
                    app.file,
                    p.line,
                    placeholder_hint(ctx, app, &p.path)
                ))
            } else {
                v.fix(format!(
                    "edit {}:{} (DAQIRI's configuration reference: docs/api-reference/configuration.md)",
                    app.file, p.line
                ))
            }
        })
        .chain(unknown)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{failures, judge};
    use super::*;

    #[test]
    fn a_placeholder_fails_with_its_line() {
        let clean = judge(run_config, &|t| t.to_string());
        assert!(failures(&clean).is_empty(), "{clean:?}");
        let left = judge(run_config, &|t| {
            t.replace("master_core: 2", "master_core: <CPU_CORE>")
        });
        let f = failures(&left);
        assert_eq!(f.len(), 1, "{left:?}");
        assert!(f[0].contains("master_core"), "{f:?}");
    }
}
