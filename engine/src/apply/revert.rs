//! `daqtune revert`: replay journals backwards, newest run first.

use super::apply::{file_reads_back, link_reads_back, read_word, real_path};
use super::journal::{list_runs, Entry, Journal, RunState};
use super::setters::{self, Target, Writer};
use daqtune_probe::Host;
use std::path::Path;

#[derive(Debug, Clone, Default)]
pub struct RevertReport {
    /// (what, result) per entry undone.
    pub steps: Vec<(String, Result<(), String>)>,
    pub runs: Vec<String>,
    pub commands: Vec<(String, Result<(), String>)>,
}

impl RevertReport {
    pub fn failed(&self) -> usize {
        self.steps.iter().filter(|s| s.1.is_err()).count()
    }
}

/// Revert every run under `base` that is not reverted yet.
pub fn revert_all(host: &Host, base: &Path, w: &mut dyn Writer) -> RevertReport {
    revert_all_with(host, base, w, None)
}

/// [`revert_all`] with access to the GPUs, for runs that locked clocks.
pub fn revert_all_with(
    host: &Host,
    base: &Path,
    w: &mut dyn Writer,
    gpu: Option<&dyn super::gpu::GpuSetters>,
) -> RevertReport {
    let mut rep = RevertReport::default();
    let target = if host.is_live() {
        Target::Live
    } else {
        Target::Root
    };
    let (mut grub, mut units, mut udev) = (false, false, false);
    for dir in list_runs(base).into_iter().rev() {
        let mut j = match Journal::open(&dir) {
            Ok(j) => j,
            Err(e) => {
                rep.steps.push((
                    dir.display().to_string(),
                    Err(format!("unreadable journal: {e}")),
                ));
                continue;
            }
        };
        if j.doc.state == RunState::Reverted {
            continue;
        }
        rep.runs.push(j.doc.id.clone());
        let mut ok = true;
        for rec in j.doc.records.clone().iter().rev() {
            if let Entry::File { path, .. } | Entry::Symlink { path, .. } = &rec.entry {
                grub |= path.starts_with("/etc/default/grub");
                units |= path.starts_with("/etc/systemd/");
                udev |= path.starts_with("/etc/udev/");
            }
            let r = undo(host, target, &j, &rec.entry, w, gpu);
            ok &= r.is_ok();
            rep.steps.push((describe(&rec.entry), r));
        }
        if ok {
            if let Err(e) = j.finish(w, RunState::Reverted) {
                rep.steps.push((
                    j.doc.id.clone(),
                    Err(format!("cannot mark the journal reverted: {e}")),
                ));
            }
        }
    }
    if target == Target::Live {
        rep.commands = super::apply::commands_for(grub, units, udev);
    }
    rep
}

fn describe(e: &Entry) -> String {
    match e {
        Entry::File {
            path,
            original: None,
            ..
        } => format!("remove {path}"),
        Entry::File { path, .. } => format!("restore {path}"),
        Entry::Symlink { path, .. } => format!("remove link {path}"),
        Entry::Attr { path, original, .. } => format!("{path} = {}", original.trim()),
        Entry::Mtu {
            ifname, original, ..
        } => format!("MTU of {ifname} = {original}"),
        Entry::ConfigWord {
            bdf,
            original,
            mask,
            ..
        } => format!(
            "{bdf} config bits 0x{mask:04x} back to 0x{:04x}",
            original & mask
        ),
        Entry::Module { name } => format!("unload {name}"),
        Entry::Mount { target, .. } => format!("umount {target}"),
        Entry::GpuLock {
            uuid,
            domain,
            previously_locked: true,
            ..
        } => {
            format!(
                "{} clock of {uuid}: left locked (the lock was someone else's before apply)",
                domain.as_str()
            )
        }
        Entry::GpuLock { uuid, domain, .. } => {
            format!("unlock the {} clock of {uuid}", domain.as_str())
        }
        Entry::GpuPersistence { uuid, original } => format!("persistence of {uuid} = {original:?}"),
    }
}

