//! Tidy checks on the workspace's own sources: every Rust file opens with a `//!` line saying
//! what it is for; no file is over 400 lines unless its header says why (a `//! Long:` line);
//! and no crate has a module cycle (modules under one parent may use each other in one
//! direction only, so each crate reads in layers, as ARCHITECTURE.md lists them).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Most lines a source file may have without a `//! Long:` reason in its header.
const MAX_LINES: usize = 400;

pub(crate) fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the workspace root")
        .to_path_buf()
}

/// Every `.rs` file under `dir`, skipping build output.
pub(crate) fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if path.is_dir() {
            if name != "target" && !name.to_string_lossy().starts_with('.') {
                rust_files(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn sources() -> Vec<(PathBuf, String)> {
    let root = workspace_root();
    let mut files = Vec::new();
    rust_files(&root.join("crates"), &mut files);
    rust_files(&root.join("tests"), &mut files);
    files.sort();
    assert!(files.len() > 50, "found only {} Rust files", files.len());
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("readable source");
            (p, text)
        })
        .collect()
}

#[test]
fn every_source_file_opens_with_a_doc_line() {
    let missing: Vec<_> = sources()
        .into_iter()
        .filter(|(_, text)| !text.starts_with("//!"))
        .map(|(p, _)| p.display().to_string())
        .collect();
    assert!(
        missing.is_empty(),
        "files without a `//!` header: {missing:#?}"
    );
}

#[test]
fn no_source_file_is_long_without_a_reason() {
    let long: Vec<_> = sources()
        .into_iter()
        .filter(|(_, text)| {
            let header_says_why = text
                .lines()
                .take_while(|l| l.starts_with("//!"))
                .any(|l| l.starts_with("//! Long:"));
            text.lines().count() > MAX_LINES && !header_says_why
        })
        .map(|(p, text)| format!("{} ({} lines)", p.display(), text.lines().count()))
        .collect();
    assert!(
        long.is_empty(),
        "files over {MAX_LINES} lines with no `//! Long:` reason: {long:#?}"
    );
}

/// The module path of a file under a crate's `src/` (`[]` for lib.rs/main.rs).
pub(crate) fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).expect("under src");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|c| c.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The text with comments and string literals blanked (roughly: enough for paths in code).
pub(crate) fn code_only(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let mut in_str = false;
        let mut prev = ' ';
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            if !in_str && c == '/' && chars.peek() == Some(&'/') {
                break;
            }
            if c == '"' && prev != '\\' && prev != '\'' {
                in_str = !in_str;
            }
            if !in_str {
                out.push(c);
            }
            prev = c;
        }
        out.push('\n');
    }
    out
}

/// The module paths a file refers to through `crate::`, `super::` and `self::`.
pub(crate) fn references(from: &[String], code: &str) -> Vec<Vec<String>> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut refs = Vec::new();
    for (prefix, base) in [
        ("crate::", Vec::new()),
        ("super::", from[..from.len().saturating_sub(1)].to_vec()),
        ("self::", from.to_vec()),
    ] {
        for (i, _) in code.match_indices(prefix) {
            let before = code[..i].chars().next_back().unwrap_or(' ');
            if before.is_alphanumeric() || before == '_' || before == ':' {
                continue;
            }
            let rest = &code[i + prefix.len()..];
            // `crate::{a::X, b}`: every first segment in the group.
            let heads: Vec<Vec<String>> = if let Some(group) = rest.strip_prefix('{') {
                let group = &group[..group.find('}').unwrap_or(group.len())];
                group
                    .split(',')
                    .map(|item| item.trim().split("::").map(ident).collect())
                    .collect()
            } else {
                let end = rest
                    .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                    .unwrap_or(rest.len());
                vec![rest[..end].split("::").map(ident).collect()]
            };
            for segments in heads {
                let mut path = base.clone();
                path.extend(segments.into_iter().filter(|s| !s.is_empty()));
                refs.push(path);
            }
        }
    }
    refs
}

