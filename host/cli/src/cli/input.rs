//! JSON input for `task open` and `timer arm`.
//!
//! The shape is the model's (`Task`, `Timer`: snake_case fields and values),
//! made friendly to write by hand: what a new task must have anyway (state
//! open, no assignee) and what has an obvious default may be left out, and
//! times may be RFC 3339 text. Unknown fields are refused, so a typo is an
//! error rather than a silently dropped value. Errors name the source, the
//! line and column, and the field.

use std::fmt;
use std::io::{IsTerminal, Read};
use std::path::Path;

use serde::Deserialize;
use serde::de::{self, DeserializeOwned, Deserializer, Visitor};
use serde_json::value::RawValue;

use leasehold_host::{OnExpiry, Phase, Priority, Task, TaskState, Timer, Timestamp};

use super::error::CliError;
use super::time::{TIME_FORMS, parse_time};

/// A task as `task open` reads it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskInput {
    id: String,
    run: String,
    #[serde(default)]
    case: Option<String>,
    kind: String,
    /// Any JSON document. A string is taken as the document's text, which is
    /// how `task get --json` prints it, so its output opens as it stands.
    #[serde(default, deserialize_with = "raw_document")]
    justification: Option<Box<RawValue>>,
    #[serde(default)]
    candidate_roles: Vec<String>,
    /// Accepted so a printed task reads back; the engine refuses one set.
    #[serde(default)]
    assignee: Option<String>,
    /// Accepted so a printed task reads back; the engine refuses one set.
    #[serde(default, deserialize_with = "optional_time")]
    lease_until: Option<Timestamp>,
    #[serde(default = "normal")]
    priority: Priority,
    /// Accepted so a printed task reads back; a new task must be open.
    #[serde(default = "open")]
    state: TaskState,
    #[serde(default = "deny")]
    on_expiry: OnExpiry,
    #[serde(default)]
    escalate_to: Vec<String>,
    #[serde(default)]
    excluded_actors: Vec<String>,
    #[serde(default, deserialize_with = "optional_time")]
    created_at: Option<Timestamp>,
    #[serde(default, deserialize_with = "optional_time")]
    due_at: Option<Timestamp>,
}

fn normal() -> Priority {
    Priority::Normal
}

fn open() -> TaskState {
    TaskState::Open
}

fn deny() -> OnExpiry {
    OnExpiry::Deny
}

impl TaskInput {
    /// The task to open; `now` stands in for a missing `created_at`.
    pub fn into_task(self, now: Timestamp) -> Result<Task, CliError> {
        let justification = match self.justification {
            None => "{}".to_owned(),
            Some(raw) if raw.get().starts_with('"') => serde_json::from_str::<String>(raw.get())
                .map_err(|e| CliError::Input(format!("field `justification`: {e}")))?,
            Some(raw) => raw.get().to_owned(),
        };
        Ok(Task {
            id: self.id,
            run: self.run,
            case: self.case,
            kind: self.kind,
            justification,
            candidate_roles: self.candidate_roles,
            assignee: self.assignee,
            lease_until: self.lease_until,
            priority: self.priority,
            state: self.state,
            on_expiry: self.on_expiry,
            escalate_to: self.escalate_to,
            excluded_actors: self.excluded_actors,
            created_at: self.created_at.unwrap_or(now),
            due_at: self.due_at,
        })
    }
}

/// A timer as `timer arm` reads it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimerInput {
    run: String,
    #[serde(default)]
    case: Option<String>,
    effect: String,
    #[serde(default)]
    step: u32,
    #[serde(default = "forward")]
    phase: Phase,
    #[serde(deserialize_with = "required_time")]
    fire_at: Timestamp,
}

fn forward() -> Phase {
    Phase::Forward
}

impl From<TimerInput> for Timer {
    fn from(t: TimerInput) -> Self {
        Timer {
            run: t.run,
            case: t.case,
            effect: t.effect,
            step: t.step,
            phase: t.phase,
            fire_at: t.fire_at,
        }
    }
}

