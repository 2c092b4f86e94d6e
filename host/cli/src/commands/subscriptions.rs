//! `leasehold subscription …`: webhook subscriptions, where the tenant's
//! changes are pushed, signed (`add-subscription`, `get-subscription`,
//! `list-subscriptions`, `change-subscription`, `set-subscription-state`
//! with `pause-subscription` and `resume-subscription` as the everyday
//! spellings of it, `rotate-subscription-key`, `rewind-subscription`,
//! `remove-subscription`; `add`, `get`, `list`, `change`, `pause`,
//! `resume`, `rotate`, `replay` and `remove` for short). Whether a URL, a
//! filter or a position is acceptable is the rules'; this module reads the
//! flags, makes the ids and the signing secrets, asks with the clock's
//! `now`, and reports (`subscription_answers`). A secret it makes is
//! printed once, in the answer of the call that stored it; it must never
//! print a key the store holds, and never deliver anything (delivery is
//! the delivery engine's, `leasehold-webhooks`).

use std::io::Write;

use clap::{Args, Subcommand, ValueEnum};
use leasehold_host::{Error, StoreError, SubFilter, SubState};
use leasehold_webhooks::Secret;

use crate::commands::queue::PageArgs;
use crate::commands::subscription_answers::{Listed, One, Removed, WithSecret};
use crate::context::Context;
use crate::error::CliError;
use crate::values::{self, parse_duration_ms};

/// How long the old keys sign beside a new one when `--overlap` is not
/// given: a day, for receivers to take up the new secret.
const DEFAULT_OVERLAP: &str = "24h";

#[derive(Debug, Subcommand)]
pub enum SubscriptionCommand {
    /// Add a subscription, active from the feed's head (or --from), with a
    /// new signing secret printed once
    #[command(name = "add-subscription", visible_alias = "add")]
    AddSubscription(AddSubscription),
    /// Show a subscription: where it sends, what, how far it has come, how
    /// many keys sign and until when (never the keys)
    #[command(name = "get-subscription", visible_alias = "get")]
    GetSubscription(Named),
    /// The tenant's subscriptions, by id
    #[command(name = "list-subscriptions", visible_alias = "list")]
    ListSubscriptions(PageArgs),
    /// Change a subscription's URL, its filter or both; the flags not given
    /// keep what it has
    #[command(name = "change-subscription", visible_alias = "change")]
    ChangeSubscription(Change),
    /// Set a subscription's state and its note (pause-subscription and
    /// resume-subscription say the common cases)
    #[command(name = "set-subscription-state")]
    SetSubscriptionState(SetState),
    /// Pause a subscription: nothing is sent until it is resumed, and the
    /// feed keeps what it is owed
    #[command(name = "pause-subscription", visible_alias = "pause")]
    PauseSubscription(Pause),
    /// Resume a paused or failing subscription from where it stopped
    #[command(name = "resume-subscription", visible_alias = "resume")]
    ResumeSubscription(Resume),
    /// Sign with a new secret, printed once; the old keys sign beside it
    /// for --overlap
    #[command(name = "rotate-subscription-key", visible_alias = "rotate")]
    RotateSubscriptionKey(Rotate),
    /// Replay: send again from a position (--from) or from the feed's
    /// start; active again, its note cleared
    #[command(name = "rewind-subscription", visible_alias = "replay")]
    RewindSubscription(Replay),
    /// Remove a subscription; its deliveries stop
    #[command(name = "remove-subscription", visible_alias = "remove")]
    RemoveSubscription(Named),
}

