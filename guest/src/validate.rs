//! The contract's input rules, checked before anything is read or written.
//!
//! Every rejection is `invalid`, naming the field, so a caller can tell which
//! argument to fix. Lists are deduplicated here (first occurrence kept, in
//! order) so that no verb stores or indexes the same role twice.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::model::{Lease, OutcomeRule, StoreError, Task, TaskState, Timer, Timestamp};

/// The most characters (Unicode scalar values) in an id, actor, role or
/// kind. Counted in characters, not bytes, so that the limit is one a
/// JSON Schema `maxLength` states exactly.
pub const MAX_NAME_CHARS: usize = 256;
pub const MAX_LIST: usize = 256;
pub const MAX_JUSTIFICATION_BYTES: usize = 256 * 1024;
/// The deepest a justification's arrays and objects may nest. Clients read
/// it back with parsers that recurse, and many stop far short of what a
/// hostile document can nest.
pub const MAX_JUSTIFICATION_DEPTH: usize = 64;
pub const MAX_TIMESTAMP: Timestamp = 253_402_300_799_999;
pub const MAX_LEASE_MS: u32 = 604_800_000;
pub const MAX_LIMIT: u32 = 1000;

pub fn invalid(why: impl Into<String>) -> StoreError {
    StoreError::Invalid(why.into())
}

/// Ids, actors, roles, kinds: 1–256 characters, no control characters.
pub fn name(field: &str, value: &str) -> Result<(), StoreError> {
    if value.is_empty() {
        return Err(invalid(format!("{field} is empty")));
    }
    // Cheap first: 256 characters are at most 1024 bytes of UTF-8.
    if value.len() > MAX_NAME_CHARS {
        let chars = value.chars().count();
        if chars > MAX_NAME_CHARS {
            return Err(invalid(format!(
                "{field} is {chars} characters, more than {MAX_NAME_CHARS}"
            )));
        }
    }
    if let Some(c) = value.chars().find(|c| c.is_control()) {
        return Err(invalid(format!(
            "{field} contains the control character U+{:04X}",
            u32::from(c)
        )));
    }
    Ok(())
}

pub fn timestamp(field: &str, t: Timestamp) -> Result<(), StoreError> {
    if !(0..=MAX_TIMESTAMP).contains(&t) {
        return Err(invalid(format!(
            "{field} is {t}, outside 0..={MAX_TIMESTAMP} (milliseconds since 1970 up to year 9999)"
        )));
    }
    Ok(())
}

pub fn limit(field: &str, n: u32) -> Result<(), StoreError> {
    if !(1..=MAX_LIMIT).contains(&n) {
        return Err(invalid(format!("{field} is {n}, outside 1..={MAX_LIMIT}")));
    }
    Ok(())
}

pub fn lease(ms: u32) -> Result<(), StoreError> {
    if !(1..=MAX_LEASE_MS).contains(&ms) {
        return Err(invalid(format!(
            "lease-ms is {ms}, outside 1..={MAX_LEASE_MS} (0 would end a lease as it begins, \
             letting two holders take one timer or task)"
        )));
    }
    Ok(())
}

/// A claim's lease: the same rules as a timer lease's `now` and `lease-ms`.
pub fn claim_lease(lease: Option<&Lease>) -> Result<(), StoreError> {
    if let Some(l) = lease {
        timestamp("now", l.now)?;
        self::lease(l.lease_ms)?;
    }
    Ok(())
}

/// Checks every entry and the length, and answers the list without
/// duplicates, first occurrence kept.
pub fn names(field: &str, list: &[String]) -> Result<Vec<String>, StoreError> {
    if list.len() > MAX_LIST {
        return Err(invalid(format!(
            "{field} has {} entries, more than {MAX_LIST}",
            list.len()
        )));
    }
    let mut out: Vec<String> = Vec::with_capacity(list.len());
    for (i, entry) in list.iter().enumerate() {
        name(&format!("{field}[{i}]"), entry)?;
        if !out.contains(entry) {
            out.push(entry.clone());
        }
    }
    Ok(out)
}

pub fn justification(text: &str) -> Result<(), StoreError> {
    json_document("justification", text)
}

