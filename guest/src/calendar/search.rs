//! Where a cron pattern next matches on the civil (wall-clock) calendar,
//! stepping field by field with jiff's calendar (month lengths, weekdays,
//! leap years). Knows nothing of time zones or instants: wall times here are
//! seconds since 1970-01-01T00:00 on the wall, and never a clock's reading.
//!
//! Cost: each step moves a field forward to its next allowed value (a bit
//! scan), carrying into the next field when none is left, and the days of a
//! month are matched at once as a bit mask. So a search costs a few steps per
//! month it crosses, whatever the pattern's resolution; within one matching
//! day it is a handful of steps.

use jiff::Timestamp;
use jiff::civil::{Date, DateTime};
use jiff::tz::Offset;

use super::cron::Cron;

/// How many years past the start a search looks. The Gregorian calendar
/// repeats exactly every 400 years (146,097 days, 20,871 whole weeks), so a
/// pattern of months, days and weekdays that matches any date matches one in
/// every 400-year span: a search this long never misses a match, and one that
/// finds none proves there is none. The 28-year cycle of weekdays is not
/// enough: it breaks at century years that are not leap years, and the fifth
/// Monday of February falls in 2072 and next in 2112.
pub(super) const HORIZON_YEARS: i32 = 400;

/// The largest year jiff represents.
const LAST_YEAR: i32 = 9999;

impl Cron {
    /// The first wall time at or after `from` (whole seconds since
    /// 1970-01-01T00:00 on the wall) that the pattern matches, within
    /// [`HORIZON_YEARS`] and before the year 10000.
    pub(super) fn next_match(&self, from: i64) -> Option<i64> {
        let from = Offset::UTC.to_datetime(Timestamp::from_second(from).ok()?);
        let last_year = (i32::from(from.year()) + HORIZON_YEARS).min(LAST_YEAR);
        let mut y = i32::from(from.year());
        let (mut mo, mut d) = (from.month() as u32, from.day() as u32);
        let (mut h, mut mi, mut s) = (
            from.hour() as u32,
            from.minute() as u32,
            from.second() as u32,
        );
        let mut month_days: Option<(i32, u32, u64)> = None;
        loop {
            if y > last_year {
                return None;
            }
            let Some(next_mo) = next_bit(self.months.into(), mo) else {
                (y, mo, d, h, mi, s) = (y + 1, 1, 1, 0, 0, 0);
                continue;
            };
            if next_mo != mo {
                (mo, d, h, mi, s) = (next_mo, 1, 0, 0, 0);
            }
            let days = match month_days {
                Some((my, mm, days)) if my == y && mm == mo => days,
                _ => {
                    let days = self.day_mask(y, mo)?;
                    month_days = Some((y, mo, days));
                    days
                }
            };
            let Some(next_d) = next_bit(days, d) else {
                (mo, d, h, mi, s) = (mo + 1, 1, 0, 0, 0);
                continue;
            };
            if next_d != d {
                (d, h, mi, s) = (next_d, 0, 0, 0);
            }
            let Some(next_h) = next_bit(self.hours.into(), h) else {
                (d, h, mi, s) = (d + 1, 0, 0, 0);
                continue;
            };
            if next_h != h {
                (h, mi, s) = (next_h, 0, 0);
            }
            let Some(next_mi) = next_bit(self.minutes, mi) else {
                (h, mi, s) = (h + 1, 0, 0);
                continue;
            };
            if next_mi != mi {
                (mi, s) = (next_mi, 0);
            }
            let Some(next_s) = next_bit(self.seconds, s) else {
                (mi, s) = (mi + 1, 0);
                continue;
            };
            let at = DateTime::new(
                y as i16,
                mo as i8,
                d as i8,
                h as i8,
                mi as i8,
                next_s as i8,
                0,
            )
            .ok()?;
            return Some(Offset::UTC.to_timestamp(at).ok()?.as_second());
        }
    }

    /// The days of month `m` of year `y` the two day fields allow, as bits
    /// 1–31.
    fn day_mask(&self, y: i32, m: u32) -> Option<u64> {
        let first = Date::new(y as i16, m as i8, 1).ok()?;
        let len = first.days_in_month() as u32;
        let all = ((1u64 << (len + 1)) - 1) & !1;
        let first_weekday = first.weekday().to_sunday_zero_offset() as u32;
        // The day of the month of weekday `w`'s first occurrence.
        let first_of = |w: u32| 1 + (w + 7 - first_weekday) % 7;

        let mut by_date = u64::from(self.days) & all;
        if self.last_day {
            by_date |= 1 << len;
        }
        let mut by_weekday = 0u64;
        for w in 0..7u32 {
            let first = first_of(w);
            if self.weekdays & (1 << w) != 0 {
                let mut day = first;
                while day <= len {
                    by_weekday |= 1 << day;
                    day += 7;
                }
            }
            for nth in 1..=5u32 {
                let day = first + 7 * (nth - 1);
                if self.nth[w as usize] & (1 << nth) != 0 && day <= len {
                    by_weekday |= 1 << day;
                }
            }
            if self.last_weekdays & (1 << w) != 0 {
                by_weekday |= 1 << (first + 7 * ((len - first) / 7));
            }
        }
        Some(if self.days_star || self.weekdays_star {
            by_date & by_weekday
        } else {
            by_date | by_weekday
        })
    }
}

