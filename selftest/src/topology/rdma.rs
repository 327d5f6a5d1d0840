//! RDMA devices on the two-port topology: each port's device moves with it (exclusive RDMA
//! netns mode) or stays visible everywhere (shared), soft-RoCE devices made where asked; shared
//! with the restore, which waits on the same queued kernel work.

use super::*;

/// How long to wait for queued kernel work (an RDMA device unregistered when its netdev moves,
/// a deleted namespace torn down) before calling it stuck. Milliseconds on a real host; on a
/// loaded 2-core machine running the guest under emulation (tests/vm/rdma-guest.sh) it took
/// over 10 s, and a run that gives up leaves its journal for `--recover` and the device
/// missing. Only a hang guard: nothing waits this long unless the kernel does.
pub(super) const KERNEL_WORK_LIMIT: Duration = Duration::from_secs(90);

/// Whether RDMA device `dev` disappears within `limit` (unregistration is queued work).
fn gone_within(rnl: &mut RdmaNetlink, dev: &str, limit: Duration) -> Result<bool> {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if rnl.device_by_name(dev)?.is_none() {
            return Ok(true);
        }
        if std::time::Instant::now() >= deadline {
            return Ok(false);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Makes soft-RoCE device `dev` on `netdev`, waiting (up to `deadline`) while an earlier copy
/// still holds the name or the netdev. Unregistration is queued work, and a copy in another
/// namespace is invisible from here in exclusive mode, so "absent from the list" does not yet
/// mean "free": the kernel answers EEXIST (netdev still bound) or ENFILE (name still taken)
/// until the copy is really gone.
pub(super) fn add_rxe_when_free(
    nl: &mut RdmaNetlink,
    dev: &str,
    netdev: &str,
    deadline: std::time::Instant,
) -> Result<()> {
    loop {
        match nl.add_rxe(dev, netdev) {
            Err(e)
                if matches!(
                    os_error(&e),
                    Some(libc::EEXIST) | Some(libc::ENFILE) | Some(libc::EBUSY)
                ) && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(50));
            }
            r => return Ok(r?),
        }
    }
}

/// How one placement attempt of an RDMA two-port run ended, when not with a topology.
enum RdmaAttempt {
    /// Try again in shared mode; dropping the topology undoes this attempt first.
    Fallback(Box<Topology>),
    Failed(Error),
}

impl From<Error> for RdmaAttempt {
    fn from(e: Error) -> Self {
        RdmaAttempt::Failed(e)
    }
}

impl From<daqtune_probe::net::netlink::Error> for RdmaAttempt {
    fn from(e: daqtune_probe::net::netlink::Error) -> Self {
        RdmaAttempt::Failed(e.into())
    }
}

impl Topology {
    fn rdma_journal(&mut self) -> Result<&mut RdmaJournal> {
        match &mut self.journal {
            Some((_, j)) => Ok(&mut j.rdma),
            None => Err(Error::Invalid("topology has no journal".into())),
        }
    }

    /// Two ports cabled back to back with their RDMA devices, each pair in a private namespace
    /// so that traffic between them must cross the cable (in one namespace the kernel and the
    /// NIC's embedded switch short-cut it). The RDMA subsystem is switched to exclusive mode
    /// and the devices move with their netdevs; where the switch is refused (EBUSY: other
    /// namespaces exist) or a driver cannot move its device (EOPNOTSUPP: soft-RoCE), the run
    /// falls back to shared mode, where every device stays visible in every namespace. Both
    /// modes are how DAQIRI's wire-loopback script sets up its ports. Everything is journaled
    /// and undone as for [`Topology::ports`], the mode last.
    pub fn rdma_ports(req: &RdmaPortsRequest) -> Result<Topology> {
        Self::rdma_ports_with_journal(
            req,
            Path::new(JOURNAL_DIR),
            std::env::var("SSH_CONNECTION").ok().as_deref(),
        )
    }

