//! `leasehold demo`: a short scenario on a fresh database, narrated one step
//! at a time, that shows what Leasehold is for.
//!
//! It makes the same library calls the subcommands make, on a fixed demo
//! clock (the rules never read one), so every run reads the same except
//! who wins the two races, which are real threads racing. It must never run
//! on a database that already holds data: it would mix its story with yours.

use std::io::Write;
use std::path::Path;
use std::sync::Barrier;
use std::thread;

use leasehold_host::{
    ArmOutcome, Durability, Engine, EngineBuilder, Error, OnExpiry, Phase, Priority, QueueQuery,
    Settlement, Task, TaskState, Tenant, Timer, Timestamp,
};

use crate::context::Context;
use crate::error::CliError;
use crate::render::{count, priority, roles, table};

/// 2026-05-04T09:00:00Z, the demo clock's start.
const NINE: Timestamp = 1_777_885_200_000;
const MINUTE: i64 = 60_000;
const LEASE_MS: u32 = 30_000;

/// The demo instant `hh:mm` on the demo day.
fn at(hour: i64, minute: i64) -> Timestamp {
    NINE + ((hour - 9) * 60 + minute) * MINUTE
}

/// `09:30`, or `10:00:10` when there are seconds.
fn clock(t: Timestamp) -> String {
    let secs = (t - NINE) / 1000 + 9 * 3600;
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    if s == 0 {
        format!("{h:02}:{m:02}")
    } else {
        format!("{h:02}:{m:02}:{s:02}")
    }
}

struct Narrator<'a> {
    out: &'a mut dyn Write,
    step: u32,
}

impl Narrator<'_> {
    fn step(&mut self, text: &str) -> std::io::Result<()> {
        self.step += 1;
        // Two-wide numbers keep step 10's lines in line with step 1's.
        writeln!(self.out, "\n{:>2}. {text}", self.step)
    }

    fn line(&mut self, text: &str) -> std::io::Result<()> {
        writeln!(self.out, "    {text}")
    }

    /// The step's upshot: an arrow, then the lines of one sentence.
    fn outcome(&mut self, lines: &[&str]) -> std::io::Result<()> {
        for (i, text) in lines.iter().enumerate() {
            let lead = if i == 0 { "→" } else { " " };
            writeln!(self.out, "    {lead} {text}")?;
        }
        Ok(())
    }

    fn table(&mut self, text: &str) -> std::io::Result<()> {
        for row in text.lines() {
            self.line(row)?;
        }
        Ok(())
    }
}

fn task(id: &str, run: &str, case: &str, kind: &str, justification: &str) -> Task {
    Task {
        id: id.into(),
        run: run.into(),
        case: Some(case.into()),
        kind: kind.into(),
        justification: justification.into(),
        candidate_roles: Vec::new(),
        assignee: None,
        lease_until: None,
        priority: Priority::Normal,
        state: TaskState::Open,
        on_expiry: OnExpiry::Deny,
        escalate_to: Vec::new(),
        excluded_actors: Vec::new(),
        created_at: NINE,
        due_at: None,
        revision: 0,
        decision: None,
        outcomes: Vec::new(),
        remind_before: Vec::new(),
        escalation: Vec::new(),
        steps_done: 0,
    }
}

fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

fn timer(run: &str, effect: &str, fire_at: Timestamp) -> Timer {
    Timer {
        run: run.into(),
        case: None,
        effect: effect.into(),
        step: 1,
        phase: Phase::Forward,
        fire_at,
    }
}

/// A claim's outcome as one phrase; errors other than refusals end the demo.
fn claim_outcome(answer: Result<Task, Error>) -> Result<String, CliError> {
    match answer {
        Ok(t) => Ok(format!("holds {}", t.id)),
        Err(e) if e.is_refusal() => Ok(e.to_string()),
        Err(e) => Err(e.into()),
    }
}

