//! Putting the host back: a journal's ports, namespaces and RDMA devices restored on every exit
//! path, and the sweep that finds what killed runs left behind.

use super::rdma::{add_rxe_when_free, KERNEL_WORK_LIMIT};
use super::*;

/// Finds the namespace a journal calls home: ours, init's, or a named one.
fn find_home(id: &NsId) -> Option<NetNs> {
    let mut candidates = vec![
        NetNs::current().ok(),
        NetNs::open(Path::new("/proc/1/ns/net")).ok(),
    ];
    for name in netns::list_named() {
        candidates.push(NetNs::open_named(&name).ok());
    }
    candidates
        .into_iter()
        .flatten()
        .find(|n| n.id().ok().as_ref() == Some(id))
}

/// Puts ports back and removes namespaces, as recorded. Returns what could not be done.
pub fn restore(j: &Journal, home: Option<&NetNs>) -> Vec<String> {
    let mut warnings = Vec::new();
    let found;
    let home = match home {
        Some(h) => Some(h),
        None => {
            found = find_home(&j.home_ns);
            found.as_ref()
        }
    };
    if !j.rdma.is_empty() {
        if let Some(home) = home {
            warnings.extend(restore_rdma_moves(&j.rdma, home));
        }
    }
    let doomed = doomed_rdma_devices(j);
    for p in &j.ports {
        let Some(home) = home else {
            warnings.push(format!(
                "{}: its home namespace is gone; left in {}",
                p.name, p.ns
            ));
            continue;
        };
        // Bring the port home if it is still in our namespace.
        if let Ok(ns) = NetNs::open_named(&p.ns) {
            match crate::netlink::open_in(&ns).and_then(|mut nl| {
                if let Some(l) = nl.link_by_name(&p.name)? {
                    nl.set_up(l.index, false)?;
                    nl.move_to_ns(l.index, home.fd())?;
                }
                Ok(())
            }) {
                Ok(()) => {}
                Err(e) => warnings.push(format!("{}: move back: {e}", p.name)),
            }
        }
        if let Err(e) = crate::netlink::open_in(home).and_then(|mut nl| restore_port(&mut nl, p)) {
            warnings.push(format!("{}: restore: {e}", p.name));
        }
    }
    for name in &j.namespaces {
        if let Err(e) = netns::delete_named(name) {
            warnings.push(format!("namespace {name}: {e}"));
        }
    }
    if !j.rdma.is_empty() {
        warnings.extend(restore_rdma_rest(&j.rdma, &doomed));
    }
    warnings
}

/// Brings RDMA devices moved into daqtune namespaces home (in exclusive mode a device is only
/// visible from its namespace, so the request is made from there). Deleting the namespace
/// would return them too, but only once the kernel has finished tearing it down.
fn restore_rdma_moves(r: &RdmaJournal, home: &NetNs) -> Vec<String> {
    let mut warnings = Vec::new();
    for (dev, ns_name) in &r.moved {
        let Ok(ns) = NetNs::open_named(ns_name) else {
            continue; // namespace gone: the kernel has returned the device already
        };
        let moved =
            crate::rdma_netlink::open_in(&ns).and_then(|mut nl| match nl.device_by_name(dev)? {
                Some(d) => Ok(nl.move_device(&d, home.fd())?),
                None => Ok(()),
            });
        if let Err(e) = moved {
            warnings.push(format!("RDMA device {dev}: move back from {ns_name}: {e}"));
        }
    }
    warnings
}

/// What the re-creation of soft-RoCE device `dev` on `netdev` does next, given the kernel's
/// RDMA ports and the indexes of the devices that are doomed (bound to the netdev while it was
/// away; see [`doomed_rdma_devices`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RecreateStep {
    /// A device of that name that will stay sits on the netdev (made by an earlier restore).
    Done,
    /// No device of that name is left: make it.
    Make,
    /// A device of that name is still listed (a copy the kernel is unregistering): wait.
    Wait,
}

fn recreate_step(dev: &str, netdev: &str, ports: &[RdmaPort], doomed: &[u32]) -> RecreateStep {
    let mut named = ports.iter().filter(|p| p.dev_name == dev).peekable();
    if named.peek().is_none() {
        return RecreateStep::Make;
    }
    if named.any(|p| p.netdev.as_deref() == Some(netdev) && !doomed.contains(&p.dev_index)) {
        RecreateStep::Done
    } else {
        RecreateStep::Wait
    }
}

