//! When a delivery is tried again, and when it is given up. Owns the
//! schedule (exponential backoff with full jitter inside a fixed window of
//! about three days), what an answer means (any 2xx acknowledges, `410
//! Gone` pauses the subscription, everything else is tried again), and how
//! `Retry-After` is read. It must never sleep or send: it only decides.
//!
//! The default schedule, attempt by attempt: each wait is drawn uniformly
//! between zero and its ceiling ("full jitter", so that endpoints failing
//! together do not hear every retry together), the ceiling doubling from 5 s
//! up to 8 h; the entry is given up when an attempt fails 72 h or more after
//! the first, and the last attempt is made at 72 h exactly (a wait that
//! would pass it is cut short). Expected times assume every attempt fails
//! at once; the number of attempts varies with the draws (about 30).
//!
//! | attempt | wait before it: ceiling | expected wait | expected time since the first |
//! | ---: | ---: | ---: | ---: |
//! | 1 | none | 0 | 0 |
//! | 2 | 5 s | 2.5 s | 2.5 s |
//! | 3 | 10 s | 5 s | 7.5 s |
//! | 4 | 20 s | 10 s | 17.5 s |
//! | 5 | 40 s | 20 s | 37.5 s |
//! | 6 | 80 s | 40 s | 1 min 18 s |
//! | 7 | 160 s | 80 s | 2 min 38 s |
//! | 8 | 5 min 20 s | 2 min 40 s | 5 min 18 s |
//! | 9 | 10 min 40 s | 5 min 20 s | 10 min 38 s |
//! | 10 | 21 min 20 s | 10 min 40 s | 21 min 18 s |
//! | 11 | 42 min 40 s | 21 min 20 s | 42 min 38 s |
//! | 12 | 1 h 25 min | 42 min 40 s | 1 h 25 min |
//! | 13 | 2 h 51 min | 1 h 25 min | 2 h 51 min |
//! | 14 | 5 h 41 min | 2 h 51 min | 5 h 41 min |
//! | 15 on | 8 h | 4 h | + 4 h each |
//! | last | cut to 72 h after the first | | 72 h |
//!
//! A `Retry-After` answer (seconds, or an HTTP date) makes the next wait at
//! least what it asks, up to one hour more than the drawn wait would have
//! been (a receiver cannot park a delivery for days), and never past the
//! window's end.

use std::time::{Duration, SystemTime};

/// The schedule one subscription's deliveries follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// The ceiling of the first wait; each later one doubles it.
    pub first: Duration,
    /// The largest ceiling.
    pub cap: Duration,
    /// How long after its first attempt an entry is still tried.
    pub window: Duration,
    /// The most a `Retry-After` may lengthen a wait by.
    pub retry_after_cap: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            first: Duration::from_secs(5),
            cap: Duration::from_secs(8 * 3600),
            window: Duration::from_secs(72 * 3600),
            retry_after_cap: Duration::from_secs(3600),
        }
    }
}

/// What an answer (or its absence) means for the entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Any 2xx: delivered.
    Acknowledged,
    /// `410 Gone`: the receiver wants no more; the subscription pauses.
    Gone,
    /// Anything else: try again.
    Failed,
}

/// The verdict on an HTTP status.
pub fn verdict(status: u16) -> Verdict {
    match status {
        200..=299 => Verdict::Acknowledged,
        410 => Verdict::Gone,
        _ => Verdict::Failed,
    }
}

/// What to do after a failed attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Try again after this long.
    After(Duration),
    /// The window has passed: give the entry up.
    GiveUp,
}

impl RetryPolicy {
    /// The ceiling of the wait before attempt `attempt + 1`, after attempt
    /// `attempt` (1-based) failed.
    pub fn ceiling(&self, attempt: u32) -> Duration {
        let doublings = attempt.saturating_sub(1).min(40);
        self.first
            .checked_mul(1u32 << doublings.min(31))
            .map_or(self.cap, |d| d.min(self.cap))
    }

    /// After attempt `attempt` (1-based) failed, `elapsed` after the
    /// entry's first attempt, with the receiver's `Retry-After` if it gave
    /// one: the next wait, or give up. `draw` is a uniform sample in
    /// `[0, 1)` (the jitter; a parameter so tests can pin it).
    pub fn next(
        &self,
        attempt: u32,
        elapsed: Duration,
        retry_after: Option<Duration>,
        draw: f64,
    ) -> Next {
        if elapsed >= self.window {
            return Next::GiveUp;
        }
        let drawn = self.ceiling(attempt).mul_f64(draw.clamp(0.0, 1.0));
        let wait = match retry_after {
            Some(asked) => drawn.max(asked.min(drawn + self.retry_after_cap)),
            None => drawn,
        };
        Next::After(wait.min(self.window - elapsed))
    }
}

