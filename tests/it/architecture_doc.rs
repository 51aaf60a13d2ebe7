//! docs/architecture.md names every top-level module of src/ (issue 37, item 9): a module added without a
//! word on where it sits fails here.

use std::path::Path;

#[test]
fn architecture_names_every_top_level_module() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).unwrap();
    let modules: Vec<&str> = lib
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod "))
        .filter_map(|l| l.strip_suffix(';'))
        .collect();
    assert!(modules.len() > 10, "the modules of src/lib.rs: {modules:?}");
    let missing: Vec<&&str> = modules
        .iter()
        .filter(|m| !doc.contains(&format!("| `{m}` |")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/architecture.md's module table lacks {missing:?}"
    );
}
