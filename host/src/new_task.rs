//! A task to open, as a client writes it in JSON: the one input model of
//! `open`, with its fields, its defaults and how its justification is read.
//! It owns reading the document and filling in what was left out; whether
//! the task is valid is the rules' (the engine refuses it, naming the
//! field), and it must never read a clock: the caller hands in when the
//! task was created.
//!
//! The document's fields are the model's (`Task`, snake_case): `id`, `run`
//! and `kind` are required; the rest may be left out, or given as `null`,
//! which means the same:
//!
//! | field | default |
//! | --- | --- |
//! | `case`, `due_at` | none |
//! | `justification` | `{}`; otherwise any JSON document, kept byte for byte |
//! | `candidate_roles`, `escalate_to`, `excluded_actors` | empty (a list may not be `null`) |
//! | `priority` | `normal` (`low`, `normal`, `high`, `urgent`) |
//! | `on_expiry` | `deny` (`deny`, `escalate`, `proceed`) |
//! | `created_at` | the caller's clock |
//! | `remind_before` | none: milliseconds before `due_at`, e.g. `[3600000]` |
//! | `escalation` | none: steps after `due_at`, e.g. `[{"after_due_ms": 0, "action": {"escalate": ["leads"]}}, {"after_due_ms": 86400000, "action": "expire"}]` |
//!
//! An unknown field is refused, so a typo is an error rather than a value
//! silently dropped. Two forms read the document:
//!
//! - [`Wire`], the default (`NewTask` alone), is the service's request body
//!   (`POST /v1/tasks`): times are integer milliseconds since 1970 (`738`,
//!   `738.0` and `"738"` alike, see [`crate::whole`]).
//! - [`ByHand`] is a file a person wrote, or one `leasehold task get
//!   --json` printed (`leasehold task open`). It also takes times as RFC
//!   3339 text; a justification given as a JSON string is the document's
//!   text (as a printed `Task` carries it); and a printed task's `state`,
//!   `assignee` and `lease_until` are read and handed on, so that a printed
//!   task opens again (the engine refuses them unless they are a new
//!   task's: open, unclaimed). It takes the task's `outcomes` (each
//!   `{name, needs_reason, output_schema}`, a schema as its text), and
//!   reads a printed task's `revision`, `decision` and `steps_done`
//!   without handing them on: the engine keeps those.

use std::fmt;
use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use leasehold_guest::model::{
    DecisionRecord, EscalationStep, OnExpiry, OutcomeRule, Priority, Task, TaskState, Timestamp,
};

/// How a document's fields are read; see the module's docs. Sealed: the
/// two forms are the only ones.
pub trait Form: sealed::Sealed {
    /// The fields this form reads, in the order they are documented.
    const FIELDS: &'static [&'static str];

    /// Whether a justification given as a JSON string is the text of the
    /// document (rather than a document that is a string).
    const STRING_IS_TEXT: bool;

    /// Reads a time, or `None` for `null`.
    fn time<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Timestamp>, D::Error>;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::Wire {}
    impl Sealed for super::ByHand {}
}

/// A count of milliseconds, read as JSON Schema counts integers (`3600000`,
/// `3600000.0`), as the document's instants are.
#[derive(Deserialize)]
struct Ms(#[serde(deserialize_with = "crate::whole::u64")] u64);

/// A chain step as the document gives it: its offset read as [`Ms`], and
/// no field but its own.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StepIn {
    after_due_ms: Ms,
    action: leasehold_guest::model::StepAction,
}

impl From<StepIn> for EscalationStep {
    fn from(s: StepIn) -> Self {
        EscalationStep {
            after_due_ms: s.after_due_ms.0,
            action: s.action,
        }
    }
}

/// The fields both forms read.
const NEW_TASK_FIELDS: [&str; 14] = [
    "id",
    "run",
    "case",
    "kind",
    "justification",
    "candidate_roles",
    "escalate_to",
    "excluded_actors",
    "priority",
    "on_expiry",
    "created_at",
    "due_at",
    "remind_before",
    "escalation",
];

