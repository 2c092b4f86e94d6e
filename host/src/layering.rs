//! The rule that keeps `host/src` a DAG: no file imports a file that
//! imports it back, directly or through others. Test-only; it reads the
//! sources and must never depend on the modules it checks.
//!
//! An import is a `crate::` path (in a `use`, or spelt out in code) or a
//! `use child::…` of a module the file declares; it points at the file
//! that defines the longest module prefix of the path, so `crate::Limits`
//! points at `lib.rs`, which re-exports everything: a module reaches its
//! siblings by their own paths, never through the crate root or a parent's
//! re-exports. Comments do not count; `super::` paths are refused (except
//! a test module's `use super::*`), so every import is one this check sees.
//! `cargo test -p leasehold-host layering` runs it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, by its module path (`storage::redb`).
fn modules(root: &Path) -> BTreeMap<String, PathBuf> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("a source directory") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(root).expect("under the root");
            let mut parts: Vec<String> = rel
                .with_extension("")
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect();
            if parts.last().is_some_and(|l| l == "mod" || l == "lib") {
                parts.pop();
            }
            out.insert(parts.join("::"), path);
        }
    }
    out
}

/// The source without comments (doc comments included) and with string
/// literals emptied, so that neither a comment nor a message that spells a
/// path counts as an import. Char literals are kept whole, so a `'"'` does
/// not open a string.
fn code(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '/' && chars.get(i + 1) == Some(&'/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if c == '"' {
            out.push('"');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            out.push('"');
            i += 1;
            continue;
        }
        if c == '\'' {
            // A char literal: 'x' or an escape such as '\'' or '\n'.
            let len = match (chars.get(i + 1), chars.get(i + 2), chars.get(i + 3)) {
                (Some('\\'), Some(_), Some('\'')) => 4,
                (Some(_), Some('\''), _) => 3,
                _ => 1,
            };
            out.extend(&chars[i..(i + len).min(chars.len())]);
            i += len;
            continue;
        }
        out.push(c);
        i += 1;
    }
    out
}

/// The module paths a file's code names after `prefix` (`crate::`, or a
/// declared child's name and `::`): runs of identifiers joined by `::`.
fn paths_after<'a>(code: &'a str, prefix: &str) -> Vec<Vec<&'a str>> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find(prefix) {
        let before = rest[..at].chars().next_back();
        let tail = &rest[at + prefix.len()..];
        rest = tail;
        // `$crate::` in a macro is the caller's, and `x_crate::` is not us.
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$' || c == ':') {
            continue;
        }
        let path: Vec<&str> = tail
            .split("::")
            .map_while(|seg| {
                let end = seg
                    .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .unwrap_or(seg.len());
                (end > 0).then(|| &seg[..end])
            })
            .collect();
        out.push(path);
    }
    out
}

/// The file a module path points at: the longest prefix that is a module.
fn target(mods: &BTreeMap<String, PathBuf>, path: &[&str]) -> String {
    (0..=path.len())
        .rev()
        .map(|n| path[..n].join("::"))
        .find(|m| mods.contains_key(m))
        .unwrap_or_default()
}

/// The child modules a file declares (`mod x;`, `pub mod x;`, …).
fn children(code: &str) -> Vec<String> {
    code.lines()
        .filter_map(|l| {
            let l = l.trim();
            let l = l
                .strip_prefix("pub(crate) ")
                .or_else(|| l.strip_prefix("pub "))
                .unwrap_or(l);
            let name = l.strip_prefix("mod ")?.strip_suffix(';')?;
            Some(name.to_owned())
        })
        .collect()
}

fn graph(root: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mods = modules(root);
    let mut edges = BTreeMap::new();
    for (module, path) in &mods {
        let code = code(&std::fs::read_to_string(path).expect("a source file"));
        let bad_super = code
            .match_indices("super::")
            .any(|(at, _)| !code[..at].ends_with("use ") || !code[at..].starts_with("super::*;"));
        assert!(
            !bad_super,
            "{module} names a path through `super::`; use `crate::` so the import graph sees it"
        );
        let mut to = BTreeSet::new();
        for p in paths_after(&code, "crate::") {
            to.insert(target(&mods, &p));
        }
        for child in children(&code) {
            let full = if module.is_empty() {
                child.clone()
            } else {
                format!("{module}::{child}")
            };
            for p in paths_after(&code, &format!("{child}::")) {
                let mut path: Vec<&str> = full.split("::").collect();
                path.extend(p);
                to.insert(target(&mods, &path));
            }
        }
        to.remove(module);
        edges.insert(module.clone(), to);
    }
    edges
}

/// A cycle of the graph, if it has one.
fn cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit(
        at: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        marks: &mut BTreeMap<String, Mark>,
        trail: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match marks.get(at) {
            Some(Mark::Done) => return None,
            Some(Mark::Open) => {
                let from = trail.iter().position(|m| m == at).unwrap_or(0);
                let mut found = trail[from..].to_vec();
                found.push(at.to_owned());
                return Some(found);
            }
            None => {}
        }
        marks.insert(at.to_owned(), Mark::Open);
        trail.push(at.to_owned());
        for next in edges.get(at).into_iter().flatten() {
            if let Some(c) = visit(next, edges, marks, trail) {
                return Some(c);
            }
        }
        trail.pop();
        marks.insert(at.to_owned(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    edges
        .keys()
        .find_map(|m| visit(m, edges, &mut marks, &mut Vec::new()))
}

fn shown(m: &str) -> &str {
    if m.is_empty() { "lib" } else { m }
}

#[test]
fn host_src_files_form_a_dag() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let edges = graph(&root);
    if let Some(c) = cycle(&edges) {
        let names: Vec<&str> = c.iter().map(|m| shown(m)).collect();
        panic!("host/src has an import cycle: {}", names.join(" -> "));
    }
}

/// The check finds a cycle where there is one, through a re-export of the
/// crate root as well as directly.
#[test]
fn the_check_sees_cycles() {
    let dir = tempfile::tempdir().expect("temp dir");
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("dirs");
        std::fs::write(path, text).expect("write");
    };
    write("lib.rs", "mod a;\nmod b;\npub use a::A;\n");
    write(
        "a.rs",
        "use crate::b::B; // crate::lib is a comment\nconst S: &str = \"crate::\";\n",
    );
    write("b.rs", "pub struct B;\nfn f() -> crate::A { todo!() }\n");
    let c = cycle(&graph(dir.path())).expect("a cycle");
    assert!(
        c.contains(&"a".to_owned()) && c.contains(&String::new()),
        "{c:?}"
    );
    write("b.rs", "pub struct B;\n");
    assert_eq!(cycle(&graph(dir.path())), None);
}