/// The read-back of a removal: nothing is left at the path (not even a dangling link).
fn gone(real: &Path, path: &str) -> Result<(), String> {
    match std::fs::symlink_metadata(real) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Ok(_) => Err(format!("{path}: removed, but it is still there")),
        Err(e) => Err(format!("{path}: read back after removing it: {e}")),
    }
}

/// Undo of a file or link apply created: remove it, read back that it is gone, then the empty
/// directories apply made for it.
fn remove_new(
    w: &mut dyn Writer,
    host: &Host,
    real: &Path,
    path: &str,
    created_dir: &Option<String>,
) -> Result<(), String> {
    w.remove(real).map_err(|err| format!("{path}: {err}"))?;
    gone(real, path)?;
    remove_created(host, created_dir, real);
    Ok(())
}

fn remove_created(host: &Host, created: &Option<String>, file: &Path) {
    let Some(top) = created else { return };
    let Ok(top_real) = real_path(host, top, false) else {
        return;
    };
    // Remove the now-empty directories from the file's parent up to the one apply created.
    let mut cur = file.parent();
    while let Some(d) = cur {
        if std::fs::remove_dir(d).is_err() || d == top_real {
            break;
        }
        cur = d.parent();
    }
}

fn undo(
    host: &Host,
    target: Target,
    j: &Journal,
    e: &Entry,
    w: &mut dyn Writer,
    gpu: Option<&dyn super::gpu::GpuSetters>,
) -> Result<(), String> {
    let ioe = |what: &str| {
        let what = what.to_string();
        move |err: std::io::Error| format!("{what}: {err}")
    };
    match e {
        Entry::File {
            path,
            original,
            created_dir,
        } => {
            let real = real_path(host, path, false)?;
            match original {
                Some(saved) => {
                    let bytes = j
                        .blob(&saved.blob)
                        .map_err(ioe(&format!("journal copy of {path}")))?;
                    w.write_file(&real, &bytes, saved.mode).map_err(ioe(path))?;
                    file_reads_back(&real, path, &bytes)
                }
                None => remove_new(w, host, &real, path, created_dir),
            }
        }
        Entry::Symlink {
            path,
            original,
            created_dir,
        } => {
            let real = real_path(host, path, false)?;
            match original {
                Some(t) => {
                    w.symlink(t, &real).map_err(ioe(path))?;
                    link_reads_back(&real, path, t)
                }
                None => remove_new(w, host, &real, path, created_dir),
            }
        }
        Entry::Attr {
            path,
            original,
            new,
            ..
        } => {
            let real = real_path(host, path, true)?;
            match target {
                // Byte for byte: the root's file gets back exactly what it held.
                Target::Root => {
                    let mode = std::fs::metadata(&real)
                        .map(|m| {
                            use std::os::unix::fs::PermissionsExt;
                            m.permissions().mode() & 0o7777
                        })
                        .unwrap_or(0o644);
                    w.write_file(&real, original.as_bytes(), mode)
                        .map_err(ioe(path))?;
                    file_reads_back(&real, path, original.as_bytes())
                }
                Target::Live => {
                    let owned;
                    let mut value = original.trim();
                    // A hugepage pool is shared: give back the pages this run added, not
                    // more, in case someone reserved pages since (when nobody did, this is
                    // exactly the prior count).
                    if path.ends_with("/nr_hugepages") {
                        let now = std::fs::read_to_string(&real)
                            .ok()
                            .and_then(|s| s.trim().parse::<u64>().ok());
                        if let (Some(now), Ok(orig), Ok(set)) = (
                            now,
                            original.trim().parse::<u64>(),
                            new.trim().parse::<u64>(),
                        ) {
                            owned = now.saturating_sub(set.saturating_sub(orig)).to_string();
                            value = &owned;
                        }
                    }
                    // The selected governor is the only word sysfs shows for scaling_governor;
                    // nr_hugepages is a count. Both are written back as read.
                    w.write_attr(&real, value, Target::Live)
                        .map_err(ioe(path))?;
                    let back = std::fs::read_to_string(&real).map_err(ioe(path))?;
                    if back.trim() != value {
                        return Err(format!(
                            "{path}: wrote `{value}` back, reads `{}`",
                            back.trim()
                        ));
                    }
                    Ok(())
                }
            }
        }
        Entry::Mtu {
            ifname, original, ..
        } => {
            w.set_mtu(ifname, *original)
                .map_err(ioe(&format!("MTU of {ifname}")))?;
            let back = w.mtu(ifname).map_err(ioe(ifname))?;
            if back != *original {
                return Err(format!(
                    "{ifname}: MTU reads {back} after restoring {original}"
                ));
            }
            Ok(())
        }
        Entry::ConfigWord {
            bdf,
            path,
            offset,
            original,
            mask,
            ..
        } => {
            let real = real_path(host, path, true)?;
            let cur = read_word(&real, *offset).map_err(ioe(bdf))?;
            if cur == 0xffff {
                return Err(format!(
                    "{bdf}: the register reads 0xffff (device gone); not writing"
                ));
            }
            // Only the bits apply changed go back; anything else the register gained since stays.
            let restored = (cur & !mask) | (original & mask);
            w.pwrite(&real, *offset, &restored.to_le_bytes())
                .map_err(ioe(bdf))?;
            let back = read_word(&real, *offset).map_err(ioe(&format!("{bdf}: read back")))?;
            if back & mask != original & mask {
                return Err(format!(
                    "{bdf}: wrote 0x{restored:04x} back (bits 0x{mask:04x} = 0x{:04x}), reads back 0x{back:04x}",
                    original & mask
                ));
            }
            Ok(())
        }
        Entry::GpuLock {
            uuid,
            domain,
            previously_locked,
            floor_before_mhz,
            ..
        } => {
            if *previously_locked {
                return Ok(());
            }
            gpu.ok_or("no GPU control available to undo a clock lock")?
                .unlock(uuid, *domain, *floor_before_mhz)
        }
        Entry::GpuPersistence { uuid, original } => match original {
            Some(false) => gpu
                .ok_or("no GPU control available to undo persistence mode")?
                .set_persistence(uuid, false)
                .map(|_| ()),
            _ => Ok(()),
        },
        Entry::Module { name } => match target {
            // Only what the kernel lists is unloaded (an apply whose modprobe did not take
            // leaves its entry), and the module must be gone after.
            Target::Live if !setters::module_loaded(host, name) => Ok(()),
            Target::Live => {
                w.modprobe(name, true).map_err(|e| e.to_string())?;
                if setters::module_loaded(host, name) {
                    return Err(format!(
                        "{name}: modprobe -r succeeded, but the kernel still lists the module"
                    ));
                }
                Ok(())
            }
            Target::Root => Ok(()),
        },
        // Target-independent: the mount table is read through the host root and the unmount
        // goes through the Writer (only a live apply journals a mount; under a root the mount
        // is a `File` change of the root's /proc/mounts).
        Entry::Mount {
            fstype,
            target: mp,
            created_dir,
        } => {
            let real = real_path(host, mp, true)?;
            // Only a mount the kernel lists is unmounted (an apply whose mount(2) did not
            // show leaves its entry), and it must be gone after.
            if setters::mounted(host, mp, fstype) {
                w.umount(&real).map_err(|e| format!("umount {mp}: {e}"))?;
                if setters::mounted(host, mp, fstype) {
                    return Err(format!(
                        "umount {mp} succeeded, but /proc/self/mounts still lists {fstype} there"
                    ));
                }
            }
            if *created_dir {
                // Only an empty directory goes (rmdir): files someone put there stay.
                match std::fs::remove_dir(&real) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(format!("rmdir {mp}: {e}")),
                }
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests;
