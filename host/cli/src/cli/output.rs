//! Renders an answer two ways: sentences and tables for a person, exact JSON
//! for a script. JSON is the model types as serde writes them (snake_case,
//! times in milliseconds) or a small object around a bare answer; it never
//! carries prose, so it stays stable when the wording changes.

use std::fmt::Write as _;

use serde_json::json;

use leasehold_host::{
    ArmOutcome, Change, Discrepancy, FeedEntry, FeedPlace, FeedRead, HistoryEntry, OnExpiry, Page,
    Phase, Priority, SealOutcome, Settlement, Task, TaskState, Timer, TimerEvent, Timestamp,
    TrimOutcome,
};

use super::error::REFUSED;
use super::time::{format_time, relative};

/// One command's answer, before it is rendered.
#[derive(Debug)]
pub enum Report {
    /// A task, with the sentence that says what just happened to it.
    Task {
        task: Task,
        headline: String,
    },
    Released {
        id: String,
        actor: String,
    },
    /// What `claim-next` took for `actor`, if the queue held anything.
    ClaimedNext {
        actor: String,
        roles: Vec<String>,
        task: Option<Task>,
    },
    Reclaimed {
        tasks: Vec<Task>,
        now: Timestamp,
    },
    /// What `expire-overdue` acted on.
    Expired {
        tasks: Vec<Task>,
        now: Timestamp,
    },
    Settled {
        id: String,
        settlement: Settlement,
        settled: bool,
    },
    Withdrawn {
        run: String,
        withdrawn: u32,
    },
    /// A page of tasks, with the sentence to print when it is empty.
    Page {
        page: Page,
        empty: String,
    },
    Overdue {
        tasks: Vec<Task>,
        now: Timestamp,
    },
    Armed {
        timer: Timer,
        outcome: ArmOutcome,
    },
    Swept {
        timers: Vec<Timer>,
        now: Timestamp,
        lease_ms: u32,
    },
    Disarmed {
        run: String,
        effect: String,
        existed: bool,
    },
    DisarmedRun {
        run: String,
        disarmed: u32,
    },
    NextDue {
        next_due: Option<Timestamp>,
        now: Timestamp,
    },
    Sealed {
        run: String,
        outcome: SealOutcome,
    },
    IsSealed {
        run: String,
        sealed: bool,
    },
    Stats {
        tenant: String,
        open_count: u64,
        leased_count: u64,
        next_lease_end: Option<Timestamp>,
        pending_count: u64,
        next_due: Option<Timestamp>,
        now: Timestamp,
    },
    Check {
        discrepancies: Vec<Discrepancy>,
    },
    Repaired {
        path: std::path::PathBuf,
        repaired: bool,
    },
    /// A page of a task's history; a full page may have more after it.
    History {
        id: String,
        entries: Vec<HistoryEntry>,
        limit: u32,
    },
    /// Where one history entry sits in the feed.
    Place {
        id: String,
        seq: u64,
        place: Option<FeedPlace>,
    },
    /// A read of the feed after `after`.
    Events {
        read: FeedRead,
        after: Option<String>,
    },
    Trimmed {
        total: TrimOutcome,
    },
}

impl Report {
    /// 0, except for a consistency check that found something.
    pub fn exit_code(&self) -> u8 {
        match self {
            Report::Check { discrepancies } if !discrepancies.is_empty() => REFUSED,
            Report::Events {
                read: FeedRead::Gone(_),
                ..
            } => REFUSED,
            _ => 0,
        }
    }

