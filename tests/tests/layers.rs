//! The top-level modules of each crate import each other one way: in the layer order that
//! docs/architecture.md writes at its top, a module uses only modules listed before it.
//! Read as text, like a reviewer would, so a new import that points up the layers fails
//! this test and names the line, rather than a cycle growing unseen.
//!
//! What counts as an import: a `crate::module` path in code (also inside `crate::{..}`
//! groups) and a re-export of the crate root that names a module's item. What does not:
//! comments, items under `#[cfg(test)]`, and modules declared only for tests.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The workspace root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The layer order of each crate, as docs/architecture.md states it: the lines of its
/// `layers` block, `crate: module module ...`, lowest first.
fn documented_layers() -> BTreeMap<String, Vec<String>> {
    let doc = std::fs::read_to_string(root().join("docs/architecture.md")).unwrap();
    let block = doc
        .split("```layers\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("docs/architecture.md has a ```layers block");
    block
        .lines()
        .filter_map(|line| line.split_once(':'))
        .map(|(krate, modules)| {
            let modules = modules.split(['→', ' ', ',']).filter(|m| !m.is_empty());
            (
                krate.trim().to_string(),
                modules.map(String::from).collect(),
            )
        })
        .collect()
}

/// Source with comments and `#[cfg(test)]` items blanked out, line for line (so a line
/// number in it is one in the file).
fn code_of(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let trimmed = line.trim_start();
        if trimmed.starts_with("#[cfg(test)]") {
            let end = item_end(&lines, i + 1);
            out.push_str(&"\n".repeat(end + 1 - i));
            i = end + 1;
            continue;
        }
        let code = match trimmed.find("//") {
            Some(0) => "",
            // A `//` inside a string (a URL) is kept: only a trailing comment is cut.
            Some(_) if line.contains('"') => line,
            Some(at) => &trimmed[..at],
            None => line,
        };
        out.push_str(code);
        out.push('\n');
        i += 1;
    }
    out
}

/// The last line of the item starting at `start` (after its attributes): its `;` or its
/// balanced closing brace.
fn item_end(lines: &[&str], start: usize) -> usize {
    let mut depth = 0i32;
    let mut opened = false;
    for (i, line) in lines.iter().enumerate().skip(start) {
        let code = line.split("//").next().unwrap_or_default();
        for c in code.chars() {
            match c {
                '{' => {
                    depth += 1;
                    opened = true;
                }
                '}' => depth -= 1,
                _ => {}
            }
        }
        let attribute = code.trim_start().starts_with("#[");
        if !attribute && ((opened && depth <= 0) || (!opened && code.trim_end().ends_with(';'))) {
            return i;
        }
    }
    lines.len().saturating_sub(1)
}

/// The module names a piece of code reaches through `crate::`, each with the byte offset
/// of its path.
fn crate_paths(code: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // `fleetpulse_common::…` and the like
        }
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // `crate::{a::X, b, c::{Y, Z}}`: the first name of each top-level entry.
            let mut depth = 0;
            let mut entry = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        found.push((at, leading_name(&std::mem::take(&mut entry))))
                    }
                    c => entry.push(c),
                }
            }
            found.push((at, leading_name(&entry)));
        } else {
            found.push((at, leading_name(rest)));
        }
    }
    found.retain(|(_, name)| !name.is_empty());
    found
}

/// The identifier a path starts with.
fn leading_name(path: &str) -> String {
    (path.trim_start().chars())
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// A module declared in `code`: `(name, gated to tests)`.
fn declared_modules(text: &str) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    let mut test_only = false;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("#[cfg(test)]") {
            test_only = true;
            continue;
        }
        let decl = t
            .strip_prefix("pub mod ")
            .or_else(|| t.strip_prefix("pub(crate) mod "))
            .or_else(|| t.strip_prefix("mod "));
        if let Some(name) = decl.and_then(|d| d.strip_suffix(';')) {
            out.push((name.to_string(), test_only));
        }
        if !t.starts_with("#[") {
            test_only = false;
        }
    }
    out
}

/// The files of module `file` and of every module it declares, test-only ones aside.
fn module_files(file: PathBuf, out: &mut Vec<PathBuf>) {
    let text = std::fs::read_to_string(&file).unwrap();
    let dir = file.with_extension("");
    for (name, test_only) in declared_modules(&text) {
        if !test_only {
            module_files(dir.join(format!("{name}.rs")), out);
        }
    }
    out.push(file);
}

/// `file` as a path from the workspace root.
fn shown(file: &Path) -> String {
    let root = root().canonicalize().unwrap();
    let file = file.canonicalize().unwrap();
    file.strip_prefix(&root)
        .unwrap_or(&file)
        .display()
        .to_string()
}

/// An import of one top-level module by another.
struct Import {
    from: String,
    to: String,
    at: String,
}

