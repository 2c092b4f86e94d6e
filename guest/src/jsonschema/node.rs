//! A compiled schema: every keyword already checked and in the form its
//! rule needs, so that validating reads and never fails on the schema.
//!
//! Owns the shape only; building it is `compile`'s, reading it `evaluate`'s.

#[allow(unused_imports)]
use crate::prelude::*;

use serde_json::Number;

use super::value::Decimal;

/// One schema: a boolean schema, or an object of keywords.
#[derive(Clone, Debug)]
pub enum Node {
    /// `true` (and `{}` would behave alike) or `false`.
    Bool(bool),
    Rules(Box<Rules>),
}

/// The assertions of one schema object. `None` or empty where the keyword
/// is absent.
#[derive(Clone, Debug, Default)]
pub struct Rules {
    /// Where this schema sits in its document (a JSON Pointer), for the
    /// schema path of a violation.
    pub path: String,
    pub types: Option<Types>,
    /// The canonical encodings of the allowed values, sorted and without
    /// duplicates, and how many values the schema listed.
    pub allowed: Option<(Vec<Vec<u8>>, usize)>,
    pub constant: Option<Vec<u8>>,
    pub minimum: Option<Number>,
    pub exclusive_minimum: Option<Number>,
    pub maximum: Option<Number>,
    pub exclusive_maximum: Option<Number>,
    pub multiple_of: Option<(Number, Decimal)>,
    pub min_length: Option<u64>,
    pub max_length: Option<u64>,
    pub min_items: Option<u64>,
    pub max_items: Option<u64>,
    pub unique_items: bool,
    pub items: Option<Node>,
    /// In the order the schema lists them.
    pub required: Vec<String>,
    /// Sorted by name, for a binary search per member.
    pub properties: Vec<(String, Node)>,
    pub additional_properties: Option<Node>,
}

/// A set of JSON Schema type names, one bit each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Types(u8);

/// The type names, in the order a message lists them.
pub const TYPE_NAMES: [&str; 7] = [
    "null", "boolean", "object", "array", "number", "string", "integer",
];

impl Types {
    pub const EMPTY: Types = Types(0);

    pub fn bit(name: &str) -> Option<u8> {
        let at = TYPE_NAMES.iter().position(|t| *t == name)?;
        Some(1 << at)
    }

    pub fn with(self, bit: u8) -> Types {
        Types(self.0 | bit)
    }

    pub fn has(self, bit: u8) -> bool {
        self.0 & bit != 0
    }

    /// Whether a value whose own type name is `name` belongs: an integer
    /// is also a number.
    pub fn admits(self, name: &str) -> bool {
        let has = |n: &str| Types::bit(n).is_some_and(|b| self.has(b));
        has(name) || (name == "integer" && has("number"))
    }

    pub fn names(self) -> impl Iterator<Item = &'static str> {
        TYPE_NAMES
            .iter()
            .enumerate()
            .filter(move |(i, _)| self.0 & (1 << i) != 0)
            .map(|(_, n)| *n)
    }
}