    pub fn json(&self) -> Result<String, serde_json::Error> {
        match self {
            Report::Task { task, .. } => serde_json::to_string(task),
            Report::Released { id, actor } => {
                serde_json::to_string(&json!({"id": id, "actor": actor, "released": true}))
            }
            Report::ClaimedNext { task, .. } => serde_json::to_string(task),
            Report::Reclaimed { tasks, .. } | Report::Expired { tasks, .. } => {
                serde_json::to_string(tasks)
            }
            Report::Settled {
                id,
                settlement,
                settled,
            } => serde_json::to_string(
                &json!({"id": id, "settlement": settlement, "settled": settled}),
            ),
            Report::Withdrawn { run, withdrawn } => {
                serde_json::to_string(&json!({"run": run, "withdrawn": withdrawn}))
            }
            Report::Page { page, .. } => serde_json::to_string(page),
            Report::Overdue { tasks, .. } => serde_json::to_string(tasks),
            Report::Armed { timer, outcome } => serde_json::to_string(
                &json!({"run": timer.run, "effect": timer.effect, "outcome": outcome}),
            ),
            Report::Swept { timers, .. } => serde_json::to_string(timers),
            Report::Disarmed {
                run,
                effect,
                existed,
            } => serde_json::to_string(&json!({"run": run, "effect": effect, "disarmed": existed})),
            Report::DisarmedRun { run, disarmed } => {
                serde_json::to_string(&json!({"run": run, "disarmed": disarmed}))
            }
            Report::NextDue { next_due, .. } => {
                serde_json::to_string(&json!({"next_due": next_due}))
            }
            Report::Sealed { run, outcome } => serde_json::to_string(&json!({
                "run": run,
                "timers_disarmed": outcome.timers_disarmed,
                "tasks_withdrawn": outcome.tasks_withdrawn,
            })),
            Report::IsSealed { run, sealed } => {
                serde_json::to_string(&json!({"run": run, "sealed": sealed}))
            }
            Report::Stats {
                tenant,
                open_count,
                leased_count,
                next_lease_end,
                pending_count,
                next_due,
                ..
            } => serde_json::to_string(&json!({
                "tenant": tenant,
                "open_count": open_count,
                "leased_count": leased_count,
                "next_lease_end": next_lease_end,
                "pending_count": pending_count,
                "next_due": next_due,
            })),
            Report::Check { discrepancies } => serde_json::to_string(discrepancies),
            Report::Repaired { path, repaired } => serde_json::to_string(&json!({
                "path": path,
                "repaired": repaired,
            })),
            Report::History { entries, .. } => serde_json::to_string(entries),
            Report::Place { place, .. } => serde_json::to_string(place),
            Report::Events { read, .. } => serde_json::to_string(read),
            Report::Trimmed { total } => serde_json::to_string(&json!({
                "feed_removed": total.feed_removed,
                "history_removed": total.history_removed,
            })),
        }
    }