/// The service's request body: see the module's docs.
#[derive(Clone, Copy, Debug)]
pub enum Wire {}

/// A file written by hand or printed by `task get --json`: see the
/// module's docs.
#[derive(Clone, Copy, Debug)]
pub enum ByHand {}

impl Form for Wire {
    const FIELDS: &'static [&'static str] = &NEW_TASK_FIELDS;
    const STRING_IS_TEXT: bool = false;

    fn time<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Timestamp>, D::Error> {
        crate::whole::opt_i64(d)
    }
}

impl Form for ByHand {
    const FIELDS: &'static [&'static str] = &[
        "id",
        "run",
        "case",
        "kind",
        "justification",
        "candidate_roles",
        "escalate_to",
        "excluded_actors",
        "priority",
        "on_expiry",
        "created_at",
        "due_at",
        "remind_before",
        "escalation",
        "state",
        "assignee",
        "lease_until",
        "revision",
        "decision",
        "outcomes",
        "steps_done",
    ];
    const STRING_IS_TEXT: bool = true;

    fn time<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Timestamp>, D::Error> {
        d.deserialize_any(TimeText)
    }
}

/// A task to open, read in form `F` (see the module's docs); the fields
/// are as read, before defaults, except the justification's text.
#[derive(Clone, Debug)]
pub struct NewTask<F: Form = Wire> {
    /// The task's id.
    pub id: String,
    /// The run it belongs to.
    pub run: String,
    /// The case it belongs to, if any.
    pub case: Option<String>,
    /// What kind of decision it asks for.
    pub kind: String,
    /// The justification's text as given; `None` when left out or `null`.
    pub justification: Option<String>,
    /// Who may claim it; empty: anyone.
    pub candidate_roles: Vec<String>,
    /// Whom it is offered to once escalated.
    pub escalate_to: Vec<String>,
    /// Who may never claim it.
    pub excluded_actors: Vec<String>,
    /// Its priority, if given.
    pub priority: Option<Priority>,
    /// What happens once it is overdue, if given.
    pub on_expiry: Option<OnExpiry>,
    /// When it was created, if given (the service takes it only as a clock
    /// override).
    pub created_at: Option<Timestamp>,
    /// When it is due, if ever.
    pub due_at: Option<Timestamp>,
    /// The outcomes a decision on it may have ([`ByHand`] only; empty:
    /// its kind's, or any).
    pub outcomes: Vec<OutcomeRule>,
    /// Reminder offsets before the due time, in milliseconds.
    pub remind_before: Vec<u64>,
    /// The escalation chain after the due time.
    pub escalation: Vec<EscalationStep>,
    printed: Printed,
    form: PhantomData<F>,
}

/// What a printed task carries beyond a new task's fields ([`ByHand`]).
#[derive(Clone, Debug, Default)]
struct Printed {
    state: Option<TaskState>,
    assignee: Option<String>,
    lease_until: Option<Timestamp>,
}

impl<F: Form> NewTask<F> {
    /// The justification the task is opened with: the document given, or
    /// `{}`.
    pub fn justification(&self) -> &str {
        self.justification.as_deref().unwrap_or("{}")
    }

    /// The task to open, with every default filled in; `created_at` is
    /// when it was created: [`NewTask::created_at`] where the caller
    /// accepts one, else the caller's clock.
    pub fn into_task(self, created_at: Timestamp) -> Task {
        let justification = self.justification().to_owned();
        Task {
            id: self.id,
            run: self.run,
            case: self.case,
            kind: self.kind,
            justification,
            candidate_roles: self.candidate_roles,
            assignee: self.printed.assignee,
            lease_until: self.printed.lease_until,
            priority: self.priority.unwrap_or(Priority::Normal),
            state: self.printed.state.unwrap_or(TaskState::Open),
            on_expiry: self.on_expiry.unwrap_or(OnExpiry::Deny),
            escalate_to: self.escalate_to,
            excluded_actors: self.excluded_actors,
            created_at,
            due_at: self.due_at,
            revision: 0,
            decision: None,
            outcomes: self.outcomes,
            remind_before: self.remind_before,
            escalation: self.escalation,
            steps_done: 0,
        }
    }
}

