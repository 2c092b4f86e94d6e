//! `leasehold jobs …`: bulk jobs from the command line. `start-job` makes a
//! job over search's filter flags and, unless `--detach`, steps it to its
//! end in this process (each `step-job` its own transaction), showing a
//! progress bar at a terminal or, under `--json`, a JSON line of the job
//! now and then; `run` does the same for a job that exists (one a killed
//! process left); `get`, `list` and `cancel` read and stop jobs. Which
//! tasks a job takes and what a step does are the engine's; this module
//! turns flags into a job, steps it, and shows how far it has come. It
//! never changes a task itself.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use leasehold_host::{
    Error, Job, JobAction, JobAssign, JobState, Priority, StoreError, TaskChanges, Tenant,
    Timestamp,
};

use crate::commands::job_answers::{Jobs, counts_text, job_json};
use crate::commands::search::{FilterArgs, flagged};
use crate::commands::task::PriorityArg;
use crate::context::Context;
use crate::error::CliError;
use crate::globals::ProgressArg;
use crate::values::{self, parse_limit, parse_time};

#[derive(Debug, Subcommand)]
pub enum JobsCommand {
    /// Start a job: one action over every task the filter flags (as
    /// `search` takes them) match, created up to now. Without --detach it
    /// is stepped to its end here, a task a transaction, with a progress
    /// bar (--json: a JSON line of the job now and then, the job last).
    /// There is no Ctrl-C handling: a job stopped half-way is durable, and
    /// `jobs run ID` finishes it without changing any task twice. Exits 1
    /// when a task's verb refused
    #[command(name = "start-job", visible_alias = "start")]
    Start(Box<Start>),
    /// One step of a job (a stretch of its count, or one task), its own
    /// transaction; prints the job after it
    #[command(name = "step-job", visible_alias = "step")]
    StepJob(JobId),
    /// Step a job to its end in this process (as `start` does): resumes one
    /// a killed or detached `start` left. Exits 1 when a task's verb
    /// refused or the job was cancelled
    Run(JobId),
    /// Show a job: its state, counts and the last reasons tasks were
    /// skipped or failed
    #[command(name = "get-job", visible_alias = "get")]
    Get(JobId),
    /// The jobs, in id order
    #[command(name = "list-jobs", visible_alias = "list")]
    List(List),
    /// Stop a job at once: no task is changed by it after
    #[command(name = "cancel-job", visible_alias = "cancel")]
    Cancel(JobId),
    /// The ids of jobs with work left, in id order: what `run` (or a
    /// sweeper) would step
    #[command(name = "runnable-jobs", visible_alias = "runnable")]
    Runnable(Runnable),
}

impl JobsCommand {
    /// The verbs the command calls, by their WIT names.
    pub fn verbs(&self) -> &'static [&'static str] {
        match self {
            JobsCommand::Start(_) => &["start-job", "step-job"],
            JobsCommand::StepJob(_) => &["step-job"],
            JobsCommand::Run(_) => &["get-job", "step-job"],
            JobsCommand::Get(_) => &["get-job"],
            JobsCommand::List(_) => &["list-jobs"],
            JobsCommand::Cancel(_) => &["cancel-job"],
            JobsCommand::Runnable(_) => &["runnable-jobs"],
        }
    }

    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        let one = |job: Job, ran: bool| Jobs {
            list: vec![job],
            one: true,
            ran,
        };
        match self {
            JobsCommand::Start(c) => c.run(cx, out),
            JobsCommand::Run(c) => {
                let t = cx.tenant()?;
                let job = t.get_job(&c.id)?.ok_or_else(|| not_found(&c.id))?;
                let job = drive(cx, &t, job, out)?;
                cx.answer(&one(job, true), out)
            }
            JobsCommand::StepJob(c) => {
                let job = cx.tenant()?.step_job(&c.id)?;
                cx.answer(&one(job, false), out)
            }
            JobsCommand::Get(c) => {
                let job = cx
                    .tenant()?
                    .get_job(&c.id)?
                    .ok_or_else(|| not_found(&c.id))?;
                cx.answer(&one(job, false), out)
            }
            JobsCommand::List(c) => {
                let list = cx
                    .tenant()?
                    .list_jobs(c.limit, c.after.as_deref())
                    .map_err(flagged)?;
                cx.answer(
                    &Jobs {
                        list,
                        one: false,
                        ran: false,
                    },
                    out,
                )
            }
            JobsCommand::Cancel(c) => {
                let job = cx.tenant()?.cancel_job(&c.id)?;
                cx.answer(&one(job, false), out)
            }
            JobsCommand::Runnable(c) => {
                let ids = cx.tenant()?.runnable_jobs(c.limit).map_err(flagged)?;
                cx.answer(&Runnables(ids), out)
            }
        }
    }
}

