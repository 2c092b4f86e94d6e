//! Random sequences of operations over a small pool of ids, actors, roles and
//! times, applied both to [`MemKv`] through the verbs and to a plain reference
//! model. After every operation the answers agree, the consistency check is
//! empty, the counters match the model, and a call that answered an error
//! left the map exactly as it was. The operations are drawn in
//! `model_based_ops`; the model is `model_based_reference`.

use std::collections::BTreeMap;

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use super::model_based_ops::{
    ACTORS, CASES, EFFECTS, IDS, OUTCOMES, Op, PRIORITIES, ROLES, RUNS, SETTLEMENTS, invalid_call,
    op, pick,
};
use super::model_based_reference::Model;
use super::*;
use crate::model::{
    Decision, Finished, Guard, Page, QueueQuery, SealOutcome, SettledAndClaimed, TaskChanges,
    TimerInfo, TimerPage,
};
use crate::{runs, tasks, timers};

/// What a worker's claims ask for: `actor`'s queue with `roles`.
fn claims_for(roles: &[String], actor: usize) -> QueueQuery {
    QueueQuery {
        roles: roles.to_vec(),
        actor: Some(ACTORS[actor].to_owned()),
        limit: 1,
        after: None,
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

/// Pages through a timer listing, checking the paging rules.
fn timer_pages(
    limit: u32,
    mut read: impl FnMut(Option<String>) -> Result<TimerPage, StoreError>,
) -> Result<Vec<TimerInfo>, TestCaseError> {
    let mut out = Vec::new();
    let mut after = None;
    for _ in 0..100 {
        let had_cursor = after.is_some();
        let page = read(after).map_err(|e| TestCaseError::fail(format!("read failed: {e}")))?;
        prop_assert!(page.timers.len() <= limit as usize);
        prop_assert!(!had_cursor || !page.timers.is_empty(), "next led nowhere");
        prop_assert!(page.next.is_none() || page.timers.len() == limit as usize);
        out.extend(page.timers);
        match page.next {
            Some(next) => after = Some(next),
            None => return Ok(out),
        }
    }
    Err(TestCaseError::fail("paging did not end"))
}

/// Applies one operation to both sides and compares the answers. Answers
/// whether the real call returned an error.
pub(super) fn apply(kv: &mut MemKv, model: &mut Model, op: &Op) -> Result<bool, TestCaseError> {
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
                // Two kinds, so that searches by kind divide the store.
                kind: ["k0", "k1"][(*id + *run) % 2].to_owned(),
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
            let real = tasks::claim(kv, IDS[*id], ACTORS[*actor], &roles, lease.as_ref(), None);
            prop_assert_eq!(
                &real,
                &model.claim(IDS[*id], ACTORS[*actor], &roles, *lease)
            );
            real.is_err()
        }
        Op::Release { id, actor } => {
            let real = tasks::release(kv, IDS[*id], ACTORS[*actor], None);
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
            let real = tasks::take_over(kv, id, from, actor, &roles, lease.as_ref(), None);
            prop_assert_eq!(&real, &model.take_over(id, from, actor, &roles, *lease));
            real.is_err()
        }
        Op::Settle {
            id,
            settlement,
            holder,
            decision,
        } => {
            let s = SETTLEMENTS[*settlement];
            let holder = holder.map(|h| ACTORS[h]);
            let outcome = decision.map(|d| OUTCOMES[d]);
            let d = outcome.map(|o| Decision {
                outcome: o.to_owned(),
                reason: Some(format!("because {o}")),
                output: None,
            });
            let real = tasks::settle(kv, IDS[*id], s, holder, d.as_ref(), None);
            let now = kv.now;
            prop_assert_eq!(
                &real,
                &model.settle(IDS[*id], s, holder, outcome.map(|o| (o, now)))
            );
            real.is_err()
        }
        Op::Update {
            id,
            by,
            due,
            priority,
            roles,
            excluded,
        } => {
            let c = TaskChanges {
                due_at: *due,
                priority: priority.map(|p| PRIORITIES[p]),
                candidate_roles: roles.as_ref().map(|r| pick(&ROLES, r)),
                excluded_actors: excluded.as_ref().map(|x| pick(&ACTORS, x)),
                ..TaskChanges::default()
            };
            let by = by.map(|b| ACTORS[b]);
            let real = tasks::update(kv, IDS[*id], by, &c, None);
            if c.names_a_field() {
                prop_assert_eq!(&real, &model.update(IDS[*id], &c));
            } else {
                prop_assert!(
                    matches!(
                        real,
                        Err(crate::model::ClaimError::Store(StoreError::Invalid(_)))
                    ),
                    "{:?}",
                    real
                );
            }
            real.is_err()
        }
        Op::Assign {
            id,
            to,
            roles,
            lease,
            override_roles,
        } => {
            let roles = pick(&ROLES, roles);
            let (id, to) = (IDS[*id], ACTORS[*to]);
            let real = tasks::assign(
                kv,
                id,
                to,
                &roles,
                lease.as_ref(),
                *override_roles,
                Some("lead"),
                None,
            );
            prop_assert_eq!(
                &real,
                &model.assign(id, to, &roles, *lease, *override_roles)
            );
            real.is_err()
        }
        Op::Unassign { id } => {
            let real = tasks::unassign(kv, IDS[*id], None, None);
            prop_assert_eq!(&real, &model.unassign(IDS[*id]));
            real.is_err()
        }
        Op::Delegate {
            id,
            from,
            to,
            roles,
            lease,
        } => {
            let roles = pick(&ROLES, roles);
            let (id, from, to) = (IDS[*id], ACTORS[*from], ACTORS[*to]);
            let real = tasks::delegate(kv, id, from, to, &roles, lease.as_ref(), None);
            prop_assert_eq!(&real, &model.delegate(id, from, to, &roles, *lease));
            real.is_err()
        }
        Op::Note { id, actor } => {
            let real = tasks::note(kv, IDS[*id], ACTORS[*actor], "a remark", None);
            prop_assert_eq!(&real, &model.note(IDS[*id]));
            real.is_err()
        }
        Op::GuardedClaim {
            id,
            actor,
            roles,
            off,
        } => {
            let roles = pick(&ROLES, roles);
            let (id, actor) = (IDS[*id], ACTORS[*actor]);
            let current = model.revision(id);
            let guard = Guard {
                revision: Some(current.unwrap_or(0) + off),
                job: Some("job-1".to_owned()),
            };
            let real = tasks::claim(kv, id, actor, &roles, None, Some(&guard));
            let want = match current {
                Some(r) if *off != 0 => Err(crate::model::ClaimError::Stale(r)),
                _ => model.claim(id, actor, &roles, None),
            };
            prop_assert_eq!(&real, &want);
            real.is_err()
        }
        Op::Held { actor, limit } => {
            let actor = ACTORS[*actor];
            let got = page_through(*limit, |after| {
                tasks::held(kv, actor, *limit, after.as_deref())
            })?;
            prop_assert_eq!(got, model.held(actor));
            false
        }
        Op::Renew { id, actor, lease } => {
            let (id, actor) = (IDS[*id], ACTORS[*actor]);
            let real = tasks::renew(kv, id, actor, lease.now, lease.lease_ms, None);
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
            let query = claims_for(&roles, *actor);
            let real = tasks::claim_next(kv, &query, lease.as_ref());
            prop_assert_eq!(&real, &Ok(model.claim_next(&roles, ACTORS[*actor], *lease)));
            real.is_err()
        }
        Op::ClaimBatch {
            roles,
            actor,
            lease,
            count,
        } => {
            let roles = pick(&ROLES, roles);
            let query = claims_for(&roles, *actor);
            let real = tasks::claim_batch(kv, &query, lease.as_ref(), *count);
            let expected = model.claim_batch(&roles, ACTORS[*actor], *lease, *count);
            prop_assert_eq!(&real, &Ok(expected));
            real.is_err()
        }
        Op::SettleAndClaim {
            done,
            roles,
            actor,
            lease,
            count,
        } => {
            let roles = pick(&ROLES, roles);
            let query = claims_for(&roles, *actor);
            let finished: Vec<Finished> = done
                .iter()
                .map(|&(id, s, d)| Finished {
                    id: IDS[id].to_owned(),
                    settlement: SETTLEMENTS[s],
                    decision: d.map(|d| Decision {
                        outcome: OUTCOMES[d].to_owned(),
                        reason: Some(format!("because {}", OUTCOMES[d])),
                        output: None,
                    }),
                })
                .collect();
            let real = tasks::settle_and_claim(kv, &finished, &query, lease.as_ref(), *count);
            let now = kv.now;
            let settled = done
                .iter()
                .map(|&(id, s, d)| {
                    model.settle_held(
                        IDS[id],
                        SETTLEMENTS[s],
                        ACTORS[*actor],
                        d.map(|d| (OUTCOMES[d], now)),
                    )
                })
                .collect();
            let claimed = if *count == 0 {
                Vec::new()
            } else {
                model.claim_batch(&roles, ACTORS[*actor], *lease, *count)
            };
            prop_assert_eq!(&real, &Ok(SettledAndClaimed { settled, claimed }));
            real.is_err()
        }
        Op::Escalate { id } => {
            let real = tasks::escalate(kv, IDS[*id], None);
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
        Op::Reschedule {
            run,
            effect,
            fire_at,
            take_back,
        } => {
            let (run, effect) = (RUNS[*run], EFFECTS[*effect]);
            let real = timers::reschedule(kv, run, effect, *fire_at, *take_back);
            let now = kv.now;
            prop_assert_eq!(
                &real,
                &model.reschedule(run, effect, *fire_at, *take_back, now)
            );
            real.is_err()
        }
        Op::TimersOf { run, limit } => {
            let got = timer_pages(*limit, |after| {
                timers::timers_of(kv, RUNS[*run], *limit, after.as_deref())
            })?;
            prop_assert_eq!(got, model.timers_of(RUNS[*run]));
            false
        }
        Op::DueBetween { from, to, limit } => {
            let got = timer_pages(*limit, |after| {
                timers::due_between(kv, *from, *to, *limit, after.as_deref())
            })?;
            prop_assert_eq!(got, model.due_between(*from, *to));
            false
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
pub(super) fn verify(kv: &mut MemKv, model: &Model) -> Result<(), TestCaseError> {
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
    for actor in ACTORS {
        // What `held` lists is what a scan of every task finds.
        let listed =
            tasks::held(kv, actor, 1000, None).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(ids(&listed.tasks), model.held(actor));
    }
    for (t, _) in model.tasks.values() {
        // No excluded actor ever holds a task.
        prop_assert!(
            t.assignee
                .as_ref()
                .is_none_or(|a| t.state != TaskState::Claimed || !t.excluded_actors.contains(a)),
            "task {} is held by excluded {:?}",
            t.id,
            t.assignee
        );
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
    let mut timer_at: BTreeMap<(String, String), (i64, Option<i64>)> = BTreeMap::new();
    let mut decided: BTreeMap<String, crate::model::DecisionRecord> = BTreeMap::new();
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
                // Each change is one revision on from the one before.
                let rev = last_task.get(&c.id).map_or(1, |l| l.revision + 1);
                prop_assert_eq!(c.entry.revision, rev, "task {}", c.id);
                prop_assert_eq!(
                    c.run.as_deref(),
                    model.tasks.get(&c.id).map(|(t, _)| t.run.as_str())
                );
                if let Some(d) = &c.entry.decision {
                    decided.insert(c.id.clone(), d.clone());
                }
                last_task.insert(c.id, c.entry);
            }
            Change::Timer(c) => {
                timer_at.insert(
                    (c.run.clone(), c.effect.clone()),
                    (c.fire_at, c.lease_until),
                );
                last_timer.insert((c.run, c.effect), c.what);
            }
        }
    }
    for id in IDS {
        match (model.tasks.get(id), last_task.get(id)) {
            (None, None) => {}
            (Some((t, _)), Some(e)) => {
                prop_assert_eq!(
                    (
                        t.state,
                        &t.assignee,
                        t.lease_until,
                        &t.candidate_roles,
                        &t.excluded_actors,
                        t.revision,
                    ),
                    (
                        e.after,
                        &e.assignee,
                        e.lease_until,
                        &e.candidate_roles,
                        &e.excluded_actors,
                        e.revision,
                    ),
                    "task {}",
                    id
                );
                // A decision is in the record of the change that settled.
                if let Some(d) = &t.decision {
                    prop_assert_eq!(decided.get(id), Some(d), "task {}", id);
                }
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
    // The feed replays each armed timer's fire time and lease: a reschedule
    // is in it as what it left.
    for (key, (t, lease)) in &model.timers {
        prop_assert_eq!(
            timer_at.get(key),
            Some(&(t.fire_at, *lease)),
            "timer {}/{}",
            key.0,
            key.1
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
