//! What compiling and validating answer when they refuse: a schema error
//! naming where in the schema, a violation naming where in the instance.
//!
//! Owns the wording and the JSON Pointer spelling (RFC 6901); it must never
//! decide what is valid.

#[allow(unused_imports)]
use crate::prelude::*;

use core::fmt;

/// Why a schema was refused. Every variant but the first two names the
/// schema location (a JSON Pointer into the schema document, `""` for its
/// root).
#[derive(Debug)]
#[non_exhaustive]
pub enum SchemaError {
    /// The schema text is not JSON.
    NotJson(serde_json::Error),
    /// The schema is larger than [`super::MAX_SCHEMA_BYTES`] written as
    /// compact JSON, or nests deeper than [`super::MAX_JSON_DEPTH`].
    TooLarge { why: String },
    /// A schema nests more than `max` (that is, [`super::MAX_SCHEMA_DEPTH`])
    /// schemas deep.
    TooDeep { path: String, max: usize },
    /// A keyword outside the supported subset: refused rather than ignored,
    /// so no schema means less than its author wrote.
    Unsupported { path: String, keyword: String },
    /// `$schema` names a dialect other than draft 2020-12 (whose keywords
    /// may mean other things).
    Dialect { path: String, uri: String },
    /// A keyword's value breaks the JSON Schema rules for it.
    Malformed { path: String, why: String },
}

/// The first place an instance breaks a schema.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// Where in the instance, as a JSON Pointer (`""` for the whole).
    pub instance_path: String,
    /// The keyword's place in the schema, as a JSON Pointer.
    pub schema_path: String,
    /// The keyword that refused (`false` for a `false` schema).
    pub keyword: &'static str,
    /// What is wrong, briefly.
    pub message: String,
}

/// `segment` escaped for a JSON Pointer: `~` as `~0`, `/` as `~1`.
pub fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

/// A pointer one segment deeper.
pub fn child(path: &str, segment: &str) -> String {
    format!("{path}/{}", escape(segment))
}

/// A pointer for a message: the root, `""`, would read as nothing.
fn shown(path: &str) -> &str {
    if path.is_empty() { "(root)" } else { path }
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SchemaError::NotJson(e) => write!(f, "the schema is not JSON: {e}"),
            SchemaError::TooLarge { why } => write!(f, "the schema {why}"),
            SchemaError::TooDeep { path, max } => {
                write!(f, "{}: schemas nest more than {max} deep", shown(path))
            }
            SchemaError::Unsupported { path, keyword } => {
                write!(
                    f,
                    "{}: the keyword {keyword:?} is not supported",
                    shown(path)
                )
            }
            SchemaError::Dialect { path, uri } => write!(
                f,
                "{}: the dialect {uri:?} is not supported, only draft 2020-12",
                shown(path)
            ),
            SchemaError::Malformed { path, why } => write!(f, "{}: {why}", shown(path)),
        }
    }
}

impl core::error::Error for SchemaError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            SchemaError::NotJson(e) => Some(e),
            _ => None,
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {}: {}",
            shown(&self.instance_path),
            self.keyword,
            self.message
        )
    }
}

impl core::error::Error for Violation {}
