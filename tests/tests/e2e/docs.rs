//! The facts the prose quotes, checked against the code so that they cannot drift: every
//! parameter set a document names is one omrd runs; every `OMR_*` variable a document names is a
//! configuration key or a variable the code reads; every `docs/….md` path the repository cites
//! exists; the configuration table's defaults are `Config::default()`'s; and the error table
//! names every error code with its statuses.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use omr_api::param_sets::PARAM_SETS;
use omr_server::Config;

use crate::tidy::{rust_files, workspace_root};

/// The documents: README.md, ARCHITECTURE.md and every Markdown file under docs/ and deploy/.
fn documents() -> Vec<(PathBuf, String)> {
    let root = workspace_root();
    let mut paths = vec![root.join("README.md"), root.join("ARCHITECTURE.md")];
    for dir in ["docs", "deploy", "bindings"] {
        markdown_files(&root.join(dir), &mut paths);
    }
    paths
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p:?}: {e}"));
            (p, text)
        })
        .collect()
}

fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let skip = entry.file_name().to_string_lossy().starts_with('.');
        if path.is_dir() && !skip && entry.file_name() != "target" {
            markdown_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "md") {
            out.push(path);
        }
    }
}

/// Every maximal run of `[A-Za-z0-9_-]` characters in `text` that starts with `prefix`.
fn words_starting<'a>(text: &'a str, prefix: &str) -> Vec<&'a str> {
    let is_word = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find(prefix) {
        let before = rest[..i].chars().next_back();
        let tail = &rest[i..];
        let end = tail.find(|c: char| !is_word(c)).unwrap_or(tail.len());
        if !before.is_some_and(is_word) {
            out.push(&tail[..end]);
        }
        rest = &tail[end.max(1)..];
    }
    out
}

fn relative(p: &Path) -> String {
    p.strip_prefix(workspace_root())
        .unwrap_or(p)
        .display()
        .to_string()
}

