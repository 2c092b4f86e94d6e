//! The scenario suite (`tests/scenarios/*.json`) through the component on
//! any backend. The JavaScript and Python hosts run the same files, so a
//! host or a backend that answers differently fails the same step; the
//! format is in `tests/scenarios/README.md`. It owns reading and running a
//! scenario; it must never change what a scenario expects, and never reach
//! the backend except through the storage trait.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::clock::ManualClock;
use crate::config::Limits;
use crate::engine::{Engine, GUEST_COMPONENT};
use crate::error::{Error, Refusal};
use crate::storage::backend::{Backend, Mode, Write};
use crate::tenant::Tenant;
use crate::tenant::timers::Rescheduled;
use crate::testkit::job_values::{action_arg, job_value};
use crate::testkit::report::{Failure, panic_text};
use crate::testkit::schedule_values::{schedule_value, spec_arg};
use crate::testkit::search_values as search;
use crate::testkit::subscription_values::{
    attempts_arg, bytes_arg, filter_arg, page_value, state_arg, subscription_value,
};
use leasehold_guest::model::{
    ArmOutcome, Decision, Finished, Guard, KindDefinition, Lease, OnExpiry, OutcomeRule, Priority,
    QueueQuery, SettleAnswer, SettledAndClaimed, Settlement, StoreError, Task, TaskChanges, Timer,
};

/// The tenant a step runs as unless it names another.
const DEFAULT_TENANT: &str = "acme";

/// One scenario file, by name, as the crate was built with it.
macro_rules! scenario {
    ($name:literal) => {
        (
            $name,
            include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../tests/scenarios/",
                $name,
                ".json"
            )),
        )
    };
}

/// Every scenario file, by name, as the crate was built with it.
pub const SCENARIOS: &[(&str, &str)] = &[
    scenario!("assign-and-delegate"),
    scenario!("claim-ladder"),
    scenario!("decisions"),
    scenario!("escalation"),
    scenario!("expire-overdue"),
    scenario!("for-case"),
    scenario!("guards-and-notes"),
    scenario!("held"),
    scenario!("history-and-feed"),
    scenario!("kinds"),
    scenario!("leased-claims"),
    scenario!("nothing-committed"),
    scenario!("open-and-get"),
    scenario!("overdue"),
    scenario!("queue-order-and-paging"),
    scenario!("release-and-take-over"),
    scenario!("reminders"),
    scenario!("schedules"),
    scenario!("jobs"),
    scenario!("search"),
    scenario!("seal"),
    scenario!("settle-and-withdraw"),
    scenario!("subscriptions"),
    scenario!("tenancy"),
    scenario!("timers"),
    scenario!("timer-moves"),
    scenario!("update"),
    scenario!("worker"),
];

/// The SHA-256 of the component the suite runs, in hex: every host's
/// runner prints it, so a run shows that all of them tested the same bytes.
pub fn component_sha256() -> String {
    Sha256::digest(GUEST_COMPONENT)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// One scenario's store: an engine over the backend, the backend itself
/// for the raw steps, which go around the component, and the clock the
/// engine records calls at, which `clock` steps set.
struct Db<B: Backend> {
    backend: Arc<B>,
    engine: Engine,
    clock: Arc<ManualClock>,
}

impl<B: Backend> Db<B> {
    fn new(backend: B) -> Result<Db<B>, Failure> {
        let backend = Arc::new(backend);
        let clock = Arc::new(ManualClock::new(0));
        let engine = Engine::builder()
            .clock(clock.clone())
            .backend(backend.clone())
            .map_err(|e| Failure::new("scenarios", format!("no engine on the backend: {e}")))?;
        Ok(Db {
            backend,
            engine,
            clock,
        })
    }

    fn tenant(&self, name: &str) -> Result<Tenant, String> {
        self.engine
            .tenant(name)
            .map_err(|e| format!("no tenant {name}: {e}"))
    }

    /// Puts `value` under `key` in `tenant`, around the component.
    fn raw_put(&self, tenant: &str, key: &[u8], value: &[u8]) -> Result<(), String> {
        let txn = self
            .backend
            .begin(tenant, Mode::Write, Limits::default().lock_wait)
            .map_err(|e| e.to_string())?;
        txn.commit(vec![Write::Put(key.to_vec(), value.to_vec())])
            .and_then(|pending| pending.wait())
            .map_err(|e| e.to_string())
    }

    /// Every key and value of `tenant`, read around the component. A page
    /// that does not climb from where it was asked to start is an error, so
    /// a backend that ignores a scan's start cannot keep this reading.
    fn keyspace(&self, tenant: &str) -> Result<BTreeMap<Vec<u8>, Vec<u8>>, String> {
        const PAGE: u32 = 1024;
        const MOST_PAGES: usize = 1024;
        let mut txn = self
            .backend
            .begin(tenant, Mode::Read, Duration::from_secs(5))
            .map_err(|e| e.to_string())?;
        let mut out = BTreeMap::new();
        let mut start = Vec::new();
        for _ in 0..MOST_PAGES {
            let (page, _) = txn
                .scan(&start, None, PAGE, false, usize::MAX)
                .map_err(|e| e.to_string())?;
            let climbs = page.first().is_none_or(|(k, _)| *k >= start)
                && page.windows(2).all(|w| w[0].0 < w[1].0);
            if !climbs || page.len() > PAGE as usize {
                return Err(format!(
                    "a scan from {start:?} limited to {PAGE} answered {} keys, not all at or after its start and climbing",
                    page.len()
                ));
            }
            let done = page.len() < PAGE as usize;
            if let Some((last, _)) = page.last() {
                start = last.clone();
                start.push(0);
            }
            out.extend(page);
            if done {
                return Ok(out);
            }
        }
        Err(format!(
            "the tenant holds more than {MOST_PAGES} pages of {PAGE} keys"
        ))
    }
}

// ---- canonical JSON ------------------------------------------------------------------

/// Renames every object key, recursively.
fn rename_keys(v: Value, from: char, to: char) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .map(|(k, v)| (k.replace(from, &to.to_string()), rename_keys(v, from, to)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(|v| rename_keys(v, from, to)).collect()),
        other => other,
    }
}

