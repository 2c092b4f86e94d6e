//! Every exported function of the world, declared once: its interface, its
//! WIT name and whether it writes. The engine resolves each one's export
//! when it compiles the component, so a call names its verb by value, never
//! by a string looked up at call time, and a writing verb cannot be run on a
//! read snapshot. It owns the list; it must never be edited without the WIT,
//! and its tests check the WIT, the `Tenant` methods and the scenario
//! runner against it. The front ends name verbs by [`Verb`] too (the HTTP
//! service's operations, metrics and budgets), never by restated strings,
//! and check themselves against [`Verb::ALL`].

use crate::storage::backend::Mode;

/// The WIT package every interface below belongs to.
pub(crate) const PACKAGE: &str = "leasehold:engine";
pub(crate) const VERSION: &str = "0.3.0";

macro_rules! verbs {
    ($($verb:ident => $interface:literal $name:literal $mode:ident,)+) => {
        /// One exported function of the `leasehold:engine/engine` world.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum Verb {
            $(#[doc = concat!("`", $interface, ".", $name, "`")] $verb,)+
        }

        impl Verb {
            /// Every verb, in the order the table declares them.
            pub const ALL: &[Verb] = &[$(Verb::$verb,)+];

            /// The exporting interface, e.g. `tasks`.
            pub fn interface(self) -> &'static str {
                match self {
                    $(Verb::$verb => $interface,)+
                }
            }

            /// The function's WIT name, e.g. `take-over`.
            pub fn name(self) -> &'static str {
                match self {
                    $(Verb::$verb => $name,)+
                }
            }

            /// Whether the verb may write: a read verb runs on a snapshot.
            pub(crate) fn mode(self) -> Mode {
                match self {
                    $(Verb::$verb => Mode::$mode,)+
                }
            }

            /// The variant's own name, e.g. `TakeOver`, for the checks that
            /// find where each verb is called.
            #[cfg(test)]
            pub(crate) fn ident(self) -> &'static str {
                match self {
                    $(Verb::$verb => stringify!($verb),)+
                }
            }
        }
    };
}

verbs! {
    Open => "tasks" "open" Write,
    Get => "tasks" "get" Read,
    Claim => "tasks" "claim" Write,
    Release => "tasks" "release" Write,
    TakeOver => "tasks" "take-over" Write,
    Renew => "tasks" "renew" Write,
    ReclaimLapsed => "tasks" "reclaim-lapsed" Write,
    ExpireOverdue => "tasks" "expire-overdue" Write,
    ClaimNext => "tasks" "claim-next" Write,
    ClaimBatch => "tasks" "claim-batch" Write,
    SettleAndClaim => "tasks" "settle-and-claim" Write,
    Settle => "tasks" "settle" Write,
    WithdrawRun => "tasks" "withdraw-run" Write,
    Escalate => "tasks" "escalate" Write,
    Queue => "tasks" "queue" Read,
    ForCase => "tasks" "for-case" Read,
    OpenCount => "tasks" "open-count" Read,
    LeasedCount => "tasks" "leased-count" Read,
    NextLeaseEnd => "tasks" "next-lease-end" Read,
    NextWake => "tasks" "next-wake" Read,
    Overdue => "tasks" "overdue" Read,
    Held => "tasks" "held" Read,
    Update => "tasks" "update" Write,
    Assign => "tasks" "assign" Write,
    Unassign => "tasks" "unassign" Write,
    Delegate => "tasks" "delegate" Write,
    Note => "tasks" "note" Write,
    DefineKind => "kinds" "define-kind" Write,
    GetKind => "kinds" "get-kind" Read,
    ListKinds => "kinds" "list-kinds" Read,
    RemoveKind => "kinds" "remove-kind" Write,
    Arm => "timers" "arm" Write,
    ClaimDue => "timers" "claim-due" Write,
    Disarm => "timers" "disarm" Write,
    DisarmRun => "timers" "disarm-run" Write,
    PendingCount => "timers" "pending-count" Read,
    NextDue => "timers" "next-due" Read,
    Reschedule => "timers" "reschedule" Write,
    TimersOf => "timers" "timers-of" Read,
    DueBetween => "timers" "due-between" Read,
    Seal => "runs" "seal" Write,
    IsSealed => "runs" "is-sealed" Read,
    Check => "admin" "check" Read,
    History => "changes" "history" Read,
    FeedPlace => "changes" "entry-place" Read,
    Feed => "changes" "feed" Read,
    Trim => "changes" "trim" Write,
    AddSchedule => "schedules" "add-schedule" Write,
    RemoveSchedule => "schedules" "remove-schedule" Write,
    PauseSchedule => "schedules" "pause-schedule" Write,
    ResumeSchedule => "schedules" "resume-schedule" Write,
    TriggerSchedule => "schedules" "trigger-schedule" Write,
    NextOccurrences => "schedules" "next-occurrences" Read,
    GetSchedule => "schedules" "get-schedule" Read,
    ListSchedules => "schedules" "list-schedules" Read,
    TzVersion => "schedules" "tz-version" Read,
    AddSubscription => "subscriptions" "add-subscription" Write,
    GetSubscription => "subscriptions" "get-subscription" Read,
    ListSubscriptions => "subscriptions" "list-subscriptions" Read,
    ChangeSubscription => "subscriptions" "change-subscription" Write,
    SetSubscriptionState => "subscriptions" "set-subscription-state" Write,
    RotateSubscriptionKey => "subscriptions" "rotate-subscription-key" Write,
    RemoveSubscription => "subscriptions" "remove-subscription" Write,
    AdvanceSubscription => "subscriptions" "advance-subscription" Write,
    RewindSubscription => "subscriptions" "rewind-subscription" Write,
    LeaseSubscription => "subscriptions" "lease-subscription" Write,
    ReleaseSubscription => "subscriptions" "release-subscription" Write,
    RecordSubscriptionAttempts => "subscriptions" "record-subscription-attempts" Write,
    Search => "search" "search" Read,
    Count => "search" "count" Read,
    BuildSearchIndex => "search" "build-search-index" Write,
    PutView => "search" "put-view" Write,
    GetView => "search" "get-view" Read,
    ListViews => "search" "list-views" Read,
    DeleteView => "search" "delete-view" Write,
    StartJob => "jobs" "start-job" Write,
    StepJob => "jobs" "step-job" Write,
    CancelJob => "jobs" "cancel-job" Write,
    GetJob => "jobs" "get-job" Read,
    ListJobs => "jobs" "list-jobs" Read,
    RunnableJobs => "jobs" "runnable-jobs" Read,
}

