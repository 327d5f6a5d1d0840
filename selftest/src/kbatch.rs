//! The kernel's batching for the socket engine: UDP GSO (`UDP_SEGMENT`) and `sendmmsg` on the
//! sender, UDP GRO (`UDP_GRO`) and `recvmmsg` on the receiver, and TCP `MSG_ZEROCOPY` with its
//! completion notifications (seed 003). Every system call of these paths lives here; what the
//! kernel hands back (control messages, coalesced datagrams, completion records) is parsed by
//! pure functions over bytes, unit-tested without a socket.

use std::io;
use std::ops::Range;
use std::os::fd::RawFd;

/// Largest UDP payload of one IPv4 datagram (65535 - 20 - 8). A GSO send is one such datagram
/// before the kernel cuts it, and a GRO read returns at most one.
pub const MAX_UDP_PAYLOAD: usize = 65_507;
/// Segments per GSO send the kernel accepts (`UDP_MAX_SEGMENTS`, 64 since Linux 4.18).
pub const MAX_GSO_SEGMENTS: usize = 64;
/// IPv4 and UDP header bytes in front of every datagram.
pub const IP_UDP_HEADERS: usize = 28;

// Linux uapi values the libc crate does not carry on every target.
const SO_ZEROCOPY: libc::c_int = 60;
const SO_EE_ORIGIN_ZEROCOPY: u8 = 5;
const SO_EE_CODE_ZEROCOPY_COPIED: u8 = 1;
const SOL_UDP: libc::c_int = 17;
const UDP_SEGMENT: libc::c_int = 103;
const UDP_GRO: libc::c_int = 104;
const SOL_IP: libc::c_int = 0;
const IP_RECVERR: libc::c_int = 11;
const SOL_IPV6: libc::c_int = 41;
const IPV6_RECVERR: libc::c_int = 25;
/// Control bytes per message: a cmsghdr and one int (GRO), or a sock_extended_err and the
/// offender's address (error queue), with room to spare.
const CTRL_BYTES: usize = 128;

