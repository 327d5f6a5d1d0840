//! Raw bindgen output for the system libdpdk plus the C shim (csrc/shim.c). Only the safe
//! wrapper in `super` uses these.
#![allow(
    non_camel_case_types,
    non_snake_case,
    non_upper_case_globals,
    dead_code,
    clippy::all,
    unnecessary_transmutes
)]
include!(concat!(env!("OUT_DIR"), "/dpdk_bindings.rs"));
