//! The one back-off of the client's own background loops (session replacement, guaranteed
//! deletes). Foreground operations follow the user's [`RetryPolicy`](crate::RetryPolicy) instead;
//! background work must go on until it succeeds, so it gets a capped, never-ending back-off.

use std::time::Duration;

/// Capped exponential back-off: `first`, `2 × first`, ... up to `max`, then `max` forever.
#[derive(Debug)]
pub(crate) struct Backoff {
    next: Duration,
    max: Duration,
}

impl Backoff {
    pub(crate) fn new(first: Duration, max: Duration) -> Self {
        Self { next: first, max }
    }

    /// The delay to wait now; the following one doubles (capped).
    pub(crate) fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        self.next = (self.next * 2).min(self.max);
        delay
    }

    /// Sleeps for [`next_delay`](Self::next_delay).
    pub(crate) async fn wait(&mut self) {
        tokio::time::sleep(self.next_delay()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_cap() {
        let ms = Duration::from_millis;
        let mut b = Backoff::new(ms(50), ms(300));
        let delays: Vec<_> = (0..6).map(|_| b.next_delay()).collect();
        assert_eq!(delays, [ms(50), ms(100), ms(200), ms(300), ms(300), ms(300)]);
    }
}
