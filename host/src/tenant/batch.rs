//! A worker's verbs of the `tasks` interface: `claim-batch` and
//! `settle-and-claim`, with the checks their answers must pass (every task
//! claimed is held by the worker, none twice, none more than asked for; one
//! answer per finished task, and no task both settled and claimed).

use leasehold_guest::model::{Finished, Lease, QueueQuery, SettleAnswer, SettledAndClaimed, Task};

use crate::bindings::{WitFinished, WitSettledAndClaimed, wit};
use crate::error::Error;
use crate::verbs::Verb;

use super::Tenant;
use super::checks::{StoreAnswer, distinct, held, malformed, store, wit_query};

impl Tenant {
    /// Claims up to `count` (1–100) heads of `query`'s queue for
    /// `query.actor` (required), in queue order, each under `lease` if
    /// given; fewer, or none, when the queue runs short.
    pub fn claim_batch(
        &self,
        query: &QueueQuery,
        lease: Option<Lease>,
        count: u32,
    ) -> Result<Vec<Task>, Error> {
        let q = wit_query(query);
        let lease = lease.map(wit::Lease::from);
        let actor = query.actor.as_deref().unwrap_or_default();
        self.call(
            Verb::ClaimBatch,
            |x, s| x.call(s, (&q, lease, count)),
            |a: StoreAnswer<Vec<wit::Task>>| claimed(store(a)?, count, actor, "claim-batch"),
        )
    }

    /// Settles each of `done` that `query.actor` holds, each answered on
    /// its own in the order given, then claims up to `count` (0–100) more as
    /// [`Tenant::claim_batch`] does: a steady worker's one call per batch.
    pub fn settle_and_claim(
        &self,
        done: &[Finished],
        query: &QueueQuery,
        lease: Option<Lease>,
        count: u32,
    ) -> Result<SettledAndClaimed, Error> {
        let d: Vec<WitFinished> = done.iter().cloned().map(Into::into).collect();
        let q = wit_query(query);
        let lease = lease.map(wit::Lease::from);
        let actor = query.actor.as_deref().unwrap_or_default();
        self.call(
            Verb::SettleAndClaim,
            |x, s| x.call(s, (d.as_slice(), &q, lease, count)),
            |a: StoreAnswer<WitSettledAndClaimed>| {
                let answer = store(a)?;
                if answer.settled.len() != done.len() {
                    return Err(malformed(format!(
                        "settle-and-claim answered {} of {} finished tasks",
                        answer.settled.len(),
                        done.len()
                    )));
                }
                let settled: Vec<SettleAnswer> =
                    answer.settled.into_iter().map(Into::into).collect();
                let claimed = claimed(answer.claimed, count, actor, "settle-and-claim")?;
                if let Some(t) = claimed.iter().find(|t| {
                    done.iter()
                        .zip(&settled)
                        .any(|(f, a)| f.id == t.id && *a == SettleAnswer::Settled)
                }) {
                    return Err(malformed(format!(
                        "settle-and-claim settled task {} and claimed it again",
                        t.id
                    )));
                }
                Ok(SettledAndClaimed { settled, claimed })
            },
        )
    }
}

/// A batch of claims: at most `count`, distinct, each held by `actor`.
fn claimed(tasks: Vec<wit::Task>, count: u32, actor: &str, verb: &str) -> Result<Vec<Task>, Error> {
    if tasks.len() > count as usize {
        return Err(malformed(format!(
            "{verb} claimed {} tasks, more than the {count} asked for",
            tasks.len()
        )));
    }
    let tasks = tasks
        .into_iter()
        .map(|t| held(t.into(), actor))
        .collect::<Result<Vec<Task>, Error>>()?;
    distinct(&tasks, verb)?;
    Ok(tasks)
}