    pub fn human(&self) -> String {
        match self {
            Report::Task { task, headline } => format!("{headline}\n{}", task_block(task)),
            Report::Released { id, actor } => {
                format!("{actor} released {id}; it is back in the queue.\n")
            }
            Report::ClaimedNext {
                actor,
                task: Some(task),
                ..
            } => {
                let until = match task.lease_until {
                    Some(t) => format!("until {}", format_time(t)),
                    None => "until released".to_owned(),
                };
                format!(
                    "{actor} holds {}, the first task of the queue, {until}.\n{}",
                    task.id,
                    task_block(task)
                )
            }
            Report::ClaimedNext {
                actor,
                roles: r,
                task: None,
            } => format!(
                "No queued tasks for {actor} with roles {}; nothing was claimed.\n",
                roles(r)
            ),
            Report::Reclaimed { tasks, now } => reclaim_table(tasks, *now),
            Report::Expired { tasks, now } => expire_table(tasks, *now),
            Report::Settled {
                id,
                settlement,
                settled: true,
            } => format!("Settled {id} as {}.\n", settlement.state()),
            Report::Settled { id, .. } => format!(
                "{id} was already settled; it is left as it stands (the first settlement wins).\n"
            ),
            Report::Withdrawn { run, withdrawn } => format!(
                "Withdrew {} of run {run}.\n",
                count(*withdrawn as u64, "pending task", "pending tasks")
            ),
            Report::Page { page, empty } => page_table(page, empty),
            Report::Overdue { tasks, now } => overdue_table(tasks, *now),
            Report::Armed { timer, outcome } => {
                let name = format!("{}/{}", timer.run, timer.effect);
                match outcome {
                    ArmOutcome::Armed => {
                        format!("Armed {name} to fire at {}.\n", format_time(timer.fire_at))
                    }
                    ArmOutcome::AlreadyArmed => {
                        format!("{name} was already armed; the first arming stands unchanged.\n")
                    }
                    ArmOutcome::RunSealed => {
                        format!("Run {} is sealed; {name} was not armed.\n", timer.run)
                    }
                }
            }
            Report::Swept {
                timers,
                now,
                lease_ms,
            } => sweep_table(timers, *now, *lease_ms),
            Report::Disarmed {
                run,
                effect,
                existed: true,
            } => format!("Disarmed {run}/{effect}.\n"),
            Report::Disarmed { run, effect, .. } => {
                format!("No timer {run}/{effect} was armed; nothing changed.\n")
            }
            Report::DisarmedRun { run, disarmed } => format!(
                "Disarmed {} of run {run}.\n",
                count(*disarmed as u64, "timer", "timers")
            ),
            Report::NextDue { next_due, now } => match next_due {
                Some(t) => format!("Next timer due at {}.\n", when(*t, *now)),
                None => "No timers are armed.\n".to_owned(),
            },
            Report::Sealed { run, outcome } => format!(
                "Sealed run {run}: {} retired, {} withdrawn.\n",
                count(outcome.timers_disarmed as u64, "timer", "timers"),
                count(outcome.tasks_withdrawn as u64, "task", "tasks"),
            ),
            Report::IsSealed { run, sealed: true } => format!("Run {run} is sealed.\n"),
            Report::IsSealed { run, .. } => format!("Run {run} is not sealed.\n"),
            Report::Stats {
                tenant,
                open_count,
                leased_count,
                next_lease_end,
                pending_count,
                next_due,
                now,
            } => {
                let at =
                    |t: &Option<Timestamp>| t.map_or_else(|| "none".to_owned(), |t| when(t, *now));
                format!(
                    "tenant          {tenant}\npending tasks   {open_count}\nleased claims   {leased_count}\nnext lease end  {}\narmed timers    {pending_count}\nnext due        {}\n",
                    at(next_lease_end),
                    at(next_due)
                )
            }
            Report::Check { discrepancies } if discrepancies.is_empty() => {
                "Consistent: every row agrees with its indexes and counters.\n".to_owned()
            }
            Report::Check { discrepancies } => {
                let rows = discrepancies
                    .iter()
                    .map(|d| vec![d.structure.clone(), d.subject.clone(), d.detail.clone()])
                    .collect();
                format!(
                    "{}\n{} found.\n",
                    table(&["STRUCTURE", "SUBJECT", "DETAIL"], rows),
                    count(discrepancies.len() as u64, "discrepancy", "discrepancies")
                )
            }
            Report::Repaired {
                path,
                repaired: true,
            } => format!("Repaired {}: it was not closed cleanly.\n", path.display()),
            Report::Repaired {
                path,
                repaired: false,
            } => format!(
                "{} was closed cleanly; nothing to repair.\n",
                path.display()
            ),
            Report::History { id, entries, limit } => history_table(id, entries, *limit),
            Report::Place {
                id,
                seq,
                place: Some(p),
            } => format!(
                "Entry {seq} of {id} is number {} of the feed's slot {}.",
                p.seq, p.slot
            ),
            Report::Place {
                id,
                seq,
                place: None,
            } => format!("Entry {seq} of {id} is not kept (trimmed, or never recorded)."),
            Report::Events {
                read: FeedRead::Page(page),
                after,
            } => {
                let mut out = String::new();
                for e in &page.entries {
                    out.push_str(&event_line(e));
                }
                if page.entries.is_empty() {
                    let since = if after.is_some() {
                        " after that position"
                    } else {
                        ""
                    };
                    let _ = writeln!(out, "No changes{since}.");
                }
                if page.next == page.head {
                    let _ = writeln!(out, "Caught up; follow on with --after {}", page.next);
                } else {
                    let _ = writeln!(out, "More follow: --after {}", page.next);
                }
                out
            }
            Report::Events {
                read: FeedRead::Gone(head),
                ..
            } => gone(head),
            Report::Trimmed { total } => format!(
                "Removed {} from the feed and {} from task histories.\n",
                count(total.feed_removed as u64, "entry", "entries"),
                count(total.history_removed as u64, "entry", "entries"),
            ),
        }
    }
}

/// What a reader whose position was trimmed must do.
pub fn gone(head: &str) -> String {
    format!(
        "The feed no longer holds what follows that position (it was trimmed, or the position \
         is not this feed's): read the tasks again, then follow on with --after {head}\n"
    )
}

fn state_change(before: Option<TaskState>, after: TaskState) -> String {
    match before {
        Some(b) if b != after => format!("{b} -> {after}"),
        Some(_) => after.to_string(),
        None => format!("opened {after}"),
    }
}

