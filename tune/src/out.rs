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
        None => ExitCode::from(code),
        Some(e) if e.kind() == io::ErrorKind::BrokenPipe => crate::sig::die_of_sigpipe(),
        Some(e) => {
            eprint(&format!("daqtune: cannot write to standard output: {e}\n"));
            ExitCode::from(2)
        }
    }
}