    pub fn rdma_ports_with_journal(
        req: &RdmaPortsRequest,
        journal_dir: &Path,
        ssh_connection: Option<&str>,
    ) -> Result<Topology> {
        let mut notes = Vec::new();
        if req.try_exclusive {
            match Self::rdma_attempt(req, true, journal_dir, ssh_connection, &mut notes) {
                Err(RdmaAttempt::Fallback(t)) => {
                    // Restores the mode and removes the namespaces before the shared attempt.
                    drop(t);
                }
                Err(RdmaAttempt::Failed(e)) => return Err(e),
                Ok(t) => return Ok(t),
            }
        }
        match Self::rdma_attempt(req, false, journal_dir, ssh_connection, &mut notes) {
            Ok(t) => Ok(t),
            Err(RdmaAttempt::Failed(e)) => Err(e),
            Err(RdmaAttempt::Fallback(_)) => Err(Error::Invalid(
                "the RDMA devices could not be placed in either namespace mode".into(),
            )),
        }
    }

    fn rdma_attempt(
        req: &RdmaPortsRequest,
        exclusive: bool,
        journal_dir: &Path,
        ssh_connection: Option<&str>,
        notes: &mut Vec<String>,
    ) -> std::result::Result<Topology, RdmaAttempt> {
        use RdmaAttempt::Failed;
        let mut rnl = RdmaNetlink::open()?;
        let (mut t, mut nl, records) =
            Self::prepare_ports(&req.tx_if, &req.rx_if, journal_dir, ssh_connection)?;
        t.save_journal()?;

        // The RDMA device of each port, or a soft-RoCE device made for the run.
        let ports = rnl.ports()?;
        let mut devs = Vec::new();
        for ifname in [&req.tx_if, &req.rx_if] {
            if let Some(p) = port_for_netdev(&ports, ifname) {
                devs.push(p.dev_name.clone());
                continue;
            }
            if !req.soft_roce {
                return Err(Failed(Error::Invalid(format!(
                    "{ifname} has no RDMA device (the kernel lists none on it); give \
                     --soft-roce to run soft-RoCE on it"
                ))));
            }
            let name = format!("dqt-rxe-{ifname}");
            t.rdma_journal()?.created.push(name.clone());
            t.save_journal()?;
            rnl.add_rxe(&name, ifname)?;
            let note = format!("created soft-RoCE device {name} on {ifname}");
            if !notes.contains(&note) {
                notes.push(note);
            }
            devs.push(name);
        }

        let mut mode = rnl.netns_mode()?;
        if exclusive && mode == NetnsMode::Shared {
            t.rdma_journal()?.netns_mode_was = Some(NetnsMode::Shared);
            t.save_journal()?;
            match rnl.set_netns_mode(NetnsMode::Exclusive) {
                Ok(()) => mode = NetnsMode::Exclusive,
                Err(e) => {
                    t.rdma_journal()?.netns_mode_was = None;
                    t.save_journal()?;
                    let why = match os_error(&e) {
                        Some(libc::EBUSY) => {
                            "EBUSY: other network namespaces exist (containers?)".to_string()
                        }
                        _ => e.to_string(),
                    };
                    notes.push(format!(
                        "RDMA netns mode stays shared: switching to exclusive was refused ({why})"
                    ));
                }
            }
        }
        t.create_namespaces()?;
        let moved = mode == NetnsMode::Exclusive;
        if moved {
            let (txn, rxn) = t.namespaces()?;
            let targets = [
                (devs[0].clone(), records[0].ns.clone(), txn.fd()),
                (devs[1].clone(), records[1].ns.clone(), rxn.fd()),
            ];
            for (dev, ns_name, fd) in targets {
                let d = rnl
                    .device_by_name(&dev)?
                    .ok_or_else(|| Failed(Error::Invalid(format!("RDMA device {dev} vanished"))))?;
                t.rdma_journal()?.moved.push((dev.clone(), ns_name));
                t.save_journal()?;
                if let Err(e) = rnl.move_device(&d, fd) {
                    // Nothing was moved by the failed call: forget it before the restore.
                    if let Ok(j) = t.rdma_journal() {
                        j.moved.retain(|(n, _)| n != &dev);
                    }
                    let _ = t.save_journal();
                    let code = os_error(&e);
                    if code == Some(libc::EOPNOTSUPP) && exclusive {
                        notes.push(format!(
                            "RDMA netns mode shared: {dev} cannot change namespace (EOPNOTSUPP: \
                             its driver cannot disassociate user contexts, as soft-RoCE)"
                        ));
                        return Err(RdmaAttempt::Fallback(Box::new(t)));
                    }
                    return Err(Failed(Error::Invalid(format!(
                        "moving {dev} into its namespace: {}",
                        code.map(errno_name).unwrap_or_else(|| e.to_string())
                    ))));
                }
            }
        }
        // Software devices (no PCI function behind them: rxe, siw) follow their netdev.
        let software: Vec<bool> = devs
            .iter()
            .map(|d| {
                !daqtune_probe::Host::live().exists(&format!("/sys/class/infiniband/{d}/device"))
            })
            .collect();
        if !moved {
            // Journaled before the netdevs move, which unregisters these devices: a run killed
            // in between must still get them made again.
            for (i, dev) in devs.iter().enumerate() {
                let j = t.rdma_journal()?;
                if software[i] && !j.created.contains(dev) {
                    j.recreate.push((dev.clone(), records[i].name.clone()));
                }
            }
            t.save_journal()?;
        }
        t.place_ports(&mut nl, &records, req.mtu)?;

        // rdma_rxe unregisters its device when the netdev leaves the namespace (asynchronously):
        // make it again on the moved netdev, from inside that namespace, and again at home
        // afterwards.
        let soft_roce_in_namespaces = !moved && software.iter().any(|s| *s);
        if !moved {
            // Opened again by name: `t` is changed (journal) while they are used.
            let txn = NetNs::open_named(&records[0].ns)?;
            let rxn = NetNs::open_named(&records[1].ns)?;
            for (i, ns) in [(0usize, &txn), (1usize, &rxn)] {
                let dev = &devs[i];
                let ifname = &records[i].name;
                if !software[i] || !gone_within(&mut rnl, dev, KERNEL_WORK_LIMIT)? {
                    continue;
                }
                let deadline = std::time::Instant::now() + KERNEL_WORK_LIMIT;
                let copy = crate::rdma_netlink::open_in(ns)
                    .and_then(|mut r| {
                        add_rxe_when_free(&mut r, dev, ifname, deadline)?;
                        Ok(r.device_by_name(dev)?)
                    })
                    .map_err(|e| {
                        Failed(Error::Invalid(format!(
                            "{dev} was unregistered when {ifname} moved into its namespace \
                             (soft-RoCE follows its netdev) and could not be made again there: {e}"
                        )))
                    })?;
                if let Some(copy) = copy {
                    t.rdma_journal()?.copies.push((dev.clone(), copy.index));
                    t.save_journal()?;
                }
                notes.push(format!(
                    "{dev} (soft-RoCE) was unregistered when {ifname} moved; made again inside \
                     the namespace"
                ));
            }
        }
        t.description = format!(
            "{}; RDMA {} -> {}, netns mode {}{}",
            t.description,
            devs[0],
            devs[1],
            mode.as_str(),
            if moved {
                " (devices moved with their ports)"
            } else {
                " (devices visible everywhere)"
            }
        );
        t.rdma = Some(RdmaPlacement {
            netns_mode: mode,
            tx_dev: devs[0].clone(),
            rx_dev: devs[1].clone(),
            moved,
            soft_roce_in_namespaces,
            notes: notes.clone(),
        });
        Ok(t)
    }
}