/// One exported function of the world, as the one table above declares it.
/// Every `Tenant` method, CLI command and HTTP route that reaches a verb is
/// checked against this list, so a verb added to the WIT and the table
/// cannot be left out of them unnoticed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExportedFunction {
    /// The exporting interface, e.g. `tasks`.
    pub interface: &'static str,
    /// The function's WIT name, e.g. `take-over`; the `Tenant` method is
    /// the same name in snake case.
    pub name: &'static str,
    /// Whether the function may write.
    pub writes: bool,
}

/// Every exported function of the `leasehold:engine/engine` world, in the
/// order the table declares them.
pub fn exported_functions() -> Vec<ExportedFunction> {
    Verb::ALL
        .iter()
        .map(|v| ExportedFunction {
            interface: v.interface(),
            name: v.name(),
            writes: v.writes(),
        })
        .collect()
}

impl Verb {
    /// The verb whose WIT name is `name`, if there is one.
    pub fn named(name: &str) -> Option<Verb> {
        Verb::ALL.iter().copied().find(|v| v.name() == name)
    }

    /// Whether the verb may write (a read verb runs on a snapshot).
    pub fn writes(self) -> bool {
        self.mode() == Mode::Write
    }

    /// The verb's place in [`Verb::ALL`], which indexes per-verb tables.
    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// The interface's full name, e.g. `leasehold:engine/tasks@0.3.0`.
    pub(crate) fn interface_name(self) -> String {
        format!("{PACKAGE}/{}@{VERSION}", self.interface())
    }

    /// Walks the whole tenant, so it runs under the longer deadline.
    pub fn is_long(self) -> bool {
        self == Verb::Check
    }