fn setsockopt_int(
    fd: RawFd,
    level: libc::c_int,
    opt: libc::c_int,
    v: libc::c_int,
) -> io::Result<()> {
    // SAFETY: `v` is a valid c_int for the duration of the call and its size is passed.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            opt,
            &v as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn getsockopt_int(fd: RawFd, level: libc::c_int, opt: libc::c_int) -> io::Result<libc::c_int> {
    let mut out: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `out` and `len` are valid and writable; `len` holds `out`'s size.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            level,
            opt,
            &mut out as *mut libc::c_int as *mut libc::c_void,
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(out)
}

/// Makes every send of more than `segment` bytes a GSO send cut into `segment`-byte datagrams
/// (0 turns it off again).
pub fn set_gso_segment(fd: RawFd, segment: usize) -> io::Result<()> {
    setsockopt_int(
        fd,
        SOL_UDP,
        UDP_SEGMENT,
        segment.min(u16::MAX as usize) as libc::c_int,
    )
}

/// Asks the kernel to hand this socket coalesced datagrams, each with its segment size in a
/// `UDP_GRO` control message.
pub fn enable_gro(fd: RawFd) -> io::Result<()> {
    setsockopt_int(fd, SOL_UDP, UDP_GRO, 1)
}

/// Path MTU of a connected IPv4 socket (`IP_MTU`); IPv6 sockets answer with `IPV6_MTU`.
pub fn path_mtu(fd: RawFd, v6: bool) -> io::Result<usize> {
    let v = if v6 {
        getsockopt_int(fd, libc::IPPROTO_IPV6, libc::IPV6_MTU)?
    } else {
        getsockopt_int(fd, libc::IPPROTO_IP, libc::IP_MTU)?
    };
    Ok(v.max(0) as usize)
}

/// Lets sends with `MSG_ZEROCOPY` pin their pages instead of copying them.
pub fn enable_zerocopy(fd: RawFd) -> io::Result<()> {
    setsockopt_int(fd, libc::SOL_SOCKET, SO_ZEROCOPY, 1)
}

/// Messages per GSO send for `size`-byte messages over a path of `mtu` bytes, or why GSO
/// cannot help (each segment must fit the path; two or more must fit one send).
pub fn gso_segments(size: usize, mtu: Option<usize>) -> Result<usize, String> {
    if let Some(m) = mtu {
        if size + IP_UDP_HEADERS > m {
            return Err(format!(
                "{size}-byte messages do not fit the path MTU {m} (a GSO segment must)"
            ));
        }
    }
    let n = (MAX_UDP_PAYLOAD / size.max(1)).min(MAX_GSO_SEGMENTS);
    if n < 2 {
        return Err(format!(
            "{size}-byte messages leave room for one per {MAX_UDP_PAYLOAD}-byte send"
        ));
    }
    Ok(n)
}

/// The byte ranges of the datagrams a GRO read of `len` bytes with segment size `segment`
/// holds: every one `segment` bytes, the last possibly shorter. `segment` 0 (no control
/// message: the read is one datagram) gives one range.
pub fn segments(len: usize, segment: usize) -> impl Iterator<Item = Range<usize>> {
    let seg = if segment == 0 { len.max(1) } else { segment };
    (0..len).step_by(seg).map(move |a| a..(a + seg).min(len))
}

/// Finds the data of the first control message of `level`/`kind` in a control buffer as the
/// kernel filled it (`struct cmsghdr` records, each padded to the size of a `size_t`).
pub fn find_cmsg(ctrl: &[u8], level: i32, kind: i32) -> Option<&[u8]> {
    let word = std::mem::size_of::<usize>();
    let align = |n: usize| (n + word - 1) & !(word - 1);
    let head = align(word + 8);
    let mut at = 0usize;
    while at + head <= ctrl.len() {
        let mut lb = [0u8; 8];
        lb[..word].copy_from_slice(&ctrl[at..at + word]);
        let len = u64::from_ne_bytes(lb) as usize;
        if len < head || at + len > ctrl.len() {
            return None;
        }
        let lv = i32::from_ne_bytes(ctrl[at + word..at + word + 4].try_into().ok()?);
        let ty = i32::from_ne_bytes(ctrl[at + word + 4..at + word + 8].try_into().ok()?);
        if lv == level && ty == kind {
            return Some(&ctrl[at + head..at + len]);
        }
        at += align(len);
    }
    None
}

/// The segment size a GRO read reports (`UDP_GRO` control message), 0 when absent.
pub fn gro_segment(ctrl: &[u8]) -> usize {
    find_cmsg(ctrl, SOL_UDP, UDP_GRO)
        .and_then(|d| d.get(..4))
        .and_then(|d| d.try_into().ok())
        .map(|b: [u8; 4]| i32::from_ne_bytes(b).max(0) as usize)
        .unwrap_or(0)
}

/// One `MSG_ZEROCOPY` completion record: the sends numbered `lo..=hi` are done with their
/// pages; `copied` when the kernel copied them after all (`SO_EE_CODE_ZEROCOPY_COPIED`: a veth
/// pair or loopback delivers to a local socket, which cannot keep the sender's pages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    pub lo: u32,
    pub hi: u32,
    pub copied: bool,
}

impl Completion {
    /// How many sends the record covers.
    pub fn count(&self) -> u64 {
        u64::from(self.hi.wrapping_sub(self.lo)) + 1
    }
}

/// Parses the `sock_extended_err` of an error-queue read (IPv4 or IPv6): a zero-copy
/// completion, or `None` for anything else (a real ICMP error, a short record).
pub fn parse_completion(ctrl: &[u8]) -> Option<Completion> {
    let ee =
        find_cmsg(ctrl, SOL_IP, IP_RECVERR).or_else(|| find_cmsg(ctrl, SOL_IPV6, IPV6_RECVERR))?;
    // struct sock_extended_err { u32 ee_errno; u8 ee_origin, ee_type, ee_code, ee_pad;
    //                            u32 ee_info; u32 ee_data; }
    if ee.len() < 16 {
        return None;
    }
    let errno = u32::from_ne_bytes(ee[0..4].try_into().ok()?);
    if errno != 0 || ee[4] != SO_EE_ORIGIN_ZEROCOPY {
        return None;
    }
    Some(Completion {
        lo: u32::from_ne_bytes(ee[8..12].try_into().ok()?),
        hi: u32::from_ne_bytes(ee[12..16].try_into().ok()?),
        copied: ee[6] & SO_EE_CODE_ZEROCOPY_COPIED != 0,
    })
}

