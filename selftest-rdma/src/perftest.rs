//! Reading perftest's result table (`ib_write_bw`, `ib_send_bw` with `--report_gbits`), the
//! reference the self-test is compared with.

/// One result row of a perftest bandwidth run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PerftestBw {
    pub bytes: u64,
    pub iterations: u64,
    pub peak_gbps: f64,
    pub avg_gbps: f64,
    pub msg_rate_mpps: f64,
}

/// Finds the row after the ` #bytes  #iterations  BW peak[Gb/sec] ...` header. `None` when the
/// run printed no table (connection failure, wrong units: without `--report_gbits` the header
/// says MB/sec and this returns `None` rather than a wrong figure).
pub fn parse_bw(text: &str) -> Option<PerftestBw> {
    let mut lines = text.lines();
    while let Some(l) = lines.next() {
        let l = l.trim();
        if l.starts_with("#bytes") && l.contains("BW average[Gb/sec]") {
            let row = lines.next()?;
            let f: Vec<&str> = row.split_whitespace().collect();
            if f.len() < 5 {
                return None;
            }
            return Some(PerftestBw {
                bytes: f[0].parse().ok()?,
                iterations: f[1].parse().ok()?,
                peak_gbps: f[2].parse().ok()?,
                avg_gbps: f[3].parse().ok()?,
                msg_rate_mpps: f[4].parse().ok()?,
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const OUT: &str = "\
---------------------------------------------------------------------------------------
 Mtu             : 4096[B]
 Link type       : Ethernet
---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
 65536      160           0.000000            0.041529            0.000079
---------------------------------------------------------------------------------------
";

    #[test]
    fn reads_the_result_row() {
        let r = parse_bw(OUT).expect("row");
        assert_eq!(r.bytes, 65536);
        assert_eq!(r.iterations, 160);
        assert!((r.avg_gbps - 0.041529).abs() < 1e-9);
    }

    #[test]
    fn failures_and_other_units_give_none() {
        assert_eq!(parse_bw(""), None);
        assert_eq!(parse_bw("Couldn't connect to 198.18.0.2:18515\n"), None);
        assert_eq!(parse_bw(&OUT.replace("Gb/sec", "MB/sec")), None);
        assert_eq!(
            parse_bw(" #bytes #iterations BW peak[Gb/sec] BW average[Gb/sec] MsgRate[Mpps]\n"),
            None
        );
        assert_eq!(
            parse_bw(" #bytes #iterations BW peak[Gb/sec] BW average[Gb/sec] MsgRate[Mpps]\n x y z w v\n"),
            None
        );
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC*") {
            let _ = parse_bw(&s);
        }
    }
}
