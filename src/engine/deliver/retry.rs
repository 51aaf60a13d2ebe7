//! Retries: when a failure is tried again (only a transient one, at most `MAX_RETRIES` times) and how long
//! the job waits in the queue before it is.

use std::time::Duration;

use super::MAX_RETRIES;
use crate::engine::steps::Runner;
use crate::providers::Failure;

/// The longest wait a provider's `Retry-After` may impose.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);

/// How long retries wait: exponential backoff with ±25 % jitter from the configured base, at least the
/// provider's `Retry-After`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Backoff {
    /// The first retry's wait (doubled on each further retry).
    pub(super) base: Duration,
    /// The jitter's random draw, in [-0.5, 0.5).
    pub(super) draw: f64,
}

impl Backoff {
    /// The wait before retry `attempt + 1`.
    fn wait(self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        let base = self.base.as_millis() as f64 * f64::from(1u32 << attempt.min(10));
        let jitter = self.draw * 0.5 * base;
        let wait = Duration::from_millis((base + jitter).max(0.0) as u64);
        match retry_after {
            Some(r) => wait.max(r.min(MAX_RETRY_AFTER)),
            None => wait,
        }
    }
}

impl Runner {
    /// The backoff of a retry decided now (a fresh jitter).
    pub(super) fn backoff(&self) -> Backoff {
        Backoff {
            base: self.retry_base,
            draw: rand::random::<f64>() - 0.5,
        }
    }
}

/// A failure that is tried again: after `wait`, with the detail text that says so.
pub(super) struct Retry {
    pub(super) wait: Duration,
    pub(super) text: String,
}

/// Whether a failure (`text`) after `tries` retries is tried again: only a transient one, at most
/// `MAX_RETRIES` times.
pub(super) fn retry(tries: u32, failure: Failure, text: &str, backoff: Backoff) -> Option<Retry> {
    let Failure::Transient { retry_after } = failure else {
        return None;
    };
    if tries >= MAX_RETRIES {
        return None;
    }
    let wait = backoff.wait(tries, retry_after);
    let text = format!(
        "{text}; retry {} of {MAX_RETRIES} in {} ms",
        tries + 1,
        wait.as_millis()
    );
    Some(Retry { wait, text })
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{ms, NO_JITTER};
    use super::*;

    #[test]
    fn backoff_doubles_with_jitter_and_honours_retry_after_up_to_an_hour() {
        assert_eq!(NO_JITTER.wait(0, None), ms(100));
        assert_eq!(NO_JITTER.wait(2, None), ms(400));
        assert_eq!(
            NO_JITTER.wait(30, None),
            ms(102_400),
            "at most 2^10 times the base"
        );
        let low = Backoff {
            draw: -0.5,
            ..NO_JITTER
        };
        assert_eq!(low.wait(1, None), ms(150), "-25 %");
        let high = Backoff {
            draw: 0.5,
            ..NO_JITTER
        };
        assert_eq!(high.wait(1, None), ms(250), "+25 %");
        assert_eq!(NO_JITTER.wait(1, Some(ms(5_000))), ms(5_000));
        assert_eq!(NO_JITTER.wait(1, Some(ms(50))), ms(200));
        assert_eq!(
            NO_JITTER.wait(1, Some(Duration::from_secs(7_200))),
            Duration::from_secs(3_600)
        );
    }

    #[test]
    fn only_transient_failures_are_retried_three_times() {
        let transient = Failure::Transient { retry_after: None };
        let r = retry(0, transient, "down", NO_JITTER).unwrap();
        assert_eq!(
            (r.wait, r.text.as_str()),
            (ms(100), "down; retry 1 of 3 in 100 ms")
        );
        let r = retry(2, transient, "down", NO_JITTER).unwrap();
        assert_eq!(
            (r.wait, r.text.as_str()),
            (ms(400), "down; retry 3 of 3 in 400 ms")
        );
        assert!(retry(3, transient, "down", NO_JITTER).is_none());
        assert!(retry(0, Failure::Permanent, "bad", NO_JITTER).is_none());
    }
}
