//! Self-test payload format: a 32-byte header (magic, length, sequence number, send time,
//! stream id, CRC-32C) followed by a fixed pseudo-random body.
//!
//! The format is the contract between every engine (socket, DPDK, RDMA) and every verifier (CPU
//! here, a GPU kernel later); docs/selftest.md describes it byte by byte. All fields are
//! little-endian.
//!
//! | offset | size | field |
//! | --- | --- | --- |
//! | 0 | 4 | magic `0x53545144` (bytes `D Q T S`) |
//! | 4 | 4 | total message length including the header (>= 32) |
//! | 8 | 8 | sequence number, 0-based per stream |
//! | 16 | 8 | sender's CLOCK_MONOTONIC in ns (0 = not stamped) |
//! | 24 | 4 | stream id |
//! | 28 | 4 | CRC-32C (Castagnoli) of bytes 0..28 followed by bytes 32..len |
//!
//! The body never changes within a run, so the sender computes the body's contribution to the
//! CRC once and per message only folds in the 28 header bytes ([`CrcShift`]): the sender costs
//! no per-byte work beyond the copy the kernel makes anyway. The receiver checks every byte.

/// `D Q T S` read as a little-endian u32.
pub const MAGIC: u32 = 0x5354_5144;
/// Size of the header in bytes.
pub const HEADER_LEN: usize = 32;
/// Bytes of the header covered by the CRC (everything before the CRC field).
const CRC_COVERED_HEADER: usize = 28;
/// Seed of the body pattern (xorshift64*), documented so a GPU verifier can regenerate it.
pub const BODY_SEED: u64 = 0x9E37_79B9_7F4A_7C15;

/// Fills `body` with the documented pattern: little-endian u64 words of xorshift64* seeded with
/// [`BODY_SEED`] (the last word truncated).
pub fn fill_body(body: &mut [u8]) {
    let mut x = BODY_SEED;
    for chunk in body.chunks_mut(8) {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        let w = x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes();
        chunk.copy_from_slice(&w[..chunk.len()]);
    }
}

/// Multiplies a CRC-32C register by x^(8n) mod P for a fixed n, with four 256-entry tables.
///
/// CRC is affine over GF(2): crc(H||B) = shift_|B|(crc(H) ^ !0) ^ crc_from_zero(B) ^ !0, so with
/// the body's part precomputed, a message costs four table lookups instead of |B| bytes of CRC.
#[derive(Clone)]
pub struct CrcShift {
    tables: Box<[[u32; 256]; 4]>,
}

impl CrcShift {
    /// Builds the operator that advances a raw CRC register over `n` zero bytes.
    pub fn new(n: usize) -> Self {
        let zeros = vec![0u8; n];
        // Column i = the register after processing n zero bytes starting from the unit vector e_i.
        // crc32c_append(c, d) runs the raw register from c ^ !0 and returns it ^ !0.
        let mut cols = [0u32; 32];
        for (i, col) in cols.iter_mut().enumerate() {
            let start = 1u32 << i;
            *col = crc32c::crc32c_append(start ^ !0, &zeros) ^ !0;
        }
        let mut tables = Box::new([[0u32; 256]; 4]);
        for (t, table) in tables.iter_mut().enumerate() {
            for (v, slot) in table.iter_mut().enumerate() {
                let mut acc = 0u32;
                for bit in 0..8 {
                    if v & (1 << bit) != 0 {
                        acc ^= cols[t * 8 + bit];
                    }
                }
                *slot = acc;
            }
        }
        CrcShift { tables }
    }

    /// The four lookup tables (for the GPU verifier, which gets them as a buffer).
    pub fn tables(&self) -> &[[u32; 256]; 4] {
        &self.tables
    }

    /// The raw register after `n` zero bytes starting from `reg`.
    #[inline]
    pub fn apply(&self, reg: u32) -> u32 {
        let t = &self.tables;
        t[0][(reg & 0xff) as usize]
            ^ t[1][((reg >> 8) & 0xff) as usize]
            ^ t[2][((reg >> 16) & 0xff) as usize]
            ^ t[3][(reg >> 24) as usize]
    }
}

/// Builds messages of one fixed size for one stream. Allocation happens once, in [`new`].
///
/// [`new`]: Generator::new
pub struct Generator {
    buf: Vec<u8>,
    stream: u32,
    seq: u64,
    shift: CrcShift,
    /// Raw register contribution of the body processed from a zero register.
    body_part: u32,
}

