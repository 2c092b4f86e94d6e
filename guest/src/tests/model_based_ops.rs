//! What the model-based test draws: small pools of ids, runs, actors, roles
//! and times, an `Op` per verb (and a seal that raced a sweep), the strategy
//! that picks them, and the calls with invalid inputs it mixes in.

use proptest::prelude::*;

use super::*;
use crate::model::{Lease, QueueQuery, Settlement};
use crate::{runs, tasks, timers};

pub(super) const IDS: [&str; 4] = ["t0", "t1", "t2", "t3"];
pub(super) const RUNS: [&str; 3] = ["r0", "r1", "r2"];
pub(super) const ACTORS: [&str; 3] = ["ann", "bob", "cy"];
pub(super) const ROLES: [&str; 3] = ["x", "y", "z"];
pub(super) const EFFECTS: [&str; 3] = ["e0", "e1", "e2"];
pub(super) const CASES: [&str; 2] = ["c0", "c1"];
pub(super) const PRIORITIES: [Priority; 4] = [
    Priority::Low,
    Priority::Normal,
    Priority::High,
    Priority::Urgent,
];
pub(super) const OUTCOMES: [&str; 3] = ["approved", "rejected", "returned"];
pub(super) const SETTLEMENTS: [Settlement; 3] = [
    Settlement::Completed,
    Settlement::Expired,
    Settlement::Withdrawn,
];

#[derive(Clone, Debug)]
pub(super) enum Op {
    Open {
        id: usize,
        run: usize,
        case: Option<usize>,
        roles: Vec<usize>,
        escalate_to: Vec<usize>,
        excluded: Vec<usize>,
        priority: usize,
        created: i64,
        due: Option<i64>,
    },
    Claim {
        id: usize,
        actor: usize,
        roles: Vec<usize>,
        lease: Option<Lease>,
    },
    Release {
        id: usize,
        actor: usize,
    },
    TakeOver {
        id: usize,
        from: usize,
        actor: usize,
        roles: Vec<usize>,
        lease: Option<Lease>,
    },
    Settle {
        id: usize,
        settlement: usize,
        holder: Option<usize>,
        /// An outcome to record, from [`OUTCOMES`].
        decision: Option<usize>,
    },
    Update {
        id: usize,
        by: Option<usize>,
        due: Option<Option<i64>>,
        priority: Option<usize>,
        roles: Option<Vec<usize>>,
        excluded: Option<Vec<usize>>,
    },
    Assign {
        id: usize,
        to: usize,
        roles: Vec<usize>,
        lease: Option<Lease>,
        override_roles: bool,
    },
    Unassign {
        id: usize,
    },
    Delegate {
        id: usize,
        from: usize,
        to: usize,
        roles: Vec<usize>,
        lease: Option<Lease>,
    },
    Note {
        id: usize,
        actor: usize,
    },
    /// A claim guarded by the task's revision, off by `off` (0: current).
    GuardedClaim {
        id: usize,
        actor: usize,
        roles: Vec<usize>,
        off: u64,
    },
    Held {
        actor: usize,
        limit: u32,
    },
    Renew {
        id: usize,
        actor: usize,
        lease: Lease,
    },
    ReclaimLapsed {
        now: i64,
        limit: u32,
    },
    ClaimNext {
        roles: Vec<usize>,
        actor: usize,
        lease: Option<Lease>,
    },
    ClaimBatch {
        roles: Vec<usize>,
        actor: usize,
        lease: Option<Lease>,
        count: u32,
    },
    /// Each finished task: an id (a repeat allowed), a settlement, and an
    /// outcome to record.
    SettleAndClaim {
        done: Vec<(usize, usize, Option<usize>)>,
        roles: Vec<usize>,
        actor: usize,
        lease: Option<Lease>,
        count: u32,
    },
    Escalate {
        id: usize,
    },
    WithdrawRun {
        run: usize,
        awaited: Vec<usize>,
    },
    Arm {
        run: usize,
        effect: usize,
        fire_at: i64,
    },
    ClaimDue {
        now: i64,
        limit: u32,
        lease: u32,
    },
    Disarm {
        run: usize,
        effect: usize,
    },
    DisarmRun {
        run: usize,
    },
    Reschedule {
        run: usize,
        effect: usize,
        fire_at: i64,
        take_back: bool,
    },
    TimersOf {
        run: usize,
        limit: u32,
    },
    DueBetween {
        from: i64,
        to: i64,
        limit: u32,
    },
    Seal {
        run: usize,
        awaited: Vec<usize>,
    },
    /// The mark of a seal that raced a sweep, written without retiring.
    SealBehindItsBack {
        run: usize,
    },
    Queue {
        roles: Vec<usize>,
        actor: Option<usize>,
        limit: u32,
    },
    Overdue {
        now: i64,
        limit: u32,
    },
    ForCase {
        case: usize,
        limit: u32,
    },
    Invalid {
        which: usize,
    },
}

