//! `numa`'s libnuma verdict: tune_system.py's `--check numa` (NVIDIA/daqiri b27ff22). DAQIRI
//! binds its rings, object pools and `kind: huge` regions to a NUMA node through libnuma when
//! it has it, and falls back to first-touch placement without it; upstream warns only on a
//! host of several nodes and calls it moot on one.

use crate::common;

use common::{copy_tree, fixture};
use daqtune_engine::commands::load_profile;
use daqtune_engine::context::Context;
use daqtune_engine::facts::Facts;
use daqtune_engine::tunables::{run_checks, RunOptions};
use daqtune_engine::verdict::{Status, Verdict};
use daqtune_probe::Host;
use std::path::Path;

fn libnuma(root: &Path) -> Verdict {
    let lp = load_profile("generic-dgpu").expect("profile");
    let host = Host::at(root).expect("root");
    let facts = Facts::new(&host);
    run_checks(
        &Context::with_facts(&facts, &lp),
        &RunOptions {
            only: vec!["numa".into()],
        },
    )
    .into_iter()
    .find(|v| v.subject == "libnuma")
    .expect("a libnuma verdict")
}

fn root(name: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("tmp");
    copy_tree(&fixture(name), d.path());
    d
}

/// An `/etc/ld.so.cache` in glibc's format 1.1 (`dl-cache.h`), as ldconfig writes it.
fn ld_cache(libs: &[(&str, &str)]) -> Vec<u8> {
    let table = 48 + libs.len() * 24;
    let mut strings = Vec::new();
    let mut entries = Vec::new();
    for (name, path) in libs {
        let k = (table + strings.len()) as u32;
        strings.extend_from_slice(name.as_bytes());
        strings.push(0);
        let v = (table + strings.len()) as u32;
        strings.extend_from_slice(path.as_bytes());
        strings.push(0);
        entries.extend_from_slice(&0x0303i32.to_le_bytes());
        entries.extend_from_slice(&k.to_le_bytes());
        entries.extend_from_slice(&v.to_le_bytes());
        entries.extend_from_slice(&[0u8; 12]);
    }
    let mut b = b"glibc-ld.so.cache1.1".to_vec();
    b.extend_from_slice(&(libs.len() as u32).to_le_bytes());
    b.extend_from_slice(&(strings.len() as u32).to_le_bytes());
    b.extend_from_slice(&[2, 0, 0, 0]);
    b.extend_from_slice(&[0u8; 16]);
    b.extend_from_slice(&entries);
    b.extend_from_slice(&strings);
    b
}

#[test]
fn two_nodes_without_libnuma_warn_with_upstreams_reason() {
    let d = root("x86-2s");
    let r = d.path();
    std::fs::create_dir_all(r.join("usr/lib/x86_64-linux-gnu")).expect("mkdir");
    std::fs::write(
        r.join("etc/ld.so.cache"),
        ld_cache(&[("libc.so.6", "/lib/x86_64-linux-gnu/libc.so.6")]),
    )
    .expect("cache");
    let v = libnuma(r);
    assert_eq!(v.status, Status::Warn, "{v:#?}");
    assert!(v.message.contains("2 NUMA nodes"), "{v:#?}");
    assert!(v.message.contains("first-touch"), "{v:#?}");
    assert!(
        v.fix.as_deref().is_some_and(|f| f.contains("libnuma-dev")),
        "{v:#?}"
    );

    // Listed in the loader's cache: found, with its path.
    std::fs::write(
        r.join("etc/ld.so.cache"),
        ld_cache(&[
            ("libc.so.6", "/lib/x86_64-linux-gnu/libc.so.6"),
            ("libnuma.so.1", "/lib/x86_64-linux-gnu/libnuma.so.1"),
        ]),
    )
    .expect("cache");
    let v = libnuma(r);
    assert_eq!(v.status, Status::Pass, "{v:#?}");
    assert!(
        v.message
            .contains("libnuma.so.1 at /lib/x86_64-linux-gnu/libnuma.so.1 (ld.so.cache)"),
        "{v:#?}"
    );
}

#[test]
fn a_directory_from_ld_so_conf_d_counts_without_a_cache() {
    let d = root("x86-2s");
    let r = d.path();
    std::fs::create_dir_all(r.join("etc/ld.so.conf.d")).expect("mkdir");
    std::fs::write(
        r.join("etc/ld.so.conf.d/numa.conf"),
        "# local build\n/opt/numa/lib\n",
    )
    .expect("conf");
    std::fs::create_dir_all(r.join("opt/numa/lib")).expect("mkdir");
    std::fs::write(r.join("opt/numa/lib/libnuma.so.1"), b"\x7fELF").expect("lib");
    let v = libnuma(r);
    assert_eq!(v.status, Status::Pass, "{v:#?}");
    assert!(
        v.message
            .contains("/opt/numa/lib/libnuma.so.1 (loader directory)"),
        "{v:#?}"
    );
}

#[test]
fn one_node_without_libnuma_passes_and_a_root_without_libraries_skips() {
    // The IGX has one memory node: placement is moot (upstream logs it as information).
    let d = root("igx-untuned");
    let r = d.path();
    std::fs::create_dir_all(r.join("usr/lib/aarch64-linux-gnu")).expect("mkdir");
    std::fs::write(
        r.join("etc/ld.so.cache"),
        ld_cache(&[("libc.so.6", "/lib/aarch64-linux-gnu/libc.so.6")]),
    )
    .expect("cache");
    let v = libnuma(r);
    assert_eq!(v.status, Status::Pass, "{v:#?}");
    assert!(v.message.contains("not found, but 1 NUMA node"), "{v:#?}");

    // A root that holds neither the cache nor a library directory cannot tell.
    let d = root("x86-2s");
    let v = libnuma(d.path());
    assert_eq!(v.status, Status::Skip, "{v:#?}");
    assert!(v.message.contains("cannot tell"), "{v:#?}");
    // Nor can one with library directories but no cache (a snapshot keeps only the files
    // its run read): absence from a partial directory is no absence.
    std::fs::create_dir_all(d.path().join("usr/lib/x86_64-linux-gnu")).expect("mkdir");
    let v = libnuma(d.path());
    assert_eq!(v.status, Status::Skip, "{v:#?}");
}
