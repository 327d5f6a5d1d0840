//! The numbers the self-test flags take, bounded where the command line parses them (tune's
//! clap definitions call these as value parsers; the library itself has no parser): NaN, infinity,
//! negatives and zero where they mean nothing are a usage error naming the flag (exit 2).
//! `--max-udp-loss NaN` used to make every loss a pass: `loss > NaN` is false.

/// A percentage: finite, 0 to 100.
pub fn percent(s: &str) -> Result<f64, String> {
    let v = number(s)?;
    if !(0.0..=100.0).contains(&v) {
        return Err(format!("{v} is not a percentage (expected 0 .. 100)"));
    }
    Ok(v)
}

/// A rate in Gb/s: finite, 0 to 10000 (no link is faster).
pub fn gbps(s: &str) -> Result<f64, String> {
    let v = number(s)?;
    if !(0.0..=10_000.0).contains(&v) {
        return Err(format!("{v} Gb/s (expected 0 .. 10000)"));
    }
    Ok(v)
}

/// A duration in seconds: finite, above 0, at most a day.
pub fn seconds(s: &str) -> Result<f64, String> {
    let v = number(s)?;
    if !(v > 0.0 && v <= 86_400.0) {
        return Err(format!("{v} s (expected more than 0, at most 86400)"));
    }
    Ok(v)
}

/// A self-test message: the 32-byte payload header at least, 1 MiB at most (the peer's
/// largest; UDP is bounded again by its datagram size).
pub fn message_size(s: &str) -> Result<usize, String> {
    bytes(s, crate::payload::HEADER_LEN, 1 << 20)
}

/// An RDMA message: 1 byte to 1 GiB.
pub fn rdma_size(s: &str) -> Result<usize, String> {
    bytes(s, 1, 1 << 30)
}

/// An IP MTU: 68 (RFC 791's minimum) to 65535.
pub fn mtu(s: &str) -> Result<u32, String> {
    let v: u32 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not an MTU (expected 68 .. 65535)"))?;
    if !(68..=65535).contains(&v) {
        return Err(format!("{v} is not an MTU (expected 68 .. 65535)"));
    }
    Ok(v)
}

/// A CPU number below the kernel's largest NR_CPUS (8192).
pub fn cpu(s: &str) -> Result<usize, String> {
    let v: usize = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a CPU number"))?;
    if v >= 8192 {
        return Err(format!("CPU {v} (expected 0 .. 8191)"));
    }
    Ok(v)
}

/// A count of ring slots: 1 to 65536.
pub fn slots(s: &str) -> Result<usize, String> {
    bytes(s, 1, 65_536).map_err(|e| e.replace("bytes", "slots"))
}

/// `--rcvbuf`: bytes with an optional K or M suffix (binary units), 64 KiB..1 GiB.
pub fn rcvbuf(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, 'K' | 'k')) => (&t[..i], 1usize << 10),
        Some((i, 'M' | 'm')) => (&t[..i], 1usize << 20),
        _ => (t, 1usize),
    };
    let n: usize = num
        .parse()
        .map_err(|_| format!("expected a byte count like 4194304, 4096K or 4M, got {s:?}"))?;
    let bytes = n
        .checked_mul(mult)
        .ok_or_else(|| format!("{s:?} is too large"))?;
    if !((64 << 10)..=(1 << 30)).contains(&bytes) {
        return Err(format!("{s:?}: a receive buffer of 64K to 1024M"));
    }
    Ok(bytes)
}

fn bytes(s: &str, min: usize, max: usize) -> Result<usize, String> {
    let v: usize = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a count of bytes"))?;
    if !(min..=max).contains(&v) {
        return Err(format!("{v} bytes (expected {min} .. {max})"));
    }
    Ok(v)
}

fn number(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number"))?;
    if !v.is_finite() {
        return Err(format!("{s:?} is not a finite number"));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nan_infinity_and_out_of_range_refused() {
        for s in ["NaN", "nan", "inf", "-inf", "-1", "100.5", "x"] {
            assert!(percent(s).is_err(), "{s}");
        }
        assert_eq!(percent("0.1"), Ok(0.1));
        assert!(gbps("NaN").is_err() && gbps("-3").is_err() && gbps("1e9").is_err());
        assert!(seconds("0").is_err() && seconds("NaN").is_err() && seconds("-2").is_err());
        assert!(message_size("0").is_err() && message_size("31").is_err());
        assert_eq!(message_size("8192"), Ok(8192));
        assert!(mtu("0").is_err() && mtu("65536").is_err());
        assert!(cpu("8192").is_err() && slots("0").is_err());
    }

    #[test]
    fn rcvbuf_sizes() {
        assert_eq!(rcvbuf("4M"), Ok(4 << 20));
        assert_eq!(rcvbuf("4096k"), Ok(4 << 20));
        assert_eq!(rcvbuf("65536"), Ok(65536));
        assert!(rcvbuf("1K").is_err());
        assert!(rcvbuf("2048M").is_err());
        assert!(rcvbuf("lots").is_err());
        assert!(rcvbuf("").is_err());
        assert!(rcvbuf("99999999999999999999M").is_err());
    }
}
