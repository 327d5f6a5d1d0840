//! `app.sizes`: the configuration's packet and message sizes against its buffers and the MTU.

use super::*;

pub const SIZES: Tunable = Tunable {
    id: ID,
    area: Area::Nic,
    title: "The configuration's packet and message sizes fit its buffers and the MTU",
    aliases: &[],
    doc: include_str!("../../../../docs/checks/app.sizes.md"),
    needs_root: false,
    profile_keys: &[],
    check: run_sizes,
    planner: None,
};

// ---------------------------------------------------------------------------------------------
// app.sizes

fn segments<'a>(app: &'a AppConfig, q: &Queue) -> Vec<(&'a str, u64)> {
    q.regions
        .iter()
        .filter_map(|n| app.region(n))
        .filter_map(|r| r.buf_size().map(|b| (r.name.as_str(), b)))
        .collect()
}

fn frame_limits(
    id: &str,
    subject: &str,
    l2: u64,
    what: &str,
    mtu: Option<(u32, String)>,
    out: &mut Vec<Verdict>,
) {
    if l2.saturating_add(estimate::ETH_FCS) > estimate::JUMBO_FRAME {
        out.push(Verdict::fail(
            id,
            subject.to_string(),
            format!(
                "{what}: a {l2}-byte frame (+4 B FCS) exceeds DAQIRI's {}-byte frame limit (JUMBOFRAME_SIZE)",
                estimate::JUMBO_FRAME
            ),
        ));
    }
    if let Some((mtu, nd)) = mtu {
        let l3 = l2.saturating_sub(estimate::ETH_HDR);
        if l3 > u64::from(mtu) {
            out.push(
                Verdict::warn(
                    id,
                    subject.to_string(),
                    format!(
                        "{what}: {l3}-byte IP packets ({l2}-byte frames) exceed {nd}'s MTU {mtu}; DAQIRI's DPDK port setup raises the port MTU to its buffer size when it starts, but the kernel side, the peer and any switch must carry these frames too"
                    ),
                )
                .observed(format!("MTU {mtu}"))
                .expected(format!(">= {l3}"))
                .fix(format!("set the data-path MTU (profile nic.mtu >= {l3}; `sudo daqtune apply --only nic.mtu`)")),
            );
        }
    }
}

const ID: &str = "app.sizes";

fn run_sizes(ctx: &Context) -> Vec<Verdict> {
    let app = match app(ctx, ID) {
        Ok(a) => a,
        Err(v) => return v,
    };
    let mut out: Vec<Verdict> = Vec::new();
    for w in &app.workers {
        out.extend(tx_generator(ctx, app, w));
    }
    for itf in &app.interfaces {
        for f in &itf.flows {
            out.extend(rx_flow(ctx, app, itf, f));
        }
    }
    for w in &app.workers {
        out.extend(messages(ctx, app, w));
    }
    if out.is_empty() {
        out.push(Verdict::na(
            ID,
            app.file.clone(),
            "the configuration states no packet or message sizes (no header_size/payload_size, ipv4_len or message_size)",
        ));
    }
    out
}

/// The MTU of the interface's netdev on this host, with its name.
fn mtu_of(ctx: &Context, i: &Interface) -> Option<(u32, String)> {
    let r = resolve(i, ctx.pci().ok(), ctx.local_addrs().ok());
    let m = netdev_mtu(ctx, &r)?;
    Some((m, r.netdev.unwrap_or_default()))
}

