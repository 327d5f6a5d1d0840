//! `check` on fixture host roots: the whole evaluation (facts, verdicts, report) without printing.
//! Run: cargo bench -p daqtune-bench --bench check

use criterion::{criterion_group, criterion_main, Criterion};
use daqtune_engine::commands::evaluate;
use daqtune_engine::profile;
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
    // Issue 3's synthetic host: 256 CPUs, 8 GPUs, 16 NIC ports, 448 PCI functions, generated
    // by tests/fixtures/gen_pci.py (skipped, saying so, where python3 is missing).
    let tmp = tempfile::tempdir().expect("tmp");
    let gen = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/gen_pci.py");
    let made = std::process::Command::new("python3")
        .arg(&gen)
        .arg("--out")
        .arg(tmp.path())
        .arg("bench-large")
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if made {
        let host = Host::at(tmp.path().join("bench-large")).expect("bench root");
        let profile = profile::load("generic-dgpu").expect("profile");
        c.bench_function("check/bench-large-256cpu-8gpu-16nic", |b| {
            b.iter(|| black_box(evaluate(&host, &profile, Vec::new(), false)))
        });
        c.bench_function("probe/pci-facts/bench-large", |b| {
            b.iter(|| {
                black_box(daqtune_probe::pci::read_facts(&host).map(|f| f.tree.devices.len()))
            })
        });
    } else {
        eprintln!("skipping check/bench-large: python3 tests/fixtures/gen_pci.py did not run");
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