impl SubscriptionCommand {
    /// The verbs the command calls, by their WIT names.
    pub fn verbs(&self) -> &'static [&'static str] {
        match self {
            SubscriptionCommand::AddSubscription(_) => &["add-subscription"],
            SubscriptionCommand::GetSubscription(_) => &["get-subscription"],
            SubscriptionCommand::ListSubscriptions(_) => &["list-subscriptions"],
            // A filter flag is applied to the filter it has: read, then
            // changed at the revision read.
            SubscriptionCommand::ChangeSubscription(_) => {
                &["change-subscription", "get-subscription"]
            }
            SubscriptionCommand::SetSubscriptionState(_)
            | SubscriptionCommand::PauseSubscription(_)
            | SubscriptionCommand::ResumeSubscription(_) => &["set-subscription-state"],
            SubscriptionCommand::RotateSubscriptionKey(_) => &["rotate-subscription-key"],
            SubscriptionCommand::RewindSubscription(_) => &["rewind-subscription"],
            SubscriptionCommand::RemoveSubscription(_) => &["remove-subscription"],
        }
    }

    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        match self {
            SubscriptionCommand::AddSubscription(c) => c.run(cx, out),
            SubscriptionCommand::GetSubscription(c) => {
                match cx.tenant()?.get_subscription(&c.id)? {
                    Some(s) => cx.answer(&One(s), out),
                    None => Err(missing(&c.id)),
                }
            }
            SubscriptionCommand::ListSubscriptions(p) => {
                let page = cx
                    .tenant()?
                    .list_subscriptions(p.limit, p.after.as_deref())?;
                cx.answer(&Listed(page), out)
            }
            SubscriptionCommand::ChangeSubscription(c) => c.run(cx, out),
            SubscriptionCommand::SetSubscriptionState(c) => {
                let state = c.state.into();
                set_state(
                    cx,
                    &c.id,
                    state,
                    c.note.as_deref(),
                    c.guard.if_revision,
                    out,
                )
            }
            SubscriptionCommand::PauseSubscription(c) => set_state(
                cx,
                &c.id,
                SubState::Paused,
                c.note.as_deref(),
                c.guard.if_revision,
                out,
            ),
            SubscriptionCommand::ResumeSubscription(c) => {
                set_state(cx, &c.id, SubState::Active, None, c.guard.if_revision, out)
            }
            SubscriptionCommand::RotateSubscriptionKey(c) => c.run(cx, out),
            SubscriptionCommand::RewindSubscription(c) => {
                let replayed = cx
                    .tenant()?
                    .rewind_subscription(&c.id, c.from.as_deref())
                    .map_err(|e| absent(e, &c.id))?;
                cx.answer(&One(replayed), out)
            }
            SubscriptionCommand::RemoveSubscription(c) => {
                let removed = cx.tenant()?.remove_subscription(&c.id)?;
                cx.answer(&Removed { id: &c.id, removed }, out)
            }
        }
    }
}

fn set_state(
    cx: &Context,
    id: &str,
    state: SubState,
    note: Option<&str>,
    expected: Option<u64>,
    out: &mut dyn Write,
) -> Result<u8, CliError> {
    let set = cx
        .tenant()?
        .set_subscription_state(id, state, note, expected)
        .map_err(|e| absent(e, id))?;
    cx.answer(&One(set), out)
}

/// No such subscription: a refusal naming it, nothing written.
fn missing(id: &str) -> CliError {
    CliError::Refused {
        error: "not_found",
        message: format!("no subscription {id}; nothing changed"),
        detail: Some(id.to_owned()),
    }
}

/// The engine's not-found, said as a subscription's.
fn absent(e: Error, id: &str) -> CliError {
    match e {
        Error::Store(StoreError::NotFound(_)) => missing(id),
        e => CliError::Engine(e),
    }
}

/// A new signing secret, from the system's random source, in the form
/// `leasehold-webhooks` signs with and a receiver configures (`whsec_…`).
fn new_secret() -> Result<Secret, CliError> {
    Secret::generate().map_err(|e| CliError::Failed(format!("cannot make a signing secret: {e}")))
}

/// A new subscription id: `sub_` and 16 random hex digits.
fn new_id() -> Result<String, CliError> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes)
        .map_err(|e| CliError::Failed(format!("the system's random source failed: {e}")))?;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!("sub_{hex}"))
}