/// A model value as the scenario files spell it: WIT names, kebab-case.
fn canonical<T: serde::Serialize>(value: &T) -> Value {
    rename_keys(
        serde_json::to_value(value).expect("model values serialize"),
        '_',
        '-',
    )
}

/// Fills the fields a scenario may leave out (the README lists them).
fn with_defaults(given: &Value, defaults: Value) -> Value {
    let mut out = defaults;
    if let (Value::Object(out), Value::Object(given)) = (&mut out, given) {
        for (k, v) in given {
            out.insert(k.clone(), v.clone());
        }
    }
    out
}

fn task_arg(v: &Value) -> Task {
    let full = with_defaults(
        v,
        json!({
            "case": null, "justification": "{}", "candidate-roles": [], "assignee": null, "lease-until": null,
            "priority": "normal", "state": "open", "on-expiry": "deny", "escalate-to": [],
            "excluded-actors": [], "created-at": 0, "due-at": null,
        }),
    );
    serde_json::from_value(rename_keys(full, '-', '_')).expect("a task argument")
}

fn timer_arg(v: &Value) -> Timer {
    let full = with_defaults(v, json!({"case": null, "step": 0, "phase": "forward"}));
    serde_json::from_value(rename_keys(full, '-', '_')).expect("a timer argument")
}

fn store_error(e: &StoreError) -> Value {
    if let StoreError::Stale(r) = e {
        return json!({ "stale": r });
    }
    let (case, text) = match e {
        StoreError::NotFound(t) => ("not-found", t),
        StoreError::Invalid(t) => ("invalid", t),
        StoreError::Corrupt(t) => ("corrupt", t),
        StoreError::Storage(t) => ("storage", t),
        StoreError::NewerLayout(t) => ("newer-layout", t),
        StoreError::Stale(_) => unreachable!("answered above"),
    };
    json!({ case: text })
}

/// An error as the WIT variant the verb answers: a claim verb's store error
/// sits inside `claim-error.store`.
fn error_variant(e: &Error, claim_verb: bool) -> Value {
    match e {
        Error::Refused(r) => match r {
            Refusal::NotFound(t) => json!({"not-found": t}),
            Refusal::Excluded(t) => json!({"excluded": t}),
            Refusal::WrongRole(t) => json!({"wrong-role": t}),
            Refusal::NotPending(s) => json!({"not-pending": s.as_str()}),
            Refusal::AlreadyClaimed(t) => json!({"already-claimed": t}),
            Refusal::NotHeld(t) => json!({"not-held": t}),
            Refusal::Stale(r) => json!({ "stale": r }),
        },
        Error::Store(s) if claim_verb => json!({"store": store_error(s)}),
        Error::Store(s) => store_error(s),
        other => json!({"host": other.to_string()}),
    }
}

/// `reschedule`, whose refusals are the WIT's `timer-error` cases (its
/// store errors nested under `store`, as a claim verb's are).
fn reschedule(t: &Tenant, a: &Args) -> Result<Value, Value> {
    let take_back =
        a.0.get("take-back")
            .and_then(Value::as_bool)
            .unwrap_or(false);
    match t.reschedule(a.str("run"), a.str("effect"), a.int("fire-at"), take_back) {
        Ok(Rescheduled::Moved(info)) => Ok(canonical(&info)),
        Ok(Rescheduled::NotFound) => Err(json!({"not-found": null})),
        Ok(Rescheduled::Held(until)) => Err(json!({ "held": until })),
        Ok(Rescheduled::RunSealed) => Err(json!({"run-sealed": null})),
        Err(e) => Err(error_variant(&e, true)),
    }
}

