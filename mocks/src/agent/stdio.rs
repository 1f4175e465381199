//! This process's stdin and stdout as the binary uses them. When they are pipes they are read
//! and written without blocking (no helper threads, which matters for start-up time); closing
//! stdout really closes the pipe, so the reader sees end of stream while the process runs on.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::unix::pipe;

/// Stdin: a non-blocking pipe when it is one, else tokio's stdin.
#[derive(Debug)]
pub enum ProcessStdin {
    /// A pipe read without blocking.
    Pipe(pipe::Receiver),
    /// Anything else (a terminal, a file), read on tokio's blocking pool.
    Other(tokio::io::Stdin),
}

impl ProcessStdin {
    /// This process's stdin.
    pub fn new() -> Self {
        let pipe = std::io::stdin()
            .as_fd()
            .try_clone_to_owned()
            .and_then(pipe::Receiver::from_owned_fd);
        match pipe {
            Ok(receiver) => ProcessStdin::Pipe(receiver),
            Err(_) => ProcessStdin::Other(tokio::io::stdin()),
        }
    }
}

impl Default for ProcessStdin {
    fn default() -> Self {
        Self::new()
    }
}

impl AsyncRead for ProcessStdin {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ProcessStdin::Pipe(receiver) => Pin::new(receiver).poll_read(cx, buf),
            ProcessStdin::Other(stdin) => Pin::new(stdin).poll_read(cx, buf),
        }
    }
}

/// Stdout: a non-blocking pipe when it is one (and not shared with stderr), else tokio's
/// stdout. Shutting it down points file descriptor 1 at `/dev/null`.
#[derive(Debug)]
pub enum ProcessStdout {
    /// A pipe written without blocking.
    Pipe(pipe::Sender),
    /// Anything else, written on tokio's blocking pool.
    Other(tokio::io::Stdout),
    /// Closed.
    Closed,
}

fn same_file(a: &impl AsFd, b: &impl AsFd) -> bool {
    match (
        nix::sys::stat::fstat(a.as_fd()),
        nix::sys::stat::fstat(b.as_fd()),
    ) {
        (Ok(a), Ok(b)) => a.st_dev == b.st_dev && a.st_ino == b.st_ino,
        _ => true,
    }
}

impl ProcessStdout {
    /// This process's stdout.
    pub fn new() -> Self {
        let stdout = std::io::stdout();
        // Making the pipe non-blocking changes it for every holder; stderr writes to the same
        // pipe (`2>&1`) would then fail, so that case keeps blocking writes.
        if same_file(&stdout, &std::io::stderr()) {
            return ProcessStdout::Other(tokio::io::stdout());
        }
        let pipe = stdout
            .as_fd()
            .try_clone_to_owned()
            .and_then(pipe::Sender::from_owned_fd);
        match pipe {
            Ok(sender) => ProcessStdout::Pipe(sender),
            Err(_) => ProcessStdout::Other(tokio::io::stdout()),
        }
    }

    fn redirect_to_null() -> io::Result<()> {
        let null: OwnedFd = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/null")?
            .into();
        nix::unistd::dup2_stdout(&null).map_err(io::Error::from)
    }
}

impl Default for ProcessStdout {
    fn default() -> Self {
        Self::new()
    }
}

impl AsyncWrite for ProcessStdout {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            ProcessStdout::Pipe(sender) => Pin::new(sender).poll_write(cx, buf),
            ProcessStdout::Other(stdout) => Pin::new(stdout).poll_write(cx, buf),
            ProcessStdout::Closed => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "stdout is closed",
            ))),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ProcessStdout::Pipe(sender) => Pin::new(sender).poll_flush(cx),
            ProcessStdout::Other(stdout) => Pin::new(stdout).poll_flush(cx),
            ProcessStdout::Closed => Poll::Ready(Ok(())),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let flushed = match this {
            ProcessStdout::Pipe(sender) => Pin::new(sender).poll_flush(cx),
            ProcessStdout::Other(stdout) => Pin::new(stdout).poll_flush(cx),
            ProcessStdout::Closed => return Poll::Ready(Ok(())),
        };
        match flushed {
            Poll::Ready(Ok(())) => {}
            other => return other,
        }
        // Dropping the pipe closes this process's duplicate of the descriptor; pointing
        // descriptor 1 elsewhere closes the original.
        *this = ProcessStdout::Closed;
        Poll::Ready(Self::redirect_to_null())
    }
}
