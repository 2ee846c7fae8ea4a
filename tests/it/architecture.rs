//! The layering ARCHITECTURE.md states, checked: which crate may import which, that the engine's
//! dependency tree holds nothing of the CLI, the network or the charts, that no two files of a
//! crate import each other, and that every crate root says what it is.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Each library crate and the forkcache crates it may depend on (ARCHITECTURE.md's table).
const MAY_IMPORT: &[(&str, &[&str])] = &[
    ("wire", &[]),
    ("engine", &["wire"]),
    ("scenario", &["wire", "engine"]),
    ("ingest", &["wire", "engine"]),
    ("report", &["wire", "engine", "scenario", "ingest"]),
    ("net", &["wire", "engine", "ingest"]),
];

/// What an embeddable engine must not pull in, however indirectly.
const NOT_UNDER_THE_ENGINE: &[&str] =
    &["tokio", "hyper", "axum", "plotters", "image", "clap", "indicatif", "mimalloc", "rlimit"];

#[test]
fn each_crate_depends_only_on_the_layers_below_it() {
    for (crate_name, allowed) in MAY_IMPORT {
        let manifest = read(&Path::new(ROOT).join("crates").join(crate_name).join("Cargo.toml"));
        let dependencies = section(&manifest, "[dependencies]");
        let used: BTreeSet<&str> = dependencies
            .iter()
            .filter_map(|line| line.strip_prefix("forkcache-")?.split(['.', ' ']).next())
            .collect();
        let above: Vec<_> = used.iter().filter(|name| !allowed.contains(name)).collect();
        assert!(above.is_empty(), "forkcache-{crate_name} depends on forkcache-{above:?}, which it may not");
        let source = rust_files(&Path::new(ROOT).join("crates").join(crate_name).join("src"));
        for (path, text) in &source {
            for name in ["wire", "engine", "scenario", "ingest", "report", "net"] {
                let named = text.contains(&format!("forkcache_{name}::"));
                assert!(
                    !named || name == *crate_name || allowed.contains(&name),
                    "{} names forkcache_{name}, a crate forkcache-{crate_name} may not see",
                    path.display()
                );
            }
        }
    }
}

#[test]
fn the_engine_pulls_in_no_cli_network_or_chart_crate() {
    let lock = read(&Path::new(ROOT).join("Cargo.lock"));
    let graph = lock_graph(&lock);
    let mut seen = BTreeSet::new();
    let mut todo = vec!["forkcache-engine".to_string()];
    while let Some(name) = todo.pop() {
        if seen.insert(name.clone()) {
            todo.extend(graph.get(&name).into_iter().flatten().cloned());
        }
    }
    assert!(
        seen.contains("serde_json") && seen.contains("forkcache-wire"),
        "the walk reaches the engine's deps"
    );
    let found: Vec<_> = seen.iter().filter(|name| NOT_UNDER_THE_ENGINE.contains(&name.as_str())).collect();
    assert!(found.is_empty(), "the engine's dependency tree holds {found:?}");
}

#[test]
fn no_two_files_of_a_crate_import_each_other() {
    let mut roots: Vec<PathBuf> =
        MAY_IMPORT.iter().map(|(name, _)| Path::new(ROOT).join("crates").join(name).join("src")).collect();
    roots.push(Path::new(ROOT).join("src"));
    let mut pairs = Vec::new();
    for root in &roots {
        pairs.extend(mutual_imports(root));
    }
    assert!(pairs.is_empty(), "files that import each other: {pairs:#?}");
}