// ---- one call ------------------------------------------------------------------------

struct Args<'a>(&'a Map<String, Value>);

impl Args<'_> {
    fn get(&self, name: &str) -> &Value {
        self.0
            .get(name)
            .unwrap_or_else(|| panic!("argument {name} is missing"))
    }
    fn str(&self, name: &str) -> &str {
        self.get(name)
            .as_str()
            .unwrap_or_else(|| panic!("{name} is a string"))
    }
    fn opt_str(&self, name: &str) -> Option<&str> {
        self.0.get(name).and_then(Value::as_str)
    }
    fn strs(&self, name: &str) -> Vec<&str> {
        self.get(name)
            .as_array()
            .unwrap_or_else(|| panic!("{name} is a list"))
            .iter()
            .map(|v| v.as_str().expect("a list of strings"))
            .collect()
    }
    fn int(&self, name: &str) -> i64 {
        self.get(name)
            .as_i64()
            .unwrap_or_else(|| panic!("{name} is an integer"))
    }
    /// An optional `lease` argument: `{"now": T, "lease-ms": N}`.
    fn lease(&self) -> Option<Lease> {
        self.0.get("lease").filter(|l| !l.is_null()).map(|l| Lease {
            now: l["now"].as_i64().expect("lease.now"),
            lease_ms: l["lease-ms"]
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .expect("lease.lease-ms"),
        })
    }
    fn u32(&self, name: &str) -> u32 {
        u32::try_from(self.int(name)).unwrap_or_else(|_| panic!("{name} is a u32"))
    }
    fn opt_int(&self, name: &str) -> Option<i64> {
        self.0
            .get(name)
            .filter(|v| !v.is_null())
            .map(|v| v.as_i64().unwrap_or_else(|| panic!("{name} is an integer")))
    }
    fn opt_u64(&self, name: &str) -> Option<u64> {
        self.0
            .get(name)
            .filter(|v| !v.is_null())
            .map(|v| v.as_u64().unwrap_or_else(|| panic!("{name} is a u64")))
    }
}

/// A `queue-query` argument; `limit` defaults to 1 (for `claim-next`).
fn query_arg(q: &Value) -> QueueQuery {
    QueueQuery {
        roles: serde_json::from_value(q["roles"].clone()).expect("roles"),
        actor: q["actor"].as_str().map(str::to_owned),
        limit: q["limit"]
            .as_u64()
            .map_or(1, |n| u32::try_from(n).expect("limit is a u32")),
        after: q["after"].as_str().map(str::to_owned),
    }
}

/// A list of outcome rules, as a task, a change or a kind spells them.
fn outcomes_arg(v: &Value) -> Vec<OutcomeRule> {
    serde_json::from_value(rename_keys(v.clone(), '-', '_')).expect("outcome rules")
}

/// `update`'s changes: a key left out is unchanged; `"due-at": null`
/// clears the due time (so not serde's reading, where null is none).
fn changes_arg(v: &Value) -> TaskChanges {
    let m = v.as_object().expect("changes is an object");
    let field = |k: &str| m.get(k).cloned();
    let parse = |k: &str| field(k).map(|x| rename_keys(x, '-', '_'));
    TaskChanges {
        due_at: field("due-at").map(|d| d.as_i64()),
        priority: parse("priority")
            .map(|x| serde_json::from_value::<Priority>(x).expect("changes.priority")),
        candidate_roles: parse("candidate-roles")
            .map(|x| serde_json::from_value(x).expect("changes.candidate-roles")),
        escalate_to: parse("escalate-to")
            .map(|x| serde_json::from_value(x).expect("changes.escalate-to")),
        excluded_actors: parse("excluded-actors")
            .map(|x| serde_json::from_value(x).expect("changes.excluded-actors")),
        on_expiry: parse("on-expiry")
            .map(|x| serde_json::from_value::<OnExpiry>(x).expect("changes.on-expiry")),
        outcomes: field("outcomes").map(|x| outcomes_arg(&x)),
        remind_before: parse("remind-before")
            .map(|x| serde_json::from_value(x).expect("changes.remind-before")),
        escalation: parse("escalation")
            .map(|x| serde_json::from_value(x).expect("changes.escalation")),
    }
}

fn decision_arg(v: &Value) -> Decision {
    serde_json::from_value(v.clone()).expect("a decision")
}

