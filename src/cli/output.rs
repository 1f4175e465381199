//! What the programs print on standard output, written so that a reader that went away
//! (`ski teams … | head -0`, `ski-fake-slack serve | true`) ends the output quietly instead of
//! panicking as `println!` does on a closed pipe (EPIPE).
//!
//! The first write that finds the pipe closed marks stdout closed for the rest of the process:
//! later writes succeed without writing anything, and the command goes on to its own exit code.
//! Every program of the workspace prints through this module (`ski aof`, `ski teams`, `ski kiro`,
//! `ski-mock-agent`, `ski-fake-slack`).

use std::fmt;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once a write to stdout found its reader gone.
static CLOSED: AtomicBool = AtomicBool::new(false);

/// Set once a write to stdout failed otherwise, so that the failure is reported only once.
static FAILED: AtomicBool = AtomicBool::new(false);

/// This process's stdout, where a closed reader ends the output instead of being an error.
///
/// Writes go through [`std::io::stdout`] (and its buffer). A `BrokenPipe` from a write or a flush
/// is answered as if everything was written, and so is every later write; other errors are
/// returned as they are.
#[derive(Debug, Default, Clone, Copy)]
pub struct QuietStdout;

/// This process's stdout as a [`QuietStdout`].
pub fn stdout() -> QuietStdout {
    QuietStdout
}

/// Whether a write found stdout's reader gone (the output has ended).
pub fn is_closed() -> bool {
    CLOSED.load(Ordering::Relaxed)
}

/// Turns a `BrokenPipe` into `closed`, marking stdout closed; other results pass.
fn quiet<T>(result: io::Result<T>, closed: T) -> io::Result<T> {
    match result {
        Err(error) if error.kind() == io::ErrorKind::BrokenPipe => {
            CLOSED.store(true, Ordering::Relaxed);
            Ok(closed)
        }
        other => other,
    }
}

impl Write for QuietStdout {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if is_closed() {
            return Ok(buf.len());
        }
        quiet(io::stdout().write(buf), buf.len())
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        if is_closed() {
            return Ok(());
        }
        quiet(io::stdout().lock().write_all(buf), ())
    }

    fn flush(&mut self) -> io::Result<()> {
        if is_closed() {
            return Ok(());
        }
        quiet(io::stdout().flush(), ())
    }
}

/// Writes `text` and a newline to stdout and flushes; a closed reader is not an error.
pub fn try_line(text: impl fmt::Display) -> io::Result<()> {
    let mut out = stdout();
    writeln!(out, "{text}")?;
    out.flush()
}

/// Writes `text` as it is to stdout and flushes; a closed reader is not an error.
pub fn try_text(text: &str) -> io::Result<()> {
    let mut out = stdout();
    out.write_all(text.as_bytes())?;
    out.flush()
}

/// Prints `text` and a newline: the `println!` of the programs. A closed reader ends the output
/// quietly; any other failure is reported once on stderr (`error: cannot write to stdout: …`)
/// and ends the output too.
pub fn line(text: impl fmt::Display) {
    report(try_line(text));
}

/// Prints `text` as it is: the `print!` of the programs, with [`line`]'s handling of failures.
pub fn text(text: &str) {
    report(try_text(text));
}

/// Runs `print`, a write to stdout that blocks while nobody reads the output, without stalling
/// the async runtime it is called on: on a worker of a multi-thread runtime the worker's other
/// tasks move to another thread first (`tokio::task::block_in_place`), so the process's
/// connections go on meanwhile; anywhere else `print` simply runs.
pub fn blocking_write<T>(print: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(runtime) if runtime.runtime_flavor() == RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(print)
        }
        _ => print(),
    }
}

fn report(result: io::Result<()>) {
    if let Err(error) = result {
        CLOSED.store(true, Ordering::Relaxed);
        if !FAILED.swap(true, Ordering::Relaxed) {
            eprintln!("error: cannot write to stdout: {error}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broken_pipe_is_the_end_of_output_and_other_errors_pass() {
        let broken = io::Error::from(io::ErrorKind::BrokenPipe);
        assert_eq!(quiet(Err(broken), 7).unwrap(), 7);
        assert!(is_closed());
        let full = io::Error::from(io::ErrorKind::StorageFull);
        assert_eq!(
            quiet::<usize>(Err(full), 7).unwrap_err().kind(),
            io::ErrorKind::StorageFull
        );
        // Closed: writes are answered without reaching the real stdout.
        assert_eq!(stdout().write(b"not printed").unwrap(), 11);
        stdout().write_all(b"not printed either").unwrap();
        stdout().flush().unwrap();
    }
}
