//! The engine's top layer: the commands (`apply`, `qualify`, `status`, the GPU and NIC
//! views), each using everything below and used by nothing in the engine but the façade in
//! lib.rs, which keeps their `daqtune_engine::apply`-style paths for `tune` and the tests.

pub mod apply;
pub mod diff;
pub mod gpu_view;
pub mod nic_view;
pub mod qualify;
pub mod status;
pub mod topo;
