//! Validation of every value that reaches a generated file.
//!
//! The rules are deliberately narrower than what the kernel accepts: a generated unit or rule
//! is read by systemd, udev, grub or a shell, each with its own quoting, specifier and
//! expansion rules. Restricting values to plain characters makes quoting unnecessary, so no
//! quoting mistake is possible.

use std::fmt;
use std::str::FromStr;

/// A value that may not be written into a generated file, with what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {what} `{value}`: {reason}")]
pub struct InvalidValue {
    pub what: &'static str,
    pub value: String,
    pub reason: String,
}

impl InvalidValue {
    pub fn new(what: &'static str, value: &str, reason: impl Into<String>) -> Self {
        InvalidValue {
            what,
            // Keep the message on one line and printable whatever the input was.
            value: value.escape_default().to_string(),
            reason: reason.into(),
        }
    }
}

/// A network interface name as the kernel accepts it (`dev_valid_name`: 1..15 bytes, not `.`
/// or `..`, no `/`, `:` or whitespace), further limited to `[A-Za-z0-9_.-]` so that it needs
/// no quoting in a unit, a udev rule, a YAML key or an INI value.
pub fn interface_name(name: &str) -> Result<&str, InvalidValue> {
    let bad = |r: &str| Err(InvalidValue::new("interface name", name, r));
    if name.is_empty() || name.len() > 15 {
        return bad("must be 1 to 15 characters (IFNAMSIZ)");
    }
    if name == "." || name == ".." {
        return bad("`.` and `..` are not interface names");
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')))
    {
        return bad(&format!(
            "character {c:?} is not allowed (letters, digits, `_`, `.`, `-`)"
        ));
    }
    if name.starts_with('-') {
        return bad("must not start with `-`");
    }
    Ok(name)
}

/// A PCI function address, always with its domain: `DDDD:BB:DD.F` (domains of up to 8 hex
/// digits exist on hosts with many segments; VMD uses 10000+).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PciAddr {
    pub domain: u32,
    pub bus: u8,
    pub device: u8,
    pub function: u8,
}

impl FromStr for PciAddr {
    type Err = InvalidValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |r: &str| InvalidValue::new("PCI address", s, r);
        let (rest, func) = s
            .rsplit_once('.')
            .ok_or_else(|| bad("expected DDDD:BB:DD.F"))?;
        let mut parts = rest.split(':');
        let (d, b, dev) = match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some(d), Some(b), Some(dev), None) => (d, b, dev),
            _ => return Err(bad("expected DDDD:BB:DD.F (with the domain)")),
        };
        let hex = |t: &str, max_len: usize| -> Result<u32, InvalidValue> {
            if t.is_empty() || t.len() > max_len || !t.bytes().all(|c| c.is_ascii_hexdigit()) {
                return Err(bad(
                    "fields must be hexadecimal (domain up to 8 digits, bus 2, device 2)",
                ));
            }
            u32::from_str_radix(t, 16).map_err(|_| bad("not hexadecimal"))
        };
        let domain = hex(d, 8)?;
        let bus = hex(b, 2)? as u8;
        let device = hex(dev, 2)?;
        if device > 0x1f {
            return Err(bad("device number above 1f"));
        }
        if func.len() != 1 || !func.bytes().all(|c| (b'0'..=b'7').contains(&c)) {
            return Err(bad("function must be 0-7"));
        }
        Ok(PciAddr {
            domain,
            bus,
            device: device as u8,
            function: func.as_bytes()[0] - b'0',
        })
    }
}

impl fmt::Display for PciAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04x}:{:02x}:{:02x}.{}",
            self.domain, self.bus, self.device, self.function
        )
    }
}

/// An absolute path that can be written into a unit, a mount unit's `Where=`, or a command
/// line without quoting: `/` followed by components of `[A-Za-z0-9_.+-]`, no `.`/`..`
/// components, no empty components, no trailing `/`.
pub fn abs_path(p: &str) -> Result<&str, InvalidValue> {
    let bad = |r: &str| Err(InvalidValue::new("path", p, r));
    if !p.starts_with('/') {
        return bad("must be absolute");
    }
    if p == "/" {
        return bad("the root directory is not allowed here");
    }
    if p.len() > 4095 {
        return bad("longer than PATH_MAX");
    }
    for comp in p[1..].split('/') {
        if comp.is_empty() {
            return bad("empty component (`//` or a trailing `/`)");
        }
        if comp == "." || comp == ".." {
            return bad("`.` and `..` components are not allowed");
        }
        if let Some(c) = comp
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '+')))
        {
            return bad(&format!(
                "character {c:?} is not allowed (letters, digits, `_.+-`)"
            ));
        }
    }
    Ok(p)
}

