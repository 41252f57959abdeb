//! omr-server in layers: its top-level modules use only modules of lower layers (the
//! transports on top, the service core and the worker beside each other under them, the scheme
//! seam and the shared infrastructure at the bottom), and only `http/`, `grpc/` and `app` name
//! axum or tonic. ARCHITECTURE.md draws the same layers.

use std::collections::BTreeSet;

use crate::tidy::{code_only, module_path, references, rust_files, workspace_root};

/// omr-server's top-level modules by layer (higher layers may use lower ones, never the other
/// way); ARCHITECTURE.md lists the same. Modules not named are shared infrastructure (layer 1).
const OMRD_LAYERS: [(&str, u8); 8] = [
    ("app", 6),
    ("http", 5),
    ("grpc", 5),
    ("state", 4),
    ("service", 3),
    ("worker", 3),
    ("scheme", 2),
    ("bin", 7),
];

/// Layers whose modules stand beside each other: neither may use the other.
const BESIDE: [(&str, &str); 2] = [("http", "grpc"), ("service", "worker")];

/// The module files of omr-server, with their module paths and code.
fn omrd_files() -> Vec<(Vec<String>, String)> {
    let src = workspace_root().join("crates/omr-server/src");
    let mut paths = Vec::new();
    rust_files(&src, &mut paths);
    paths
        .iter()
        .map(|p| {
            let text = std::fs::read_to_string(p).expect("readable source");
            (module_path(&src, p), code_only(&text))
        })
        .collect()
}

/// The references of `files` that point up a layer or across to a module beside.
fn layer_violations(files: &[(Vec<String>, String)]) -> Vec<String> {
    let layer = |m: &str| {
        (OMRD_LAYERS.iter())
            .find(|(name, _)| *name == m)
            .map_or(1, |(_, l)| *l)
    };
    let mut bad = BTreeSet::new();
    for (from, code) in files {
        let Some(top) = from.first().map(String::as_str) else {
            continue; // lib.rs declares every module
        };
        for target in references(from, code) {
            let Some(to) = target.first() else { continue };
            let beside = (BESIDE.iter())
                .any(|&(a, b)| (top, to.as_str()) == (a, b) || (top, to.as_str()) == (b, a));
            if to.as_str() != top && (layer(to) > layer(top) || beside) {
                bad.insert(format!(
                    "{} uses crate::{}",
                    from.join("::"),
                    target.join("::")
                ));
            }
        }
    }
    bad.into_iter().collect()
}

#[test]
fn omrd_reads_in_layers_with_the_transports_on_top() {
    let bad = layer_violations(&omrd_files());
    assert!(
        bad.is_empty(),
        "omr-server modules pointing up or across: {bad:#?}"
    );
}

#[test]
fn only_the_transports_and_app_import_axum_or_tonic() {
    let mut bad = Vec::new();
    for (module, code) in omrd_files() {
        let top = module.first().map(String::as_str);
        if matches!(top, Some("http" | "grpc" | "app")) {
            continue;
        }
        for krate in ["axum", "tonic", "tonic_health", "tonic_reflection"] {
            let named = code.match_indices(&format!("{krate}::")).any(|(i, _)| {
                let before = code[..i].chars().next_back().unwrap_or(' ');
                !(before.is_alphanumeric() || before == '_' || before == ':')
            });
            if named {
                bad.push(format!("{} names {krate}", module.join("::")));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "transport crates outside http/, grpc/ and app: {bad:#?}"
    );
}

#[test]
fn the_layer_check_finds_a_reference_up_or_across() {
    let files = vec![
        (
            vec!["service".to_string()],
            "use crate::http::X;".to_string(),
        ),
        (
            vec!["worker".to_string(), "step".to_string()],
            "use crate::service::Y;".to_string(),
        ),
        (
            vec!["http".to_string()],
            "use crate::service::Z; use crate::state::S;".to_string(),
        ),
        (
            vec!["config".to_string()],
            "use crate::metrics::M;".to_string(),
        ),
    ];
    assert_eq!(
        layer_violations(&files),
        [
            "service uses crate::http::X",
            "worker::step uses crate::service::Y"
        ]
    );
}
