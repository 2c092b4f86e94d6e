//! A worker's batches from the command line: `task claim-batch` (several
//! heads of the actor's queue in one call) and `task settle-and-claim`
//! (what the actor finished, each answered on its own, and the next heads).
//! Which tasks come and whether each settles is the rules'; this module
//! only asks and reports.

use std::io::Write;

use clap::Args;
use leasehold_host::{Finished, QueueQuery, SettleAnswer, SettledAndClaimed, Task};
use serde_json::{Value, json};

use crate::answer::Answer;
use crate::commands::task::claim::LeaseArgs;
use crate::commands::task::settle::SettlementArg;
use crate::context::Context;
use crate::error::CliError;
use crate::values::format_time;

#[derive(Debug, Args)]
pub struct ClaimBatch {
    #[arg(long, value_name = "A")]
    actor: String,
    /// The actor's roles (repeat, or list several after one --role)
    #[arg(long = "role", value_name = "R", num_args = 1..)]
    roles: Vec<String>,
    /// How many tasks to claim at most (1–100)
    #[arg(long, value_name = "N", default_value_t = 10)]
    count: u32,
    #[command(flatten)]
    lease: LeaseArgs,
}

impl ClaimBatch {
    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        let query = query(&self.actor, &self.roles);
        let tasks = cx
            .tenant()?
            .claim_batch(&query, self.lease.lease(), self.count)?;
        let answer = Batch {
            actor: &self.actor,
            settled: None,
            claimed: tasks,
        };
        cx.answer(&answer, out)
    }
}

#[derive(Debug, Args)]
pub struct SettleAndClaim {
    #[arg(long, value_name = "A")]
    actor: String,
    /// The actor's roles (repeat, or list several after one --role)
    #[arg(long = "role", value_name = "R", num_args = 1..)]
    roles: Vec<String>,
    /// The tasks the actor finished (repeat, or list several after one
    /// --done), each settled if the actor holds it
    #[arg(long = "done", value_name = "ID", num_args = 1..)]
    done: Vec<String>,
    /// How the finished tasks settle
    #[arg(long, value_enum, default_value = "completed")]
    settlement: SettlementArg,
    /// How many tasks to claim next at most (0–100; 0 only settles)
    #[arg(long, value_name = "N", default_value_t = 10)]
    count: u32,
    #[command(flatten)]
    lease: LeaseArgs,
}

impl SettleAndClaim {
    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        let done: Vec<Finished> = self
            .done
            .iter()
            .map(|id| Finished {
                id: id.clone(),
                settlement: self.settlement.into(),
                decision: None,
            })
            .collect();
        let query = query(&self.actor, &self.roles);
        let SettledAndClaimed { settled, claimed } =
            cx.tenant()?
                .settle_and_claim(&done, &query, self.lease.lease(), self.count)?;
        let answer = Batch {
            actor: &self.actor,
            settled: Some(self.done.iter().cloned().zip(settled).collect()),
            claimed,
        };
        cx.answer(&answer, out)
    }
}

fn query(actor: &str, roles: &[String]) -> QueueQuery {
    QueueQuery {
        roles: roles.to_vec(),
        actor: Some(actor.to_owned()),
        limit: 1,
        after: None,
    }
}

/// What a batch settled (for `settle-and-claim`) and claimed.
struct Batch<'a> {
    actor: &'a str,
    settled: Option<Vec<(String, SettleAnswer)>>,
    claimed: Vec<Task>,
}

/// One finished task's answer as JSON: `{id, answer}` and what the
/// answer carries, as `serve` words it.
fn answer_json(id: &str, a: &SettleAnswer) -> Value {
    match a {
        SettleAnswer::Settled => json!({"id": id, "answer": "settled"}),
        SettleAnswer::Already(s) => json!({"id": id, "answer": "already", "state": s}),
        SettleAnswer::NotHeld(h) => json!({"id": id, "answer": "not_held", "holder": h}),
        SettleAnswer::NotFound => json!({"id": id, "answer": "not_found"}),
        SettleAnswer::Refused(why) => json!({"id": id, "answer": "refused", "reason": why}),
    }
}

impl Answer for Batch<'_> {
    fn json(&self) -> serde_json::Result<String> {
        match &self.settled {
            None => serde_json::to_string(&self.claimed),
            Some(settled) => {
                let settled: Vec<Value> =
                    settled.iter().map(|(id, a)| answer_json(id, a)).collect();
                serde_json::to_string(&json!({"settled": settled, "claimed": self.claimed}))
            }
        }
    }

    fn human(&self) -> String {
        let mut text = String::new();
        for (id, a) in self.settled.iter().flatten() {
            let line = match a {
                SettleAnswer::Settled => format!("{id}: settled"),
                SettleAnswer::Already(s) => format!("{id}: already settled ({s}); unchanged"),
                SettleAnswer::NotHeld(Some(h)) => {
                    format!("{id}: held by {h}, not {}; unchanged", self.actor)
                }
                SettleAnswer::NotHeld(None) => {
                    format!("{id}: held by nobody (its lease lapsed?); unchanged")
                }
                SettleAnswer::NotFound => format!("{id}: no such task"),
                SettleAnswer::Refused(why) => format!("{id}: refused: {why}"),
            };
            text.push_str(&line);
            text.push('\n');
        }
        if self.claimed.is_empty() {
            text.push_str(&format!(
                "{} claimed nothing: the queue is empty for it.\n",
                self.actor
            ));
        } else {
            text.push_str(&format!(
                "{} now holds {} more:\n",
                self.actor,
                self.claimed.len()
            ));
            for t in &self.claimed {
                let until = match t.lease_until {
                    Some(at) => format!("until {}", format_time(at)),
                    None => "until released".to_owned(),
                };
                text.push_str(&format!("  {} ({}, {until})\n", t.id, t.kind));
            }
        }
        text
    }
}