/// A kernel module name (`modprobe` accepts `-` and `_` alike).
pub fn module_name(m: &str) -> Result<&str, InvalidValue> {
    if m.is_empty() || m.len() > 55 {
        return Err(InvalidValue::new(
            "module name",
            m,
            "must be 1 to 55 characters",
        ));
    }
    if !m
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        || m.starts_with('-')
    {
        return Err(InvalidValue::new(
            "module name",
            m,
            "letters, digits, `_` and `-` only",
        ));
    }
    Ok(m)
}

/// A dotted sysctl name (`net.core.rmem_max`).
pub fn sysctl_name(n: &str) -> Result<&str, InvalidValue> {
    let ok = !n.is_empty()
        && n.split('.').all(|c| {
            !c.is_empty()
                && c.chars()
                    .all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == '-')
        });
    if ok {
        Ok(n)
    } else {
        Err(InvalidValue::new(
            "sysctl name",
            n,
            "dotted words of letters, digits, `_`, `-`",
        ))
    }
}

/// A sysctl value: printable, one line (triples like `4096 87380 268435456` are fine).
pub fn sysctl_value(v: &str) -> Result<&str, InvalidValue> {
    if v.trim().is_empty() {
        return Err(InvalidValue::new("sysctl value", v, "empty"));
    }
    if !v.chars().all(|c| {
        c.is_ascii_alphanumeric() || matches!(c, ' ' | '\t' | '.' | '_' | '-' | ',' | ':' | '/')
    }) {
        return Err(InvalidValue::new(
            "sysctl value",
            v,
            "letters, digits, spaces and `._-,:/` only",
        ));
    }
    Ok(v)
}

/// One argument of a command a unit or udev rule runs (no shell is involved, but systemd
/// expands `%` specifiers and `$` variables, and udev splits on spaces and expands `%`/`$`).
pub fn exec_arg(a: &str) -> Result<&str, InvalidValue> {
    if a.is_empty() {
        return Err(InvalidValue::new("command argument", a, "empty"));
    }
    if !a.chars().all(|c| {
        c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '/' | ':' | ',' | '=' | '+')
    }) {
        return Err(InvalidValue::new(
            "command argument",
            a,
            "letters, digits and `_.-/:,=+` only (no spaces, quotes, `%` or `$`)",
        ));
    }
    Ok(a)
}

/// A profile name or profile file path passed to the daqtune a unit runs.
pub fn profile_ref(p: &str) -> Result<&str, InvalidValue> {
    if p.starts_with('/') {
        return abs_path(p);
    }
    if p.is_empty()
        || p.len() > 64
        || !p
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
        || p.starts_with('-')
        || p.starts_with('.')
    {
        return Err(InvalidValue::new(
            "profile",
            p,
            "a built-in name (letters, digits, `_.-`) or an absolute path",
        ));
    }
    Ok(p)
}

/// A CPU list as the kernel's bitmap parser reads it (`9-11`, `0-3,8-11`).
pub fn cpu_list(s: &str) -> Result<&str, InvalidValue> {
    let ok = !s.is_empty()
        && s.split(',').all(|r| {
            let mut it = r.splitn(2, '-');
            let a = it.next().unwrap_or("");
            let num =
                |t: &str| !t.is_empty() && t.len() <= 5 && t.bytes().all(|c| c.is_ascii_digit());
            num(a) && it.next().is_none_or(num)
        });
    if ok {
        Ok(s)
    } else {
        Err(InvalidValue::new(
            "CPU list",
            s,
            "comma-separated numbers and ranges like 9-11",
        ))
    }
}

/// A hugepage size as the kernel's `hugepagesz=` reads it (`2M`, `1G`, `64K`).
pub fn page_size(s: &str) -> Result<&str, InvalidValue> {
    let (num, unit) = s.split_at(s.len().saturating_sub(1));
    let ok = !num.is_empty()
        && num.bytes().all(|c| c.is_ascii_digit())
        && matches!(unit, "K" | "M" | "G" | "k" | "m" | "g");
    if ok {
        Ok(s)
    } else {
        Err(InvalidValue::new(
            "page size",
            s,
            "a number followed by K, M or G (2M, 1G)",
        ))
    }
}

