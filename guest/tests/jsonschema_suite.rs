//! The official JSON Schema Test Suite against `leasehold_guest::jsonschema`:
//! the draft 2020-12 file of every keyword the validator supports (under
//! `fixtures/json-schema-test-suite/`, refreshed by its `update` script;
//! 4.26.0 of the Python package it copies them from carries the suite as
//! of upstream commit b5037ed).
//!
//! A case whose schema compiles must get the suite's answer. A case whose
//! schema uses a keyword outside the subset must be refused when compiled,
//! as unsupported, never answered: that is how the validator avoids
//! silently ignoring a keyword. Any other refusal is a disagreement, since
//! every schema in the suite is valid.

mod jsonschema {
    use std::collections::BTreeMap;
    use std::path::{Path, PathBuf};

    use leasehold_guest::jsonschema::{Schema, SchemaError};
    use serde::Deserialize;
    use serde_json::Value;

    /// The files the fixtures must hold: one per supported keyword, and
    /// those of boolean schemas and of the annotations `default` and
    /// `format`.
    const FILES: [&str; 20] = [
        "additionalProperties",
        "boolean_schema",
        "const",
        "default",
        "enum",
        "exclusiveMaximum",
        "exclusiveMinimum",
        "format",
        "items",
        "maxItems",
        "maxLength",
        "maximum",
        "minItems",
        "minLength",
        "minimum",
        "multipleOf",
        "properties",
        "required",
        "type",
        "uniqueItems",
    ];

    #[derive(Deserialize)]
    struct Group {
        description: String,
        schema: Value,
        tests: Vec<Case>,
    }

    #[derive(Deserialize)]
    struct Case {
        description: String,
        data: Value,
        valid: bool,
    }

    fn suite_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/json-schema-test-suite/draft2020-12")
    }

    #[derive(Default)]
    struct Tally {
        agreed: usize,
        refused_cases: usize,
        refused_by_keyword: BTreeMap<String, usize>,
        disagreements: Vec<String>,
    }

    fn run_file(name: &str, tally: &mut Tally) -> usize {
        let path = suite_dir().join(format!("{name}.json"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!("{}: {e} (run the fixtures' update script)", path.display())
        });
        let groups: Vec<Group> =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}.json: {e}"));
        let mut agreed_here = 0;
        for group in groups {
            match Schema::compile(&group.schema) {
                Ok(schema) => {
                    for case in group.tests {
                        let answer = schema.validate(&case.data);
                        if answer.is_ok() == case.valid {
                            tally.agreed += 1;
                            agreed_here += 1;
                        } else {
                            tally.disagreements.push(format!(
                                "{name}.json: {} / {}: the suite says {}, the validator {:?}",
                                group.description,
                                case.description,
                                if case.valid { "valid" } else { "invalid" },
                                answer
                            ));
                        }
                    }
                }
                Err(SchemaError::Unsupported { keyword, .. }) => {
                    tally.refused_cases += group.tests.len();
                    *tally.refused_by_keyword.entry(keyword).or_default() += group.tests.len();
                }
                Err(other) => tally.disagreements.push(format!(
                    "{name}.json: {}: a valid schema was refused: {other}",
                    group.description
                )),
            }
        }
        agreed_here
    }

    #[test]
    fn every_case_of_the_official_suite_is_answered_as_it_says_or_refused() {
        let mut tally = Tally::default();
        for name in FILES {
            let agreed = run_file(name, &mut tally);
            assert!(
                agreed > 0,
                "{name}.json: no case ran; the keyword is untested"
            );
        }
        eprintln!(
            "{} files: {} cases agree with the suite; {} cases refused at compile, by keyword: {:?}",
            FILES.len(),
            tally.agreed,
            tally.refused_cases,
            tally.refused_by_keyword
        );
        assert!(
            tally.disagreements.is_empty(),
            "{} disagreements:\n{}",
            tally.disagreements.len(),
            tally.disagreements.join("\n")
        );
    }

    /// The fixtures hold exactly the files above, so a keyword's file that
    /// is added or dropped is noticed here.
    #[test]
    fn the_fixtures_hold_the_files_of_the_supported_keywords() {
        let mut found: Vec<String> = std::fs::read_dir(suite_dir())
            .expect("fixtures")
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                e.file_name()
                    .to_str()?
                    .strip_suffix(".json")
                    .map(str::to_owned)
            })
            .collect();
        found.sort();
        assert_eq!(found, FILES);
    }
}