    /// The index head the verb sweeps, if it sweeps one: calls on one line
    /// read what each other write (see `Backend::begin_in_line`).
    pub(crate) fn line(self) -> Option<&'static str> {
        match self {
            Verb::ClaimNext | Verb::ClaimBatch | Verb::SettleAndClaim | Verb::ReclaimLapsed => {
                Some("tasks")
            }
            Verb::ClaimDue => Some("timers"),
            Verb::ExpireOverdue => Some("overdue"),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The WIT says of each exported function whether it writes; the table
    /// must agree, or a writing verb would run on a read snapshot.
    #[test]
    fn every_verbs_mode_is_what_the_wit_documents() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../wit");
        for verb in Verb::ALL {
            let text = std::fs::read_to_string(dir.join(format!("{}.wit", verb.interface())))
                .expect("the interface's WIT file");
            let decl = format!("    {}: func(", verb.name());
            let at = text
                .find(&decl)
                .unwrap_or_else(|| panic!("{} is not in the WIT", verb.name()));
            let doc = &text[..at];
            let doc = &doc[doc.rfind("\n\n").unwrap_or(0)..];
            let documented = if doc.contains("/// Writes:") {
                Mode::Write
            } else if doc.contains("/// Reads only:") {
                Mode::Read
            } else {
                panic!("the WIT does not say whether {} writes", verb.name())
            };
            assert_eq!(verb.mode(), documented, "{}", verb.name());
        }
    }