/// `settle-and-claim`'s `done`: each `{"id", "settlement", "decision"?}`.
fn finished_arg(v: &Value) -> Vec<Finished> {
    v.as_array()
        .expect("done is a list")
        .iter()
        .map(|f| Finished {
            id: f["id"].as_str().expect("done[].id").to_owned(),
            settlement: settlement(f["settlement"].as_str().expect("done[].settlement")),
            decision: f.get("decision").filter(|d| !d.is_null()).map(decision_arg),
        })
        .collect()
}

/// `settle-and-claim`'s answer, each settle answer a `{CASE: PAYLOAD}`.
fn settled_and_claimed(x: &SettledAndClaimed) -> Value {
    let settled: Vec<Value> = x
        .settled
        .iter()
        .map(|a| match a {
            SettleAnswer::Settled => json!({"settled": null}),
            SettleAnswer::Already(state) => json!({"already": canonical(state)}),
            SettleAnswer::NotHeld(holder) => json!({"not-held": holder}),
            SettleAnswer::NotFound => json!({"not-found": null}),
            SettleAnswer::Refused(why) => json!({"refused": why}),
        })
        .collect();
    json!({"settled": settled, "claimed": canonical(&x.claimed)})
}

fn guard_arg(v: &Value) -> Guard {
    serde_json::from_value(v.clone()).expect("a guard")
}

fn kind_arg(v: &Value) -> KindDefinition {
    let full = with_defaults(v, json!({"outcomes": [], "revision": 0}));
    KindDefinition {
        kind: full["kind"].as_str().expect("definition.kind").to_owned(),
        outcomes: outcomes_arg(&full["outcomes"]),
        revision: full["revision"].as_u64().expect("definition.revision"),
    }
}

fn settlement(text: &str) -> Settlement {
    serde_json::from_value(json!(text)).expect("a settlement")
}

fn arm_outcome(o: ArmOutcome) -> Value {
    json!(match o {
        ArmOutcome::Armed => "armed",
        ArmOutcome::AlreadyArmed => "already-armed",
        ArmOutcome::RunSealed => "run-sealed",
    })
}

