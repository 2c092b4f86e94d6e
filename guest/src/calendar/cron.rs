//! Cron expressions, parsed into sets of allowed values: five fields
//! (`minute hour day-of-month month day-of-week`) or six with the second
//! first; `*`, values, names (`JAN`–`DEC`, `SUN`–`SAT`, any case), ranges,
//! steps (`*/15`, `10-50/5`, `5/10` meaning `5-max/10`), lists; `L` in
//! day-of-month (the month's last day); `5L` (the month's last Friday) and
//! `1#2` (its second Monday) in day-of-week, where Sunday is 0 or 7; and the
//! macros `@yearly`/`@annually`, `@monthly`, `@weekly`, `@daily`/`@midnight`,
//! `@hourly`.
//!
//! Day-of-month and day-of-week combine as in Vixie cron: when both fields
//! are restricted, a day matches if either matches (`0 0 1,15 * MON` fires on
//! the 1st, the 15th and every Monday); when either field starts with `*`
//! (even `*/2`), a day must match both. This module owns the syntax only; it
//! never looks at a calendar or a clock.

#[allow(unused_imports)]
use crate::prelude::*;

use super::error::{CronError, CronField, CronProblem};

/// A parsed cron expression: one bit per allowed value of each field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cron {
    pub(super) seconds: u64,
    pub(super) minutes: u64,
    pub(super) hours: u32,
    /// Bit `d` for day `d` (1–31).
    pub(super) days: u32,
    /// `L` in day-of-month.
    pub(super) last_day: bool,
    /// Bit `m` for month `m` (1–12).
    pub(super) months: u16,
    /// Bit `w` for weekday `w` (0 = Sunday).
    pub(super) weekdays: u8,
    /// `w#n`: bit `n` (1–5) of `nth[w]`.
    pub(super) nth: [u8; 7],
    /// `wL`: bit `w`.
    pub(super) last_weekdays: u8,
    /// Whether the field's text starts with `*` (Vixie cron's test for "not
    /// restricted", which picks AND rather than OR for the two day fields).
    pub(super) days_star: bool,
    pub(super) weekdays_star: bool,
}

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const WEEKDAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

/// How one field reads its values.
struct Rule {
    field: CronField,
    min: u32,
    max: u32,
    /// Names for `min`, `min + 1`, …
    names: &'static [&'static str],
}

const SECOND: Rule = Rule {
    field: CronField::Second,
    min: 0,
    max: 59,
    names: &[],
};
const MINUTE: Rule = Rule {
    field: CronField::Minute,
    min: 0,
    max: 59,
    names: &[],
};
const HOUR: Rule = Rule {
    field: CronField::Hour,
    min: 0,
    max: 23,
    names: &[],
};
const DAY: Rule = Rule {
    field: CronField::DayOfMonth,
    min: 1,
    max: 31,
    names: &[],
};
const MONTH: Rule = Rule {
    field: CronField::Month,
    min: 1,
    max: 12,
    names: &MONTHS,
};
/// 0–7: both 0 and 7 are Sunday.
const WEEKDAY: Rule = Rule {
    field: CronField::DayOfWeek,
    min: 0,
    max: 7,
    names: &WEEKDAYS,
};

impl Cron {
    /// Parses a cron expression. It says nothing yet of whether any date
    /// matches: [`Cron::next_match`] does, and a spec refuses one that never
    /// does.
    pub fn parse(expr: &str) -> Result<Cron, CronError> {
        let expr = expr.trim();
        let expanded = if expr.starts_with('@') {
            expand_macro(expr).ok_or_else(|| CronError {
                field: None,
                text: expr.to_owned(),
                problem: CronProblem::UnknownMacro,
            })?
        } else {
            expr
        };
        let fields: Vec<&str> = expanded.split_whitespace().collect();
        let (second, rest) = match fields.len() {
            5 => ("0", &fields[..]),
            6 => (fields[0], &fields[1..]),
            found => {
                return Err(CronError {
                    field: None,
                    text: expr.to_owned(),
                    problem: CronProblem::FieldCount { found },
                });
            }
        };
        let [minute, hour, day, month, weekday] = [rest[0], rest[1], rest[2], rest[3], rest[4]];
        let mut cron = Cron {
            seconds: plain(&SECOND, second)?,
            minutes: plain(&MINUTE, minute)?,
            hours: plain(&HOUR, hour)? as u32,
            days: 0,
            last_day: false,
            months: plain(&MONTH, month)? as u16,
            weekdays: 0,
            nth: [0; 7],
            last_weekdays: 0,
            days_star: day.starts_with('*'),
            weekdays_star: weekday.starts_with('*'),
        };
        cron.parse_days(day)?;
        cron.parse_weekdays(weekday)?;
        Ok(cron)
    }

