//! What the change feeds share: waiting for the next change of a `tokio::sync::watch` value from
//! a `poll_next` (a watch receiver has no poll method).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::sync::watch;

/// A wait for the next change in flight, owning the receiver.
type Changing<T> = Pin<Box<dyn Future<Output = (bool, watch::Receiver<T>)> + Send + Sync>>;

/// A watch receiver that can be polled for its next change.
pub(crate) struct WatchChanges<T> {
    /// Exactly one of `rx` and `changing` is set: the receiver lives inside the wait in flight.
    rx: Option<watch::Receiver<T>>,
    changing: Option<Changing<T>>,
}

impl<T: Send + Sync + 'static> WatchChanges<T> {
    pub(crate) fn new(rx: watch::Receiver<T>) -> Self {
        Self { rx: Some(rx), changing: None }
    }

    /// The receiver once its value changed since it was last marked seen (`borrow_and_update`
    /// marks it); `None` once the sender is gone. Cancel safe: a wait in flight is kept, so a
    /// change is never lost between polls.
    pub(crate) fn poll_changed(&mut self, cx: &mut Context<'_>) -> Poll<Option<&mut watch::Receiver<T>>> {
        if self.changing.is_none() {
            let Some(mut rx) = self.rx.take() else {
                return Poll::Ready(None);
            };
            self.changing = Some(Box::pin(async move {
                let changed = rx.changed().await.is_ok();
                (changed, rx)
            }));
        }
        let Some(changing) = self.changing.as_mut() else {
            return Poll::Ready(None);
        };
        let (changed, rx) = std::task::ready!(changing.as_mut().poll(cx));
        self.changing = None;
        let rx = self.rx.insert(rx);
        Poll::Ready(changed.then_some(rx))
    }
}

/// One reader's queue of a state feed (each item a state, the newest the one that counts):
/// bounded, and when full the oldest item is dropped and counted, so a slow reader costs at most
/// `capacity` items, never blocks the writer, and still ends on the newest state.
pub(crate) struct DropOldest<T> {
    queue: parking_lot::Mutex<Queue<T>>,
    capacity: usize,
}

struct Queue<T> {
    items: std::collections::VecDeque<T>,
    missed: u64,
    ended: bool,
    waker: Option<std::task::Waker>,
}

impl<T> std::fmt::Debug for DropOldest<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let queue = self.queue.lock();
        f.debug_struct("DropOldest").field("queued", &queue.items.len()).field("missed", &queue.missed).finish()
    }
}

impl<T> DropOldest<T> {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            queue: parking_lot::Mutex::new(Queue {
                items: std::collections::VecDeque::new(),
                missed: 0,
                ended: false,
                waker: None,
            }),
            capacity: capacity.max(1),
        }
    }

    /// Queues `item`, dropping (and counting) the oldest when full.
    pub(crate) fn push(&self, item: T) {
        let mut queue = self.queue.lock();
        if queue.ended {
            return;
        }
        if queue.items.len() >= self.capacity {
            queue.items.pop_front();
            queue.missed += 1;
        }
        queue.items.push_back(item);
        let waker = queue.waker.take();
        drop(queue);
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// No more items: the reader gets the queued ones, then the end.
    pub(crate) fn end(&self) {
        let mut queue = self.queue.lock();
        queue.ended = true;
        let waker = queue.waker.take();
        drop(queue);
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// The next item; `Ready(None)` once ended and drained; `Pending` (registering `cx`'s waker,
    /// if given) when none is queued.
    pub(crate) fn poll_pop(&self, cx: Option<&mut Context<'_>>) -> Poll<Option<T>> {
        let mut queue = self.queue.lock();
        if let Some(item) = queue.items.pop_front() {
            return Poll::Ready(Some(item));
        }
        if queue.ended {
            return Poll::Ready(None);
        }
        if let Some(cx) = cx {
            if !queue.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                queue.waker = Some(cx.waker().clone());
            }
        }
        Poll::Pending
    }

    /// How many items were dropped because the reader fell `capacity` behind.
    pub(crate) fn missed(&self) -> u64 {
        self.queue.lock().missed
    }

    pub(crate) fn len(&self) -> usize {
        self.queue.lock().items.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_queue_drops_the_oldest_counts_it_and_keeps_the_newest() {
        let queue = DropOldest::new(2);
        for i in 0..5 {
            queue.push(i);
        }
        queue.end();
        assert_eq!(queue.missed(), 3);
        assert_eq!(queue.poll_pop(None), Poll::Ready(Some(3)));
        assert_eq!(queue.poll_pop(None), Poll::Ready(Some(4)));
        assert_eq!(queue.poll_pop(None), Poll::Ready(None));
    }
}
