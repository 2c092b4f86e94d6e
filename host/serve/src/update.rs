//! A field of an update (a `PATCH` body) in its three states: absent (leave
//! it as it is), `null` (clear it), or a value (set it). JSON tells the
//! three apart and `Option` cannot, so an update's fields are
//! [`Update<T>`], each with `#[serde(default)]`; its body is read with
//! `crate::extract::UpdateJson`, which refuses an empty or `null` body
//! rather than read it as `{}`. It owns the three states, their JSON and
//! their schema; it must never read an absent field as a `null` one, nor
//! the reverse.

use serde::de::{Deserialize, Deserializer, Error as _};
use serde::ser::{Error as _, Serialize, Serializer};
use utoipa::ToSchema;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Schema, Type};

/// One field of an update. Declare it `#[serde(default, skip_serializing_if
/// = "Update::is_keep")]`: absent, it is [`Update::Keep`]. Without the
/// `default`, an absent field is refused as missing, never read as `null`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Update<T> {
    /// Absent: leave the field as it is.
    #[default]
    Keep,
    /// `null`: clear the field.
    Clear,
    /// A value: set the field to it.
    Set(T),
}

impl<T> Update<T> {
    /// Whether the field is left as it is (absent).
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn is_keep(&self) -> bool {
        matches!(self, Update::Keep)
    }

    /// The field after the update, given what it held: kept, cleared or
    /// set.
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn apply(self, current: Option<T>) -> Option<T> {
        match self {
            Update::Keep => current,
            Update::Clear => None,
            Update::Set(v) => Some(v),
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Update<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Read as a whole value, not as an `Option`: serde reads an absent
        // field without `default` as `None`, which would clear it. Read as
        // a value, an absent field is refused as missing.
        let v = serde_json::Value::deserialize(d)?;
        if v.is_null() {
            return Ok(Update::Clear);
        }
        T::deserialize(v).map(Update::Set).map_err(D::Error::custom)
    }
}

impl<T: Serialize> Serialize for Update<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Update::Keep => Err(S::Error::custom(
                "a field left as it is is not written: mark it \
                 #[serde(skip_serializing_if = \"Update::is_keep\")]",
            )),
            Update::Clear => s.serialize_none(),
            Update::Set(v) => s.serialize_some(v),
        }
    }
}

/// As the document states it: `null`, or the value's schema (as an
/// `Option`'s reads); optional in its object because of `#[serde(default)]`.
fn either(value: RefOr<Schema>) -> RefOr<Schema> {
    OneOfBuilder::new()
        .item(ObjectBuilder::new().schema_type(Type::Null))
        .item(value)
        .description(Some("Absent: left as it is; null: cleared; a value: set"))
        .into()
}

/// A component of its own per value type, `Update_<T>` (the derive names
/// it after the type and its parameter), unless the field is
/// `#[schema(inline)]`; a constrained field gives its own `schema_with`.
impl<T: ToSchema> ToSchema for Update<T> {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        T::schemas(schemas);
    }
}