    fn parse_days(&mut self, text: &str) -> Result<(), CronError> {
        let mut mask = 0u64;
        for item in items(&DAY, text)? {
            if item.eq_ignore_ascii_case("l") {
                self.last_day = true;
            } else {
                mask |= value_set(&DAY, item).map_err(|p| DAY.error(text, p))?;
            }
        }
        self.days = mask as u32;
        Ok(())
    }

    fn parse_weekdays(&mut self, text: &str) -> Result<(), CronError> {
        let mut mask = 0u64;
        for item in items(&WEEKDAY, text)? {
            if let Some((day, nth)) = item.split_once('#') {
                let day = weekday_value(day).map_err(|p| WEEKDAY.error(text, p))?;
                let nth = number(nth).map_err(|p| WEEKDAY.error(text, p))?;
                if !(1..=5).contains(&nth) {
                    return Err(WEEKDAY.error(text, CronProblem::BadNth { nth }));
                }
                self.nth[day] |= 1 << nth;
            } else if item.len() > 1 && (item.ends_with('L') || item.ends_with('l')) {
                let day =
                    weekday_value(&item[..item.len() - 1]).map_err(|p| WEEKDAY.error(text, p))?;
                self.last_weekdays |= 1 << day;
            } else {
                mask |= value_set(&WEEKDAY, item).map_err(|p| WEEKDAY.error(text, p))?;
            }
        }
        // 7 is Sunday too.
        self.weekdays = ((mask | (mask >> 7)) & 0x7f) as u8;
        Ok(())
    }
}

impl Rule {
    fn error(&self, text: &str, problem: CronProblem) -> CronError {
        CronError {
            field: Some(self.field),
            text: text.to_owned(),
            problem,
        }
    }

    fn value(&self, text: &str) -> Result<u32, CronProblem> {
        let value = if text.bytes().all(|b| b.is_ascii_digit()) {
            number(text)?
        } else {
            let at = self.names.iter().position(|n| n.eq_ignore_ascii_case(text));
            match at {
                Some(at) => self.min + at as u32,
                None => {
                    return Err(CronProblem::NotAValue {
                        value: text.to_owned(),
                    });
                }
            }
        };
        if value < self.min || value > self.max {
            return Err(CronProblem::OutOfRange {
                value,
                min: self.min,
                max: self.max,
            });
        }
        Ok(value)
    }
}

/// The comma-separated items of a field, none of them empty, and none using
/// a special form this field lacks.
fn items<'a>(rule: &Rule, text: &'a str) -> Result<Vec<&'a str>, CronError> {
    let items: Vec<&str> = text.split(',').collect();
    if items.iter().any(|i| i.is_empty()) {
        return Err(rule.error(text, CronProblem::Empty));
    }
    for item in &items {
        let upper = item.to_ascii_uppercase();
        let what = if upper.contains('W') && rule.field == CronField::DayOfMonth {
            Some("W (the nearest weekday) is not supported")
        } else if upper.contains('?') {
            Some("? is not supported; use *")
        } else if upper.contains('#') && rule.field != CronField::DayOfWeek {
            Some("# (the nth weekday) belongs in day-of-week")
        } else if upper.contains('L') && rule.field == CronField::DayOfMonth && upper != "L" {
            Some("L stands alone in day-of-month (the last day); L-n and LW are not supported")
        } else if upper == "L" && rule.field == CronField::DayOfWeek {
            Some("L in day-of-week follows a weekday (5L is the last Friday)")
        } else if upper.contains('L')
            && rule.field != CronField::DayOfMonth
            && rule.field != CronField::DayOfWeek
            // Names with an L in them (JUL, APR…) are values, not `L`.
            && rule.field != CronField::Month
        {
            Some("L belongs in day-of-month or day-of-week")
        } else if (upper.contains('#') || (upper.ends_with('L') && upper.len() > 1))
            && rule.field == CronField::DayOfWeek
            && (upper.contains('-') || upper.contains('/') || upper.contains('*'))
        {
            Some("# and L take one weekday, not a range, step or *")
        } else {
            None
        };
        if let Some(what) = what {
            return Err(rule.error(text, CronProblem::Unsupported { what }));
        }
    }
    Ok(items)
}

