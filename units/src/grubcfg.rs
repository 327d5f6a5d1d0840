//! `/boot/grub/grub.cfg` as grub reads it at boot: which menu entry is the default and the
//! kernel arguments on its `linux` line. That, not `/etc/default/grub`, is what the next boot
//! passes: the defaults files only matter once `update-grub` (grub-mkconfig) has turned them
//! into grub.cfg.
//!
//! The model covers what grub-mkconfig generates (Debian's and Ubuntu's `00_header` and
//! `10_linux`, Fedora's without BLS): `set default=...` at the top level, also inside the
//! header's `if [ "${next_entry}" ]` one-shot branch; `saved_entry`/`next_entry` from grubenv
//! (`GRUB_DEFAULT=saved`, `grub-reboot`); `menuentry` and `submenu` blocks nested with braces,
//! their titles and `$menuentry_id_option` ids; a default given as an index, a title, an id or
//! a `>`-separated path into submenus. grub falls back to the first entry when the default
//! names none. What it cannot follow (BLS `blscfg`, an entry list built by commands) is an
//! error saying so, never a guess.

/// The entry the next boot starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootEntry {
    /// Titles from the top menu down (`Advanced options for Debian GNU/Linux` >
    /// `Debian GNU/Linux, with Linux 6.1.0-18-amd64`).
    pub titles: Vec<String>,
    pub id: Option<String>,
    /// The words after the kernel image on the entry's `linux` line, grub quoting removed
    /// (`\;` is `;` again); unexpanded variables (`$vt_handoff`) stay as written.
    pub args: Vec<String>,
    /// 1-based line of that `linux` line.
    pub line: usize,
    /// How the default was chosen, for messages (`set default="0"` at line 17, ...).
    pub chosen_by: String,
}

impl BootEntry {
    pub fn title(&self) -> String {
        self.titles.join(" > ")
    }
}

#[derive(Debug, Clone, Default)]
struct Entry {
    title: String,
    id: Option<String>,
    /// (line, args) of its `linux` line.
    linux: Option<(usize, Vec<String>)>,
    children: Option<Vec<Entry>>,
}

/// Split one line of grub script into words: `'...'` literal, `"..."` with `\"`, `\\`, `\$`
/// escapes, a backslash outside quotes escaping the next character, `#` starting a comment
/// at a word boundary. Variables are not expanded.
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\r' => {
                if in_word {
                    out.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            '#' if !in_word => break,
            '\\' => {
                in_word = true;
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            '\'' => {
                in_word = true;
                for n in chars.by_ref() {
                    if n == '\'' {
                        break;
                    }
                    cur.push(n);
                }
            }
            '"' => {
                in_word = true;
                while let Some(n) = chars.next() {
                    match n {
                        '"' => break,
                        '\\' => match chars.peek() {
                            Some(&e) if matches!(e, '"' | '\\' | '$') => {
                                cur.push(e);
                                chars.next();
                            }
                            _ => cur.push('\\'),
                        },
                        _ => cur.push(n),
                    }
                }
            }
            ';' if !in_word => {}
            _ => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        out.push(cur);
    }
    out
}

/// A menuentry/submenu line: (title, id).
fn entry_head(w: &[String]) -> (String, Option<String>) {
    let title = w.get(1).cloned().unwrap_or_default();
    let mut id = None;
    let mut i = 2;
    while i < w.len() {
        let x = w[i].as_str();
        if matches!(
            x,
            "$menuentry_id_option" | "${menuentry_id_option}" | "--id"
        ) {
            id = w.get(i + 1).cloned();
            i += 2;
            continue;
        }
        if let Some(v) = x.strip_prefix("--id=") {
            id = Some(v.to_string());
        }
        i += 1;
    }
    (title, id)
}

/// The parsed file: the top menu, and the `set default=` assignments (line, value, inside the
/// `next_entry` one-shot branch).
struct Parsed {
    menu: Vec<Entry>,
    defaults: Vec<(usize, String, bool)>,
    bls: bool,
}