/// Sends each of `units` as one datagram (a GSO send when the socket has a segment size and
/// the unit is longer), with one `sendmmsg` call, or one `send` of the first unit when `mmsg`
/// is off. Returns how many units went out (a prefix of `units`).
pub fn send_units(fd: RawFd, units: &[&[u8]], mmsg: bool) -> io::Result<usize> {
    if units.is_empty() {
        return Ok(0);
    }
    if !mmsg {
        let u = units[0];
        // SAFETY: `u` is readable for `u.len()` bytes during the call.
        let n = unsafe { libc::send(fd, u.as_ptr().cast(), u.len(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        return Ok(1);
    }
    let n = units.len().min(1024);
    let mut iovs: Vec<libc::iovec> = units[..n]
        .iter()
        .map(|u| libc::iovec {
            iov_base: u.as_ptr() as *mut libc::c_void,
            iov_len: u.len(),
        })
        .collect();
    // SAFETY: mmsghdr is plain data; all-zero is an empty header (no name, no control).
    let mut hdrs: Vec<libc::mmsghdr> = (0..n).map(|_| unsafe { std::mem::zeroed() }).collect();
    for (h, iov) in hdrs.iter_mut().zip(iovs.iter_mut()) {
        h.msg_hdr.msg_iov = iov;
        h.msg_hdr.msg_iovlen = 1;
    }
    // SAFETY: `hdrs` holds `n` initialised headers whose iovecs point into `units`, which the
    // kernel only reads; both outlive the call.
    let sent = unsafe { libc::sendmmsg(fd, hdrs.as_mut_ptr(), n as libc::c_uint, 0) };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(sent as usize)
}

/// One `send` with `flags` (`MSG_ZEROCOPY`); the byte count the kernel took.
pub fn send_flags(fd: RawFd, buf: &[u8], zerocopy: bool) -> io::Result<usize> {
    let flags = if zerocopy { libc::MSG_ZEROCOPY } else { 0 };
    // SAFETY: `buf` is readable for `buf.len()` bytes during the call.
    let n = unsafe { libc::send(fd, buf.as_ptr().cast(), buf.len(), flags) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// Control bytes the kernel wrote, capped at the buffer (`msg_controllen` is a `size_t` on
/// glibc and a `socklen_t` on musl, hence the cast).
#[allow(clippy::unnecessary_cast)]
fn ctrl_len<T: TryInto<usize>>(n: T) -> usize {
    n.try_into().unwrap_or(0).min(CTRL_BYTES)
}

/// Reads one record from the socket's error queue without blocking: `Ok(None)` when it is
/// empty, `Ok(Some(None))` for a record that is not a zero-copy completion.
pub fn read_completion(fd: RawFd) -> io::Result<Option<Option<Completion>>> {
    let mut ctrl = [0u64; CTRL_BYTES / 8];
    // SAFETY: msghdr is plain data; all-zero has no name, no iovec.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_control = ctrl.as_mut_ptr().cast();
    msg.msg_controllen = CTRL_BYTES as _;
    // SAFETY: `msg` points at `ctrl`, writable for CTRL_BYTES, for the duration of the call.
    let n = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT) };
    if n < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::WouldBlock {
            return Ok(None);
        }
        return Err(e);
    }
    let len = ctrl_len(msg.msg_controllen);
    // SAFETY: `ctrl` is CTRL_BYTES of initialised u64s; viewing them as bytes is valid.
    let bytes = unsafe { std::slice::from_raw_parts(ctrl.as_ptr().cast::<u8>(), len) };
    Ok(Some(parse_completion(bytes)))
}

/// Waits up to `timeout_ms` for the error queue (or anything else) to become readable.
pub fn wait_error_queue(fd: RawFd, timeout_ms: i32) {
    let mut p = libc::pollfd {
        fd,
        events: 0,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the duration of the call; POLLERR is always reported.
    unsafe {
        libc::poll(&mut p, 1, timeout_ms);
    }
}

/// Receive side: up to `count` datagrams (coalesced with GRO) per `recvmmsg` call, each into
/// its own `cap`-byte buffer with its own control buffer.
pub struct MultiReceiver {
    bufs: Vec<u8>,
    cap: usize,
    ctrl: Vec<u64>,
    count: usize,
    mmsg: bool,
    lens: Vec<usize>,
    truncated: Vec<bool>,
    ctrl_lens: Vec<usize>,
}

/// One datagram (or GRO super-datagram) as read.
pub struct Read<'a> {
    pub bytes: &'a [u8],
    /// Segment size from the `UDP_GRO` control message; 0 = a single datagram.
    pub segment: usize,
    /// The datagram was longer than the buffer (MSG_TRUNC).
    pub truncated: bool,
}

impl MultiReceiver {
    pub fn new(count: usize, cap: usize, mmsg: bool) -> Self {
        let count = if mmsg { count.max(1) } else { 1 };
        MultiReceiver {
            bufs: vec![0u8; count * cap],
            cap,
            ctrl: vec![0u64; count * CTRL_BYTES / 8],
            count,
            mmsg,
            lens: vec![0; count],
            truncated: vec![false; count],
            ctrl_lens: vec![0; count],
        }
    }

    /// Blocks (up to the socket's receive timeout) for the first datagram, then takes what is
    /// queued up to the batch size. Returns how many were read.
    pub fn recv(&mut self, fd: RawFd) -> io::Result<usize> {
        let cap = self.cap;
        let mut iovs: Vec<libc::iovec> = self
            .bufs
            .chunks_mut(cap)
            .map(|b| libc::iovec {
                iov_base: b.as_mut_ptr().cast(),
                iov_len: b.len(),
            })
            .collect();
        // SAFETY: mmsghdr is plain data; all-zero is an empty header.
        let mut hdrs: Vec<libc::mmsghdr> = (0..self.count)
            .map(|_| unsafe { std::mem::zeroed() })
            .collect();
        let words = CTRL_BYTES / 8;
        for (i, (h, iov)) in hdrs.iter_mut().zip(iovs.iter_mut()).enumerate() {
            h.msg_hdr.msg_iov = iov;
            h.msg_hdr.msg_iovlen = 1;
            h.msg_hdr.msg_control = self.ctrl[i * words..].as_mut_ptr().cast();
            h.msg_hdr.msg_controllen = CTRL_BYTES as _;
        }
        let n = if self.mmsg {
            // SAFETY: `hdrs` holds `count` headers pointing at disjoint, writable parts of
            // `bufs` and `ctrl`, which outlive the call; no timeout pointer.
            let n = unsafe {
                libc::recvmmsg(
                    fd,
                    hdrs.as_mut_ptr(),
                    self.count as libc::c_uint,
                    libc::MSG_WAITFORONE,
                    std::ptr::null_mut(),
                )
            };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            n as usize
        } else {
            // SAFETY: as above, one header.
            let n = unsafe { libc::recvmsg(fd, &mut hdrs[0].msg_hdr, 0) };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            hdrs[0].msg_len = n as libc::c_uint;
            1
        };
        for (i, h) in hdrs.iter().take(n).enumerate() {
            self.lens[i] = (h.msg_len as usize).min(cap);
            self.truncated[i] = h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0;
            self.ctrl_lens[i] = ctrl_len(h.msg_hdr.msg_controllen);
        }
        Ok(n)
    }

    /// Datagram `i` of the last [`recv`](Self::recv).
    pub fn get(&self, i: usize) -> Read<'_> {
        let words = CTRL_BYTES / 8;
        let ctrl = &self.ctrl[i * words..(i + 1) * words];
        // SAFETY: `ctrl` is initialised u64s; viewing them as bytes is valid.
        let bytes = unsafe { std::slice::from_raw_parts(ctrl.as_ptr().cast::<u8>(), CTRL_BYTES) };
        Read {
            bytes: &self.bufs[i * self.cap..i * self.cap + self.lens[i]],
            segment: gro_segment(&bytes[..self.ctrl_lens[i]]),
            truncated: self.truncated[i],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmsg(level: i32, kind: i32, data: &[u8]) -> Vec<u8> {
        let word = std::mem::size_of::<usize>();
        let head = (word + 8 + word - 1) & !(word - 1);
        let len = head + data.len();
        let mut v = vec![0u8; (len + word - 1) & !(word - 1)];
        v[..word].copy_from_slice(&(len as usize).to_ne_bytes());
        v[word..word + 4].copy_from_slice(&level.to_ne_bytes());
        v[word + 4..word + 8].copy_from_slice(&kind.to_ne_bytes());
        v[head..head + data.len()].copy_from_slice(data);
        v
    }

    #[test]
    fn segments_cover_the_read() {
        let r: Vec<_> = segments(8192 * 3 + 100, 8192).collect();
        assert_eq!(r, vec![0..8192, 8192..16384, 16384..24576, 24576..24676]);
        assert_eq!(segments(500, 0).collect::<Vec<_>>(), vec![0..500]);
        assert_eq!(segments(0, 8192).count(), 0);
    }

    #[test]
    fn gro_segment_from_control_bytes() {
        let mut c = cmsg(1, 29, &[1, 2, 3, 4]); // SOL_SOCKET/SO_TIMESTAMPNS-like, skipped
        c.extend(cmsg(SOL_UDP, UDP_GRO, &8192i32.to_ne_bytes()));
        assert_eq!(gro_segment(&c), 8192);
        assert_eq!(gro_segment(&[]), 0);
        assert_eq!(gro_segment(&cmsg(1, 29, &[0; 4])), 0);
        // A record claiming more than the buffer holds ends the walk.
        let mut bad = cmsg(SOL_UDP, UDP_GRO, &8192i32.to_ne_bytes());
        bad[0] = 200;
        assert_eq!(gro_segment(&bad), 0);
    }

    fn ee(errno: u32, origin: u8, code: u8, lo: u32, hi: u32) -> Vec<u8> {
        let mut d = Vec::new();
        d.extend(errno.to_ne_bytes());
        d.extend([origin, 0, code, 0]);
        d.extend(lo.to_ne_bytes());
        d.extend(hi.to_ne_bytes());
        d.extend([0u8; 16]); // the offender's address
        d
    }

    #[test]
    fn completions_parse() {
        let c = cmsg(SOL_IP, IP_RECVERR, &ee(0, SO_EE_ORIGIN_ZEROCOPY, 1, 4, 9));
        assert_eq!(
            parse_completion(&c),
            Some(Completion {
                lo: 4,
                hi: 9,
                copied: true
            })
        );
        assert_eq!(parse_completion(&c).map(|c| c.count()), Some(6));
        let c = cmsg(
            SOL_IPV6,
            IPV6_RECVERR,
            &ee(0, SO_EE_ORIGIN_ZEROCOPY, 0, 0, 0),
        );
        assert_eq!(
            parse_completion(&c),
            Some(Completion {
                lo: 0,
                hi: 0,
                copied: false
            })
        );
        // An ICMP error (origin 2, errno set) is no completion.
        assert_eq!(
            parse_completion(&cmsg(SOL_IP, IP_RECVERR, &ee(111, 2, 3, 0, 0))),
            None
        );
        assert_eq!(parse_completion(&cmsg(SOL_IP, IP_RECVERR, &[0; 8])), None);
    }

    #[test]
    fn gso_segment_counts() {
        assert_eq!(gso_segments(8192, Some(9000)), Ok(7));
        assert_eq!(gso_segments(1400, Some(1500)), Ok(46));
        assert_eq!(gso_segments(64, None), Ok(64));
        assert!(gso_segments(8192, Some(1500)).is_err());
        assert!(gso_segments(40_000, None).is_err());
    }

    #[test]
    fn gso_and_gro_over_loopback_split_into_datagrams() {
        use std::os::fd::AsRawFd;
        let rx = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
        let tx = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
        tx.connect(rx.local_addr().expect("addr")).expect("connect");
        rx.set_read_timeout(Some(std::time::Duration::from_secs(2)))
            .expect("timeout");
        if set_gso_segment(tx.as_raw_fd(), 1000).is_err() || enable_gro(rx.as_raw_fd()).is_err() {
            eprintln!("kernel without UDP GSO/GRO: skipped");
            return;
        }
        let data: Vec<u8> = (0..3500u32).map(|i| i as u8).collect();
        assert_eq!(
            send_units(tx.as_raw_fd(), &[&data, &data[..1000]], true).expect("send"),
            2
        );
        let mut r = MultiReceiver::new(8, 65536, true);
        let mut got = Vec::new();
        while got.len() < 4500 {
            let n = r.recv(rx.as_raw_fd()).expect("recv");
            for i in 0..n {
                let d = r.get(i);
                for s in segments(d.bytes.len(), d.segment) {
                    assert!(s.len() <= 1000);
                    got.extend_from_slice(&d.bytes[s]);
                }
            }
        }
        let mut want = data.clone();
        want.extend_from_slice(&data[..1000]);
        assert_eq!(got, want);
    }
}
