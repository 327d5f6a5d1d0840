//! Raw bindgen output for the system libdpdk plus the C shim (csrc/shim.c). Only the safe
//! wrapper in `super` uses these.
#![allow(
    non_camel_case_types,
    non_snake_case,
    non_upper_case_globals,
    dead_code,
    clippy::all,
    unnecessary_transmutes,
    // bindgen's output, not ours: the workspace's unsafe and restriction lints (SAFETY
    // comments on unsafe blocks, no unwrap) are for code someone writes.
    unsafe_op_in_unsafe_fn,
    clippy::restriction
)]
include!(concat!(env!("OUT_DIR"), "/dpdk_bindings.rs"));