#[test]
fn the_checker_finds_a_pair_that_imports_each_other() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("architecture-pair");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("lib.rs"), "mod a;\nmod b;\n").unwrap();
    std::fs::write(dir.join("a.rs"), "use crate::b::B;\npub struct A;\n").unwrap();
    std::fs::write(dir.join("b.rs"), "use super::a::A; // comment: crate::c\npub struct B;\n").unwrap();
    assert_eq!(mutual_imports(&dir), [("a.rs".to_string(), "b.rs".to_string())]);
    // A child and the parent that declares it may name each other.
    std::fs::write(dir.join("b.rs"), "pub struct B;\n").unwrap();
    std::fs::write(dir.join("lib.rs"), "mod a;\nmod b;\nuse a::A;\n").unwrap();
    std::fs::write(dir.join("a.rs"), "use crate::b::B;\nuse super::A as _;\npub struct A;\n").unwrap();
    assert!(mutual_imports(&dir).is_empty());
}

#[test]
fn every_crate_root_says_what_it_is_and_documents_its_api() {
    for (name, _) in MAY_IMPORT {
        let path = Path::new(ROOT).join("crates").join(name).join("src/lib.rs");
        let text = read(&path);
        let doc_lines = text.lines().take_while(|line| line.starts_with("//!")).count();
        assert!(doc_lines >= 2, "{} opens with at least two lines of crate doc", path.display());
        assert!(text.contains("#![deny(missing_docs)]"), "{} denies missing docs", path.display());
        assert!(
            text.contains("must never import") || text.contains("never import"),
            "{} says what it must never import",
            path.display()
        );
    }
}

/// The lines of one `[section]` of a manifest, up to the next section.
fn section<'a>(manifest: &'a str, name: &str) -> Vec<&'a str> {
    let mut lines = manifest.lines().skip_while(|line| line.trim() != name).skip(1);
    let mut out = Vec::new();
    for line in lines.by_ref() {
        if line.starts_with('[') {
            break;
        }
        out.push(line.trim());
    }
    out
}

/// Cargo.lock as package name → the names it depends on (every kind, every feature: a tree
/// that passes this check passes for any build of it).
fn lock_graph(lock: &str) -> BTreeMap<String, Vec<String>> {
    let mut graph = BTreeMap::new();
    for package in lock.split("[[package]]").skip(1) {
        let name =
            package.lines().find_map(|l| l.strip_prefix("name = ")).map(|n| n.trim_matches('"').to_string());
        let Some(name) = name else { continue };
        let deps: Vec<String> = package
            .split("dependencies = [")
            .nth(1)
            .and_then(|rest| rest.split(']').next())
            .map(|list| {
                list.split(',')
                    .map(|d| d.trim().trim_matches('"'))
                    .filter(|d| !d.is_empty())
                    // "name version" when several versions are locked: the name is enough.
                    .map(|d| d.split(' ').next().unwrap_or(d).to_string())
                    .collect()
            })
            .unwrap_or_default();
        graph.entry(name).or_insert_with(Vec::new).extend(deps);
    }
    graph
}

/// Pairs of files under `root` (a crate's `src`) that import each other, other than a module and
/// the child it declares. Paths are relative to `root`.
fn mutual_imports(root: &Path) -> Vec<(String, String)> {
    let files = rust_files(root);
    let modules: BTreeMap<Vec<String>, PathBuf> =
        files.keys().map(|path| (module_path(root, path), path.clone())).collect();
    let mut edges: BTreeMap<&PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
    for (path, text) in &files {
        let here = module_path(root, path);
        let code = without_comments_and_tests(text);
        for target in referenced_modules(&code, &here) {
            if let Some(file) = resolve(&modules, &target).filter(|file| *file != path) {
                edges.entry(path).or_default().insert(file.clone());
            }
        }
    }
    let mut pairs = Vec::new();
    for (a, targets) in &edges {
        for b in targets {
            let back = edges.get(b).is_some_and(|set| set.contains(*a));
            let (ma, mb) = (module_path(root, a), module_path(root, b));
            let parent_and_child = ma.len() + 1 == mb.len() && mb.starts_with(&ma)
                || mb.len() + 1 == ma.len() && ma.starts_with(&mb);
            if back && *a < b && !parent_and_child {
                let relative = |p: &Path| p.strip_prefix(root).unwrap_or(p).display().to_string();
                pairs.push((relative(a), relative(b)));
            }
        }
    }
    pairs
}