fn parse(cfg: &str) -> Parsed {
    // The stack of open brace blocks: Some(entry) for menuentry/submenu, None for others
    // (function bodies, which define no menu).
    let mut stack: Vec<Option<Entry>> = Vec::new();
    let mut menu: Vec<Entry> = Vec::new();
    let mut defaults = Vec::new();
    // `if` conditions at the top level, with whether we are in its `else` part.
    let mut ifs: Vec<(String, bool)> = Vec::new();
    let mut bls = false;
    for (n, raw) in cfg.lines().enumerate() {
        let line_no = n + 1;
        // Statements separated by `;` on one line (`if [ x ] ; then`): handled word by word.
        let w = words(raw);
        if w.is_empty() {
            continue;
        }
        let first = w[0].as_str();
        let opens = w.last().is_some_and(|l| l == "{");
        match first {
            "menuentry" | "submenu" if opens => {
                let (title, id) = entry_head(&w);
                stack.push(Some(Entry {
                    title,
                    id,
                    linux: None,
                    children: (first == "submenu").then(Vec::new),
                }));
                continue;
            }
            "}" => {
                if let Some(Some(e)) = stack.pop() {
                    match stack.iter_mut().rev().find_map(|s| s.as_mut()) {
                        Some(parent) => {
                            if let Some(c) = parent.children.as_mut() {
                                c.push(e);
                            }
                        }
                        None => menu.push(e),
                    }
                }
                continue;
            }
            _ if opens => {
                stack.push(None);
                continue;
            }
            _ => {}
        }
        let inside_entry = stack.iter().any(|s| s.is_some());
        if inside_entry {
            if matches!(first, "linux" | "linux16" | "linuxefi") && w.len() >= 2 {
                if let Some(Some(e)) = stack.iter_mut().rev().find(|s| s.is_some()) {
                    e.linux = Some((line_no, w[2..].to_vec()));
                }
            }
            continue;
        }
        if !stack.is_empty() {
            // Inside a function body.
            continue;
        }
        if w.iter().any(|x| x == "blscfg") {
            bls = true;
        }
        // Walk the statements of the line.
        let mut i = 0;
        while i < w.len() {
            match w[i].as_str() {
                "if" | "elif" => {
                    let cond: Vec<&str> = w[i + 1..]
                        .iter()
                        .take_while(|x| *x != "then")
                        .map(String::as_str)
                        .collect();
                    if w[i] == "if" {
                        ifs.push((cond.join(" "), false));
                    } else if let Some(top) = ifs.last_mut() {
                        *top = (cond.join(" "), false);
                    }
                    i += cond.len() + 1;
                }
                "else" => {
                    if let Some(top) = ifs.last_mut() {
                        top.1 = true;
                    }
                    i += 1;
                }
                "fi" => {
                    ifs.pop();
                    i += 1;
                }
                "set" => {
                    if let Some(v) = w.get(i + 1).and_then(|a| a.strip_prefix("default=")) {
                        let one_shot = ifs
                            .iter()
                            .any(|(c, in_else)| c.contains("next_entry") && !in_else);
                        defaults.push((line_no, v.to_string(), one_shot));
                    }
                    i += 2;
                }
                _ => i += 1,
            }
        }
    }
    Parsed {
        menu,
        defaults,
        bls,
    }
}

/// `key=value` lines of a grubenv block.
fn grubenv_var(env: Option<&str>, key: &str) -> Option<String> {
    env?.lines().find_map(|l| {
        l.strip_prefix(key)
            .and_then(|r| r.strip_prefix('='))
            .map(|v| v.trim_end().to_string())
    })
}

/// Split a default into its `>`-separated parts (`>>` is a literal `>`).
fn path_parts(v: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut chars = v.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '>' {
            if chars.peek() == Some(&'>') {
                chars.next();
                if let Some(last) = out.last_mut() {
                    last.push('>');
                }
            } else {
                out.push(String::new());
            }
        } else if let Some(last) = out.last_mut() {
            last.push(c);
        }
    }
    out
}

