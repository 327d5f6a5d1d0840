#[cfg(feature = "dpdk")]
pub mod dpdk;
