//! The input rules as JSON Schema, built from the constants the rules
//! enforce (`leasehold_guest::validate`), so the OpenAPI document states
//! exactly what the server accepts: a client generated from it sends no
//! request the rules refuse for its shape, and a fuzzer (schemathesis, in
//! `tests/run`) holds the two together. It owns the schema of every
//! constrained field; it must never state a bound the rules do not enforce.

use leasehold_guest::validate::{
    MAX_JUSTIFICATION_BYTES, MAX_JUSTIFICATION_DEPTH, MAX_LEASE_MS, MAX_LIMIT, MAX_LIST,
    MAX_NAME_CHARS, MAX_OUTCOME_CHARS, MAX_OUTCOMES, MAX_TEXT_BYTES, MAX_TIMESTAMP,
};
use utoipa::openapi::schema::{Array, ArrayBuilder, Object, ObjectBuilder, SchemaType, Type};

/// No control character (Unicode category Cc: U+0000–U+001F and
/// U+007F–U+009F), as the rules refuse them. Written with `\u` escapes,
/// which ECMA-262 and Python regular expressions both read.
const NO_CONTROL: &str = r"\u0000-\u001f\u007f-\u009f";

/// A name: 1–256 characters without control characters.
pub fn name_pattern() -> String {
    format!("^[^{NO_CONTROL}]{{1,{MAX_NAME_CHARS}}}$")
}

fn with_null(t: Type, nullable: bool) -> SchemaType {
    if nullable {
        SchemaType::from_iter([t, Type::Null])
    } else {
        SchemaType::Type(t)
    }
}

fn name_of(nullable: bool) -> Object {
    ObjectBuilder::new()
        .schema_type(with_null(Type::String, nullable))
        .min_length(Some(1))
        .max_length(Some(MAX_NAME_CHARS))
        .pattern(Some(name_pattern()))
        .build()
}

/// An id, actor, role, kind, run, case or effect.
pub fn name() -> Object {
    name_of(false)
}

pub fn opt_name() -> Object {
    name_of(true)
}

/// A list of names: at most 256 (duplicates count once).
pub fn names() -> Array {
    ArrayBuilder::new()
        .items(name())
        .max_items(Some(MAX_LIST))
        .build()
}

pub fn opt_names() -> Array {
    ArrayBuilder::new()
        .schema_type(with_null(Type::Array, true))
        .items(name())
        .max_items(Some(MAX_LIST))
        .build()
}

fn integer(min: i64, max: i64, nullable: bool) -> Object {
    ObjectBuilder::new()
        .schema_type(with_null(Type::Integer, nullable))
        .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(
            utoipa::openapi::KnownFormat::Int64,
        )))
        .minimum(Some(min as f64))
        .maximum(Some(max as f64))
        .build()
}

/// A page size or sweep size: 1–1000.
pub fn limit() -> Object {
    integer(1, i64::from(MAX_LIMIT), false)
}

pub fn opt_limit() -> Object {
    integer(1, i64::from(MAX_LIMIT), true)
}

/// A lease, in milliseconds: 1–604800000 (seven days).
pub fn lease_ms() -> Object {
    integer(1, i64::from(MAX_LEASE_MS), false)
}

pub fn opt_lease_ms() -> Object {
    integer(1, i64::from(MAX_LEASE_MS), true)
}

/// The longest a request may wait for work, in milliseconds.
pub const MAX_WAIT_MS: u32 = 30_000;

/// A long-poll's wait: 0–30000 milliseconds.
pub fn opt_wait_ms() -> Object {
    integer(0, i64::from(MAX_WAIT_MS), true)
}

/// An instant, in milliseconds since 1970, up to the year 9999.
pub fn instant() -> Object {
    integer(0, MAX_TIMESTAMP, false)
}

pub fn opt_instant() -> Object {
    integer(0, MAX_TIMESTAMP, true)
}

/// A timer's saga step: any unsigned 32-bit number.
pub fn step() -> Object {
    integer(0, i64::from(u32::MAX), false)
}

