//! Standard output and error as the coreutils treat them.
//!
//! Rust ignores SIGPIPE, so `print!` on a closed pipe (`daqtune explain --list | head -1`)
//! panics with "failed printing to stdout", and `let _ = writeln!(stdout, ..)` on a full disk
//! (`> /dev/full`) loses the output without a word. Every command's standard output goes
//! through [`Stdout`] instead (the engine's functions get it as their `out`): the first
//! failed write is remembered and later output dropped, so the command still finishes what
//! it does (files it was asked to write, a journal); [`finish`] then flushes and decides:
//!
//! - a reader that went away (EPIPE): the process ends as `cat` or `seq` do, killed by
//!   SIGPIPE, without a message;
//! - any other failure (ENOSPC, EIO): `daqtune: cannot write to standard output: ...` on
//!   stderr and exit 2, whatever the command's own result was.
//!
//! Messages to stderr go through [`eprint`], which never panics (stderr on a closed pipe or a
//! full disk has nowhere left to report to).

use std::io::{self, Write};
use std::process::ExitCode;
use std::sync::Mutex;

/// The first error writing standard output, if any.
static FAILED: Mutex<Option<io::Error>> = Mutex::new(None);

fn failed() -> bool {
    FAILED.lock().map(|f| f.is_some()).unwrap_or(true)
}

fn record(e: io::Error) {
    if let Ok(mut f) = FAILED.lock() {
        if f.is_none() {
            *f = Some(e);
        }
    }
}

/// The process's standard output; writes never fail to the caller (see the module docs).
pub struct Stdout;

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if !failed() {
            if let Err(e) = io::stdout().lock().write_all(buf) {
                record(e);
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if !failed() {
            if let Err(e) = io::stdout().lock().flush() {
                record(e);
            }
        }
        Ok(())
    }
}

/// Writes `text` to standard output (see [`Stdout`]).
pub fn print(text: &str) {
    let _ = Stdout.write_all(text.as_bytes());
}

/// Writes `text` to standard error; a failure is not reported (there is nowhere to).
pub fn eprint(text: &str) {
    let mut e = io::stderr().lock();
    let _ = e.write_all(text.as_bytes());
    let _ = e.flush();
}

/// The exit status of a command whose own result is `code`: flushes standard output and
/// reports a failed write (see the module docs).
pub fn finish(code: u8) -> ExitCode {
    let _ = Stdout.flush();
    let e = FAILED.lock().ok().and_then(|mut f| f.take());
    match e {
        // The self-test front ends write through the selftest crate's `emit`, which said so.
        None if daqtune_selftest::report::emit_failed() => ExitCode::from(2),
        None => ExitCode::from(code),
        Some(e) if e.kind() == io::ErrorKind::BrokenPipe => crate::sig::die_of_sigpipe(),
        Some(e) => {
            eprint(&format!("daqtune: cannot write to standard output: {e}\n"));
            ExitCode::from(2)
        }
    }
}

/// A text stream made safe for a terminal on the way out: every control character but newline
/// and tab is written as [`daqtune_probe::text::printable`] writes it (`\x1b`, `\u{009b}`), so
/// host data that a plan, an apply or a matrix quotes (a file's old contents, a netdev or DMI
/// name from a snapshot) cannot move the cursor or retitle the terminal. For the text outputs
/// that draw no colours of their own; the check report escapes its fields itself (it paints
/// status words). A C1 control is two bytes in UTF-8 (`0xC2 0x80..=0x9F`), which one write may
/// split: the lead byte waits for the next write.
pub struct TerminalSafe<W: Write> {
    inner: W,
    pending_c2: bool,
}

impl<W: Write> TerminalSafe<W> {
    pub fn new(inner: W) -> Self {
        TerminalSafe {
            inner,
            pending_c2: false,
        }
    }
}

impl<W: Write> Write for TerminalSafe<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut o = Vec::with_capacity(buf.len());
        for &b in buf {
            if self.pending_c2 {
                self.pending_c2 = false;
                if (0x80..=0x9f).contains(&b) {
                    o.extend_from_slice(format!("\\u{{{:04x}}}", b).as_bytes());
                    continue;
                }
                o.push(0xc2);
            }
            match b {
                b'\n' | b'\t' => o.push(b),
                0x00..=0x1f | 0x7f => o.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
                0xc2 => self.pending_c2 = true,
                _ => o.push(b),
            }
        }
        self.inner.write_all(&o)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if std::mem::take(&mut self.pending_c2) {
            self.inner.write_all(&[0xc2])?;
        }
        self.inner.flush()
    }
}

impl<W: Write> Drop for TerminalSafe<W> {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::TerminalSafe;
    use std::io::Write;

    fn through(parts: &[&[u8]]) -> String {
        let mut v = Vec::new();
        {
            let mut t = TerminalSafe::new(&mut v);
            for p in parts {
                t.write_all(p).expect("write");
            }
        }
        String::from_utf8(v).expect("utf8")
    }

    #[test]
    fn control_characters_are_escaped_text_is_kept() {
        assert_eq!(
            through(&[b"eth0\x1b]0;pwned\x07 ok\n\tnext \xc3\xa9\n"]),
            "eth0\\x1b]0;pwned\\x07 ok\n\tnext \u{e9}\n"
        );
        // CSI as a C1 control (U+009B), split across two writes, and a plain U+00A9 after it.
        assert_eq!(
            through(&[b"a\xc2", b"\x9b2J b\xc2", b"\xa9"]),
            "a\\u{009b}2J b\u{a9}"
        );
        assert_eq!(through(&[b"\r\x7f"]), "\\x0d\\x7f");
    }
}
