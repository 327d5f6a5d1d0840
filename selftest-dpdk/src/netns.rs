//! The veth topology: a private network namespace for this process (it dies with the process,
//! so nothing is left behind even after SIGKILL) holding both ends of a veth pair, made with
//! probe's rtnetlink client (no iproute2). The namespace and mount calls are
//! `daqtune_probe::sys`'s; every remaining `unsafe` block is a libc call on memory the block
//! owns (the packet sockets' statistics and addresses).

use std::io;

/// Moves the calling thread into a new, anonymous network namespace. Threads it creates later
/// (DPDK's lcores) inherit it. Needs CAP_SYS_ADMIN.
pub fn enter_private_netns() -> io::Result<()> {
    daqtune_probe::sys::unshare_net()
}

/// Creates the veth pair `a` <-> `b` with `mtu` in the calling thread's namespace, turns off
/// IPv6 on both ends (no router solicitations mixed into the measured traffic) and sets them up.
pub fn create_veth_pair(a: &str, b: &str, mtu: u32) -> io::Result<()> {
    let nl_err = |e: daqtune_probe::net::netlink::Error| io::Error::other(e.to_string());
    let mut nl = daqtune_probe::net::netlink::route::Netlink::open().map_err(nl_err)?;
    nl.create_veth(a, b, None).map_err(nl_err)?;
    for name in [a, b] {
        // Best effort: a kernel without IPv6 has no such file, which is just as good.
        let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{name}/disable_ipv6"), "1");
        let link = nl
            .link_by_name(name)
            .map_err(nl_err)?
            .ok_or_else(|| io::Error::other(format!("{name} not found after creation")))?;
        nl.set_mtu(link.index, mtu).map_err(nl_err)?;
        nl.set_up(link.index, true).map_err(nl_err)?;
    }
    Ok(())
}