/// Makes one call and answers `Ok(answer)` or `Err(variant)`, canonical.
fn call(t: &Tenant, verb: &str, a: &Args) -> Result<Value, Value> {
    let claim_verb = matches!(
        verb,
        "claim"
            | "release"
            | "take-over"
            | "renew"
            | "settle"
            | "escalate"
            | "update"
            | "assign"
            | "unassign"
            | "delegate"
            | "note"
    );
    // A `guard` argument guards the call, as `Tenant::guarded` does.
    let guarded;
    let t = match a.0.get("guard").filter(|g| !g.is_null()) {
        Some(g) => {
            guarded = t.guarded(guard_arg(g));
            &guarded
        }
        None => t,
    };
    let answer: Result<Value, Error> = match verb {
        "open" => t.open(&task_arg(a.get("task"))).map(|x| canonical(&x)),
        "get" => t.get(a.str("id")).map(|x| canonical(&x)),
        "claim" => t
            .claim(a.str("id"), a.str("actor"), &a.strs("roles"), a.lease())
            .map(|x| canonical(&x)),
        "renew" => t
            .renew(a.str("id"), a.str("actor"), a.int("now"), a.u32("lease-ms"))
            .map(|x| canonical(&x)),
        "reclaim-lapsed" => t
            .reclaim_lapsed(a.int("now"), a.u32("limit"))
            .map(|x| canonical(&x)),
        "expire-overdue" => t
            .expire_overdue(a.int("now"), a.u32("limit"))
            .map(|x| canonical(&x)),
        "claim-next" => t
            .claim_next(&query_arg(a.get("query")), a.lease())
            .map(|x| canonical(&x)),
        "claim-batch" => t
            .claim_batch(&query_arg(a.get("query")), a.lease(), a.u32("count"))
            .map(|x| canonical(&x)),
        "settle-and-claim" => t
            .settle_and_claim(
                &finished_arg(a.get("done")),
                &query_arg(a.get("query")),
                a.lease(),
                a.u32("count"),
            )
            .map(|x| settled_and_claimed(&x)),
        "leased-count" => t.leased_count().map(|x| json!(x)),
        "next-lease-end" => t.next_lease_end().map(|x| json!(x)),
        "next-wake" => t.next_wake().map(|x| json!(x)),
        "release" => t.release(a.str("id"), a.str("actor")).map(|()| Value::Null),
        "take-over" => t
            .take_over(
                a.str("id"),
                a.str("from"),
                a.str("actor"),
                &a.strs("roles"),
                a.lease(),
            )
            .map(|x| canonical(&x)),
        "settle" => t
            .decide(
                a.str("id"),
                settlement(a.str("settlement")),
                a.opt_str("holder"),
                a.0.get("decision")
                    .filter(|d| !d.is_null())
                    .map(decision_arg)
                    .as_ref(),
            )
            .map(|x| json!(x)),
        "withdraw-run" => t
            .withdraw_run(a.str("run"), &a.strs("awaited"))
            .map(|x| json!(x)),
        "escalate" => t.escalate(a.str("id")).map(|x| canonical(&x)),
        "queue" => t.queue(&query_arg(a.get("query"))).map(|x| canonical(&x)),
        "for-case" => t
            .for_case(a.str("case"), a.u32("limit"), a.opt_str("after"))
            .map(|x| canonical(&x)),
        "held" => t
            .held(a.str("actor"), a.u32("limit"), a.opt_str("after"))
            .map(|x| canonical(&x)),
        "update" => t
            .update(a.str("id"), a.opt_str("by"), &changes_arg(a.get("changes")))
            .map(|x| canonical(&x)),
        "assign" => t
            .assign(
                a.str("id"),
                a.str("to"),
                &a.strs("roles"),
                a.lease(),
                a.0.get("override-roles")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
                a.opt_str("by"),
            )
            .map(|x| canonical(&x)),
        "unassign" => t
            .unassign(a.str("id"), a.opt_str("by"))
            .map(|x| canonical(&x)),
        "delegate" => t
            .delegate(
                a.str("id"),
                a.str("from"),
                a.str("to"),
                &a.strs("roles"),
                a.lease(),
            )
            .map(|x| canonical(&x)),
        "note" => t
            .note(a.str("id"), a.str("actor"), a.str("text"))
            .map(|x| canonical(&x)),
        "define-kind" => t
            .define_kind(&kind_arg(a.get("definition")), a.opt_u64("expected"))
            .map(|x| canonical(&x)),
        "get-kind" => t.get_kind(a.str("kind")).map(|x| canonical(&x)),
        "list-kinds" => t
            .list_kinds(a.u32("limit"), a.opt_str("after"))
            .map(|x| canonical(&x)),
        "remove-kind" => t.remove_kind(a.str("kind")).map(|x| json!(x)),
        "open-count" => t.open_count().map(|x| json!(x)),
        "overdue" => t
            .overdue(a.int("now"), a.u32("limit"))
            .map(|x| canonical(&x)),
        "arm" => t.arm(&timer_arg(a.get("timer"))).map(arm_outcome),
        "claim-due" => t
            .claim_due(a.int("now"), a.u32("limit"), a.u32("lease-ms"))
            .map(|x| canonical(&x)),
        "disarm" => t.disarm(a.str("run"), a.str("effect")).map(|x| json!(x)),
        "disarm-run" => t.disarm_run(a.str("run")).map(|x| json!(x)),
        "pending-count" => t.pending_count().map(|x| json!(x)),
        "next-due" => t.next_due().map(|x| json!(x)),
        "reschedule" => return reschedule(t, a),
        "timers-of" => t
            .timers_of(a.str("run"), a.u32("limit"), a.opt_str("after"))
            .map(|x| canonical(&x)),
        "due-between" => t
            .due_between(
                a.int("from"),
                a.int("to"),
                a.u32("limit"),
                a.opt_str("after"),
            )
            .map(|x| canonical(&x)),
        "seal" => t
            .seal(a.str("run"), &a.strs("awaited"))
            .map(|x| canonical(&x)),
        "is-sealed" => t.is_sealed(a.str("run")).map(|x| json!(x)),
        "check" => t.check().map(|x| canonical(&x)),
        "history" => t
            .history(a.str("id"), a.opt_u64("after"), a.u32("limit"))
            .map(|x| canonical(&x)),
        "entry-place" => t
            .entry_place(a.str("id"), a.opt_u64("seq").expect("seq"))
            .map(|x| canonical(&x)),
        "feed" => t
            .feed(a.opt_str("after"), a.u32("limit"))
            .map(|x| canonical(&x)),
        "trim" => t
            .trim(a.opt_int("before"), a.opt_u64("keep"), a.u32("limit"))
            .map(|x| canonical(&x)),
        "add-schedule" => t
            .add_schedule(&spec_arg(a.get("spec")), a.int("now"))
            .map(|x| schedule_value(&x)),
        "remove-schedule" => t.remove_schedule(a.str("id")).map(|x| json!(x)),
        "pause-schedule" => t
            .pause_schedule(a.str("id"), a.str("note"))
            .map(|x| schedule_value(&x)),
        "resume-schedule" => t
            .resume_schedule(a.str("id"), a.int("now"))
            .map(|x| schedule_value(&x)),
        "trigger-schedule" => t
            .trigger_schedule(a.str("id"), a.int("now"))
            .map(|x| canonical(&x)),
        "next-occurrences" => t
            .next_occurrences(a.str("id"), a.int("after"), a.u32("n"))
            .map(|x| json!(x)),
        "get-schedule" => t
            .get_schedule(a.str("id"))
            .map(|x| x.as_ref().map_or(Value::Null, schedule_value)),
        "list-schedules" => t
            .list_schedules(a.u32("limit"), a.opt_str("after"))
            .map(|p| {
                json!({
                    "schedules": p.schedules.iter().map(schedule_value).collect::<Vec<_>>(),
                    "next": p.next,
                })
            }),
        "tz-version" => t.tz_version().map(|x| json!(x)),
        "add-subscription" => t
            .add_subscription(
                a.str("id"),
                a.str("url"),
                &filter_arg(a.get("filter")),
                &bytes_arg(a.get("key")),
                a.opt_str("from"),
                a.int("now"),
            )
            .map(|x| subscription_value(&x)),
        "get-subscription" => t
            .get_subscription(a.str("id"))
            .map(|x| x.as_ref().map_or(Value::Null, subscription_value)),
        "list-subscriptions" => t
            .list_subscriptions(a.u32("limit"), a.opt_str("after"))
            .map(|p| page_value(&p)),
        "change-subscription" => t
            .change_subscription(
                a.str("id"),
                a.opt_str("url"),
                a.0.get("filter")
                    .filter(|f| !f.is_null())
                    .map(filter_arg)
                    .as_ref(),
                a.opt_u64("expected"),
            )
            .map(|x| subscription_value(&x)),
        "set-subscription-state" => t
            .set_subscription_state(
                a.str("id"),
                state_arg(a.get("state")),
                a.opt_str("note"),
                a.opt_u64("expected"),
            )
            .map(|x| subscription_value(&x)),
        "rotate-subscription-key" => t
            .rotate_subscription_key(
                a.str("id"),
                &bytes_arg(a.get("key")),
                a.int("old-until"),
                a.int("now"),
            )
            .map(|x| subscription_value(&x)),
        "remove-subscription" => t.remove_subscription(a.str("id")).map(|x| json!(x)),
        "advance-subscription" => t
            .advance_subscription(
                a.str("id"),
                a.opt_u64("revision").expect("revision"),
                a.str("position"),
            )
            .map(|x| subscription_value(&x)),
        "rewind-subscription" => t
            .rewind_subscription(a.str("id"), a.opt_str("position"))
            .map(|x| subscription_value(&x)),
        "lease-subscription" => t
            .lease_subscription(
                a.str("id"),
                a.str("holder"),
                a.int("now"),
                a.u32("lease-ms"),
            )
            .map(|x| json!(x)),
        "release-subscription" => t
            .release_subscription(a.str("id"), a.str("holder"))
            .map(|()| Value::Null),
        "search" => t
            .search(&search::query_arg(a.get("query")))
            .map(|p| search::page_value(&p, canonical)),
        "count" => t
            .count(
                &search::filter_arg(a.get("filter")),
                search::viewer_arg(a.0.get("viewer")).as_ref(),
                a.opt_str("after"),
            )
            .map(|c| search::count_value(&c)),
        "build-search-index" => t
            .build_search_index(a.u32("limit"))
            .map(search::progress_value),
        "put-view" => t
            .put_view(&search::view_arg(a.get("view")), a.opt_u64("expected"))
            .map(|v| search::view_value(&v)),
        "get-view" => t
            .get_view(a.str("name"))
            .map(|v| v.as_ref().map_or(Value::Null, search::view_value)),
        "list-views" => t
            .list_views(a.u32("limit"), a.opt_str("after"))
            .map(|vs| Value::Array(vs.iter().map(search::view_value).collect())),
        "delete-view" => t
            .delete_view(a.str("name"), a.opt_u64("expected"))
            .map(|x| json!(x)),
        "start-job" => t
            .start_job(
                a.str("id"),
                &search::filter_arg(a.get("filter")),
                &action_arg(a.get("action"), changes_arg),
                a.opt_str("by"),
                a.int("now"),
            )
            .map(|j| job_value(&j)),
        "step-job" => t.step_job(a.str("id")).map(|j| job_value(&j)),
        "cancel-job" => t.cancel_job(a.str("id")).map(|j| job_value(&j)),
        "get-job" => t
            .get_job(a.str("id"))
            .map(|j| j.as_ref().map_or(Value::Null, job_value)),
        "list-jobs" => t
            .list_jobs(a.u32("limit"), a.opt_str("after"))
            .map(|js| Value::Array(js.iter().map(job_value).collect())),
        "runnable-jobs" => t.runnable_jobs(a.u32("limit")).map(|ids| json!(ids)),
        "record-subscription-attempts" => t
            .record_subscription_attempts(a.str("id"), &attempts_arg(a.get("attempts")))
            .map(|()| Value::Null),
        other => panic!("no verb {other}"),
    };
    answer.map_err(|e| error_variant(&e, claim_verb))
}