/// The default entry of `cfg` (grub.cfg's text), with `grubenv` (the environment block next
/// to it) for `saved_entry` and `next_entry`. `Err` says why it cannot be told.
pub fn default_entry(cfg: &str, grubenv: Option<&str>) -> Result<BootEntry, String> {
    let p = parse(cfg);
    if p.menu.is_empty() {
        return Err(if p.bls {
            "grub.cfg builds its menu from /boot/loader/entries (blscfg); daqtune does not read BLS entries".into()
        } else {
            "grub.cfg defines no menuentry daqtune can follow".into()
        });
    }
    // The header: `set default="${next_entry}"` applies once after grub-reboot; otherwise the
    // last plain `set default=`.
    let next = grubenv_var(grubenv, "next_entry").filter(|v| !v.is_empty());
    let mut chosen: Option<(String, String)> = None;
    for (line, v, one_shot) in &p.defaults {
        if *one_shot {
            if let (Some(n), true) = (&next, v.contains("next_entry")) {
                chosen = Some((
                    n.clone(),
                    format!(
                        "next_entry={n} in grubenv (a one-time grub-reboot choice, line {line})"
                    ),
                ));
                break;
            }
            continue;
        }
        let resolved = if v.contains("saved_entry") {
            let s = grubenv_var(grubenv, "saved_entry").unwrap_or_default();
            (
                s.clone(),
                format!("set default=\"{v}\" at line {line}, saved_entry={s} in grubenv"),
            )
        } else if v.contains('$') {
            return Err(format!(
                "grub.cfg line {line} sets the default from a variable daqtune does not model ({v})"
            ));
        } else {
            (v.clone(), format!("set default=\"{v}\" at line {line}"))
        };
        chosen = Some(resolved);
    }
    let (value, mut how) = chosen.unwrap_or_else(|| ("0".into(), "no default set".into()));
    let mut menu = &p.menu;
    let mut titles = Vec::new();
    let mut parts = path_parts(&value).into_iter();
    let mut part = parts.next();
    loop {
        let idx = match part.as_deref() {
            None | Some("") => 0,
            Some(x) => match x.parse::<usize>() {
                Ok(n) if n < menu.len() => n,
                Ok(_) | Err(_) => match menu
                    .iter()
                    .position(|e| e.title == x || e.id.as_deref() == Some(x))
                {
                    Some(i) => i,
                    None => {
                        how.push_str(&format!("; `{x}` names no entry, so grub boots the first"));
                        0
                    }
                },
            },
        };
        let e = &menu[idx];
        titles.push(e.title.clone());
        match &e.children {
            Some(children) if !children.is_empty() => {
                menu = children;
                part = parts.next();
            }
            Some(_) => return Err(format!("the default submenu `{}` is empty", e.title)),
            None => {
                return match &e.linux {
                    Some((line, args)) => Ok(BootEntry {
                        titles,
                        id: e.id.clone(),
                        args: args.clone(),
                        line: *line,
                        chosen_by: how,
                    }),
                    None => Err(format!(
                        "the default entry `{}` starts no Linux kernel (no linux line)",
                        titles.join(" > ")
                    )),
                };
            }
        }
    }
}

/// The raw lines of the `menuentry` block whose `linux` line is line `linux_line` (1-based):
/// from its `menuentry ... {` line to its closing `}`. `None` when that line is not inside a
/// menuentry. The trial boot's entry is made from these lines (the same `insmod`, `search` and
/// `initrd` as the entry that boots now), so BIOS, UEFI and arm64 entries need no model here.
pub fn entry_block(cfg: &str, linux_line: usize) -> Option<Vec<String>> {
    let lines: Vec<&str> = cfg.lines().collect();
    // Open blocks: (line index, is a menuentry).
    let mut stack: Vec<(usize, bool)> = Vec::new();
    let mut target: Option<(usize, usize)> = None;
    for (i, raw) in lines.iter().enumerate() {
        let w = words(raw);
        if let Some(first) = w.first() {
            if first == "}" {
                let closed = stack.pop();
                if let (Some((start, true)), Some((t, depth))) = (closed, target) {
                    if start == t && stack.len() == depth {
                        return Some(lines[start..=i].iter().map(|l| l.to_string()).collect());
                    }
                }
                continue;
            }
            if w.last().is_some_and(|l| l == "{") {
                stack.push((i, first == "menuentry"));
                continue;
            }
        }
        if i + 1 == linux_line {
            let (start, _) = *stack.iter().rev().find(|(_, m)| *m)?;
            let depth = stack.iter().position(|(s, _)| *s == start)?;
            target = Some((start, depth));
        }
    }
    None
}

