//! The revision contract over HTTP: a task's (or a kind's) revision is its
//! strong `ETag`, `"<revision>"`; a request that changes one task names the
//! revision it was shown in `If-Match`, which becomes the guard of its
//! call, and a stale one is answered 412 (`stale`, with the current
//! revision as a field and as the `ETag`, by `crate::problem`). `*` or no
//! `If-Match` is no guard. It owns the header's spelling both ways and the
//! document's statement of it; it must never turn a malformed `If-Match`
//! into no guard (that is a 400), nor tag an answer with anything but the
//! revision the rules answered.

use axum::extract::FromRequestParts;
use axum::http::header;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::problem::ApiError;

/// The `ETag` of a revision (kept with the problem mapping, which tags a
/// `stale` answer with the current one).
pub use crate::problem::etag;

/// The most digits an `If-Match` revision may have: every u64 of 19 digits
/// fits, so the document's pattern admits nothing the server refuses.
const MAX_DIGITS: usize = 19;

/// The pattern the document gives `If-Match`.
pub fn pattern() -> String {
    format!(r#"^(\*|"(0|[1-9][0-9]{{0,{}}})")$"#, MAX_DIGITS - 1)
}

/// What `If-Match` asks: the revision the caller was shown, or nothing
/// (absent, or `*`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IfMatch(pub Option<u64>);

/// Reads one `If-Match` value.
pub fn parse(text: &str) -> Result<IfMatch, ApiError> {
    if text == "*" {
        return Ok(IfMatch(None));
    }
    let refused = || {
        ApiError::invalid(
            "If-Match",
            "If-Match takes `*` or one strong ETag as this service gave it, such as \"3\" \
             (a weak W/\"3\" or a list is not taken)",
        )
    };
    let digits = text
        .strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .filter(|d| {
            !d.is_empty()
                && d.len() <= MAX_DIGITS
                && d.bytes().all(|b| b.is_ascii_digit())
                && (*d == "0" || !d.starts_with('0'))
        })
        .ok_or_else(refused)?;
    digits
        .parse()
        .map(|r| IfMatch(Some(r)))
        .map_err(|_| refused())
}

impl<S: Send + Sync> FromRequestParts<S> for IfMatch {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let mut values = parts.headers.get_all(header::IF_MATCH).iter();
        let Some(first) = values.next() else {
            return Ok(IfMatch(None));
        };
        if values.next().is_some() {
            return Err(ApiError::invalid("If-Match", "send one If-Match header"));
        }
        parse(first.to_str().unwrap_or("\u{0}"))
    }
}

/// A JSON answer tagged with the revision of what it is (`ETag`).
pub struct Tagged<T>(pub u64, pub T);

impl<T: Serialize> IntoResponse for Tagged<T> {
    fn into_response(self) -> Response {
        let mut res = axum::Json(self.1).into_response();
        res.headers_mut().insert(header::ETAG, etag(self.0));
        res
    }
}

/// The operations that take `If-Match`, by operationId.
pub const GUARDED: &[&str] = &[
    "claim",
    "release",
    "take-over",
    "renew",
    "settle",
    "escalate",
    "update",
    "assign",
    "unassign",
    "delegate",
    "note",
    "define-kind",
    "change-subscription",
    "set-subscription-state",
    "resume-subscription",
    "put-view",
    "delete-view",
];

/// The operations whose 200 answer carries an `ETag`, by operationId.
pub const TAGGED: &[&str] = &[
    "open",
    "get",
    "claim",
    "take-over",
    "renew",
    "escalate",
    "update",
    "assign",
    "unassign",
    "delegate",
    "note",
    "get-kind",
    "define-kind",
    "get-subscription",
    "change-subscription",
    "set-subscription-state",
    "resume-subscription",
    "rewind-subscription",
    "get-view",
    "put-view",
];