/// Keeps the document's exact text, `null` included (a plain `Option` would
/// turn `null` into "absent").
fn raw_document<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Box<RawValue>>, D::Error> {
    Box::<RawValue>::deserialize(d).map(Some)
}

struct TimeVisitor;

impl<'de> Visitor<'de> for TimeVisitor {
    type Value = Option<Timestamp>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
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

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        parse_time(v).map(Some).map_err(E::custom)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
}

fn optional_time<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Timestamp>, D::Error> {
    d.deserialize_any(TimeVisitor)
}

fn required_time<'de, D: Deserializer<'de>>(d: D) -> Result<Timestamp, D::Error> {
    d.deserialize_any(TimeVisitor)?
        .ok_or_else(|| de::Error::custom(format!("null is not {TIME_FORMS}")))
}

/// Where JSON input came from, for messages, and its text.
#[derive(Debug)]
pub struct Source {
    pub name: String,
    pub text: String,
}

/// Reads a file, or standard input for `-` or no file at all. A terminal on
/// standard input with no file given is refused rather than waited on: the
/// caller most likely forgot the file.
pub fn read_source(file: Option<&Path>, what: &str) -> Result<Source, CliError> {
    match file {
        Some(path) if path != Path::new("-") => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                CliError::Input(format!("cannot read {what} from {}: {e}", path.display()))
            })?;
            Ok(Source {
                name: path.display().to_string(),
                text,
            })
        }
        _ => {
            let stdin = std::io::stdin();
            if file.is_none() && stdin.is_terminal() {
                return Err(CliError::Input(format!(
                    "no {what} given: name a JSON file, or pipe one to standard input"
                )));
            }
            let mut text = String::new();
            stdin.lock().read_to_string(&mut text).map_err(|e| {
                CliError::Input(format!("cannot read {what} from standard input: {e}"))
            })?;
            Ok(Source {
                name: "standard input".to_owned(),
                text,
            })
        }
    }
}

/// An `invalid` answer from the engine about a document the CLI read, told
/// in the document's terms: where it came from, and the field names as the
/// JSON spells them (the engine speaks WIT's kebab-case).
pub fn invalid_document(source: &Source, what: &str, e: leasehold_host::Error) -> CliError {
    match e {
        leasehold_host::Error::Store(leasehold_host::StoreError::Invalid(why)) => {
            let mut why = why;
            for (wit, json) in [
                ("candidate-roles", "candidate_roles"),
                ("escalate-to", "escalate_to"),
                ("excluded-actors", "excluded_actors"),
                ("created-at", "created_at"),
                ("due-at", "due_at"),
                ("fire-at", "fire_at"),
                ("on-expiry", "on_expiry"),
            ] {
                why = why.replace(wit, json);
            }
            CliError::Input(format!("{}: {what} is invalid: {why}", source.name))
        }
        e => CliError::Engine(e),
    }
}

/// Parses one JSON document, naming the field, line and column on error.
pub fn parse<T: DeserializeOwned>(source: &Source, what: &str) -> Result<T, CliError> {
    if source.text.trim().is_empty() {
        return Err(CliError::Input(format!(
            "{} is empty: expected {what} as a JSON object",
            source.name
        )));
    }
    let mut de = serde_json::Deserializer::from_str(&source.text);
    let value = serde_path_to_error::deserialize(&mut de)
        .map_err(|e| located(source, what, &e.path().to_string(), e.inner()))?;
    // Trailing text after the document is a mistake too (two tasks pasted?).
    de.end().map_err(|e| located(source, what, ".", &e))?;
    Ok(value)
}