/// The crate's top-level modules (test-only ones aside) and their imports of each other.
fn imports(krate: &str) -> (Vec<String>, Vec<Import>) {
    let src = root().join(krate).join("src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let modules: Vec<String> = (declared_modules(&lib).into_iter())
        .filter(|(_, test_only)| !test_only)
        .map(|(name, _)| name)
        .collect();
    // Items the crate root re-exports, by the module they come from.
    let mut reexports = BTreeMap::new();
    for line in code_of(&lib).lines() {
        if let Some(rest) = line.trim().strip_prefix("pub use ")
            && let Some((module, items)) = rest.split_once("::")
            && modules.iter().any(|m| m == module)
        {
            for item in items
                .split([',', '{', '}', ';', ' '])
                .filter(|i| !i.is_empty())
            {
                reexports.insert(item.to_string(), module.to_string());
            }
        }
    }
    let mut found = Vec::new();
    for module in &modules {
        let mut files = Vec::new();
        module_files(src.join(format!("{module}.rs")), &mut files);
        for file in files {
            let code = code_of(&std::fs::read_to_string(&file).unwrap());
            for (at, name) in crate_paths(&code) {
                let line = code[..at].matches('\n').count() + 1;
                let text = code[at..].lines().next().unwrap_or_default();
                {
                    let to = reexports.get(&name).cloned().unwrap_or(name);
                    if &to != module && modules.contains(&to) {
                        found.push(Import {
                            from: module.clone(),
                            to,
                            at: format!("{}:{line}: {}", shown(&file), text.trim()),
                        });
                    }
                }
            }
        }
    }
    (modules, found)
}

fn check(krate: &str) {
    let layers = documented_layers();
    let order = layers
        .get(krate)
        .unwrap_or_else(|| panic!("docs/architecture.md's layers block has no line for {krate}"));
    let (modules, imports) = imports(krate);
    let mut listed = order.clone();
    listed.sort();
    let mut actual = modules.clone();
    actual.sort();
    assert_eq!(
        listed, actual,
        "the layers of {krate} in docs/architecture.md must list each top-level module once"
    );
    let rank = |m: &str| order.iter().position(|o| o == m).unwrap();
    let upward: Vec<String> = imports
        .iter()
        .filter(|i| rank(&i.to) > rank(&i.from))
        .map(|i| format!("{} uses {}, a higher layer: {}", i.from, i.to, i.at))
        .collect();
    assert!(
        upward.is_empty(),
        "{krate}'s modules must import down the layers of docs/architecture.md (move what \
         both need lower, or have the lower layer take a trait or a channel):\n{}",
        upward.join("\n")
    );
}

/// The modules named in the first column of the table under `### What each part of
/// {part} owns` in docs/architecture.md.
fn documented_table(part: &str) -> Vec<String> {
    let doc = std::fs::read_to_string(root().join("docs/architecture.md")).unwrap();
    let heading = format!("### What each part of {part} owns\n");
    let table = doc
        .split(&heading)
        .nth(1)
        .unwrap_or_else(|| panic!("docs/architecture.md has no heading {heading:?}"));
    let rows = table.lines().skip_while(|l| !l.starts_with('|'));
    let rows = rows.take_while(|l| l.starts_with('|')).skip(2);
    rows.filter_map(|row| row.split('|').nth(1))
        .flat_map(|cell| cell.split('`').skip(1).step_by(2).map(String::from))
        .map(|name| name.trim_end_matches('/').to_string())
        .collect()
}

fn check_table(krate: &str, part: &str) {
    let (modules, _) = imports(krate);
    let mut listed = documented_table(part);
    listed.sort();
    let mut actual = modules;
    actual.sort();
    assert_eq!(
        listed, actual,
        "the table of what each part of {part} owns in docs/architecture.md must name each \
         top-level module of {krate} once"
    );
}

#[test]
fn every_module_is_in_its_crates_table_in_the_architecture_doc() {
    check_table("common", "common");
    check_table("agent", "the agent");
    check_table("hub", "the hub");
}

#[test]
fn common_modules_import_down_the_documented_layers() {
    check("common");
}

#[test]
fn agent_modules_import_down_the_documented_layers() {
    check("agent");
}

#[test]
fn hub_modules_import_down_the_documented_layers() {
    check("hub");
}

#[test]
fn the_reader_sees_imports_in_paths_and_groups_but_not_in_comments_or_tests() {
    let code = code_of(
        "use crate::fleet::Fleet;\n\
         use crate::{\n    admission::Refusal,\n    ids,\n    store::{Write, Snapshot},\n};\n\
         // use crate::server::Options;\n\
         let x = crate::metrics::labels(); // crate::cli\n\
         #[cfg(test)]\n\
         mod tests {\n    use crate::testing;\n    fn f() { if true { crate::cli::run() } }\n}\n\
         use fleetpulse_common::api;\n",
    );
    let found: Vec<String> = crate_paths(&code).into_iter().map(|(_, m)| m).collect();
    assert_eq!(found, ["fleet", "admission", "ids", "store", "metrics"]);
}

#[test]
fn a_module_declared_for_tests_only_is_not_a_module_of_the_product() {
    let decls = declared_modules(
        "mod engine;\n#[cfg(test)]\nmod fake_api;\n#[cfg(test)]\n#[path = \"x.rs\"]\nmod t;\npub mod api;\n",
    );
    assert_eq!(
        decls,
        [
            ("engine".to_string(), false),
            ("fake_api".to_string(), true),
            ("t".to_string(), true),
            ("api".to_string(), false)
        ]
    );
}