/// The kernel indexes of the RDMA devices that will vanish by themselves: the copies the run
/// journaled, and any device of a to-be-recreated name still bound to its netdev while that
/// netdev is away in a daqtune namespace (the run may have been killed between making a copy and
/// journaling it; the original, too, is only queued for unregistration when its netdev leaves).
/// Read before the ports go home, because afterwards a doomed copy and a device made again look
/// alike (same name, same netdev) until the kernel's queued work removes the copy.
fn doomed_rdma_devices(j: &Journal) -> Vec<u32> {
    let mut doomed: Vec<u32> = j.rdma.copies.iter().map(|(_, index)| *index).collect();
    for (dev, netdev) in &j.rdma.recreate {
        let Some(port) = j.ports.iter().find(|p| &p.name == netdev) else {
            continue;
        };
        let Ok(ns) = NetNs::open_named(&port.ns) else {
            continue;
        };
        let away = crate::netlink::open_in(&ns)
            .and_then(|mut nl| Ok(nl.link_by_name(netdev)?))
            .is_ok_and(|l| l.is_some());
        if !away {
            continue;
        }
        // From inside (exclusive mode hides it from home) and from home (the original).
        for rnl in [
            crate::rdma_netlink::open_in(&ns),
            RdmaNetlink::open().map_err(Error::from),
        ] {
            if let Ok(Some(d)) = rnl.and_then(|mut r| Ok(r.device_by_name(dev)?)) {
                if !doomed.contains(&d.index) {
                    doomed.push(d.index);
                }
            }
        }
    }
    doomed
}

