//! The one integration-test binary of this crate (issue 44): each former tests/NAME.rs is a
//! module here; `cargo test -p daqtune-rdma --test it NAME::` runs one of them.

mod cli;
#[cfg(feature = "rdma")]
mod rxe_vm;
