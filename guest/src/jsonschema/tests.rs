//! The validator's own rules: what it refuses when compiling, where and how
//! it reports a violation, its limits, and that no input makes it panic.
//! Conformance to the official test suite is `guest/tests/jsonschema_suite.rs`.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

fn compile(schema: Value) -> Schema {
    match Schema::compile(&schema) {
        Ok(s) => s,
        Err(e) => panic!("{schema} did not compile: {e}"),
    }
}

fn refusal(schema: Value) -> SchemaError {
    match Schema::compile(&schema) {
        Ok(_) => panic!("{schema} compiled"),
        Err(e) => e,
    }
}

fn violation(schema: Value, instance: Value) -> Violation {
    match compile(schema.clone()).validate(&instance) {
        Ok(()) => panic!("{instance} passed {schema}"),
        Err(v) => v,
    }
}

/// Drops a deeply nested value without serde_json's recursive drop.
fn unnest(deep: Value) {
    let mut stack = vec![deep];
    while let Some(v) = stack.pop() {
        match v {
            Value::Array(items) => stack.extend(items),
            Value::Object(members) => stack.extend(members.into_iter().map(|(_, v)| v)),
            _ => {}
        }
    }
}

fn nested_arrays(depth: usize) -> Value {
    let mut v = json!(0);
    for _ in 0..depth {
        v = Value::Array(vec![v]);
    }
    v
}

#[test]
fn a_violation_names_the_instance_path_the_keyword_and_why() {
    let schema = json!({
        "type": "object",
        "properties": {"amount": {"type": "number", "maximum": 1000}},
    });
    let v = violation(schema, json!({"amount": 1500}));
    assert_eq!(v.to_string(), "/amount: maximum: 1500 is above 1000");
    assert_eq!(v.instance_path, "/amount");
    assert_eq!(v.schema_path, "/properties/amount/maximum");
    assert_eq!(v.keyword, "maximum");
}

#[test]
fn instance_paths_are_escaped_json_pointers() {
    let schema = json!({"properties": {"a/b~c": {"items": {"type": "string"}}}});
    let v = violation(schema, json!({"a/b~c": ["x", 7]}));
    assert_eq!(v.instance_path, "/a~1b~0c/1");
    assert_eq!(v.schema_path, "/properties/a~1b~0c/items/type");
    let root = violation(json!({"type": "object"}), json!([]));
    assert_eq!(root.instance_path, "");
    assert_eq!(
        root.to_string(),
        "(root): type: expected object, found array"
    );
}

#[test]
fn an_unsupported_keyword_is_refused_where_it_stands() {
    for keyword in [
        "$ref",
        "pattern",
        "oneOf",
        "if",
        "prefixItems",
        "patternProperties",
        "x-ui",
    ] {
        let schema = json!({"properties": {"a": {"type": "string", keyword: {}}}});
        match refusal(schema) {
            SchemaError::Unsupported { path, keyword: k } => {
                assert_eq!(path, format!("/properties/a/{}", error::escape(keyword)));
                assert_eq!(k, keyword);
            }
            other => panic!("{keyword}: {other}"),
        }
    }
    let e = refusal(json!({"items": {"minContains": 1}}));
    assert_eq!(
        e.to_string(),
        "/items/minContains: the keyword \"minContains\" is not supported"
    );
}

