//! The one integration-test binary of this crate (issue 44): each former tests/NAME.rs is a
//! module here; `cargo test -p daqtune-units --test it NAME::` runs one of them.

mod golden;
mod grub_sh_prop;
