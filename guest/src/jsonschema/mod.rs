//! JSON Schema for decision outputs: a schema is compiled once, when it is
//! declared, and an output is validated against it in the settling
//! transaction.
//!
//! This module owns the subset of JSON Schema (draft 2020-12) that a form
//! needs, and is pure: no storage, no clock, no allocation beyond its
//! inputs' size. It must never accept a keyword it does not enforce (a
//! schema that uses one is refused when compiled, so no schema means less
//! than its author wrote), never panic, and never recurse deeper than a
//! compiled schema's bounded depth.
//!
//! # The subset
//!
//! Draft 2020-12 semantics throughout.
//!
//! - Boolean schemas: `true`, `false`.
//! - `type`: one name or a non-empty list of distinct names among `null`,
//!   `boolean`, `object`, `array`, `number`, `string`, `integer`. A number
//!   with no fractional part (`1.0`) is an integer.
//! - `enum` (an array, possibly empty), `const`: equality as the spec has
//!   it: numbers by value (`1` equals `1.0`), objects whatever their order.
//! - `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum` (numbers),
//!   compared by exact value, never rounded through `f64`.
//! - `multipleOf` (a number above 0), decided exactly in decimal, on the
//!   shortest decimal that round-trips each number: `19.99` is a multiple
//!   of `0.01`, as a form's author means, where binary division says not.
//! - `minLength`, `maxLength`: counted in Unicode code points.
//! - `items` (one schema; the list form is draft 2019-09's and refused),
//!   `minItems`, `maxItems`, `uniqueItems`.
//! - `properties`, `required` (an array of distinct strings),
//!   `additionalProperties` (a schema, so `false` too).
//! - Annotations, which never change validity and are only checked for
//!   form: `title`, `description`, `$comment` and `format` (strings;
//!   `format` is an annotation in 2020-12 unless a dialect asserts it),
//!   `default` (anything), `examples` (an array), `readOnly`, `writeOnly`,
//!   `deprecated` (booleans), and `$schema` at the root naming
//!   `https://json-schema.org/draft/2020-12/schema`.
//!
//! Every other keyword (`$ref`, `$defs`, `$id`, `pattern`, `allOf`,
//! `anyOf`, `oneOf`, `not`, `if`, `prefixItems`, `contains`,
//! `patternProperties`, `propertyNames`, `dependentRequired`,
//! `minProperties`, `unevaluatedProperties`, `content*`, unknown names, …)
//! is refused at compile time as [`SchemaError::Unsupported`], naming the
//! keyword and its place in the schema. A keyword whose value breaks its
//! rule (a negative length, a `required` that lists a name twice, a
//! `type` that names no type) is [`SchemaError::Malformed`], naming where.
//!
//! # Limits
//!
//! A schema takes at most [`MAX_SCHEMA_BYTES`] (64 KiB) as compact JSON,
//! nests at most [`MAX_SCHEMA_DEPTH`] (32) schemas below its root and at
//! most [`MAX_JSON_DEPTH`] (128) arrays and objects in all. Compiling and
//! validating recurse only along the schema's nesting; equality and
//! `uniqueItems` walk an instance with a stack of their own, so an instance
//! nested as deep as its parser allows costs no stack. Validation visits
//! each value of the instance once per schema that applies to it, so its
//! cost is at most the instance's size times the schema's, and
//! `uniqueItems` sorts its items (`n log n` comparisons).
//!
//! # Which violation is first
//!
//! Depth first through the instance. At each value, its schema's keywords
//! in this order: `false`; `type`; `const`; `enum`; for a number
//! `minimum`, `exclusiveMinimum`, `maximum`, `exclusiveMaximum`,
//! `multipleOf`; for a string `minLength`, `maxLength`; for an array
//! `minItems`, `maxItems`, `uniqueItems`, then each item in index order
//! against `items`; for an object `required` in the order the schema lists
//! the names, then each member in byte order of its name against its
//! `properties` schema, or `additionalProperties` when it has none.
//! `uniqueItems` names the first item equal to one before it.
//!
//! A [`Violation`] carries the instance location as a JSON Pointer (RFC
//! 6901: `~` written `~0`, `/` written `~1`, `""` for the whole instance),
//! the keyword's place in the schema, the keyword and a short message, and
//! displays as `/amount: maximum: 1500 is above 1000` (the whole instance
//! shown as `(root)`).
//!
//! Schema errors come in the same spirit: each schema's keywords in byte
//! order of their names, a subschema in full before the next keyword.
//!
//! # Why not a library
//!
//! The maintained Rust validators (`jsonschema`, `boon`, `valico`) need
//! `std` (with regex, URL and file or network loading), which the
//! component cannot link without importing WASI. The one `no_std` crate
//! found, `foundation_jsonschema` 0.0.3, is an early release of another
//! project's internal library; it links a regex engine that would more than
//! double the component's size, for `pattern`, which a form rarely needs,
//! and it validates every
//! keyword, so refusing the ones outside a subset would still need a walk
//! of the schema like the one here, which is most of the work. The subset is
//! checked against the official JSON Schema Test Suite
//! (`guest/tests/jsonschema_suite.rs`, files under
//! `guest/tests/fixtures/json-schema-test-suite/`).

mod compile;
mod error;
mod evaluate;
mod node;
mod value;

#[cfg(test)]
mod tests;

use serde_json::Value;

pub use compile::{DIALECT, MAX_JSON_DEPTH, MAX_SCHEMA_BYTES, MAX_SCHEMA_DEPTH};
pub use error::{SchemaError, Violation};

/// A compiled schema: checked once, then applied to any number of
/// instances.
#[derive(Clone, Debug)]
pub struct Schema {
    root: node::Node,
}

impl Schema {
    /// Compiles a schema document, refusing it (naming where) if it is
    /// malformed, too large, or uses a keyword outside the subset.
    pub fn compile(schema: &Value) -> Result<Schema, SchemaError> {
        compile::from_value(schema).map(|root| Schema { root })
    }

    /// [`Schema::compile`] from JSON text, whose length is checked before
    /// it is parsed.
    pub fn compile_str(text: &str) -> Result<Schema, SchemaError> {
        compile::from_text(text).map(|root| Schema { root })
    }

    /// The first violation of `instance` (in the order the module
    /// documents), or none.
    pub fn validate(&self, instance: &Value) -> Result<(), Violation> {
        evaluate::validate(&self.root, instance)
    }

    pub fn is_valid(&self, instance: &Value) -> bool {
        self.validate(instance).is_ok()
    }
}
