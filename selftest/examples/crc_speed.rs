//! CPU-time throughput of payload verification (not wall time: shared hosts skew that).
use daqtune_selftest::payload::{check, Generator};
use daqtune_selftest::sys::thread_cpu_ns;

fn main() {
    for size in [8192usize, 65536] {
        let msg = Generator::new(size, 0).next(1).to_vec();
        let n = 200_000_000 / size;
        let t0 = thread_cpu_ns();
        let mut ok = 0;
        for _ in 0..n {
            ok += check(std::hint::black_box(&msg)).is_ok() as usize;
        }
        let dt = (thread_cpu_ns() - t0) as f64 / 1e9;
        println!(
            "check {size} B: {:.1} GB/s of CPU time ({:.2} us/msg, {ok} ok)",
            (n * size) as f64 / dt / 1e9,
            dt / n as f64 * 1e6
        );
    }
}