fn history_table(id: &str, entries: &[HistoryEntry], limit: u32) -> String {
    if entries.is_empty() {
        return format!("No history entries of task {id} here.\n");
    }
    let rows = entries
        .iter()
        .map(|e| {
            vec![
                e.seq.to_string(),
                format_time(e.at),
                e.verb.clone(),
                e.actor.clone().unwrap_or_else(|| "(service)".into()),
                state_change(e.before, e.after),
                e.assignee.clone().unwrap_or_else(|| "-".into()),
                e.lease_until.map_or_else(|| "-".into(), format_time),
            ]
        })
        .collect();
    let mut out = table(
        &["SEQ", "AT", "VERB", "BY", "STATE", "HOLDER", "LEASE UNTIL"],
        rows,
    );
    let last = entries.last().map_or(0, |e| e.seq);
    if entries.len() == limit as usize {
        let _ = writeln!(out, "More may follow: --after {last}");
    } else {
        let _ = writeln!(
            out,
            "{} of task {id}.",
            count(entries.len() as u64, "entry", "entries")
        );
    }
    out
}

/// One change, on one line, for a person following the feed.
pub fn event_line(e: &FeedEntry) -> String {
    match &e.change {
        Change::Task(t) => {
            let x = &t.entry;
            let by = x
                .actor
                .as_deref()
                .map(|a| format!(" by {a}"))
                .unwrap_or_default();
            let holder = x
                .assignee
                .as_deref()
                .map(|a| format!(", held by {a}"))
                .unwrap_or_default();
            format!(
                "{}  task {} #{}: {}{by}, {}{holder}\n",
                format_time(x.at),
                t.id,
                x.seq,
                x.verb,
                state_change(x.before, x.after)
            )
        }
        Change::Timer(t) => {
            let what = match t.what {
                TimerEvent::Armed => format!("armed to fire at {}", format_time(t.fire_at)),
                TimerEvent::Claimed => format!(
                    "claimed until {}",
                    t.lease_until.map_or_else(|| "-".into(), format_time)
                ),
                TimerEvent::Retired => "retired".to_owned(),
            };
            format!(
                "{}  timer {}/{}: {} {what}\n",
                format_time(t.at),
                t.run,
                t.effect,
                t.verb
            )
        }
    }
}

pub fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A time with its distance from now, e.g. `2026-05-04T09:30:00Z (+25m)`.
pub fn when(t: Timestamp, now: Timestamp) -> String {
    format!("{} ({})", format_time(t), relative(t, now))
}

pub fn priority(p: Priority) -> &'static str {
    match p {
        Priority::Low => "low",
        Priority::Normal => "normal",
        Priority::High => "high",
        Priority::Urgent => "urgent",
    }
}

pub fn on_expiry(o: OnExpiry) -> &'static str {
    match o {
        OnExpiry::Deny => "deny",
        OnExpiry::Escalate => "escalate",
        OnExpiry::Proceed => "proceed",
    }
}

/// An audience as a person reads it: no roles means anyone may take it.
pub fn roles(list: &[String]) -> String {
    if list.is_empty() {
        "anyone".to_owned()
    } else {
        list.join(", ")
    }
}

fn or_dash(list: &[String]) -> String {
    if list.is_empty() {
        "-".to_owned()
    } else {
        list.join(", ")
    }
}

fn task_block(t: &Task) -> String {
    let mut lines = vec![
        ("task", t.id.clone()),
        ("state", t.state.to_string()),
        ("priority", priority(t.priority).to_owned()),
        ("run", t.run.clone()),
    ];
    if let Some(case) = &t.case {
        lines.push(("case", case.clone()));
    }
    lines.push(("kind", t.kind.clone()));
    lines.push(("roles", roles(&t.candidate_roles)));
    lines.push(("holder", t.assignee.clone().unwrap_or_else(|| "-".into())));
    if let Some(until) = t.lease_until {
        lines.push(("lease until", format_time(until)));
    }
    lines.push(("excluded", or_dash(&t.excluded_actors)));
    lines.push(("escalate to", or_dash(&t.escalate_to)));
    lines.push(("on expiry", on_expiry(t.on_expiry).to_owned()));
    lines.push(("created", format_time(t.created_at)));
    lines.push(("due", t.due_at.map_or_else(|| "-".into(), format_time)));
    lines.push(("justification", t.justification.clone()));
    let mut out = String::new();
    for (k, v) in lines {
        let _ = writeln!(out, "  {k:<14}{v}");
    }
    out
}

fn task_rows(tasks: &[Task]) -> Vec<Vec<String>> {
    tasks
        .iter()
        .map(|t| {
            vec![
                t.id.clone(),
                priority(t.priority).to_owned(),
                t.state.to_string(),
                t.kind.clone(),
                roles(&t.candidate_roles),
                t.assignee.clone().unwrap_or_else(|| "-".into()),
                t.due_at.map_or_else(|| "-".into(), format_time),
            ]
        })
        .collect()
}