/// CPU mask in the format of `rps_cpus` (comma-separated 32-bit hex words, most significant
/// first).
pub fn cpu_mask_hex(cpu: usize) -> String {
    let words = cpu / 32 + 1;
    (0..words)
        .rev()
        .map(|w| {
            let v: u32 = if w == cpu / 32 { 1 << (cpu % 32) } else { 0 };
            format!("{v:08x}")
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Steers the kernel's receive processing of `iface` (in this thread's network namespace) to
/// `cpu` with RPS. On a veth pair the sender's CPU otherwise runs the whole receive path
/// (netif_receive, the packet socket's copy into the ring) as softirq after each frame; with
/// RPS the receiving CPU does that part. sysfs shows the namespace of whoever mounted it, so a
/// fresh sysfs is mounted on /sys in a private mount namespace of this process (it vanishes
/// with the process; nothing propagates to the host's mounts).
pub fn steer_rx_to(iface: &str, cpu: usize) -> io::Result<()> {
    let c = |s: &str| {
        std::ffi::CString::new(s).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
    };
    let (root, sys_dir, sysfs) = (c("/")?, c("/sys")?, c("sysfs")?);
    use daqtune_probe::sys::{self, MsFlags};
    sys::unshare_mount()?;
    // MS_REC|MS_PRIVATE only changes propagation inside the new (private) mount namespace.
    sys::mount(
        None,
        &root,
        None,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None,
    )?;
    // A new sysfs instance over /sys of this mount namespace only.
    sys::mount(Some(&sysfs), &sys_dir, Some(&sysfs), MsFlags::empty(), None)?;
    std::fs::write(
        format!("/sys/class/net/{iface}/queues/rx-0/rps_cpus"),
        cpu_mask_hex(cpu),
    )
}

/// AF_PACKET sockets of this process bound to `ifindex` (all of them when `None`), with the
/// index each is bound to.
fn packet_sockets(ifindex: Option<i32>) -> Vec<(i32, i32)> {
    let mut out = Vec::new();
    let host = daqtune_probe::Host::live();
    let Ok(fds) = host.read_dir("/proc/self/fd") else {
        return out;
    };
    for name in fds {
        let Ok(fd) = name.parse::<i32>() else {
            continue;
        };
        let is_socket = host
            .read_link(&format!("/proc/self/fd/{fd}"))
            .is_ok_and(|t| t.starts_with("socket:"));
        if !is_socket {
            continue;
        }
        // SAFETY: sockaddr_ll is plain data (zeroed is valid); getsockname writes at most
        // `len` bytes into it; the fd is only queried, never closed or changed.
        let (rc, sa) = unsafe {
            let mut sa: libc::sockaddr_ll = std::mem::zeroed();
            let mut len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            let rc = libc::getsockname(fd, (&mut sa as *mut libc::sockaddr_ll).cast(), &mut len);
            (rc, sa)
        };
        if rc != 0 || i32::from(sa.sll_family) != libc::AF_PACKET {
            continue;
        }
        if ifindex.is_none_or(|i| i == sa.sll_ifindex) {
            out.push((fd, sa.sll_ifindex));
        }
    }
    out
}

/// Frames `iface` has transmitted or dropped on transmit (both left the ring), from
/// /proc/net/dev; counted since the interface was made.
fn tx_packets(iface: &str) -> Option<u64> {
    let t = daqtune_probe::Host::live()
        .read_string("/proc/net/dev")
        .ok()?;
    parse_net_dev(&t)
        .into_iter()
        .find(|c| c.name == iface)
        .map(|c| c.tx_packets + c.tx_dropped)
}

/// Kicks the af_packet TX ring of `iface` (an empty `sendto`, as the PMD does after each
/// burst) until the kernel has transmitted (or dropped) `sent` frames in all since the
/// interface was made, or `limit` passes. The PMD counts a
/// frame as sent once it is in the ring; when a kick finds the socket's send buffer full
/// (receive processing deferred), the rest waits in the ring for the next kick, and after the
/// last burst there is none.
pub fn flush_packet_tx(iface: &str, sent: u64, limit: std::time::Duration) {
    let Ok(name) = std::ffi::CString::new(iface) else {
        return;
    };
    // SAFETY: name is a valid C string for the call.
    let idx = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if idx == 0 {
        return;
    }
    let fds: Vec<i32> = packet_sockets(Some(idx as i32))
        .into_iter()
        .map(|(fd, _)| fd)
        .collect();
    let end = std::time::Instant::now() + limit;
    while tx_packets(iface).is_some_and(|n| n < sent) && std::time::Instant::now() < end {
        for &fd in &fds {
            // SAFETY: a zero-length sendto with no buffer and no address on a socket this
            // process owns: the af_packet "transmit what is in the ring" request.
            unsafe {
                libc::sendto(
                    fd,
                    std::ptr::null(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null(),
                    0,
                );
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

pub use daqtune_report::dpdk::PacketSocketStats;

const PACKET_STATISTICS: libc::c_int = 6;

/// Reads (and thereby resets) PACKET_STATISTICS of every AF_PACKET socket this process holds:
/// the af_packet PMD's rings. DPDK 22.11's af_packet does not report ring drops as imissed,
/// so they are read here, by interface.
pub fn packet_socket_stats() -> Vec<PacketSocketStats> {
    let mut out = Vec::new();
    for (fd, ifindex) in packet_sockets(None) {
        // struct tpacket_stats: two u32 counters.
        let mut st = [0u32; 2];
        let read = daqtune_selftest::sys::socket_option_words(
            fd,
            libc::SOL_PACKET,
            PACKET_STATISTICS,
            &mut st,
        );
        if !matches!(read, Ok(2)) {
            continue;
        }
        let mut name = [0 as libc::c_char; libc::IF_NAMESIZE];
        // SAFETY: name has IF_NAMESIZE bytes as if_indextoname requires; on success it holds
        // a NUL-terminated string.
        let iface = unsafe {
            if libc::if_indextoname(ifindex as libc::c_uint, name.as_mut_ptr()).is_null() {
                format!("ifindex {ifindex}")
            } else {
                std::ffi::CStr::from_ptr(name.as_ptr())
                    .to_string_lossy()
                    .into_owned()
            }
        };
        out.push(PacketSocketStats {
            iface,
            packets: u64::from(st[0]),
            drops: u64::from(st[1]),
        });
    }
    out
}

pub use daqtune_report::dpdk::IfCounters;

/// Parses /proc/net/dev text (the calling thread's namespace). Malformed lines are skipped.
pub fn parse_net_dev(text: &str) -> Vec<IfCounters> {
    text.lines()
        .skip(2)
        .filter_map(|l| {
            let (name, rest) = l.split_once(':')?;
            let f: Vec<u64> = rest
                .split_whitespace()
                .map(|x| x.parse().ok())
                .collect::<Option<_>>()?;
            if f.len() < 16 {
                return None;
            }
            Some(IfCounters {
                name: name.trim().to_string(),
                rx_packets: f[1],
                rx_dropped: f[3],
                tx_packets: f[9],
                tx_dropped: f[11],
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #[test]
        fn net_dev_never_panics(t in "\\PC{0,300}") {
            let _ = parse_net_dev(&t);
        }

    }

    #[test]
    fn rps_masks() {
        assert_eq!(cpu_mask_hex(0), "00000001");
        assert_eq!(cpu_mask_hex(1), "00000002");
        assert_eq!(cpu_mask_hex(31), "80000000");
        assert_eq!(cpu_mask_hex(33), "00000002,00000000");
    }

    #[test]
    fn net_dev_parsing() {
        let t = "Inter-|   Receive                                                |  Transmit\n face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    lo:       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0\n  dqt1: 8603914   81169    0   12    0     0          0         0        0       0    0    3    0     0       0          0\ngarbage line\n  bad: 1 2 3\n";
        let v = parse_net_dev(t);
        assert_eq!(v.len(), 2);
        assert_eq!(
            v[1],
            IfCounters {
                name: "dqt1".into(),
                rx_packets: 81169,
                rx_dropped: 12,
                tx_packets: 0,
                tx_dropped: 3
            }
        );
        assert!(parse_net_dev("").is_empty());
        assert!(parse_net_dev("(null)").is_empty());
    }
}
