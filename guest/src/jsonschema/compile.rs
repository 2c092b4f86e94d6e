//! A schema document to a [`Node`] tree: every keyword checked against the
//! rules draft 2020-12 gives it, every keyword outside the subset refused.
//!
//! Owns what a schema may say and the limits on its size; it must never
//! accept a keyword it does not enforce, nor recurse deeper than
//! [`MAX_SCHEMA_DEPTH`].

#[allow(unused_imports)]
use crate::prelude::*;

use serde_json::{Number, Value};

use super::error::{SchemaError, child};
use super::node::{Node, Rules, Types};
use super::value::{
    Decimal, Num, canonical, is_integer, members_in_order, sorted_positions, type_name,
};

/// The most bytes a schema takes, written as compact JSON (or as given,
/// for text): far more than a form needs, and it bounds the cost of every
/// validation by a constant times the instance's size.
pub const MAX_SCHEMA_BYTES: usize = 64 * 1024;
/// The most schemas nested in one another (`properties`, `items`,
/// `additionalProperties`), the root at depth 0. Compiling and validating
/// recurse once per level, so this bounds their stack.
pub const MAX_SCHEMA_DEPTH: usize = 32;
/// The deepest a schema document's arrays and objects nest (inside `enum`,
/// `const`, `default`, … too): serde_json's own parsing limit, checked
/// again for a [`Value`] built in code, since serializing it recurses.
pub const MAX_JSON_DEPTH: usize = 128;
/// The one dialect `$schema` may name.
pub const DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";

pub fn from_text(text: &str) -> Result<Node, SchemaError> {
    if text.len() > MAX_SCHEMA_BYTES {
        return Err(too_large(text.len()));
    }
    let value: Value = serde_json::from_str(text).map_err(SchemaError::NotJson)?;
    from_value(&value)
}

pub fn from_value(value: &Value) -> Result<Node, SchemaError> {
    measure(value)?;
    schema(value, "", 0)
}

fn too_large(bytes: usize) -> SchemaError {
    SchemaError::TooLarge {
        why: format!("is {bytes} bytes, more than {MAX_SCHEMA_BYTES}"),
    }
}

/// Refuses a document past the limits: its compact JSON length (counted
/// without writing it) and its nesting. Iterative, and it stops at the
/// first limit passed, so a hostile value costs no stack and little time.
fn measure(value: &Value) -> Result<usize, SchemaError> {
    let mut bytes = 0usize;
    let mut stack = vec![(value, 1usize)];
    while let Some((v, depth)) = stack.pop() {
        let own = match v {
            Value::Null | Value::Bool(true) => 4,
            Value::Bool(false) => 5,
            Value::Number(n) => n.to_string().len(),
            Value::String(s) => quoted_len(s),
            // Brackets and commas.
            Value::Array(items) => 1 + items.len().max(1),
            // Braces, commas, and each name with its colon.
            Value::Object(members) => members.keys().fold(1 + members.len().max(1), |n, k| {
                n.saturating_add(quoted_len(k) + 1)
            }),
        };
        bytes = bytes.saturating_add(own);
        if bytes > MAX_SCHEMA_BYTES {
            return Err(SchemaError::TooLarge {
                why: format!("is more than {MAX_SCHEMA_BYTES} bytes"),
            });
        }
        let children: &mut dyn Iterator<Item = &Value> = match v {
            Value::Array(items) => &mut items.iter(),
            Value::Object(members) => &mut members.values(),
            _ => continue,
        };
        if depth > MAX_JSON_DEPTH {
            return Err(SchemaError::TooLarge {
                why: format!("nests more than {MAX_JSON_DEPTH} arrays and objects deep"),
            });
        }
        stack.extend(children.map(|child| (child, depth + 1)));
    }
    Ok(bytes)
}

/// A string's length as serde_json writes it: quoted, with `"`, `\` and
/// control characters escaped.
fn quoted_len(s: &str) -> usize {
    s.chars().fold(2usize, |n, c| {
        n.saturating_add(match c {
            '"' | '\\' | '\u{8}' | '\u{c}' | '\n' | '\r' | '\t' => 2,
            c if u32::from(c) < 0x20 => 6,
            c => c.len_utf8(),
        })
    })
}

fn malformed(path: &str, why: impl Into<String>) -> SchemaError {
    SchemaError::Malformed {
        path: path.to_owned(),
        why: why.into(),
    }
}