/// Whether grub.cfg's header clears a one-time `next_entry` at the boot that uses it
/// (`set next_entry=` and `save_env next_entry` in the `if [ "${next_entry}" ]` branch, as
/// grub-mkconfig's 00_header writes it where the environment block can be written). Without
/// that a one-time entry would boot every time.
pub fn clears_next_entry(cfg: &str) -> bool {
    let p = parse(cfg);
    let one_shot = p
        .defaults
        .iter()
        .any(|(_, v, one_shot)| *one_shot && v.contains("next_entry"));
    let saves = cfg.lines().any(|l| {
        let w = words(l);
        w.len() == 2 && w[0] == "save_env" && w[1] == "next_entry"
    });
    one_shot && saves
}

/// The size of a GRUB environment block (grub-editenv's `GRUB_ENVBLK_DEFCFG` is 1024 bytes:
/// GRUB rewrites the block in place at boot and never changes its size).
pub const GRUBENV_SIZE: usize = 1024;
const GRUBENV_HEADER: &str = "# GRUB Environment Block\n";

/// Why an environment block cannot be read or made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrubenvError {
    #[error("not a GRUB environment block (no `# GRUB Environment Block` header)")]
    NoHeader,
    #[error("{0} bytes, not the {GRUBENV_SIZE} of a GRUB environment block")]
    Size(usize),
    #[error("the variables need {0} bytes, more than a {GRUBENV_SIZE}-byte block holds")]
    TooLong(usize),
    #[error("variable `{0}`: a name of letters, digits and `_` without a newline in its value is needed")]
    Invalid(String),
}

/// The variables of an environment block, in order (`name=value` lines after the header; the
/// `#` padding ends them).
pub fn grubenv_vars(block: &[u8]) -> Result<Vec<(String, String)>, GrubenvError> {
    if block.len() != GRUBENV_SIZE {
        return Err(GrubenvError::Size(block.len()));
    }
    let text = String::from_utf8_lossy(block);
    let body = text
        .strip_prefix(GRUBENV_HEADER)
        .ok_or(GrubenvError::NoHeader)?;
    Ok(body
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| {
            l.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
        })
        .collect())
}