/// The filter flags, on `add-subscription` (from the default: every change
/// of tasks and timers) and `change-subscription` (from what it has). A
/// flag not given leaves its part as it was.
#[derive(Debug, Args)]
pub struct FilterArgs {
    /// Send changes of tasks [default on add]
    #[arg(long, overrides_with = "no_tasks")]
    tasks: bool,
    /// Send no changes of tasks
    #[arg(long, overrides_with = "tasks")]
    no_tasks: bool,
    /// Send changes of timers [default on add]
    #[arg(long, overrides_with = "no_timers")]
    timers: bool,
    /// Send no changes of timers
    #[arg(long, overrides_with = "timers")]
    no_timers: bool,
    /// Only changes made by this verb (claim, settle, arm, claim-due...);
    /// repeat for several. Replaces the verbs it had
    #[arg(long = "verb", value_name = "VERB", conflicts_with = "any_verb")]
    verbs: Vec<String>,
    /// Changes made by any verb (clears --verb)
    #[arg(long)]
    any_verb: bool,
    /// Only tasks of this kind (timers have none); repeat for several.
    /// Replaces the kinds it had
    #[arg(long = "kind", value_name = "KIND", conflicts_with = "any_kind")]
    kinds: Vec<String>,
    /// Tasks of any kind (clears --kind)
    #[arg(long)]
    any_kind: bool,
    /// Only tasks and timers of this run; repeat for several. Replaces the
    /// runs it had
    #[arg(long = "run", value_name = "RUN", conflicts_with = "any_run")]
    runs: Vec<String>,
    /// Tasks and timers of any run (clears --run)
    #[arg(long)]
    any_run: bool,
    /// Of tasks, only the change that settled each
    #[arg(long, overrides_with = "every_task_change")]
    settling_only: bool,
    /// Every change of a task, not only the one that settled it (clears
    /// --settling-only)
    #[arg(long, overrides_with = "settling_only")]
    every_task_change: bool,
}

impl FilterArgs {
    /// Whether any filter flag was given.
    fn given(&self) -> bool {
        self.tasks
            || self.no_tasks
            || self.timers
            || self.no_timers
            || !self.verbs.is_empty()
            || self.any_verb
            || !self.kinds.is_empty()
            || self.any_kind
            || !self.runs.is_empty()
            || self.any_run
            || self.settling_only
            || self.every_task_change
    }

    /// `base` with the flags given applied.
    fn apply(&self, base: &SubFilter) -> SubFilter {
        let switch = |on: bool, off: bool, was: bool| {
            if on {
                true
            } else if off {
                false
            } else {
                was
            }
        };
        let list = |given: &[String], any: bool, was: &[String]| {
            if any {
                Vec::new()
            } else if given.is_empty() {
                was.to_vec()
            } else {
                given.to_vec()
            }
        };
        SubFilter {
            tasks: switch(self.tasks, self.no_tasks, base.tasks),
            timers: switch(self.timers, self.no_timers, base.timers),
            verbs: list(&self.verbs, self.any_verb, &base.verbs),
            kinds: list(&self.kinds, self.any_kind, &base.kinds),
            runs: list(&self.runs, self.any_run, &base.runs),
            settling_only: switch(
                self.settling_only,
                self.every_task_change,
                base.settling_only,
            ),
        }
    }
}

/// What a subscription is sent when no flag narrows it: every change of
/// tasks and timers.
fn everything() -> SubFilter {
    SubFilter {
        tasks: true,
        timers: true,
        verbs: Vec::new(),
        kinds: Vec::new(),
        runs: Vec::new(),
        settling_only: false,
    }
}

/// `--if-revision`, on the commands that change a subscription's setup.
#[derive(Clone, Copy, Debug, Args)]
pub struct RevisionGuard {
    /// Change it only if its revision is still N (as get-subscription
    /// printed it); else refused as stale with the current revision, and
    /// nothing is written
    #[arg(long = "if-revision", visible_alias = "expected", value_name = "N")]
    if_revision: Option<u64>,
}

#[derive(Debug, Args)]
pub struct AddSubscription {
    /// Where to send: an absolute https:// (or http://) URL
    #[arg(long)]
    url: String,
    /// The subscription's id (1-256 characters) [default: sub_ and random
    /// hex]
    #[arg(long)]
    id: Option<String>,
    /// Send what follows this feed position (as `feed` prints it; f for the
    /// feed's start) [default: the feed's head, so only changes from now]
    #[arg(long, value_name = "POSITION")]
    from: Option<String>,
    #[command(flatten)]
    filter: FilterArgs,
}