/// A raw TX generator: header + payload against the TX queue's segments and the frame limits.
fn tx_generator(ctx: &Context, app: &AppConfig, w: &Worker) -> Vec<Verdict> {
    let (Some(h), Some(p)) = (&w.header_size, &w.payload_size) else {
        return Vec::new();
    };
    let (hv, pv) = match (&h.value, &p.value) {
        (Ok(a), Ok(b)) => (*a, *b),
        (Err(b), _) => return vec![bad_field(ID, app, &h.path, h.line, b)],
        (_, Err(b)) => return vec![bad_field(ID, app, &p.path, p.line, b)],
    };
    let subject = app.subject(p.line, &p.path);
    let Some(itf) = app.worker_interface(w) else {
        return vec![Verdict::skip(
            ID,
            subject,
            format!(
                "{}: interface `{}` is not in the configuration",
                w.path,
                w.interface_name.as_deref().unwrap_or("?")
            ),
        )];
    };
    let q = itf
        .queues(Dir::Tx)
        .find(|q| w.queue_id.is_none_or(|id| q.id == Some(id)))
        .or_else(|| itf.queues(Dir::Tx).next());
    let Some(q) = q else {
        return vec![Verdict::skip(
            ID,
            subject,
            format!("interface `{}` has no TX queue", itf.name),
        )];
    };
    let l2 = hv.saturating_add(pv);
    let mut out = vec![tx_fit(app, q, hv, pv, &subject).observed(format!("{l2} B frames"))];
    frame_limits(
        ID,
        &subject,
        l2,
        &format!("{} frames", w.path),
        mtu_of(ctx, itf),
        &mut out,
    );
    out
}

/// Header and payload against the TX queue's buffers: one segment holds both, or a
/// header-data split holds each in its own.
fn tx_fit(app: &AppConfig, q: &Queue, hv: u64, pv: u64, subject: &str) -> Verdict {
    let l2 = hv.saturating_add(pv);
    match segments(app, q).as_slice() {
        [] => Verdict::skip(ID, subject, format!("{} names no usable memory region", q.path)),
        [(n, b)] if l2 > *b => Verdict::fail(
            ID,
            subject,
            format!("header_size {hv} + payload_size {pv} = {l2} B does not fit buf_size {b} of `{n}` ({})", q.path),
        )
        .fix(format!("raise buf_size of `{n}` to >= {l2}, or use header-data split (two regions)")),
        [(n, b)] => Verdict::pass(
            ID,
            subject,
            format!("header_size {hv} + payload_size {pv} = {l2} B fits buf_size {b} of `{n}`"),
        ),
        [(hn, hb), (pn, pb), ..] => {
            let mut bad = Vec::new();
            if hv > *hb {
                bad.push(format!("header_size {hv} > buf_size {hb} of header segment `{hn}`"));
            }
            if pv > *pb {
                bad.push(format!("payload_size {pv} > buf_size {pb} of payload segment `{pn}`"));
            }
            if bad.is_empty() {
                Verdict::pass(
                    ID,
                    subject,
                    format!("header-data split: header {hv} B fits `{hn}` ({hb} B), payload {pv} B fits `{pn}` ({pb} B)"),
                )
            } else {
                Verdict::fail(ID, subject, format!("header-data split: {}", bad.join("; ")))
            }
        }
    }
}

/// An RX flow that states its IPv4 length: its frames against the buffers of each queue it
/// steers to, and the frame limits.
fn rx_flow(
    ctx: &Context,
    app: &AppConfig,
    itf: &Interface,
    f: &crate::model::appconfig::Flow,
) -> Vec<Verdict> {
    let len = match &f.ipv4_len.value {
        Ok(l) => *l,
        Err(b) => return vec![bad_field(ID, app, &f.ipv4_len.path, f.ipv4_len.line, b)],
    };
    let subject = app.subject(f.ipv4_len.line, &f.ipv4_len.path);
    let l2 = len.saturating_add(estimate::ETH_HDR);
    let mut out = Vec::new();
    for q in itf
        .queues(Dir::Rx)
        .filter(|q| q.id.is_some_and(|id| f.queues.contains(&id)))
    {
        let segs = segments(app, q);
        let cap: u64 = segs.iter().fold(0u64, |a, (_, b)| a.saturating_add(*b));
        if segs.is_empty() {
            continue;
        }
        let names: Vec<&str> = segs.iter().map(|(n, _)| *n).collect();
        out.push(if l2 > cap {
            Verdict::fail(
                ID,
                subject.clone(),
                format!(
                    "ipv4_len {len} means {l2}-byte frames; {} holds {cap} B ({}): DAQIRI must scatter or drop them",
                    q.path,
                    names.join(" + ")
                ),
            )
        } else {
            Verdict::pass(
                ID,
                subject.clone(),
                format!("{l2}-byte frames fit {} ({cap} B in {})", q.path, names.join(" + ")),
            )
        });
    }
    frame_limits(
        ID,
        &subject,
        l2,
        &format!("flow {}", f.path),
        mtu_of(ctx, itf),
        &mut out,
    );
    out
}