impl<'de, F: Form> Deserialize<'de> for NewTask<F> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_struct("NewTask", F::FIELDS, Fields::<F>(PhantomData))
    }
}

/// One field's name, checked against the form's fields as the key is read
/// (so an error names the key, as a derived reader's would).
struct Key<F>(PhantomData<F>);

impl<'de, F: Form> DeserializeSeed<'de> for Key<F> {
    type Value = &'static str;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<&'static str, D::Error> {
        d.deserialize_identifier(self)
    }
}

impl<F: Form> Visitor<'_> for Key<F> {
    type Value = &'static str;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a field name")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<&'static str, E> {
        F::FIELDS
            .iter()
            .find(|f| **f == v)
            .copied()
            .ok_or_else(|| E::unknown_field(v, F::FIELDS))
    }
}

struct Fields<F>(PhantomData<F>);

/// A time read by the form's reader.
struct Time<F>(PhantomData<F>);

impl<'de, F: Form> DeserializeSeed<'de> for Time<F> {
    type Value = Option<Timestamp>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<Timestamp>, D::Error> {
        F::time(d)
    }
}

/// Sets a field read once; a second time is refused, as serde's derive
/// refuses it.
fn once<T, E: de::Error>(slot: &mut Option<T>, name: &'static str, value: T) -> Result<(), E> {
    if slot.is_some() {
        return Err(E::duplicate_field(name));
    }
    *slot = Some(value);
    Ok(())
}

