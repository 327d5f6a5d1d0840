//! The workspace's one netlink stack: the message codec (this module), the socket
//! ([`Socket`]) and the three families daqtune speaks over it: generic netlink for ethtool
//! ([`genl`]), rtnetlink for links, addresses, routes, neighbours and qdiscs ([`route`]) and
//! the kernel's RDMA netlink ([`rdma`]).
//!
//! Building and parsing are plain byte code, tested on captured and built bytes; the socket is
//! nix's, so this stack has no `unsafe` of its own. Parsing never trusts a length field: a
//! message or attribute that claims more bytes than the buffer holds ends the walk.

pub mod genl;
pub mod rdma;
pub mod route;
mod socket;

pub use socket::{Protocol, Socket};

use std::io;

pub const NLMSG_ERROR: u16 = 2;
pub const NLMSG_DONE: u16 = 3;

pub const NLM_F_REQUEST: u16 = 0x1;
pub const NLM_F_MULTI: u16 = 0x2;
pub const NLM_F_ACK: u16 = 0x4;
pub const NLM_F_ROOT: u16 = 0x100;
pub const NLM_F_MATCH: u16 = 0x200;
pub const NLM_F_DUMP: u16 = NLM_F_ROOT | NLM_F_MATCH;
// Flags of NEW requests (the same bits as ROOT/MATCH mean something else there).
pub const NLM_F_REPLACE: u16 = 0x100;
pub const NLM_F_EXCL: u16 = 0x200;
pub const NLM_F_CREATE: u16 = 0x400;

/// Set on an attribute that holds attributes.
pub const NLA_F_NESTED: u16 = 0x8000;
const NLA_TYPE_MASK: u16 = 0x3fff;

/// Why a netlink client call failed. The Display texts are the ones the self-test always
/// printed ("netlink OP: ERRNO", "not supported here: ...").
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("netlink {op}: {source}")]
    Io {
        op: String,
        #[source]
        source: io::Error,
    },
    #[error("not supported here: {0}")]
    Unsupported(String),
    #[error("invalid request: {0}")]
    Invalid(String),
}

impl Error {
    pub(crate) fn io(op: &str, source: io::Error) -> Error {
        Error::Io {
            op: op.to_string(),
            source,
        }
    }

    /// The errno behind a failed call, when there is one.
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            Error::Io { source, .. } => source.raw_os_error(),
            _ => None,
        }
    }
}

pub type Result<T> = std::result::Result<T, Error>;

pub(crate) fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// One netlink message being built: the 16-byte header, a family header ([`Builder::raw`]),
/// attributes with nesting.
pub struct Builder {
    buf: Vec<u8>,
    nests: Vec<usize>,
    /// OR-ed into the type of every nest: generic netlink wants NLA_F_NESTED (strict
    /// validation), rtnetlink and nldev requests were always sent without it.
    nest_flag: u16,
}

impl Builder {
    /// A message of type `kind` with exactly `flags` (NLM_F_REQUEST is the caller's to set).
    pub fn new(kind: u16, flags: u16, seq: u32) -> Self {
        let mut buf = Vec::with_capacity(256);
        buf.extend_from_slice(&0u32.to_ne_bytes()); // length, set by finish()
        buf.extend_from_slice(&kind.to_ne_bytes());
        buf.extend_from_slice(&flags.to_ne_bytes());
        buf.extend_from_slice(&seq.to_ne_bytes());
        buf.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel fills it in
        Builder {
            buf,
            nests: Vec::new(),
            nest_flag: 0,
        }
    }

    /// Marks every nest opened from now on with NLA_F_NESTED.
    pub fn flag_nests(mut self) -> Self {
        self.nest_flag = NLA_F_NESTED;
        self
    }

    /// Bytes as they are (a family header such as ifinfomsg), padded to 4.
    pub fn raw(&mut self, bytes: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(bytes);
        self.buf.resize(align4(self.buf.len()), 0);
        self
    }

