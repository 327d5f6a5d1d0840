//! NIC statistics through the SIOCETHTOOL ioctl (what `ethtool -S` prints), for the physical
//! port counters some drivers expose (mlx5: `tx_bytes_phy`, `rx_bytes_phy`). Interface counters
//! of a netdev count what the driver handed over; the phy counters count what crossed the wire,
//! which is what the two-port self-test must prove.
//!
//! The ioctl acts in the network namespace of the socket it is issued on, so callers run
//! [`stats`] on a thread inside the port's namespace. All `unsafe` for ethtool is here.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const SIOCETHTOOL: libc::c_ulong = 0x8946;
const ETHTOOL_GSTRINGS: u32 = 0x1b;
const ETHTOOL_GSTATS: u32 = 0x1d;
const ETHTOOL_GSSET_INFO: u32 = 0x37;
const ETH_SS_STATS: u32 = 1;
const ETH_GSTRING_LEN: usize = 32;
/// Drivers report a few thousand counters at most; anything larger is garbage.
const MAX_STATS: usize = 1 << 16;

#[repr(C)]
struct IfReq {
    name: [libc::c_char; libc::IFNAMSIZ],
    data: *mut libc::c_void,
    _pad: [u8; 16],
}

fn ioctl(fd: &OwnedFd, ifname: &str, data: *mut libc::c_void) -> io::Result<()> {
    let bytes = ifname.as_bytes();
    if bytes.is_empty() || bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "interface name",
        ));
    }
    let mut req = IfReq {
        name: [0; libc::IFNAMSIZ],
        data,
        _pad: [0; 16],
    };
    for (d, s) in req.name.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    // SAFETY: req is a valid ifreq-shaped struct whose data pointer refers to a live buffer the
    // caller sized for the command; the kernel writes within the lengths stated in that buffer.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), SIOCETHTOOL as _, &mut req) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Splits the GSTRINGS buffer into names.
pub fn parse_strings(buf: &[u8], n: usize) -> Vec<String> {
    buf.chunks(ETH_GSTRING_LEN)
        .take(n)
        .map(|c| {
            let end = c.iter().position(|&b| b == 0).unwrap_or(c.len());
            String::from_utf8_lossy(&c[..end]).into_owned()
        })
        .collect()
}

/// Every `ethtool -S` counter of `ifname` in the calling thread's namespace.
pub fn stats(ifname: &str) -> io::Result<Vec<(String, u64)>> {
    // SAFETY: plain socket(2); the result is checked and owned.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };

    // struct ethtool_sset_info { u32 cmd; u32 reserved; u64 sset_mask; u32 data[]; }
    let mut sset = [0u32; 6];
    sset[0] = ETHTOOL_GSSET_INFO;
    sset[2] = 1 << ETH_SS_STATS; // low half of sset_mask (little- and big-endian safe below)
    if cfg!(target_endian = "big") {
        sset[2] = 0;
        sset[3] = 1 << ETH_SS_STATS;
    }
    ioctl(&fd, ifname, sset.as_mut_ptr() as *mut libc::c_void)?;
    let n = sset[4] as usize;
    if n == 0 || n > MAX_STATS {
        return Ok(Vec::new());
    }

    // struct ethtool_gstrings { u32 cmd; u32 string_set; u32 len; u8 data[]; }
    let mut sbuf = vec![0u8; 12 + n * ETH_GSTRING_LEN];
    sbuf[0..4].copy_from_slice(&ETHTOOL_GSTRINGS.to_ne_bytes());
    sbuf[4..8].copy_from_slice(&ETH_SS_STATS.to_ne_bytes());
    sbuf[8..12].copy_from_slice(&(n as u32).to_ne_bytes());
    ioctl(&fd, ifname, sbuf.as_mut_ptr() as *mut libc::c_void)?;
    let names = parse_strings(&sbuf[12..], n);

    // struct ethtool_stats { u32 cmd; u32 n_stats; u64 data[]; }
    let mut vbuf = vec![0u64; 1 + n];
    let head = (ETHTOOL_GSTATS as u64) | ((n as u64) << 32);
    vbuf[0] = if cfg!(target_endian = "big") {
        ((ETHTOOL_GSTATS as u64) << 32) | n as u64
    } else {
        head
    };
    ioctl(&fd, ifname, vbuf.as_mut_ptr() as *mut libc::c_void)?;
    Ok(names.into_iter().zip(vbuf[1..].iter().copied()).collect())
}

/// The wire-level byte counters (`tx_bytes_phy`, `rx_bytes_phy`) where the driver has them.
pub fn phy_bytes(all: &[(String, u64)]) -> (Option<u64>, Option<u64>) {
    let get = |k: &str| all.iter().find(|(n, _)| n == k).map(|(_, v)| *v);
    (get("tx_bytes_phy"), get("rx_bytes_phy"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_split() {
        let mut b = vec![0u8; 3 * ETH_GSTRING_LEN];
        b[..12].copy_from_slice(b"tx_bytes_phy");
        b[32..44].copy_from_slice(b"rx_bytes_phy");
        b[64..96].copy_from_slice(&[b'x'; 32]);
        let s = parse_strings(&b, 3);
        assert_eq!(s[0], "tx_bytes_phy");
        assert_eq!(s[1], "rx_bytes_phy");
        assert_eq!(s[2].len(), 32);
        assert_eq!(parse_strings(&b, 10).len(), 3);
        assert!(parse_strings(&[], 5).is_empty());
    }

    #[test]
    fn phy_lookup() {
        let v = vec![
            ("rx_bytes_phy".to_string(), 9),
            ("tx_packets".to_string(), 1),
        ];
        assert_eq!(phy_bytes(&v), (None, Some(9)));
        assert_eq!(phy_bytes(&[]), (None, None));
    }

    #[test]
    fn loopback_has_no_ethtool_stats_or_says_so() {
        // lo supports no ETH_SS_STATS: an error or an empty list, never a panic.
        match stats("lo") {
            Ok(v) => assert!(phy_bytes(&v) == (None, None)),
            Err(e) => assert!(e.raw_os_error().is_some()),
        }
        assert!(stats("").is_err());
        assert!(stats("a-name-far-too-long-for-ifnamsiz").is_err());
    }
}