/// A justification: any JSON document within the rules' size and nesting
/// bounds, which JSON Schema cannot state, so they are said in words.
pub fn justification() -> Object {
    ObjectBuilder::new()
        .schema_type(SchemaType::AnyValue)
        .description(Some(format!(
            "Any JSON document, at most {} KiB, its arrays and objects nested at most {} \
             deep; stored and returned byte for byte. Null or absent means {{}}.",
            MAX_JUSTIFICATION_BYTES / 1024,
            MAX_JUSTIFICATION_DEPTH
        )))
        .build()
}

/// A stored justification, as answered.
pub fn stored_justification() -> Object {
    ObjectBuilder::new()
        .schema_type(SchemaType::AnyValue)
        .description(Some("The JSON document explaining the request, as stored"))
        .build()
}

/// An outcome's name: 1–64 characters without control characters.
pub fn outcome() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length(Some(1))
        .max_length(Some(MAX_OUTCOME_CHARS))
        .pattern(Some(format!("^[^{NO_CONTROL}]{{1,{MAX_OUTCOME_CHARS}}}$")))
        .build()
}

/// A list of outcome rules: at most 64.
pub fn outcome_rules() -> Array {
    ArrayBuilder::new()
        .items(utoipa::openapi::Ref::from_schema_name("OutcomeRule"))
        .max_items(Some(MAX_OUTCOMES))
        .build()
}

/// The words every free text (a reason, a note) is held to; a bound in
/// bytes, which JSON Schema's lengths (in characters) cannot state.
fn text_rule(what: &str) -> String {
    format!(
        "{what}: at most {MAX_TEXT_BYTES} bytes of UTF-8 (so at most {MAX_TEXT_BYTES} \
         characters, fewer when they take more than a byte), no U+0000"
    )
}

/// A decision's reason.
pub fn reason() -> Object {
    ObjectBuilder::new()
        .schema_type(with_null(Type::String, true))
        .max_length(Some(MAX_TEXT_BYTES))
        .pattern(Some("^[^\\u0000]*$"))
        .description(Some(text_rule("Why, in the decider's words")))
        .build()
}

/// A note's text.
pub fn note_text() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length(Some(1))
        .max_length(Some(MAX_TEXT_BYTES))
        .pattern(Some("^[^\\u0000]+$"))
        .description(Some(text_rule("The remark")))
        .build()
}

/// A schedule's id: a name of at most 200 characters, as its occurrences'
/// effect keys (`schedule/<id>/<instant>`) must stay names.
pub fn schedule_id() -> Object {
    use leasehold_guest::schedules::MAX_ID_CHARS;
    ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length(Some(1))
        .max_length(Some(MAX_ID_CHARS))
        .pattern(Some(format!("^[^{NO_CONTROL}]{{1,{MAX_ID_CHARS}}}$")))
        .build()
}

/// A span of time, in milliseconds: 1 up to the span of all instants (an
/// interval, a catch-up window).
pub fn span_ms() -> Object {
    integer(1, MAX_TIMESTAMP, false)
}

/// A schedule's jitter bound, in milliseconds: 0 (none) to one day.
pub fn jitter_ms() -> Object {
    use leasehold_guest::calendar::MAX_JITTER_MS;
    integer(0, MAX_JITTER_MS as i64, false)
}

/// How many occurrences to compute: 1–1000.
pub fn occurrences() -> Object {
    use leasehold_guest::schedules::MAX_OCCURRENCES;
    integer(1, i64::from(MAX_OCCURRENCES), false)
}

/// A pause's note: 1–1024 characters, no U+0000.
pub fn pause_note() -> Object {
    use leasehold_guest::schedules::MAX_NOTE_CHARS;
    ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length(Some(1))
        .max_length(Some(MAX_NOTE_CHARS))
        .pattern(Some("^[^\\u0000]+$"))
        .description(Some("Why it is paused: 1–1024 characters, no U+0000"))
        .build()
}