/// One schema at `path`, `depth` schemas below the root. Keywords are taken
/// in byte order of their names, depth first, so the error reported is the
/// same whatever order the document listed them in.
fn schema(value: &Value, path: &str, depth: usize) -> Result<Node, SchemaError> {
    if depth > MAX_SCHEMA_DEPTH {
        return Err(SchemaError::TooDeep {
            path: path.to_owned(),
            max: MAX_SCHEMA_DEPTH,
        });
    }
    let members = match value {
        Value::Bool(b) => return Ok(Node::Bool(*b)),
        Value::Object(members) => members,
        other => {
            return Err(malformed(
                path,
                format!(
                    "a schema is an object or a boolean, not {}",
                    article(type_name(other))
                ),
            ));
        }
    };
    let mut rules = Rules {
        path: path.to_owned(),
        ..Rules::default()
    };
    for (keyword, v) in members_in_order(members) {
        let at = child(path, keyword);
        match keyword.as_str() {
            "type" => rules.types = Some(types(&at, v)?),
            "enum" => {
                let Value::Array(values) = v else {
                    return Err(malformed(&at, "enum must be an array"));
                };
                let encoded: Vec<Vec<u8>> = values.iter().map(canonical).collect();
                let mut allowed: Vec<Vec<u8>> = Vec::with_capacity(encoded.len());
                for i in sorted_positions(encoded.len(), &|a, b| encoded[a].cmp(&encoded[b])) {
                    if allowed.last() != Some(&encoded[i]) {
                        allowed.push(encoded[i].clone());
                    }
                }
                rules.allowed = Some((allowed, values.len()));
            }
            "const" => rules.constant = Some(canonical(v)),
            "minimum" => rules.minimum = Some(number(&at, keyword, v)?.clone()),
            "maximum" => rules.maximum = Some(number(&at, keyword, v)?.clone()),
            "exclusiveMinimum" => rules.exclusive_minimum = Some(number(&at, keyword, v)?.clone()),
            "exclusiveMaximum" => rules.exclusive_maximum = Some(number(&at, keyword, v)?.clone()),
            "multipleOf" => {
                let n = number(&at, keyword, v)?;
                let positive = Num::of(n).cmp(Num::Int(0)).is_gt();
                match Decimal::of(n) {
                    Some(d) if positive && !d.is_zero() => rules.multiple_of = Some((n.clone(), d)),
                    _ => {
                        return Err(malformed(
                            &at,
                            format!("multipleOf must be above 0, not {n}"),
                        ));
                    }
                }
            }
            "minLength" => rules.min_length = Some(count(&at, keyword, v)?),
            "maxLength" => rules.max_length = Some(count(&at, keyword, v)?),
            "minItems" => rules.min_items = Some(count(&at, keyword, v)?),
            "maxItems" => rules.max_items = Some(count(&at, keyword, v)?),
            "uniqueItems" => rules.unique_items = boolean(&at, keyword, v)?,
            "items" => {
                if v.is_array() {
                    return Err(malformed(
                        &at,
                        "items takes one schema in draft 2020-12; a list of schemas is \
                         prefixItems, which is not supported",
                    ));
                }
                rules.items = Some(schema(v, &at, depth + 1)?);
            }
            "required" => rules.required = required(&at, v)?,
            "properties" => rules.properties = properties(&at, v, depth)?,
            "additionalProperties" => {
                rules.additional_properties = Some(schema(v, &at, depth + 1)?);
            }
            "$schema" => dialect(&at, v, depth)?,
            "title" | "description" | "$comment" | "format" => {
                if !v.is_string() {
                    return Err(malformed(&at, format!("{keyword} must be a string")));
                }
            }
            "readOnly" | "writeOnly" | "deprecated" => {
                boolean(&at, keyword, v)?;
            }
            "examples" => {
                if !v.is_array() {
                    return Err(malformed(&at, "examples must be an array"));
                }
            }
            "default" => {}
            _ => {
                return Err(SchemaError::Unsupported {
                    path: at,
                    keyword: keyword.clone(),
                });
            }
        }
    }
    Ok(Node::Rules(Box::new(rules)))
}

fn article(name: &str) -> String {
    match name {
        "array" | "integer" | "object" => format!("an {name}"),
        "null" => "null".to_owned(),
        _ => format!("a {name}"),
    }
}

/// A value for a message, without writing out a large one.
fn shown(v: &Value) -> String {
    match v {
        Value::Number(n) => n.to_string(),
        Value::String(s) => format!("{s:?}"),
        other => article(type_name(other)),
    }
}