    /// The other way round: every function the WIT exports is in the table.
    #[test]
    fn every_function_the_wit_exports_is_in_the_table() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../wit");
        for interface in [
            "tasks",
            "kinds",
            "timers",
            "runs",
            "admin",
            "changes",
            "schedules",
            "subscriptions",
            "search",
            "jobs",
        ] {
            let text = std::fs::read_to_string(dir.join(format!("{interface}.wit")))
                .expect("the interface's WIT file");
            for line in text.lines() {
                let Some((name, _)) = line.trim().split_once(": func(") else {
                    continue;
                };
                assert!(
                    Verb::ALL
                        .iter()
                        .any(|v| v.interface() == interface && v.name() == name),
                    "{interface}.{name} is exported by the WIT but not in the verb table"
                );
            }
        }
    }

    /// Each verb has one `Tenant` method, named as the WIT names it in snake
    /// case, in the file of its interface (`tenant/tasks.rs` for a verb of
    /// `tasks`), and that method calls that verb, which no other method does.
    #[test]
    fn every_verb_has_its_tenant_method() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/tenant");
        let files: Vec<(String, String)> = std::fs::read_dir(&dir)
            .expect("the tenant's files")
            .map(|e| {
                let path = e.expect("a file").path();
                let stem = path
                    .file_stem()
                    .and_then(|s| s.to_str())
                    .expect("a file name")
                    .to_owned();
                (stem, std::fs::read_to_string(&path).expect("readable"))
            })
            .collect();
        for verb in Verb::ALL {
            // `settle` without a decision delegates to `decide`, which
            // makes the call with one or none.
            let snake = match verb {
                Verb::Settle => "decide".to_owned(),
                _ => verb.name().replace('-', "_"),
            };
            let call = format!("Verb::{},", verb.ident());
            let (_, text) = files
                .iter()
                .find(|(stem, _)| stem == verb.interface())
                .unwrap_or_else(|| panic!("no tenant/{}.rs for {}", verb.interface(), verb.name()));
            let body = text
                .split("    pub fn ")
                .skip(1)
                .find(|m| m.starts_with(&format!("{snake}(")))
                .unwrap_or_else(|| {
                    panic!(
                        "tenant/{}.rs has no method {snake} for {}",
                        verb.interface(),
                        verb.name()
                    )
                });
            assert!(
                body.contains(&call),
                "Tenant::{snake} does not call Verb::{}",
                verb.ident()
            );
            let calls: usize = files.iter().map(|(_, t)| t.matches(&call).count()).sum();
            assert_eq!(
                calls,
                1,
                "Verb::{} is called by more than one Tenant method",
                verb.ident()
            );
        }
    }

    /// (name, interface, writes) of every verb, as this table declares them.
    fn declared() -> Vec<(String, String, bool)> {
        let mut out: Vec<(String, String, bool)> = Verb::ALL
            .iter()
            .map(|v| {
                (
                    v.name().to_owned(),
                    v.interface().to_owned(),
                    v.mode() == Mode::Write,
                )
            })
            .collect();
        out.sort();
        out
    }

    /// The text between `open` and the next `close` in `s`, and what follows.
    fn between<'a>(s: &'a str, open: &str, close: char) -> Option<(&'a str, &'a str)> {
        let rest = &s[s.find(open)? + open.len()..];
        let end = rest.find(close)?;
        Some((&rest[..end], &rest[end + close.len_utf8()..]))
    }

    /// A WIT name in JavaScript's spelling: `take-over` is `takeOver`.
    fn camel(name: &str) -> String {
        let mut out = String::new();
        let mut up = false;
        for c in name.chars() {
            if c == '-' {
                up = true;
            } else if up {
                out.extend(c.to_uppercase());
                up = false;
            } else {
                out.push(c);
            }
        }
        out
    }

    /// The JavaScript host restates the table in its calls, one per method
    /// (`this.#call('take-over', W, ['tasks', 'takeOver', …])`): the same
    /// verbs, each once, of the same interface and mode, calling the
    /// export jco names for it.
    #[test]
    fn the_javascript_hosts_verbs_are_this_table() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("js/src/tenant.js");
        let text = std::fs::read_to_string(&path).expect("host/js/src/tenant.js");
        let mut found = Vec::new();
        for line in text.lines() {
            let Some((name, rest)) = between(line, "this.#call('", '\'') else {
                continue;
            };
            let (mode, rest) = between(rest, ", ", ',')
                .unwrap_or_else(|| panic!("no mode in the call of {name}: {line}"));
            let (interface, rest) = between(rest, "['", '\'')
                .unwrap_or_else(|| panic!("no interface in the call of {name}: {line}"));
            let (export, _) = between(rest, ", '", '\'')
                .unwrap_or_else(|| panic!("no export in the call of {name}: {line}"));
            assert_eq!(export, camel(name), "the export {name} calls: {line}");
            let writes = match mode {
                "W" => true,
                "R" => false,
                other => panic!("the call of {name} has mode {other:?}: {line}"),
            };
            found.push((name.to_owned(), interface.to_owned(), writes));
        }
        found.sort();
        assert_eq!(
            found,
            declared(),
            "host/js/src/tenant.js and host/src/verbs.rs"
        );
    }

    /// The Python host restates the table as `VERBS`
    /// (`"take-over": ("tasks", "write"),`): the same verbs, each once, of
    /// the same interface and mode, and its methods call exactly these.
    #[test]
    fn the_python_hosts_verbs_are_this_table() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("python/src/leasehold/engine.py");
        let text = std::fs::read_to_string(&path).expect("host/python/src/leasehold/engine.py");
        let table = text
            .split_once("\nVERBS:")
            .and_then(|(_, rest)| rest.split_once("\n}"))
            .map(|(table, _)| table)
            .expect("a VERBS table in engine.py");
        let mut found = Vec::new();
        for line in table.lines().skip(1) {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (name, rest) =
                between(line, "\"", '"').unwrap_or_else(|| panic!("no verb in {line:?}"));
            let (interface, rest) = between(rest, "(\"", '"')
                .unwrap_or_else(|| panic!("no interface for {name}: {line:?}"));
            let (mode, _) =
                between(rest, "\"", '"').unwrap_or_else(|| panic!("no mode for {name}: {line:?}"));
            let writes = match mode {
                "write" => true,
                "read" => false,
                other => panic!("{name} has mode {other:?}"),
            };
            found.push((name.to_owned(), interface.to_owned(), writes));
        }
        found.sort();
        assert_eq!(found, declared(), "engine.py's VERBS and host/src/verbs.rs");
        // The verb each method calls: the first string after `self._call(`.
        let mut called: Vec<&str> = text
            .split("self._call(")
            .skip(1)
            .filter_map(|rest| rest.trim_start().strip_prefix('"')?.split_once('"'))
            .map(|(name, _)| name)
            .collect();
        called.sort_unstable();
        called.dedup();
        let named: Vec<&str> = found.iter().map(|(name, _, _)| name.as_str()).collect();
        assert_eq!(called, named, "the verbs the Python host's methods call");
    }

    /// The scenario suite's runner can make every call.
    #[test]
    fn the_scenario_runner_makes_every_call() {
        let text = include_str!("testkit/scenarios.rs");
        for verb in Verb::ALL {
            assert!(
                text.contains(&format!("\"{}\" =>", verb.name())),
                "the scenario runner cannot call {}",
                verb.name()
            );
        }
    }

    #[test]
    fn every_verb_sits_at_its_index() {
        for (i, v) in Verb::ALL.iter().enumerate() {
            assert_eq!(v.index(), i, "{v:?}");
        }
    }
}