impl Generator {
    /// `len` is the full message length; it is raised to [`HEADER_LEN`] when smaller.
    pub fn new(len: usize, stream: u32) -> Self {
        let len = len.max(HEADER_LEN);
        let mut buf = vec![0u8; len];
        fill_body(&mut buf[HEADER_LEN..]);
        let body_len = len - HEADER_LEN;
        let body_part = crc32c::crc32c_append(!0, &buf[HEADER_LEN..]) ^ !0;
        buf[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        buf[4..8].copy_from_slice(&(len as u32).to_le_bytes());
        buf[24..28].copy_from_slice(&stream.to_le_bytes());
        Generator {
            shift: CrcShift::new(body_len),
            buf,
            stream,
            seq: 0,
            body_part,
        }
    }

    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    pub fn stream(&self) -> u32 {
        self.stream
    }

    /// Sequence number the next message will carry.
    pub fn next_seq(&self) -> u64 {
        self.seq
    }

    /// Makes `seq` the next sequence number again (a message that could not be sent is sent
    /// again under the same number, so a transient send error never looks like loss).
    pub fn rewind(&mut self, seq: u64) {
        self.seq = seq;
    }

    /// The message as it stands (template for engines that pre-fill their send buffers).
    pub fn template(&self) -> &[u8] {
        &self.buf
    }

    /// Stamps the next sequence number, send time and CRC into `slot`, which must already hold
    /// a copy of [`template`](Self::template) (only bytes 8..32 change per message).
    #[inline]
    pub fn stamp(&mut self, tx_ns: u64, slot: &mut [u8]) {
        slot[8..16].copy_from_slice(&self.seq.to_le_bytes());
        slot[16..24].copy_from_slice(&tx_ns.to_le_bytes());
        let head = crc32c::crc32c(&slot[..CRC_COVERED_HEADER]);
        let reg = self.shift.apply(head ^ !0) ^ self.body_part;
        slot[28..32].copy_from_slice(&(reg ^ !0).to_le_bytes());
        self.seq += 1;
    }

    /// Stamps the next message (sequence number, send time, CRC) and returns it.
    #[inline]
    pub fn next(&mut self, tx_ns: u64) -> &[u8] {
        let mut buf = std::mem::take(&mut self.buf);
        self.stamp(tx_ns, &mut buf);
        self.buf = buf;
        &self.buf
    }

    /// Writes the next message into `out` (which must be [`len`](Self::len) bytes), for engines
    /// that own their transmit buffers (DPDK mbufs, RDMA memory regions).
    pub fn write_next(&mut self, tx_ns: u64, out: &mut [u8]) -> bool {
        if out.len() != self.buf.len() {
            return false;
        }
        let msg = self.next(tx_ns);
        out.copy_from_slice(msg);
        true
    }
}

/// A parsed, checked header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub len: u32,
    pub seq: u64,
    pub tx_ns: u64,
    pub stream: u32,
    pub crc: u32,
}

/// What is wrong with a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Defect {
    /// Shorter than a header.
    Short,
    BadMagic,
    /// The length field disagrees with the bytes received.
    BadLength,
    BadCrc,
}

fn le_u32(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(w)
}