    pub fn attr(&mut self, kind: u16, data: &[u8]) -> &mut Self {
        let len = (4 + data.len()) as u16;
        self.buf.extend_from_slice(&len.to_ne_bytes());
        self.buf.extend_from_slice(&kind.to_ne_bytes());
        self.raw(data)
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

    /// A NUL-terminated string.
    pub fn string(&mut self, kind: u16, s: &str) -> &mut Self {
        let mut d = s.as_bytes().to_vec();
        d.push(0);
        self.attr(kind, &d)
    }

    pub fn begin_nest(&mut self, kind: u16) -> &mut Self {
        self.nests.push(self.buf.len());
        self.buf.extend_from_slice(&0u16.to_ne_bytes());
        self.buf
            .extend_from_slice(&(kind | self.nest_flag).to_ne_bytes());
        self
    }

    pub fn end_nest(&mut self) -> &mut Self {
        if let Some(start) = self.nests.pop() {
            let len = (self.buf.len() - start) as u16;
            self.buf[start..start + 2].copy_from_slice(&len.to_ne_bytes());
        }
        self
    }

    /// The message, with open nests closed and the length set.
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

pub(crate) fn ne_u16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

pub(crate) fn ne_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

pub(crate) fn ne_i32(b: &[u8], at: usize) -> Option<i32> {
    Some(i32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// The messages in `buf`, stopping at the first malformed header.
pub fn messages(mut buf: &[u8]) -> Vec<Msg<'_>> {
    let mut out = Vec::new();
    while buf.len() >= 16 {
        let (Some(len), Some(kind), Some(flags), Some(seq)) = (
            ne_u32(buf, 0),
            ne_u16(buf, 4),
            ne_u16(buf, 6),
            ne_u32(buf, 8),
        ) else {
            break;
        };
        let len = len as usize;
        if len < 16 || len > buf.len() {
            break;
        }
        out.push(Msg {
            kind,
            flags,
            seq,
            payload: &buf[16..len],
        });
        buf = &buf[align4(len).min(buf.len())..];
    }
    out
}

/// The attributes in `buf` as (type without the nested/byte-order flags, data), stopping at the
/// first malformed attribute.
pub fn attrs(mut buf: &[u8]) -> Vec<(u16, &[u8])> {
    let mut out = Vec::new();
    while buf.len() >= 4 {
        let (Some(len), Some(kind)) = (ne_u16(buf, 0), ne_u16(buf, 2)) else {
            break;
        };
        let len = len as usize;
        if len < 4 || len > buf.len() {
            break;
        }
        out.push((kind & NLA_TYPE_MASK, &buf[4..len]));
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

/// A NUL-terminated (or unterminated) string attribute, lossily as UTF-8.
pub fn get_string(d: &[u8]) -> String {
    let end = d.iter().position(|&b| b == 0).unwrap_or(d.len());
    String::from_utf8_lossy(&d[..end]).into_owned()
}

/// The errno of an NLMSG_ERROR payload (0 = an acknowledgement); a truncated one is EIO.
pub fn error_code(payload: &[u8]) -> i32 {
    ne_i32(payload, 0).unwrap_or(-libc::EIO)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builder_nests_aligns_and_flags_nests_only_when_asked() {
        let mut b = Builder::new(16, NLM_F_REQUEST, 7);
        b.raw(&[0u8; 16]).string(3, "abc").begin_nest(18);
        b.string(1, "veth").end_nest();
        let m = b.finish();
        assert_eq!(m.len() % 4, 0);
        assert_eq!(ne_u32(&m, 0), Some(m.len() as u32));
        let msgs = messages(&m);
        assert_eq!(msgs.len(), 1);
        assert_eq!((msgs[0].kind, msgs[0].flags, msgs[0].seq), (16, 1, 7));
        // rtnetlink's nest goes out without NLA_F_NESTED, as it always did.
        let nest_type = ne_u16(&m, 16 + 16 + 8 + 2).expect("type");
        assert_eq!(nest_type, 18);
        let a = attrs(&msgs[0].payload[16..]);
        assert_eq!(a[0], (3, &b"abc\0"[..]));
        assert_eq!(attrs(a[1].1), vec![(1, &b"veth\0"[..])]);

        let mut b = Builder::new(20, 0, 1).flag_nests();
        b.begin_nest(1).u32(2, 9);
        let m = b.finish();
        assert_eq!(ne_u16(&m, 18), Some(1 | NLA_F_NESTED));
        assert_eq!(attrs(&m[16..])[0].0, 1, "the nested flag is masked off");
    }

    #[test]
    fn malformed_lengths_end_the_walk() {
        assert!(messages(&[0xff; 40]).is_empty());
        assert!(messages(&[]).is_empty());
        assert!(messages(&[0xff; 15]).is_empty());
        let mut m = vec![0u8; 20];
        m[0..4].copy_from_slice(&100u32.to_ne_bytes());
        assert!(messages(&m).is_empty());
        assert!(attrs(&[0xff, 0xff, 1, 0, 0]).is_empty());
        assert!(attrs(&[2, 0, 1, 0]).is_empty());
        assert!(attrs(&[3, 0, 1]).is_empty());
        assert_eq!(get_u32(&[1, 2]), None);
        assert_eq!(error_code(&[]), -libc::EIO);
        assert_eq!(get_string(b"ab\0cd"), "ab");
    }
}
