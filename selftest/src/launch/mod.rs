//! The launchers of the self-test's helper executables, side by side: `daqtune-dpdk`
//! ([`dpdk`]) and `daqtune-rdma` ([`rdma`]). Each engine links a native library (libdpdk,
//! libibverbs) the main binary must start without, so each runs as its own program, and the
//! main binary links only its launcher: find the helper (next to this executable, else on
//! `PATH`), run it, read what it prints as `daqtune-report`'s type for it
//! (`dpdk::DpdkOutput`, `rdma::RdmaReport`), and turn every way it cannot run into a `skip`
//! with the reason, never a crash.

pub mod dpdk;
pub mod rdma;