/// A JSON document under the justification's size and depth rules, as
/// `field` (a justification, a decision's output).
pub fn json_document(field: &str, text: &str) -> Result<(), StoreError> {
    if text.len() > MAX_JUSTIFICATION_BYTES {
        return Err(invalid(format!(
            "{field} is {} bytes, more than {MAX_JUSTIFICATION_BYTES}",
            text.len()
        )));
    }
    let depth = nesting_depth(text.as_bytes());
    if depth > MAX_JUSTIFICATION_DEPTH {
        return Err(invalid(format!(
            "{field} nests {depth} levels deep, more than {MAX_JUSTIFICATION_DEPTH}"
        )));
    }
    serde_json::from_str::<serde::de::IgnoredAny>(text)
        .map_err(|e| invalid(format!("{field} is not a JSON document: {e}")))?;
    Ok(())
}

/// The most characters in an outcome's name.
pub const MAX_OUTCOME_CHARS: usize = 64;
/// The most outcome rules a task or kind declares.
pub const MAX_OUTCOMES: usize = 64;
/// The most bytes in a decision's reason or a note.
pub const MAX_TEXT_BYTES: usize = 4096;

/// An outcome's name: 1–64 characters, no control characters.
pub fn outcome(field: &str, value: &str) -> Result<(), StoreError> {
    name(field, value)?;
    let chars = value.chars().count();
    if chars > MAX_OUTCOME_CHARS {
        return Err(invalid(format!(
            "{field} is {chars} characters, more than {MAX_OUTCOME_CHARS}"
        )));
    }
    Ok(())
}

/// Free text (a reason, a note): at most 4 KiB, no NUL.
pub fn text(field: &str, value: &str) -> Result<(), StoreError> {
    if value.len() > MAX_TEXT_BYTES {
        return Err(invalid(format!(
            "{field} is {} bytes, more than {MAX_TEXT_BYTES}",
            value.len()
        )));
    }
    if value.contains('\0') {
        return Err(invalid(format!("{field} contains U+0000")));
    }
    Ok(())
}

/// Outcome rules as a task or kind declares them: at most 64, distinct
/// names, each output schema compiled now (so a schema that is not valid,
/// or uses a keyword outside the supported subset, is refused when it is
/// declared, never when first used).
pub fn outcome_rules(field: &str, rules: &[OutcomeRule]) -> Result<(), StoreError> {
    if rules.len() > MAX_OUTCOMES {
        return Err(invalid(format!(
            "{field} lists {} outcomes, more than {MAX_OUTCOMES}",
            rules.len()
        )));
    }
    for (i, r) in rules.iter().enumerate() {
        outcome(&format!("{field}[{i}].name"), &r.name)?;
        if rules[..i].iter().any(|o| o.name == r.name) {
            return Err(invalid(format!(
                "{field}[{i}].name: the outcome {:?} is listed twice",
                r.name
            )));
        }
        if let Some(schema) = &r.output_schema {
            crate::jsonschema::Schema::compile_str(schema)
                .map_err(|e| invalid(format!("{field}[{i}].output-schema ({}): {e}", r.name)))?;
        }
    }
    Ok(())
}