const TASK_COLUMNS: [&str; 7] = ["ID", "PRIORITY", "STATE", "KIND", "ROLES", "HOLDER", "DUE"];

fn page_table(page: &Page, empty: &str) -> String {
    if page.tasks.is_empty() {
        return format!("{empty}\n");
    }
    let mut out = table(&TASK_COLUMNS, task_rows(&page.tasks));
    match &page.next {
        Some(cursor) => {
            let _ = writeln!(out, "More follow: --after {cursor}");
        }
        None => {
            let _ = writeln!(out, "{}.", count(page.tasks.len() as u64, "task", "tasks"));
        }
    }
    out
}

fn overdue_table(tasks: &[Task], now: Timestamp) -> String {
    if tasks.is_empty() {
        return format!("Nothing is overdue at {}.\n", format_time(now));
    }
    let rows = tasks
        .iter()
        .map(|t| {
            let due = t.due_at.unwrap_or(now);
            vec![
                t.id.clone(),
                t.state.to_string(),
                t.assignee.clone().unwrap_or_else(|| "-".into()),
                format_time(due),
                relative(due, now),
                on_expiry(t.on_expiry).to_owned(),
            ]
        })
        .collect();
    let mut out = table(&["ID", "STATE", "HOLDER", "DUE", "", "ON EXPIRY"], rows);
    let _ = writeln!(
        out,
        "{} overdue at {}.",
        count(tasks.len() as u64, "task", "tasks"),
        format_time(now)
    );
    out
}

fn reclaim_table(tasks: &[Task], now: Timestamp) -> String {
    if tasks.is_empty() {
        return format!("No leases had lapsed at {}.\n", format_time(now));
    }
    let rows = tasks
        .iter()
        .map(|t| {
            vec![
                t.id.clone(),
                t.state.to_string(),
                priority(t.priority).to_owned(),
                roles(&t.candidate_roles),
            ]
        })
        .collect();
    let mut out = table(&["ID", "STATE", "PRIORITY", "ROLES"], rows);
    let _ = writeln!(
        out,
        "Returned {} to the queue: their leases ended at or before {}.",
        count(tasks.len() as u64, "task", "tasks"),
        format_time(now)
    );
    out
}

fn expire_table(tasks: &[Task], now: Timestamp) -> String {
    if tasks.is_empty() {
        return format!("No task was overdue at {}.\n", format_time(now));
    }
    let rows = tasks
        .iter()
        .map(|t| {
            vec![
                t.id.clone(),
                t.state.to_string(),
                format!("{:?}", t.on_expiry).to_lowercase(),
                roles(&t.candidate_roles),
            ]
        })
        .collect();
    let mut out = table(&["ID", "STATE", "ON EXPIRY", "ROLES"], rows);
    let _ = writeln!(
        out,
        "Acted on {}: each was due at or before {}.",
        count(tasks.len() as u64, "overdue task", "overdue tasks"),
        format_time(now)
    );
    out
}

fn sweep_table(timers: &[Timer], now: Timestamp, lease_ms: u32) -> String {
    if timers.is_empty() {
        return format!("No timers due at {}.\n", format_time(now));
    }
    let rows = timers
        .iter()
        .map(|t| {
            vec![
                t.run.clone(),
                t.effect.clone(),
                t.step.to_string(),
                match t.phase {
                    Phase::Forward => "forward".to_owned(),
                    Phase::Compensating => "compensating".to_owned(),
                },
                format_time(t.fire_at),
            ]
        })
        .collect();
    let mut out = table(&["RUN", "EFFECT", "STEP", "PHASE", "FIRE AT"], rows);
    let _ = writeln!(
        out,
        "Claimed {}, leased until {}; disarm each once its effect is done.",
        count(timers.len() as u64, "timer", "timers"),
        format_time(now.saturating_add(i64::from(lease_ms)))
    );
    out
}

/// Left-aligned columns, two spaces apart, widths in characters.
pub fn table(headers: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let header: Vec<String> = headers.iter().map(|h| (*h).to_owned()).collect();
    for row in std::iter::once(&header).chain(&rows) {
        let mut line = String::new();
        for (i, (cell, w)) in row.iter().zip(&widths).enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                let _ = write!(line, "{cell:<w$}  ");
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}