/// A decision's output: any JSON document within the justification's
/// bounds.
pub fn decision_output() -> Object {
    ObjectBuilder::new()
        .schema_type(SchemaType::AnyValue)
        .description(Some(format!(
            "Any JSON document, at most {} KiB, nested at most {} deep, held to the outcome's \
             `output_schema` if it declares one (checked as null when absent); stored and \
             returned byte for byte.",
            MAX_JUSTIFICATION_BYTES / 1024,
            MAX_JUSTIFICATION_DEPTH
        )))
        .build()
}

/// A stored decision's output, as answered.
pub fn stored_output() -> Object {
    ObjectBuilder::new()
        .schema_type(SchemaType::AnyValue)
        .description(Some("The decision's output as it was given (null: none)"))
        .build()
}

/// What an outcome rule's output schema is held to. The rules compile it
/// when it is declared, against a subset of JSON Schema this document does
/// not restate keyword by keyword.
pub const SCHEMA_CHECKED: &str = "Compiled when declared: a schema that is not valid JSON \
                                  Schema, or uses a keyword outside the supported subset \
                                  (docs/guarantees.md), is refused with 400 (`invalid`, \
                                  `field` naming `outcomes`).";

/// An outcome rule's output schema.
pub fn output_schema() -> Object {
    ObjectBuilder::new()
        .schema_type(SchemaType::AnyValue)
        .description(Some(format!(
            "A JSON Schema (types, properties, required, enum, bounds, lengths, items) the \
             decision's output must satisfy. {SCHEMA_CHECKED}"
        )))
        .build()
}

/// A count or sequence number: 0 up to what JSON numbers hold exactly.
pub fn seq() -> Object {
    integer(0, (1 << 53) - 1, false)
}

/// A history entry's `seq` as a path names it: 1 or more.
pub fn entry_seq() -> Object {
    integer(1, (1 << 53) - 1, false)
}

pub fn opt_seq() -> Object {
    integer(0, (1 << 53) - 1, true)
}

/// What a client may rely on about a value only the service issues: its
/// pattern says what it looks like, not that it will be taken. Said on the
/// parameter, and the operation documents the 400.
const ISSUED_ONLY: &str = "Only a value this service gave is taken: any other, even one of the \
                           right shape, is refused with 400 (`invalid`, `field` naming the \
                           parameter).";

/// What a stream does with a position of the right shape that this feed
/// never gave, or whose changes were trimmed.
const STREAM_FROM_OTHER: &str = "A stream asked to start from a position of the right shape \
                                 that this feed cannot resume from begins with `ready`, then \
                                 `refresh`.";

/// A position in the feed, as a read gave it: the feed's own spelling (at
/// most 64 slots of a 20-digit number each, well inside the length bound),
/// or a reviewer's sealed view, whose length varies with the view between
/// the bounds `crate::caller_positions` states, which the server enforces.
pub fn position() -> Object {
    use crate::caller_positions::{MAX_VIEW_TEXT, MIN_VIEW_TEXT};
    ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some(format!(
            r"^(f((0|[1-9][0-9]*)\.[1-9][0-9]*(_(0|[1-9][0-9]*)\.[1-9][0-9]*)*)?|[A-Za-z0-9_-]{{{MIN_VIEW_TEXT},}})$",
        )))
        .min_length(Some(1))
        .max_length(Some(MAX_VIEW_TEXT))
        .description(Some(format!(
            "A `position`, `next` or `head` of an earlier read (or an event's `id`), passed \
             back as it was given: the feed's own for a service or operator; for a reviewer, \
             sealed for it, {MIN_VIEW_TEXT} to {MAX_VIEW_TEXT} characters. {ISSUED_ONLY} \
             {STREAM_FROM_OTHER}"
        )))
        .build()
}

/// The longest position of the feed's own spelling: 64 slots, each a
/// slot number, a dot, a number of at most 20 digits and a separator.
const MAX_FEED_POSITION: usize = 1 + 64 * (2 + 1 + 20 + 1);

