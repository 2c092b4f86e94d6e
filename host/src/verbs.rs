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
pub(crate) const VERSION: &str = "0.2.0";

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
    Settle => "tasks" "settle" Write,
    WithdrawRun => "tasks" "withdraw-run" Write,
    Escalate => "tasks" "escalate" Write,
    Queue => "tasks" "queue" Read,
    ForCase => "tasks" "for-case" Read,
    OpenCount => "tasks" "open-count" Read,
    LeasedCount => "tasks" "leased-count" Read,
    NextLeaseEnd => "tasks" "next-lease-end" Read,
    Overdue => "tasks" "overdue" Read,
    Arm => "timers" "arm" Write,
    ClaimDue => "timers" "claim-due" Write,
    Disarm => "timers" "disarm" Write,
    DisarmRun => "timers" "disarm-run" Write,
    PendingCount => "timers" "pending-count" Read,
    NextDue => "timers" "next-due" Read,
    Seal => "runs" "seal" Write,
    IsSealed => "runs" "is-sealed" Read,
    Check => "admin" "check" Read,
    History => "changes" "history" Read,
    FeedPlace => "changes" "entry-place" Read,
    Feed => "changes" "feed" Read,
    Trim => "changes" "trim" Write,
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

    /// The interface's full name, e.g. `leasehold:engine/tasks@0.2.0`.
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
            Verb::ClaimNext | Verb::ReclaimLapsed => Some("tasks"),
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
        for interface in ["tasks", "timers", "runs", "admin", "changes"] {
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
    /// case, and that method calls that verb.
    #[test]
    fn every_verb_has_its_tenant_method() {
        let text = include_str!("tenant.rs");
        let methods: Vec<&str> = text.split("    pub fn ").skip(1).collect();
        for verb in Verb::ALL {
            let snake = verb.name().replace('-', "_");
            let body = methods
                .iter()
                .find(|m| m.starts_with(&format!("{snake}(")))
                .unwrap_or_else(|| panic!("Tenant has no method {snake} for {}", verb.name()));
            assert!(
                body.contains(&format!("Verb::{},", verb.ident())),
                "Tenant::{snake} does not call Verb::{}",
                verb.ident()
            );
            assert_eq!(
                text.matches(&format!("Verb::{},", verb.ident())).count(),
                1,
                "Verb::{} is called by more than one Tenant method",
                verb.ident()
            );
        }
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