/// The lowest set bit of `mask` at or above `from`.
fn next_bit(mask: u64, from: u32) -> Option<u32> {
    if from >= 64 {
        return None;
    }
    let rest = mask & (u64::MAX << from);
    (rest != 0).then(|| rest.trailing_zeros())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wall(text: &str) -> i64 {
        let dt: DateTime = text.parse().expect("a civil datetime");
        Offset::UTC.to_timestamp(dt).expect("in range").as_second()
    }

    fn show(wall: i64) -> String {
        Offset::UTC
            .to_datetime(Timestamp::from_second(wall).expect("in range"))
            .to_string()
    }

    /// The first `n` matches at or after `from`.
    fn matches(expr: &str, from: &str, n: usize) -> Vec<String> {
        let cron = Cron::parse(expr).expect(expr);
        let mut at = wall(from);
        let mut out = Vec::new();
        for _ in 0..n {
            let Some(m) = cron.next_match(at) else { break };
            out.push(show(m));
            at = m + 1;
        }
        out
    }

    #[test]
    fn calendar_search_steps_through_fields() {
        assert_eq!(
            matches("*/20 58-59 23 31 DEC *", "2023-12-31T23:59:30", 3),
            [
                "2023-12-31T23:59:40",
                "2024-12-31T23:58:00",
                "2024-12-31T23:58:20"
            ]
        );
        assert_eq!(
            matches("0 0 * * *", "2024-02-28T00:00:00", 2),
            ["2024-02-28T00:00:00", "2024-02-29T00:00:00"]
        );
    }

    #[test]
    fn calendar_search_last_day_of_month() {
        assert_eq!(
            matches("0 0 L * *", "2023-12-15T00:00:00", 4),
            [
                "2023-12-31T00:00:00",
                "2024-01-31T00:00:00",
                "2024-02-29T00:00:00",
                "2024-03-31T00:00:00"
            ]
        );
        assert_eq!(
            matches("0 0 L 2 *", "2099-03-01T00:00:00", 2),
            ["2100-02-28T00:00:00", "2101-02-28T00:00:00"]
        );
    }

    #[test]
    fn calendar_search_last_and_nth_weekday() {
        // Last Fridays of 2024's first months; second Mondays.
        assert_eq!(
            matches("0 9 * * 5L", "2024-01-01T00:00:00", 3),
            [
                "2024-01-26T09:00:00",
                "2024-02-23T09:00:00",
                "2024-03-29T09:00:00"
            ]
        );
        assert_eq!(
            matches("0 9 * * MON#2", "2024-01-01T00:00:00", 3),
            [
                "2024-01-08T09:00:00",
                "2024-02-12T09:00:00",
                "2024-03-11T09:00:00"
            ]
        );
        // A fifth Sunday exists only in some months.
        assert_eq!(
            matches("0 0 * * 0#5", "2024-01-01T00:00:00", 3),
            [
                "2024-03-31T00:00:00",
                "2024-06-30T00:00:00",
                "2024-09-29T00:00:00"
            ]
        );
    }

    #[test]
    fn calendar_search_day_fields_combine_as_vixie_cron() {
        // Both restricted: either.
        assert_eq!(
            matches("0 0 1,15 * MON", "2024-01-01T00:00:00", 4),
            [
                "2024-01-01T00:00:00",
                "2024-01-08T00:00:00",
                "2024-01-15T00:00:00",
                "2024-01-22T00:00:00"
            ]
        );
        // Day-of-month starts with `*`: both must match (odd days that are
        // Mondays).
        assert_eq!(
            matches("0 0 */2 * MON", "2024-01-01T00:00:00", 3),
            [
                "2024-01-01T00:00:00",
                "2024-01-15T00:00:00",
                "2024-01-29T00:00:00"
            ]
        );
        // `#` and `L` are day-of-week items, so they too widen a restricted
        // day-of-month.
        assert_eq!(
            matches("0 0 L * 1#1", "2024-01-01T00:00:00", 3),
            [
                "2024-01-01T00:00:00",
                "2024-01-31T00:00:00",
                "2024-02-05T00:00:00"
            ]
        );
    }

    #[test]
    fn calendar_search_finds_matches_rarer_than_28_years() {
        // Feb 29 on a Monday: 2072, then (2100 not being a leap year) 2112.
        assert_eq!(
            matches("0 0 * 2 MON#5", "2073-01-01T00:00:00", 1),
            ["2112-02-29T00:00:00"]
        );
    }

    #[test]
    fn calendar_search_never_matching_patterns_find_nothing() {
        for expr in ["0 0 30 2 *", "0 0 31 4,6,9,11 *", "0 0 30,31 FEB *"] {
            assert_eq!(
                matches(expr, "2000-01-01T00:00:00", 1),
                Vec::<String>::new(),
                "{expr}"
            );
        }
        // Feb 29 exists, rarely.
        assert_eq!(
            matches("0 0 29 2 *", "2097-01-01T00:00:00", 1),
            ["2104-02-29T00:00:00"]
        );
    }

    #[test]
    fn calendar_search_stops_at_the_end_of_jiffs_range() {
        // jiff's instants end late on 9999-12-30.
        assert_eq!(
            matches("0 0 * * *", "9999-12-29T12:00:00", 3),
            ["9999-12-30T00:00:00"]
        );
    }
}