fn feed_position_of(nullable: bool) -> Object {
    ObjectBuilder::new()
        .schema_type(with_null(Type::String, nullable))
        .pattern(Some(
            r"^f((0|[1-9][0-9]*)\.[1-9][0-9]*(_(0|[1-9][0-9]*)\.[1-9][0-9]*)*)?$",
        ))
        .min_length(Some(1))
        .max_length(Some(MAX_FEED_POSITION))
        .description(Some(format!(
            "A position of the feed in its own spelling, as a service's or operator's read \
             of `/v1/events` gave it (`f` alone is the feed's start). A position past the \
             feed's head, or whose changes were trimmed, is refused with 400 (`invalid`, \
             `field` naming it). {ISSUED_ONLY}"
        )))
        .build()
}

/// A subscription's position to start or replay from.
pub fn feed_position() -> Object {
    feed_position_of(false)
}

pub fn opt_feed_position() -> Object {
    feed_position_of(true)
}

/// A webhook endpoint: an absolute `http` or `https` URL in printable
/// ASCII of at most 2,048 bytes, as the sender reads one.
pub fn endpoint_url() -> Object {
    use leasehold_webhooks::MAX_URL_BYTES;
    ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length(Some("http://".len() + 1))
        .max_length(Some(MAX_URL_BYTES))
        .pattern(Some("^https?://[!-~]+$"))
        .description(Some(
            "Where deliveries are POSTed: an absolute URL in printable ASCII (percent-encode \
             anything else), without credentials or a fragment. Only `https` unless the \
             server runs with --webhooks-allow-http; an address that is loopback, private, \
             link-local, unique-local, reserved or a cloud metadata service's is refused \
             unless a range the server allows holds it (a name is judged when each delivery \
             connects). Refused with 400 (`invalid`, `field` naming `url`).",
        ))
        .build()
}

/// A filter's list of verbs, kinds or runs: at most 64 names.
pub fn filter_names() -> Array {
    use leasehold_guest::subscriptions::row::MAX_FILTER_ITEMS;
    ArrayBuilder::new()
        .items(name())
        .max_items(Some(MAX_FILTER_ITEMS))
        .build()
}

/// How long an old signing key overlaps a new one: 0 to seven days, in
/// milliseconds.
pub fn overlap_ms() -> Object {
    use leasehold_guest::subscriptions::row::MAX_OVERLAP_MS;
    integer(0, MAX_OVERLAP_MS, false)
}

/// A stream's `Last-Event-ID`: any string, as only a stream reads it (a
/// page read ignores it), so no shape is promised that a page read would
/// not hold a client to.
pub fn event_id() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .description(Some(format!(
            "The `id` of the last event a stream sent, passed back as it was given. \
             {ISSUED_ONLY} {STREAM_FROM_OTHER}"
        )))
        .build()
}

/// A page cursor: opaque, sealed by the server (see `crate::cursor`).
pub fn cursor() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some(crate::cursor::PATTERN))
        .min_length(Some(crate::cursor::CURSOR_TEXT))
        .max_length(Some(crate::cursor::CURSOR_TEXT))
        .description(Some(format!(
            "The `next` of the previous page, passed back as it was given: sealed by the \
             server, so it can be neither read nor made. {ISSUED_ONLY}"
        )))
        .build()
}