impl<'de, F: Form> Visitor<'de> for Fields<F> {
    type Value = NewTask<F>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a task as a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<NewTask<F>, A::Error> {
        let (mut id, mut run, mut kind) = (None, None, None);
        let mut case: Option<Option<String>> = None;
        let mut justification: Option<Option<String>> = None;
        let (mut candidate_roles, mut escalate_to, mut excluded_actors) = (None, None, None);
        let mut priority: Option<Option<Priority>> = None;
        let mut on_expiry: Option<Option<OnExpiry>> = None;
        let (mut created_at, mut due_at) = (None, None);
        let (mut state, mut assignee, mut lease_until) = (None, None, None);
        let mut outcomes: Option<Option<Vec<OutcomeRule>>> = None;
        let (mut revision, mut decision, mut steps_done) = (None, None, None);
        let (mut remind_before, mut escalation) = (None, None);
        while let Some(key) = map.next_key_seed(Key::<F>(PhantomData))? {
            let time = || Time::<F>(PhantomData);
            match key {
                "id" => once(&mut id, key, map.next_value::<String>()?)?,
                "run" => once(&mut run, key, map.next_value::<String>()?)?,
                "case" => once(&mut case, key, map.next_value()?)?,
                "kind" => once(&mut kind, key, map.next_value::<String>()?)?,
                "justification" => {
                    let raw: Option<Box<RawValue>> = map.next_value()?;
                    let text = match raw {
                        None => None,
                        Some(raw) if F::STRING_IS_TEXT && raw.get().starts_with('"') => Some(
                            serde_json::from_str::<String>(raw.get()).map_err(de::Error::custom)?,
                        ),
                        Some(raw) => Some(raw.get().to_owned()),
                    };
                    once(&mut justification, key, text)?;
                }
                "candidate_roles" => once(&mut candidate_roles, key, map.next_value()?)?,
                "escalate_to" => once(&mut escalate_to, key, map.next_value()?)?,
                "excluded_actors" => once(&mut excluded_actors, key, map.next_value()?)?,
                "priority" => once(&mut priority, key, map.next_value()?)?,
                "on_expiry" => once(&mut on_expiry, key, map.next_value()?)?,
                "created_at" => once(&mut created_at, key, map.next_value_seed(time())?)?,
                "due_at" => once(&mut due_at, key, map.next_value_seed(time())?)?,
                "state" => once(&mut state, key, map.next_value::<Option<TaskState>>()?)?,
                "assignee" => once(&mut assignee, key, map.next_value::<Option<String>>()?)?,
                "lease_until" => once(&mut lease_until, key, map.next_value_seed(time())?)?,
                "outcomes" => once(&mut outcomes, key, map.next_value()?)?,
                // Milliseconds as every number of the document is read.
                "remind_before" => {
                    let list: Vec<Ms> = map.next_value()?;
                    once(
                        &mut remind_before,
                        key,
                        list.into_iter().map(|m| m.0).collect(),
                    )?
                }
                "escalation" => {
                    let list: Vec<StepIn> = map.next_value()?;
                    once(
                        &mut escalation,
                        key,
                        list.into_iter().map(Into::into).collect(),
                    )?
                }
                // Like the revision: how many steps fired is the engine's.
                "steps_done" => once(&mut steps_done, key, map.next_value::<Option<u32>>()?)?,
                // A printed task's revision and decision are the engine's
                // to keep: read, so that it reads back, and not handed on.
                "revision" => once(&mut revision, key, map.next_value::<Option<u64>>()?)?,
                "decision" => once(
                    &mut decision,
                    key,
                    map.next_value::<Option<DecisionRecord>>()?,
                )?,
                // The key was checked against the form's fields as it was
                // read; every one of them has its arm above.
                other => return Err(de::Error::unknown_field(other, F::FIELDS)),
            }
        }
        Ok(NewTask {
            id: id.ok_or_else(|| de::Error::missing_field("id"))?,
            run: run.ok_or_else(|| de::Error::missing_field("run"))?,
            case: case.flatten(),
            kind: kind.ok_or_else(|| de::Error::missing_field("kind"))?,
            justification: justification.flatten(),
            candidate_roles: candidate_roles.unwrap_or_default(),
            escalate_to: escalate_to.unwrap_or_default(),
            excluded_actors: excluded_actors.unwrap_or_default(),
            priority: priority.flatten(),
            on_expiry: on_expiry.flatten(),
            created_at: created_at.flatten(),
            due_at: due_at.flatten(),
            outcomes: outcomes.flatten().unwrap_or_default(),
            remind_before: remind_before.unwrap_or_default(),
            escalation: escalation.unwrap_or_default(),
            printed: Printed {
                state: state.flatten(),
                assignee: assignee.flatten(),
                lease_until: lease_until.flatten(),
            },
            form: PhantomData,
        })
    }
}

/// What a time written by hand may look like, for error messages.
pub const TIME_FORMS: &str =
    "an RFC 3339 time like 2026-05-04T09:00:00Z or integer milliseconds since 1970";

/// A time as a person writes it: RFC 3339 with any offset, or integer
/// milliseconds since 1970. A negative number is read as one, so that the
/// engine's range check names the real range.
pub fn parse_time(text: &str) -> Result<Timestamp, String> {
    let text = text.trim();
    let digits = text.strip_prefix('-').unwrap_or(text);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        return text
            .parse::<i64>()
            .map_err(|_| format!("{text:?} is too large for milliseconds since 1970"));
    }
    text.parse::<jiff::Timestamp>()
        .map(jiff::Timestamp::as_millisecond)
        .map_err(|e| format!("{text:?} is not {TIME_FORMS} ({e})"))
}

/// A time in a document written by hand: what [`Wire`] takes, or RFC 3339
/// text ([`parse_time`]).
struct TimeText;

impl Visitor<'_> for TimeText {
    type Value = Option<Timestamp>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(TIME_FORMS)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Some(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        i64::try_from(v)
            .map(Some)
            .map_err(|_| E::custom(format!("{v} is too large for milliseconds since 1970")))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        crate::whole::i64(de::value::F64Deserializer::<E>::new(v)).map(Some)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        parse_time(v).map(Some).map_err(E::custom)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
}

