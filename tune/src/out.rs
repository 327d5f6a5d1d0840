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
/// Messages quote host data (a path from a journal, a profile name, an interface): escaped
/// for the terminal like standard output ([`TerminalSafe`]).
pub fn eprint(text: &str) {
    let mut e = TerminalSafe::new(io::stderr().lock());
    let _ = e.write_all(text.as_bytes());
    let _ = e.flush();
}

/// [`eprint`] without the escaping, for text daqtune paints itself (clap's coloured usage
/// errors).
pub fn eprint_raw(text: &str) {
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

/// A text stream made safe for a terminal on the way out (control characters and bidi
/// overrides escaped): the one the engine writes its standard error through too.
pub use daqtune_probe::text::TerminalSafe;

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
    fn bidi_overrides_are_escaped_even_split_across_writes() {
        // U+202E (RIGHT-TO-LEFT OVERRIDE) and U+2066 (LEFT-TO-RIGHT ISOLATE) reorder what a
        // terminal shows; other three-byte characters (U+2014, U+20AC) pass.
        assert_eq!(
            through(&[
                b"a\xe2\x80\xaeb \xe2",
                b"\x81\xa6c \xe2\x80\x94 \xe2\x82\xac"
            ]),
            "a\\u{202e}b \\u{2066}c \u{2014} \u{20ac}"
        );
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
