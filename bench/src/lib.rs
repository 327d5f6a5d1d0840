//! daqtune's criterion benchmarks live in `benches/` (`cargo bench -p daqtune-bench`); this
//! crate has no code of its own. `docs/performance.md` has their figures and how to run them.
