//! Generic netlink, as far as the ethtool family needs it: a request is a netlink message with
//! a 4-byte genl header (command, version) whose nests carry NLA_F_NESTED; a family's id comes
//! from the controller (CTRL_CMD_GETFAMILY).

use super::{attrs, get_u16, Builder, Protocol, Socket, NLM_F_ACK, NLM_F_REQUEST};
use std::io;
use std::time::Duration;

/// The controller family (GENL_ID_CTRL) and what resolving a family by name needs.
pub const GENL_ID_CTRL: u16 = 0x10;
pub const CTRL_CMD_GETFAMILY: u8 = 3;
pub const CTRL_ATTR_FAMILY_ID: u16 = 1;
pub const CTRL_ATTR_FAMILY_NAME: u16 = 2;

/// A request to `family` (its id), command `cmd` of `version`, with `flags`
/// (NLM_F_REQUEST is always set).
pub fn request(family: u16, cmd: u8, version: u8, flags: u16, seq: u32) -> Builder {
    let mut b = Builder::new(family, flags | NLM_F_REQUEST, seq).flag_nests();
    b.raw(&[cmd, version, 0, 0]);
    b
}

/// The attributes of a genl payload (after its 4-byte genl header).
pub fn genl_attrs(payload: &[u8]) -> Vec<(u16, &[u8])> {
    attrs(payload.get(4..).unwrap_or(&[]))
}

/// The family id in a CTRL_CMD_GETFAMILY reply payload.
pub fn parse_family_id(payload: &[u8]) -> Option<u16> {
    genl_attrs(payload)
        .into_iter()
        .find(|(k, _)| *k == CTRL_ATTR_FAMILY_ID)
        .and_then(|(_, d)| get_u16(d))
}

/// A generic-netlink socket in the calling thread's network namespace. The kernel answers at
/// once; a reply that never comes must not hang a check, hence the 5 s limit.
pub fn open() -> io::Result<Socket> {
    Socket::open(Protocol::Generic, Some(Duration::from_secs(5)))
}

/// The payloads answering `build(seq)`.
pub fn transact(s: &mut Socket, build: impl FnOnce(u32) -> Vec<u8>) -> io::Result<Vec<Vec<u8>>> {
    Ok(s.transact(build)?.into_iter().map(|r| r.payload).collect())
}

/// The id of the generic-netlink family `name`.
pub fn family(s: &mut Socket, name: &str) -> io::Result<u16> {
    let replies = transact(s, |seq| {
        let mut r = request(GENL_ID_CTRL, CTRL_CMD_GETFAMILY, 1, NLM_F_ACK, seq);
        r.string(CTRL_ATTR_FAMILY_NAME, name);
        r.finish()
    })?;
    replies
        .iter()
        .find_map(|p| parse_family_id(p))
        .ok_or_else(|| io::Error::other(format!("no id for generic netlink family {name}")))
}

#[cfg(test)]
mod tests {
    use super::super::{messages, NLA_F_NESTED};
    use super::*;

    #[test]
    fn request_layout() {
        let mut r = request(0x14, 15, 1, NLM_F_ACK, 7);
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
        assert_eq!(
            u16::from_ne_bytes(b[22..24].try_into().unwrap()),
            1 | NLA_F_NESTED
        );
        let m = messages(&b);
        assert_eq!(m.len(), 1);
        let a = genl_attrs(m[0].payload);
        assert_eq!(a.len(), 1);
        assert_eq!(a[0].0, 1, "the nested flag is masked off");
        assert_eq!(attrs(a[0].1), vec![(2, &b"lo\0"[..])]);
    }

    #[test]
    fn family_id_of_a_controller_reply() {
        let mut r = request(GENL_ID_CTRL, 1, 2, 0, 1);
        r.string(CTRL_ATTR_FAMILY_NAME, "ethtool")
            .attr(CTRL_ATTR_FAMILY_ID, &21u16.to_ne_bytes());
        let b = r.finish();
        assert_eq!(parse_family_id(messages(&b)[0].payload), Some(21));
        assert_eq!(parse_family_id(&[1, 2, 0, 0]), None);
    }
}