impl AddSubscription {
    fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        let id = match &self.id {
            Some(id) => id.clone(),
            None => new_id()?,
        };
        let filter = self.filter.apply(&everything());
        let secret = new_secret()?;
        let added = cx.tenant()?.add_subscription(
            &id,
            &self.url,
            &filter,
            secret.as_bytes(),
            self.from.as_deref(),
            values::now(),
        )?;
        cx.answer(
            &WithSecret {
                sub: added,
                secret: secret.to_whsec(),
                rotated: false,
            },
            out,
        )
    }
}

#[derive(Debug, Args)]
pub struct Change {
    /// The subscription's id
    id: String,
    /// Send to this URL instead
    #[arg(long)]
    url: Option<String>,
    #[command(flatten)]
    filter: FilterArgs,
    #[command(flatten)]
    guard: RevisionGuard,
}

impl Change {
    fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        if self.url.is_none() && !self.filter.given() {
            return Err(CliError::Input(
                "nothing to change: give --url or a filter flag (--help lists them)".to_owned(),
            ));
        }
        let tenant = cx.tenant()?;
        let (filter, expected) = if self.filter.given() {
            // The flags change the filter it has: read it, and change it
            // only at the revision read, so a change made in between is
            // refused as stale rather than undone.
            let now = tenant
                .get_subscription(&self.id)?
                .ok_or_else(|| missing(&self.id))?;
            let expected = self.guard.if_revision.unwrap_or(now.revision);
            (Some(self.filter.apply(&now.filter)), Some(expected))
        } else {
            (None, self.guard.if_revision)
        };
        let changed = tenant
            .change_subscription(&self.id, self.url.as_deref(), filter.as_ref(), expected)
            .map_err(|e| absent(e, &self.id))?;
        cx.answer(&One(changed), out)
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum StateFlag {
    Active,
    Paused,
    Failing,
    Gone,
}

impl From<StateFlag> for SubState {
    fn from(s: StateFlag) -> SubState {
        match s {
            StateFlag::Active => SubState::Active,
            StateFlag::Paused => SubState::Paused,
            StateFlag::Failing => SubState::Failing,
            StateFlag::Gone => SubState::Gone,
        }
    }
}

#[derive(Debug, Args)]
pub struct SetState {
    /// The subscription's id
    id: String,
    /// The state to set
    #[arg(value_enum)]
    state: StateFlag,
    /// Why it is in that state (1-1024 characters); none clears the note
    #[arg(long)]
    note: Option<String>,
    #[command(flatten)]
    guard: RevisionGuard,
}

#[derive(Debug, Args)]
pub struct Pause {
    /// The subscription's id
    id: String,
    /// Why it is paused (1-1024 characters)
    #[arg(long)]
    note: Option<String>,
    #[command(flatten)]
    guard: RevisionGuard,
}

#[derive(Debug, Args)]
pub struct Resume {
    /// The subscription's id
    id: String,
    #[command(flatten)]
    guard: RevisionGuard,
}

#[derive(Debug, Args)]
pub struct Rotate {
    /// The subscription's id
    id: String,
    /// How long the keys it signs with now go on signing beside the new one
    /// (at most 7 days; 0s stops them at once)
    #[arg(long, value_name = "DURATION", default_value = DEFAULT_OVERLAP, value_parser = parse_duration_ms)]
    overlap: i128,
}

impl Rotate {
    fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        let now = values::now();
        // Past what an i64 holds is past the 7 days the rules allow, and
        // refused by them as such.
        let overlap = i64::try_from(self.overlap).unwrap_or(i64::MAX);
        let secret = new_secret()?;
        let rotated = cx
            .tenant()?
            .rotate_subscription_key(
                &self.id,
                secret.as_bytes(),
                now.saturating_add(overlap),
                now,
            )
            .map_err(|e| absent(e, &self.id))?;
        cx.answer(
            &WithSecret {
                sub: rotated,
                secret: secret.to_whsec(),
                rotated: true,
            },
            out,
        )
    }
}

#[derive(Debug, Args)]
pub struct Replay {
    /// The subscription's id
    id: String,
    /// Send again what follows this feed position (as `feed` prints it)
    /// [default: the feed's start]
    #[arg(long, value_name = "POSITION")]
    from: Option<String>,
}

#[derive(Debug, Args)]
pub struct Named {
    /// The subscription's id
    id: String,
}
