//! Generic netlink, as far as the ethtool family needs it: building a request (netlink header,
//! genl header, attributes with nesting), splitting a receive buffer into messages and a payload
//! into attributes, and a blocking request/reply over an `AF_NETLINK`/`NETLINK_GENERIC` socket.
//!
//! Parsing never trusts a length field: a message or attribute that claims more bytes than the
//! buffer holds ends the walk.

use std::io;

pub const NLMSG_ERROR: u16 = 2;
pub const NLMSG_DONE: u16 = 3;
pub const NLM_F_REQUEST: u16 = 1;
pub const NLM_F_MULTI: u16 = 2;
pub const NLM_F_ACK: u16 = 4;
/// Set on an attribute that holds attributes.
pub const NLA_F_NESTED: u16 = 0x8000;
const NLA_TYPE_MASK: u16 = 0x3fff;

/// The controller family (GENL_ID_CTRL) and what resolving a family by name needs.
pub const GENL_ID_CTRL: u16 = 0x10;
pub const CTRL_CMD_GETFAMILY: u8 = 3;
pub const CTRL_ATTR_FAMILY_ID: u16 = 1;
pub const CTRL_ATTR_FAMILY_NAME: u16 = 2;

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// One generic-netlink request being built.
pub struct Request {
    buf: Vec<u8>,
    nests: Vec<usize>,
}

impl Request {
    /// A request to `family` (its id), command `cmd` of `version`, with `flags`
    /// (NLM_F_REQUEST is always set).
    pub fn new(family: u16, cmd: u8, version: u8, flags: u16, seq: u32) -> Self {
        let mut buf = Vec::with_capacity(128);
        buf.extend_from_slice(&0u32.to_ne_bytes()); // length, set by finish()
        buf.extend_from_slice(&family.to_ne_bytes());
        buf.extend_from_slice(&(flags | NLM_F_REQUEST).to_ne_bytes());
        buf.extend_from_slice(&seq.to_ne_bytes());
        buf.extend_from_slice(&0u32.to_ne_bytes());
        buf.extend_from_slice(&[cmd, version, 0, 0]);
        Request {
            buf,
            nests: Vec::new(),
        }
    }

    pub fn attr(&mut self, kind: u16, data: &[u8]) -> &mut Self {
        let len = (4 + data.len()) as u16;
        self.buf.extend_from_slice(&len.to_ne_bytes());
        self.buf.extend_from_slice(&kind.to_ne_bytes());
        self.buf.extend_from_slice(data);
        self.buf.resize(align4(self.buf.len()), 0);
        self
    }

    pub fn u8(&mut self, kind: u16, v: u8) -> &mut Self {
        self.attr(kind, &[v])
    }

    pub fn u32(&mut self, kind: u16, v: u32) -> &mut Self {
        self.attr(kind, &v.to_ne_bytes())
    }

    pub fn flag(&mut self, kind: u16) -> &mut Self {
        self.attr(kind, &[])
    }

    pub fn string(&mut self, kind: u16, s: &str) -> &mut Self {
        let mut d = s.as_bytes().to_vec();
        d.push(0);
        self.attr(kind, &d)
    }

    pub fn begin_nest(&mut self, kind: u16) -> &mut Self {
        self.nests.push(self.buf.len());
        self.buf.extend_from_slice(&0u16.to_ne_bytes());
        self.buf
            .extend_from_slice(&(kind | NLA_F_NESTED).to_ne_bytes());
        self
    }

    pub fn end_nest(&mut self) -> &mut Self {
        if let Some(start) = self.nests.pop() {
            let len = (self.buf.len() - start) as u16;
            self.buf[start..start + 2].copy_from_slice(&len.to_ne_bytes());
        }
        self
    }

    pub fn finish(mut self) -> Vec<u8> {
        while !self.nests.is_empty() {
            self.end_nest();
        }
        let len = self.buf.len() as u32;
        self.buf[0..4].copy_from_slice(&len.to_ne_bytes());
        self.buf
    }
}

