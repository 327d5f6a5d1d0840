//! `check` on fixture host roots: the whole evaluation (facts, verdicts, report) without printing.
//! Run: cargo bench -p daqtune --bench check

use criterion::{criterion_group, criterion_main, Criterion};
use daqtune::commands::evaluate;
use daqtune::profile;
use daqtune_probe::Host;
use std::hint::black_box;
use std::path::PathBuf;

fn fixture(name: &str) -> Host {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures")
        .join(name);
    Host::at(p).expect("fixture root")
}

fn bench(c: &mut Criterion) {
    for (fx, prof) in [
        ("igx-untuned", "igx-orin"),
        ("spark", "dgx-spark"),
        ("x86-2s", "generic-dgpu"),
    ] {
        let host = fixture(fx);
        let profile = profile::load(prof).expect("profile");
        c.bench_function(&format!("check/{fx}"), |b| {
            b.iter(|| black_box(evaluate(&host, &profile, Vec::new(), false)))
        });
    }
    let live = Host::live();
    let profile = profile::load("generic-dgpu").expect("profile");
    c.bench_function("check/live-host", |b| {
        b.iter(|| black_box(evaluate(&live, &profile, Vec::new(), false)))
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
