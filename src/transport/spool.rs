//! A writer that takes bytes into a bounded queue at once and writes them on from a task of its
//! own, so its owner goes on (reading the far end, say) while the far end does not read what it
//! is sent. Past the bound, writes wait as a full pipe's would.
//!
//! Flushing hands the bytes over: it succeeds once they are queued, not once the far end took
//! them. Shutting down waits until every queued byte was written, then shuts the inner writer
//! down. A write error of the task is returned by the next call, and the queue is dropped.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinHandle;
use tokio_util::sync::PollSemaphore;

/// The bound of a spool that nothing else bounds: 16 MiB queued.
pub const DEFAULT_SPOOL_BYTES: usize = 16 * 1024 * 1024;

/// The first write error of a spool's task, kept for its owner.
type Failure = Arc<Mutex<Option<(io::ErrorKind, String)>>>;

/// An [`AsyncWrite`] in front of `W`; see the module documentation. Create it inside a tokio
/// runtime.
#[derive(Debug)]
pub struct SpooledWrite {
    chunks: Option<mpsc::UnboundedSender<Vec<u8>>>,
    room: PollSemaphore,
    limit: usize,
    failure: Failure,
    drain: Option<JoinHandle<io::Result<()>>>,
}

impl SpooledWrite {
    /// Queues up to `limit` bytes (at least 1) for `inner`.
    pub fn new<W>(inner: W, limit: usize) -> Self
    where
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let limit = limit.clamp(1, u32::MAX as usize);
        let room = Arc::new(Semaphore::new(limit));
        let failure = Failure::default();
        let (chunks, queued) = mpsc::unbounded_channel();
        let drain = tokio::spawn(drain(inner, queued, room.clone(), failure.clone()));
        Self {
            chunks: Some(chunks),
            room: PollSemaphore::new(room),
            limit,
            failure,
            drain: Some(drain),
        }
    }

    /// The bytes queued and not yet written.
    pub fn queued_bytes(&self) -> usize {
        self.limit - self.room.available_permits()
    }

    fn failed(&self) -> Option<io::Error> {
        let failure = self.failure.lock().unwrap_or_else(PoisonError::into_inner);
        failure
            .as_ref()
            .map(|(kind, message)| io::Error::new(*kind, message.clone()))
    }
}

fn closed() -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, "the spooled writer is shut down")
}

/// Writes every queued chunk to `inner`, giving its room back as it goes; at the end of the
/// queue flushes and shuts `inner` down.
async fn drain<W>(
    mut inner: W,
    mut queued: mpsc::UnboundedReceiver<Vec<u8>>,
    room: Arc<Semaphore>,
    failure: Failure,
) -> io::Result<()>
where
    W: AsyncWrite + Unpin,
{
    let result = async {
        while let Some(chunk) = queued.recv().await {
            inner.write_all(&chunk).await?;
            room.add_permits(chunk.len());
            if queued.is_empty() {
                inner.flush().await?;
            }
        }
        inner.shutdown().await
    }
    .await;
    if let Err(error) = &result {
        *failure.lock().unwrap_or_else(PoisonError::into_inner) =
            Some((error.kind(), error.to_string()));
        // A writer waiting for room learns of the failure instead of waiting for ever.
        room.close();
    }
    result
}

impl AsyncWrite for SpooledWrite {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if let Some(error) = self.failed() {
            return Poll::Ready(Err(error));
        }
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let take = buf.len().min(self.limit);
        let permits = u32::try_from(take).unwrap_or(u32::MAX);
        let Some(permit) = ready!(self.room.poll_acquire_many(cx, permits)) else {
            return Poll::Ready(Err(self.failed().unwrap_or_else(closed)));
        };
        permit.forget();
        let Some(chunks) = &self.chunks else {
            return Poll::Ready(Err(closed()));
        };
        if chunks.send(buf[..take].to_vec()).is_err() {
            return Poll::Ready(Err(self.failed().unwrap_or_else(closed)));
        }
        Poll::Ready(Ok(take))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.failed().map_or(Ok(()), Err))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.chunks = None;
        let Some(drain) = self.drain.as_mut() else {
            return Poll::Ready(Ok(()));
        };
        let result = ready!(Pin::new(drain).poll(cx));
        self.drain = None;
        Poll::Ready(match result {
            Ok(result) => result,
            Err(error) => Err(io::Error::other(error)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn writes_finish_while_the_reader_waits_and_arrive_whole_and_in_order() {
        let (near, mut far) = tokio::io::duplex(16);
        let mut spool = SpooledWrite::new(near, 1024);
        let text: Vec<u8> = (0..600u32).map(|n| (n % 251) as u8).collect();
        // Far more than the 16-byte pipe holds, written while nobody reads.
        spool.write_all(&text).await.unwrap();
        spool.flush().await.unwrap();
        assert!(spool.queued_bytes() > 0);
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            far.read_to_end(&mut got).await.unwrap();
            got
        });
        spool.shutdown().await.unwrap();
        assert_eq!(reader.await.unwrap(), text);
    }

    #[tokio::test]
    async fn past_its_bound_a_write_waits_for_the_reader() {
        let (near, mut far) = tokio::io::duplex(8);
        let mut spool = SpooledWrite::new(near, 32);
        spool.write_all(&[1; 32]).await.unwrap();
        let more = tokio::time::timeout(
            std::time::Duration::from_millis(50),
            spool.write_all(&[2; 8]),
        )
        .await;
        assert!(more.is_err(), "a write past the bound waits");
        let reading = tokio::spawn(async move {
            let mut got = [0u8; 40];
            far.read_exact(&mut got).await.unwrap();
            got
        });
        spool.write_all(&[2; 8]).await.unwrap();
        let got = reading.await.unwrap();
        assert_eq!(&got[..32], &[1; 32]);
        assert_eq!(&got[32..], &[2; 8]);
    }

    #[tokio::test]
    async fn a_write_error_of_the_task_reaches_the_owner() {
        let (near, far) = tokio::io::duplex(8);
        drop(far);
        let mut spool = SpooledWrite::new(near, 64);
        let outcome = async {
            for _ in 0..100 {
                spool.write_all(&[0; 16]).await?;
                tokio::task::yield_now().await;
            }
            Ok::<_, io::Error>(())
        }
        .await;
        assert_eq!(outcome.unwrap_err().kind(), io::ErrorKind::BrokenPipe);
    }
}