/// After the ports are home and the namespaces deleted: soft-RoCE devices this run made are
/// deleted, those that vanished with their netdev's move are made again, and the namespace
/// mode goes back to what it was.
fn restore_rdma_rest(r: &RdmaJournal, doomed: &[u32]) -> Vec<String> {
    let mut warnings = Vec::new();
    let mut nl = match RdmaNetlink::open() {
        Ok(nl) => nl,
        Err(e) => return vec![format!("RDMA netlink: {e}")],
    };
    for dev in &r.created {
        match nl.device_by_name(dev) {
            Ok(Some(d)) => {
                if let Err(e) = nl.delete_link(&d) {
                    warnings.push(format!("soft-RoCE device {dev}: delete: {e}"));
                }
            }
            Ok(None) => {}
            Err(e) => warnings.push(format!("soft-RoCE device {dev}: {e}")),
        }
    }
    for (dev, netdev) in &r.recreate {
        // The copy made inside the namespace is unregistered (asynchronously) now that the
        // netdev is home: wait for it to go, then make the device again where it was.
        let deadline = std::time::Instant::now() + KERNEL_WORK_LIMIT;
        let mut last_error = None;
        loop {
            let step = match nl.ports() {
                Ok(ports) => recreate_step(dev, netdev, &ports, doomed),
                Err(e) => {
                    last_error = Some(e.to_string());
                    RecreateStep::Wait
                }
            };
            match step {
                RecreateStep::Done => break,
                RecreateStep::Make => {
                    if let Err(e) = add_rxe_when_free(&mut nl, dev, netdev, deadline) {
                        warnings.push(format!(
                            "soft-RoCE device {dev} on {netdev}: make again: {e}"
                        ));
                    }
                    break;
                }
                RecreateStep::Wait => {}
            }
            if std::time::Instant::now() > deadline {
                let why = last_error
                    .map(|e| format!(" (RDMA netlink: {e})"))
                    .unwrap_or_default();
                warnings.push(format!(
                    "soft-RoCE device {dev} did not go away with its namespace copy{why}; make it \
                     again with `rdma link add {dev} type rxe netdev {netdev}`"
                ));
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
    if let Some(was) = r.netns_mode_was {
        warnings.extend(restore_netns_mode(&mut nl, was));
    }
    warnings
}

/// Switches the namespace mode back. The kernel answers EBUSY while any namespace other than
/// the initial one exists, and a deleted namespace is torn down asynchronously, so this waits
/// for ours to go (up to [`KERNEL_WORK_LIMIT`]: namespace teardown is queued work, slow on a
/// loaded host).
fn restore_netns_mode(nl: &mut RdmaNetlink, was: NetnsMode) -> Vec<String> {
    let deadline = std::time::Instant::now() + KERNEL_WORK_LIMIT;
    loop {
        match nl.netns_mode() {
            Ok(m) if m == was => return Vec::new(),
            Ok(_) => {}
            Err(e) => return vec![format!("RDMA netns mode: {e}")],
        }
        match nl.set_netns_mode(was) {
            Ok(()) => return Vec::new(),
            Err(e) if os_error(&e) == Some(libc::EBUSY) && std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            Err(e) => {
                return vec![format!(
                    "RDMA netns mode left {} (was {}): {e}; other network namespaces exist: \
                     `rdma system set netns {}` once they are gone",
                    was_other(was).as_str(),
                    was.as_str(),
                    was.as_str()
                )]
            }
        }
    }
}

fn was_other(m: NetnsMode) -> NetnsMode {
    match m {
        NetnsMode::Shared => NetnsMode::Exclusive,
        NetnsMode::Exclusive => NetnsMode::Shared,
    }
}

fn exists_err(e: &daqtune_probe::net::netlink::Error) -> bool {
    e.raw_os_error() == Some(libc::EEXIST)
}

fn restore_port(nl: &mut Netlink, p: &PortRecord) -> Result<()> {
    let link = nl.link_by_name(&p.name)?.ok_or_else(|| {
        Error::Invalid(format!(
            "{} is neither in its daqtune namespace nor at home",
            p.name
        ))
    })?;
    if link.mtu != p.mtu {
        nl.set_mtu(link.index, p.mtu)?;
    }
    for a in &p.addrs {
        let mut a = a.clone();
        a.index = link.index;
        match nl.add_addr(&a) {
            Err(e) if !exists_err(&e) => return Err(e.into()),
            _ => {}
        }
    }
    // Routes through a link need it up; a port that was down had only routes the kernel
    // keeps flagged `linkdown`, which come back with the link.
    nl.set_up(link.index, true)?;
    for r in &p.routes {
        let mut r = r.clone();
        if r.oif == Some(p.index) {
            r.oif = Some(link.index);
        }
        match nl.add_route(&r) {
            Err(e) if !exists_err(&e) => return Err(e.into()),
            _ => {}
        }
    }
    for n in &p.neighbours {
        nl.add_permanent_neighbour(link.index, n.ip, &n.mac)?;
    }
    if !p.up {
        nl.set_up(link.index, false)?;
    }
    Ok(())
}

/// Restores what killed runs left behind: journals whose owner is gone, then any
/// `daqtune-<pid>-*` namespace whose pid is not running. Never touches other namespaces.
pub fn recover_leftovers() -> Vec<String> {
    recover_in(Path::new(JOURNAL_DIR))
}

pub fn recover_in(dir: &Path) -> Vec<String> {
    let mut notes = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    entries.sort();
    for path in entries {
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let j = match Journal::parse(&text) {
            Ok(j) => j,
            Err(e) => {
                notes.push(format!(
                    "{}: unreadable journal ({e}); left alone",
                    path.display()
                ));
                continue;
            }
        };
        if j.owner_alive() {
            continue;
        }
        let w = restore(&j, None);
        if w.is_empty() {
            let _ = std::fs::remove_file(&path);
            let rdma = if j.rdma.is_empty() {
                String::new()
            } else {
                format!(
                    ", RDMA: {} device(s) moved, {} made, {} to make again{}",
                    j.rdma.moved.len(),
                    j.rdma.created.len(),
                    j.rdma.recreate.len(),
                    j.rdma
                        .netns_mode_was
                        .map(|m| format!(", netns mode back to {}", m.as_str()))
                        .unwrap_or_default()
                )
            };
            notes.push(format!(
                "restored what run {} left behind ({} namespace(s), {} port(s){rdma})",
                j.pid,
                j.namespaces.len(),
                j.ports.len()
            ));
        } else {
            notes.extend(w);
            notes.push(format!(
                "journal {} kept for the next run to retry",
                path.display()
            ));
        }
    }
    for name in netns::list_named() {
        let Some(pid) = netns::owner_pid(&name) else {
            continue;
        };
        if pid == std::process::id() || daqtune_probe::Host::live().exists(&format!("/proc/{pid}"))
        {
            continue;
        }
        match netns::delete_named(&name) {
            Ok(()) => notes.push(format!("removed leftover namespace {name}")),
            Err(e) => notes.push(format!("leftover namespace {name}: {e}")),
        }
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rdma_port(index: u32, dev: &str, netdev: Option<&str>) -> RdmaPort {
        RdmaPort {
            dev_index: index,
            dev_name: dev.into(),
            port: 1,
            state: Some(4),
            netdev_index: netdev.map(|_| 7),
            netdev: netdev.map(String::from),
        }
    }

    #[test]
    fn a_doomed_copy_on_the_netdev_is_not_the_device_made_again() {
        use RecreateStep::*;
        // The run's copy (index 8) is still listed on dqa after dqa came home: the kernel has
        // queued its unregistration, so it is waited for, not taken for the restored rxe0 (the
        // lifecycle under load: rxe0 was later gone, or made again after rxe1).
        let copy = [rdma_port(8, "rxe0", Some("dqa"))];
        assert_eq!(recreate_step("rxe0", "dqa", &copy, &[8]), Wait);
        // Gone: make it. Made again (a new index): done, also when a recover runs twice.
        assert_eq!(recreate_step("rxe0", "dqa", &[], &[8]), Make);
        let made = [
            rdma_port(10, "rxe0", Some("dqa")),
            rdma_port(11, "rxe1", Some("dqb")),
        ];
        assert_eq!(recreate_step("rxe0", "dqa", &made, &[8, 9]), Done);
        assert_eq!(recreate_step("rxe1", "dqb", &made, &[8, 9]), Done);
        // Listed but unregistering (its netdev no longer shown), or on another netdev: wait.
        assert_eq!(
            recreate_step("rxe0", "dqa", &[rdma_port(8, "rxe0", None)], &[]),
            Wait
        );
        assert_eq!(
            recreate_step("rxe0", "dqa", &[rdma_port(3, "rxe0", Some("eth9"))], &[]),
            Wait
        );
        // Another device on the netdev does not count as rxe0.
        assert_eq!(
            recreate_step("rxe0", "dqa", &[rdma_port(12, "rxe7", Some("dqa"))], &[]),
            Make
        );
    }

    #[test]
    fn journal_round_trip_and_garbage() {
        let j = Journal {
            version: 1,
            pid: 42,
            starttime: 7,
            home_ns: NsId {
                dev: 4,
                ino: 4026531840,
            },
            namespaces: vec!["daqtune-42-0-tx".into()],
            ports: vec![],
            rdma: RdmaJournal {
                netns_mode_was: Some(NetnsMode::Shared),
                moved: vec![("mlx5_0".into(), "daqtune-42-0-tx".into())],
                created: vec![],
                recreate: vec![("rxe0".into(), "dqa".into())],
                copies: vec![("rxe0".into(), 8)],
            },
        };
        let dir = tempfile::tempdir().expect("tmp");
        let p = dir.path().join("j.json");
        j.save(&p).expect("save");
        let text = std::fs::read_to_string(&p).expect("read");
        assert!(text.contains("\"netns_mode_was\": \"shared\""), "{text}");
        let back = Journal::parse(&text).expect("parse");
        assert_eq!(back, j);
        // Journals written before the RDMA part existed still parse (nothing RDMA to undo).
        let old = text.split("\"rdma\"").next().expect("prefix").trim_end();
        let old = format!("{}}}", old.trim_end_matches(','));
        let back = Journal::parse(&old).expect("old journal");
        assert!(back.rdma.is_empty());
        assert!(Journal::parse("").is_err());
        assert!(Journal::parse("{\"version\":1}").is_err());
        // A dead owner with an unreadable journal is reported, not acted on.
        std::fs::write(dir.path().join("bad.json"), "{garbage").expect("write");
        let notes = recover_in(dir.path());
        assert!(notes.iter().any(|n| n.contains("unreadable")));
    }
}