#[test]
fn a_malformed_keyword_is_refused_naming_where() {
    let cases = [
        (json!({"minLength": -1}), "/minLength"),
        (json!({"maxItems": 1.5}), "/maxItems"),
        (json!({"required": ["a", "b", "a"]}), "/required"),
        (json!({"required": ["a", 1]}), "/required/1"),
        (json!({"required": "a"}), "/required"),
        (json!({"type": "float"}), "/type"),
        (json!({"type": []}), "/type"),
        (json!({"type": ["string", "string"]}), "/type"),
        (json!({"items": [{}]}), "/items"),
        (json!({"multipleOf": 0}), "/multipleOf"),
        (json!({"multipleOf": -2}), "/multipleOf"),
        (json!({"minimum": "1"}), "/minimum"),
        (json!({"exclusiveMaximum": true}), "/exclusiveMaximum"),
        (json!({"uniqueItems": 1}), "/uniqueItems"),
        (json!({"enum": {}}), "/enum"),
        (json!({"properties": []}), "/properties"),
        (json!({"properties": {"a": 3}}), "/properties/a"),
        (
            json!({"additionalProperties": null}),
            "/additionalProperties",
        ),
        (json!({"title": 1}), "/title"),
        (json!({"examples": {}}), "/examples"),
        (json!({"readOnly": "yes"}), "/readOnly"),
        (json!({"items": {"$schema": DIALECT}}), "/items/$schema"),
        (json!(3), ""),
    ];
    for (schema, want) in cases {
        match refusal(schema.clone()) {
            SchemaError::Malformed { path, why } => assert_eq!(path, want, "{schema}: {why}"),
            other => panic!("{schema}: {other}"),
        }
    }
}

#[test]
fn annotations_are_accepted_and_change_nothing() {
    let schema = compile(json!({
        "$schema": DIALECT,
        "$comment": "a form",
        "title": "Refund",
        "description": "what was decided",
        "type": "object",
        "properties": {"when": {
            "type": "string", "format": "date", "default": 7, "examples": [1],
            "readOnly": true, "writeOnly": false, "deprecated": false,
        }},
    }));
    // `format` asserts nothing, `default` need not match the type.
    assert!(schema.is_valid(&json!({"when": "not a date"})));
    assert!(schema.is_valid(&json!({})));
    assert!(Schema::compile(&json!({"$schema": format!("{DIALECT}#")})).is_ok());
    let draft7 = json!({"$schema": "http://json-schema.org/draft-07/schema#"});
    assert!(matches!(refusal(draft7), SchemaError::Dialect { path, .. } if path == "/$schema"));
}