// ---- matching ------------------------------------------------------------------------

/// The README's rule: an object matches when every key it names matches,
/// a list when it has as many elements and each matches, anything else when
/// it is equal.
fn matches(expected: &Value, actual: &Value) -> bool {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => e
            .iter()
            .all(|(k, v)| a.get(k).is_some_and(|got| matches(v, got))),
        (Value::Array(e), Value::Array(a)) => {
            e.len() == a.len() && e.iter().zip(a).all(|(e, a)| matches(e, a))
        }
        (Value::Number(e), Value::Number(a)) => match (e.as_i64(), a.as_i64()) {
            (Some(e), Some(a)) => e == a,
            _ => e.as_f64() == a.as_f64(),
        },
        _ => expected == actual,
    }
}

/// An expected error names one case; a `null` payload accepts any.
fn error_matches(expected: &Value, actual: &Value) -> bool {
    let (Some(e), Some(a)) = (expected.as_object(), actual.as_object()) else {
        return false;
    };
    let (Some((case, payload)), Some((got_case, got))) = (e.iter().next(), a.iter().next()) else {
        return false;
    };
    case == got_case
        && (payload.is_null()
            || match (payload.as_object(), got.as_object()) {
                // A nested variant (`claim-error.store`) follows the same rule.
                (Some(_), Some(_)) => error_matches(payload, got),
                _ => matches(payload, got),
            })
}