/// A field of plain items only (seconds, minutes, hours, months).
fn plain(rule: &Rule, text: &str) -> Result<u64, CronError> {
    let mut mask = 0u64;
    for item in items(rule, text)? {
        mask |= value_set(rule, item).map_err(|p| rule.error(text, p))?;
    }
    Ok(mask)
}

/// The values of one item: `*`, `v`, `a-b`, each optionally `/step`, or
/// `v/step` (from `v` to the field's end).
fn value_set(rule: &Rule, item: &str) -> Result<u64, CronProblem> {
    let (range, step) = match item.split_once('/') {
        Some((range, step)) => (range, Some(number(step)?)),
        None => (item, None),
    };
    let (start, end) = if range == "*" {
        (rule.min, rule.max)
    } else if let Some((a, b)) = range.split_once('-') {
        let (a, b) = (rule.value(a)?, rule.value(b)?);
        if a > b {
            return Err(CronProblem::Backwards { start: a, end: b });
        }
        (a, b)
    } else {
        let v = rule.value(range)?;
        (v, if step.is_some() { rule.max } else { v })
    };
    let step = step.unwrap_or(1);
    if step == 0 || step > rule.max {
        return Err(CronProblem::BadStep {
            step,
            max: rule.max,
        });
    }
    Ok((start..=end)
        .step_by(step as usize)
        .fold(0u64, |m, v| m | 1 << v))
}

fn weekday_value(text: &str) -> Result<usize, CronProblem> {
    // 7 is Sunday.
    Ok(WEEKDAY.value(text)? as usize % 7)
}

fn number(text: &str) -> Result<u32, CronProblem> {
    if text.is_empty() {
        return Err(CronProblem::Empty);
    }
    if !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(CronProblem::NotAValue {
            value: text.to_owned(),
        });
    }
    // A long run of digits saturates: out of range of any field, never an
    // overflow.
    Ok(text.bytes().fold(0u32, |n, b| {
        n.saturating_mul(10).saturating_add(u32::from(b - b'0'))
    }))
}

