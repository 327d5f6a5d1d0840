//! The ethtool netlink client (daqtune_probe::net::ethtool) against a real kernel: a veth pair
//! in a network namespace this test creates (an unnamed one, held only by the test's thread,
//! so nothing is left behind). veth has channels and features: read, set, read back, restore.
//! Skips with the reason when not root.

use daqtune_probe::net::ethtool::{Client, Group, GroupState, Settings};
use daqtune_selftest::netlink::Netlink;

fn settings(pairs: &[(&str, u32)]) -> Settings {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

#[test]
fn veth_channels_and_gro_set_and_restored() {
    if !daqtune_testkit::require_root_or_skip("a network namespace and a veth pair") {
        return;
    }
    let r = std::thread::spawn(|| -> Result<(), String> {
        // This thread alone moves into a fresh namespace; it ends with the test.
        daqtune_probe::sys::unshare_net().map_err(|e| format!("unshare: {e}"))?;
        let mut nl = Netlink::open().map_err(|e| e.to_string())?;
        nl.create_veth("dqt-eth0", "dqt-eth1", None)
            .map_err(|e| e.to_string())?;
        let mut c = Client::open().map_err(|e| format!("ethtool netlink: {e}"))?;

        // Channels: veth reports RX/TX queues up to the CPU count.
        let GroupState::Channels(ch) = c
            .get(Group::Channels, "dqt-eth0")
            .map_err(|e| e.to_string())?
        else {
            return Err("not channels".into());
        };
        let (rx, max) = (ch.rx.ok_or("no rx count")?, ch.rx_max.ok_or("no rx max")?);
        let want = if rx == max { 1 } else { max };
        c.set(Group::Channels, "dqt-eth0", &settings(&[("rx", want)]))
            .map_err(|e| format!("set channels: {e}"))?;
        let back = c
            .get(Group::Channels, "dqt-eth0")
            .map_err(|e| e.to_string())?;
        assert_eq!(back.get("rx"), Some(want), "channels read back");
        c.set(Group::Channels, "dqt-eth0", &settings(&[("rx", rx)]))
            .map_err(|e| format!("restore channels: {e}"))?;
        assert_eq!(
            c.get(Group::Channels, "dqt-eth0")
                .map_err(|e| e.to_string())?
                .get("rx"),
            Some(rx)
        );

        // GRO by the kernel's name.
        let f = c
            .get(Group::Features, "dqt-eth0")
            .map_err(|e| e.to_string())?;
        let gro = f.get("rx-gro").ok_or("no rx-gro feature")?;
        c.set(
            Group::Features,
            "dqt-eth0",
            &settings(&[("rx-gro", 1 - gro)]),
        )
        .map_err(|e| format!("set gro: {e}"))?;
        let back = c
            .get(Group::Features, "dqt-eth0")
            .map_err(|e| e.to_string())?;
        assert_eq!(back.get("rx-gro"), Some(1 - gro), "GRO read back");
        c.set(Group::Features, "dqt-eth0", &settings(&[("rx-gro", gro)]))
            .map_err(|e| format!("restore gro: {e}"))?;
        assert_eq!(
            c.get(Group::Features, "dqt-eth0")
                .map_err(|e| e.to_string())?
                .get("rx-gro"),
            Some(gro)
        );

        // veth has no rings or pause: the driver's EOPNOTSUPP, as checks report it.
        let e = c
            .get(Group::Pause, "dqt-eth0")
            .expect_err("veth has no pause");
        assert_eq!(e.raw_os_error(), Some(libc::EOPNOTSUPP));
        // An unknown key is refused before anything is sent.
        assert!(c
            .set(Group::Rings, "dqt-eth0", &settings(&[("bogus", 1)]))
            .is_err());
        Ok(())
    })
    .join()
    .expect("thread");
    r.expect("live ethtool netlink on veth");
}
