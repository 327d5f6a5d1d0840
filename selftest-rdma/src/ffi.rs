//! Raw bindings to libibverbs, generated at build time by bindgen (see build.rs). Only
//! `verbs.rs` uses them.
#![allow(
    non_camel_case_types,
    non_snake_case,
    non_upper_case_globals,
    dead_code,
    unsafe_op_in_unsafe_fn,
    clippy::all,
    clippy::pedantic,
    // bindgen's output, not ours: the workspace's restriction lints (SAFETY comments on
    // unsafe blocks, no unwrap) are for code someone writes.
    clippy::restriction
)]

include!(concat!(env!("OUT_DIR"), "/verbs.rs"));