fn not_found(id: &str) -> CliError {
    CliError::Engine(Error::Store(StoreError::NotFound(id.to_owned())))
}

#[derive(Debug, Args)]
pub struct JobId {
    id: String,
}

#[derive(Debug, Args)]
pub struct List {
    /// Most jobs to list (1-1000)
    #[arg(long, default_value_t = 100, value_name = "N", value_parser = parse_limit, allow_negative_numbers = true)]
    limit: u32,
    /// Continue after this job id, as the previous page ended
    #[arg(long, value_name = "ID")]
    after: Option<String>,
}

#[derive(Debug, Args)]
pub struct Runnable {
    /// Most ids to list (1-1000)
    #[arg(long, default_value_t = 100, value_name = "N", value_parser = parse_limit, allow_negative_numbers = true)]
    limit: u32,
}

/// What a job does to each task: exactly one of the action flags
/// (`--priority` and `--due`/`--no-due` together are one update).
#[derive(Debug, Args)]
#[group(id = "action", required = true, multiple = true)]
pub struct ActionArgs {
    /// Put each claimed task back in its queue (`unassign`)
    #[arg(long)]
    release: bool,
    /// Hand each task to this actor (`assign`, without a lease)
    #[arg(long, value_name = "ACTOR")]
    assign_to: Option<String>,
    /// With --assign-to: the roles the actor acts in (repeat, or list
    /// several after one --roles)
    #[arg(long, value_name = "ROLE", num_args = 1.., requires = "assign_to")]
    roles: Vec<String>,
    /// With --assign-to: assign even where the actor holds none of the
    /// task's candidate roles
    #[arg(long, requires = "assign_to")]
    override_roles: bool,
    /// Change each task's priority (`update`)
    #[arg(long, value_enum, value_name = "P")]
    priority: Option<PriorityArg>,
    /// Move each task's due time here (`update`; RFC 3339 or integer
    /// milliseconds)
    #[arg(long, value_name = "TIME", value_parser = parse_time, allow_negative_numbers = true, conflicts_with = "no_due")]
    due: Option<Timestamp>,
    /// Clear each task's due time (`update`)
    #[arg(long)]
    no_due: bool,
    /// Escalate each task
    #[arg(long)]
    escalate: bool,
    /// Settle each task as withdrawn
    #[arg(long)]
    withdraw: bool,
}

