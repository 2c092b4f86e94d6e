//! An instance against a compiled [`Node`]: the first violation, in a fixed
//! order, or none.
//!
//! Owns the order in which keywords are tried (see the module above); it
//! must never fail on the schema (compiling checked it) and never recurse
//! but along the schema, whose depth compiling bounded.

#[allow(unused_imports)]
use crate::prelude::*;

use serde_json::{Number, Value};

use super::error::{Violation, child, escape};
use super::node::{Node, Rules};
use super::value::{Decimal, Num, canonical, members_in_order, sorted_positions, type_name};

/// One step of the path from the instance's root to the value at hand.
enum Step<'v> {
    Key(&'v str),
    Index(usize),
}

/// The place a subschema was reached from, for a `false` schema's
/// violation, which has no keyword of its own.
#[derive(Clone, Copy)]
enum Via<'s> {
    Root,
    Items(&'s str),
    Property(&'s str, &'s str),
    Additional(&'s str),
}

pub fn validate(root: &Node, instance: &Value) -> Result<(), Violation> {
    let mut at = Vec::new();
    node(root, instance, &mut at, Via::Root)
}

fn pointer(at: &[Step<'_>]) -> String {
    let mut out = String::new();
    for step in at {
        out.push('/');
        match step {
            Step::Key(k) => out.push_str(&escape(k)),
            Step::Index(i) => out.push_str(&i.to_string()),
        }
    }
    out
}

fn node<'v>(
    schema: &Node,
    value: &'v Value,
    at: &mut Vec<Step<'v>>,
    via: Via<'_>,
) -> Result<(), Violation> {
    match schema {
        Node::Bool(true) => Ok(()),
        Node::Bool(false) => Err(refused_by_false(at, via)),
        Node::Rules(rules) => self::rules(rules, value, at),
    }
}

fn refused_by_false(at: &[Step<'_>], via: Via<'_>) -> Violation {
    let (keyword, schema_path, message) = match via {
        Via::Root => (
            "false",
            String::new(),
            "the schema allows no value".to_owned(),
        ),
        Via::Items(parent) => (
            "items",
            child(parent, "items"),
            "the schema allows no items".to_owned(),
        ),
        Via::Property(parent, name) => (
            "properties",
            child(&child(parent, "properties"), name),
            format!("the schema allows no value for {name:?}"),
        ),
        Via::Additional(parent) => (
            "additionalProperties",
            child(parent, "additionalProperties"),
            "not a property the schema names, and it allows no others".to_owned(),
        ),
    };
    Violation {
        instance_path: pointer(at),
        schema_path,
        keyword,
        message,
    }
}

fn violation(rules: &Rules, at: &[Step<'_>], keyword: &'static str, message: String) -> Violation {
    Violation {
        instance_path: pointer(at),
        schema_path: child(&rules.path, keyword),
        keyword,
        message,
    }
}

/// A value for a message: scalars as JSON (strings only when short),
/// anything else by its type.
fn brief(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) if s.chars().count() > 40 => "the string".to_owned(),
        Value::String(s) => format!("{s:?}"),
        Value::Array(_) => "the array".to_owned(),
        Value::Object(_) => "the object".to_owned(),
    }
}

fn rules<'v>(rules: &Rules, value: &'v Value, at: &mut Vec<Step<'v>>) -> Result<(), Violation> {
    if let Some(types) = rules.types {
        let found = type_name(value);
        if !types.admits(found) {
            let names: Vec<&str> = types.names().collect();
            let expected = match names.as_slice() {
                [one] => (*one).to_owned(),
                many => format!("one of {}", many.join(", ")),
            };
            let message = format!("expected {expected}, found {found}");
            return Err(violation(rules, at, "type", message));
        }
    }
    if rules.constant.is_some() || rules.allowed.is_some() {
        let encoded = canonical(value);
        if rules.constant.as_ref().is_some_and(|c| *c != encoded) {
            let message = format!("{} is not the one value allowed", brief(value));
            return Err(violation(rules, at, "const", message));
        }
        if let Some((allowed, listed)) = &rules.allowed
            && allowed.binary_search(&encoded).is_err()
        {
            let message = match listed {
                0 => "the schema allows no value".to_owned(),
                1 => format!("{} is not the one value allowed", brief(value)),
                n => format!("{} is not one of the {n} values allowed", brief(value)),
            };
            return Err(violation(rules, at, "enum", message));
        }
    }
    match value {
        Value::Number(n) => number(rules, n, at),
        Value::String(s) => string(rules, s, at),
        Value::Array(items) => array(rules, items, at),
        Value::Object(members) => object(rules, members, at),
        Value::Null | Value::Bool(_) => Ok(()),
    }
}