/// One message of a receive buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Msg<'a> {
    pub kind: u16,
    pub flags: u16,
    pub seq: u32,
    /// Everything after the 16-byte netlink header.
    pub payload: &'a [u8],
}

fn ne_u16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn ne_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// The messages in `buf`, stopping at the first malformed header.
pub fn messages(mut buf: &[u8]) -> Vec<Msg<'_>> {
    let mut out = Vec::new();
    while buf.len() >= 16 {
        let Some(len) = ne_u32(buf, 0).map(|l| l as usize) else {
            break;
        };
        if len < 16 || len > buf.len() {
            break;
        }
        out.push(Msg {
            kind: ne_u16(buf, 4).unwrap_or(0),
            flags: ne_u16(buf, 6).unwrap_or(0),
            seq: ne_u32(buf, 8).unwrap_or(0),
            payload: &buf[16..len],
        });
        buf = &buf[align4(len).min(buf.len())..];
    }
    out
}

/// The attributes of a genl payload (after its 4-byte genl header).
pub fn genl_attrs(payload: &[u8]) -> Vec<(u16, &[u8])> {
    attrs(payload.get(4..).unwrap_or(&[]))
}

/// The attributes in `buf` as (type without the nested/byte-order flags, data).
pub fn attrs(mut buf: &[u8]) -> Vec<(u16, &[u8])> {
    let mut out = Vec::new();
    while buf.len() >= 4 {
        let len = ne_u16(buf, 0).unwrap_or(0) as usize;
        let kind = ne_u16(buf, 2).unwrap_or(0) & NLA_TYPE_MASK;
        if len < 4 || len > buf.len() {
            break;
        }
        out.push((kind, &buf[4..len]));
        buf = &buf[align4(len).min(buf.len())..];
    }
    out
}

pub fn get_u8(d: &[u8]) -> Option<u8> {
    d.first().copied()
}

pub fn get_u16(d: &[u8]) -> Option<u16> {
    ne_u16(d, 0)
}

pub fn get_u32(d: &[u8]) -> Option<u32> {
    ne_u32(d, 0)
}

pub fn get_string(d: &[u8]) -> String {
    let end = d.iter().position(|&b| b == 0).unwrap_or(d.len());
    String::from_utf8_lossy(&d[..end]).into_owned()
}

/// The errno of an NLMSG_ERROR payload (0 = an acknowledgement).
pub fn error_code(payload: &[u8]) -> i32 {
    payload
        .get(0..4)
        .and_then(|b| b.try_into().ok())
        .map(i32::from_ne_bytes)
        .unwrap_or(-libc::EIO)
}

/// The family id in a CTRL_CMD_GETFAMILY reply payload.
pub fn parse_family_id(payload: &[u8]) -> Option<u16> {
    genl_attrs(payload)
        .into_iter()
        .find(|(k, _)| *k == CTRL_ATTR_FAMILY_ID)
        .and_then(|(_, d)| get_u16(d))
}

/// A generic-netlink socket in the calling thread's network namespace.
pub struct Socket {
    fd: std::os::fd::OwnedFd,
    seq: u32,
}

impl Socket {
    pub fn open() -> io::Result<Socket> {
        Self::open_protocol(nix::sys::socket::SockProtocol::NetlinkGeneric)
    }

    /// A `NETLINK_ROUTE` socket: the same framing carries rtnetlink's dumps
    /// ([`super::addr`]).
    pub fn open_route() -> io::Result<Socket> {
        Self::open_protocol(nix::sys::socket::SockProtocol::NetlinkRoute)
    }

