//! Generators of the red-team inputs of issue 23 shared by the engine's tests and the CLI
//! tests (`bench/redteam.sh` builds the same shapes at full size and times them). Included by
//! path.
#![allow(dead_code)]

/// A DAQIRI configuration with `n` receive queues, all on CPU 5.
pub fn queues_config(n: usize) -> String {
    let mut t = String::from(
        "daqiri:\n  cfg:\n    version: 1\n    stream_type: raw\n    master_core: 3\n    interfaces:\n    - name: p\n      address: 0000:01:00.0\n      rx:\n        queues:\n",
    );
    for q in 0..n {
        t.push_str(&format!(
            "        - name: q{q}\n          id: {q}\n          cpu_core: 5\n          batch_size: 1\n"
        ));
    }
    t
}
