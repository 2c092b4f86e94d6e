//! The rule that keeps `host/cli/src` a DAG: no file imports a file that
//! imports it back (the check is [`leasehold_build::layering`]), so that a
//! command group can be read, and moved, without the rest. Test-only;
//! `cargo test -p leasehold-cli layering` runs it.

#[test]
fn cli_src_files_form_a_dag() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    leasehold_build::layering::assert_dag(&root);
}

/// The check sees this crate's imports: a circle made on purpose, in a
/// copy of two of its files, is found.
#[test]
fn a_circle_between_two_files_is_found() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let src = dir.path();
    std::fs::write(src.join("main.rs"), "mod error;\nmod keys;\n").expect("write");
    std::fs::write(
        src.join("error.rs"),
        "use crate::keys::MoveError;\npub enum CliError { Move(MoveError) }\n",
    )
    .expect("write");
    std::fs::write(
        src.join("keys.rs"),
        "pub struct MoveError;\nfn code() -> u8 { crate::error::REFUSED }\n",
    )
    .expect("write");
    let graph = leasehold_build::layering::graph(src).expect("the graph");
    assert!(
        leasehold_build::layering::cycle(&graph).is_some(),
        "{graph:?}"
    );
}
