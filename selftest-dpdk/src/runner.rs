//! One whole run: hugepages, namespace and veth pair, EAL, engine, verdict, clean-up.

use crate::dpdk::Eal;
use crate::eal_args;
use crate::engine::DpdkEngine;
use crate::hugepages::{self, Plan, Reservation};
use crate::netns;
use crate::spec::{exit, DpdkDetails, DpdkOutput, DpdkRunSpec, Topology, VETH_RX, VETH_TX};
use daqtune_selftest::{judge, Engine, EngineResult, Mode, RunControl, RunSpec, Thresholds};
use std::time::Duration;

fn topology_name(spec: &DpdkRunSpec) -> String {
    match spec.topology {
        Topology::Veth => "veth".into(),
        Topology::Ports => "ports".into(),
    }
}

fn skip(spec: &DpdkRunSpec, why: String, details: Option<DpdkDetails>) -> (DpdkOutput, i32) {
    (
        DpdkOutput::new(
            EngineResult::skipped("dpdk", Mode::Raw, &topology_name(spec), &why),
            details,
        ),
        exit::SKIP,
    )
}

fn error(spec: &DpdkRunSpec, why: String, details: Option<DpdkDetails>) -> (DpdkOutput, i32) {
    (
        DpdkOutput::new(
            EngineResult::errored("dpdk", Mode::Raw, &topology_name(spec), &why),
            details,
        ),
        exit::ERROR,
    )
}

/// Runs `spec` and returns what to print and the exit code. Everything the run set up is torn
/// down before this returns, on every path.
pub fn run(spec: &DpdkRunSpec) -> (DpdkOutput, i32) {
    let mut details = DpdkDetails {
        dpdk_version: crate::dpdk::VERSION.into(),
        ..DpdkDetails::default()
    };
    if !daqtune_selftest::sys::is_root() {
        return skip(
            spec,
            "the DPDK self-test needs root (hugepages, network namespace, device access)".into(),
            Some(details),
        );
    }
    let frame = eal_args::frame_for_message(spec.message_size);
    let room = (frame + 128).max(2048) as u64 + 128;

    // A run killed while holding a reservation left a note: undo it before counting pages.
    let journal_dir_existed = std::path::Path::new(hugepages::JOURNAL_DIR).exists();
    let recovered = hugepages::recover_stale(std::path::Path::new(hugepages::JOURNAL_DIR));
    // Hugepages first: without them nothing else is worth setting up.
    let needed = hugepages::pages_needed(2 * u64::from(spec.mbufs), room);
    let pool = match hugepages::live_pool() {
        Ok(p) => p,
        Err(e) => {
            return skip(
                spec,
                format!("no 2 MiB hugepage pool readable: {e}"),
                Some(details),
            );
        }
    };
    let avail = daqtune_probe::Host::live()
        .read_string("/proc/meminfo")
        .ok()
        .and_then(|m| daqtune_probe::mem::mem_available_kb(&m));
    let mut reservation: Option<Reservation> = None;
    match hugepages::plan(needed, pool, avail, spec.reserve_hugepages) {
        Plan::UseExisting => {
            details.hugepages = format!(
                "used existing: {} free 2 MiB pages, {needed} needed",
                pool.usable()
            );
        }
        Plan::Reserve { from, to } => match Reservation::reserve(from, to) {
            Ok(r) => {
                details.hugepages = format!(
                    "reserved {} 2 MiB pages for the run (pool {from} -> {to})",
                    r.added()
                );
                reservation = Some(r);
            }
            Err(e) => {
                return skip(
                    spec,
                    format!("no hugepages could be had: {e}"),
                    Some(details),
                )
            }
        },
        Plan::Unavailable(why) => {
            return skip(
                spec,
                format!("no hugepages could be had: {why}"),
                Some(details),
            );
        }
    }

    // Leftovers of runs that were killed, then: DPDK creates its runtime directory's parent
    // when missing; note whether it was there.
    let stale = hugepages::sweep_dead_runs();
    let run_dir_existed = std::path::Path::new(hugepages::DPDK_RUN_DIR).exists();
    let prefix =
        eal_args::unique_file_prefix(std::process::id(), daqtune_selftest::sys::monotonic_ns());
    let (out, code) = run_with_hugepages(spec, &prefix, details);
    let (mut out, code) = (out, code);

    // The EAL is cleaned up (run_with_hugepages dropped it); now the files and pages.
    let mut removed = stale;
    removed.extend(hugepages::sweep_leftovers(&prefix));
    if !journal_dir_existed {
        // Only when empty: other daqtune parts keep their journals there too.
        let _ = std::fs::remove_dir(hugepages::JOURNAL_DIR);
    }
    if !run_dir_existed && std::fs::remove_dir(hugepages::DPDK_RUN_DIR).is_ok() {
        removed.push(hugepages::DPDK_RUN_DIR.into());
    }
    let restored = reservation.map(|r| r.release());
    out.result.notes.extend(recovered);
    if let Some(d) = out.dpdk.as_mut() {
        d.removed = removed.iter().map(|p| p.display().to_string()).collect();
        match restored {
            Some(Ok((from, now))) if now > from => d.hugepages.push_str(&format!(
                "; released: pool set back to {from} ({} page(s) still mapped by this process return to the kernel when it exits)",
                now - from
            )),
            Some(Ok((from, _))) => d.hugepages.push_str(&format!("; released: pool back to {from}")),
            Some(Err(e)) => d.hugepages.push_str(&format!("; could not read the pool back: {e}")),
            None => {}
        }
    }
    (out, code)
}

