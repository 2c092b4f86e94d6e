//! What the unit tests of several modules share. Test-only; it must never
//! hold anything a build for use could reach.

use std::sync::Mutex;

use leasehold_guest::model::{OnExpiry, Priority, Task, TaskState};

/// Held by every unit test that makes an engine while another counts the
/// deadline clocks of the process, so the count sees only its own.
pub(crate) static ENGINE_TESTS: Mutex<()> = Mutex::new(());

/// An open task of run `r` that anyone may claim.
pub(crate) fn task(id: &str) -> Task {
    Task {
        id: id.to_owned(),
        run: "r".to_owned(),
        case: None,
        kind: "k".to_owned(),
        justification: "{}".to_owned(),
        candidate_roles: Vec::new(),
        assignee: None,
        lease_until: None,
        priority: Priority::Normal,
        state: TaskState::Open,
        on_expiry: OnExpiry::Deny,
        escalate_to: Vec::new(),
        excluded_actors: Vec::new(),
        created_at: 1,
        due_at: None,
        revision: 0,
        decision: None,
        outcomes: Vec::new(),
        remind_before: Vec::new(),
        escalation: Vec::new(),
        steps_done: 0,
    }
}