/// Socket and RDMA messages. (`socket_config.max_payload_size` is a receive-buffer cap, not a
/// datagram size: DAQIRI's own UDP sweep sets 65535 for 65507-byte datagrams.)
fn messages(ctx: &Context, app: &AppConfig, w: &Worker) -> Vec<Verdict> {
    let Some(ms) = &w.message_size else {
        return Vec::new();
    };
    let m = match &ms.value {
        Ok(m) => *m,
        Err(b) => return vec![bad_field(ID, app, &ms.path, ms.line, b)],
    };
    let subject = app.subject(ms.line, &ms.path);
    let itf = app.worker_interface(w);
    message_checks(app, w, itf, m, &subject, itf.and_then(|i| mtu_of(ctx, i)))
}

fn message_checks(
    app: &AppConfig,
    w: &Worker,
    itf: Option<&Interface>,
    m: u64,
    subject: &str,
    mtu: Option<(u32, String)>,
) -> Vec<Verdict> {
    let mut out = Vec::new();
    let transport = itf.map(|i| i.transport).unwrap_or(Transport::Unknown);
    if transport == Transport::Udp {
        if m > estimate::MAX_UDP_PAYLOAD {
            out.push(Verdict::fail(
                ID,
                subject.to_string(),
                format!("message_size {m} exceeds the largest UDP payload ({} B): DAQIRI's socket engine rejects it", estimate::MAX_UDP_PAYLOAD),
            ));
        } else if let Some((mtu, nd)) = mtu {
            if m + 28 > u64::from(mtu) {
                out.push(Verdict::warn(
                    ID,
                    subject.to_string(),
                    format!("{m}-byte UDP messages make {}-byte datagrams, above {nd}'s MTU {mtu}: each is fragmented (one lost fragment loses the message)", m + 28),
                ));
            }
        }
    }
    // The buffers the messages land in: the interface's queue regions, else (RDMA benchmarks
    // name regions in code) every region of the configuration.
    let mut names: Vec<&str> = itf
        .map(|i| {
            i.queues
                .iter()
                .flat_map(|q| q.regions.iter().map(String::as_str))
                .collect()
        })
        .unwrap_or_default();
    if names.is_empty() {
        names = app.regions.iter().map(|r| r.name.as_str()).collect();
    }
    let best = names
        .iter()
        .filter_map(|n| app.region(n))
        .filter_map(|r| r.buf_size().map(|b| (r.name.as_str(), b)))
        .max_by_key(|(_, b)| *b);
    match best {
        Some((n, b)) if m > b => out.push(
            Verdict::fail(
                ID,
                subject.to_string(),
                format!("message_size {m} does not fit buf_size {b} of `{n}` (the largest region {} can use)", w.path),
            )
            .fix(format!("raise buf_size of `{n}` to >= {m}, or send smaller messages")),
        ),
        Some((n, b)) => out.push(Verdict::pass(
            ID,
            subject.to_string(),
            format!("message_size {m} fits buf_size {b} of `{n}`"),
        )),
        None => out.push(Verdict::skip(ID, subject.to_string(), format!("{}: no region with a usable buf_size", w.path))),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{failures, judge};
    use super::*;

    #[test]
    fn a_message_larger_than_its_buffers_fails() {
        let before = failures(&judge(run_sizes, &|t| t.to_string()));
        assert!(before.is_empty(), "{before:?}");
        let after = failures(&judge(run_sizes, &|t| {
            t.replace("message_size: 8000", "message_size: 8500")
        }));
        assert!(
            after
                .iter()
                .any(|f| f.contains("does not fit buf_size 8192")),
            "{after:?}"
        );
    }
}
