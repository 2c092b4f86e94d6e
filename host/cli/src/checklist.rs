//! The command checklist: the commands, as clap's `Command` tree has them,
//! against the host's one declaration of the verbs
//! ([`leasehold_host::exported_functions`]). Every verb is a command of its
//! own name that calls it (or is listed in [`NOT_OFFERED`] with the
//! reason), and each old spelling still reaches the command it was. A verb
//! added to the WIT and the host's table fails this until the command line
//! reaches it. Test-only; it reads no source.

use clap::{CommandFactory, FromArgMatches};

use crate::Cli;

/// Verbs no command reaches by their own name, and why.
const NOT_OFFERED: &[(&str, &str)] = &[
    ("advance-subscription", DELIVERY),
    ("lease-subscription", DELIVERY),
    ("release-subscription", DELIVERY),
    ("record-subscription-attempts", DELIVERY),
];

/// Why the delivery engine's own verbs are no commands.
const DELIVERY: &str = "a delivery worker's bookkeeping (its position, lease and attempts), done by the delivery engine (leasehold-webhooks, for `leasehold serve`) as it delivers; an operator replays with rewind-subscription";

/// One invocation of each command that calls a verb, with the arguments it
/// needs to parse; the checks below find the command each one names.
const SAMPLES: &[&[&str]] = &[
    &["task", "open", "task.json"],
    &["task", "get", "t"],
    &["task", "claim", "t", "--actor", "a"],
    &["task", "release", "t", "--actor", "a"],
    &["task", "take-over", "t", "--from", "b", "--actor", "a"],
    &["task", "renew", "t", "--actor", "a", "--lease", "5m"],
    &["task", "reclaim-lapsed"],
    &["task", "expire-overdue"],
    &["task", "claim-next", "--actor", "a"],
    &["task", "claim-batch", "--actor", "a", "--count", "5"],
    &["task", "settle-and-claim", "--actor", "a", "--done", "t"],
    &["task", "settle", "t", "completed"],
    &["task", "withdraw-run", "r", "t"],
    &["task", "escalate", "t"],
    &["queue"],
    &["for-case", "c"],
    &["stats", "open-count"],
    &["stats", "leased-count"],
    &["stats", "next-lease-end"],
    &["stats", "next-wake"],
    &["overdue"],
    &["timer", "arm", "timer.json"],
    &["timer", "claim-due"],
    &["timer", "disarm", "r", "e"],
    &["timer", "disarm-run", "r"],
    &["stats", "pending-count"],
    &["timer", "next-due"],
    &["timer", "reschedule", "r", "e", "--at", "5"],
    &["timer", "timers-of", "r"],
    &["timer", "due-between", "--from", "0", "--to", "5"],
    &["run", "seal", "r"],
    &["run", "is-sealed", "r"],
    &["check"],
    &["task", "history", "t"],
    &["task", "entry-place", "t", "1"],
    &["feed"],
    &["trim"],
    &["stats"],
    &["held", "a"],
    &["task", "update", "t", "--priority", "high"],
    &["task", "assign", "t", "--to", "a"],
    &["task", "unassign", "t"],
    &["task", "delegate", "t", "--from", "a", "--to", "b"],
    &["task", "note", "t", "--actor", "a", "--text", "x"],
    &["kind", "define-kind", "kind.json"],
    &["kind", "get-kind", "k"],
    &["kind", "list-kinds"],
    &["kind", "remove-kind", "k"],
    &[
        "search", "--state", "open", "--kind", "k", "--sort", "due-at",
    ],
    &["count", "--assignee", "nobody"],
    &["build-search-index"],
    &["view", "put-view", "--name", "v", "--state", "open"],
    &["view", "get-view", "v"],
    &["view", "list-views"],
    &["view", "delete-view", "v"],
    &["jobs", "start-job", "--state", "open", "--release"],
    &["jobs", "step-job", "j"],
    &["jobs", "cancel-job", "j"],
    &["jobs", "get-job", "j"],
    &["jobs", "list-jobs"],
    &["jobs", "runnable-jobs"],
    &[
        "schedule",
        "add-schedule",
        "--id",
        "s",
        "--run",
        "r",
        "--cron",
        "@daily",
    ],
    &["schedule", "remove-schedule", "s"],
    &["schedule", "pause-schedule", "s", "--note", "x"],
    &["schedule", "resume-schedule", "s"],
    &["schedule", "trigger-schedule", "s"],
    &["schedule", "next-occurrences", "s", "-n", "3"],
    &["schedule", "get-schedule", "s"],
    &["schedule", "list-schedules"],
    &["schedule", "tz-version"],
    &[
        "subscription",
        "add-subscription",
        "--url",
        "https://example.com/hook",
    ],
    &["subscription", "get-subscription", "s"],
    &["subscription", "list-subscriptions"],
    &["subscription", "change-subscription", "s", "--no-timers"],
    &["subscription", "set-subscription-state", "s", "paused"],
    &["subscription", "pause-subscription", "s", "--note", "x"],
    &["subscription", "resume-subscription", "s"],
    &["subscription", "rotate-subscription-key", "s"],
    &["subscription", "rewind-subscription", "s"],
    &["subscription", "remove-subscription", "s"],
];

