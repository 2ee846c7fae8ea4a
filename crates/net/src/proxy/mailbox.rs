//! A queue between many posting threads and one receiver that takes whatever has gathered in
//! one batch. A post wakes the receiver only when it is parked with nothing to do, so while
//! the receiver is busy (or pausing between batches) a post costs a push under a lock and no
//! system call. `std::sync::mpsc` wakes a blocked receiver on every send; between the forwarding
//! path and the journal that was a futex call on each side and a context switch per note.
//!
//! The lock is also the posters' own: [`Mailbox::post`] hands out the guard, so what a poster
//! does while holding it (stamping a time, taking a number) is ordered with its posts.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

/// Posted items waiting for the receiver.
pub(super) struct Mailbox<T> {
    inbox: Mutex<Inbox<T>>,
    /// Signalled when an item arrives for a parked receiver, or the mailbox closes.
    arrived: Condvar,
}

struct Inbox<T> {
    items: Vec<T>,
    /// The receiver is waiting on `arrived`.
    parked: bool,
    closed: bool,
}

impl<T> Default for Mailbox<T> {
    fn default() -> Self {
        Mailbox {
            inbox: Mutex::new(Inbox { items: Vec::new(), parked: false, closed: false }),
            arrived: Condvar::new(),
        }
    }
}

impl<T> Mailbox<T> {
    fn lock(&self) -> MutexGuard<'_, Inbox<T>> {
        self.inbox.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The mailbox's lock, to post under: posts are taken in the order they were made.
    pub(super) fn post(&self) -> Posting<'_, T> {
        Posting { inbox: Some(self.lock()), arrived: &self.arrived, posted: false }
    }

    /// No more posts: the receiver takes what is left, then [`Mailbox::take`] says so.
    pub(super) fn close(&self) {
        self.lock().closed = true;
        self.arrived.notify_one();
    }

    /// Moves every waiting item into `batch` (in posting order), waiting for one if there are
    /// none; false once the mailbox is closed and empty.
    pub(super) fn take(&self, batch: &mut Vec<T>) -> bool {
        let mut inbox = self.lock();
        while inbox.items.is_empty() && !inbox.closed {
            inbox.parked = true;
            inbox = self.arrived.wait(inbox).unwrap_or_else(PoisonError::into_inner);
        }
        inbox.parked = false;
        batch.append(&mut inbox.items);
        !batch.is_empty()
    }
}

/// The mailbox held for posting; the receiver is woken, if it is parked, once this is dropped
/// (after the lock is released, so it does not wake only to wait for the lock).
pub(super) struct Posting<'a, T> {
    inbox: Option<MutexGuard<'a, Inbox<T>>>,
    arrived: &'a Condvar,
    posted: bool,
}

impl<T> Posting<'_, T> {
    pub(super) fn push(&mut self, item: T) {
        if let Some(inbox) = &mut self.inbox {
            inbox.items.push(item);
            self.posted = true;
        }
    }
}

impl<T> Drop for Posting<'_, T> {
    fn drop(&mut self) {
        let Some(mut inbox) = self.inbox.take() else { return };
        let wake = self.posted && inbox.parked;
        if wake {
            // Woken once: later posts before it runs find it no longer parked.
            inbox.parked = false;
        }
        drop(inbox);
        if wake {
            self.arrived.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn posts_gather_into_one_batch_in_posting_order() {
        let mailbox = Mailbox::default();
        for item in 0..5 {
            mailbox.post().push(item);
        }
        let mut batch = Vec::new();
        assert!(mailbox.take(&mut batch));
        assert_eq!(batch, [0, 1, 2, 3, 4]);
    }

    #[test]
    fn a_parked_receiver_wakes_for_a_post_and_stops_after_close_once_drained() {
        let mailbox = Arc::new(Mailbox::default());
        let receiver = {
            let mailbox = Arc::clone(&mailbox);
            std::thread::spawn(move || {
                let (mut batch, mut taken) = (Vec::new(), Vec::new());
                while mailbox.take(&mut batch) {
                    taken.append(&mut batch);
                }
                taken
            })
        };
        for item in 0..100 {
            mailbox.post().push(item);
            if item % 10 == 0 {
                // Let the receiver park between some of the posts.
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
        // Posted before the close: still taken.
        mailbox.post().push(100);
        mailbox.close();
        assert_eq!(receiver.join().unwrap(), (0..=100).collect::<Vec<_>>());
    }

    #[test]
    fn a_posting_that_pushes_nothing_leaves_a_parked_receiver_parked() {
        let mailbox = Mailbox::<u8>::default();
        mailbox.lock().parked = true;
        drop(mailbox.post());
        assert!(mailbox.lock().parked, "nothing was posted: no wake-up owed");
        mailbox.post().push(1);
        assert!(!mailbox.lock().parked, "a post to a parked receiver wakes it (and marks it awake)");
    }
}