/// How the `ToSchema` derive states a field of a generic type, as it does
/// an `Option`: with the schema (or reference) it made for `T`. (utoipa
/// makes `PartialSchema` of it, with `T`'s own schema.)
impl<T: ToSchema> utoipa::__dev::ComposeSchema for Update<T> {
    fn compose(generics: Vec<RefOr<Schema>>) -> RefOr<Schema> {
        either(generics.into_iter().next().unwrap_or_else(T::schema))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::{Deserialize, Serialize};
    use utoipa::ToSchema;

    #[derive(Debug, Deserialize, Serialize, PartialEq, ToSchema)]
    #[serde(deny_unknown_fields)]
    struct Patch {
        #[serde(default, skip_serializing_if = "Update::is_keep")]
        due_at: Update<i64>,
        #[serde(default, skip_serializing_if = "Update::is_keep")]
        assignee: Update<String>,
    }

    fn read(json: &str) -> Result<Patch, serde_json::Error> {
        serde_json::from_str(json)
    }

    #[test]
    fn absent_null_and_a_value_are_three_states() {
        let p = read(r#"{"due_at": 5, "assignee": null}"#).expect("a patch");
        assert_eq!(p.due_at, Update::Set(5));
        assert_eq!(p.assignee, Update::Clear);
        let p = read("{}").expect("a patch");
        assert_eq!(p.due_at, Update::Keep);
        assert_eq!(p.assignee, Update::Keep);
        let p = read(r#"{"assignee": "bob"}"#).expect("a patch");
        assert_eq!(p.due_at, Update::Keep);
        assert_eq!(p.assignee, Update::Set("bob".to_owned()));
    }

    #[test]
    fn a_wrong_value_is_refused_not_cleared() {
        assert!(read(r#"{"due_at": "soon"}"#).is_err());
        assert!(read(r#"{"due_at": [1]}"#).is_err());
        assert!(read(r#"{"assignee": 7}"#).is_err());
    }

    /// Without `default`, a field that is absent is refused as missing:
    /// never read as `null`, which would clear it.
    #[test]
    fn an_absent_field_never_reads_as_null() {
        #[derive(Debug, Deserialize)]
        struct Forgot {
            #[allow(dead_code)]
            due_at: Update<i64>,
        }
        let e = serde_json::from_str::<Forgot>("{}").expect_err("missing");
        assert!(e.to_string().contains("missing field"), "{e}");
        assert!(serde_json::from_str::<Forgot>(r#"{"due_at": null}"#).is_ok());
    }

    #[test]
    fn it_writes_back_as_it_was_read() {
        for json in [
            r#"{"due_at":5,"assignee":null}"#,
            "{}",
            r#"{"assignee":"bob"}"#,
        ] {
            let p = read(json).expect("a patch");
            assert_eq!(serde_json::to_string(&p).expect("writes"), json);
        }
        #[derive(Serialize)]
        struct Forgot {
            due_at: Update<i64>,
        }
        assert!(
            serde_json::to_string(&Forgot {
                due_at: Update::Keep
            })
            .is_err(),
            "a kept field is never written as null"
        );
    }

    #[test]
    fn apply_keeps_clears_or_sets() {
        assert_eq!(Update::Keep.apply(Some(1)), Some(1));
        assert_eq!(Update::<i64>::Clear.apply(Some(1)), None);
        assert_eq!(Update::Set(2).apply(Some(1)), Some(2));
        assert_eq!(Update::Set(2).apply(None), Some(2));
    }

    /// The document says what the wire takes: each field optional, and
    /// either null or its value.
    #[test]
    fn the_schema_is_the_value_or_null_and_optional() {
        use utoipa::PartialSchema;
        let schema = serde_json::to_value(Patch::schema()).expect("a schema");
        let mut components = Vec::new();
        <Patch as ToSchema>::schemas(&mut components);
        let components: serde_json::Map<String, serde_json::Value> = components
            .into_iter()
            .map(|(name, s)| (name, serde_json::to_value(s).expect("a schema")))
            .collect();
        let required = schema["required"].as_array().cloned().unwrap_or_default();
        assert!(required.is_empty(), "{schema:#}");
        for (field, value) in [("due_at", "integer"), ("assignee", "string")] {
            let mut s = &schema["properties"][field];
            if let Some(r) = s["$ref"].as_str() {
                let name = r.trim_start_matches("#/components/schemas/");
                s = components
                    .get(name)
                    .unwrap_or_else(|| panic!("{name} is not among {components:?}"));
            }
            let one_of = s["oneOf"]
                .as_array()
                .unwrap_or_else(|| panic!("{field}: {s:#}"));
            let types: Vec<&serde_json::Value> = one_of.iter().map(|s| &s["type"]).collect();
            assert_eq!(types, ["null", value], "{field}: {s:#}");
        }
    }
}