/// Replaces each `{"$var": name}` with the value saved under that name;
/// a name nothing was saved under is the error.
fn resolve(v: &Value, vars: &Map<String, Value>) -> Result<Value, String> {
    match v {
        Value::Object(m) => match (m.len(), m.get("$var").and_then(Value::as_str)) {
            (1, Some(name)) => vars.get(name).cloned().ok_or_else(|| name.to_owned()),
            _ => m
                .iter()
                .map(|(k, v)| Ok((k.clone(), resolve(v, vars)?)))
                .collect::<Result<Map<_, _>, String>>()
                .map(Value::Object),
        },
        Value::Array(a) => a
            .iter()
            .map(|v| resolve(v, vars))
            .collect::<Result<Vec<_>, String>>()
            .map(Value::Array),
        other => Ok(other.clone()),
    }
}

/// The value at a dotted path (`next`, `tasks.0.id`) of an answer, if the
/// answer has one there (a `null` there is a value).
fn at_path<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.')
        .try_fold(v, |v, part| match part.parse::<usize>() {
            Ok(i) => v.get(i),
            Err(_) => v.get(part),
        })
}

fn hex(text: &str) -> Result<Vec<u8>, String> {
    if !text.len().is_multiple_of(2) || !text.is_ascii() {
        return Err(format!("{text:?} is not hex"));
    }
    (0..text.len())
        .step_by(2)
        .map(|i| {
            u8::from_str_radix(&text[i..i + 2], 16).map_err(|_| format!("{text:?} is not hex"))
        })
        .collect()
}

