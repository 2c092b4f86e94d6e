//! Argument values as a person types them, and times as the CLI prints
//! them: times, durations and page sizes.
//!
//! The engine only knows milliseconds since the Unix epoch and never reads a
//! clock; this module is where the CLI reads the clock and turns
//! `30s`-style durations into those numbers (a time is read as a task
//! document reads one, `leasehold_host::new_task::parse_time`). Range
//! checks stay with the engine, so there is one rule and one message for
//! them, except a page size's, which is refused before anything is opened.

use std::time::Duration;

use jiff::{Span, SpanRelativeTo, Timestamp as Instant};
use leasehold_guest::validate::{MAX_LEASE_MS, MAX_LIMIT};
use leasehold_host::Timestamp;

pub use leasehold_host::new_task::parse_time;

/// The current clock, in the engine's unit. The CLI reads the clock so the
/// engine never has to.
pub fn now() -> Timestamp {
    Instant::now().as_millisecond()
}

/// A page size or scan length: any whole number is read, so that one out of
/// range is refused with the range the engine accepts, not the type's.
pub fn parse_limit(text: &str) -> Result<u32, String> {
    parse_limit_to(text, MAX_LIMIT)
}

/// As [`parse_limit`], for a verb whose limit runs to `max`.
pub fn parse_limit_to(text: &str, max: u32) -> Result<u32, String> {
    let range = format!("1..={max}");
    let n: i128 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a whole number in {range}"))?;
    u32::try_from(n)
        .ok()
        .filter(|n| (1..=max).contains(n))
        .ok_or_else(|| format!("limit is {n}, outside {range}"))
}

/// A length of time with a unit, in whole milliseconds; never negative.
pub fn parse_duration_ms(text: &str) -> Result<i128, String> {
    let forms = "a duration like 30s, 5m or 1500ms";
    let span: Span = text
        .trim()
        .parse()
        .map_err(|e| format!("{text:?} is not {forms} ({e})"))?;
    // A length of time, not a calendar step: a day is 24 hours, and months
    // or years are refused rather than guessed at.
    let d = span
        .to_duration(SpanRelativeTo::days_are_24_hours())
        .map_err(|e| format!("{text:?} is not {forms} ({e})"))?;
    if d.is_negative() {
        return Err(format!("{text:?} is negative"));
    }
    Ok(d.as_millis())
}

/// A lease such as `30s`, `5m` or `1500ms`, in whole milliseconds.
pub fn parse_lease(text: &str) -> Result<u32, String> {
    let ms = parse_duration_ms(text)?;
    if ms < 1 {
        // A zero lease would end as it begins: two holders could take one timer
        // or task.
        return Err(format!("{text:?} is shorter than one millisecond"));
    }
    match u32::try_from(ms) {
        Ok(ms) if ms <= MAX_LEASE_MS => Ok(ms),
        _ => Err(format!("{text:?} is longer than the 7-day maximum lease")),
    }
}

/// How long to wait for a database another process has open: `5s`, `0s`
/// (do not wait), `1500ms`.
pub fn parse_wait(text: &str) -> Result<Duration, String> {
    let ms = parse_duration_ms(text)?;
    u64::try_from(ms)
        .map(Duration::from_millis)
        .map_err(|_| format!("{text:?} is too long a wait"))
}

/// RFC 3339 in UTC; milliseconds only when there are any.
pub fn format_time(ms: Timestamp) -> String {
    match Instant::from_millisecond(ms) {
        Ok(t) => t.to_string(),
        // Out of the calendar's range: the raw number still says something.
        Err(_) => format!("{ms} ms"),
    }
}

/// How far `then` is from `now`, roughly: `in 5m`, `3h ago`, `now`.
pub fn relative(then: Timestamp, now: Timestamp) -> String {
    let diff = then.saturating_sub(now);
    let secs = diff.unsigned_abs() / 1000;
    let span = match secs {
        0 => return "now".to_owned(),
        1..60 => format!("{secs}s"),
        60..3600 => format!("{}m", secs / 60),
        3600..86400 => format!("{}h", secs / 3600),
        _ => format!("{}d", secs / 86400),
    };
    if diff < 0 {
        format!("{span} ago")
    } else {
        format!("in {span}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_and_milliseconds_name_the_same_instant() {
        assert_eq!(parse_time("1970-01-01T00:00:01Z"), Ok(1000));
        assert_eq!(parse_time("1970-01-01T01:00:01+01:00"), Ok(1000));
        assert_eq!(parse_time("1000"), Ok(1000));
        assert_eq!(format_time(1000), "1970-01-01T00:00:01Z");
        assert_eq!(format_time(1500), "1970-01-01T00:00:01.5Z");
    }

    #[test]
    fn a_time_without_an_offset_is_refused_with_the_accepted_forms() {
        let e = parse_time("2026-05-04 09:00").expect_err("no offset");
        assert!(e.contains("RFC 3339"), "{e}");
        assert!(parse_time("tomorrow").is_err());
        assert!(parse_time("").is_err());
    }

    #[test]
    fn leases_need_a_unit_and_a_sane_length() {
        assert_eq!(parse_lease("30s"), Ok(30_000));
        assert_eq!(parse_lease("5m"), Ok(300_000));
        assert_eq!(parse_lease("1500ms"), Ok(1_500));
        assert!(parse_lease("30").is_err());
        assert!(parse_lease("0s").is_err());
        assert!(parse_lease("-5s").is_err());
        assert_eq!(parse_lease("1d"), Ok(86_400_000));
        assert!(parse_lease("8 days").is_err());
        assert!(parse_lease("1 month").is_err());
    }

    #[test]
    fn a_wait_may_be_zero_but_needs_a_unit() {
        assert_eq!(parse_wait("0s"), Ok(Duration::ZERO));
        assert_eq!(parse_wait("1500ms"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_wait("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_wait("5").is_err());
        assert!(parse_wait("-1s").is_err());
    }

    #[test]
    fn a_negative_time_is_read_as_a_number_for_the_range_check() {
        assert_eq!(parse_time("-5"), Ok(-5));
        assert!(parse_time("-").is_err());
    }

    #[test]
    fn a_limit_out_of_range_is_refused_with_the_engines_range() {
        assert_eq!(parse_limit("1"), Ok(1));
        assert_eq!(parse_limit("1000"), Ok(1000));
        for bad in ["0", "1001", "-1", "4294967296", "99999999999999999999999"] {
            let e = parse_limit(bad).expect_err(bad);
            assert!(e.contains("1..=1000"), "{bad}: {e}");
        }
        assert!(parse_limit("ten").expect_err("ten").contains("1..=1000"));
    }

    #[test]
    fn relative_times_read_as_distances() {
        assert_eq!(relative(1000, 1000), "now");
        assert_eq!(relative(301_000, 1000), "in 5m");
        assert_eq!(relative(0, 7_200_000), "2h ago");
    }
}
