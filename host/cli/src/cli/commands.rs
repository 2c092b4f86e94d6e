//! One arm per subcommand: open the tenant, make the call(s), and say what
//! happened as a [`Report`]. Nothing here prints or picks an exit code.

use std::path::{Path, PathBuf};

use leasehold_host::{
    Engine, EngineBuilder, Error, OpenError, QueueQuery, StoreError, Task, TaskState, Tenant,
    Timer, TrimOutcome,
};

use super::args::{Cli, Command, QueueArgs, RunCommand, TaskCommand, TimerCommand};
use super::error::CliError;
use super::input::{TaskInput, TimerInput, invalid_document, parse, read_source};
use super::output::{Report, roles};
use super::time;

/// Where the database lives when neither `--db` nor `LEASEHOLD_DB` says.
pub const DEFAULT_DB: &str = "leasehold.redb";

pub fn db_path(cli: &Cli) -> PathBuf {
    cli.db.clone().unwrap_or_else(|| PathBuf::from(DEFAULT_DB))
}

/// An engine builder with the options every command shares: how long to
/// wait for a busy file, and where compiled components are kept.
pub fn builder(cli: &Cli) -> EngineBuilder {
    let engine = Engine::builder().file_wait(cli.wait);
    let engine = if cli.fresh_instances {
        engine.fresh_instances()
    } else {
        engine
    };
    if cli.no_cache {
        return engine;
    }
    match cli
        .cache_dir
        .clone()
        .or_else(leasehold_host::default_cache_dir)
    {
        Some(dir) => engine.compile_cache(dir),
        None => engine,
    }
}

pub fn tenant(cli: &Cli) -> Result<Tenant, CliError> {
    let mut engine = builder(cli);
    // A command that only reads opens the file read-only: it never creates,
    // repairs or changes it, works on a file the user may only read, and
    // runs beside other readers. On PostgreSQL it runs READ ONLY.
    if !writes(&cli.command) {
        engine = engine.read_only();
    }
    let db = db_path(cli);
    let engine = match db.to_str() {
        Some(url) if leasehold_host::is_url(url) => engine.postgres(url)?,
        _ => match engine.clone().open(&db) {
            // After a crash is when an operator most needs to look: a
            // reading command repairs the file when it may, and says so.
            Err(Error::Open(OpenError::NeedsRecovery { path })) => {
                repair_to_read(&path, cli)?;
                engine.open(db)?
            }
            opened => opened?,
        },
    };
    Ok(engine.tenant(cli.tenant())?)
}

/// Repairs a file a writer left open so that a reading command can read
/// it, saying so on stderr; where this user or this moment cannot, refuses
/// with the file's own error, which names the command that repairs it.
fn repair_to_read(path: &Path, cli: &Cli) -> Result<(), CliError> {
    match leasehold_host::repair(path, cli.wait) {
        Ok(_) => {
            eprintln!(
                "leasehold: {} was not closed cleanly (its writer stopped); repaired it before reading",
                path.display()
            );
            Ok(())
        }
        Err(why) => {
            eprintln!(
                "error: {} was not closed cleanly, and this command could not repair it: {}",
                path.display(),
                super::error::with_sources(&why)
            );
            Err(Error::Open(OpenError::NeedsRecovery {
                path: path.to_owned(),
            })
            .into())
        }
    }
}

/// Whether a command may write (and so may create the database).
fn writes(command: &Command) -> bool {
    !matches!(
        command,
        Command::Task(
            TaskCommand::Get { .. } | TaskCommand::History { .. } | TaskCommand::Place { .. },
        ) | Command::Events(_)
            | Command::Queue(_)
            | Command::Overdue { .. }
            | Command::Case { .. }
            | Command::Timer(TimerCommand::Next)
            | Command::Run(RunCommand::Sealed { .. })
            | Command::Stats
            | Command::Check
            | Command::Component { .. }
            | Command::Token(_)
    )
}

fn strs(list: &[String]) -> Vec<&str> {
    list.iter().map(String::as_str).collect()
}

