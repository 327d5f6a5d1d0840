//! A veth pair between two private namespaces, made for the run (and its RDMA variant with a
//! soft-RoCE device on each end). Deleting the namespaces destroys the pair.

use super::*;

impl Topology {
    /// A veth pair between two fresh namespaces, `mtu` on both ends.
    pub fn veth(mtu: u32) -> Result<Topology> {
        Self::veth_with_journal(mtu, Path::new(JOURNAL_DIR))
    }

    pub fn veth_with_journal(mtu: u32, journal_dir: &Path) -> Result<Topology> {
        let (mut t, tx_name, rx_name) = Self::begin(Kind::Veth, journal_dir)?;
        // Journal first: a SIGKILL between here and the end leaves a record to sweep.
        t.save_journal()?;
        t.tx_ns = Some(NetNs::create(&tx_name)?);
        t.rx_ns = Some(NetNs::create(&rx_name)?);
        let (tx, rx) = t.namespaces()?;
        let mut nl_tx = crate::netlink::open_in(tx)?;
        let mut nl_rx = crate::netlink::open_in(rx)?;
        nl_tx.create_veth(VETH_TX, VETH_RX, Some(rx.fd()))?;
        let a = find(&mut nl_tx, VETH_TX)?;
        let b = find(&mut nl_rx, VETH_RX)?;
        configure_end(&mut nl_tx, &a, Some(mtu), TX_ADDR, RX_ADDR, &b.mac)?;
        configure_end(&mut nl_rx, &b, Some(mtu), RX_ADDR, TX_ADDR, &a.mac)?;
        t.tx_port = Some(VETH_TX.into());
        t.rx_port = Some(VETH_RX.into());
        t.description = format!(
            "veth pair {tx_name}/{VETH_TX} {TX_ADDR} -> {rx_name}/{VETH_RX} {RX_ADDR}, MTU {mtu}"
        );
        Ok(t)
    }

    /// A veth pair between two private namespaces with a soft-RoCE device on each end, made
    /// inside its namespace: the RDMA self-test without any RDMA hardware. Needs rdma_rxe with
    /// network-namespace support (recent kernels; not 6.1) and the shared RDMA netns mode (a
    /// soft-RoCE device cannot be placed in exclusive mode). Nothing else on the host changes:
    /// deleting the namespaces destroys the veth pair, and rdma_rxe drops the devices with it.
    pub fn rdma_veth(mtu: u32) -> Result<Topology> {
        Self::rdma_veth_with_journal(mtu, Path::new(JOURNAL_DIR))
    }

    pub fn rdma_veth_with_journal(mtu: u32, journal_dir: &Path) -> Result<Topology> {
        let mut rnl = RdmaNetlink::open()?;
        if rnl.netns_mode()? == NetnsMode::Exclusive {
            return Err(Error::Unsupported(
                "the RDMA subsystem is in exclusive netns mode, where soft-RoCE devices cannot \
                 be placed in the veth pair's namespaces (`rdma system set netns shared`)"
                    .into(),
            ));
        }
        let mut t = Self::veth_with_journal(mtu, journal_dir)?;
        let pid = std::process::id();
        let names = [format!("dqt{pid}-tx"), format!("dqt{pid}-rx")];
        let (txn, rxn) = t.namespaces()?;
        for (name, ns, netdev) in [(&names[0], txn, VETH_TX), (&names[1], rxn, VETH_RX)] {
            crate::rdma_netlink::open_in(ns).and_then(|mut r| Ok(r.add_rxe(name, netdev)?))?;
        }
        t.description = format!(
            "{}; soft-RoCE {} -> {} made inside the namespaces",
            t.description, names[0], names[1]
        );
        t.rdma = Some(RdmaPlacement {
            netns_mode: NetnsMode::Shared,
            tx_dev: names[0].clone(),
            rx_dev: names[1].clone(),
            moved: false,
            soft_roce_in_namespaces: true,
            notes: Vec::new(),
        });
        Ok(t)
    }
}