/// One event of the event stream, as OpenAPI 3.2's `itemSchema` reads an
/// event (and tools read the `schema` of `text/event-stream` before 3.2):
/// its name, its `id` and its `data`, a JSON document. The data of a `task`
/// or `timer` event is a change as a JSON read gives it, the `change`
/// schema (`Event`): said with `contentSchema` under an `if` on the event's
/// name, as JSON Schema 2020-12 has them (utoipa builds neither, so they
/// are written as the object's extra keywords). The other names are said
/// in words, so a new kind of event is not a break of the document.
pub fn stream_event(change: &str) -> Object {
    let string = || ObjectBuilder::new().schema_type(Type::String);
    let changes = ["task", "timer"];
    let change_data = serde_json::json!({
        "if": {
            "properties": {"event": {"enum": changes}},
            "required": ["event"],
        },
        "then": {
            "properties": {"data": {
                "contentMediaType": "application/json",
                "contentSchema": {"$ref": format!("#/components/schemas/{change}")},
            }},
        },
    });
    let keywords = change_data
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.clone()));
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .property(
            "event",
            string().description(Some(
                "`ready`, `task`, `timer`, `job`, `refresh` or `dropped` (see README, \"Events\")",
            )),
        )
        .property(
            "id",
            string().description(Some("The position to resume after, as `Last-Event-ID`")),
        )
        .property(
            "data",
            string()
                .content_media_type("application/json")
                .description(Some(format!(
                    "A JSON document: for `task` and `timer`, the change (the `{change}` schema), \
                 exactly as a JSON read's entries are; for `job` (services and operators), the \
                 job as `GET /v1/jobs/{{id}}` answers it (the `Job` schema), with no `id`; for \
                 `ready`, `{{position}}`; for `refresh`, \
                 `{{head}}`; for `dropped`, `{{reason, resume}}`"
                ))),
        )
        .required("event")
        .required("data")
        .description(Some(
            "One server-sent event; for a service or operator, events with only an `id` move \
             the resume point on (a reviewer is sent none)",
        ))
        .extensions(Some(keywords.collect()))
        .build()
}

/// A page cursor in a body, where `null` is the first page.
pub fn opt_cursor() -> Object {
    let mut o = cursor();
    o.schema_type = with_null(Type::String, true);
    o
}

/// A search filter's kinds: at most 32 names (duplicates count once).
pub fn filter_kinds() -> Array {
    use leasehold_guest::search::MAX_KINDS;
    ArrayBuilder::new()
        .items(name())
        .max_items(Some(MAX_KINDS))
        .build()
}

/// Who holds a task, as a search filter asks it: `"nobody"`, or
/// `{"actor": name}` (WIT `assignee-filter`).
pub fn assignee_filter() -> utoipa::openapi::schema::Schema {
    use utoipa::openapi::schema::{OneOfBuilder, Schema};
    let one = OneOfBuilder::new()
        .item(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .enum_values(Some(["nobody"]))
                .description(Some("Nobody holds or last held it")),
        )
        .item(
            ObjectBuilder::new()
                .schema_type(Type::Object)
                .property("actor", name())
                .required("actor")
                .additional_properties(Some(
                    utoipa::openapi::schema::AdditionalProperties::FreeForm(false),
                ))
                .description(Some(
                    "This actor holds it (or, for a settled task, last held it)",
                )),
        )
        .item(ObjectBuilder::new().schema_type(Type::Null))
        .description(Some(
            "Who holds the task: `\"nobody\"` or `{\"actor\": name}`; null or absent: anyone",
        ))
        .build();
    Schema::OneOf(one)
}

/// A saved view's name: 1–128 characters without control characters.
pub fn view_name() -> Object {
    use leasehold_guest::search::views::MAX_VIEW_NAME;
    ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length(Some(1))
        .max_length(Some(MAX_VIEW_NAME))
        .pattern(Some(format!("^[^{NO_CONTROL}]{{1,{MAX_VIEW_NAME}}}$")))
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The document's patterns, read by a regex engine as a client would.
    #[test]
    fn the_name_pattern_admits_exactly_what_the_rules_admit() {
        let re = regex::Regex::new(&name_pattern()).expect("a valid pattern");
        for ok in ["a", " bob ", "é", &"x".repeat(256), &"😀".repeat(256)] {
            assert!(re.is_match(ok), "{ok:?}");
            assert!(leasehold_guest::validate::name("id", ok).is_ok(), "{ok:?}");
        }
        for bad in [
            "",
            "a\u{7}",
            "a\u{85}",
            "\n",
            &"x".repeat(257),
            &"é".repeat(257),
        ] {
            assert!(!re.is_match(bad), "{bad:?}");
            assert!(
                leasehold_guest::validate::name("id", bad).is_err(),
                "{bad:?}"
            );
        }
    }
}