fn types(at: &str, v: &Value) -> Result<Types, SchemaError> {
    let bit = |name: &Value| match name {
        Value::String(s) => Types::bit(s).ok_or_else(|| {
            malformed(
                at,
                format!(
                    "{s:?} is not a type (null, boolean, object, array, number, string, integer)"
                ),
            )
        }),
        _ => Err(malformed(at, "type names are strings")),
    };
    match v {
        Value::Array(names) if !names.is_empty() => {
            let mut set = Types::EMPTY;
            for name in names {
                let b = bit(name)?;
                if set.has(b) {
                    let message = format!("type lists {} twice", shown(name));
                    return Err(malformed(at, message));
                }
                set = set.with(b);
            }
            Ok(set)
        }
        Value::Array(_) => Err(malformed(at, "type must list at least one type")),
        name => Ok(Types::EMPTY.with(bit(name)?)),
    }
}

fn number<'v>(at: &str, keyword: &str, v: &'v Value) -> Result<&'v Number, SchemaError> {
    match v {
        Value::Number(n) => Ok(n),
        other => Err(malformed(
            at,
            format!(
                "{keyword} must be a number, not {}",
                article(type_name(other))
            ),
        )),
    }
}

/// A non-negative integer (`2.0` included, as the spec has it); one past
/// `u64` is as good as infinite.
fn count(at: &str, keyword: &str, v: &Value) -> Result<u64, SchemaError> {
    if let Value::Number(n) = v {
        match Num::of(n) {
            Num::Int(i) if i >= 0 => return Ok(u64::try_from(i).unwrap_or(u64::MAX)),
            // `as` saturates above u64::MAX.
            Num::Float(f) if f >= 0.0 && is_integer(n) => return Ok(f as u64),
            _ => {}
        }
    }
    Err(malformed(
        at,
        format!("{keyword} must be a non-negative integer, not {}", shown(v)),
    ))
}

fn boolean(at: &str, keyword: &str, v: &Value) -> Result<bool, SchemaError> {
    v.as_bool()
        .ok_or_else(|| malformed(at, format!("{keyword} must be true or false")))
}

fn required(at: &str, v: &Value) -> Result<Vec<String>, SchemaError> {
    let Value::Array(names) = v else {
        return Err(malformed(at, "required must be an array of property names"));
    };
    let mut out = Vec::with_capacity(names.len());
    for (i, name) in names.iter().enumerate() {
        match name {
            Value::String(s) => out.push(s.clone()),
            _ => {
                return Err(malformed(
                    &child(at, &i.to_string()),
                    "a required property name must be a string",
                ));
            }
        }
    }
    let sorted = sorted_positions(out.len(), &|a, b| out[a].cmp(&out[b]));
    if let Some(twice) = sorted.windows(2).find(|w| out[w[0]] == out[w[1]]) {
        let message = format!("required lists {:?} twice", out[twice[0]]);
        return Err(malformed(at, message));
    }
    Ok(out)
}

fn properties(at: &str, v: &Value, depth: usize) -> Result<Vec<(String, Node)>, SchemaError> {
    let Value::Object(members) = v else {
        return Err(malformed(
            at,
            "properties must be an object of a schema per property",
        ));
    };
    members_in_order(members)
        .into_iter()
        .map(|(name, s)| Ok((name.clone(), schema(s, &child(at, name), depth + 1)?)))
        .collect()
}

/// `$schema` may only name draft 2020-12, and only at the root: below it,
/// the spec allows it only at the root of an embedded resource (`$id`),
/// which is not supported.
fn dialect(at: &str, v: &Value, depth: usize) -> Result<(), SchemaError> {
    if depth > 0 {
        return Err(malformed(at, "$schema belongs only at the schema's root"));
    }
    match v.as_str() {
        Some(uri) if uri.strip_suffix('#').unwrap_or(uri) == DIALECT => Ok(()),
        Some(uri) => Err(SchemaError::Dialect {
            path: at.to_owned(),
            uri: uri.to_owned(),
        }),
        None => Err(malformed(at, "$schema must be a string")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            "\\PC{0,4}|[\"\\\\\\x00-\\x1f]{0,3}".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map("[\"a\\x01]{0,2}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn the_measured_size_is_the_compact_json_length(value in json()) {
            let written = serde_json::to_string(&value).map(|t| t.len()).ok();
            prop_assert_eq!(measure(&value).ok(), written);
        }
    }
}