fn le_u64(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

/// Reads the header fields without checking the CRC (stream framing needs the length first).
pub fn peek_header(msg: &[u8]) -> Result<Header, Defect> {
    if msg.len() < HEADER_LEN {
        return Err(Defect::Short);
    }
    if le_u32(msg, 0) != MAGIC {
        return Err(Defect::BadMagic);
    }
    let len = le_u32(msg, 4);
    if (len as usize) < HEADER_LEN {
        return Err(Defect::BadLength);
    }
    Ok(Header {
        len,
        seq: le_u64(msg, 8),
        tx_ns: le_u64(msg, 16),
        stream: le_u32(msg, 24),
        crc: le_u32(msg, 28),
    })
}

/// Checks one complete message: magic, length equal to `msg.len()`, CRC over every byte.
pub fn check(msg: &[u8]) -> Result<Header, Defect> {
    let h = peek_header(msg)?;
    if h.len as usize != msg.len() {
        return Err(Defect::BadLength);
    }
    let c = crc32c::crc32c(&msg[..CRC_COVERED_HEADER]);
    let c = crc32c::crc32c_append(c, &msg[HEADER_LEN..]);
    if c != h.crc {
        return Err(Defect::BadCrc);
    }
    Ok(h)
}

/// Checks messages of one length as [`check`] does, at about a third of its cost.
///
/// The body is the documented pattern in every message, so when a message's body equals it
/// byte for byte, the CRC over header and body is the header's CRC advanced over the body
/// ([`CrcShift`], four table lookups) combined with the body's precomputed part: the same
/// value [`check`] computes, with a comparison (vector loads against a copy that stays in
/// L1) instead of a CRC over every byte (one 8-byte CRC instruction per cycle at best). A
/// body that differs from the pattern goes through [`check`], so the verdict is [`check`]'s
/// for every input: a message passes exactly when its CRC is right.
#[derive(Clone)]
pub struct Verifier {
    len: usize,
    body: Vec<u8>,
    shift: CrcShift,
    body_part: u32,
}

impl Verifier {
    /// For messages of `len` bytes (raised to [`HEADER_LEN`] when smaller, as [`Generator`]).
    pub fn new(len: usize) -> Self {
        let len = len.max(HEADER_LEN);
        let mut body = vec![0u8; len - HEADER_LEN];
        fill_body(&mut body);
        let body_part = crc32c::crc32c_append(!0, &body) ^ !0;
        Verifier {
            len,
            shift: CrcShift::new(body.len()),
            body,
            body_part,
        }
    }

    /// The message length this verifier takes the short path for.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    /// Same result as [`check`]`(msg)`.
    #[inline]
    pub fn check(&self, msg: &[u8]) -> Result<Header, Defect> {
        if msg.len() != self.len || msg[HEADER_LEN..] != self.body[..] {
            return check(msg);
        }
        let h = peek_header(msg)?;
        if h.len as usize != msg.len() {
            return Err(Defect::BadLength);
        }
        let head = crc32c::crc32c(&msg[..CRC_COVERED_HEADER]);
        let crc = (self.shift.apply(head ^ !0) ^ self.body_part) ^ !0;
        if crc != h.crc {
            return Err(Defect::BadCrc);
        }
        Ok(h)
    }
}

/// Per-stream accounting of what arrived: order, loss, integrity.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SeqTracker {
    /// Next sequence number expected.
    pub expected: u64,
    /// Messages accepted (checksum good).
    pub received: u64,
    /// Sequence numbers skipped and not (yet) seen late.
    pub lost: u64,
    /// Messages that arrived after a higher sequence number.
    pub reordered: u64,
    /// Messages whose header or CRC was wrong.
    pub integrity_errors: u64,
}

impl SeqTracker {
    /// Accounts for one message with a good checksum.
    #[inline]
    pub fn accept(&mut self, seq: u64) {
        self.received += 1;
        if seq == self.expected {
            self.expected += 1;
        } else if seq > self.expected {
            self.lost += seq - self.expected;
            self.expected = seq + 1;
        } else {
            // A late arrival fills a gap counted as lost before.
            self.reordered += 1;
            self.lost = self.lost.saturating_sub(1);
        }
    }

    #[inline]
    pub fn defect(&mut self) {
        self.integrity_errors += 1;
    }

