//! This process's stdin and stdout as every ski program speaks on them.
//!
//! When a descriptor is a pipe or a Unix socket it is read and written without blocking on the
//! runtime's own reactor: no helper thread and no thread hop per message, which on stdio costs
//! more than all the JSON work. Files and terminals fall back to tokio's `stdin()`/`stdout()`
//! (blocking reads on tokio's blocking pool). Shutting stdout down really closes it: the reader at
//! the other end sees end of stream while this process runs on.
//!
//! Both must be created inside a tokio runtime (the pipes register with its reactor).

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::pin::Pin;
use std::task::{Context, Poll};

use nix::sys::stat::{SFlag, fstat};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::UnixStream;
use tokio::net::unix::pipe;

/// What a standard descriptor turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Pipe,
    Socket,
    Other,
}

fn kind_of(fd: BorrowedFd<'_>) -> Kind {
    match fstat(fd) {
        Ok(stat) => match SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT {
            SFlag::S_IFIFO => Kind::Pipe,
            SFlag::S_IFSOCK => Kind::Socket,
            _ => Kind::Other,
        },
        Err(_) => Kind::Other,
    }
}

/// A Unix socket descriptor as a non-blocking tokio stream.
fn socket_stream(fd: OwnedFd) -> io::Result<UnixStream> {
    let stream = std::os::unix::net::UnixStream::from(fd);
    stream.set_nonblocking(true)?;
    UnixStream::from_std(stream)
}

/// Stdin: read without blocking when it is a pipe or a socket, else through tokio's stdin.
#[derive(Debug)]
pub enum ProcessStdin {
    /// A pipe read on the reactor.
    Pipe(pipe::Receiver),
    /// A Unix socket read on the reactor.
    Socket(UnixStream),
    /// Anything else (a terminal, a file), read on tokio's blocking pool.
    Other(tokio::io::Stdin),
}

impl ProcessStdin {
    /// This process's stdin.
    pub fn new() -> Self {
        let stdin = std::io::stdin();
        let kind = kind_of(stdin.as_fd());
        let owned = match stdin.as_fd().try_clone_to_owned() {
            Ok(owned) => owned,
            Err(_) => return ProcessStdin::Other(tokio::io::stdin()),
        };
        let made = match kind {
            Kind::Pipe => pipe::Receiver::from_owned_fd(owned).map(ProcessStdin::Pipe),
            Kind::Socket => socket_stream(owned).map(ProcessStdin::Socket),
            Kind::Other => return ProcessStdin::Other(tokio::io::stdin()),
        };
        made.unwrap_or_else(|_| ProcessStdin::Other(tokio::io::stdin()))
    }
}

/// Points descriptor 0 at `/dev/null`, which closes the original stdin pipe once no
/// [`ProcessStdin`] holds its copy: the writer at the other end then gets `EPIPE`.
pub fn close_stdin() -> io::Result<()> {
    let null: OwnedFd = std::fs::OpenOptions::new()
        .read(true)
        .open("/dev/null")?
        .into();
    nix::unistd::dup2_stdin(&null).map_err(io::Error::from)
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
            ProcessStdin::Socket(stream) => Pin::new(stream).poll_read(cx, buf),
            ProcessStdin::Other(stdin) => Pin::new(stdin).poll_read(cx, buf),
        }
    }
}

/// Stdout: written without blocking when it is a pipe or a socket (and not shared with stderr),
/// else through tokio's stdout. Shutting it down closes the pipe (descriptor 1 then points at
/// `/dev/null`) or the socket's writing half.
#[derive(Debug)]
pub enum ProcessStdout {
    /// A pipe written on the reactor.
    Pipe(pipe::Sender),
    /// A Unix socket written on the reactor.
    Socket(UnixStream),
    /// Anything else, written on tokio's blocking pool.
    Other(tokio::io::Stdout),
    /// Closed.
    Closed,
}

