//! The netlink socket: one request at a time, answers matched by sequence number.

use super::{error_code, messages, ne_u16, NLMSG_DONE, NLMSG_ERROR, NLM_F_ACK, NLM_F_MULTI};
use nix::sys::socket::{
    bind, recv, send, setsockopt, socket, sockopt, AddressFamily, MsgFlags, NetlinkAddr, SockFlag,
    SockProtocol, SockType,
};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Duration;

/// The netlink families daqtune speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Route,
    Generic,
    Rdma,
}

impl Protocol {
    fn nix(self) -> SockProtocol {
        match self {
            Protocol::Route => SockProtocol::NetlinkRoute,
            Protocol::Generic => SockProtocol::NetlinkGeneric,
            Protocol::Rdma => SockProtocol::NetlinkRDMA,
        }
    }
}

/// One reply message of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub kind: u16,
    pub payload: Vec<u8>,
}

/// A netlink socket acting in the network namespace of the thread that opened it.
pub struct Socket {
    fd: OwnedFd,
    seq: u32,
}

impl Socket {
    /// Opens and binds a socket of `protocol`; with `timeout`, a receive that waits longer
    /// fails with EAGAIN instead of blocking.
    pub fn open(protocol: Protocol, timeout: Option<Duration>) -> io::Result<Socket> {
        let fd = socket(
            AddressFamily::Netlink,
            SockType::Raw,
            SockFlag::SOCK_CLOEXEC,
            protocol.nix(),
        )?;
        bind(fd.as_raw_fd(), &NetlinkAddr::new(0, 0))?;
        if let Some(t) = timeout {
            let tv = nix::sys::time::TimeVal::new(
                t.as_secs().try_into().unwrap_or(i64::MAX),
                t.subsec_micros().into(),
            );
            setsockopt(&fd, sockopt::ReceiveTimeout, &tv)?;
        }
        Ok(Socket { fd, seq: 1 })
    }

    /// Sends `build(seq)` and collects the replies carrying that sequence number until the
    /// exchange ends: NLMSG_DONE (end of a dump), NLMSG_ERROR (0 is the acknowledgement, any
    /// other code the errno this returns), or, for a request that asked for no
    /// acknowledgement, its one reply without NLM_F_MULTI.
    pub fn transact(&mut self, build: impl FnOnce(u32) -> Vec<u8>) -> io::Result<Vec<Reply>> {
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        let msg = build(seq);
        let acked = ne_u16(&msg, 6).is_some_and(|f| f & NLM_F_ACK != 0);
        send(self.fd.as_raw_fd(), &msg, MsgFlags::empty())?;
        let mut out = Vec::new();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match recv(self.fd.as_raw_fd(), &mut buf, MsgFlags::empty()) {
                Ok(n) => n,
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(e.into()),
            };
            if let Some(end) = absorb(&buf[..n], seq, acked, &mut out) {
                return end.map(|()| out);
            }
        }
    }

    /// [`Socket::transact`]'s reply payloads of type `kind`.
    pub fn payloads_of(
        &mut self,
        kind: u16,
        build: impl FnOnce(u32) -> Vec<u8>,
    ) -> io::Result<Vec<Vec<u8>>> {
        Ok(self
            .transact(build)?
            .into_iter()
            .filter(|r| r.kind == kind)
            .map(|r| r.payload)
            .collect())
    }
}

/// Takes one received datagram into `out`: the replies to `seq`, and whether the exchange is
/// over: `Some(Ok)` at NLMSG_DONE, an acknowledgement, the one reply of a request that asked
/// for none, or an empty datagram (which would otherwise repeat forever); `Some(Err)` with the
/// errno of an error reply; `None` while more is to come.
fn absorb(datagram: &[u8], seq: u32, acked: bool, out: &mut Vec<Reply>) -> Option<io::Result<()>> {
    let msgs = messages(datagram);
    if msgs.is_empty() {
        return Some(Ok(()));
    }
    for m in msgs {
        if m.seq != seq {
            continue;
        }
        match m.kind {
            NLMSG_DONE => return Some(Ok(())),
            NLMSG_ERROR => {
                let code = error_code(m.payload);
                if code == 0 {
                    return Some(Ok(()));
                }
                return Some(Err(io::Error::from_raw_os_error(-code)));
            }
            kind => {
                out.push(Reply {
                    kind,
                    payload: m.payload.to_vec(),
                });
                if !acked && m.flags & NLM_F_MULTI == 0 {
                    return Some(Ok(()));
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::super::Builder;
    use super::*;

    fn msg(kind: u16, flags: u16, seq: u32, payload: &[u8]) -> Vec<u8> {
        let mut b = Builder::new(kind, flags, seq);
        b.raw(payload);
        b.finish()
    }

    #[test]
    fn a_dump_runs_to_done_and_skips_other_sequences() {
        let mut out = Vec::new();
        let mut d = msg(16, NLM_F_MULTI, 5, &[1; 16]);
        d.extend(msg(16, NLM_F_MULTI, 4, &[9; 16])); // a late answer to an earlier request
        d.extend(msg(16, NLM_F_MULTI, 5, &[2; 16]));
        assert!(absorb(&d, 5, false, &mut out).is_none(), "no DONE yet");
        assert_eq!(out.len(), 2);
        assert_eq!(out[1].payload, vec![2; 16]);
        let done = msg(NLMSG_DONE, NLM_F_MULTI, 5, &0i32.to_ne_bytes());
        assert!(matches!(absorb(&done, 5, false, &mut out), Some(Ok(()))));
        assert_eq!(out.len(), 2);
    }

    #[test]
    fn an_error_reply_is_its_errno_and_zero_is_the_ack() {
        let mut out = Vec::new();
        // struct nlmsgerr: the negative errno, then the offending request's header.
        let mut e = (-libc::EEXIST).to_ne_bytes().to_vec();
        e.extend([0u8; 16]);
        let r = absorb(&msg(NLMSG_ERROR, 0, 3, &e), 3, true, &mut out);
        assert_eq!(
            r.and_then(|r| r.err()).and_then(|e| e.raw_os_error()),
            Some(libc::EEXIST)
        );
        let mut ack = 0i32.to_ne_bytes().to_vec();
        ack.extend([0u8; 16]);
        // A genl GET with NLM_F_ACK: the reply (no MULTI) does not end it, the ack does.
        let mut d = msg(20, 0, 3, &[7; 8]);
        assert!(absorb(&d, 3, true, &mut out).is_none());
        d = msg(NLMSG_ERROR, 0, 3, &ack);
        assert!(matches!(absorb(&d, 3, true, &mut out), Some(Ok(()))));
        assert_eq!(out.len(), 1);
    }

    #[test]
    fn a_request_without_ack_ends_at_its_single_reply() {
        // RDMA_NLDEV_CMD_SYS_GET is sent with NLM_F_REQUEST only and answered by one message.
        let mut out = Vec::new();
        let r = absorb(
            &msg(0x1406, 0, 2, &[8, 0, 66, 0, 1, 0, 0, 0]),
            2,
            false,
            &mut out,
        );
        assert!(matches!(r, Some(Ok(()))));
        assert_eq!(out[0].kind, 0x1406);
        assert!(matches!(absorb(&[], 2, false, &mut out), Some(Ok(()))));
    }
}
