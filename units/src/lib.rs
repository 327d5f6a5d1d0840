//! Pure renderers for daqtune's persistent artifacts: text in, text out.
//!
//! Nothing here touches the file system. The planner in the `daqtune` crate decides which
//! artifacts a host needs, reads the files that are already there, and hands their text to
//! these functions; what comes back is the exact content to write (and diff, and journal).
//!
//! Every name or path that ends up inside a generated file goes through [`validate`] first:
//! interface names, PCI addresses, mount points and kernel arguments are checked against
//! strict character sets, so nothing a user or a host supplies can smuggle a second
//! directive, a shell metacharacter or a systemd specifier into a unit.

pub mod etc;
pub mod extlinux;
pub mod grub;
pub mod grubcfg;
pub mod network;
pub mod systemd;
pub mod udev;
pub mod validate;

pub use validate::{InvalidValue, PciAddr};

/// The first line of every file daqtune writes, so a reader (and `daqtune revert`) can tell
/// an owned file from one written by someone else.
pub const OWNER_MARK: &str = "Written by daqtune";

/// Where an installed daqtune is looked for, in order, inside the host root: the Debian
/// package's path (`sudo apt install ./target/debian/daqtune_*.deb`, or
/// `cargo install --path tune --root /usr`), then `cargo install --root /usr/local`'s. Units and
/// udev rules run the first one that is a regular executable file; `--exe` names another.
pub const INSTALLED_EXE: &[&str] = &["/usr/bin/daqtune", "/usr/local/bin/daqtune"];

/// How to get a daqtune binary units can run (the advice of every refusal and check that
/// finds none).
pub const INSTALL_ADVICE: &str = "install daqtune first (`sudo apt install ./target/debian/daqtune_*.deb` after `scripts/build-deb.sh`, or `cargo install --path tune --root /usr`), or pass --exe PATH naming an installed daqtune";