/// An environment block holding `vars`, padded with `#` to [`GRUBENV_SIZE`] bytes as
/// grub-editenv writes it.
pub fn grubenv_block(vars: &[(String, String)]) -> Result<Vec<u8>, GrubenvError> {
    let mut s = String::from(GRUBENV_HEADER);
    for (k, v) in vars {
        let name_ok = !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !name_ok || v.contains(['\n', '\\']) {
            return Err(GrubenvError::Invalid(k.clone()));
        }
        s.push_str(&format!("{k}={v}\n"));
    }
    if s.len() > GRUBENV_SIZE {
        return Err(GrubenvError::TooLong(s.len()));
    }
    let mut b = s.into_bytes();
    b.resize(GRUBENV_SIZE, b'#');
    Ok(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What Debian 12's update-grub writes (trimmed to the parts that decide the entry).
    pub const DEBIAN: &str = r#"#
# DO NOT EDIT THIS FILE
#
### BEGIN /etc/grub.d/00_header ###
if [ -s $prefix/grubenv ]; then
  set have_grubenv=true
  load_env
fi
if [ "${next_entry}" ] ; then
   set default="${next_entry}"
   set next_entry=
   save_env next_entry
   set boot_once=true
else
   set default="0"
fi

if [ x"${feature_menuentry_id}" = xy ]; then
  menuentry_id_option="--id"
else
  menuentry_id_option=""
fi

export menuentry_id_option

function load_video {
  if [ x$feature_all_video_module = xy ]; then
    insmod all_video
  else
    insmod efi_gop
  fi
}

### BEGIN /etc/grub.d/10_linux ###
menuentry 'Debian GNU/Linux' --class debian --class gnu-linux --class gnu --class os $menuentry_id_option 'gnulinux-simple-1b2c' {
	load_video
	insmod gzio
	if [ x$grub_platform = xxen ]; then insmod xzio; insmod lzopio; fi
	set root='hd0,msdos1'
	echo	'Loading Linux 6.1.0-18-amd64 ...'
	linux	/boot/vmlinuz-6.1.0-18-amd64 root=UUID=1b2c ro  quiet isolcpus=2-3 pci=disable_acs_redir=0000:01:00.0\;0000:02:00.0
	echo	'Loading initial ramdisk ...'
	initrd	/boot/initrd.img-6.1.0-18-amd64
}
submenu 'Advanced options for Debian GNU/Linux' $menuentry_id_option 'gnulinux-advanced-1b2c' {
	menuentry 'Debian GNU/Linux, with Linux 6.1.0-18-amd64' --class debian $menuentry_id_option 'gnulinux-6.1.0-18-amd64-advanced-1b2c' {
		linux	/boot/vmlinuz-6.1.0-18-amd64 root=UUID=1b2c ro  quiet isolcpus=2-3
	}
	menuentry 'Debian GNU/Linux, with Linux 6.1.0-18-amd64 (recovery mode)' --class debian $menuentry_id_option 'gnulinux-6.1.0-18-amd64-recovery-1b2c' {
		linux	/boot/vmlinuz-6.1.0-18-amd64 root=UUID=1b2c ro single
	}
	menuentry 'Debian GNU/Linux, with Linux 6.1.0-10-amd64' --class debian $menuentry_id_option 'gnulinux-6.1.0-10-amd64-advanced-1b2c' {
		linux	/boot/vmlinuz-6.1.0-10-amd64 root=UUID=1b2c ro  quiet
	}
}
### END /etc/grub.d/10_linux ###
menuentry 'UEFI Firmware Settings' $menuentry_id_option 'uefi-firmware' {
	fwsetup
}
"#;

    #[test]
    fn debian_default_is_the_first_entry() {
        let e = default_entry(DEBIAN, None).expect("entry");
        assert_eq!(e.titles, ["Debian GNU/Linux"]);
        assert_eq!(e.id.as_deref(), Some("gnulinux-simple-1b2c"));
        assert_eq!(
            e.args,
            [
                "root=UUID=1b2c",
                "ro",
                "quiet",
                "isolcpus=2-3",
                "pci=disable_acs_redir=0000:01:00.0;0000:02:00.0"
            ]
        );
        assert_eq!(e.line, 41);
        assert!(e.chosen_by.contains("set default=\"0\""), "{}", e.chosen_by);
    }

    #[test]
    fn saved_and_one_shot_defaults() {
        let saved = DEBIAN.replace("set default=\"0\"", "set default=\"${saved_entry}\"");
        let env = "# GRUB Environment Block\nsaved_entry=gnulinux-advanced-1b2c>gnulinux-6.1.0-10-amd64-advanced-1b2c\n#####\n";
        let e = default_entry(&saved, Some(env)).expect("entry");
        assert_eq!(e.titles[1], "Debian GNU/Linux, with Linux 6.1.0-10-amd64");
        assert_eq!(e.args, ["root=UUID=1b2c", "ro", "quiet"]);
        // Nothing saved: the first entry.
        let e = default_entry(&saved, Some("saved_entry=\n")).expect("entry");
        assert_eq!(e.titles, ["Debian GNU/Linux"]);
        // grub-reboot's one-shot choice wins for the next boot, by title path.
        let env = "next_entry=Advanced options for Debian GNU/Linux>Debian GNU/Linux, with Linux 6.1.0-18-amd64 (recovery mode)\n";
        let e = default_entry(DEBIAN, Some(env)).expect("entry");
        assert_eq!(e.args, ["root=UUID=1b2c", "ro", "single"]);
        assert!(e.chosen_by.contains("one-time"), "{}", e.chosen_by);
    }

    #[test]
    fn numeric_paths_titles_and_fallbacks() {
        let d = |v: &str| DEBIAN.replace("set default=\"0\"", &format!("set default=\"{v}\""));
        assert_eq!(
            default_entry(&d("1>2"), None).expect("e").titles[1],
            "Debian GNU/Linux, with Linux 6.1.0-10-amd64"
        );
        // A submenu chosen alone opens on its first entry.
        assert_eq!(
            default_entry(&d("1"), None).expect("e").titles[1],
            "Debian GNU/Linux, with Linux 6.1.0-18-amd64"
        );
        assert_eq!(
            default_entry(&d("Debian GNU/Linux"), None)
                .expect("e")
                .titles,
            ["Debian GNU/Linux"]
        );
        // An entry that does not exist: grub boots the first.
        let e = default_entry(&d("gone"), None).expect("e");
        assert_eq!(e.titles, ["Debian GNU/Linux"]);
        assert!(e.chosen_by.contains("names no entry"), "{}", e.chosen_by);
        // The firmware entry boots no kernel.
        assert!(default_entry(&d("uefi-firmware"), None).is_err());
        assert_eq!(path_parts("a>>b>c"), ["a>b", "c"]);
    }

    #[test]
    fn what_cannot_be_told_is_an_error() {
        assert!(default_entry("", None).is_err());
        let bls = "set default=\"${saved_entry}\"\ninsmod blscfg\nblscfg\n";
        assert!(default_entry(bls, None)
            .expect_err("bls")
            .contains("blscfg"));
        let var = DEBIAN.replace("set default=\"0\"", "set default=\"${chosen}\"");
        assert!(default_entry(&var, None).is_err());
        for t in [
            "menuentry {",
            "}",
            "menuentry 'x' {\nlinux\n}",
            "\"",
            "'",
            "\\",
        ] {
            let _ = default_entry(t, None);
        }
    }

    #[test]
    fn entry_block_of_the_default_and_of_a_nested_entry() {
        let e = default_entry(DEBIAN, None).expect("entry");
        let b = entry_block(DEBIAN, e.line).expect("block");
        assert!(b[0].starts_with("menuentry 'Debian GNU/Linux' "), "{b:?}");
        assert_eq!(b.last().map(String::as_str), Some("}"));
        assert!(
            b.iter().any(|l| l.trim_start().starts_with("initrd")),
            "{b:?}"
        );
        // The `if ...; fi` inside the entry does not end it early.
        assert_eq!(b.len(), 10, "{b:?}");
        let nested = DEBIAN
            .lines()
            .position(|l| l.contains("root=UUID=1b2c ro single"))
            .expect("recovery line");
        let b = entry_block(DEBIAN, nested + 1).expect("nested");
        assert!(b[0].contains("(recovery mode)"), "{b:?}");
        assert_eq!(b.len(), 3);
        assert_eq!(entry_block(DEBIAN, 1), None);
    }

    #[test]
    fn debian_header_clears_next_entry() {
        assert!(clears_next_entry(DEBIAN));
        // A header without save_env (a block grub cannot write: btrfs, LVM, RAID).
        let no_save = DEBIAN.replace("   save_env next_entry\n", "");
        assert!(!clears_next_entry(&no_save));
        assert!(!clears_next_entry(
            "set default=\"0\"\nmenuentry 'x' {\nlinux /v\n}\n"
        ));
    }

    #[test]
    fn grubenv_blocks_as_grub_editenv_writes_them() {
        // `grub-editenv grubenv create` then `set next_entry=daqtune-trial`: the header, one
        // line per variable, `#` up to 1024 bytes.
        let b = grubenv_block(&[("next_entry".into(), "daqtune-trial".into())]).expect("block");
        assert_eq!(b.len(), 1024);
        assert!(b.starts_with(b"# GRUB Environment Block\nnext_entry=daqtune-trial\n#"));
        assert!(b[50..].iter().all(|c| *c == b'#'));
        assert_eq!(
            grubenv_vars(&b).expect("vars"),
            [("next_entry".to_string(), "daqtune-trial".to_string())]
        );
        let empty = grubenv_block(&[]).expect("empty");
        assert_eq!(grubenv_vars(&empty).expect("vars"), []);
        assert_eq!(grubenv_vars(b"x"), Err(GrubenvError::Size(1)));
        assert!(grubenv_block(&[("a b".into(), "c".into())]).is_err());
        assert!(grubenv_block(&[("a".into(), "x".repeat(1100))]).is_err());
    }

    #[test]
    fn ubuntu_vt_handoff_is_kept_as_written() {
        let cfg = "set default=\"0\"\nmenuentry 'Ubuntu' --class ubuntu $menuentry_id_option 'gnulinux-simple-x' {\n\tlinux\t/boot/vmlinuz-6.8.0-45-generic root=UUID=x ro  quiet splash $vt_handoff\n}\n";
        let e = default_entry(cfg, None).expect("e");
        assert_eq!(
            e.args,
            ["root=UUID=x", "ro", "quiet", "splash", "$vt_handoff"]
        );
    }
}