/// One kernel command-line word as it goes into a boot configuration: `key` or `key=value`
/// with characters that neither grub script, extlinux nor the kernel treat specially
/// (`;` is allowed: the grub renderer escapes it).
pub fn kernel_word(w: &str) -> Result<&str, InvalidValue> {
    if w.is_empty() || w.starts_with('=') || w.starts_with('-') {
        return Err(InvalidValue::new(
            "kernel argument",
            w,
            "must start with a parameter name",
        ));
    }
    if !w.chars().all(|c| {
        c.is_ascii_alphanumeric()
            || matches!(c, '_' | '.' | '-' | ',' | ':' | '=' | '/' | '+' | ';')
    }) {
        return Err(InvalidValue::new(
            "kernel argument",
            w,
            "letters, digits and `_.-,:=/+;` only (no spaces, quotes or `$`)",
        ));
    }
    Ok(w)
}

/// A MAC address `aa:bb:cc:dd:ee:ff`, lower-cased.
pub fn mac_address(s: &str) -> Result<String, InvalidValue> {
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 6
        || !parts
            .iter()
            .all(|p| p.len() == 2 && p.bytes().all(|c| c.is_ascii_hexdigit()))
    {
        return Err(InvalidValue::new(
            "MAC address",
            s,
            "expected six hex octets aa:bb:cc:dd:ee:ff",
        ));
    }
    Ok(s.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interfaces() {
        for ok in ["eth0", "enp1s0f0np0", "enP2p1s0f1np1", "veth-a.10", "a"] {
            assert!(interface_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            ".",
            "..",
            "a b",
            "a/b",
            "eth0:1",
            "0123456789abcdef",
            "x\ny",
            "-x",
            "a%i",
            "a$b",
            "é",
        ] {
            assert!(interface_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn pci_addresses() {
        let a: PciAddr = "0005:03:00.1".parse().expect("parse");
        assert_eq!((a.domain, a.bus, a.device, a.function), (5, 3, 0, 1));
        assert_eq!(a.to_string(), "0005:03:00.1");
        let b: PciAddr = "10000:E1:1f.7".parse().expect("8-digit domains exist");
        assert_eq!(b.to_string(), "10000:e1:1f.7");
        for bad in [
            "",
            "03:00.0",
            "0000:03:00",
            "0000:03:20.0",
            "0000:03:00.8",
            "0000:zz:00.0",
            "0000:03:00.0;x",
            "0000:03:00.0 ",
            "123456789:00:00.0",
            "(null)",
        ] {
            assert!(bad.parse::<PciAddr>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn paths() {
        assert!(abs_path("/mnt/huge").is_ok());
        assert!(abs_path("/mnt/huge-1G_x.y").is_ok());
        for bad in [
            "",
            "mnt",
            "/",
            "/mnt/",
            "/mnt//x",
            "/mnt/../etc",
            "/mnt/./x",
            "/mnt/a b",
            "/mnt/%i",
            "/mnt/\"x",
            "/mnt/x\n",
        ] {
            assert!(abs_path(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn words_and_lists() {
        assert!(kernel_word("pci=disable_acs_redir=0000:01:00.0;0000:02:00.0").is_ok());
        assert!(kernel_word("rcu_nocb_poll").is_ok());
        for bad in ["", "=x", "a b", "a\"b", "a$b", "a`b", "a\\b", "a'b", "a\nb"] {
            assert!(kernel_word(bad).is_err(), "{bad:?}");
        }
        assert!(cpu_list("9-11").is_ok());
        assert!(cpu_list("0-3,8-11").is_ok());
        for bad in ["", "9-", "-1", "a", "1,,2", "1-2-3", "1 2"] {
            assert!(cpu_list(bad).is_err(), "{bad:?}");
        }
        assert!(page_size("1G").is_ok() && page_size("2M").is_ok());
        assert!(page_size("G").is_err() && page_size("1T").is_err() && page_size("").is_err());
        assert!(exec_arg("--only").is_ok() && exec_arg("a b").is_err() && exec_arg("%k").is_err());
        assert!(profile_ref("igx-orin").is_ok() && profile_ref("/etc/daqtune/x.yaml").is_ok());
        assert!(profile_ref("../x").is_err() && profile_ref("x y").is_err());
        assert!(mac_address("AA:bb:cc:dd:ee:ff").is_ok_and(|m| m == "aa:bb:cc:dd:ee:ff"));
        assert!(mac_address("aa:bb:cc:dd:ee").is_err());
        assert!(sysctl_name("net.core.rmem_max").is_ok() && sysctl_name("net..x").is_err());
        assert!(sysctl_value("4096 87380 268435456").is_ok() && sysctl_value("1\n2").is_err());
        assert!(module_name("nvidia-peermem").is_ok() && module_name("a b").is_err());
    }
}