impl ActionArgs {
    fn action(&self) -> Result<JobAction, CliError> {
        let mut actions = Vec::new();
        if self.release {
            actions.push(("--release", JobAction::Release));
        }
        if let Some(to) = &self.assign_to {
            let assign = JobAssign {
                to: to.clone(),
                roles: self.roles.clone(),
                override_roles: self.override_roles,
            };
            actions.push(("--assign-to", JobAction::Assign(assign)));
        }
        let due_at = match (self.due, self.no_due) {
            (Some(t), _) => Some(Some(t)),
            (None, true) => Some(None),
            (None, false) => None,
        };
        if self.priority.is_some() || due_at.is_some() {
            let changes = TaskChanges {
                priority: self.priority.map(Priority::from),
                due_at,
                ..TaskChanges::default()
            };
            actions.push(("--priority/--due", JobAction::Update(changes)));
        }
        if self.escalate {
            actions.push(("--escalate", JobAction::Escalate));
        }
        if self.withdraw {
            actions.push(("--withdraw", JobAction::Withdraw));
        }
        match actions.len() {
            1 => Ok(actions.remove(0).1),
            // `--roles` or `--override-roles` without `--assign-to`, which
            // clap refuses before this; said again rather than assumed.
            0 => Err(CliError::Usage {
                message: "a job needs an action: --release, --assign-to, --priority, --due, \
                          --no-due, --escalate or --withdraw"
                    .into(),
                argument: None,
            }),
            _ => Err(CliError::Usage {
                message: format!(
                    "a job does one thing: {} given together",
                    actions
                        .iter()
                        .map(|(flag, _)| *flag)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                argument: Some(actions[1].0.to_owned()),
            }),
        }
    }
}

#[derive(Debug, Args)]
pub struct Start {
    /// The job's id (1-256 characters, unique in the tenant, even after it
    /// ends) [default: a UUIDv7, time-ordered]
    #[arg(long, value_name = "ID")]
    id: Option<String>,
    #[command(flatten)]
    filter: FilterArgs,
    #[command(flatten)]
    action: ActionArgs,
    /// Who starts it, recorded as `by` of each change where the verb takes
    /// one
    #[arg(long, value_name = "ACTOR")]
    by: Option<String>,
    /// Only start it: print the job and leave its steps to `jobs run` (or
    /// a sweeper)
    #[arg(long)]
    detach: bool,
}

impl Start {
    fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        let action = self.action.action()?;
        let now = values::now();
        let id = match &self.id {
            Some(id) => id.clone(),
            None => fresh_id(),
        };
        let t = cx.tenant()?;
        let job = t
            .start_job(&id, &self.filter.filter(), &action, self.by.as_deref(), now)
            .map_err(start_flagged)?;
        let job = if self.detach {
            job
        } else {
            drive(cx, &t, job, out)?
        };
        cx.answer(
            &Jobs {
                list: vec![job],
                one: true,
                ran: !self.detach,
            },
            out,
        )
    }
}

/// A UUIDv7, as `serve` makes them: time-ordered, and unique without
/// asking the store, so two starts at once never race for an id.
fn fresh_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// The engine names the field of a start it refuses; the command line
/// names the flag that set it.
fn start_flagged(e: Error) -> CliError {
    const FLAGS: [(&str, &str); 6] = [
        ("id", "--id"),
        ("by", "--by"),
        ("action.assign.to", "--assign-to"),
        ("action.assign.roles", "--roles"),
        ("changes.due-at", "--due"),
        ("action.update", "--priority/--due"),
    ];
    match e {
        Error::Store(StoreError::Invalid(m)) => {
            match FLAGS.iter().find(|(field, _)| {
                m.strip_prefix(field)
                    .is_some_and(|rest| rest.starts_with([':', '.', ' ', '[']))
            }) {
                Some((_, flag)) => CliError::Input(format!("{flag}: {m}")),
                None => flagged(Error::Store(StoreError::Invalid(m))),
            }
        }
        other => flagged(other),
    }
}

/// Steps `job` until it ends (done, or cancelled by someone else), each
/// step its own transaction, showing progress as it goes.
fn drive(cx: &Context, t: &Tenant, mut job: Job, out: &mut dyn Write) -> Result<Job, CliError> {
    if !matches!(job.state, JobState::Counting | JobState::Running) {
        // Nothing to step: the answer alone says how it ended.
        return Ok(job);
    }
    let mut shown = Shown::new(cx, &job);
    shown.first(&job, out)?;
    while matches!(job.state, JobState::Counting | JobState::Running) {
        job = t.step_job(&job.id)?;
        shown.update(&job, out)?;
    }
    shown.finish();
    Ok(job)
}