/// Progress lines for the launcher (which shows them on a terminal).
struct ProgressLines;

impl daqtune_selftest::findmax::Progress for ProgressLines {
    fn trial_start(
        &mut self,
        n: usize,
        phase: daqtune_selftest::findmax::Phase,
        asked: Option<f64>,
        length: Duration,
    ) {
        eprintln!(
            "{}find-max dpdk/raw: trial {n} ({}) {} for {:.1} s",
            daqtune_selftest::launch::dpdk::PROGRESS_PREFIX,
            phase.as_str(),
            asked
                .map(|a| format!("at {a:.3} Gb/s"))
                .unwrap_or_else(|| "unpaced".into()),
            length.as_secs_f64()
        );
    }

    fn trial_end(&mut self, t: &daqtune_selftest::findmax::Trial) {
        eprintln!(
            "{}  achieved {:.3} Gb/s ({:.0} pps), loss {:.4} %: {}",
            daqtune_selftest::launch::dpdk::PROGRESS_PREFIX,
            t.achieved_gbps,
            if t.duration_s > 0.0 {
                t.received as f64 / t.duration_s
            } else {
                0.0
            },
            t.loss_pct,
            if t.passed { "pass" } else { "fail" }
        );
    }
}

/// `--find-max`: the search over this engine's ports.
fn find_max(
    engine: &mut DpdkEngine,
    spec: &DpdkRunSpec,
    base: &RunSpec,
    ctl: &RunControl,
) -> daqtune_selftest::Result<EngineResult> {
    use daqtune_selftest::findmax;
    let link = engine.tx_link_speed_mbps().map(|mbps| findmax::Limit {
        gbps: findmax::link_payload_gbps(mbps, spec.message_size),
        source: format!(
            "payload rate of the {mbps} Mb/s link (DPDK link status; {}-byte messages, 66 \
             bytes of preamble, headers, FCS and gap each)",
            spec.message_size
        ),
    });
    let p = findmax::Params {
        loss_pct: spec.loss_pct,
        precision_pct: spec.precision_pct,
        link_gbps: None,
        max_trials: spec.max_trials,
    };
    findmax::run(
        engine,
        base,
        ctl,
        &p,
        Duration::from_secs_f64(spec.trial_duration_s),
        link,
        &mut ProgressLines,
    )
}

