//! The veth topology: a private network namespace for this process (it dies with the process,
//! so nothing is left behind even after SIGKILL) holding both ends of a veth pair, made over
//! rtnetlink (no iproute2). Every `unsafe` block of this module is a libc call on memory the
//! block owns.

use std::io;

const NLMSG_HDR: usize = 16;
const IFINFOMSG: usize = 16;
const RTM_NEWLINK: u16 = 16;
const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_ACK: u16 = 0x4;
const NLM_F_EXCL: u16 = 0x200;
const NLM_F_CREATE: u16 = 0x400;
const IFLA_IFNAME: u16 = 3;
const IFLA_MTU: u16 = 4;
const IFLA_LINKINFO: u16 = 18;
const IFLA_INFO_KIND: u16 = 1;
const IFLA_INFO_DATA: u16 = 2;
const VETH_INFO_PEER: u16 = 1;
const IFF_UP: u32 = 0x1;

/// Moves the calling thread into a new, anonymous network namespace. Threads it creates later
/// (DPDK's lcores) inherit it. Needs CAP_SYS_ADMIN.
pub fn enter_private_netns() -> io::Result<()> {
    // SAFETY: unshare takes a flag word and touches no memory of ours.
    let rc = unsafe { libc::unshare(libc::CLONE_NEWNET) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// A netlink message under construction: header, ifinfomsg, attributes (nested ones patched
/// with their length when closed).
struct Msg {
    buf: Vec<u8>,
}

impl Msg {
    fn new(ty: u16, flags: u16, seq: u32, ifi_flags: u32, ifi_change: u32) -> Msg {
        let mut buf = vec![0u8; NLMSG_HDR + IFINFOMSG];
        buf[4..6].copy_from_slice(&ty.to_ne_bytes());
        buf[6..8].copy_from_slice(&flags.to_ne_bytes());
        buf[8..12].copy_from_slice(&seq.to_ne_bytes());
        // ifinfomsg: family AF_UNSPEC, type 0, index 0 (the kernel finds the link by name).
        buf[NLMSG_HDR + 8..NLMSG_HDR + 12].copy_from_slice(&ifi_flags.to_ne_bytes());
        buf[NLMSG_HDR + 12..NLMSG_HDR + 16].copy_from_slice(&ifi_change.to_ne_bytes());
        Msg { buf }
    }

    fn attr(&mut self, ty: u16, data: &[u8]) {
        let len = 4 + data.len();
        self.buf.extend_from_slice(&(len as u16).to_ne_bytes());
        self.buf.extend_from_slice(&ty.to_ne_bytes());
        self.buf.extend_from_slice(data);
        self.buf.resize(align4(self.buf.len()), 0);
    }

    fn name(&mut self, ty: u16, s: &str) {
        let mut v = s.as_bytes().to_vec();
        v.push(0);
        self.attr(ty, &v);
    }

    fn begin(&mut self, ty: u16) -> usize {
        let at = self.buf.len();
        self.attr(ty, &[]);
        at
    }

    fn end(&mut self, at: usize) {
        let len = (self.buf.len() - at) as u16;
        self.buf[at..at + 2].copy_from_slice(&len.to_ne_bytes());
    }

    /// An embedded ifinfomsg (the veth peer carries one before its attributes).
    fn raw_ifinfo(&mut self) {
        self.buf.extend_from_slice(&[0u8; IFINFOMSG]);
    }

    fn finish(mut self) -> Vec<u8> {
        let len = self.buf.len() as u32;
        self.buf[0..4].copy_from_slice(&len.to_ne_bytes());
        self.buf
    }
}

/// The request that creates `a` <-> `b` with both MTUs set.
fn veth_request(a: &str, b: &str, mtu: u32, seq: u32) -> Vec<u8> {
    let mut m = Msg::new(
        RTM_NEWLINK,
        NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL,
        seq,
        0,
        0,
    );
    m.name(IFLA_IFNAME, a);
    m.attr(IFLA_MTU, &mtu.to_ne_bytes());
    let li = m.begin(IFLA_LINKINFO);
    m.name(IFLA_INFO_KIND, "veth");
    let data = m.begin(IFLA_INFO_DATA);
    let peer = m.begin(VETH_INFO_PEER);
    m.raw_ifinfo();
    m.name(IFLA_IFNAME, b);
    m.attr(IFLA_MTU, &mtu.to_ne_bytes());
    m.end(peer);
    m.end(data);
    m.end(li);
    m.finish()
}

fn up_request(name: &str, seq: u32) -> Vec<u8> {
    let mut m = Msg::new(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK, seq, IFF_UP, IFF_UP);
    m.name(IFLA_IFNAME, name);
    m.finish()
}

/// The kernel's answer to one request: 0 = ok, else a negative errno.
fn parse_ack(resp: &[u8], seq: u32) -> Option<i32> {
    let mut off = 0;
    while off + NLMSG_HDR <= resp.len() {
        let len = u32::from_ne_bytes(resp[off..off + 4].try_into().ok()?) as usize;
        let ty = u16::from_ne_bytes(resp[off + 4..off + 6].try_into().ok()?);
        let s = u32::from_ne_bytes(resp[off + 8..off + 12].try_into().ok()?);
        if len < NLMSG_HDR || off + len > resp.len() {
            return None;
        }
        if ty == NLMSG_ERROR && s == seq && len >= NLMSG_HDR + 4 {
            return Some(i32::from_ne_bytes(
                resp[off + NLMSG_HDR..off + NLMSG_HDR + 4].try_into().ok()?,
            ));
        }
        off += align4(len);
    }
    None
}

/// A NETLINK_ROUTE socket of the calling thread's namespace.
struct Rtnl {
    fd: i32,
    seq: u32,
}

impl Rtnl {
    fn open() -> io::Result<Rtnl> {
        // SAFETY: plain socket(2) call; the fd is owned by the returned value and closed in Drop.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                libc::NETLINK_ROUTE,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Rtnl { fd, seq: 1 })
    }

    fn request(&mut self, what: &str, build: impl FnOnce(u32) -> Vec<u8>) -> io::Result<()> {
        self.seq += 1;
        let seq = self.seq;
        let msg = build(seq);
        // SAFETY: sockaddr_nl is plain data; zeroed is a valid value (pid 0 = the kernel).
        let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        sa.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        // SAFETY: msg and sa outlive the call; the lengths passed are theirs.
        let n = unsafe {
            libc::sendto(
                self.fd,
                msg.as_ptr().cast(),
                msg.len(),
                0,
                (&sa as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut buf = vec![0u8; 8192];
        loop {
            // SAFETY: buf is writable for buf.len() bytes and outlives the call.
            let n = unsafe { libc::recv(self.fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            match parse_ack(&buf[..n as usize], seq) {
                Some(0) => return Ok(()),
                Some(e) => {
                    let e = io::Error::from_raw_os_error(-e);
                    return Err(io::Error::new(e.kind(), format!("{what}: {e}")));
                }
                None => continue,
            }
        }
    }
}

impl Drop for Rtnl {
    fn drop(&mut self) {
        // SAFETY: fd was opened by us and is closed exactly once.
        unsafe { libc::close(self.fd) };
    }
}

/// Creates the veth pair `a` <-> `b` with `mtu` in the calling thread's namespace, turns off
/// IPv6 on both ends (no router solicitations mixed into the measured traffic) and sets them up.
pub fn create_veth_pair(a: &str, b: &str, mtu: u32) -> io::Result<()> {
    let mut nl = Rtnl::open()?;
    nl.request("create veth pair", |seq| veth_request(a, b, mtu, seq))?;
    for name in [a, b] {
        // Best effort: a kernel without IPv6 has no such file, which is just as good.
        let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{name}/disable_ipv6"), "1");
        nl.request("set link up", |seq| up_request(name, seq))?;
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
    let (root, sys, sysfs) = (c("/")?, c("/sys")?, c("sysfs")?);
    // SAFETY: unshare takes flags only.
    if unsafe { libc::unshare(libc::CLONE_NEWNS) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: valid C strings, NULL where mount(2) allows it; MS_REC|MS_PRIVATE only changes
    // propagation inside the new (private) mount namespace.
    if unsafe {
        libc::mount(
            std::ptr::null(),
            root.as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        )
    } != 0
    {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above; a new sysfs instance over /sys of this mount namespace only.
    if unsafe {
        libc::mount(
            sysfs.as_ptr(),
            sys.as_ptr(),
            sysfs.as_ptr(),
            0,
            std::ptr::null(),
        )
    } != 0
    {
        return Err(io::Error::last_os_error());
    }
    std::fs::write(
        format!("/sys/class/net/{iface}/queues/rx-0/rps_cpus"),
        cpu_mask_hex(cpu),
    )
}

/// AF_PACKET sockets of this process bound to `ifindex` (all of them when `None`), with the
/// index each is bound to.
fn packet_sockets(ifindex: Option<i32>) -> Vec<(i32, i32)> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir("/proc/self/fd") else {
        return out;
    };
    for e in rd.flatten() {
        let Ok(fd) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let is_socket = std::fs::read_link(e.path())
            .map(|t| t.to_string_lossy().starts_with("socket:"))
            .unwrap_or(false);
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

/// Frames `iface` has transmitted, from /proc/net/dev.
fn tx_packets(iface: &str) -> Option<u64> {
    let t = std::fs::read_to_string("/proc/net/dev").ok()?;
    parse_net_dev(&t)
        .into_iter()
        .find(|c| c.name == iface)
        .map(|c| c.tx_packets)
}

/// Kicks the af_packet TX ring of `iface` (an empty `sendto`, as the PMD does after each
/// burst) until the kernel has transmitted `sent` frames or `limit` passes. The PMD counts a
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

/// What an AF_PACKET socket of this process counted since the last read.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PacketSocketStats {
    pub iface: String,
    /// Frames the socket saw (delivered to its ring or dropped).
    pub packets: u64,
    /// Frames dropped because the ring was full: the receiver fell behind.
    pub drops: u64,
}

const PACKET_STATISTICS: libc::c_int = 6;

/// Reads (and thereby resets) PACKET_STATISTICS of every AF_PACKET socket this process holds:
/// the af_packet PMD's rings. DPDK 22.11's af_packet does not report ring drops as imissed,
/// so they are read here, by interface.
pub fn packet_socket_stats() -> Vec<PacketSocketStats> {
    let mut out = Vec::new();
    for (fd, ifindex) in packet_sockets(None) {
        let mut st = [0u32; 2];
        let mut len = std::mem::size_of_val(&st) as libc::socklen_t;
        // SAFETY: st is 8 writable bytes (struct tpacket_stats: two u32), len says so.
        let rc = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_PACKET,
                PACKET_STATISTICS,
                st.as_mut_ptr().cast(),
                &mut len,
            )
        };
        if rc != 0 {
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

/// Counters of one kernel interface from /proc/net/dev.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct IfCounters {
    pub name: String,
    pub rx_packets: u64,
    pub rx_dropped: u64,
    pub tx_packets: u64,
    pub tx_dropped: u64,
}

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

        #[test]
        fn ack_never_panics(b in proptest::collection::vec(proptest::num::u8::ANY, 0..64), seq in 0u32..4) {
            let _ = parse_ack(&b, seq);
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

    #[test]
    fn veth_request_layout() {
        let m = veth_request("dqt0", "dqt1", 9000, 7);
        assert_eq!(
            u32::from_ne_bytes(m[0..4].try_into().expect("4")) as usize,
            m.len()
        );
        assert_eq!(
            u16::from_ne_bytes(m[4..6].try_into().expect("2")),
            RTM_NEWLINK
        );
        assert_eq!(m.len() % 4, 0);
        // The peer's name appears after the first one, inside the nested attributes.
        let s = String::from_utf8_lossy(&m);
        let first = s.find("dqt0").expect("a");
        let second = s.find("dqt1").expect("b");
        assert!(second > first);
        assert!(s.contains("veth"));
    }

    #[test]
    fn ack_parsing() {
        let mut r = vec![0u8; 36];
        r[0..4].copy_from_slice(&36u32.to_ne_bytes());
        r[4..6].copy_from_slice(&NLMSG_ERROR.to_ne_bytes());
        r[8..12].copy_from_slice(&5u32.to_ne_bytes());
        r[16..20].copy_from_slice(&(-17i32).to_ne_bytes());
        assert_eq!(parse_ack(&r, 5), Some(-17));
        assert_eq!(parse_ack(&r, 6), None);
        assert_eq!(parse_ack(&[], 5), None);
        assert_eq!(parse_ack(&[0xff; 20], 5), None);
    }
}
