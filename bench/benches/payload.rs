//! Cost of the payload format per message: what the sender adds (stamp) and what the receiver
//! spends verifying (check), at DAQIRI's 8 KiB and at a jumbo-frame size.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use daqtune_selftest::payload::{check, Generator};
use std::hint::black_box;

fn payload(c: &mut Criterion) {
    for size in [8192usize, 65536] {
        let mut g = Generator::new(size, 0);
        let mut slot = g.template().to_vec();
        let mut group = c.benchmark_group(format!("payload/{size}"));
        group.throughput(Throughput::Bytes(size as u64));
        group.bench_function("stamp", |b| {
            b.iter(|| g.stamp(black_box(12345), black_box(&mut slot)))
        });
        let msg = Generator::new(size, 0).next(1).to_vec();
        group.bench_function("check", |b| b.iter(|| check(black_box(&msg))));
        group.finish();
    }
}

criterion_group!(benches, payload);
criterion_main!(benches);
