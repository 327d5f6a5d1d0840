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

/// The width standard output's text is fitted to, in columns: `COLUMNS` when it is set to a
/// number (the user's or a script's choice, kept through a pipe; `0` turns fitting off), else
/// the terminal's width (TIOCGWINSZ) when standard output is one; `None` for a pipe or a file,
/// where every line stays whole, as `ls` and `git` print them (docs/cli.md).
pub fn width() -> Option<usize> {
    if let Some(c) = std::env::var_os("COLUMNS") {
        if let Some(n) = c.to_str().and_then(|c| c.trim().parse::<usize>().ok()) {
            return (n > 0).then_some(n);
        }
    }
    terminal_size::terminal_size_of(io::stdout()).map(|(w, _)| usize::from(w.0))
}

/// `text` with each line wider than `width` broken at spaces, its continuation indented four
/// columns past the line's own indent. With `diff_lines`, a file line of a plan (`  +text`,
/// `  -text`) continues on lines marked `  ↪ `, so no piece of it reads as a line of its own.
pub fn fit(text: &str, width: Option<usize>, diff_lines: bool) -> String {
    let Some(w) = width.map(|w| w.max(20)) else {
        return text.to_string();
    };
    let mut o = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let (body, nl) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        if daqtune_probe::text::display_width(body) <= w {
            o.push_str(line);
            continue;
        }
        let lead = body.len() - body.trim_start_matches(' ').len();
        let rest = &body[lead..];
        let diff = diff_lines && (rest.starts_with('+') || rest.starts_with('-'));
        let cont = if diff {
            format!("{:lead$}↪ ", "")
        } else {
            " ".repeat((lead + 4).min(w / 2))
        };
        let cw = daqtune_probe::text::display_width(&cont);
        let pieces = daqtune_probe::text::wrap(rest, w - lead, w - cw);
        for (i, p) in pieces.iter().enumerate() {
            if i == 0 {
                o.push_str(&body[..lead]);
            } else {
                o.push('\n');
                o.push_str(&cont);
            }
            o.push_str(p);
        }
        o.push_str(nl);
    }
    o
}

/// A writer that passes whole lines through [`fit`] (a plan printed as it is made).
pub struct FitLines<W: Write> {
    inner: W,
    width: Option<usize>,
    pending: Vec<u8>,
}

impl<W: Write> FitLines<W> {
    pub fn new(inner: W, width: Option<usize>) -> Self {
        FitLines {
            inner,
            width,
            pending: Vec::new(),
        }
    }
}

impl<W: Write> Write for FitLines<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.width.is_none() {
            return self.inner.write(buf);
        }
        self.pending.extend_from_slice(buf);
        if let Some(end) = self.pending.iter().rposition(|b| *b == b'\n') {
            let done: Vec<u8> = self.pending.drain(..=end).collect();
            let text = String::from_utf8_lossy(&done);
            self.inner
                .write_all(fit(&text, self.width, true).as_bytes())?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if !self.pending.is_empty() {
            let rest = std::mem::take(&mut self.pending);
            let text = String::from_utf8_lossy(&rest).into_owned();
            self.inner
                .write_all(fit(&text, self.width, true).as_bytes())?;
        }
        self.inner.flush()
    }
}

impl<W: Write> Drop for FitLines<W> {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

/// A text stream made safe for a terminal on the way out (control characters and bidi
/// overrides escaped): the one the engine writes its standard error through too.
pub use daqtune_probe::text::TerminalSafe;

#[cfg(test)]
mod tests {
    use super::{fit, TerminalSafe};
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

    #[test]
    fn fit_breaks_long_lines_and_marks_file_lines() {
        let text = "short\n  cpu.governor  cpu0 .. cpu11 (12 CPUs)  /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor: powersave -> performance\n  +GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX isolcpus=8-11 irqaffinity=0-7 nohz_full=8-11\"\n";
        let out = fit(text, Some(40), true);
        for l in out.lines() {
            assert!(l.chars().count() <= 40, "{l:?} in\n{out}");
        }
        assert!(out.contains("\n  ↪ "), "{out}");
        assert!(
            out.lines().filter(|l| l.starts_with("  +")).count() == 1,
            "{out}"
        );
        // Without a width every line stays whole.
        assert_eq!(fit(text, None, true), text);
        // Nothing is lost: the words come back in order.
        let words = |t: &str| -> Vec<String> {
            t.split_whitespace()
                .filter(|w| *w != "↪")
                .map(String::from)
                .collect()
        };
        assert_eq!(words(&out).concat(), words(text).concat());
    }
}
