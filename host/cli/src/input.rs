//! JSON documents read from a file or standard input (`task open`, `timer
//! arm`): where they came from, and errors that name the source, the line
//! and column, and the field. What a document holds is its model's
//! (`leasehold_host::new_task` for a task, the timer command's for a
//! timer); this module must never fill in a default.

use std::io::{IsTerminal, Read};
use std::path::Path;

use serde::de::DeserializeOwned;

use crate::error::CliError;

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
    use leasehold_host::new_task::{ByHand, NewTask};

    use super::*;

    fn source(text: &str) -> Source {
        Source {
            name: "task.json".into(),
            text: text.into(),
        }
    }

    fn task_error(text: &str) -> String {
        match parse::<NewTask<ByHand>>(&source(text), "a task") {
            Err(CliError::Input(m)) => m,
            other => panic!("expected an input error, got {other:?}"),
        }
    }

    #[test]
    fn errors_name_the_source_the_field_and_the_position() {
        let m =
            task_error("{\"id\":\"t\",\"run\":\"r\",\"kind\":\"k\",\n \"due_at\":\"tomorrow\"}");
        assert!(m.starts_with("task.json line 2"), "{m}");
        assert!(
            m.contains("field `due_at`") && m.contains("RFC 3339"),
            "{m}"
        );
        assert!(m.ends_with("(reading a task)"), "{m}");
        let m = task_error(r#"{"id":"t","run":"r","kind":"k","candidate_roles":["a",7]}"#);
        assert!(m.contains("candidate_roles[1]"), "{m}");
        let m = task_error(r#"{"id":"t","run":"r","kind":"k"} {}"#);
        assert!(m.contains("trailing"), "{m}");
        let m = task_error("  ");
        assert!(m.contains("empty"), "{m}");
    }

    #[test]
    fn an_invalid_answer_is_told_in_the_documents_field_names() {
        let e = leasehold_host::Error::Store(leasehold_host::StoreError::Invalid(
            "candidate-roles[0] is empty".into(),
        ));
        match invalid_document(&source("{}"), "the task", e) {
            CliError::Input(m) => assert_eq!(
                m,
                "task.json: the task is invalid: candidate_roles[0] is empty"
            ),
            other => panic!("expected an input error, got {other:?}"),
        }
    }
}