#[test]
fn schema_errors_are_reported_in_byte_order_of_keywords() {
    // `maxLength` sorts before `pattern` and `type`, whatever the text says.
    let text = r#"{"type": 3, "pattern": "x", "maxLength": -1}"#;
    match Schema::compile_str(text) {
        Err(SchemaError::Malformed { path, .. }) => assert_eq!(path, "/maxLength"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_first_violation_follows_the_documented_order() {
    let schema = json!({
        "type": "object",
        "required": ["z", "a"],
        "properties": {"a": true, "b": {"type": "string"}, "c": {"maximum": 1}, "z": {}},
        "additionalProperties": false,
    });
    // `required` in the listed order, before any member.
    let v = violation(schema.clone(), json!({"b": 1, "c": 2}));
    assert_eq!(
        (v.keyword, v.message.as_str()),
        ("required", "the property \"z\" is missing")
    );
    // Members in byte order of their names.
    let v = violation(schema.clone(), json!({"z": 0, "a": 0, "c": 2, "b": 1}));
    assert_eq!((v.instance_path.as_str(), v.keyword), ("/b", "type"));
    let v = violation(schema, json!({"z": 0, "a": 0, "b": "", "d": 1}));
    assert_eq!(
        (v.instance_path.as_str(), v.keyword),
        ("/d", "additionalProperties")
    );
    assert_eq!(v.schema_path, "/additionalProperties");
    // An array's own keywords before its items; items in index order.
    let array = json!({"uniqueItems": true, "items": {"type": "integer"}});
    let v = violation(array.clone(), json!([1, "x", 2, 1.0, 2]));
    assert_eq!(
        (v.keyword, v.message.as_str()),
        ("uniqueItems", "items 0 and 3 are equal")
    );
    let v = violation(array, json!([1, "x", true]));
    assert_eq!(v.instance_path, "/1");
    // `type` before `enum`.
    let v = violation(json!({"type": "string", "enum": [1]}), json!(2));
    assert_eq!(v.keyword, "type");
}

#[test]
fn false_schemas_report_the_keyword_that_led_to_them() {
    let v = violation(json!(false), json!(null));
    assert_eq!((v.keyword, v.instance_path.as_str()), ("false", ""));
    let v = violation(json!({"properties": {"x": false}}), json!({"x": 1}));
    assert_eq!(
        (v.keyword, v.schema_path.as_str()),
        ("properties", "/properties/x")
    );
    let v = violation(json!({"items": false}), json!([1]));
    assert_eq!((v.keyword, v.instance_path.as_str()), ("items", "/0"));
    assert!(compile(json!({"items": false})).is_valid(&json!([])));
}

#[test]
fn lengths_count_code_points_and_numbers_compare_exactly() {
    let one = compile(json!({"maxLength": 1, "minLength": 1}));
    assert!(one.is_valid(&json!("\u{1F4A9}")));
    assert!(!one.is_valid(&json!("e\u{301}")));
    let cap = compile(json!({"maximum": 9_007_199_254_740_992.0}));
    assert!(cap.is_valid(&json!(9_007_199_254_740_992u64)));
    assert!(!cap.is_valid(&json!(9_007_199_254_740_993u64)));
    let integer = compile(json!({"type": "integer"}));
    assert!(integer.is_valid(&json!(1.0)));
    assert!(!integer.is_valid(&json!(1.5)));
    let cents = compile(json!({"multipleOf": 0.01}));
    assert!(cents.is_valid(&json!(19.99)));
    assert!(!cents.is_valid(&json!(19.999)));
    let empty = violation(json!({"enum": []}), json!(null));
    assert_eq!(empty.message, "the schema allows no value");
}

#[test]
fn schemas_beyond_the_limits_are_refused() {
    // Exactly at the limit, as text and as a value; one byte more is refused.
    let at_limit = |extra: usize| {
        let pad = MAX_SCHEMA_BYTES - r#"{"description":""}"#.len() + extra;
        format!(r#"{{"description":"{}"}}"#, "x".repeat(pad))
    };
    assert!(Schema::compile_str(&at_limit(0)).is_ok());
    let value: Value = serde_json::from_str(&at_limit(0)).expect("json");
    assert!(Schema::compile(&value).is_ok());
    assert!(matches!(
        Schema::compile_str(&at_limit(1)),
        Err(SchemaError::TooLarge { .. })
    ));
    let value: Value = serde_json::from_str(&at_limit(1)).expect("json");
    assert!(matches!(
        Schema::compile(&value),
        Err(SchemaError::TooLarge { .. })
    ));

    let big = format!(r#"{{"description": "{}"}}"#, "x".repeat(MAX_SCHEMA_BYTES));
    assert!(matches!(
        Schema::compile_str(&big),
        Err(SchemaError::TooLarge { .. })
    ));
    let value: Value = serde_json::from_str(&big).expect("json");
    assert!(matches!(
        Schema::compile(&value),
        Err(SchemaError::TooLarge { .. })
    ));

    let nest = |depth: usize| {
        let mut s = json!({"type": "integer"});
        for _ in 0..depth {
            s = json!({"items": s});
        }
        s
    };
    assert!(Schema::compile(&nest(MAX_SCHEMA_DEPTH)).is_ok());
    match refusal(nest(MAX_SCHEMA_DEPTH + 1)) {
        SchemaError::TooDeep { path, max } => {
            assert_eq!(path, "/items".repeat(MAX_SCHEMA_DEPTH + 1));
            assert_eq!(max, MAX_SCHEMA_DEPTH);
        }
        other => panic!("{other}"),
    }
    // A value built in code may nest past what the parser allows.
    // (Not `json!`, which would copy it by serializing, recursively.)
    let mut members = serde_json::Map::new();
    members.insert("const".to_owned(), nested_arrays(100_000));
    let deep = Value::Object(members);
    assert!(matches!(
        Schema::compile(&deep),
        Err(SchemaError::TooLarge { .. })
    ));
    unnest(deep);
    assert!(matches!(
        Schema::compile_str("{\"const\": 1"),
        Err(SchemaError::NotJson(_))
    ));
}

#[test]
fn deep_instances_cost_no_stack() {
    let schema = compile(json!({"enum": [1], "uniqueItems": true, "items": {"const": 2}}));
    let deep = Value::Array(vec![nested_arrays(100_000), nested_arrays(100_000)]);
    let v = schema.validate(&deep).expect_err("not in enum");
    assert_eq!(v.keyword, "enum");
    let schema = compile(json!({"uniqueItems": true}));
    let v = schema.validate(&deep).expect_err("two equal items");
    assert_eq!(v.message, "items 0 and 1 are equal");
    unnest(deep);
}

/// Any JSON value, small.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        prop::sample::select(vec!["string", "integer", "number", "object", "a/~", ""])
            .prop_map(Value::from),
        "\\PC{0,6}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map("[a-c/~]{0,2}", inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A keyword and an argument, mostly of the shape the keyword takes, now
/// and then anything at all (or a keyword outside the subset).
fn keyword(inner: BoxedStrategy<Value>) -> impl Strategy<Value = (String, Value)> {
    let name = |names: &'static [&'static str]| prop::sample::select(names).prop_map(str::to_owned);
    let types = prop::sample::select(vec![
        "string", "integer", "number", "null", "object", "array",
    ]);
    let number = prop_oneof![
        (-50i64..50).prop_map(Value::from),
        (-50.0f64..50.0).prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        prop::sample::select(vec![0.01, 0.5, 1e-8, 1e308]).prop_map(Value::from),
    ];
    prop_oneof![
        4 => (Just("type".to_owned()), prop_oneof![
            types.clone().prop_map(Value::from),
            prop::collection::btree_set(types, 1..3).prop_map(|t| json!(t)),
        ]),
        4 => (name(&["enum"]), prop::collection::vec(json_value(), 0..4).prop_map(Value::Array)),
        4 => (name(&["const", "default"]), json_value()),
        4 => (name(&["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"]), number),
        4 => (name(&["minLength", "maxLength", "minItems", "maxItems"]), (0u64..6).prop_map(Value::from)),
        4 => (name(&["uniqueItems", "readOnly"]), any::<bool>().prop_map(Value::from)),
        4 => (name(&["items", "additionalProperties"]), inner.clone()),
        4 => (name(&["required"]), prop::collection::btree_set("[a-c/~]{0,2}", 0..3).prop_map(|r| json!(r))),
        4 => (name(&["properties"]), prop::collection::btree_map("[a-c/~]{0,2}", inner, 0..4)
            .prop_map(|m| Value::Object(m.into_iter().collect()))),
        1 => (name(&["title", "format", "$schema", "pattern", "$ref", "oneOf", "prefixItems", "x"]),
            json_value()),
        1 => (name(&["type", "enum", "minLength", "items", "required", "properties"]), json_value()),
    ]
}

/// Schema-like values: objects of keywords, nested.
fn schema_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![any::<bool>().prop_map(Value::Bool), Just(json!({}))];
    leaf.prop_recursive(5, 64, 5, |inner| {
        prop::collection::vec(keyword(inner.boxed()), 0..5)
            .prop_map(|pairs| Value::Object(pairs.into_iter().collect()))
    })
}

fn place(e: &SchemaError) -> Option<&str> {
    match e {
        SchemaError::TooDeep { path, .. }
        | SchemaError::Unsupported { path, .. }
        | SchemaError::Dialect { path, .. }
        | SchemaError::Malformed { path, .. } => Some(path),
        _ => None,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn no_schema_and_no_instance_makes_it_panic(
        schema in prop_oneof![schema_value(), json_value()],
        instances in prop::collection::vec(json_value(), 1..4),
    ) {
        let from_text = Schema::compile_str(&schema.to_string());
        match Schema::compile(&schema) {
            Ok(compiled) => {
                prop_assert!(from_text.is_ok());
                for instance in &instances {
                    let first = compiled.validate(instance);
                    prop_assert_eq!(&first, &compiled.validate(instance));
                    if let Err(v) = first {
                        prop_assert!(v.instance_path.is_empty() || v.instance_path.starts_with('/'));
                        prop_assert!(!v.message.is_empty());
                    }
                }
            }
            Err(e) => {
                // Text may parse a float one ulp apart: compare places only.
                let text = from_text.err();
                prop_assert_eq!(text.as_ref().and_then(place), place(&e));
            }
        }
    }
}
