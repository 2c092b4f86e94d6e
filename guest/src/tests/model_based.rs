//! Random sequences of operations over a small pool of ids, actors, roles and
//! times, applied both to [`MemKv`] through the verbs and to a plain reference
//! model. After every operation the answers agree, the consistency check is
//! empty, the counters match the model, and a call that answered an error
//! left the map exactly as it was.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use super::*;
use crate::model::{ArmOutcome, ClaimError, Lease, Page, QueueQuery, SealOutcome, Settlement};
use crate::{runs, tasks, timers};

const IDS: [&str; 4] = ["t0", "t1", "t2", "t3"];
const RUNS: [&str; 3] = ["r0", "r1", "r2"];
const ACTORS: [&str; 3] = ["ann", "bob", "cy"];
const ROLES: [&str; 3] = ["x", "y", "z"];
const EFFECTS: [&str; 3] = ["e0", "e1", "e2"];
const CASES: [&str; 2] = ["c0", "c1"];
const PRIORITIES: [Priority; 4] = [
    Priority::Low,
    Priority::Normal,
    Priority::High,
    Priority::Urgent,
];
const SETTLEMENTS: [Settlement; 3] = [
    Settlement::Completed,
    Settlement::Expired,
    Settlement::Withdrawn,
];

#[derive(Clone, Debug)]
enum Op {
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

fn op() -> impl Strategy<Value = Op> {
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
        2 => (0..IDS.len(), 0..3usize, proptest::option::of(0..3usize))
            .prop_map(|(id, settlement, holder)| Op::Settle { id, settlement, holder }),
        3 => (0..IDS.len(), 0..3usize, lease())
            .prop_map(|(id, actor, lease)| Op::Renew { id, actor, lease }),
        3 => (0..220i64, 1..4u32).prop_map(|(now, limit)| Op::ReclaimLapsed { now, limit }),
        3 => (few(), 0..3usize, proptest::option::of(lease()))
            .prop_map(|(roles, actor, lease)| Op::ClaimNext { roles, actor, lease }),
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

fn pick(pool: &[&str], list: &[usize]) -> Vec<String> {
    list.iter().map(|&i| pool[i].to_owned()).collect()
}

fn dedup(list: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for s in list {
        if !out.contains(s) {
            out.push(s.clone());
        }
    }
    out
}

/// What the contract says, in plain structs.
#[derive(Default)]
struct Model {
    /// Each task with whether it was ever escalated.
    tasks: BTreeMap<String, (Task, bool)>,
    /// Each timer with its lease.
    timers: BTreeMap<(String, String), (Timer, Option<i64>)>,
    sealed: BTreeSet<String>,
}

impl Model {
    fn ladder(t: &Task, actor: &str, roles: &[String]) -> Result<(), ClaimError> {
        if t.excluded_actors.iter().any(|a| a == actor) {
            return Err(ClaimError::Excluded(actor.to_owned()));
        }
        if !t.candidate_roles.is_empty() && !t.candidate_roles.iter().any(|r| roles.contains(r)) {
            return Err(ClaimError::WrongRole(actor.to_owned()));
        }
        if !t.state.is_pending() {
            return Err(ClaimError::NotPending(t.state));
        }
        Ok(())
    }

    fn open(&mut self, t: &Task) -> Result<Task, StoreError> {
        if let Some((found, _)) = self.tasks.get(&t.id) {
            return Ok(found.clone());
        }
        let t = Task {
            candidate_roles: dedup(&t.candidate_roles),
            escalate_to: dedup(&t.escalate_to),
            excluded_actors: dedup(&t.excluded_actors),
            ..t.clone()
        };
        self.tasks.insert(t.id.clone(), (t.clone(), false));
        Ok(t)
    }

    fn claim(
        &mut self,
        id: &str,
        actor: &str,
        roles: &[String],
        lease: Option<Lease>,
    ) -> Result<Task, ClaimError> {
        let Some((t, _)) = self.tasks.get_mut(id) else {
            return Err(ClaimError::NotFound(id.to_owned()));
        };
        Self::ladder(t, actor, roles)?;
        if t.state == TaskState::Claimed {
            let holder = t.assignee.clone().unwrap_or_default();
            if holder != actor {
                return Err(ClaimError::AlreadyClaimed(holder));
            }
            if let Some(l) = lease {
                t.lease_until = Some(l.now + i64::from(l.lease_ms));
            }
            return Ok(t.clone());
        }
        t.state = TaskState::Claimed;
        t.assignee = Some(actor.to_owned());
        t.lease_until = lease.map(|l| l.now + i64::from(l.lease_ms));
        Ok(t.clone())
    }

    fn take_over(
        &mut self,
        id: &str,
        from: &str,
        actor: &str,
        roles: &[String],
        lease: Option<Lease>,
    ) -> Result<Task, ClaimError> {
        let Some((t, _)) = self.tasks.get_mut(id) else {
            return Err(ClaimError::NotFound(id.to_owned()));
        };
        Self::ladder(t, actor, roles)?;
        if t.state != TaskState::Claimed || t.assignee.as_deref() != Some(from) {
            return Err(ClaimError::NotHeld(from.to_owned()));
        }
        let end = lease.map(|l| l.now + i64::from(l.lease_ms));
        if from != actor || end.is_some() {
            t.lease_until = end;
        }
        t.assignee = Some(actor.to_owned());
        Ok(t.clone())
    }

    fn put_back(t: &mut Task, ever: bool) {
        t.assignee = None;
        t.lease_until = None;
        t.state = if ever {
            TaskState::Escalated
        } else {
            TaskState::Open
        };
    }

    fn release(&mut self, id: &str, actor: &str) -> Result<(), ClaimError> {
        let Some((t, ever)) = self.tasks.get_mut(id) else {
            return Err(ClaimError::NotFound(id.to_owned()));
        };
        if t.state != TaskState::Claimed || t.assignee.as_deref() != Some(actor) {
            return Err(ClaimError::NotHeld(actor.to_owned()));
        }
        Self::put_back(t, *ever);
        Ok(())
    }

    fn renew(&mut self, id: &str, actor: &str, lease: Lease) -> Result<Task, ClaimError> {
        let Some((t, _)) = self.tasks.get_mut(id) else {
            return Err(ClaimError::NotFound(id.to_owned()));
        };
        if t.state != TaskState::Claimed
            || t.assignee.as_deref() != Some(actor)
            || t.lease_until.is_none()
        {
            return Err(ClaimError::NotHeld(actor.to_owned()));
        }
        t.lease_until = Some(lease.now + i64::from(lease.lease_ms));
        Ok(t.clone())
    }

    fn reclaim_lapsed(&mut self, now: i64, limit: u32) -> Vec<Task> {
        let mut lapsed: Vec<(i64, String)> = self
            .tasks
            .values()
            .filter(|(t, _)| t.state == TaskState::Claimed)
            .filter_map(|(t, _)| {
                t.lease_until
                    .filter(|e| *e <= now)
                    .map(|e| (e, t.id.clone()))
            })
            .collect();
        lapsed.sort();
        lapsed
            .into_iter()
            .take(limit as usize)
            .filter_map(|(_, id)| {
                let (t, ever) = self.tasks.get_mut(&id)?;
                Self::put_back(t, *ever);
                Some(t.clone())
            })
            .collect()
    }

    fn claim_next(&mut self, roles: &[String], actor: &str, lease: Option<Lease>) -> Option<Task> {
        let head = self.queue(roles, Some(actor)).into_iter().next()?;
        self.claim(&head, actor, roles, lease).ok()
    }

    fn settle(
        &mut self,
        id: &str,
        s: Settlement,
        holder: Option<&str>,
    ) -> Result<bool, ClaimError> {
        let Some((t, _)) = self.tasks.get_mut(id) else {
            return Err(ClaimError::NotFound(id.to_owned()));
        };
        if let Some(h) = holder
            && (t.state != TaskState::Claimed || t.assignee.as_deref() != Some(h))
        {
            return Err(ClaimError::NotHeld(h.to_owned()));
        }
        if !t.state.is_pending() {
            return Ok(false);
        }
        t.state = s.state();
        t.lease_until = None;
        Ok(true)
    }

    fn escalate(&mut self, id: &str) -> Result<Task, StoreError> {
        let Some((t, ever)) = self.tasks.get_mut(id) else {
            return Err(StoreError::NotFound(id.to_owned()));
        };
        if t.state.is_pending() {
            *ever = true;
            t.state = TaskState::Escalated;
            t.assignee = None;
            t.lease_until = None;
            if !t.candidate_roles.is_empty() {
                for r in t.escalate_to.clone() {
                    if !t.candidate_roles.contains(&r) {
                        t.candidate_roles.push(r);
                    }
                }
            }
        }
        Ok(t.clone())
    }

    fn withdraw(&mut self, run: &str, awaited: &[String]) -> u32 {
        let mut moved = 0;
        for id in dedup(awaited) {
            if let Some((t, _)) = self.tasks.get_mut(&id)
                && t.run == run
                && t.state.is_pending()
            {
                t.state = TaskState::Withdrawn;
                t.lease_until = None;
                moved += 1;
            }
        }
        moved
    }

    fn arm(&mut self, t: &Timer) -> ArmOutcome {
        if self.sealed.contains(&t.run) {
            return ArmOutcome::RunSealed;
        }
        let key = (t.run.clone(), t.effect.clone());
        if self.timers.contains_key(&key) {
            return ArmOutcome::AlreadyArmed;
        }
        self.timers.insert(key, (t.clone(), None));
        ArmOutcome::Armed
    }

    fn claimable_at(entry: &(Timer, Option<i64>)) -> i64 {
        entry.1.unwrap_or(entry.0.fire_at)
    }

    fn claim_due(&mut self, now: i64, limit: u32, lease: u32) -> Vec<Timer> {
        let mut due: Vec<(i64, String, String)> = self
            .timers
            .iter()
            .filter(|(_, e)| Self::claimable_at(e) <= now)
            .map(|((r, f), e)| (Self::claimable_at(e), r.clone(), f.clone()))
            .collect();
        due.sort();
        let mut out = Vec::new();
        for (_, run, effect) in due {
            if out.len() == limit as usize {
                break;
            }
            let key = (run, effect);
            if self.sealed.contains(&key.0) {
                self.timers.remove(&key);
                continue;
            }
            if let Some(entry) = self.timers.get_mut(&key) {
                entry.1 = Some(now + i64::from(lease));
                out.push(entry.0.clone());
            }
        }
        out
    }

    fn disarm_run(&mut self, run: &str) -> u32 {
        let before = self.timers.len();
        self.timers.retain(|(r, _), _| r != run);
        (before - self.timers.len()) as u32
    }

    fn queue(&self, roles: &[String], actor: Option<&str>) -> Vec<String> {
        let mut found: Vec<&Task> = self
            .tasks
            .values()
            .map(|(t, _)| t)
            .filter(|t| t.state.is_queued() && t.admits_roles(roles))
            .filter(|t| actor.is_none_or(|a| !t.excluded_actors.iter().any(|x| x == a)))
            .collect();
        found.sort_by_key(|t| (t.priority.rank(), t.created_at, t.id.clone()));
        found.into_iter().map(|t| t.id.clone()).collect()
    }

    fn overdue(&self, now: i64, limit: u32) -> Vec<Task> {
        let mut found: Vec<(i64, Task)> = self
            .tasks
            .values()
            .filter(|(t, ever)| matches!(t.state, TaskState::Open | TaskState::Claimed) && !*ever)
            .filter_map(|(t, _)| t.due_at.filter(|d| *d <= now).map(|d| (d, t.clone())))
            .collect();
        found.sort_by(|a, b| (a.0, &a.1.id).cmp(&(b.0, &b.1.id)));
        found
            .into_iter()
            .take(limit as usize)
            .map(|(_, t)| t)
            .collect()
    }

    fn for_case(&self, case: &str) -> Vec<String> {
        let mut found: Vec<&Task> = self
            .tasks
            .values()
            .map(|(t, _)| t)
            .filter(|t| t.case.as_deref() == Some(case))
            .collect();
        found.sort_by_key(|t| (t.created_at, t.id.clone()));
        found.into_iter().map(|t| t.id.clone()).collect()
    }

    fn next_due(&self) -> Option<i64> {
        self.timers.values().map(Self::claimable_at).min()
    }

    fn leased_tasks(&self) -> u64 {
        self.tasks
            .values()
            .filter(|(t, _)| t.state == TaskState::Claimed && t.lease_until.is_some())
            .count() as u64
    }

    fn next_lease_end(&self) -> Option<i64> {
        self.tasks
            .values()
            .filter(|(t, _)| t.state == TaskState::Claimed)
            .filter_map(|(t, _)| t.lease_until)
            .min()
    }

    fn pending_tasks(&self) -> u64 {
        self.tasks
            .values()
            .filter(|(t, _)| t.state.is_pending())
            .count() as u64
    }
}

/// Pages through a paged read, checking the paging rules, answering the ids.
fn page_through(
    limit: u32,
    mut read: impl FnMut(Option<String>) -> Result<Page, StoreError>,
) -> Result<Vec<String>, TestCaseError> {
    let mut out = Vec::new();
    let mut after = None;
    for _ in 0..100 {
        let had_cursor = after.is_some();
        let page = read(after).map_err(|e| TestCaseError::fail(format!("read failed: {e}")))?;
        prop_assert!(page.tasks.len() <= limit as usize);
        prop_assert!(!had_cursor || !page.tasks.is_empty(), "next led nowhere");
        prop_assert!(page.next.is_none() || page.tasks.len() == limit as usize);
        out.extend(ids(&page.tasks));
        match page.next {
            Some(next) => after = Some(next),
            None => return Ok(out),
        }
    }
    Err(TestCaseError::fail("paging did not end"))
}

const INVALID_CALLS: usize = 14;

/// One call with an invalid input; answers the `Debug` of its result.
fn invalid_call(kv: &mut MemKv, which: usize) -> String {
    match which {
        0 => format!("{:?}", tasks::claim(kv, "t0", "", &[], None)),
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
        8 => format!("{:?}", tasks::take_over(kv, "t0", "", "ann", &[], None)),
        9 => format!("{:?}", tasks::renew(kv, "t0", "ann", 10, 0)),
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
            tasks::settle(kv, "t0", Settlement::Completed, Some(""))
        ),
        _ => format!("{:?}", tasks::withdraw_run(kv, "r0", &names(&["t0", ""]))),
    }
}

/// Applies one operation to both sides and compares the answers. Answers
/// whether the real call returned an error.
fn apply(kv: &mut MemKv, model: &mut Model, op: &Op) -> Result<bool, TestCaseError> {
    let failed = match op {
        Op::Open {
            id,
            run,
            case,
            roles,
            escalate_to,
            excluded,
            priority,
            created,
            due,
        } => {
            let t = Task {
                id: IDS[*id].to_owned(),
                run: RUNS[*run].to_owned(),
                case: case.map(|c| CASES[c].to_owned()),
                candidate_roles: pick(&ROLES, roles),
                escalate_to: pick(&ROLES, escalate_to),
                excluded_actors: pick(&ACTORS, excluded),
                priority: PRIORITIES[*priority],
                created_at: *created,
                due_at: *due,
                ..task("unused")
            };
            let real = tasks::open(kv, &t);
            prop_assert_eq!(&real, &model.open(&t));
            real.is_err()
        }
        Op::Claim {
            id,
            actor,
            roles,
            lease,
        } => {
            let roles = pick(&ROLES, roles);
            let real = tasks::claim(kv, IDS[*id], ACTORS[*actor], &roles, lease.as_ref());
            prop_assert_eq!(
                &real,
                &model.claim(IDS[*id], ACTORS[*actor], &roles, *lease)
            );
            real.is_err()
        }
        Op::Release { id, actor } => {
            let real = tasks::release(kv, IDS[*id], ACTORS[*actor]);
            prop_assert_eq!(&real, &model.release(IDS[*id], ACTORS[*actor]));
            real.is_err()
        }
        Op::TakeOver {
            id,
            from,
            actor,
            roles,
            lease,
        } => {
            let roles = pick(&ROLES, roles);
            let (id, from, actor) = (IDS[*id], ACTORS[*from], ACTORS[*actor]);
            let real = tasks::take_over(kv, id, from, actor, &roles, lease.as_ref());
            prop_assert_eq!(&real, &model.take_over(id, from, actor, &roles, *lease));
            real.is_err()
        }
        Op::Settle {
            id,
            settlement,
            holder,
        } => {
            let s = SETTLEMENTS[*settlement];
            let holder = holder.map(|h| ACTORS[h]);
            let real = tasks::settle(kv, IDS[*id], s, holder);
            prop_assert_eq!(&real, &model.settle(IDS[*id], s, holder));
            real.is_err()
        }
        Op::Renew { id, actor, lease } => {
            let (id, actor) = (IDS[*id], ACTORS[*actor]);
            let real = tasks::renew(kv, id, actor, lease.now, lease.lease_ms);
            prop_assert_eq!(&real, &model.renew(id, actor, *lease));
            real.is_err()
        }
        Op::ReclaimLapsed { now, limit } => {
            let real = tasks::reclaim_lapsed(kv, *now, *limit);
            prop_assert_eq!(&real, &Ok(model.reclaim_lapsed(*now, *limit)));
            real.is_err()
        }
        Op::ClaimNext {
            roles,
            actor,
            lease,
        } => {
            let roles = pick(&ROLES, roles);
            let query = QueueQuery {
                roles: roles.clone(),
                actor: Some(ACTORS[*actor].to_owned()),
                limit: 1,
                after: None,
            };
            let real = tasks::claim_next(kv, &query, lease.as_ref());
            prop_assert_eq!(&real, &Ok(model.claim_next(&roles, ACTORS[*actor], *lease)));
            real.is_err()
        }
        Op::Escalate { id } => {
            let real = tasks::escalate(kv, IDS[*id]);
            prop_assert_eq!(&real, &model.escalate(IDS[*id]));
            real.is_err()
        }
        Op::WithdrawRun { run, awaited } => {
            let awaited = pick(&IDS, awaited);
            let real = tasks::withdraw_run(kv, RUNS[*run], &awaited);
            prop_assert_eq!(&real, &Ok(model.withdraw(RUNS[*run], &awaited)));
            real.is_err()
        }
        Op::Arm {
            run,
            effect,
            fire_at,
        } => {
            let t = timer(RUNS[*run], EFFECTS[*effect], *fire_at);
            let real = timers::arm(kv, &t);
            prop_assert_eq!(&real, &Ok(model.arm(&t)));
            real.is_err()
        }
        Op::ClaimDue { now, limit, lease } => {
            let real = timers::claim_due(kv, *now, *limit, *lease);
            prop_assert_eq!(&real, &Ok(model.claim_due(*now, *limit, *lease)));
            real.is_err()
        }
        Op::Disarm { run, effect } => {
            let (run, effect) = (RUNS[*run], EFFECTS[*effect]);
            let real = timers::disarm(kv, run, effect);
            let existed = model
                .timers
                .remove(&(run.to_owned(), effect.to_owned()))
                .is_some();
            prop_assert_eq!(&real, &Ok(existed));
            real.is_err()
        }
        Op::DisarmRun { run } => {
            let real = timers::disarm_run(kv, RUNS[*run]);
            prop_assert_eq!(&real, &Ok(model.disarm_run(RUNS[*run])));
            real.is_err()
        }
        Op::Seal { run, awaited } => {
            let (run, awaited) = (RUNS[*run], pick(&IDS, awaited));
            let real = runs::seal(kv, run, &awaited);
            model.sealed.insert(run.to_owned());
            let expected = SealOutcome {
                timers_disarmed: model.disarm_run(run),
                tasks_withdrawn: model.withdraw(run, &awaited),
            };
            prop_assert_eq!(&real, &Ok(expected));
            real.is_err()
        }
        Op::SealBehindItsBack { run } => {
            kv.map
                .insert(crate::schema::sealed(RUNS[*run]).into_bytes(), Vec::new());
            model.sealed.insert(RUNS[*run].to_owned());
            false
        }
        Op::Queue {
            roles,
            actor,
            limit,
        } => {
            let roles = pick(&ROLES, roles);
            let actor = actor.map(|a| ACTORS[a]);
            let got = page_through(*limit, |after| {
                tasks::queue(
                    kv,
                    &QueueQuery {
                        roles: roles.clone(),
                        actor: actor.map(str::to_owned),
                        limit: *limit,
                        after,
                    },
                )
            })?;
            prop_assert_eq!(got, model.queue(&roles, actor));
            false
        }
        Op::Overdue { now, limit } => {
            let real = tasks::overdue(kv, *now, *limit);
            prop_assert_eq!(&real, &Ok(model.overdue(*now, *limit)));
            false
        }
        Op::ForCase { case, limit } => {
            let got = page_through(*limit, |after| {
                tasks::for_case(kv, CASES[*case], *limit, after.as_deref())
            })?;
            prop_assert_eq!(got, model.for_case(CASES[*case]));
            false
        }
        Op::Invalid { which } => {
            let answer = invalid_call(kv, *which);
            prop_assert!(answer.contains("Invalid"), "{}", answer);
            true
        }
    };
    Ok(failed)
}

/// Everything the model says about the store, checked against it.
fn verify(kv: &mut MemKv, model: &Model) -> Result<(), TestCaseError> {
    let found = check::check(kv).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert!(found.is_empty(), "the check found {:?}", found);
    prop_assert_eq!(tasks::open_count(kv), Ok(model.pending_tasks()));
    prop_assert_eq!(tasks::leased_count(kv), Ok(model.leased_tasks()));
    prop_assert_eq!(tasks::next_lease_end(kv), Ok(model.next_lease_end()));
    prop_assert_eq!(timers::pending_count(kv), Ok(model.timers.len() as u64));
    prop_assert_eq!(timers::next_due(kv), Ok(model.next_due()));
    for id in IDS {
        let expected = model.tasks.get(id).map(|(t, _)| t.clone());
        prop_assert_eq!(tasks::get(kv, id), Ok(expected));
    }
    for run in RUNS {
        prop_assert_eq!(runs::is_sealed(kv, run), Ok(model.sealed.contains(run)));
    }
    verify_feed(kv, model)
}

/// The feed, read one entry at a time from its start and replayed, gives
/// each task's row as the model has it, each task's changes once and in
/// order, and each timer's last change as the model says it stands.
fn verify_feed(kv: &mut MemKv, model: &Model) -> Result<(), TestCaseError> {
    use crate::model::{Change, FeedRead, TimerEvent};
    let mut after: Option<String> = None;
    let mut last_task: BTreeMap<String, crate::model::HistoryEntry> = BTreeMap::new();
    let mut last_timer: BTreeMap<(String, String), TimerEvent> = BTreeMap::new();
    loop {
        let page = match crate::changes::feed(kv, after.as_deref(), 1) {
            Ok(FeedRead::Page(p)) => p,
            other => return Err(TestCaseError::fail(format!("feed: {other:?}"))),
        };
        let Some(e) = page.entries.into_iter().next() else {
            prop_assert_eq!(&page.next, &page.head);
            break;
        };
        after = Some(page.next);
        match e.change {
            Change::Task(c) => {
                let want = last_task.get(&c.id).map_or(1, |l| l.seq + 1);
                prop_assert_eq!(c.entry.seq, want, "task {}", c.id);
                last_task.insert(c.id, c.entry);
            }
            Change::Timer(c) => {
                last_timer.insert((c.run, c.effect), c.what);
            }
        }
    }
    for id in IDS {
        match (model.tasks.get(id), last_task.get(id)) {
            (None, None) => {}
            (Some((t, _)), Some(e)) => {
                prop_assert_eq!(
                    (t.state, &t.assignee, t.lease_until, &t.candidate_roles),
                    (e.after, &e.assignee, e.lease_until, &e.candidate_roles),
                    "task {}",
                    id
                );
            }
            (t, e) => {
                return Err(TestCaseError::fail(format!(
                    "task {id}: {t:?} against {e:?}"
                )));
            }
        }
    }
    for ((run, effect), what) in &last_timer {
        let armed = model.timers.contains_key(&(run.clone(), effect.clone()));
        prop_assert_eq!(
            armed,
            *what != TimerEvent::Retired,
            "timer {}/{}",
            run,
            effect
        );
    }
    prop_assert_eq!(
        last_timer
            .values()
            .filter(|w| **w != TimerEvent::Retired)
            .count(),
        model.timers.len()
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_operations_agree_with_the_reference_model_and_keep_the_store_consistent(
        ops in proptest::collection::vec(op(), 1..60)
    ) {
        let mut kv = MemKv::new();
        let mut model = Model::default();
        for (i, op) in ops.iter().enumerate() {
            // Writers in three slots, at times that do not follow their
            // order: the feed must still give each task's changes in order.
            kv.slot = (i % 3) as u32;
            kv.now = (i as i64 * 7919) % 100;
            let before = kv.map.clone();
            let calls = kv.calls;
            let failed = apply(&mut kv, &mut model, op)?;
            if failed {
                prop_assert!(kv.map == before, "{:?} failed and changed the store", op);
                prop_assert_eq!(kv.calls.sets, calls.sets, "{:?} failed after a set", op);
                prop_assert_eq!(kv.calls.deletes, calls.deletes, "{:?} failed after a delete", op);
            }
            verify(&mut kv, &model)?;
        }
    }
}
