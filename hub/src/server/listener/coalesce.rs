//! Answers written together: a connection's task runs after the tasks that are ready to
//! run beside it, so that one write (one TLS record, one `writev`) carries every answer
//! they finished.
//!
//! An HTTP/2 connection multiplexes many requests, and each request's handler runs as a
//! task of its own. A handler that finishes wakes the connection's task to send its
//! answer; tokio runs a task woken that way next (its LIFO slot), so without this the
//! connection writes and flushes after every single answer, even when a batch of
//! signatures has just finished dozens of them at once. [`Coalesced`] lets the other ready
//! tasks go first: woken, it asks tokio to wake it again once the worker has run what is
//! ready ([`tokio::task::yield_now`], which defers the wake-up until then; tokio does that
//! at least every few dozen tasks, so a busy worker defers only briefly), and until that
//! deferred wake-up comes it does not poll the connection.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use parking_lot::Mutex;

/// `inner`, polled only once the tasks ready when it was woken have run.
pub(super) struct Coalesced<F> {
    inner: Pin<Box<F>>,
    /// Set while a deferred wake-up is outstanding.
    deferred: Option<Arc<Deferred>>,
    /// The last wake-up's flag, kept for the next deferral once tokio let go of it.
    spare: Option<Arc<Deferred>>,
}

impl<F: Future> Coalesced<F> {
    pub(super) fn new(inner: F) -> Self {
        Self {
            inner: Box::pin(inner),
            deferred: None,
            spare: None,
        }
    }
}

/// A deferred wake-up: marks that it came, then wakes the connection's task.
struct Deferred {
    came: AtomicBool,
    task: Mutex<Waker>,
}

impl Wake for Deferred {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.came.store(true, Ordering::Release);
        self.task.lock().wake_by_ref();
    }
}

impl<F: Future> Future for Coalesced<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = &mut *self;
        if let Some(deferred) = &this.deferred {
            if !deferred.came.load(Ordering::Acquire) {
                // Woken by a handler before the deferred wake-up: more answers may still
                // come from the tasks queued beside this one.
                deferred.task.lock().clone_from(cx.waker());
                return Poll::Pending;
            }
            this.spare = this.deferred.take();
            return this.inner.as_mut().poll(cx);
        }
        let deferred = match this
            .spare
            .take()
            .and_then(|mut d| Arc::get_mut(&mut d).is_some().then_some(d))
        {
            Some(d) => {
                d.came.store(false, Ordering::Relaxed);
                d.task.lock().clone_from(cx.waker());
                d
            }
            None => Arc::new(Deferred {
                came: AtomicBool::new(false),
                task: Mutex::new(cx.waker().clone()),
            }),
        };
        let waker = Waker::from(deferred.clone());
        let yielded = std::pin::pin!(tokio::task::yield_now());
        match yielded.poll(&mut Context::from_waker(&waker)) {
            Poll::Pending => {
                this.deferred = Some(deferred);
                Poll::Pending
            }
            // `yield_now` is pending at its first poll (off a runtime it wakes at once).
            Poll::Ready(()) => this.inner.as_mut().poll(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// The connection's part: counts its polls, ready once every handler woke it.
    struct Probe {
        polls: Arc<AtomicUsize>,
        woken: Arc<AtomicUsize>,
        waker: Arc<Mutex<Option<Waker>>>,
        handlers: usize,
    }

    impl Future for Probe {
        type Output = ();
        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            self.polls.fetch_add(1, Ordering::SeqCst);
            *self.waker.lock() = Some(cx.waker().clone());
            if self.woken.load(Ordering::SeqCst) == self.handlers {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        }
    }

    /// How often the connection's future is polled while `handlers` tasks, all ready at
    /// once on the same worker, each finish an answer and wake it (as a finished batch of
    /// signatures does), with or without [`Coalesced`].
    fn polls_while_handlers_finish(handlers: usize, coalesced: bool) -> usize {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .unwrap();
        let polls = Arc::new(AtomicUsize::new(0));
        let counted = polls.clone();
        runtime.block_on(async move {
            // Everything runs on the one worker, as the hub's tasks do.
            tokio::spawn(async move {
                let woken = Arc::new(AtomicUsize::new(0));
                let waker = Arc::new(Mutex::new(None::<Waker>));
                let probe = Probe {
                    polls: counted.clone(),
                    woken: woken.clone(),
                    waker: waker.clone(),
                    handlers,
                };
                let connection = match coalesced {
                    true => tokio::spawn(Coalesced::new(probe)),
                    false => tokio::spawn(probe),
                };
                while waker.lock().is_none() {
                    tokio::task::yield_now().await;
                }
                let before = counted.load(Ordering::SeqCst);
                let tasks: Vec<_> = (0..handlers)
                    .map(|_| {
                        let (woken, waker) = (woken.clone(), waker.clone());
                        tokio::spawn(async move {
                            woken.fetch_add(1, Ordering::SeqCst);
                            if let Some(w) = waker.lock().as_ref() {
                                w.wake_by_ref();
                            }
                        })
                    })
                    .collect();
                for task in tasks {
                    task.await.unwrap();
                }
                connection.await.unwrap();
                counted.fetch_sub(before, Ordering::SeqCst);
            })
            .await
            .unwrap();
        });
        polls.load(Ordering::SeqCst)
    }

    #[test]
    fn answers_finished_together_cost_the_connection_one_poll() {
        let bare = polls_while_handlers_finish(10, false);
        let coalesced = polls_while_handlers_finish(10, true);
        // Without it the connection runs while handlers are still finishing (tokio runs a
        // woken task next), and again for the answers that came after.
        assert!(
            bare >= 2,
            "without coalescing the connection runs more than once: {bare}"
        );
        assert_eq!(coalesced, 1, "with coalescing it runs once, after them all");
    }

    #[test]
    fn outside_a_runtime_worker_it_polls_at_once() {
        let polls = Arc::new(AtomicUsize::new(0));
        let probe = Probe {
            polls: polls.clone(),
            woken: Arc::new(AtomicUsize::new(0)),
            waker: Arc::new(Mutex::new(None)),
            handlers: 0,
        };
        futures::executor::block_on(Coalesced::new(probe));
        assert_eq!(polls.load(Ordering::SeqCst), 1);
    }
}