/// A `Retry-After` value: delay-seconds, or an HTTP date (read against
/// `now`); `None` for anything else. A date in the past means no wait.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        // Seconds beyond any cap are as good as the cap; saturate.
        return Some(Duration::from_secs(value.parse().unwrap_or(u64::MAX)));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: u64 = 3600;

    #[test]
    fn statuses_mean_what_the_spec_says() {
        for s in [200, 201, 202, 204, 299] {
            assert_eq!(verdict(s), Verdict::Acknowledged, "{s}");
        }
        assert_eq!(verdict(410), Verdict::Gone);
        for s in [
            100, 301, 302, 304, 307, 400, 401, 404, 409, 429, 500, 502, 503, 504,
        ] {
            assert_eq!(verdict(s), Verdict::Failed, "{s}");
        }
    }

    #[test]
    fn ceilings_double_from_five_seconds_to_eight_hours() {
        let p = RetryPolicy::default();
        let ceilings: Vec<u64> = (1..=16).map(|a| p.ceiling(a).as_secs()).collect();
        assert_eq!(
            ceilings,
            [
                5,
                10,
                20,
                40,
                80,
                160,
                320,
                640,
                1280,
                2560,
                5120,
                10240,
                20480,
                8 * H,
                8 * H,
                8 * H
            ]
        );
        assert_eq!(p.ceiling(u32::MAX), Duration::from_secs(8 * H));
    }

    #[test]
    fn a_wait_is_drawn_below_its_ceiling_and_cut_at_the_windows_end() {
        let p = RetryPolicy::default();
        assert_eq!(
            p.next(3, Duration::ZERO, None, 0.0),
            Next::After(Duration::ZERO)
        );
        assert_eq!(
            p.next(3, Duration::ZERO, None, 0.5),
            Next::After(Duration::from_secs(10))
        );
        let near_end = Duration::from_secs(72 * H - 60);
        assert_eq!(
            p.next(30, near_end, None, 0.99),
            Next::After(Duration::from_secs(60))
        );
        assert_eq!(
            p.next(31, Duration::from_secs(72 * H), None, 0.0),
            Next::GiveUp
        );
    }

    /// The table in the module's doc: with every draw at its expectation,
    /// the attempts run out at 72 h, after about thirty attempts.
    #[test]
    fn the_whole_schedule_spans_three_days() {
        let p = RetryPolicy::default();
        let (mut elapsed, mut attempt) = (Duration::ZERO, 1u32);
        loop {
            match p.next(attempt, elapsed, None, 0.5) {
                Next::GiveUp => break,
                Next::After(d) => {
                    elapsed += d;
                    attempt += 1;
                }
            }
        }
        assert_eq!(elapsed, Duration::from_secs(72 * H));
        assert!((28..=36).contains(&attempt), "{attempt} attempts");
        // The longest run: every draw at its ceiling.
        let (mut elapsed, mut attempt) = (Duration::ZERO, 1u32);
        while let Next::After(d) = p.next(attempt, elapsed, None, 1.0) {
            elapsed += d;
            attempt += 1;
        }
        assert_eq!(elapsed, Duration::from_secs(72 * H));
    }

    #[test]
    fn retry_after_lengthens_a_wait_within_its_cap() {
        let p = RetryPolicy::default();
        let asked = |s| Some(Duration::from_secs(s));
        // A short wait becomes what was asked.
        assert_eq!(
            p.next(1, Duration::ZERO, asked(120), 0.0),
            Next::After(Duration::from_secs(120))
        );
        // A drawn wait longer than asked stays.
        assert_eq!(
            p.next(20, Duration::ZERO, asked(10), 0.5),
            Next::After(Duration::from_secs(4 * H))
        );
        // Asking for a week gets an hour more than the draw.
        assert_eq!(
            p.next(1, Duration::ZERO, asked(7 * 24 * H), 0.0),
            Next::After(Duration::from_secs(H))
        );
        // Never past the window.
        assert_eq!(
            p.next(1, Duration::from_secs(72 * H - 5), asked(600), 0.0),
            Next::After(Duration::from_secs(5))
        );
    }

    #[test]
    fn retry_after_reads_seconds_and_http_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(784111777);
        assert_eq!(
            parse_retry_after("120", now),
            Some(Duration::from_secs(120))
        );
        assert_eq!(parse_retry_after(" 0 ", now), Some(Duration::ZERO));
        assert_eq!(
            parse_retry_after("99999999999999999999999", now),
            Some(Duration::from_secs(u64::MAX))
        );
        // 1994-11-06 08:49:37 GMT is 784111777; a minute later:
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:50:37 GMT", now),
            Some(Duration::from_secs(60))
        );
        assert_eq!(
            parse_retry_after("Sunday, 06-Nov-94 08:50:37 GMT", now),
            Some(Duration::from_secs(60))
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:00:00 GMT", now),
            Some(Duration::ZERO)
        );
        for bad in ["", "-1", "1.5", "soon", "Sun, 06 Nov 1994"] {
            assert_eq!(parse_retry_after(bad, now), None, "{bad:?}");
        }
    }
}