/// The least time between two progress lines: often enough that a script
/// sees a job move, never a line a task.
const LINE_EVERY: Duration = Duration::from_millis(100);
/// The least time between two text lines when stderr is no terminal.
const TEXT_EVERY: Duration = Duration::from_millis(500);

/// How a running job's progress is shown.
enum Shown {
    None,
    /// A bar on stderr, at a terminal.
    Bar(ProgressBar),
    /// A line of text on stderr now and then (`--progress always`, no
    /// terminal).
    Text(Instant),
    /// The job as a JSON line on stdout now and then (`--json`).
    Json(Instant),
}

impl Shown {
    fn new(cx: &Context, job: &Job) -> Shown {
        let g = cx.globals();
        if g.json {
            return match g.progress {
                ProgressArg::Never => Shown::None,
                _ => Shown::Json(Instant::now()),
            };
        }
        let wanted = match g.progress {
            ProgressArg::Never => false,
            ProgressArg::Always => true,
            ProgressArg::Auto => std::io::stderr().is_terminal(),
        };
        if !wanted {
            Shown::None
        } else if std::io::stderr().is_terminal() {
            let bar = ProgressBar::with_draw_target(Some(job.total), ProgressDrawTarget::stderr());
            let style = ProgressStyle::with_template(
                "{msg} [{elapsed_precise}] {wide_bar} {pos}/{len} ({eta})",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar());
            bar.set_style(style);
            Shown::Bar(bar)
        } else {
            Shown::Text(Instant::now())
        }
    }

    /// The job as it starts: every script's first line names it.
    fn first(&mut self, job: &Job, out: &mut dyn Write) -> Result<(), CliError> {
        if let Shown::Json(_) = self {
            json_line(job, out)?;
        }
        self.update(job, out)
    }

    fn update(&mut self, job: &Job, out: &mut dyn Write) -> Result<(), CliError> {
        let taken = job.done + job.skipped + job.failed;
        match self {
            Shown::None => {}
            Shown::Bar(bar) => {
                bar.set_length(job.total);
                bar.set_position(taken);
                bar.set_message(format!("{} {}", job.id, job.state.name()));
            }
            Shown::Text(last) => {
                if last.elapsed() >= TEXT_EVERY {
                    *last = Instant::now();
                    // A line that cannot be written is not worth failing for.
                    let _ = writeln!(
                        std::io::stderr().lock(),
                        "leasehold jobs: {} {}: {}",
                        job.id,
                        job.state.name(),
                        counts_text(job)
                    );
                }
            }
            Shown::Json(last) => {
                let ended = matches!(job.state, JobState::Done | JobState::Cancelled);
                // The last state is the answer's line, not a progress line.
                if !ended && last.elapsed() >= LINE_EVERY {
                    *last = Instant::now();
                    json_line(job, out)?;
                }
            }
        }
        Ok(())
    }

    fn finish(self) {
        if let Shown::Bar(bar) = self {
            bar.finish_and_clear();
        }
    }
}

/// One progress line: the job as it stands, flushed at once so a script
/// reading the pipe sees it.
fn json_line(job: &Job, out: &mut dyn Write) -> Result<(), CliError> {
    writeln!(out, "{}", job_json(job))?;
    out.flush()?;
    Ok(())
}

/// The ids of runnable jobs.
struct Runnables(Vec<String>);

impl crate::answer::Answer for Runnables {
    fn json(&self) -> serde_json::Result<String> {
        serde_json::to_string(&self.0)
    }

    fn human(&self) -> String {
        if self.0.is_empty() {
            return "No job has work left.\n".to_owned();
        }
        let mut out = self.0.join("\n");
        out.push('\n');
        out
    }
}
