//! The rule that keeps a crate's source files a DAG: no file imports a file
//! that imports it back, directly or through others. Each crate's tests run
//! it on their own `src` (`host/src`, `guest/src`, and any other crate that
//! adds the one-line test); it reads sources only and must never depend on
//! the code it checks.
//!
//! An import is a `crate::` path (in a `use`, or spelt out in code), a
//! `super::` path, or a `use child::…` of a module the file declares; it
//! points at the file that defines the longest module prefix of the path,
//! so `crate::Limits` points at `lib.rs`, which re-exports everything: a
//! module reaches its siblings by their own paths, never through the crate
//! root or a parent's re-exports. A `super::` inside an inline module
//! (`mod tests { use super::*; }`) is the file's own module, so a test
//! module's `use super::*` is no import. Comments and string literals do
//! not count.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// Which modules each module imports: module paths (`storage::redb`; the
/// crate root is the empty path) to the modules they import.
pub type Graph = BTreeMap<String, BTreeSet<String>>;

/// Every `.rs` file under `root`, by its module path (`storage::redb`).
fn modules(root: &Path) -> io::Result<BTreeMap<String, PathBuf>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(root).unwrap_or(&path);
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
    Ok(out)
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

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Where the bodies of inline modules (`mod tests { … }`) lie in `code`.
fn inline_modules(code: &str) -> Vec<Range<usize>> {
    let bytes = code.as_bytes();
    let mut out = Vec::new();
    for (at, _) in code.match_indices("mod ") {
        if code[..at].chars().next_back().is_some_and(is_ident) {
            continue;
        }
        let rest = &code[at + 4..];
        let name = rest.find(|c: char| !is_ident(c)).unwrap_or(rest.len());
        let after = rest[name..].trim_start();
        if name == 0 || !after.starts_with('{') {
            continue;
        }
        let open = code.len() - after.len();
        let (mut depth, mut end, mut i) = (0usize, code.len(), open);
        while i < bytes.len() {
            match bytes[i] {
                // A brace as a char literal ('{') opens nothing.
                b'\'' if bytes.get(i + 2) == Some(&b'\'') => i += 2,
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = i;
                        break;
                    }
                }
                _ => {}
            }
            i += 1;
        }
        out.push(open..end);
    }
    out
}

/// The module paths a file's `super::` paths name, as full paths from the
/// crate root: `super::` climbs from the file's module, except inside an
/// inline module, where the first one climbs back to the file's own.
fn super_paths(code: &str, module: &str) -> Vec<Vec<String>> {
    let inline = inline_modules(code);
    let mut out = Vec::new();
    for (at, _) in code.match_indices("super::") {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| is_ident(c) || c == ':' || c == '$') {
            continue;
        }
        let mut tail = &code[at..];
        let mut up = 0usize;
        while let Some(rest) = tail.strip_prefix("super::") {
            up += 1;
            tail = rest;
        }
        let nested = inline.iter().filter(|r| r.contains(&at)).count();
        let mut path: Vec<String> = if module.is_empty() {
            Vec::new()
        } else {
            module.split("::").map(str::to_owned).collect()
        };
        for _ in 0..up.saturating_sub(nested) {
            path.pop();
        }
        path.extend(tail.split("::").map_while(|seg| {
            let end = seg.find(|c: char| !is_ident(c)).unwrap_or(seg.len());
            (end > 0).then(|| seg[..end].to_owned())
        }));
        out.push(path);
    }
    out
}

