//! daqtune's DPDK self-test engine. The pure parts (EAL arguments, run spec, hugepage plan,
//! netlink messages) build everywhere; everything that links libdpdk needs the `dpdk` feature.

#[cfg(feature = "dpdk")]
pub mod dpdk;
#[cfg(feature = "dpdk")]
pub mod engine;
#[cfg(feature = "dpdk")]
pub mod runner;

pub mod eal_args;
pub mod hugepages;
pub mod netns;
pub mod spec;

/// Whether this build links libdpdk.
pub const DPDK_COMPILED: bool = cfg!(feature = "dpdk");

/// DPDK version the binary was built against, if any.
pub fn dpdk_version() -> Option<&'static str> {
    #[cfg(feature = "dpdk")]
    {
        Some(dpdk::VERSION)
    }
    #[cfg(not(feature = "dpdk"))]
    {
        None
    }
}
