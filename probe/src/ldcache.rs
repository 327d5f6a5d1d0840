//! The dynamic loader's view of a host's shared libraries: `/etc/ld.so.cache` (what `ldconfig
//! -p` prints, and what Python's `ctypes.util.find_library` consults first) and the directories
//! the loader searches. Read through a [`Host`], so a host root answers for the host it holds.

use crate::host::Host;

/// glibc's cache format since 2.32, alone or after the old one (`dl-cache.h`:
/// `CACHEMAGIC_NEW` "glibc-ld.so.cache" followed by `CACHE_VERSION` "1.1").
const MAGIC_NEW: &[u8] = b"glibc-ld.so.cache1.1";
/// `struct cache_file_new` before its entries: magic and version (20), nlibs, len_strings,
/// flags + padding, extension_offset, unused[3].
const HEADER_NEW: usize = 48;
/// `struct file_entry_new`: flags (i32), key, value (u32 string offsets from the header),
/// osversion_unused (u32), hwcap (u64).
const ENTRY_NEW: usize = 24;
/// Entries a cache may claim before it is taken as corrupt (a distribution's holds a few
/// thousand).
const MAX_ENTRIES: usize = 1 << 20;

/// One library the cache lists: its soname (`libnuma.so.1`) and the path the loader maps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheEntry {
    pub name: String,
    pub path: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CacheError {
    #[error("not an ld.so.cache of glibc's format 1.1 (no `glibc-ld.so.cache1.1` header)")]
    NoHeader,
    #[error("the cache is cut short: {0}")]
    Truncated(&'static str),
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    let s = b.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

/// The NUL-terminated string at `off` of `b`.
fn c_str(b: &[u8], off: usize) -> Option<String> {
    let rest = b.get(off..)?;
    let end = rest.iter().position(|c| *c == 0)?;
    Some(String::from_utf8_lossy(&rest[..end]).into_owned())
}

/// The entries of an `ld.so.cache` (little-endian: x86-64 and arm64 alike). The old format
/// (`ld.so-1.7.0`), when present, is followed by the new one, which is the one read.
pub fn parse_cache(bytes: &[u8]) -> Result<Vec<CacheEntry>, CacheError> {
    let start = bytes
        .windows(MAGIC_NEW.len())
        .position(|w| w == MAGIC_NEW)
        .ok_or(CacheError::NoHeader)?;
    let new = &bytes[start..];
    let nlibs = u32_at(new, 20).ok_or(CacheError::Truncated("header"))? as usize;
    if nlibs > MAX_ENTRIES {
        return Err(CacheError::Truncated("implausible entry count"));
    }
    let table_end = nlibs
        .checked_mul(ENTRY_NEW)
        .and_then(|n| n.checked_add(HEADER_NEW))
        .ok_or(CacheError::Truncated("entry table"))?;
    if new.len() < table_end {
        return Err(CacheError::Truncated("entry table"));
    }
    let mut out = Vec::with_capacity(nlibs);
    for i in 0..nlibs {
        let e = HEADER_NEW + i * ENTRY_NEW;
        let (Some(key), Some(value)) = (u32_at(new, e + 4), u32_at(new, e + 8)) else {
            return Err(CacheError::Truncated("entry"));
        };
        let (Some(name), Some(path)) = (c_str(new, key as usize), c_str(new, value as usize))
        else {
            return Err(CacheError::Truncated("string table"));
        };
        out.push(CacheEntry { name, path });
    }
    Ok(out)
}

/// The directories the loader searches besides its cache: the trusted ones and the multiarch
/// ones of Debian/Ubuntu (x86-64 and arm64), then what `/etc/ld.so.conf` and the `*.conf` files
/// of `/etc/ld.so.conf.d` list (ldconfig builds the cache from them).
pub fn search_dirs(host: &Host) -> Vec<String> {
    let mut dirs: Vec<String> = [
        "/lib/x86_64-linux-gnu",
        "/usr/lib/x86_64-linux-gnu",
        "/lib/aarch64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/lib64",
        "/usr/lib64",
        "/lib",
        "/usr/lib",
        "/usr/local/lib",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut confs = vec!["/etc/ld.so.conf".to_string()];
    if let Ok(names) = host.read_dir("/etc/ld.so.conf.d") {
        confs.extend(
            names
                .iter()
                .filter(|n| n.ends_with(".conf"))
                .map(|n| format!("/etc/ld.so.conf.d/{n}")),
        );
    }
    for c in confs {
        let Ok(text) = host.read_string(&c) else {
            continue;
        };
        for line in text.lines() {
            let l = line.split('#').next().unwrap_or("").trim();
            // `include` lines name the .conf.d files, read above.
            if l.starts_with('/') && !dirs.iter().any(|d| d == l) {
                dirs.push(l.to_string());
            }
        }
    }
    dirs
}

/// Where the loader finds the library `soname` on this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// Listed in the cache (its path), or present in a searched directory.
    At { path: String, from_cache: bool },
    /// The loader's cache does not list it, nor does any searched directory hold it.
    Absent,
    /// Nothing to tell by: no readable cache, and no directory holds it (a capture that holds
    /// no file system, or only part of one).
    Unknown(String),
}

pub fn find_library(host: &Host, soname: &str) -> Found {
    let cache = host.read_bytes("/etc/ld.so.cache");
    let cache_note = match &cache {
        Ok(b) => match parse_cache(b) {
            Ok(entries) => {
                if let Some(e) = entries.iter().find(|e| e.name == soname) {
                    return Found::At {
                        path: e.path.clone(),
                        from_cache: true,
                    };
                }
                None
            }
            Err(e) => Some(format!("/etc/ld.so.cache: {e}")),
        },
        // The read error names the path already.
        Err(e) => Some(e.to_string()),
    };
    let dirs = search_dirs(host);
    let mut any_dir = false;
    for d in &dirs {
        if !host.is_dir(d) {
            continue;
        }
        any_dir = true;
        let p = format!("{d}/{soname}");
        if host.exists(&p) {
            return Found::At {
                path: p,
                from_cache: false,
            };
        }
    }
    // Without the cache (every glibc host has one, so this is a partial root: a capture, or a
    // snapshot that recorded other files of those directories) a directory that lacks the
    // file proves nothing.
    match cache_note {
        Some(why) if !any_dir => Found::Unknown(format!(
            "{why}, and none of the loader's directories ({}) is there",
            dirs.join(", ")
        )),
        Some(why) => Found::Unknown(format!(
            "{why}, and the loader's directories here do not hold {soname} (a root without the cache may not hold every library either)"
        )),
        None => Found::Absent,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cache laid out as glibc's `dl-cache.h` describes it, written field by field.
    fn cache(libs: &[(&str, &str)], old_prefix: bool) -> Vec<u8> {
        let mut strings: Vec<u8> = Vec::new();
        let table = HEADER_NEW + libs.len() * ENTRY_NEW;
        let mut offs = Vec::new();
        for (name, path) in libs {
            let k = table + strings.len();
            strings.extend_from_slice(name.as_bytes());
            strings.push(0);
            let v = table + strings.len();
            strings.extend_from_slice(path.as_bytes());
            strings.push(0);
            offs.push((k as u32, v as u32));
        }
        let mut b = Vec::new();
        b.extend_from_slice(b"glibc-ld.so.cache");
        b.extend_from_slice(b"1.1");
        b.extend_from_slice(&(libs.len() as u32).to_le_bytes());
        b.extend_from_slice(&(strings.len() as u32).to_le_bytes());
        b.extend_from_slice(&[2, 0, 0, 0]); // flags: little-endian, padding
        b.extend_from_slice(&0u32.to_le_bytes()); // extension_offset
        b.extend_from_slice(&[0u8; 12]); // unused[3]
        assert_eq!(b.len(), HEADER_NEW);
        for (k, v) in offs {
            b.extend_from_slice(&0x0303i32.to_le_bytes()); // FLAG_ELF_LIBC6 | FLAG_AARCH64_LIB64
            b.extend_from_slice(&k.to_le_bytes());
            b.extend_from_slice(&v.to_le_bytes());
            b.extend_from_slice(&0u32.to_le_bytes());
            b.extend_from_slice(&0u64.to_le_bytes());
        }
        b.extend_from_slice(&strings);
        if old_prefix {
            // "ld.so-1.7.0", nlibs 0, then the new format.
            let mut o = b"ld.so-1.7.0".to_vec();
            o.extend_from_slice(&0u32.to_le_bytes());
            o.extend_from_slice(&[0u8; 1]);
            o.extend_from_slice(&b);
            return o;
        }
        b
    }

    #[test]
    fn entries_are_read_by_their_offsets() {
        let b = cache(
            &[
                ("libnuma.so.1", "/lib/aarch64-linux-gnu/libnuma.so.1"),
                ("libc.so.6", "/lib/aarch64-linux-gnu/libc.so.6"),
            ],
            false,
        );
        let e = parse_cache(&b).expect("cache");
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].name, "libnuma.so.1");
        assert_eq!(e[0].path, "/lib/aarch64-linux-gnu/libnuma.so.1");
        assert_eq!(e[1].name, "libc.so.6");
        let o = cache(&[("libnuma.so.1", "/usr/lib64/libnuma.so.1")], true);
        assert_eq!(
            parse_cache(&o).expect("old+new")[0].path,
            "/usr/lib64/libnuma.so.1"
        );
    }

    #[test]
    fn damaged_caches_are_errors_not_panics() {
        assert_eq!(parse_cache(b"junk"), Err(CacheError::NoHeader));
        let b = cache(&[("libnuma.so.1", "/lib/libnuma.so.1")], false);
        for cut in [HEADER_NEW - 1, HEADER_NEW + 10, b.len() - 3] {
            assert!(parse_cache(&b[..cut]).is_err(), "cut at {cut}");
        }
        let mut huge = b.clone();
        huge[20..24].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(parse_cache(&huge).is_err());
    }
}