/// A lease over the same small span of time as the timer leases.
fn lease() -> impl Strategy<Value = Lease> {
    (0..150i64, 1..60u32).prop_map(|(now, lease_ms)| Lease { now, lease_ms })
}

pub(super) fn op() -> impl Strategy<Value = Op> {
    let few = || proptest::collection::vec(0..3usize, 0..4);
    prop_oneof![
        4 => (
            0..IDS.len(),
            0..RUNS.len(),
            proptest::option::of(0..CASES.len()),
            few(),
            few(),
            proptest::collection::vec(0..3usize, 0..2),
            0..4usize,
            0..40i64,
            proptest::option::of(0..100i64),
        )
            .prop_map(
                |(id, run, case, roles, escalate_to, excluded, priority, created, due)| Op::Open {
                    id,
                    run,
                    case,
                    roles,
                    escalate_to,
                    excluded,
                    priority,
                    created,
                    due,
                }
            ),
        6 => (0..IDS.len(), 0..3usize, few(), proptest::option::of(lease()))
            .prop_map(|(id, actor, roles, lease)| Op::Claim { id, actor, roles, lease }),
        4 => (0..IDS.len(), 0..3usize).prop_map(|(id, actor)| Op::Release { id, actor }),
        3 => (
            0..IDS.len(),
            0..3usize,
            0..3usize,
            few(),
            proptest::option::of(lease())
        )
            .prop_map(|(id, from, actor, roles, lease)| Op::TakeOver {
                id,
                from,
                actor,
                roles,
                lease,
            }),
        2 => (
            0..IDS.len(),
            0..3usize,
            proptest::option::of(0..3usize),
            proptest::option::of(0..OUTCOMES.len())
        )
            .prop_map(|(id, settlement, holder, decision)| Op::Settle {
                id,
                settlement,
                holder,
                decision,
            }),
        3 => (
            0..IDS.len(),
            proptest::option::of(0..3usize),
            proptest::option::of(proptest::option::of(0..100i64)),
            proptest::option::of(0..4usize),
            proptest::option::of(few()),
            proptest::option::of(proptest::collection::vec(0..3usize, 0..2)),
        )
            .prop_map(|(id, by, due, priority, roles, excluded)| Op::Update {
                id,
                by,
                due,
                priority,
                roles,
                excluded,
            }),
        2 => (
            0..IDS.len(),
            0..3usize,
            few(),
            proptest::option::of(lease()),
            any::<bool>()
        )
            .prop_map(|(id, to, roles, lease, override_roles)| Op::Assign {
                id,
                to,
                roles,
                lease,
                override_roles,
            }),
        1 => (0..IDS.len()).prop_map(|id| Op::Unassign { id }),
        2 => (
            0..IDS.len(),
            0..3usize,
            0..3usize,
            few(),
            proptest::option::of(lease())
        )
            .prop_map(|(id, from, to, roles, lease)| Op::Delegate {
                id,
                from,
                to,
                roles,
                lease,
            }),
        1 => (0..IDS.len(), 0..3usize).prop_map(|(id, actor)| Op::Note { id, actor }),
        2 => (0..IDS.len(), 0..3usize, few(), prop_oneof![3 => Just(0u64), 1 => 1..3u64])
            .prop_map(|(id, actor, roles, off)| Op::GuardedClaim { id, actor, roles, off }),
        2 => (0..3usize, 1..4u32).prop_map(|(actor, limit)| Op::Held { actor, limit }),
        3 => (0..IDS.len(), 0..3usize, lease())
            .prop_map(|(id, actor, lease)| Op::Renew { id, actor, lease }),
        3 => (0..220i64, 1..4u32).prop_map(|(now, limit)| Op::ReclaimLapsed { now, limit }),
        3 => (few(), 0..3usize, proptest::option::of(lease()))
            .prop_map(|(roles, actor, lease)| Op::ClaimNext { roles, actor, lease }),
        2 => (few(), 0..3usize, proptest::option::of(lease()), 1..4u32)
            .prop_map(|(roles, actor, lease, count)| Op::ClaimBatch { roles, actor, lease, count }),
        3 => (
            proptest::collection::vec(
                (0..IDS.len(), 0..SETTLEMENTS.len(), proptest::option::of(0..OUTCOMES.len())),
                0..4,
            ),
            few(),
            0..3usize,
            proptest::option::of(lease()),
            0..3u32,
        )
            .prop_map(|(done, roles, actor, lease, count)| Op::SettleAndClaim {
                done,
                roles,
                actor,
                lease,
                count,
            }),
        3 => (0..IDS.len()).prop_map(|id| Op::Escalate { id }),
        1 => (0..RUNS.len(), proptest::collection::vec(0..IDS.len(), 0..4))
            .prop_map(|(run, awaited)| Op::WithdrawRun { run, awaited }),
        4 => (0..RUNS.len(), 0..EFFECTS.len(), 0..100i64)
            .prop_map(|(run, effect, fire_at)| Op::Arm { run, effect, fire_at }),
        4 => (0..150i64, 1..4u32, 1..60u32)
            .prop_map(|(now, limit, lease)| Op::ClaimDue { now, limit, lease }),
        1 => (0..RUNS.len(), 0..EFFECTS.len())
            .prop_map(|(run, effect)| Op::Disarm { run, effect }),
        1 => (0..RUNS.len()).prop_map(|run| Op::DisarmRun { run }),
        3 => (0..RUNS.len(), 0..EFFECTS.len(), 0..150i64, any::<bool>())
            .prop_map(|(run, effect, fire_at, take_back)| Op::Reschedule { run, effect, fire_at, take_back }),
        1 => (0..RUNS.len(), 1..4u32).prop_map(|(run, limit)| Op::TimersOf { run, limit }),
        2 => (0..220i64, 0..220i64, 1..4u32)
            .prop_map(|(from, to, limit)| Op::DueBetween { from: from.min(to), to: from.max(to), limit }),
        1 => (0..RUNS.len(), proptest::collection::vec(0..IDS.len(), 0..4))
            .prop_map(|(run, awaited)| Op::Seal { run, awaited }),
        1 => (0..RUNS.len()).prop_map(|run| Op::SealBehindItsBack { run }),
        2 => (few(), proptest::option::of(0..3usize), 1..4u32)
            .prop_map(|(roles, actor, limit)| Op::Queue { roles, actor, limit }),
        1 => (0..120i64, 1..4u32).prop_map(|(now, limit)| Op::Overdue { now, limit }),
        1 => (0..CASES.len(), 1..4u32).prop_map(|(case, limit)| Op::ForCase { case, limit }),
        1 => (0..INVALID_CALLS).prop_map(|which| Op::Invalid { which }),
    ]
}

