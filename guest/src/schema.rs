//! Where everything lives in the tenant's keyspace.
//!
//! Every key is a tuple (see [`crate::keys`]) whose first element names the
//! structure. Rows hold postcard (see [`crate::store::encode_row`]); index entries hold nothing (the key is the
//! entry); counters hold a big-endian `u64`. Only this module spells a key, so
//! the layout can be read in one place:
//!
//! | key | value |
//! | --- | --- |
//! | `("meta", "layout")` | the layout version, ASCII |
//! | `("task", id)` | task row |
//! | `("queue-role", role, rank, created-at, id)` | queued task offered to `role` |
//! | `("queue-any", rank, created-at, id)` | queued task offered to anyone |
//! | `("overdue", due-at, id)` | task awaiting expiry |
//! | `("lease", lease-until, id)` | task claimed under a lease, at its end |
//! | `("case", case, created-at, id)` | every task of a case |
//! | `("count", name)` | counter |
//! | `("timer", run, effect)` | timer row; its range per run is the run's index |
//! | `("due", claimable-at, run, effect)` | when a timer can next be claimed |
//! | `("sealed", run)` | the run is sealed |

use crate::keys::Key;
use crate::model::Timestamp;
#[allow(unused_imports)]
use crate::prelude::*;

/// The layout this component reads and writes. A keyspace with another
/// version is refused as corrupt rather than misread. Layout 1 (Leasehold
/// 0.1) held rows as JSON; layout 2 holds them as postcard.
pub const LAYOUT_VERSION: &str = "2";

pub const OPEN_TASKS: &str = "open-tasks";
pub const ARMED_TIMERS: &str = "armed-timers";
pub const LEASED_CLAIMS: &str = "leased-claims";

pub fn layout() -> Key {
    Key::new().str("meta").str("layout")
}

pub fn counter(name: &str) -> Key {
    Key::new().str("count").str(name)
}

pub fn tasks() -> Key {
    Key::new().str("task")
}

pub fn task(id: &str) -> Key {
    tasks().str(id)
}

/// A position in queue order, shared by every queue index and the cursor.
pub fn queue_position(rank: i64, created_at: Timestamp, id: &str) -> Key {
    Key::new().int(rank).int(created_at).str(id)
}

pub fn queue_role(role: &str) -> Key {
    Key::new().str("queue-role").str(role)
}

pub fn queue_roles() -> Key {
    Key::new().str("queue-role")
}

pub fn queue_any() -> Key {
    Key::new().str("queue-any")
}

pub fn overdue() -> Key {
    Key::new().str("overdue")
}

pub fn overdue_entry(due_at: Timestamp, id: &str) -> Key {
    overdue().int(due_at).str(id)
}

pub fn leases() -> Key {
    Key::new().str("lease")
}

pub fn lease_entry(until: Timestamp, id: &str) -> Key {
    leases().int(until).str(id)
}

/// A position in case order: the cursor of `for-case`.
pub fn case_position(created_at: Timestamp, id: &str) -> Key {
    Key::new().int(created_at).str(id)
}

pub fn cases() -> Key {
    Key::new().str("case")
}

pub fn case(case: &str) -> Key {
    cases().str(case)
}

pub fn timers() -> Key {
    Key::new().str("timer")
}

pub fn timers_of(run: &str) -> Key {
    timers().str(run)
}

pub fn timer(run: &str, effect: &str) -> Key {
    timers_of(run).str(effect)
}

pub fn due() -> Key {
    Key::new().str("due")
}

pub fn due_entry(at: Timestamp, run: &str, effect: &str) -> Key {
    due().int(at).str(run).str(effect)
}

pub fn sealed(run: &str) -> Key {
    Key::new().str("sealed").str(run)
}