/// Says the contract in the document, on each operation it applies to:
/// the `If-Match` parameter and its 400 and 412, and the `ETag` of a 200.
pub fn document(doc: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::content::ContentBuilder;
    use utoipa::openapi::header::HeaderBuilder;
    use utoipa::openapi::path::{ParameterBuilder, ParameterIn};
    use utoipa::openapi::response::ResponseBuilder;
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    use utoipa::openapi::{Ref, RefOr, Required};
    let problem = |what: &str| {
        RefOr::T(
            ResponseBuilder::new()
                .description(what)
                .content(
                    "application/problem+json",
                    ContentBuilder::new()
                        .schema(Some(Ref::from_schema_name("Problem")))
                        .build(),
                )
                .build(),
        )
    };
    for item in doc.paths.paths.values_mut() {
        let ops = [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
        ];
        for op in ops.into_iter().flatten() {
            let id = op.operation_id.clone().unwrap_or_default();
            if GUARDED.contains(&id.as_str()) {
                let param = ParameterBuilder::new()
                    .name("If-Match")
                    .parameter_in(ParameterIn::Header)
                    .required(Required::False)
                    .description(Some(if id == "put-view" {
                        // A view's `PUT` without a revision makes it: there
                        // is nothing for it to be unguarded against.
                        "The `ETag` of the view the caller was shown (`\"<revision>\"`): the \
                         view is changed only at that revision, else 412 `stale` with the \
                         current one (404 when there is none). `*` or absent: the view is \
                         made, and refused (400, `field` naming `name`) when one of that name \
                         exists."
                    } else {
                        "The `ETag` the caller was shown (`\"<revision>\"`): the change is made \
                         only to that revision, else 412 `stale` with the current one. `*` or \
                         absent: no guard."
                    }))
                    .schema(Some(
                        ObjectBuilder::new()
                            .schema_type(Type::String)
                            .pattern(Some(pattern())),
                    ))
                    .build();
                op.parameters.get_or_insert_with(Vec::new).push(param);
                let responses = &mut op.responses.responses;
                responses.entry("400".to_owned()).or_insert_with(|| {
                    problem("Invalid input (a malformed `If-Match` names it as `field`)")
                });
                responses.insert(
                    "412".to_owned(),
                    problem(
                        "`stale`: the `If-Match` revision is not the current one; `revision` \
                         and the `ETag` header give the current one, and nothing was written",
                    ),
                );
            }
            if TAGGED.contains(&id.as_str())
                && let Some(RefOr::T(ok)) = op.responses.responses.get_mut("200")
            {
                ok.headers.insert(
                    "ETag".to_owned(),
                    HeaderBuilder::new()
                        .schema(ObjectBuilder::new().schema_type(Type::String))
                        .description(Some(
                            "The revision of what is answered, as a strong tag: \
                             `\"<revision>\"`; send it back as `If-Match`",
                        ))
                        .build(),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn if_match_takes_a_strong_tag_or_star_and_refuses_the_rest() {
        assert_eq!(parse("\"3\"").ok(), Some(IfMatch(Some(3))));
        assert_eq!(parse("\"0\"").ok(), Some(IfMatch(Some(0))));
        assert_eq!(parse("*").ok(), Some(IfMatch(None)));
        assert_eq!(
            parse("\"9999999999999999999\"").ok(),
            Some(IfMatch(Some(9_999_999_999_999_999_999)))
        );
        for bad in [
            "3",
            "W/\"3\"",
            "\"3\", \"4\"",
            "\"\"",
            "\"03\"",
            "\"-1\"",
            "\"x\"",
            "",
            "\"99999999999999999999\"",
        ] {
            let e = parse(bad).expect_err(bad);
            assert_eq!(e.problem().field.as_deref(), Some("If-Match"), "{bad}");
        }
    }

    /// The document's pattern admits exactly what the server takes.
    #[test]
    fn the_pattern_is_the_parser() {
        let re = regex::Regex::new(&pattern()).expect("a pattern");
        for v in [
            "*",
            "\"0\"",
            "\"12\"",
            "\"9999999999999999999\"",
            "3",
            "W/\"3\"",
            "\"03\"",
            "\"99999999999999999999\"",
            "\"\"",
        ] {
            assert_eq!(re.is_match(v), parse(v).is_ok(), "{v}");
        }
    }

    #[test]
    fn a_tag_is_the_quoted_revision() {
        assert_eq!(etag(42), "\"42\"");
    }
}