fn run_with_hugepages(
    spec: &DpdkRunSpec,
    prefix: &str,
    mut details: DpdkDetails,
) -> (DpdkOutput, i32) {
    let frame = eal_args::frame_for_message(spec.message_size);
    let allowed = daqtune_selftest::sys::allowed_cpus();
    let plan = match crate::spec::eal_plan(spec, prefix, &allowed) {
        Ok(p) => p,
        Err(e) => return error(spec, e, Some(details)),
    };
    let (tx_cpu, rx_cpu) = (plan.tx_cpu, plan.rx_cpu);
    let mut rps_note: Option<String> = None;
    if spec.topology == Topology::Veth {
        // The namespace belongs to this process alone and disappears with it, veth pair
        // included: nothing to clean up even after SIGKILL.
        if let Err(e) = netns::enter_private_netns() {
            return skip(
                spec,
                format!("cannot create a private network namespace: {e}"),
                Some(details),
            );
        }
        let mtu = u32::from(eal_args::mtu_for_frame(frame));
        if let Err(e) = netns::create_veth_pair(VETH_TX, VETH_RX, mtu) {
            return error(
                spec,
                format!("cannot create the veth pair: {e}"),
                Some(details),
            );
        }
        if spec.rps && rx_cpu != tx_cpu {
            if let Err(e) = netns::steer_rx_to(VETH_RX, rx_cpu) {
                rps_note = Some(format!(
                    "receive steering (RPS) to CPU {rx_cpu} not set ({e}): the TX CPU runs the kernel's receive path too"
                ));
            }
        }
    }
    let args = match eal_args::eal_args(&plan) {
        Ok(a) => a,
        Err(e) => return error(spec, e.to_string(), Some(details)),
    };
    details.eal_args = args.clone();
    let names = match eal_args::port_names(&plan.ports) {
        Ok(n) => n,
        Err(e) => return error(spec, e.to_string(), Some(details)),
    };
    let eal = match Eal::init(&args) {
        Ok(e) => e,
        Err(e) => return skip(spec, format!("DPDK EAL did not start: {e}"), Some(details)),
    };
    let flush: Option<crate::engine::TxFlush> = (spec.topology == Topology::Veth).then(|| {
        // The kernel's counters of dqt0 add up over every run of this process (a --find-max
        // search makes many), so the target is every frame handed over so far, not this run's.
        let handed = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let f: crate::engine::TxFlush = std::sync::Arc::new(move |sent: u64| {
            let total = handed.fetch_add(sent, std::sync::atomic::Ordering::SeqCst) + sent;
            netns::flush_packet_tx(VETH_TX, total, Duration::from_secs(2))
        });
        f
    });
    let cfg = crate::engine::EngineConfig {
        ports: names,
        message_size: spec.message_size,
        mbufs: spec.mbufs,
        descriptors: spec.descriptors,
        topology: topology_name(spec),
        cpus: (tx_cpu, rx_cpu),
        tx_flush: flush,
        rx_buffer_frames: match spec.topology {
            Topology::Veth => eal_args::af_packet_ring(frame).framecnt as u64,
            Topology::Ports => u64::from(spec.descriptors),
        },
        yield_when_idle: spec.topology == Topology::Veth,
        netdevs: eal_args::port_netdevs(&daqtune_probe::Host::live(), &plan.ports),
    };
    let mut engine = match DpdkEngine::new(eal.clone(), cfg) {
        Ok(e) => e,
        Err(e) => {
            drop(eal);
            return error(spec, format!("port set-up failed: {e}"), Some(details));
        }
    };
    let mut rs = RunSpec::new(Mode::Raw);
    rs.message_size = spec.message_size;
    rs.duration = Duration::from_secs_f64(spec.duration_s);
    rs.rate_gbps = spec.target_gbps();
    rs.tx_cpu = Some(tx_cpu);
    rs.rx_cpu = Some(rx_cpu);
    rs.latency = true;
    let ctl = RunControl::watching_signals();
    let veth = spec.topology == Topology::Veth;
    if veth {
        // Reading resets: start the ring counters at the run.
        let _ = netns::packet_socket_stats();
    }
    let result = if spec.find_max {
        find_max(&mut engine, spec, &rs, &ctl)
    } else {
        engine.run(&rs, &ctl)
    };
    let sockets = if veth {
        netns::packet_socket_stats()
    } else {
        Vec::new()
    };
    ctl.stop();
    let eal_args = std::mem::take(&mut details.eal_args);
    let hp = std::mem::take(&mut details.hugepages);
    let kernel_ifs: Vec<crate::netns::IfCounters> = if spec.topology == Topology::Veth {
        daqtune_probe::Host::live()
            .read_string("/proc/net/dev")
            .map(|t| crate::netns::parse_net_dev(&t))
            .unwrap_or_default()
            .into_iter()
            .filter(|c| c.name == VETH_TX || c.name == VETH_RX)
            .collect()
    } else {
        Vec::new()
    };
    let mut details = engine.shutdown();
    details.kernel_interfaces = kernel_ifs.clone();
    details.packet_sockets = sockets.clone();
    details.eal_args = eal_args;
    details.hugepages = hp;
    drop(eal);
    match result {
        Ok(mut r) => {
            let t = Thresholds {
                max_udp_loss_pct: spec.max_loss_pct,
                ..Thresholds::default()
            };
            // A search's counters cover every trial, the failing ones included.
            let over = if spec.find_max {
                "over the whole search: "
            } else {
                ""
            };
            for p in sockets.iter().filter(|p| p.drops > 0) {
                r.notes.push(format!(
                    "{over}af_packet ring on {} dropped {} frame(s): the RX lcore fell behind (other load on its CPU)",
                    p.iface, p.drops
                ));
            }
            for c in &kernel_ifs {
                if c.rx_dropped > 0 || c.tx_dropped > 0 {
                    r.notes.push(format!(
                        "{over}kernel interface {} dropped {} received and {} sent frame(s) (softirq starved: other load on the run's CPUs)",
                        c.name, c.rx_dropped, c.tx_dropped
                    ));
                }
            }
            let t = if spec.find_max {
                // The record is the confirmation trial's: judged by the search's loss limit.
                Thresholds {
                    max_udp_loss_pct: spec.loss_pct,
                    ..t
                }
            } else {
                t
            };
            judge(&mut r, &t);
            if spec.find_max
                && r.max_loss_free_gbps.is_none()
                && !matches!(r.status, daqtune_selftest::Status::Error)
            {
                r.status = daqtune_selftest::Status::Fail;
            }
            r.notes.extend(rps_note);
            let interrupted = daqtune_probe::signals::pending();
            if interrupted.is_some() {
                r.notes.push("interrupted".into());
            }
            let code = match interrupted {
                Some(sig) => daqtune_probe::signals::exit_code(sig),
                None if r.status.is_failure() => exit::FAIL,
                None => exit::PASS,
            };
            (DpdkOutput::new(r, Some(details)), code)
        }
        Err(e) => error(spec, e.to_string(), Some(details)),
    }
}
