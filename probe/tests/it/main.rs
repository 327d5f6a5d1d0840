//! The one integration-test binary of this crate (issue 44): each former tests/NAME.rs is a
//! module here; `cargo test -p daqtune-probe --test it NAME::` runs one of them.

mod dbus_daemon;
mod lspci_compare;
mod pci_fixtures;
