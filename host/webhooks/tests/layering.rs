//! The rule that keeps `host/webhooks/src` a DAG: no file imports a file
//! that imports it back (the check is [`leasehold_build::layering`]).

#[test]
fn webhooks_src_files_form_a_dag() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    leasehold_build::layering::assert_dag(&root);
}