    /// Messages the sender reported sent but that never arrived (tail loss included).
    pub fn finish(&mut self, sent: u64) {
        if sent > self.expected {
            self.lost += sent - self.expected;
            self.expected = sent;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_messages_check_and_carry_sequence() {
        for len in [32usize, 33, 64, 1000, 8192, 9000] {
            let mut g = Generator::new(len, 7);
            for s in 0..5u64 {
                let m = g.next(1234 + s).to_vec();
                let h = check(&m).expect("valid message");
                assert_eq!(h.seq, s);
                assert_eq!(h.tx_ns, 1234 + s);
                assert_eq!(h.stream, 7);
                assert_eq!(h.len as usize, len);
            }
        }
    }

    #[test]
    fn fast_crc_equals_full_crc() {
        let mut g = Generator::new(8192, 1);
        let m = g.next(99).to_vec();
        let c = crc32c::crc32c(&m[..28]);
        let c = crc32c::crc32c_append(c, &m[32..]);
        assert_eq!(le_u32(&m, 28), c);
    }

    #[test]
    fn every_flipped_bit_is_detected() {
        let mut g = Generator::new(256, 0);
        let m = g.next(5).to_vec();
        for byte in 0..m.len() {
            for bit in 0..8 {
                let mut bad = m.clone();
                bad[byte] ^= 1 << bit;
                assert!(check(&bad).is_err(), "flip at {byte}:{bit} undetected");
            }
        }
    }

    #[test]
    fn short_and_garbage_inputs_are_defects() {
        assert_eq!(check(&[]), Err(Defect::Short));
        assert_eq!(check(&[0u8; 31]), Err(Defect::Short));
        assert_eq!(check(&[0u8; 64]), Err(Defect::BadMagic));
        let mut g = Generator::new(64, 0);
        let m = g.next(0).to_vec();
        assert_eq!(check(&m[..63]), Err(Defect::BadLength));
        let mut bad = m.clone();
        bad[4..8].copy_from_slice(&8u32.to_le_bytes());
        assert_eq!(peek_header(&bad), Err(Defect::BadLength));
    }

    #[test]
    fn stamp_into_copies_of_template() {
        let mut g = Generator::new(4096, 3);
        let mut batch = g.template().repeat(4);
        for slot in batch.chunks_mut(4096) {
            g.stamp(77, slot);
        }
        for (i, slot) in batch.chunks(4096).enumerate() {
            assert_eq!(check(slot).map(|h| h.seq), Ok(i as u64));
        }
        assert_eq!(g.next_seq(), 4);
    }

    #[test]
    fn write_next_needs_exact_buffer() {
        let mut g = Generator::new(100, 0);
        let mut out = vec![0u8; 99];
        assert!(!g.write_next(0, &mut out));
        let mut out = vec![0u8; 100];
        assert!(g.write_next(0, &mut out));
        assert_eq!(check(&out).map(|h| h.seq), Ok(0));
    }

    #[test]
    fn tracker_counts_loss_and_reorder() {
        let mut t = SeqTracker::default();
        for s in [0u64, 1, 3, 2, 4, 7] {
            t.accept(s);
        }
        t.finish(10);
        assert_eq!(t.received, 6);
        assert_eq!(t.reordered, 1);
        // 5, 6 missing in the middle, 8 and 9 at the tail.
        assert_eq!(t.lost, 4);
        assert_eq!(t.expected, 10);
    }

    #[test]
    fn body_pattern_is_stable() {
        // Pinned so a GPU verifier written from docs/selftest.md can be checked against it.
        let mut b = [0u8; 16];
        fill_body(&mut b);
        let mut again = [0u8; 16];
        fill_body(&mut again);
        assert_eq!(b, again);
        assert_ne!(b, [0u8; 16]);
    }

    #[test]
    fn verifier_agrees_with_check_on_every_flipped_bit() {
        for len in [32usize, 33, 64, 257, 1000] {
            let v = Verifier::new(len);
            let mut g = Generator::new(len, 2);
            let m = g.next(5).to_vec();
            assert_eq!(v.check(&m), check(&m));
            assert!(v.check(&m).is_ok());
            for byte in 0..m.len() {
                for bit in 0..8 {
                    let mut bad = m.clone();
                    bad[byte] ^= 1 << bit;
                    assert_eq!(
                        v.check(&bad),
                        check(&bad),
                        "flip at {byte}:{bit}, len {len}"
                    );
                    assert!(v.check(&bad).is_err(), "flip at {byte}:{bit} undetected");
                }
            }
        }
    }

    #[test]
    fn verifier_takes_check_s_answer_for_other_bodies_and_lengths() {
        // A body other than the pattern with a right CRC (a sender free to choose its body)
        // passes, as under check; a message of another length too.
        let v = Verifier::new(128);
        let mut m = Generator::new(128, 0).next(1).to_vec();
        m[40] ^= 0xff;
        let c = crc32c::crc32c(&m[..28]);
        let c = crc32c::crc32c_append(c, &m[32..]);
        m[28..32].copy_from_slice(&c.to_le_bytes());
        assert!(check(&m).is_ok());
        assert_eq!(v.check(&m), check(&m));
        let other = Generator::new(256, 0).next(1).to_vec();
        assert!(v.check(&other).is_ok());
        assert_eq!(v.check(&m[..100]), check(&m[..100]));
        // The pattern's body behind a header whose length field lies.
        let mut lie = Generator::new(128, 0).next(1).to_vec();
        lie[4..8].copy_from_slice(&64u32.to_le_bytes());
        assert_eq!(v.check(&lie), Err(Defect::BadLength));
    }

    proptest::proptest! {
        #[test]
        fn check_never_panics(data in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
            let _ = check(&data);
            let _ = peek_header(&data);
        }

        #[test]
        fn verifier_never_disagrees_with_check(
            data in proptest::collection::vec(proptest::num::u8::ANY, 0..200),
            seq in proptest::num::u64::ANY,
            at in 0usize..96,
            bits in proptest::num::u8::ANY,
        ) {
            let v = Verifier::new(96);
            let _ = v.check(&data);
            proptest::prop_assert_eq!(v.check(&data), check(&data));
            let mut m = Generator::new(96, 0).next(seq).to_vec();
            m[at] ^= bits;
            proptest::prop_assert_eq!(v.check(&m), check(&m));
        }

        #[test]
        fn shift_matches_crc_of_zeros(n in 0usize..3000, reg in proptest::num::u32::ANY) {
            let s = CrcShift::new(n);
            let zeros = vec![0u8; n];
            let expect = crc32c::crc32c_append(reg ^ !0, &zeros) ^ !0;
            proptest::prop_assert_eq!(s.apply(reg), expect);
        }
    }
}
