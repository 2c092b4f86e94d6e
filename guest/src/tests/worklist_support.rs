//! Fixtures the worklist tests share: `claim` and `open_count` over string
//! literals, and the task the claim ladder and take-over are run against,
//! still held by bob or settled while he held it. Fixtures only, no test.

use super::*;
use crate::model::{ClaimError, Settlement};
use crate::tasks;

pub(super) fn claim(
    kv: &mut MemKv,
    id: &str,
    actor: &str,
    roles: &[&str],
) -> Result<Task, ClaimError> {
    tasks::claim(kv, id, actor, &names(roles), None, None)
}

pub(super) fn open_count(kv: &mut MemKv) -> u64 {
    tasks::open_count(kv).expect("open-count")
}

/// A task every rung of the ladder would refuse to `mallory`: she is
/// excluded, has none of its roles, and bob held it until it was settled.
pub(super) fn settled_while_bob_held_it(kv: &mut MemKv, settlement: Settlement) {
    open(kv, task("t").roles(&["approver"]).excluding(&["mallory"]));
    claim(kv, "t", "bob", &["approver"]).expect("bob claims");
    assert_eq!(
        tasks::settle(kv, "t", settlement, None, None, None),
        Ok(true)
    );
}

/// The same task, still held by bob.
pub(super) fn held_by_bob(kv: &mut MemKv) {
    open(kv, task("t").roles(&["approver"]).excluding(&["mallory"]));
    claim(kv, "t", "bob", &["approver"]).expect("bob claims");
}