/// Runs every subcommand but `demo`, which narrates as it goes.
pub fn run(cli: &Cli) -> Result<Report, CliError> {
    match &cli.command {
        Command::Task(verb) => task(cli, verb),
        Command::Queue(args) => queue(cli, args),
        Command::Overdue { now, limit } => {
            let now = now.unwrap_or_else(time::now);
            let tasks = tenant(cli)?.overdue(now, *limit)?;
            Ok(Report::Overdue { tasks, now })
        }
        Command::Case { case, limit, after } => {
            let page = tenant(cli)?.for_case(case, *limit, after.as_deref())?;
            let empty = match after {
                Some(_) => format!("Case {case} has no more tasks after that cursor."),
                None => format!("Case {case} has no tasks."),
            };
            Ok(Report::Page { page, empty })
        }
        Command::Timer(verb) => timer(cli, verb),
        Command::Run(RunCommand::Seal { run, awaited }) => {
            let outcome = tenant(cli)?.seal(run, &strs(awaited))?;
            Ok(Report::Sealed {
                run: run.clone(),
                outcome,
            })
        }
        Command::Run(RunCommand::Sealed { run }) => Ok(Report::IsSealed {
            run: run.clone(),
            sealed: tenant(cli)?.is_sealed(run)?,
        }),
        Command::Stats => {
            let t = tenant(cli)?;
            Ok(Report::Stats {
                tenant: cli.tenant().to_owned(),
                open_count: t.open_count()?,
                leased_count: t.leased_count()?,
                next_lease_end: t.next_lease_end()?,
                pending_count: t.pending_count()?,
                next_due: t.next_due()?,
                now: time::now(),
            })
        }
        Command::Check => Ok(Report::Check {
            discrepancies: tenant(cli)?.check()?,
        }),
        Command::Events(args) => Ok(Report::Events {
            read: tenant(cli)?.feed(args.after.as_deref(), args.limit)?,
            after: args.after.clone(),
        }),
        Command::Trim {
            before,
            keep,
            limit,
        } => {
            let t = tenant(cli)?;
            let mut total = TrimOutcome::default();
            // One call per batch, each its own transaction, until the rule
            // removes nothing more.
            loop {
                let out = t.trim(*before, *keep, *limit)?;
                total.feed_removed += out.feed_removed;
                total.history_removed += out.history_removed;
                if !out.more {
                    break;
                }
            }
            Ok(Report::Trimmed { total })
        }
        Command::Repair => {
            let path = db_path(cli);
            if path.to_str().is_some_and(leasehold_host::is_url) {
                return Err(CliError::Usage {
                    message: "repair is for a redb file; a PostgreSQL server recovers its own data"
                        .into(),
                    argument: Some("repair".into()),
                });
            }
            let repaired = leasehold_host::repair(&path, cli.wait).map_err(Error::Open)?;
            Ok(Report::Repaired { path, repaired })
        }
        // Neither answers a report on a database: the demo narrates as it
        // goes, and the component is written without opening one.
        Command::Demo
        | Command::Component { .. }
        | Command::Serve(_)
        | Command::Token(_)
        | Command::Copy(_)
        | Command::Tenant(_)
        | Command::Backup(_)
        | Command::Restore(_) => Err(CliError::Failed(
            "demo and component are run by their own modules, not commands::run".into(),
        )),
    }
}