fn located(source: &Source, what: &str, path: &str, e: &serde_json::Error) -> CliError {
    // serde_json appends " at line L column C"; it is said up front instead.
    let text = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    let message = text.strip_suffix(&suffix).unwrap_or(&text);
    // `.` is the document itself; `?` is where the text ended mid-value.
    let field = if path == "." || path == "?" {
        String::new()
    } else {
        format!(", field `{path}`")
    };
    CliError::Input(format!(
        "{} line {}, column {}{field}: {message} (reading {what})",
        source.name,
        e.line(),
        e.column()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(text: &str) -> Source {
        Source {
            name: "task.json".into(),
            text: text.into(),
        }
    }

    fn task_error(text: &str) -> String {
        match parse::<TaskInput>(&source(text), "a task") {
            Err(CliError::Input(m)) => m,
            other => panic!("expected an input error, got {other:?}"),
        }
    }

    #[test]
    fn a_minimal_task_gets_the_documented_defaults() {
        let t: TaskInput =
            parse(&source(r#"{"id":"t1","run":"r1","kind":"k"}"#), "a task").expect("parses");
        let t = t.into_task(42).expect("converts");
        assert_eq!(t.state, TaskState::Open);
        assert_eq!(t.priority, Priority::Normal);
        assert_eq!(t.on_expiry, OnExpiry::Deny);
        assert_eq!(t.created_at, 42);
        assert_eq!(t.justification, "{}");
        assert!(t.assignee.is_none() && t.candidate_roles.is_empty());
    }

    #[test]
    fn a_justification_keeps_its_exact_text_inline_or_as_a_string() {
        let inline: TaskInput = parse(
            &source(r#"{"id":"t","run":"r","kind":"k","justification":{"a": 1.50}}"#),
            "a task",
        )
        .expect("parses");
        assert_eq!(
            inline.into_task(0).expect("ok").justification,
            r#"{"a": 1.50}"#
        );
        let text: TaskInput = parse(
            &source(r#"{"id":"t","run":"r","kind":"k","justification":"{\"a\":1}"}"#),
            "a task",
        )
        .expect("parses");
        assert_eq!(text.into_task(0).expect("ok").justification, r#"{"a":1}"#);
    }

    #[test]
    fn times_are_rfc3339_or_milliseconds() {
        let t: TaskInput = parse(
            &source(r#"{"id":"t","run":"r","kind":"k","created_at":"1970-01-01T00:00:02Z","due_at":5000}"#),
            "a task",
        )
        .expect("parses");
        let t = t.into_task(0).expect("ok");
        assert_eq!((t.created_at, t.due_at), (2000, Some(5000)));
    }

    #[test]
    fn errors_name_the_field_and_the_position() {
        let m =
            task_error("{\"id\":\"t\",\"run\":\"r\",\"kind\":\"k\",\n \"due_at\":\"tomorrow\"}");
        assert!(m.contains("line 2") && m.contains("field `due_at`"), "{m}");
        let m = task_error(r#"{"id":"t","run":"r","kind":"k","priority":"hgih"}"#);
        assert!(
            m.contains("field `priority`") && m.contains("unknown variant"),
            "{m}"
        );
        let m = task_error(r#"{"id":"t","run":"r","kind":"k","candidate_roles":["a",7]}"#);
        assert!(m.contains("candidate_roles[1]"), "{m}");
        let m = task_error(r#"{"id":"t","run":"r","kind":"k","prioritty":"high"}"#);
        assert!(m.contains("unknown field `prioritty`"), "{m}");
        let m = task_error(r#"{"run":"r","kind":"k"}"#);
        assert!(m.contains("missing field `id`"), "{m}");
        let m = task_error(r#"{"id":"t","run":"r","kind":"k"} {}"#);
        assert!(m.contains("trailing"), "{m}");
        let m = task_error("  ");
        assert!(m.contains("empty"), "{m}");
    }

    #[test]
    fn a_timer_needs_a_fire_time() {
        let m = match parse::<TimerInput>(&source(r#"{"run":"r","effect":"e"}"#), "a timer") {
            Err(CliError::Input(m)) => m,
            other => panic!("expected an input error, got {other:?}"),
        };
        assert!(m.contains("missing field `fire_at`"), "{m}");
        let t: TimerInput = parse(
            &source(r#"{"run":"r","effect":"e","fire_at":"1970-01-01T00:00:01Z"}"#),
            "a timer",
        )
        .expect("parses");
        let t = Timer::from(t);
        assert_eq!((t.fire_at, t.step, t.phase), (1000, 0, Phase::Forward));
    }
}