    fn open_protocol(protocol: nix::sys::socket::SockProtocol) -> io::Result<Socket> {
        use nix::sys::socket::{
            bind, setsockopt, socket, sockopt, AddressFamily, NetlinkAddr, SockFlag, SockType,
        };
        use std::os::fd::AsRawFd;
        let fd = socket(
            AddressFamily::Netlink,
            SockType::Raw,
            SockFlag::SOCK_CLOEXEC,
            protocol,
        )?;
        bind(fd.as_raw_fd(), &NetlinkAddr::new(0, 0))?;
        // The kernel answers at once; a reply that never comes must not hang a check.
        setsockopt(
            &fd,
            sockopt::ReceiveTimeout,
            &nix::sys::time::TimeVal::new(5, 0),
        )?;
        Ok(Socket { fd, seq: 0 })
    }

    /// Send `build(seq)` and collect the payloads of the replies until the acknowledgement
    /// (or NLMSG_DONE); an error reply is the errno it carries.
    pub fn transact(&mut self, build: impl FnOnce(u32) -> Vec<u8>) -> io::Result<Vec<Vec<u8>>> {
        use nix::sys::socket::{recv, send, MsgFlags};
        use std::os::fd::AsRawFd;
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        let msg = build(seq);
        send(self.fd.as_raw_fd(), &msg, MsgFlags::empty())?;
        let mut out = Vec::new();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match recv(self.fd.as_raw_fd(), &mut buf, MsgFlags::empty()) {
                Ok(n) => n,
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(e.into()),
            };
            if n == 0 {
                return Ok(out);
            }
            for m in messages(&buf[..n]) {
                if m.seq != seq {
                    continue;
                }
                match m.kind {
                    NLMSG_DONE => return Ok(out),
                    NLMSG_ERROR => {
                        let code = error_code(m.payload);
                        if code == 0 {
                            return Ok(out);
                        }
                        return Err(io::Error::from_raw_os_error(-code));
                    }
                    _ => out.push(m.payload.to_vec()),
                }
            }
        }
    }

    /// The id of the generic-netlink family `name` (CTRL_CMD_GETFAMILY).
    pub fn family(&mut self, name: &str) -> io::Result<u16> {
        let replies = self.transact(|seq| {
            let mut r = Request::new(GENL_ID_CTRL, CTRL_CMD_GETFAMILY, 1, NLM_F_ACK, seq);
            r.string(CTRL_ATTR_FAMILY_NAME, name);
            r.finish()
        })?;
        replies
            .iter()
            .find_map(|p| parse_family_id(p))
            .ok_or_else(|| io::Error::other(format!("no id for generic netlink family {name}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_layout() {
        let mut r = Request::new(0x14, 15, 1, NLM_F_ACK, 7);
        r.begin_nest(1).string(2, "lo").end_nest();
        let b = r.finish();
        assert_eq!(b.len(), 16 + 4 + 4 + 8);
        assert_eq!(u32::from_ne_bytes(b[0..4].try_into().unwrap()), 32);
        assert_eq!(u16::from_ne_bytes(b[4..6].try_into().unwrap()), 0x14);
        assert_eq!(
            u16::from_ne_bytes(b[6..8].try_into().unwrap()),
            NLM_F_REQUEST | NLM_F_ACK
        );
        assert_eq!(&b[16..20], &[15, 1, 0, 0]);
        let m = messages(&b);
        assert_eq!(m.len(), 1);
        let a = genl_attrs(m[0].payload);
        assert_eq!(a.len(), 1);
        assert_eq!(a[0].0, 1, "the nested flag is masked off");
        assert_eq!(attrs(a[0].1), vec![(2, &b"lo\0"[..])]);
    }

    #[test]
    fn malformed_lengths_end_the_walk() {
        assert!(messages(&[0xff; 40]).is_empty());
        assert!(messages(&[]).is_empty());
        assert!(attrs(&[0xff, 0xff, 1, 0, 0]).is_empty());
        assert!(attrs(&[2, 0, 1, 0]).is_empty());
        assert_eq!(get_u32(&[1, 2]), None);
        assert_eq!(error_code(&[]), -libc::EIO);
    }
}