/// Edges between sibling modules: a reference from inside module A to inside module B adds an
/// edge between the children of their common ancestor that contain them.
fn sibling_edges(
    modules: &BTreeSet<Vec<String>>,
    files: &[(Vec<String>, String)],
) -> BTreeMap<Vec<String>, BTreeSet<(String, String)>> {
    let mut edges: BTreeMap<Vec<String>, BTreeSet<(String, String)>> = BTreeMap::new();
    for (from, code) in files {
        for mut target in references(from, code) {
            while !target.is_empty() && !modules.contains(&target) {
                target.pop();
            }
            let common = from.iter().zip(&target).take_while(|(a, b)| a == b).count();
            if common == from.len() || common == target.len() {
                continue; // an ancestor and its descendant
            }
            edges
                .entry(from[..common].to_vec())
                .or_default()
                .insert((from[common].clone(), target[common].clone()));
        }
    }
    edges
}

/// A cycle in `edges`, if any.
fn find_cycle(edges: &BTreeSet<(String, String)>) -> Option<Vec<String>> {
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (a, b) in edges {
        next.entry(a).or_default().push(b);
    }
    // 0 = unvisited, 1 = on the stack, 2 = done.
    fn visit<'a>(
        n: &'a str,
        next: &BTreeMap<&'a str, Vec<&'a str>>,
        state: &mut BTreeMap<&'a str, u8>,
        stack: &mut Vec<&'a str>,
    ) -> Option<Vec<String>> {
        state.insert(n, 1);
        stack.push(n);
        for &m in next.get(n).into_iter().flatten() {
            match state.get(m).copied().unwrap_or(0) {
                1 => {
                    let at = stack.iter().position(|&s| s == m).expect("on the stack");
                    let mut cycle: Vec<String> =
                        stack[at..].iter().map(|s| s.to_string()).collect();
                    cycle.push(m.to_string());
                    return Some(cycle);
                }
                0 => {
                    if let Some(c) = visit(m, next, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(n, 2);
        None
    }
    let mut state = BTreeMap::new();
    let nodes: Vec<&str> = next.keys().copied().collect();
    for n in nodes {
        if state.get(n).copied().unwrap_or(0) == 0 {
            if let Some(c) = visit(n, &next, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

#[test]
fn no_crate_has_a_module_cycle() {
    let root = workspace_root();
    let mut crates: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .expect("crates/")
        .flatten()
        .map(|e| e.path().join("src"))
        .filter(|p| p.is_dir())
        .collect();
    crates.sort();
    assert!(crates.len() >= 8, "found only {} crates", crates.len());
    let mut cycles = Vec::new();
    for src in &crates {
        let mut paths = Vec::new();
        rust_files(src, &mut paths);
        let files: Vec<(Vec<String>, String)> = paths
            .iter()
            .map(|p| {
                let text = std::fs::read_to_string(p).expect("readable source");
                (module_path(src, p), code_only(&text))
            })
            .collect();
        let modules: BTreeSet<Vec<String>> = files.iter().map(|(m, _)| m.clone()).collect();
        for (parent, edges) in sibling_edges(&modules, &files) {
            if let Some(cycle) = find_cycle(&edges) {
                cycles.push(format!(
                    "{} under `{}`: {}",
                    src.parent().expect("crate dir").display(),
                    if parent.is_empty() {
                        "crate".to_string()
                    } else {
                        parent.join("::")
                    },
                    cycle.join(" -> ")
                ));
            }
        }
    }
    assert!(cycles.is_empty(), "module cycles: {cycles:#?}");
}

#[test]
fn the_cycle_check_finds_a_cycle_between_siblings_and_ignores_parents() {
    let modules: BTreeSet<Vec<String>> = [vec![], vec!["a".into()], vec!["b".into()]]
        .into_iter()
        .collect();
    let files = vec![
        (vec!["a".to_string()], "use crate::b::X;".to_string()),
        (
            vec!["b".to_string()],
            "fn f() { crate::a::y() }".to_string(),
        ),
        (vec![], "mod a; mod b; pub use a::Z;".to_string()),
    ];
    let edges = sibling_edges(&modules, &files);
    assert!(find_cycle(&edges[&Vec::new()]).is_some());
    let one_way = vec![
        (vec!["a".to_string()], "use crate::{b::X, b};".to_string()),
        (
            vec!["b".to_string()],
            "use super::Parent; // crate::a".to_string(),
        ),
    ];
    let edges = sibling_edges(
        &modules,
        &one_way
            .into_iter()
            .map(|(m, c)| (m, code_only(&c)))
            .collect::<Vec<_>>(),
    );
    assert_eq!(find_cycle(&edges[&Vec::new()]), None);
}