fn ids(tasks: &[Task]) -> String {
    if tasks.is_empty() {
        return "nothing".to_owned();
    }
    tasks
        .iter()
        .map(|t| t.id.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn timer_names(timers: &[Timer]) -> String {
    if timers.is_empty() {
        return "nothing".to_owned();
    }
    timers
        .iter()
        .map(|t| format!("{}/{}", t.run, t.effect))
        .collect::<Vec<_>>()
        .join(", ")
}

fn queue_of(t: &Tenant, actor: &str, roles: &[&str]) -> Result<Vec<Task>, Error> {
    Ok(t.queue(&QueueQuery {
        roles: strings(roles),
        actor: Some(actor.into()),
        limit: 20,
        after: None,
    })?
    .tasks)
}

fn broken(what: String) -> CliError {
    CliError::Failed(format!(
        "the demo saw something the contract rules out: {what}"
    ))
}

/// Runs `f` on two threads released at the same instant.
fn race<T: Send>(
    f: impl Fn(usize) -> Result<T, Error> + Sync,
) -> Result<[Result<T, Error>; 2], CliError> {
    let start = Barrier::new(2);
    let (first, second) = thread::scope(|s| {
        let run = |i| {
            let (start, f) = (&start, &f);
            s.spawn(move || {
                start.wait();
                f(i)
            })
        };
        let (a, b) = (run(0), run(1));
        (a.join(), b.join())
    });
    match (first, second) {
        (Ok(a), Ok(b)) => Ok([a, b]),
        _ => Err(CliError::Failed("a demo thread panicked".into())),
    }
}

/// Opens the database the demo may use: a temporary one, or a path named
/// with `--db` that holds nothing yet. The temporary folder must outlive
/// the engine, so it is handed back.
fn fresh_engine(
    db: Option<&Path>,
    engine: EngineBuilder,
) -> Result<(Engine, Option<tempfile::TempDir>, String), CliError> {
    if let Some(path) = db {
        let used = std::fs::metadata(path)
            .map(|m| m.len() > 0)
            .unwrap_or(false);
        if used {
            return Err(CliError::Input(format!(
                "--db {}: the demo needs a fresh database, and this file already exists; \
                 name a new file or leave out --db",
                path.display()
            )));
        }
        let engine = engine.open(path)?;
        return Ok((
            engine,
            None,
            format!("a new database at {}", path.display()),
        ));
    }
    let dir = tempfile::tempdir()
        .map_err(|e| CliError::Failed(format!("cannot make a temporary folder: {e}")))?;
    // A throwaway database: atomic commits without an fsync each.
    let engine = engine
        .durability(Durability::None)
        .open(dir.path().join("demo.redb"))?;
    Ok((
        engine,
        Some(dir),
        "a fresh database in a temporary file".to_owned(),
    ))
}

/// Runs the demo, narrating on `out`.
pub fn run(cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
    narrate(cx, out).map(|()| 0)
}

fn narrate(cx: &Context, out: &mut dyn Write) -> Result<(), CliError> {
    if cx.json() {
        return Err(CliError::Input(
            "--json: demo narrates for a person and has no JSON form".into(),
        ));
    }
    let (engine, _temporary, place) = fresh_engine(cx.globals().db.as_deref(), cx.builder())?;
    let t = engine.tenant(cx.tenant_name())?;
    let mut n = Narrator { out, step: 0 };

    writeln!(
        n.out,
        "Leasehold demo: tenant {:?}, {place}.\n\
         The demo clock starts at 09:00 UTC on 2026-05-04. The rules never read a clock;\n\
         every call that needs the time is handed it.",
        cx.tenant_name()
    )?;

    // 1. Tasks with roles and a four-eyes exclusion.
    let mut pay_1001 = task(
        "pay-1001",
        "invoice-1001",
        "acme",
        "approve-payment",
        r#"{"invoice":"INV-1001","amount_eur":12400,"raised_by":"alice"}"#,
    );
    pay_1001.candidate_roles = strings(&["approver"]);
    pay_1001.excluded_actors = strings(&["alice"]);
    pay_1001.priority = Priority::High;
    pay_1001.due_at = Some(at(9, 30));
    let mut pay_1002 = task(
        "pay-1002",
        "invoice-1002",
        "acme",
        "approve-payment",
        r#"{"invoice":"INV-1002","amount_eur":98000,"raised_by":"bob"}"#,
    );
    pay_1002.candidate_roles = strings(&["approver"]);
    pay_1002.excluded_actors = strings(&["bob"]);
    pay_1002.priority = Priority::Urgent;
    pay_1002.created_at = at(9, 1);
    let mut kyc_77 = task(
        "kyc-77",
        "onboarding-77",
        "globex",
        "review-documents",
        r#"{"customer":"Globex Ltd","documents":3}"#,
    );
    kyc_77.candidate_roles = strings(&["compliance"]);
    kyc_77.due_at = Some(at(9, 45));
    kyc_77.on_expiry = OnExpiry::Escalate;
    kyc_77.escalate_to = strings(&["compliance-lead"]);
    kyc_77.created_at = at(9, 2);
    let mut note_5 = task(
        "note-5",
        "policy-5",
        "staff",
        "acknowledge-policy",
        r#"{"policy":"expenses-2026"}"#,
    );
    note_5.priority = Priority::Low;
    note_5.created_at = at(9, 3);

    n.step("Two workflows open four tasks. Each says who may decide it.")?;
    let opened = [pay_1001, pay_1002, kyc_77, note_5];
    let mut rows = Vec::new();
    for task in &opened {
        let stored = t.open(task)?;
        rows.push(vec![
            stored.id.clone(),
            priority(stored.priority).to_owned(),
            stored.kind.clone(),
            roles(&stored.candidate_roles),
            if stored.excluded_actors.is_empty() {
                "-".to_owned()
            } else {
                format!("not {}", stored.excluded_actors.join(", "))
            },
            stored.due_at.map_or_else(|| "-".to_owned(), clock),
        ]);
    }
    n.table(&table(
        &["TASK", "PRIORITY", "KIND", "OFFERED TO", "FOUR EYES", "DUE"],
        rows,
    ))?;
    n.outcome(&["alice raised INV-1001 and bob raised INV-1002: neither may approve their own."])?;

    // 2. The queue in priority order, never offering what a claim refuses.
    n.step("erin (approver, compliance) and alice (approver) open their queues.")?;
    let erin = queue_of(&t, "erin", &["approver", "compliance"])?;
    n.line(&format!("erin  → {}", ids(&erin)))?;
    let alice = queue_of(&t, "alice", &["approver"])?;
    n.line(&format!("alice → {}", ids(&alice)))?;
    n.outcome(&[
        "Urgent first, then high, normal, low. alice is never offered pay-1001:",
        "the queue does not show what a claim would refuse.",
    ])?;

    // 3. The claim ladder: eligibility before availability.
    n.step("bob claims pay-1001; then three others try while he holds it.")?;
    let bob = t.claim("pay-1001", "bob", &["approver"], None)?;
    n.line(&format!("bob   (approver) → holds {}", bob.id))?;
    for (actor, role) in [
        ("alice", "approver"),
        ("dave", "clerk"),
        ("carol", "approver"),
    ] {
        let said = claim_outcome(t.claim("pay-1001", actor, &[role], None))?;
        n.line(&format!(
            "{actor:<5} ({role}){} → {said}",
            " ".repeat(8 - role.len())
        ))?;
    }
    n.outcome(&[
        "alice hears that she is barred, not that bob is busy: she need not wait for",
        "a task she may never take. Only carol's refusal is worth retrying.",
    ])?;

    // 4. A real race: two threads, one winner.
    n.step("carol and dan, both approvers, claim pay-1002 at the same instant.")?;
    let claimants = ["carol", "dan"];
    let answers = race(|i| t.claim("pay-1002", claimants[i], &["approver"], None))?;
    let winners = answers.iter().filter(|a| a.is_ok()).count();
    let mut said = Vec::new();
    for answer in answers {
        said.push(claim_outcome(answer)?);
    }
    for (actor, said) in claimants.iter().zip(&said) {
        n.line(&format!("{actor:<5} → {said}"))?;
    }
    if winners != 1 {
        return Err(broken(format!("the claim race had {winners} winners")));
    }
    n.outcome(&["Exactly one winner; the other is told who holds the task."])?;

    // 5. Settlement is compare-and-set: the first decision stands.
    n.step("bob approves pay-1001; at 09:31 an expiry job tries to expire it too.")?;
    let decided = t.settle("pay-1001", Settlement::Completed, Some("bob"))?;
    let expired = t.settle("pay-1001", Settlement::Expired, None)?;
    n.line(&format!("settle completed → {decided}"))?;
    n.line(&format!("settle expired   → {expired}"))?;
    n.outcome(&["The loser of a decision/expiry race never overwrites the winner."])?;

    // 6. Escalation widens the audience.
    let now = at(9, 50);
    n.step(&format!(
        "At {} the overdue scan runs; frank (compliance-lead) checks his queue.",
        clock(now)
    ))?;
    let overdue = t.overdue(now, 20)?;
    n.line(&format!("overdue      → {}", ids(&overdue)))?;
    n.line(&format!(
        "frank        → {}",
        ids(&queue_of(&t, "frank", &["compliance-lead"])?)
    ))?;
    let escalated = t.escalate("kyc-77")?;
    n.line(&format!(
        "escalate kyc-77 → {}, offered to {}",
        escalated.state,
        roles(&escalated.candidate_roles)
    ))?;
    n.line(&format!(
        "frank        → {}",
        ids(&queue_of(&t, "frank", &["compliance-lead"])?)
    ))?;
    n.line(&format!("overdue      → {}", ids(&t.overdue(now, 20)?)))?;
    n.outcome(&[
        "kyc-77 was due at 09:45 with the policy escalate: its audience widened to",
        "compliance-lead, and an escalated task never returns to the overdue scan.",
    ])?;

    // 7. Timers: first arming wins.
    n.step(&format!("At {} the workflows arm four timers.", clock(now)))?;
    let timers = [
        timer("invoice-1002", "remind-approver", at(9, 55)),
        timer("onboarding-77", "chase-documents", at(9, 58)),
        timer("policy-5", "nudge", at(10, 0)),
        timer("invoice-1002", "payment-deadline", at(12, 0)),
    ];
    for timer in &timers {
        let outcome = t.arm(timer)?;
        n.line(&format!(
            "{:<31} fires {} → {}",
            format!("{}/{}", timer.run, timer.effect),
            clock(timer.fire_at),
            arm_word(outcome)
        ))?;
    }
    let again = t.arm(&timer("invoice-1002", "remind-approver", at(11, 0)))?;
    n.line(&format!(
        "{:<31} fires 11:00 → {}",
        "invoice-1002/remind-approver",
        arm_word(again)
    ))?;
    n.outcome(&["Re-arming changes nothing: a claimed timer must not move under its claimer."])?;

    // 8. Two sweepers, no double delivery.
    let now = at(10, 0);
    n.step(&format!(
        "At {} two sweepers wake at once; each claims up to 2 due timers for 30s.",
        clock(now)
    ))?;
    let swept = race(|_| t.claim_due(now, 2, LEASE_MS))?;
    let mut delivered = Vec::new();
    for (i, answer) in swept.into_iter().enumerate() {
        let got = answer?;
        n.line(&format!("sweeper-{} → {}", i + 1, timer_names(&got)))?;
        delivered.extend(got);
    }
    let mut names: Vec<String> = delivered
        .iter()
        .map(|t| format!("{}/{}", t.run, t.effect))
        .collect();
    names.sort();
    names.dedup();
    if names.len() != delivered.len() || delivered.len() != 3 {
        return Err(broken(format!(
            "two sweepers delivered {} timers, {} distinct, of 3 due",
            delivered.len(),
            names.len()
        )));
    }
    let later = now + 10_000;
    let third = t.claim_due(later, 10, LEASE_MS)?;
    n.line(&format!(
        "sweeper-3 at {} → {}",
        clock(later),
        timer_names(&third)
    ))?;
    for timer in &delivered {
        t.disarm(&timer.run, &timer.effect)?;
    }
    let next = t.next_due()?;
    let next = next.map_or_else(|| "never".to_owned(), clock);
    n.outcome(&[
        "Three due timers, each delivered exactly once; the leases keep a third",
        &format!("sweeper off them. Once they are disarmed, the next timer is due at {next}."),
    ])?;

    // 9. Sealing a run retires everything it left behind, in one transaction.
    n.step("INV-1002 is cancelled: run invoice-1002 is sealed, naming the task it awaits.")?;
    let sealed = t.seal("invoice-1002", &["pay-1002"])?;
    n.line(&format!(
        "seal invoice-1002 → {} retired, {} withdrawn",
        count(u64::from(sealed.timers_disarmed), "timer", "timers"),
        count(u64::from(sealed.tasks_withdrawn), "task", "tasks")
    ))?;
    let late = t.arm(&timer("invoice-1002", "escalate-to-cfo", at(13, 0)))?;
    n.line(&format!(
        "arm invoice-1002/escalate-to-cfo → {}",
        arm_word(late)
    ))?;
    let state = t
        .get("pay-1002")?
        .map_or_else(|| "missing".to_owned(), |t| t.state.to_string());
    n.outcome(&[
        &format!("pay-1002 is {state}. One transaction did it all, so no crash can leave"),
        "a sealed run with live timers or offered tasks.",
    ])?;

    // 10. Where things stand.
    n.step("Where things stand.")?;
    let discrepancies = t.check()?;
    n.line(&format!(
        "pending tasks {}, armed timers {}, consistency check: {}",
        t.open_count()?,
        t.pending_count()?,
        if discrepancies.is_empty() {
            "clean".to_owned()
        } else {
            count(discrepancies.len() as u64, "discrepancy", "discrepancies")
        }
    ))?;
    if !discrepancies.is_empty() {
        return Err(broken("the consistency check found discrepancies".into()));
    }
    writeln!(
        n.out,
        "\nNext: `leasehold --help`, or keep a database with `leasehold --db demo.redb demo`\n\
         and look around: `leasehold --db demo.redb for-case acme`."
    )?;
    Ok(())
}

fn arm_word(outcome: ArmOutcome) -> &'static str {
    match outcome {
        ArmOutcome::Armed => "armed",
        ArmOutcome::AlreadyArmed => "already armed",
        ArmOutcome::RunSealed => "run sealed",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_demo_clock_starts_at_nine_utc() {
        assert_eq!(crate::values::format_time(NINE), "2026-05-04T09:00:00Z");
        assert_eq!(clock(at(12, 0)), "12:00");
        assert_eq!(clock(at(10, 0) + 10_000), "10:00:10");
    }
}