/// Runs one scenario on `backend` and answers what went wrong, step by
/// step. A step that cannot run (it uses a value an earlier step's answer
/// did not hold, or the file spells it wrongly) is one of them; a step
/// that panics is the last, as the engine under it may be left half-way.
pub fn run_scenario<B: Backend>(backend: B, scenario: &Value) -> Result<(), Failure> {
    let name = scenario["name"].as_str().unwrap_or("?").to_owned();
    let db = Db::new(backend)?;
    let mut vars = Map::new();
    // Why a name a later step uses holds no value.
    let mut unsaved: BTreeMap<String, String> = BTreeMap::new();
    let mut saved: BTreeMap<String, BTreeMap<Vec<u8>, Vec<u8>>> = BTreeMap::new();
    let mut failures = Vec::new();
    let Some(steps) = scenario["steps"].as_array() else {
        return Err(Failure::new(
            "scenarios",
            format!("{name}: the file has no steps"),
        ));
    };
    for (i, step) in steps.iter().enumerate() {
        let tenant = step["tenant"].as_str().unwrap_or(DEFAULT_TENANT);
        let at = format!("step {}", i + 1);
        if let Some(verb) = step["call"].as_str() {
            let args = match resolve(&step["args"], &vars) {
                Ok(args) => args,
                Err(var) => {
                    let why = unsaved
                        .get(&var)
                        .map_or("nothing was saved under it", String::as_str);
                    failures.push(format!(
                        "{at} ({verb}): not run: it uses the value saved as {var}, but {why}"
                    ));
                    continue;
                }
            };
            let t = match db.tenant(tenant) {
                Ok(t) => t,
                Err(e) => {
                    failures.push(format!("{at} ({verb}): not run: {e}"));
                    continue;
                }
            };
            let empty = Map::new();
            let args = Args(args.as_object().unwrap_or(&empty));
            let got = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                call(&t, verb, &args)
            })) {
                Ok(got) => got,
                Err(panic) => {
                    failures.push(format!("{at} ({verb}): panicked: {}", panic_text(&*panic)));
                    break;
                }
            };
            let expected = |field: &str| step.get(field).map(|e| resolve(e, &vars)).transpose();
            let (expected_ok, expected_error) = match (expected("ok"), expected("error")) {
                (Ok(ok), Ok(error)) => (ok, error),
                (Err(var), _) | (_, Err(var)) => {
                    failures.push(format!(
                        "{at} ({verb}): its expected answer uses the value saved as {var}, which was never saved"
                    ));
                    continue;
                }
            };
            let ok = match (&got, &expected_ok, &expected_error) {
                (Ok(a), Some(e), None) => matches(e, a),
                (Err(a), None, Some(e)) => error_matches(e, a),
                (_, None, None) => true,
                _ => false,
            };
            if !ok {
                let expected = expected_ok
                    .map_or_else(|| json!({"error": expected_error}), |e| json!({"ok": e}));
                let got = match &got {
                    Ok(a) => json!({"ok": a}),
                    Err(e) => json!({"error": e}),
                };
                failures.push(format!("{at} ({verb}): expected {expected}, got {got}"));
            }
            for (var, path) in step["save"].as_object().into_iter().flatten() {
                let path = path.as_str().unwrap_or_default();
                match got.as_ref().map(|answer| at_path(answer, path)) {
                    Ok(Some(value)) => {
                        vars.insert(var.clone(), value.clone());
                        unsaved.remove(var);
                    }
                    Ok(None) => {
                        vars.remove(var);
                        unsaved.insert(var.clone(), format!("{at}'s answer held no {path}"));
                    }
                    Err(_) => {
                        vars.remove(var);
                        unsaved.insert(var.clone(), format!("{at} answered an error"));
                    }
                }
            }
        } else if let Some(clock) = step.get("clock") {
            match clock.as_i64() {
                Some(ms) => db.clock.set(ms),
                None => failures.push(format!("{at}: the clock is not an integer: {clock}")),
            }
        } else if let Some(raw) = step.get("raw-put") {
            let bytes = |field: &str| {
                raw[field]
                    .as_str()
                    .ok_or_else(|| format!("raw-put has no {field}"))
                    .and_then(hex)
            };
            let written = bytes("key").and_then(|key| {
                let value = bytes("value")?;
                db.raw_put(tenant, &key, &value)
                    .map_err(|e| format!("the raw write failed: {e}"))
            });
            if let Err(e) = written {
                failures.push(format!("{at}: {e}"));
            }
        } else if let Some(what) = step["keyspace"].as_str() {
            let now = match db.keyspace(tenant) {
                Ok(now) => now,
                Err(e) => {
                    failures.push(format!("{at}: reading the keyspace failed: {e}"));
                    continue;
                }
            };
            match what {
                "save" => {
                    saved.insert(tenant.to_owned(), now);
                }
                "unchanged" => {
                    if saved.get(tenant) != Some(&now) {
                        failures.push(format!("{at}: tenant {tenant}'s keyspace changed"));
                    }
                }
                other => failures.push(format!("{at}: no keyspace step {other:?}")),
            }
        } else {
            failures.push(format!("{at}: no call, clock, raw-put or keyspace"));
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(Failure::new(
            "scenarios",
            format!(
                "{name}: {} steps failed:\n{}",
                failures.len(),
                failures.join("\n")
            ),
        ))
    }
}

/// Runs every scenario, each on a fresh backend from `make`, and answers
/// every failure.
pub fn run_scenarios<B: Backend>(make: &dyn Fn() -> B) -> Result<(), Failure> {
    eprintln!("scenarios: component sha256 {}", component_sha256());
    // Each scenario's engine is dropped with it; this one keeps the compiled
    // component cached meanwhile.
    let _compiled = Engine::builder()
        .in_memory()
        .map_err(|e| Failure::new("scenarios", format!("no engine: {e}")))?;
    let mut failures = Vec::new();
    for (file, text) in SCENARIOS {
        let outcome = serde_json::from_str::<Value>(text)
            .map_err(|e| Failure::new("scenarios", format!("{file}.json is not JSON: {e}")))
            .and_then(|scenario| run_scenario(make(), &scenario));
        if let Err(f) = outcome {
            failures.push(f.what);
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(Failure::new("scenarios", failures.join("\n")))
    }
}
