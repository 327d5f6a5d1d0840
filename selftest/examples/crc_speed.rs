//! CPU-time throughput of payload verification (not wall time: shared hosts skew that):
//! the full CRC ([`check`]) against the receivers' [`Verifier`] (pattern comparison plus the
//! header's CRC advanced over the body), the same verdict at a lower cost.
use daqtune_selftest::payload::{check, Generator, Verifier};
use daqtune_selftest::sys::thread_cpu_ns;

fn main() {
    for size in [8192usize, 65536] {
        // 256 KiB of messages, as one TCP read holds: the data is in L2, as after a read.
        let per = (256 * 1024 / size).max(1);
        let mut g = Generator::new(size, 0);
        let mut buf = Vec::with_capacity(per * size);
        for i in 0..per {
            buf.extend_from_slice(g.next(i as u64 + 1));
        }
        let v = Verifier::new(size);
        let rounds = 2_000_000_000 / buf.len();
        for (name, f) in [
            (
                "check (CRC-32C of every byte)",
                &(|m: &[u8]| check(m).is_ok()) as &dyn Fn(&[u8]) -> bool,
            ),
            ("Verifier (pattern compare + header CRC)", &|m: &[u8]| {
                v.check(m).is_ok()
            }),
        ] {
            let t0 = thread_cpu_ns();
            let mut ok = 0usize;
            for _ in 0..rounds {
                for m in std::hint::black_box(&buf).chunks(size) {
                    ok += f(m) as usize;
                }
            }
            let dt = (thread_cpu_ns() - t0) as f64 / 1e9;
            let n = rounds * per;
            println!(
                "{size} B, {name}: {:.1} GB/s of CPU time ({:.3} us/msg, {ok} of {n} ok)",
                (n * size) as f64 / dt / 1e9,
                dt / n as f64 * 1e6
            );
        }
    }
}