/// The spellings of a release ago, in an invocation, and the command each
/// still reaches.
const ALIASES: &[(&[&str], &str)] = &[
    (&["task", "reclaim"], "reclaim-lapsed"),
    (&["task", "expire"], "expire-overdue"),
    (&["task", "place", "t", "1"], "entry-place"),
    (&["case", "c"], "for-case"),
    (&["timer", "sweep"], "claim-due"),
    (&["timer", "next"], "next-due"),
    (&["run", "sealed", "r"], "is-sealed"),
    (&["events"], "feed"),
    (&["task", "show", "t"], "get"),
    (&["kind", "define", "kind.json"], "define-kind"),
    (&["kind", "get", "k"], "get-kind"),
    (&["kind", "list"], "list-kinds"),
    (&["kind", "remove", "k"], "remove-kind"),
    (
        &[
            "schedule",
            "add",
            "--id",
            "s",
            "--run",
            "r",
            "--every-ms",
            "5",
        ],
        "add-schedule",
    ),
    (&["schedule", "remove", "s"], "remove-schedule"),
    (&["schedule", "pause", "s", "--note", "x"], "pause-schedule"),
    (&["schedule", "resume", "s"], "resume-schedule"),
    (&["schedule", "trigger", "s"], "trigger-schedule"),
    (&["schedule", "next", "s"], "next-occurrences"),
    (&["schedule", "get", "s"], "get-schedule"),
    (&["schedule", "list"], "list-schedules"),
    (
        &["subscription", "add", "--url", "https://example.com/hook"],
        "add-subscription",
    ),
    (&["subscription", "get", "s"], "get-subscription"),
    (&["subscription", "list"], "list-subscriptions"),
    (
        &["subscription", "change", "s", "--url", "https://e.x"],
        "change-subscription",
    ),
    (
        &["subscription", "rotate", "s", "--overlap", "1h"],
        "rotate-subscription-key",
    ),
    (
        &["subscription", "replay", "s", "--from", "f"],
        "rewind-subscription",
    ),
    (&["subscription", "remove", "s"], "remove-subscription"),
];

/// A sample parsed: the names of its commands, from the top, as clap
/// names them (an alias given is answered with the command's own name),
/// and the verbs the parsed command says it calls.
fn parsed(sample: &[&str]) -> (Vec<String>, &'static [&'static str]) {
    let args = std::iter::once("leasehold").chain(sample.iter().copied());
    let matches = Cli::command()
        .try_get_matches_from(args)
        .unwrap_or_else(|e| panic!("{sample:?} does not parse: {e}"));
    let mut path = Vec::new();
    let mut at = &matches;
    while let Some((name, sub)) = at.subcommand() {
        path.push(name.to_owned());
        at = sub;
    }
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| panic!("{sample:?}: {e}"));
    (path, cli.command.verbs())
}

/// Every command with no subcommand of its own, as the names from the top.
fn leaves(cmd: &clap::Command, above: &[String], out: &mut Vec<Vec<String>>) {
    let mut path = above.to_vec();
    path.push(cmd.get_name().to_owned());
    if cmd.get_subcommands().next().is_none() {
        out.push(path[1..].to_vec());
    }
    for sub in cmd.get_subcommands() {
        leaves(sub, &path, out);
    }
}

#[test]
fn the_command_line_is_well_formed() {
    Cli::command().debug_assert();
}

/// Each verb is a command of its own name (under a group or not) whose
/// parse says it calls that verb, or is listed as not offered.
#[test]
fn every_verb_is_a_command_of_its_own_name() {
    let verbs = leasehold_host::exported_functions();
    for (verb, why) in NOT_OFFERED {
        assert!(
            verbs.iter().any(|f| f.name == *verb),
            "{verb} is listed as not offered, but the engine exports no such verb"
        );
        assert!(!why.is_empty(), "{verb}: say why it is not offered");
    }
    let samples: Vec<_> = SAMPLES.iter().map(|s| (*s, parsed(s))).collect();
    for f in &verbs {
        if NOT_OFFERED.iter().any(|(v, _)| *v == f.name) {
            continue;
        }
        let reached = samples
            .iter()
            .find(|(_, (path, _))| path.last().map(String::as_str) == Some(f.name));
        let Some((sample, (_, called))) = reached else {
            panic!(
                "{}.{}: no command is named {:?} (add one, or list it in NOT_OFFERED with the reason)",
                f.interface, f.name, f.name
            )
        };
        assert!(
            called.contains(&f.name),
            "{sample:?} is named as {} but says it calls {called:?}",
            f.name
        );
    }
}

/// Every name a command declares is a verb the engine exports, so that
/// the context can tell whether it writes.
#[test]
fn every_command_calls_only_verbs_the_engine_exports() {
    let verbs = leasehold_host::exported_functions();
    for sample in SAMPLES {
        for verb in parsed(sample).1 {
            assert!(
                verbs.iter().any(|f| f.name == *verb),
                "{sample:?} calls {verb:?}, which the engine does not export"
            );
        }
    }
}

/// No command is named as a verb without calling it, and every command
/// named as a verb has a sample above (so the checks see it).
#[test]
fn every_command_named_as_a_verb_is_checked() {
    let verbs = leasehold_host::exported_functions();
    let mut all = Vec::new();
    leaves(&Cli::command(), &[], &mut all);
    let sampled: Vec<Vec<String>> = SAMPLES.iter().map(|s| parsed(s).0).collect();
    for path in all {
        let name = path.last().cloned().unwrap_or_default();
        if verbs.iter().any(|f| f.name == name) {
            assert!(sampled.contains(&path), "{path:?} has no sample here");
        }
    }
}

/// A command a release ago spelt otherwise still answers to that spelling.
#[test]
fn the_old_spellings_still_reach_their_commands() {
    for (old, new) in ALIASES {
        let (path, verbs) = parsed(old);
        assert_eq!(path.last().map(String::as_str), Some(*new), "{old:?}");
        assert!(verbs.contains(new), "{old:?} calls {verbs:?}");
    }
}