/// Whether two descriptors are the same open file (or cannot be told apart).
fn same_file(a: BorrowedFd<'_>, b: BorrowedFd<'_>) -> bool {
    match (fstat(a), fstat(b)) {
        (Ok(a), Ok(b)) => a.st_dev == b.st_dev && a.st_ino == b.st_ino,
        _ => true,
    }
}

impl ProcessStdout {
    /// This process's stdout.
    pub fn new() -> Self {
        let stdout = std::io::stdout();
        // Non-blocking mode belongs to the open file, so it changes for every holder; stderr
        // writes to the same pipe (`2>&1`) would then fail, so that case keeps blocking writes.
        if same_file(stdout.as_fd(), std::io::stderr().as_fd()) {
            return ProcessStdout::Other(tokio::io::stdout());
        }
        let kind = kind_of(stdout.as_fd());
        let owned = match stdout.as_fd().try_clone_to_owned() {
            Ok(owned) => owned,
            Err(_) => return ProcessStdout::Other(tokio::io::stdout()),
        };
        let made = match kind {
            Kind::Pipe => pipe::Sender::from_owned_fd(owned).map(ProcessStdout::Pipe),
            Kind::Socket => socket_stream(owned).map(ProcessStdout::Socket),
            Kind::Other => return ProcessStdout::Other(tokio::io::stdout()),
        };
        made.unwrap_or_else(|_| ProcessStdout::Other(tokio::io::stdout()))
    }

    /// Points descriptor 1 at `/dev/null`, which closes the original pipe.
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

fn closed_error() -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, "stdout is closed")
}

impl AsyncWrite for ProcessStdout {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            ProcessStdout::Pipe(sender) => Pin::new(sender).poll_write(cx, buf),
            ProcessStdout::Socket(stream) => Pin::new(stream).poll_write(cx, buf),
            ProcessStdout::Other(stdout) => Pin::new(stdout).poll_write(cx, buf),
            ProcessStdout::Closed => Poll::Ready(Err(closed_error())),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            ProcessStdout::Pipe(sender) => Pin::new(sender).poll_write_vectored(cx, bufs),
            ProcessStdout::Socket(stream) => Pin::new(stream).poll_write_vectored(cx, bufs),
            ProcessStdout::Other(stdout) => Pin::new(stdout).poll_write_vectored(cx, bufs),
            ProcessStdout::Closed => Poll::Ready(Err(closed_error())),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            ProcessStdout::Pipe(sender) => sender.is_write_vectored(),
            ProcessStdout::Socket(stream) => stream.is_write_vectored(),
            ProcessStdout::Other(stdout) => stdout.is_write_vectored(),
            ProcessStdout::Closed => false,
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ProcessStdout::Pipe(sender) => Pin::new(sender).poll_flush(cx),
            ProcessStdout::Socket(stream) => Pin::new(stream).poll_flush(cx),
            ProcessStdout::Other(stdout) => Pin::new(stdout).poll_flush(cx),
            ProcessStdout::Closed => Poll::Ready(Ok(())),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let flushed = match this {
            ProcessStdout::Pipe(sender) => Pin::new(sender).poll_flush(cx),
            // Shutting the socket's writing half down is what closing means for a socket.
            ProcessStdout::Socket(stream) => {
                let shut = Pin::new(stream).poll_shutdown(cx);
                if shut.is_ready() {
                    *this = ProcessStdout::Closed;
                }
                return shut;
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptors_are_told_apart_by_kind() {
        let (reader, writer) = std::io::pipe().expect("a pipe");
        assert_eq!(kind_of(reader.as_fd()), Kind::Pipe);
        assert_eq!(kind_of(writer.as_fd()), Kind::Pipe);
        let (a, _b) = std::os::unix::net::UnixStream::pair().expect("a socket pair");
        assert_eq!(kind_of(a.as_fd()), Kind::Socket);
        let file = tempfile::tempfile().expect("a file");
        assert_eq!(kind_of(file.as_fd()), Kind::Other);
    }
}