fn expand_macro(expr: &str) -> Option<&'static str> {
    Some(match expr.to_ascii_lowercase().as_str() {
        "@yearly" | "@annually" => "0 0 1 1 *",
        "@monthly" => "0 0 1 * *",
        "@weekly" => "0 0 * * 0",
        "@daily" | "@midnight" => "0 0 * * *",
        "@hourly" => "0 * * * *",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bits(mask: u64) -> Vec<u32> {
        (0..64).filter(|b| mask & (1 << b) != 0).collect()
    }

    fn refusal(expr: &str) -> (Option<CronField>, CronProblem) {
        let e = Cron::parse(expr).expect_err(expr);
        (e.field, e.problem)
    }

    #[test]
    fn calendar_cron_reads_every_field_form() {
        let c = Cron::parse("*/20 10-50/20 1,2 L,15 jan-Mar/2 MON-fri").expect("parses");
        assert_eq!(bits(c.seconds), [0, 20, 40]);
        assert_eq!(bits(c.minutes), [10, 30, 50]);
        assert_eq!(bits(c.hours.into()), [1, 2]);
        assert_eq!(bits(c.days.into()), [15]);
        assert!(c.last_day);
        assert_eq!(bits(c.months.into()), [1, 3]);
        assert_eq!(bits(c.weekdays.into()), [1, 2, 3, 4, 5]);
        assert!(!c.days_star && !c.weekdays_star);
    }

    #[test]
    fn calendar_cron_five_fields_fire_at_second_zero() {
        let c = Cron::parse("5/15 * * * *").expect("parses");
        assert_eq!(bits(c.seconds), [0]);
        assert_eq!(bits(c.minutes), [5, 20, 35, 50]);
        assert!(c.days_star && c.weekdays_star);
    }

    #[test]
    fn calendar_cron_sunday_is_zero_or_seven() {
        for expr in ["0 0 * * 0", "0 0 * * 7", "0 0 * * sun", "0 0 * * 7-7"] {
            assert_eq!(Cron::parse(expr).expect(expr).weekdays, 1, "{expr}");
        }
        assert_eq!(
            Cron::parse("0 0 * * 5-7").expect("parses").weekdays,
            0b110_0001
        );
    }

    #[test]
    fn calendar_cron_reads_last_and_nth_weekdays() {
        let c = Cron::parse("0 0 * * 5L,FRIl,1#2,sun#5,3").expect("parses");
        assert_eq!(c.last_weekdays, 1 << 5);
        assert_eq!(c.nth[1], 1 << 2);
        assert_eq!(c.nth[0], 1 << 5);
        assert_eq!(c.weekdays, 1 << 3);
        let c = Cron::parse("0 0 * * 7#1").expect("parses");
        assert_eq!(c.nth[0], 1 << 1);
    }

    #[test]
    fn calendar_cron_macros() {
        assert_eq!(Cron::parse("@daily"), Cron::parse("0 0 * * *"));
        assert_eq!(Cron::parse("@HOURLY"), Cron::parse("0 * * * *"));
        assert_eq!(refusal("@reboot").1, CronProblem::UnknownMacro);
    }

    #[test]
    fn calendar_cron_refusals_name_the_field_and_why() {
        use CronField::*;
        assert_eq!(
            refusal("* * * *"),
            (None, CronProblem::FieldCount { found: 4 })
        );
        assert_eq!(
            refusal("0 * * * * * *"),
            (None, CronProblem::FieldCount { found: 7 })
        );
        assert_eq!(
            refusal("60 * * * *"),
            (
                Some(Minute),
                CronProblem::OutOfRange {
                    value: 60,
                    min: 0,
                    max: 59
                }
            )
        );
        assert_eq!(
            refusal("0 24 * * *"),
            (
                Some(Hour),
                CronProblem::OutOfRange {
                    value: 24,
                    min: 0,
                    max: 23
                }
            )
        );
        assert_eq!(
            refusal("0 0 0 * *"),
            (
                Some(DayOfMonth),
                CronProblem::OutOfRange {
                    value: 0,
                    min: 1,
                    max: 31
                }
            )
        );
        assert_eq!(
            refusal("0 0 * 13 *"),
            (
                Some(Month),
                CronProblem::OutOfRange {
                    value: 13,
                    min: 1,
                    max: 12
                }
            )
        );
        assert_eq!(
            refusal("0 0 * * 8"),
            (
                Some(DayOfWeek),
                CronProblem::OutOfRange {
                    value: 8,
                    min: 0,
                    max: 7
                }
            )
        );
        assert_eq!(
            refusal("61 0 0 * * *"),
            (
                Some(Second),
                CronProblem::OutOfRange {
                    value: 61,
                    min: 0,
                    max: 59
                }
            )
        );
        assert_eq!(
            refusal("0 0 * FOO *"),
            (
                Some(Month),
                CronProblem::NotAValue {
                    value: "FOO".into()
                }
            )
        );
        assert_eq!(
            refusal("50-10 * * * *"),
            (Some(Minute), CronProblem::Backwards { start: 50, end: 10 })
        );
        assert_eq!(
            refusal("*/0 * * * *"),
            (Some(Minute), CronProblem::BadStep { step: 0, max: 59 })
        );
        assert_eq!(
            refusal("0 */24 * * *"),
            (Some(Hour), CronProblem::BadStep { step: 24, max: 23 })
        );
        assert_eq!(refusal("1,,2 * * * *"), (Some(Minute), CronProblem::Empty));
        assert_eq!(
            refusal("0 0 * * 1#6"),
            (Some(DayOfWeek), CronProblem::BadNth { nth: 6 })
        );
        assert_eq!(
            refusal("0 0 * * 1#0"),
            (Some(DayOfWeek), CronProblem::BadNth { nth: 0 })
        );
        assert_eq!(
            refusal("99999999999 * * * *"),
            (
                Some(Minute),
                CronProblem::OutOfRange {
                    value: u32::MAX,
                    min: 0,
                    max: 59
                }
            )
        );
        for (expr, field) in [
            ("0 0 15W * *", DayOfMonth),
            ("0 0 LW * *", DayOfMonth),
            ("0 0 L-2 * *", DayOfMonth),
            ("0 0 ? * *", DayOfMonth),
            ("0 0 1#2 * *", DayOfMonth),
            ("0 0 * * L", DayOfWeek),
            ("0 0 * * 1-5L", DayOfWeek),
            ("0 0 * * */2#1", DayOfWeek),
            ("L * * * *", Minute),
            ("0 L * * *", Hour),
        ] {
            let (f, p) = refusal(expr);
            assert_eq!(f, Some(field), "{expr}");
            assert!(
                matches!(p, CronProblem::Unsupported { .. }),
                "{expr}: {p:?}"
            );
        }
    }

    #[test]
    fn calendar_cron_error_text_says_field_and_reason() {
        let e = Cron::parse("0 25 * * *").expect_err("hour 25");
        assert_eq!(e.to_string(), "hour field `25`: 25 is outside 0-23");
    }
}
