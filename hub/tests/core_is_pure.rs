//! The decision core does no I/O: no file under `hub/src/core` (or `core.rs`) names an
//! I/O crate. Read as text, so a new import fails this test rather than a review.

use std::path::{Path, PathBuf};

const FORBIDDEN: [&str; 6] = ["tokio", "kube", "rusqlite", "axum", "hyper", "reqwest"];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The crate names a line uses as a path root (`use kube::…`, `tokio::spawn`, `::hyper::…`).
fn crates_used(line: &str) -> Vec<&'static str> {
    let code = line.split("//").next().unwrap_or_default();
    FORBIDDEN
        .into_iter()
        .filter(|name| {
            code.match_indices(&format!("{name}::")).any(|(at, _)| {
                let before = code[..at].chars().next_back();
                !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
            })
        })
        .collect()
}

#[test]
fn no_file_of_the_core_imports_an_io_crate() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = vec![src.join("core.rs")];
    rust_files(&src.join("core"), &mut files);
    assert!(
        files.len() > 5,
        "the core's files were not found: {files:?}"
    );
    let mut found = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            for name in crates_used(line) {
                found.push(format!("{}:{}: {name}: {line}", file.display(), n + 1));
            }
        }
    }
    assert!(
        found.is_empty(),
        "the core must not do I/O:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_check_finds_an_import_where_there_is_one() {
    assert_eq!(crates_used("use tokio::sync::Mutex;"), ["tokio"]);
    assert_eq!(crates_used("    let c: kube::Client = x;"), ["kube"]);
    assert!(crates_used("use fleetpulse_common::kube_like::X;").is_empty());
    assert!(crates_used("// tokio::spawn is not used here").is_empty());
}
