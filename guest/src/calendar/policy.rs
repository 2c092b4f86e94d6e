//! A schedule's policies: what a wall time that a daylight-saving change
//! skips or repeats does, what happens to an occurrence that falls due while
//! the previous one still runs, and what is caught up after downtime. Plain
//! values with their documented defaults; a leaf that reads no clock.

use serde::{Deserialize, Serialize};

/// A wall time that does not exist (the clock jumps over it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GapPolicy {
    /// Fire at the first instant after the gap (the instant the clock
    /// jumped). Wall times in one gap fire once there.
    #[default]
    ShiftForward,
    /// Do not fire.
    Skip,
}

/// A wall time that happens twice (the clock is set back over it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RepeatPolicy {
    /// Fire once, at its first occurrence.
    #[default]
    First,
    /// Fire at both occurrences.
    Both,
}

/// An occurrence that falls due while an earlier one is still claimed and
/// not done.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Overlap {
    /// Drop it (Temporal's default).
    #[default]
    Skip,
    /// Keep one waiting; drop any further.
    BufferOne,
    /// Keep every one waiting, in order.
    BufferAll,
}

/// What [`Overlap::admit`] says of an occurrence that falls due.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    Start,
    Wait,
    Drop,
}

impl Overlap {
    /// What to do with an occurrence that falls due while `running` says
    /// whether an earlier one is claimed and not done, and `waiting` are kept
    /// waiting already.
    pub fn admit(self, running: bool, waiting: usize) -> Admission {
        match (running, self) {
            (false, _) if waiting == 0 => Admission::Start,
            (_, Overlap::Skip) => Admission::Drop,
            (_, Overlap::BufferOne) if waiting > 0 => Admission::Drop,
            (_, Overlap::BufferOne | Overlap::BufferAll) => Admission::Wait,
        }
    }
}

/// Which occurrences missed while nothing ran (every host down, the schedule
/// paused) fire when one comes back: see [`Schedule::catch_up`]
/// (super::Schedule::catch_up). Occurrences before the window never fire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CatchUp {
    /// Each missed occurrence within the window, once, oldest first.
    AllWithinWindow {
        #[serde(rename = "window-ms")]
        window_ms: u64,
    },
    /// Only the latest missed occurrence within the window.
    Latest {
        #[serde(rename = "window-ms")]
        window_ms: u64,
    },
    /// Nothing missed fires.
    None,
}

/// One year, Temporal's default catch-up window.
pub const DEFAULT_CATCH_UP_WINDOW_MS: u64 = 365 * 86_400_000;

impl Default for CatchUp {
    fn default() -> CatchUp {
        CatchUp::AllWithinWindow {
            window_ms: DEFAULT_CATCH_UP_WINDOW_MS,
        }
    }
}

impl CatchUp {
    pub fn window_ms(self) -> Option<u64> {
        match self {
            CatchUp::AllWithinWindow { window_ms } | CatchUp::Latest { window_ms } => {
                Some(window_ms)
            }
            CatchUp::None => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calendar_overlap_admits_by_policy() {
        use Admission::*;
        for policy in [Overlap::Skip, Overlap::BufferOne, Overlap::BufferAll] {
            assert_eq!(policy.admit(false, 0), Start, "{policy:?}");
        }
        assert_eq!(Overlap::Skip.admit(true, 0), Drop);
        assert_eq!(Overlap::BufferOne.admit(true, 0), Wait);
        assert_eq!(Overlap::BufferOne.admit(true, 1), Drop);
        assert_eq!(Overlap::BufferAll.admit(true, 7), Wait);
        // Nothing running but some waiting: the new one queues behind them.
        assert_eq!(Overlap::BufferAll.admit(false, 2), Wait);
        assert_eq!(Overlap::BufferOne.admit(false, 1), Drop);
    }

    #[test]
    fn calendar_policies_serialize_in_kebab_case() {
        let json = serde_json::to_string(&(
            GapPolicy::ShiftForward,
            RepeatPolicy::Both,
            Overlap::BufferOne,
            CatchUp::AllWithinWindow { window_ms: 5 },
            CatchUp::None,
        ))
        .expect("serializes");
        assert_eq!(
            json,
            r#"["shift-forward","both","buffer-one",{"all-within-window":{"window-ms":5}},"none"]"#
        );
    }
}