/// `a/b.rs` → `["a", "b"]`; `a/mod.rs` → `["a"]`; `lib.rs` and `main.rs` → `[]`.
fn module_path(root: &Path, path: &Path) -> Vec<String> {
    let relative = path.strip_prefix(root).unwrap_or(path).with_extension("");
    let mut parts: Vec<String> = relative.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    if parts.last().is_some_and(|last| ["mod", "lib", "main"].contains(&last.as_str())) {
        parts.pop();
    }
    parts
}

/// The longest module path `target` starts with that is a file.
fn resolve<'a>(modules: &'a BTreeMap<Vec<String>, PathBuf>, target: &[String]) -> Option<&'a PathBuf> {
    (1..=target.len()).rev().find_map(|n| modules.get(&target[..n]))
}

/// Module paths the code names: `crate::a::b`, `super::a` (relative to `here`), the items of a
/// group (`crate::{a, b::{c, d}}`), and a child module's items (`child::item`).
fn referenced_modules(code: &str, here: &[String]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let is_word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut at = 0;
    while at < bytes.len() {
        if !is_word(bytes[at]) || (at > 0 && (is_word(bytes[at - 1]) || bytes[at - 1] == b':')) {
            at += 1;
            continue;
        }
        let end = path_end(code, at);
        let path = &code[at..end];
        let mut segments: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
        let base: Vec<String> = match segments.first() {
            Some(&"crate") => {
                segments.remove(0);
                Vec::new()
            }
            Some(&"super") => {
                let ups = segments.iter().take_while(|s| **s == "super").count();
                segments.drain(..ups);
                here[..here.len().saturating_sub(ups)].to_vec()
            }
            Some(_) if path.contains("::") => here.to_vec(),
            _ => {
                at = end.max(at + 1);
                continue;
            }
        };
        let mut full = base;
        full.extend(segments.iter().map(|s| s.to_string()));
        if code[end..].starts_with('{') {
            group_items(code, end, &full, &mut out);
        }
        out.push(full);
        at = end.max(at + 1);
    }
    out
}

/// Where a path (`a::b::`) starting at `at` ends: before a `{`, or at the first other character.
fn path_end(code: &str, at: usize) -> usize {
    let rest = &code[at..];
    let len = rest.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')).unwrap_or(rest.len());
    at + len
}

/// The items of the group opening at `open` (a `{`), each under `base`, nested groups included.
fn group_items(code: &str, open: usize, base: &[String], out: &mut Vec<Vec<String>>) {
    let mut depth = 0;
    let mut start = open + 1;
    for (offset, c) in code[open..].char_indices() {
        let at = open + offset;
        match c {
            '{' => depth += 1,
            '}' if depth > 1 => depth -= 1,
            ',' | '}' if depth == 1 => {
                group_item(code, start..at, base, out);
                if c == '}' {
                    return;
                }
                start = at + 1;
            }
            _ => {}
        }
    }
}

/// One item of a group: `name`, `a::b as c`, `self`, or `a::{…}`.
fn group_item(code: &str, item: std::ops::Range<usize>, base: &[String], out: &mut Vec<Vec<String>>) {
    let text = &code[item.clone()];
    let lead = item.start + (text.len() - text.trim_start().len());
    let stop = path_end(code, lead).min(item.end);
    let mut full = base.to_vec();
    full.extend(code[lead..stop].split("::").filter(|s| !s.is_empty() && *s != "self").map(str::to_string));
    if code[stop..item.end].starts_with('{') {
        group_items(code, stop, &full, out);
    }
    out.push(full);
}

/// The code before its `#[cfg(test)]` module, without `//` comments (docs name modules freely).
fn without_comments_and_tests(text: &str) -> String {
    let code = text.split("#[cfg(test)]").next().unwrap_or(text);
    code.lines().map(|line| line.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
}

fn rust_files(root: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|err| panic!("{}: {err}", dir.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                todo.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = read(&path);
                out.insert(path, text);
            }
        }
    }
    out
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}