/// The import graph of the crate whose sources are under `root` (its
/// `src`): which file imports which.
pub fn graph(root: &Path) -> io::Result<Graph> {
    let mods = modules(root)?;
    let mut edges = BTreeMap::new();
    for (module, path) in &mods {
        let code = code(&std::fs::read_to_string(path)?);
        let mut to = BTreeSet::new();
        for p in paths_after(&code, "crate::") {
            to.insert(target(&mods, &p));
        }
        for p in super_paths(&code, module) {
            let p: Vec<&str> = p.iter().map(String::as_str).collect();
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
    Ok(edges)
}

/// A cycle of the graph, if it has one, as the modules along it (the first
/// again at the end).
pub fn cycle(edges: &Graph) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit(
        at: &str,
        edges: &Graph,
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
    if m.is_empty() { "the crate root" } else { m }
}

/// Panics, naming the circle, unless the files under `root` form a DAG;
/// for a crate's test: `assert_dag(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"))`.
///
/// # Panics
///
/// When the sources cannot be read, or they import in a circle.
pub fn assert_dag(root: &Path) {
    let edges = graph(root).unwrap_or_else(|e| panic!("cannot read {}: {e}", root.display()));
    assert!(
        edges.len() > 1,
        "{} holds no modules to check",
        root.display()
    );
    if let Some(c) = cycle(&edges) {
        let names: Vec<&str> = c.iter().map(|m| shown(m)).collect();
        panic!(
            "{} has an import cycle: {}",
            root.display(),
            names.join(" -> ")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Tree(PathBuf);

    impl Tree {
        fn new(name: &str) -> Tree {
            let dir = std::env::temp_dir()
                .join(format!("leasehold-layering-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            Tree(dir)
        }

        fn write(&self, name: &str, text: &str) {
            let path = self.0.join(name);
            std::fs::create_dir_all(path.parent().expect("a parent")).expect("dirs");
            std::fs::write(path, text).expect("write");
        }

        fn cycle(&self) -> Option<Vec<String>> {
            cycle(&graph(&self.0).expect("reads"))
        }
    }

    impl Drop for Tree {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// The check finds a cycle where there is one, through a re-export of
    /// the crate root as well as directly, and not in comments or strings.
    #[test]
    fn the_check_sees_cycles_through_crate_paths() {
        let t = Tree::new("crate");
        t.write("lib.rs", "mod a;\nmod b;\npub use a::A;\n");
        t.write(
            "a.rs",
            "use crate::b::B; // crate::lib is a comment\nconst S: &str = \"crate::\";\n",
        );
        t.write("b.rs", "pub struct B;\nfn f() -> crate::A { todo!() }\n");
        let c = t.cycle().expect("a cycle");
        assert!(
            c.contains(&"a".to_owned()) && c.contains(&String::new()),
            "{c:?}"
        );
        t.write("b.rs", "pub struct B;\n");
        assert_eq!(t.cycle(), None);
    }

    /// `super::` climbs from the file's module, but inside an inline module
    /// its first step is back to the file.
    #[test]
    fn the_check_follows_super_paths() {
        let t = Tree::new("super");
        t.write("lib.rs", "mod store;\n");
        t.write("store/mod.rs", "mod rows;\nmod record;\n");
        t.write(
            "store/rows.rs",
            "use super::record::Log;\npub struct Row;\n",
        );
        t.write(
            "store/record.rs",
            "pub struct Log;\nfn f(r: &super::rows::Row) {}\n",
        );
        let c = t.cycle().expect("a cycle");
        assert!(c.contains(&"store::rows".to_owned()), "{c:?}");
        t.write(
            "store/rows.rs",
            "pub struct Row;\n#[cfg(test)]\nmod tests {\n    fn g(c: char) -> bool { c == '}' }\n\
             \x20   use super::*;\n    use super::super::record::Log;\n}\n",
        );
        let edges = graph(&t.0).expect("reads");
        assert_eq!(
            edges["store::rows"],
            BTreeSet::from(["store::record".to_owned()]),
            "the test module's `super::super` is the parent, its `super::*` the file"
        );
        assert_eq!(
            t.cycle().map(|c| c.len()),
            Some(3),
            "rows -> record -> rows"
        );
        t.write(
            "store/rows.rs",
            "pub struct Row;\nmod tests {\n    use super::*;\n}\n",
        );
        assert_eq!(t.cycle(), None);
    }
}
