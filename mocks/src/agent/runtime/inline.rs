//! The first poll of a message's sequence, run inline on the stdin reader: the fast path of a
//! round trip.

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Waker};

/// What the first poll of a sequence came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FirstPoll {
    /// It ended without waiting.
    Ready,
    /// It waits: the caller must move it into a task of its own, which polls it again at once.
    Pending,
    /// It panicked; it is not to be polled again.
    Panicked,
}

// Why this exists: most sequences end without waiting (an echo turn), and a task spawned for
// each message costs more than the whole answer; so the reader polls the sequence itself, up to
// its first wait, and only a sequence that waits becomes a task.
// What it guarantees:
// - a panic in this poll is caught and answered `Panicked`: the sequence ends alone, as it
//   would in a task of its own, and the reader goes on with the next line;
// - `reader_flushes` is set for the poll and cleared after it, panic or not, so lines the
//   sequence queues meanwhile are the reader's to write (see `Output::reader_flushes`);
// - a `Pending` sequence was polled with a no-op waker, so a wake-up during this poll went
//   nowhere: the task it is moved into polls it again at once, and that poll sees whatever the
//   wake-up announced. It must never be left waiting on this poll's waker.
/// Polls `sequence` once, inline, with a no-op waker; see the comment above for what the caller
/// may rely on.
pub fn poll_first<F>(sequence: Pin<&mut F>, reader_flushes: &AtomicBool) -> FirstPoll
where
    F: Future<Output = ()> + ?Sized,
{
    reader_flushes.store(true, Ordering::Relaxed);
    let polled = catch_unwind(AssertUnwindSafe(|| {
        sequence.poll(&mut Context::from_waker(Waker::noop()))
    }));
    reader_flushes.store(false, Ordering::Relaxed);
    match polled {
        Ok(Poll::Ready(())) => FirstPoll::Ready,
        Ok(Poll::Pending) => FirstPoll::Pending,
        Err(_) => FirstPoll::Panicked,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::AtomicU32;

    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a current-thread runtime")
    }

    #[test]
    fn a_sequence_that_does_not_wait_ends_in_the_first_poll() {
        let flushes = AtomicBool::new(false);
        let ran = Arc::new(AtomicU32::new(0));
        let seen = Arc::clone(&ran);
        let mut sequence = Box::pin(async move {
            seen.fetch_add(1, Ordering::SeqCst);
        });
        assert_eq!(poll_first(sequence.as_mut(), &flushes), FirstPoll::Ready);
        assert_eq!(ran.load(Ordering::SeqCst), 1);
        assert!(!flushes.load(Ordering::Relaxed));
    }

    #[test]
    fn a_panic_in_the_first_poll_is_caught_and_the_flag_cleared() {
        let flushes = AtomicBool::new(false);
        let flag_during = AtomicBool::new(false);
        let mut sequence = Box::pin(async {
            flag_during.store(flushes.load(Ordering::Relaxed), Ordering::SeqCst);
            panic!("a step failed");
        });
        assert_eq!(poll_first(sequence.as_mut(), &flushes), FirstPoll::Panicked);
        assert!(flag_during.load(Ordering::SeqCst), "set during the poll");
        assert!(!flushes.load(Ordering::Relaxed), "cleared after a panic");
    }

    #[test]
    fn a_pending_sequence_woken_during_the_first_poll_completes_in_its_task() {
        let flushes = AtomicBool::new(false);
        let (tell, told) = tokio::sync::oneshot::channel::<u32>();
        let got = Arc::new(AtomicU32::new(0));
        let seen = Arc::clone(&got);
        let mut sequence: Pin<Box<dyn Future<Output = ()> + Send>> = Box::pin(async move {
            if let Ok(value) = told.await {
                seen.store(value, Ordering::SeqCst);
            }
        });
        assert_eq!(poll_first(sequence.as_mut(), &flushes), FirstPoll::Pending);
        // The wake-up goes to the no-op waker of the first poll and is lost...
        tell.send(7).expect("the sequence still waits");
        // ...yet the task it moves into polls it again and finds the value.
        runtime().block_on(async move {
            tokio::spawn(sequence).await.expect("the task ends");
        });
        assert_eq!(got.load(Ordering::SeqCst), 7);
    }
}