#[test]
fn documents_name_only_parameter_sets_omrd_runs() {
    let known: BTreeSet<&str> = PARAM_SETS
        .iter()
        .copied()
        .chain([omr_core::INSECURE_TEST.name])
        .collect();
    let mut wrong = Vec::new();
    for (path, text) in documents() {
        for prefix in ["omr-v", "omr-light-v"] {
            for word in words_starting(&text, prefix) {
                // "omr-v2's", "omr-v1/omr-v2" and the like end at the first non-word character.
                let set = word.trim_end_matches('-');
                let versioned = set[prefix.len()..].chars().all(|c| c.is_ascii_digit());
                if versioned && !set[prefix.len()..].is_empty() && !known.contains(set) {
                    wrong.push(format!("{}: {set}", relative(&path)));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "unknown parameter sets named: {wrong:#?}");
}

#[test]
fn documents_name_only_omr_variables_that_exist() {
    let root = workspace_root();
    let mut known: BTreeSet<String> = omr_server::config::KEYS
        .iter()
        .map(|k| format!("OMR_{}", k.to_uppercase()))
        .collect();
    // Variables the code and the scripts read themselves (tests, load tests, the CLI).
    let mut sources = Vec::new();
    rust_files(&root.join("crates"), &mut sources);
    rust_files(&root.join("tests"), &mut sources);
    for dir in ["tests", "deploy", "bindings", ".ci"] {
        scripts(&root.join(dir), &mut sources);
    }
    for path in sources {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        known.extend(
            words_starting(&text, "OMR_")
                .into_iter()
                .map(str::to_string),
        );
    }
    let mut wrong = Vec::new();
    for (path, text) in documents() {
        for word in words_starting(&text, "OMR_") {
            // A family (`OMR_LOAD_*`, `OMR_<KEY>`) is not a variable.
            if word.ends_with('_') || word == "OMR_" {
                continue;
            }
            if !known.contains(word) {
                wrong.push(format!("{}: {word}", relative(&path)));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "OMR_* variables nothing reads: {wrong:#?}"
    );
}

fn scripts(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().to_string();
        if path.is_dir() && !name.starts_with('.') && name != "target" {
            scripts(&path, out);
        } else if [".sh", ".py", ".yml", ".yaml", "run"]
            .iter()
            .any(|e| name.ends_with(e))
        {
            out.push(path);
        }
    }
}

#[test]
fn every_cited_document_exists() {
    let root = workspace_root();
    let mut files = Vec::new();
    rust_files(&root.join("crates"), &mut files);
    rust_files(&root.join("tests"), &mut files);
    scripts(&root.join("config"), &mut files);
    scripts(&root.join("deploy"), &mut files);
    files.extend(documents().into_iter().map(|(p, _)| p));
    files.push(root.join("config/omrd.toml"));
    files.push(root.join("docker-compose.yml"));
    let mut missing = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        for cited in paths_starting(&text, "docs/") {
            if cited.ends_with(".md") && !root.join(cited).exists() {
                missing.push(format!("{}: {cited}", relative(&path)));
            }
        }
    }
    missing.sort();
    missing.dedup();
    assert!(
        missing.is_empty(),
        "documents cited that do not exist: {missing:#?}"
    );
}

/// Every path in `text` that starts with `prefix` (not inside a longer path), up to a
/// character no path here holds, without a sentence's closing full stop.
fn paths_starting<'a>(text: &'a str, prefix: &str) -> Vec<&'a str> {
    let in_path = |c: char| c.is_ascii_alphanumeric() || "_-./".contains(c);
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = text[from..].find(prefix) {
        let at = from + i;
        let tail = &text[at..];
        let end = tail.find(|c: char| !in_path(c)).unwrap_or(tail.len());
        if !text[..at].chars().next_back().is_some_and(in_path) {
            out.push(tail[..end].trim_end_matches('.'));
        }
        from = at + end.max(1);
    }
    out
}

/// The configuration table (`| \`key\` | default | …`) of docs/running.md states each key's
/// default as `Config::default()` has it (or "unset").
#[test]
fn the_configuration_table_states_the_defaults() {
    let root = workspace_root();
    let text = std::fs::read_to_string(root.join("docs/running.md")).expect("docs/running.md");
    let defaults = serde_json::to_value(Config::default()).expect("Config serializes");
    let mut rows = 0;
    let mut wrong = Vec::new();
    for line in text.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        // "", "`key`", "default", …
        let (Some(key), Some(stated)) = (cells.get(1), cells.get(2)) else {
            continue;
        };
        let Some(key) = key.strip_prefix('`').and_then(|k| k.strip_suffix('`')) else {
            continue;
        };
        let Some(value) = defaults.get(key) else {
            continue;
        };
        rows += 1;
        let expected = match value {
            serde_json::Value::Null => "unset".to_string(),
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        // The stated default is the cell's first word, in backticks or not.
        let first = stated.split_whitespace().next().unwrap_or("");
        let first = first.trim_matches('`').trim_end_matches(',');
        if first != expected {
            wrong.push(format!(
                "{key}: the table says {stated:?}, the code {expected}"
            ));
        }
    }
    assert!(
        rows >= 40,
        "the configuration table was not found ({rows} rows)"
    );
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// docs/SERVICE.md's table of errors (`| status | gRPC code | codes |`) names every error code
/// of `omr_api::ErrorCode` once, in the row of its HTTP status and gRPC code, and no other.
#[test]
fn the_error_table_names_every_code_with_its_statuses() {
    let text =
        std::fs::read_to_string(workspace_root().join("docs/SERVICE.md")).expect("docs/SERVICE.md");
    let mut documented: Vec<(String, u16, String)> = Vec::new();
    for line in text.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let (Some(status), Some(grpc), Some(codes)) = (cells.get(1), cells.get(2), cells.get(3))
        else {
            continue;
        };
        let Ok(status) = status.parse::<u16>() else {
            continue;
        };
        // The codes are the cell's words in backticks, but for the configuration keys and
        // fields the notes beside them name.
        for code in codes.split('`').skip(1).step_by(2) {
            let note = omr_server::config::KEYS.contains(&code) || code == "index";
            if !note && code.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
                documented.push((code.to_string(), status, grpc.to_string()));
            }
        }
    }
    let screaming = |g: omr_api::GrpcCode| {
        let mut out = String::new();
        for (i, c) in format!("{g:?}").chars().enumerate() {
            if c.is_ascii_uppercase() && i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_uppercase());
        }
        out
    };
    let mut wrong = Vec::new();
    for code in omr_api::ErrorCode::ALL {
        let rows: Vec<_> = documented.iter().filter(|d| d.0 == code.as_str()).collect();
        let expected = (code.http_status(), screaming(code.grpc_code()));
        match rows.as_slice() {
            [(_, status, grpc)] if (*status, grpc.clone()) == expected => {}
            _ => wrong.push(format!(
                "{}: documented {rows:?}, the code {expected:?}",
                code.as_str()
            )),
        }
    }
    for (code, ..) in &documented {
        if omr_api::ErrorCode::parse(code).is_none() {
            wrong.push(format!("{code}: documented, no such error code"));
        }
    }
    assert!(documented.len() >= 30, "the error table was not found");
    assert!(wrong.is_empty(), "{wrong:#?}");
}