pub(super) fn pick(pool: &[&str], list: &[usize]) -> Vec<String> {
    list.iter().map(|&i| pool[i].to_owned()).collect()
}

const INVALID_CALLS: usize = 23;

/// One call with an invalid input; answers the `Debug` of its result.
pub(super) fn invalid_call(kv: &mut MemKv, which: usize) -> String {
    match which {
        0 => format!("{:?}", tasks::claim(kv, "t0", "", &[], None, None)),
        1 => format!("{:?}", timers::claim_due(kv, 10, 1, 0)),
        2 => format!(
            "{:?}",
            tasks::queue(
                kv,
                &QueueQuery {
                    roles: vec![],
                    actor: None,
                    limit: 0,
                    after: None,
                },
            )
        ),
        3 => format!("{:?}", timers::arm(kv, &timer("r0", "e0", -1))),
        4 => format!(
            "{:?}",
            tasks::open(
                kv,
                &Task {
                    kind: String::new(),
                    ..task("t0")
                }
            )
        ),
        5 => format!("{:?}", runs::seal(kv, "", &[])),
        6 => format!("{:?}", tasks::overdue(kv, 10, 1001)),
        7 => format!("{:?}", tasks::for_case(kv, "c0", 1, Some("q00"))),
        8 => format!(
            "{:?}",
            tasks::take_over(kv, "t0", "", "ann", &[], None, None)
        ),
        9 => format!("{:?}", tasks::renew(kv, "t0", "ann", 10, 0, None)),
        10 => format!("{:?}", tasks::reclaim_lapsed(kv, -1, 5)),
        11 => format!(
            "{:?}",
            tasks::claim_next(
                kv,
                &QueueQuery {
                    roles: vec![],
                    actor: None,
                    limit: 1,
                    after: None,
                },
                None,
            )
        ),
        12 => format!(
            "{:?}",
            tasks::settle(kv, "t0", Settlement::Completed, Some(""), None, None)
        ),
        13 => format!("{:?}", tasks::withdraw_run(kv, "r0", &names(&["t0", ""]))),
        14 => format!(
            "{:?}",
            tasks::update(kv, "t0", None, &crate::model::TaskChanges::default(), None)
        ),
        15 => format!("{:?}", tasks::note(kv, "t0", "ann", "", None)),
        16 => format!("{:?}", tasks::held(kv, "ann", 1, Some("q00"))),
        17 => format!(
            "{:?}",
            tasks::settle(
                kv,
                "t0",
                Settlement::Completed,
                None,
                Some(&crate::model::Decision {
                    outcome: "x".repeat(65),
                    reason: None,
                    output: None,
                }),
                None,
            )
        ),
        18 => format!("{:?}", timers::reschedule(kv, "r0", "", 10, false)),
        19 => format!("{:?}", timers::due_between(kv, 20, 10, 1, None)),
        20 => format!("{:?}", timers::timers_of(kv, "r0", 1, Some("d00"))),
        21 => format!("{:?}", timers::due_between(kv, 0, 10, 1, Some("e00"))),
        _ => format!(
            "{:?}",
            tasks::delegate(kv, "t0", "ann", "", &[], None, None)
        ),
    }
}