/// How deep the arrays and objects of JSON text nest, brackets inside
/// strings not counted. Iterative, so a hostile document costs one pass and
/// no stack; text that is not JSON gets some count and is refused by the
/// parse that follows.
fn nesting_depth(text: &[u8]) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for &b in text {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// A task's fields under the input rules, with its lists deduplicated. What
/// only a *new* task must satisfy is [`new_task`], checked once the id is
/// known to be free (first open wins, whatever the copy says).
pub fn task_input(task: &Task) -> Result<Task, StoreError> {
    name("id", &task.id)?;
    name("run", &task.run)?;
    if let Some(case) = &task.case {
        name("case", case)?;
    }
    name("kind", &task.kind)?;
    justification(&task.justification)?;
    let candidate_roles = names("candidate-roles", &task.candidate_roles)?;
    let escalate_to = names("escalate-to", &task.escalate_to)?;
    let excluded_actors = names("excluded-actors", &task.excluded_actors)?;
    timestamp("created-at", task.created_at)?;
    if let Some(due) = task.due_at {
        timestamp("due-at", due)?;
    }
    if let Some(a) = &task.assignee {
        name("assignee", a)?;
    }
    outcome_rules("outcomes", &task.outcomes)?;
    if task.decision.is_some() {
        return Err(invalid("decision is set: only settle records one"));
    }
    Ok(Task {
        candidate_roles,
        escalate_to,
        excluded_actors,
        ..task.clone()
    })
}

/// What a task must be to be created: open, held by nobody.
pub fn new_task(task: &Task) -> Result<(), StoreError> {
    if task.state != TaskState::Open {
        return Err(invalid(format!(
            "state is {}: a new task must be open",
            task.state
        )));
    }
    if task.assignee.is_some() {
        return Err(invalid("assignee is set: a new task must have none"));
    }
    if task.lease_until.is_some() {
        return Err(invalid("lease-until is set: a new task must have none"));
    }
    Ok(())
}

pub fn timer(t: &Timer) -> Result<(), StoreError> {
    name("run", &t.run)?;
    if let Some(case) = &t.case {
        name("case", case)?;
    }
    name("effect", &t.effect)?;
    timestamp("fire-at", t.fire_at)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(r: Result<(), StoreError>) -> String {
        match r {
            Err(StoreError::Invalid(why)) => why,
            other => panic!("expected invalid, got {other:?}"),
        }
    }

    #[test]
    fn names_are_one_to_256_characters_without_control_characters() {
        assert!(name("id", "a").is_ok());
        assert!(name("id", &"é".repeat(256)).is_ok());
        assert!(name("id", &"\u{1F600}".repeat(256)).is_ok());
        assert!(reason(name("id", "")).contains("id is empty"));
        assert!(reason(name("actor", &"x".repeat(257))).contains("actor is 257 characters"));
        assert!(reason(name("actor", &"é".repeat(257))).contains("actor is 257 characters"));
        assert!(reason(name("role", "a\u{7}")).contains("U+0007"));
        assert!(reason(name("role", "a\u{85}")).contains("U+0085"));
        // Verbatim: spaces are not trimmed or refused.
        assert!(name("actor", " bob ").is_ok());
    }

    #[test]
    fn lists_are_capped_checked_and_deduplicated_in_order() {
        let list: Vec<String> = ["b", "a", "b", "c", "a"].map(String::from).to_vec();
        assert_eq!(names("roles", &list).expect("valid"), ["b", "a", "c"]);
        let long = vec!["r".to_owned(); 257];
        assert!(reason(names("roles", &long).map(|_| ())).contains("257 entries"));
        let bad = vec!["ok".to_owned(), String::new()];
        assert!(reason(names("roles", &bad).map(|_| ())).contains("roles[1] is empty"));
    }

    #[test]
    fn bounds_on_numbers() {
        assert!(timestamp("now", 0).is_ok());
        assert!(timestamp("now", MAX_TIMESTAMP).is_ok());
        assert!(reason(timestamp("now", -1)).contains("now is -1"));
        assert!(reason(timestamp("due-at", MAX_TIMESTAMP + 1)).contains("due-at"));
        assert!(reason(limit("limit", 0)).contains("limit is 0"));
        assert!(reason(limit("limit", 1001)).contains("limit is 1001"));
        assert!(reason(lease(0)).contains("lease-ms is 0"));
        assert!(lease(MAX_LEASE_MS).is_ok());
        assert!(lease(MAX_LEASE_MS + 1).is_err());
    }

    #[test]
    fn justification_must_be_json_and_small() {
        assert!(justification(r#"{"amount": 12}"#).is_ok());
        assert!(reason(justification("{nope")).contains("not a JSON document"));
        let big = format!("\"{}\"", "x".repeat(MAX_JUSTIFICATION_BYTES));
        assert!(reason(justification(&big)).contains("more than"));
    }

    #[test]
    fn justification_nesting_is_capped_and_strings_do_not_count() {
        let nest = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(justification(&nest(MAX_JUSTIFICATION_DEPTH)).is_ok());
        let deep = reason(justification(&nest(MAX_JUSTIFICATION_DEPTH + 1)));
        assert!(deep.starts_with("justification nests 65 levels"), "{deep}");
        let hostile = format!("{}1{}", "{\"a\":".repeat(10_000), "}".repeat(10_000));
        assert!(reason(justification(&hostile)).contains("nests 10000 levels"));
        // Brackets inside strings, escaped quotes included, are text.
        let text = format!("{{\"a\": \"\\\"{}\"}}", "[".repeat(1000));
        assert!(justification(&text).is_ok(), "{text}");
    }
}