/// Reads a required time as [`ByHand`] does, for other documents written
/// by hand (`#[serde(deserialize_with = "…")]`); `null` is refused.
pub fn time_by_hand<'de, D: Deserializer<'de>>(d: D) -> Result<Timestamp, D::Error> {
    d.deserialize_any(TimeText)?
        .ok_or_else(|| de::Error::custom(format!("null is not {TIME_FORMS}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire(text: &str) -> Result<NewTask, String> {
        serde_json::from_str(text).map_err(|e| e.to_string())
    }

    fn by_hand(text: &str) -> Result<NewTask<ByHand>, String> {
        serde_json::from_str(text).map_err(|e| e.to_string())
    }

    const MINIMAL: &str = r#"{"id":"t1","run":"r1","kind":"k"}"#;

    #[test]
    fn a_minimal_task_gets_the_documented_defaults_in_either_form() {
        let from_wire = wire(MINIMAL).expect("wire").into_task(42);
        let from_hand = by_hand(MINIMAL).expect("by hand").into_task(42);
        for t in [from_wire, from_hand] {
            assert_eq!(t.state, TaskState::Open);
            assert_eq!(t.priority, Priority::Normal);
            assert_eq!(t.on_expiry, OnExpiry::Deny);
            assert_eq!(t.created_at, 42);
            assert_eq!(t.justification, "{}");
            assert!(t.assignee.is_none() && t.lease_until.is_none() && t.case.is_none());
            assert!(t.candidate_roles.is_empty() && t.escalate_to.is_empty());
            assert!(t.excluded_actors.is_empty() && t.due_at.is_none());
        }
    }

    #[test]
    fn null_means_the_default() {
        let text = r#"{"id":"t","run":"r","kind":"k","case":null,"justification":null,
            "priority":null,"on_expiry":null,"created_at":null,"due_at":null}"#;
        for t in [
            wire(text).expect("wire").into_task(7),
            by_hand(text).expect("by hand").into_task(7),
        ] {
            assert_eq!(t.justification, "{}");
            assert_eq!(
                (t.priority, t.on_expiry),
                (Priority::Normal, OnExpiry::Deny)
            );
            assert_eq!((t.created_at, t.due_at, t.case), (7, None, None));
        }
        let lists = r#"{"id":"t","run":"r","kind":"k","candidate_roles":null}"#;
        assert!(wire(lists).is_err() && by_hand(lists).is_err());
    }

    #[test]
    fn the_justification_is_kept_byte_for_byte() {
        let text = r#"{"id":"t","run":"r","kind":"k","justification":{"a": 1.50}}"#;
        assert_eq!(wire(text).expect("wire").justification(), r#"{"a": 1.50}"#);
        assert_eq!(
            by_hand(text).expect("hand").justification(),
            r#"{"a": 1.50}"#
        );
    }

    /// The wire keeps a string as the document it is; by hand it is the
    /// text of the document, as `task get --json` prints it.
    #[test]
    fn a_string_justification_is_a_document_on_the_wire_and_text_by_hand() {
        let text = r#"{"id":"t","run":"r","kind":"k","justification":"{\"a\":1}"}"#;
        assert_eq!(wire(text).expect("wire").justification(), r#""{\"a\":1}""#);
        assert_eq!(by_hand(text).expect("hand").justification(), r#"{"a":1}"#);
    }

    #[test]
    fn times_are_integers_on_the_wire_and_also_rfc3339_by_hand() {
        let ints = r#"{"id":"t","run":"r","kind":"k","created_at":2000.0,"due_at":"5000"}"#;
        let w = wire(ints).expect("wire");
        assert_eq!((w.created_at, w.due_at), (Some(2000), Some(5000)));
        let h = by_hand(ints).expect("by hand");
        assert_eq!((h.created_at, h.due_at), (Some(2000), Some(5000)));
        let text = r#"{"id":"t","run":"r","kind":"k","created_at":"1970-01-01T00:00:02Z"}"#;
        assert_eq!(by_hand(text).expect("by hand").created_at, Some(2000));
        assert!(wire(text).is_err(), "the wire takes integers only");
        let bad = r#"{"id":"t","run":"r","kind":"k","due_at":"tomorrow"}"#;
        assert!(by_hand(bad).expect_err("tomorrow").contains("RFC 3339"));
        for fraction in [r#"1.5"#, r#""1.5""#] {
            let text = format!(r#"{{"id":"t","run":"r","kind":"k","due_at":{fraction}}}"#);
            assert!(wire(&text).is_err() && by_hand(&text).is_err(), "{text}");
        }
    }

    #[test]
    fn by_hand_reads_every_field_the_wire_reads() {
        assert_eq!(&ByHand::FIELDS[..Wire::FIELDS.len()], Wire::FIELDS);
    }

    /// A printed task reads back by hand; the wire takes only a new task's
    /// fields, and says which it takes.
    #[test]
    fn a_printed_tasks_fields_are_read_by_hand_only() {
        let printed =
            r#"{"id":"t","run":"r","kind":"k","state":"open","assignee":null,"lease_until":null}"#;
        let t = by_hand(printed).expect("by hand").into_task(0);
        assert_eq!(t.state, TaskState::Open);
        let claimed = printed.replace(r#""state":"open""#, r#""state":"claimed""#);
        assert_eq!(
            by_hand(&claimed).expect("read").into_task(0).state,
            TaskState::Claimed,
            "handed on for the engine to refuse"
        );
        let e = wire(printed).expect_err("unknown on the wire");
        assert!(e.contains("unknown field `state`"), "{e}");
        assert!(
            !e.contains("`lease_until`"),
            "the wire lists its own fields: {e}"
        );
        for field in Wire::FIELDS {
            assert!(e.contains(&format!("`{field}`")), "{field}: {e}");
        }
    }

    #[test]
    fn missing_unknown_and_repeated_fields_are_refused_by_name() {
        for read in [|t: &str| wire(t).map(drop), |t: &str| by_hand(t).map(drop)] {
            let e = read(r#"{"run":"r","kind":"k"}"#).expect_err("missing");
            assert!(e.contains("missing field `id`"), "{e}");
            let e =
                read(r#"{"id":"t","run":"r","kind":"k","prioritty":"high"}"#).expect_err("typo");
            assert!(e.contains("unknown field `prioritty`"), "{e}");
            let e = read(r#"{"id":"t","id":"u","run":"r","kind":"k"}"#).expect_err("twice");
            assert!(e.contains("duplicate field `id`"), "{e}");
            let e = read(r#"{"id":"t","run":"r","kind":"k","priority":"hgih"}"#).expect_err("bad");
            assert!(e.contains("unknown variant `hgih`"), "{e}");
        }
    }

    /// serde_path_to_error, which both front ends use, names the field at
    /// fault through this reader as through a derived one.
    #[test]
    fn an_error_names_its_field_path() {
        let text = r#"{"id":"t","run":"r","kind":"k","candidate_roles":["a",7]}"#;
        let mut de = serde_json::Deserializer::from_str(text);
        let e = serde_path_to_error::deserialize::<_, NewTask>(&mut de).expect_err("7");
        assert_eq!(e.path().to_string(), "candidate_roles[1]");
    }

    #[test]
    fn a_time_is_rfc3339_or_milliseconds() {
        assert_eq!(parse_time("1970-01-01T00:00:01Z"), Ok(1000));
        assert_eq!(parse_time("1970-01-01T01:00:01+01:00"), Ok(1000));
        assert_eq!(parse_time("1000"), Ok(1000));
        assert_eq!(parse_time("-5"), Ok(-5));
        assert!(
            parse_time("2026-05-04 09:00")
                .expect_err("no offset")
                .contains("RFC 3339")
        );
        assert!(parse_time("").is_err() && parse_time("-").is_err());
    }
}