fn task(cli: &Cli, verb: &TaskCommand) -> Result<Report, CliError> {
    match verb {
        TaskCommand::Open { file } => {
            let source = read_source(file.as_deref(), "a task")?;
            let input: TaskInput = parse(&source, "a task")?;
            let task = input.into_task(time::now())?;
            let t = tenant(cli)?;
            // Only for the sentence: `open` answers the stored task either
            // way, and a race here changes nothing but the wording.
            let invalid = |e| invalid_document(&source, "the task", e);
            let existed = t.get(&task.id).map_err(invalid)?.is_some();
            let stored = t.open(&task).map_err(invalid)?;
            let headline = if existed {
                format!(
                    "Task {} already exists; the first open wins, so it stands as stored:",
                    stored.id
                )
            } else {
                format!("Opened task {}.", stored.id)
            };
            Ok(Report::Task {
                task: stored,
                headline,
            })
        }
        TaskCommand::Get { id } => {
            let task = tenant(cli)?
                .get(id)?
                .ok_or_else(|| Error::Store(StoreError::NotFound(id.clone())))?;
            Ok(Report::Task {
                headline: format!("Task {id}:"),
                task,
            })
        }
        TaskCommand::Claim {
            id,
            actor,
            roles,
            lease,
        } => {
            let task = tenant(cli)?.claim(id, actor, &strs(roles), lease.lease(time::now))?;
            Ok(Report::Task {
                headline: holds(actor, &task),
                task,
            })
        }
        TaskCommand::ClaimNext {
            actor,
            roles,
            lease,
        } => {
            let query = QueueQuery {
                roles: roles.clone(),
                actor: Some(actor.clone()),
                limit: 1,
                after: None,
            };
            let task = tenant(cli)?.claim_next(&query, lease.lease(time::now))?;
            Ok(Report::ClaimedNext {
                actor: actor.clone(),
                roles: roles.clone(),
                task,
            })
        }
        TaskCommand::Renew {
            id,
            actor,
            lease,
            now,
        } => {
            let now = now.unwrap_or_else(time::now);
            let task = tenant(cli)?.renew(id, actor, now, *lease)?;
            Ok(Report::Task {
                headline: holds(actor, &task),
                task,
            })
        }
        TaskCommand::Reclaim { now, limit } => {
            let now = now.unwrap_or_else(time::now);
            let tasks = tenant(cli)?.reclaim_lapsed(now, *limit)?;
            Ok(Report::Reclaimed { tasks, now })
        }
        TaskCommand::Expire { now, limit } => {
            let now = now.unwrap_or_else(time::now);
            let tasks = tenant(cli)?.expire_overdue(now, *limit)?;
            Ok(Report::Expired { tasks, now })
        }
        TaskCommand::Release { id, actor } => {
            tenant(cli)?.release(id, actor)?;
            Ok(Report::Released {
                id: id.clone(),
                actor: actor.clone(),
            })
        }
        TaskCommand::TakeOver {
            id,
            from,
            actor,
            roles,
            lease,
        } => {
            let task =
                tenant(cli)?.take_over(id, from, actor, &strs(roles), lease.lease(time::now))?;
            Ok(Report::Task {
                headline: format!("{actor} took {id} over from {from}."),
                task,
            })
        }
        TaskCommand::Settle {
            id,
            settlement,
            holder,
        } => {
            let settlement = (*settlement).into();
            let settled = tenant(cli)?.settle(id, settlement, holder.as_deref())?;
            Ok(Report::Settled {
                id: id.clone(),
                settlement,
                settled,
            })
        }
        TaskCommand::Escalate { id } => {
            let task = tenant(cli)?.escalate(id)?;
            let headline = if task.state == TaskState::Escalated {
                format!(
                    "Escalated {id}: no one holds it, and it is offered to {}.",
                    roles(&task.candidate_roles)
                )
            } else {
                format!(
                    "{id} is already {}; escalation left it as it stands.",
                    task.state
                )
            };
            Ok(Report::Task { task, headline })
        }
        TaskCommand::History { id, after, limit } => Ok(Report::History {
            id: id.clone(),
            entries: tenant(cli)?.history(id, *after, *limit)?,
            limit: *limit,
        }),
        TaskCommand::Place { id, seq } => Ok(Report::Place {
            id: id.clone(),
            seq: *seq,
            place: tenant(cli)?.entry_place(id, *seq)?,
        }),
        TaskCommand::WithdrawRun { run, ids } => {
            let withdrawn = tenant(cli)?.withdraw_run(run, &strs(ids))?;
            Ok(Report::Withdrawn {
                run: run.clone(),
                withdrawn,
            })
        }
    }
}

/// Who holds the task now, and until when.
fn holds(actor: &str, task: &Task) -> String {
    match task.lease_until {
        Some(until) => format!(
            "{actor} holds {} until {}; renew the lease to keep it.",
            task.id,
            time::format_time(until)
        ),
        None => format!("{actor} holds {} until released.", task.id),
    }
}

fn queue(cli: &Cli, args: &QueueArgs) -> Result<Report, CliError> {
    let query = QueueQuery {
        roles: args.roles.clone(),
        actor: args.actor.clone(),
        limit: args.limit,
        after: args.after.clone(),
    };
    let page = tenant(cli)?.queue(&query)?;
    let who = match &args.actor {
        Some(a) => format!("{a} with roles {}", roles(&args.roles)),
        None => format!("roles {}", roles(&args.roles)),
    };
    let more = if args.after.is_some() { " more" } else { "" };
    Ok(Report::Page {
        page,
        empty: format!("No{more} queued tasks for {who}."),
    })
}

fn timer(cli: &Cli, verb: &TimerCommand) -> Result<Report, CliError> {
    match verb {
        TimerCommand::Arm { file } => {
            let source = read_source(file.as_deref().map(Path::new), "a timer")?;
            let timer = Timer::from(parse::<TimerInput>(&source, "a timer")?);
            let outcome = tenant(cli)?
                .arm(&timer)
                .map_err(|e| invalid_document(&source, "the timer", e))?;
            Ok(Report::Armed { timer, outcome })
        }
        TimerCommand::Sweep { now, limit, lease } => {
            let now = now.unwrap_or_else(time::now);
            let timers = tenant(cli)?.claim_due(now, *limit, *lease)?;
            Ok(Report::Swept {
                timers,
                now,
                lease_ms: *lease,
            })
        }
        TimerCommand::Disarm { run, effect } => Ok(Report::Disarmed {
            run: run.clone(),
            effect: effect.clone(),
            existed: tenant(cli)?.disarm(run, effect)?,
        }),
        TimerCommand::DisarmRun { run } => Ok(Report::DisarmedRun {
            run: run.clone(),
            disarmed: tenant(cli)?.disarm_run(run)?,
        }),
        TimerCommand::Next => Ok(Report::NextDue {
            next_due: tenant(cli)?.next_due()?,
            now: time::now(),
        }),
    }
}