fn number(rules: &Rules, n: &Number, at: &[Step<'_>]) -> Result<(), Violation> {
    let x = Num::of(n);
    let order = |bound: &Number| x.cmp(Num::of(bound));
    if let Some(min) = &rules.minimum
        && order(min).is_lt()
    {
        return Err(violation(
            rules,
            at,
            "minimum",
            format!("{n} is below {min}"),
        ));
    }
    if let Some(min) = &rules.exclusive_minimum
        && order(min).is_le()
    {
        let message = format!("{n} is not above {min}");
        return Err(violation(rules, at, "exclusiveMinimum", message));
    }
    if let Some(max) = &rules.maximum
        && order(max).is_gt()
    {
        return Err(violation(
            rules,
            at,
            "maximum",
            format!("{n} is above {max}"),
        ));
    }
    if let Some(max) = &rules.exclusive_maximum
        && order(max).is_ge()
    {
        let message = format!("{n} is not below {max}");
        return Err(violation(rules, at, "exclusiveMaximum", message));
    }
    if let Some((m, divisor)) = &rules.multiple_of
        && !Decimal::of(n).is_some_and(|d| d.is_multiple_of(*divisor))
    {
        let message = format!("{n} is not a multiple of {m}");
        return Err(violation(rules, at, "multipleOf", message));
    }
    Ok(())
}

fn string(rules: &Rules, s: &str, at: &[Step<'_>]) -> Result<(), Violation> {
    if rules.min_length.is_none() && rules.max_length.is_none() {
        return Ok(());
    }
    // Code points, as the spec counts: a string's chars.
    let length = s.chars().count() as u64;
    if let Some(min) = rules.min_length
        && length < min
    {
        let message = format!("{length} characters, fewer than {min}");
        return Err(violation(rules, at, "minLength", message));
    }
    if let Some(max) = rules.max_length
        && length > max
    {
        let message = format!("{length} characters, more than {max}");
        return Err(violation(rules, at, "maxLength", message));
    }
    Ok(())
}

fn array<'v>(rules: &Rules, items: &'v [Value], at: &mut Vec<Step<'v>>) -> Result<(), Violation> {
    let length = items.len() as u64;
    if let Some(min) = rules.min_items
        && length < min
    {
        let message = format!("{length} items, fewer than {min}");
        return Err(violation(rules, at, "minItems", message));
    }
    if let Some(max) = rules.max_items
        && length > max
    {
        let message = format!("{length} items, more than {max}");
        return Err(violation(rules, at, "maxItems", message));
    }
    if rules.unique_items
        && let Some((first, again)) = first_repeat(items)
    {
        let message = format!("items {first} and {again} are equal");
        return Err(violation(rules, at, "uniqueItems", message));
    }
    if let Some(schema) = &rules.items {
        for (i, item) in items.iter().enumerate() {
            at.push(Step::Index(i));
            node(schema, item, at, Via::Items(&rules.path))?;
            at.pop();
        }
    }
    Ok(())
}

/// The earliest item equal to one before it, and the first such one: by
/// sorting canonical encodings, so `n log n` comparisons, not `n²`.
fn first_repeat(items: &[Value]) -> Option<(usize, usize)> {
    let encoded: Vec<Vec<u8>> = items.iter().map(canonical).collect();
    // Equal items sort together, each run in index order.
    let order = sorted_positions(encoded.len(), &|a, b| {
        encoded[a].cmp(&encoded[b]).then(a.cmp(&b))
    });
    order
        .windows(2)
        .filter(|w| encoded[w[0]] == encoded[w[1]])
        .map(|w| (w[0], w[1]))
        // Within a run of equal items, the pair at its start has the
        // run's first and second index; later pairs have larger ones.
        .min_by(|a, b| a.1.cmp(&b.1).then(a.0.cmp(&b.0)))
}

fn object<'v>(
    rules: &Rules,
    members: &'v serde_json::Map<String, Value>,
    at: &mut Vec<Step<'v>>,
) -> Result<(), Violation> {
    if let Some(missing) = rules.required.iter().find(|n| !members.contains_key(*n)) {
        let message = format!("the property {missing:?} is missing");
        return Err(violation(rules, at, "required", message));
    }
    if rules.properties.is_empty() && rules.additional_properties.is_none() {
        return Ok(());
    }
    for (name, value) in members_in_order(members) {
        let declared = rules
            .properties
            .binary_search_by(|(n, _)| n.as_str().cmp(name.as_str()))
            .ok()
            .and_then(|i| rules.properties.get(i));
        let (schema, via) = match declared {
            Some((n, schema)) => (schema, Via::Property(&rules.path, n.as_str())),
            None => match &rules.additional_properties {
                Some(schema) => (schema, Via::Additional(&rules.path)),
                None => continue,
            },
        };
        at.push(Step::Key(name));
        node(schema, value, at, via)?;
        at.pop();
    }
    Ok(())
}
