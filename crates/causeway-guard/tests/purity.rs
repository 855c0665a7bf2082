//! Guards for DESIGN.md's purity rule: nothing below the runtime layer touches tokio,
//! threads, the system clock or unseeded randomness.
//!
//! The pure layers are the crates under `<workspace>/crates/` whose directory name
//! contains `core`, `protocols`, `check` or `sim`. Their `.rs` files (sources, tests,
//! benches, examples) may not name a forbidden API outside comments, and their manifests
//! may not depend on tokio or getrandom. Separately, no `.rs` file under `crates/` (this
//! one included) may contain a placeholder macro call; this file spells those patterns
//! with `concat!` so it never contains them itself.
//!
//! Failures name every offending `file:line`, so one run lists all there is to fix.

use std::fs;
use std::path::{Path, PathBuf};

/// Substrings of a crate directory's name that mark it as a pure layer.
const PURE_MARKERS: &[&str] = &["core", "protocols", "check", "sim"];

/// APIs a pure layer may not name outside comments: the system clock, threads, async
/// runtimes, unseeded randomness and hash maps seeded per process.
const FORBIDDEN_APIS: &[&str] = &[
    "Instant::now",
    "SystemTime",
    "thread_rng",
    "rand::random",
    "std::thread",
    "thread::spawn",
    "tokio",
    "from_entropy",
    "OsRng",
    "getrandom",
    "RandomState",
];

/// Placeholder macro calls no source file may contain, built so this file does not.
const PLACEHOLDERS: &[&str] = &[concat!("todo", "!("), concat!("unimplemented", "!(")];

// ---------------------------------------------------------------------------------------
// Walking the workspace.
// ---------------------------------------------------------------------------------------

/// The workspace root: two levels above this crate's manifest.
fn workspace_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    fs::canonicalize(&root).unwrap_or_else(|e| panic!("workspace root {root:?}: {e}"))
}

/// Directories directly under `dir`, sorted.
fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let entries = fs::read_dir(dir).unwrap_or_else(|e| panic!("read {dir:?}: {e}"));
    let mut dirs: Vec<PathBuf> = entries
        .map(|entry| entry.expect("directory entry").path())
        .filter(|path| path.is_dir())
        .collect();
    dirs.sort();
    dirs
}

fn file_name(path: &Path) -> &str {
    path.file_name().and_then(|n| n.to_str()).unwrap_or("")
}

/// The crate directories of the pure layers. Panics if there are none, so a broken path
/// cannot make the guards pass vacuously.
fn pure_crates() -> Vec<PathBuf> {
    let crates: Vec<PathBuf> = subdirs(&workspace_root().join("crates"))
        .into_iter()
        .filter(|dir| PURE_MARKERS.iter().any(|m| file_name(dir).contains(m)))
        .collect();
    assert!(
        crates.iter().any(|dir| file_name(dir) == "causeway-core"),
        "pure crates not found under the workspace: {crates:?}"
    );
    crates
}

/// Every `.rs` file under `dir`, recursively, skipping build output and hidden dirs.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    collect_rust_files(dir, &mut files);
    files.sort();
    files
}

fn collect_rust_files(dir: &Path, files: &mut Vec<PathBuf>) {
    let entries = fs::read_dir(dir).unwrap_or_else(|e| panic!("read {dir:?}: {e}"));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        let name = file_name(&path);
        if path.is_dir() && name != "target" && !name.starts_with('.') {
            collect_rust_files(&path, files);
        } else if path.is_file() && name.ends_with(".rs") {
            files.push(path);
        }
    }
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("read {path:?}: {e}"))
}

/// `path` relative to the workspace root, for messages.
fn shown(path: &Path) -> String {
    let root = workspace_root();
    path.strip_prefix(&root)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// Fails with every violation listed, one per line.
fn assert_none(what: &str, violations: &[String]) {
    assert!(
        violations.is_empty(),
        "{what}:\n  {}",
        violations.join("\n  ")
    );
}

// ---------------------------------------------------------------------------------------
// Stripping comments from Rust source.
// ---------------------------------------------------------------------------------------

/// Where the comment stripper is: in code, a comment, or a string literal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Code,
    LineComment,
    /// Block comments nest in Rust: the depth.
    BlockComment(u32),
    Str,
    /// A raw string closed by `"` and this many `#`.
    RawStr(usize),
}

/// The source's lines with comments (line, block, doc) removed; string and character
/// literals are kept as code, and tracked so that `//` inside them is not a comment.
fn code_lines(source: &str) -> Vec<String> {
    let chars: Vec<char> = source.chars().collect();
    let mut lines = vec![String::new()];
    let mut mode = Mode::Code;
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == '\n' {
            lines.push(String::new());
            if mode == Mode::LineComment {
                mode = Mode::Code;
            }
            i += 1;
            continue;
        }
        let (next, len, keep) = advance(&chars, i, mode);
        if keep {
            let line = lines.last_mut().expect("at least one line");
            line.extend(&chars[i..i + len]);
        }
        mode = next;
        i += len;
    }
    lines
}

/// One token of the stripper: the next mode, how many chars it spans, whether it is code.
fn advance(chars: &[char], i: usize, mode: Mode) -> (Mode, usize, bool) {
    match mode {
        Mode::Code => advance_code(chars, i),
        Mode::LineComment => (mode, 1, false),
        Mode::BlockComment(depth) => advance_block(chars, i, depth),
        Mode::Str => advance_str(chars, i),
        Mode::RawStr(hashes) => advance_raw(chars, i, hashes),
    }
}

fn starts(chars: &[char], i: usize, text: &str) -> bool {
    text.chars()
        .enumerate()
        .all(|(k, c)| chars.get(i + k) == Some(&c))
}

fn advance_code(chars: &[char], i: usize) -> (Mode, usize, bool) {
    if starts(chars, i, "//") {
        return (Mode::LineComment, 2, false);
    }
    if starts(chars, i, "/*") {
        return (Mode::BlockComment(1), 2, false);
    }
    if chars[i] == '"' {
        return (Mode::Str, 1, true);
    }
    if let Some(hashes) = raw_string_start(chars, i) {
        return (Mode::RawStr(hashes), hashes + 2, true);
    }
    if chars[i] == '\'' {
        return (Mode::Code, char_literal_len(chars, i), true);
    }
    (Mode::Code, 1, true)
}

fn is_ident(c: Option<&char>) -> bool {
    c.is_some_and(|c| c.is_alphanumeric() || *c == '_')
}

/// If a raw string (`r"`, `r#"`, `br##"`...) opens at `i`, its number of `#`.
fn raw_string_start(chars: &[char], i: usize) -> Option<usize> {
    if chars[i] != 'r' {
        return None;
    }
    let before = i.checked_sub(1).map(|p| &chars[p]);
    let prefix_ok = match before {
        Some('b') => !is_ident(i.checked_sub(2).map(|p| &chars[p])),
        other => !is_ident(other),
    };
    let hashes = chars[i + 1..].iter().take_while(|c| **c == '#').count();
    let quote = chars.get(i + 1 + hashes) == Some(&'"');
    (prefix_ok && quote).then_some(hashes)
}

/// Length of the character literal at `i`, or 1 if the quote starts a lifetime.
fn char_literal_len(chars: &[char], i: usize) -> usize {
    if chars.get(i + 1) == Some(&'\\') {
        let close = chars[i + 3..].iter().position(|c| *c == '\'');
        return close.map_or(1, |p| p + 4);
    }
    if chars.get(i + 2) == Some(&'\'') {
        return 3;
    }
    1
}

fn advance_block(chars: &[char], i: usize, depth: u32) -> (Mode, usize, bool) {
    if starts(chars, i, "*/") {
        let next = if depth == 1 {
            Mode::Code
        } else {
            Mode::BlockComment(depth - 1)
        };
        return (next, 2, false);
    }
    if starts(chars, i, "/*") {
        return (Mode::BlockComment(depth + 1), 2, false);
    }
    (Mode::BlockComment(depth), 1, false)
}

fn advance_str(chars: &[char], i: usize) -> (Mode, usize, bool) {
    match (chars[i], chars.get(i + 1)) {
        // An escape, unless it escapes a newline: the line loop must see every newline.
        ('\\', Some(c)) if *c != '\n' => (Mode::Str, 2, true),
        ('"', _) => (Mode::Code, 1, true),
        _ => (Mode::Str, 1, true),
    }
}

fn advance_raw(chars: &[char], i: usize, hashes: usize) -> (Mode, usize, bool) {
    let closes = chars[i] == '"' && (1..=hashes).all(|k| chars.get(i + k) == Some(&'#'));
    if closes {
        (Mode::Code, 1 + hashes, true)
    } else {
        (Mode::RawStr(hashes), 1, true)
    }
}

/// `(line number, pattern)` for each pattern found in code (not comments) of `source`.
fn find_in_code(source: &str, patterns: &[&'static str]) -> Vec<(usize, &'static str)> {
    let mut found = Vec::new();
    for (index, line) in code_lines(source).iter().enumerate() {
        for pattern in patterns.iter().filter(|p| line.contains(**p)) {
            found.push((index + 1, *pattern));
        }
    }
    found
}

/// `(line number, pattern)` for each pattern found anywhere in `source`, comments too.
fn find_anywhere(source: &str, patterns: &[&'static str]) -> Vec<(usize, &'static str)> {
    let mut found = Vec::new();
    for (index, line) in source.lines().enumerate() {
        for pattern in patterns.iter().filter(|p| line.contains(**p)) {
            found.push((index + 1, *pattern));
        }
    }
    found
}

// ---------------------------------------------------------------------------------------
// Reading dependency names from a Cargo manifest.
// ---------------------------------------------------------------------------------------

const DEPENDENCY_TABLES: &[&str] = &["dependencies", "dev-dependencies", "build-dependencies"];

/// `(line number, crate name)` for every dependency the manifest declares, in any
/// dependency table (including `target.*` ones), by key or by `package = "..."` rename.
fn dependencies(manifest: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let mut in_table = false;
    for (index, raw) in manifest.lines().enumerate() {
        let line = strip_toml_comment(raw).trim();
        let number = index + 1;
        if line.starts_with('[') {
            let (table, named) = dependency_header(line);
            in_table = table;
            found.extend(named.map(|name| (number, name)));
        } else if in_table {
            found.extend(dependency_entry(line).map(|name| (number, name)));
        }
        found.extend(package_rename(line).map(|name| (number, name)));
    }
    found
}

/// Removes a `#` comment that is not inside a quoted string.
fn strip_toml_comment(line: &str) -> &str {
    let mut quoted = false;
    for (at, c) in line.char_indices() {
        match c {
            '"' => quoted = !quoted,
            '#' if !quoted => return &line[..at],
            _ => {}
        }
    }
    line
}

/// For a table header: whether it is a dependency table (`[dependencies]`,
/// `[target.'cfg(unix)'.dev-dependencies]`), or the dependency it declares
/// (`[dependencies.tokio]`).
fn dependency_header(line: &str) -> (bool, Option<String>) {
    let inner = line.trim_matches(|c| c == '[' || c == ']');
    let segments: Vec<&str> = inner
        .split('.')
        .map(|s| s.trim().trim_matches(|c| c == '"' || c == '\''))
        .collect();
    let at = segments.iter().position(|s| DEPENDENCY_TABLES.contains(s));
    match at {
        Some(k) if k + 1 == segments.len() => (true, None),
        Some(k) => (false, Some(segments[k + 1].to_string())),
        None => (false, None),
    }
}

/// The key of a `name = ...` or `name.workspace = true` line in a dependency table.
fn dependency_entry(line: &str) -> Option<String> {
    let (key, _) = line.split_once('=')?;
    let name = key.split('.').next()?.trim().trim_matches('"');
    (!name.is_empty()).then(|| name.to_string())
}

/// The crate named by a `package = "..."` rename on this line, if any.
fn package_rename(line: &str) -> Option<String> {
    let at = line.find("package")?;
    let rest = line[at + "package".len()..]
        .trim_start()
        .strip_prefix('=')?;
    let value = rest.trim_start().strip_prefix('"')?;
    let end = value.find('"')?;
    Some(value[..end].to_string())
}

/// Whether a dependency name is forbidden in a pure layer.
fn forbidden_dependency(name: &str) -> bool {
    name == "tokio" || name.starts_with("tokio-") || name == "getrandom"
}

// ---------------------------------------------------------------------------------------
// The guards.
// ---------------------------------------------------------------------------------------

#[test]
fn pure_layers_use_no_clock_thread_or_unseeded_randomness() {
    let mut violations = Vec::new();
    for dir in pure_crates() {
        for file in rust_files(&dir) {
            for (line, pattern) in find_in_code(&read(&file), FORBIDDEN_APIS) {
                violations.push(format!("{}:{line}: `{pattern}`", shown(&file)));
            }
        }
    }
    assert_none(
        "pure layers must stay sans-IO and deterministic (DESIGN.md, Layers)",
        &violations,
    );
}

#[test]
fn pure_layers_do_not_depend_on_tokio_or_getrandom() {
    let mut violations = Vec::new();
    for dir in pure_crates() {
        let manifest = dir.join("Cargo.toml");
        for (line, name) in dependencies(&read(&manifest)) {
            if forbidden_dependency(&name) {
                violations.push(format!("{}:{line}: depends on `{name}`", shown(&manifest)));
            }
        }
    }
    assert_none(
        "pure layers may not depend on tokio or getrandom",
        &violations,
    );
}

#[test]
fn no_placeholder_macros_under_crates() {
    let mut violations = Vec::new();
    for file in rust_files(&workspace_root().join("crates")) {
        for (line, pattern) in find_anywhere(&read(&file), PLACEHOLDERS) {
            violations.push(format!("{}:{line}: `{pattern}`", shown(&file)));
        }
    }
    assert_none("placeholder macros left in the sources", &violations);
}

// ---------------------------------------------------------------------------------------
// The scanners themselves: a guard that cannot fail proves nothing.
// ---------------------------------------------------------------------------------------

#[test]
fn scanner_reports_forbidden_call_in_code() {
    let source = "fn f() {\n    let t = std::time::Instant::now();\n}\n";
    assert_eq!(
        find_in_code(source, FORBIDDEN_APIS),
        vec![(2, "Instant::now")]
    );
}

#[test]
fn scanner_ignores_forbidden_call_in_comments() {
    let source = "// Instant::now() is forbidden here\n\
                  /// Doc: never call Instant::now().\n\
                  //! Module doc about tokio.\n\
                  let x = 1; // trailing: Instant::now()\n\
                  /* block Instant::now()\n   still /* nested */ Instant::now()\n*/ let y = 2;\n";
    assert_eq!(find_in_code(source, FORBIDDEN_APIS), vec![]);
    let lines = code_lines(source);
    assert_eq!(lines[3].trim(), "let x = 1;");
    assert_eq!(lines[6].trim(), "let y = 2;");
}

#[test]
fn scanner_sees_code_after_comment_markers_inside_literals() {
    let source = "let url = \"http://x\"; let t = Instant::now();\n\
                  let raw = r#\"/* not a comment\"#; thread_rng();\n\
                  let c = '\"'; let q = '\\''; OsRng;\n\
                  fn f<'a>(x: &'a str) { SystemTime::now(); }\n";
    let found = find_in_code(source, FORBIDDEN_APIS);
    assert_eq!(
        found,
        vec![
            (1, "Instant::now"),
            (2, "thread_rng"),
            (3, "OsRng"),
            (4, "SystemTime")
        ]
    );
}

#[test]
fn placeholder_scan_finds_macro_even_in_comments() {
    let source = format!("fn f() {{\n    {}\"later\")\n}}\n", PLACEHOLDERS[0]);
    assert_eq!(
        find_anywhere(&source, PLACEHOLDERS),
        vec![(2, PLACEHOLDERS[0])]
    );
    assert_eq!(find_anywhere("fn f() {}\n", PLACEHOLDERS), vec![]);
}

#[test]
fn manifest_parser_finds_every_way_to_declare_a_dependency() {
    let manifest = r#"
[package]
name = "causeway-x"   # tokio in a comment is fine

[dependencies]
serde.workspace = true
tokio = { version = "1", features = ["rt"] }

[dev-dependencies]
rt = { package = "getrandom", version = "0.3" }

[target.'cfg(unix)'.build-dependencies]
tokio-util = "0.7"

[dependencies.getrandom]
version = "0.3"
"#;
    let names: Vec<(usize, String)> = dependencies(manifest)
        .into_iter()
        .filter(|(_, name)| forbidden_dependency(name))
        .collect();
    let expected = [
        (7, "tokio"),
        (10, "getrandom"),
        (13, "tokio-util"),
        (15, "getrandom"),
    ];
    let expected: Vec<(usize, String)> = expected
        .iter()
        .map(|(line, name)| (*line, name.to_string()))
        .collect();
    assert_eq!(names, expected);
}

#[test]
fn manifest_parser_accepts_a_clean_manifest() {
    let manifest = "[package]\nname = \"tokio-free\"\n\n[dependencies]\nserde = \"1\"\n";
    let names: Vec<String> = dependencies(manifest).into_iter().map(|(_, n)| n).collect();
    assert_eq!(names, vec!["serde".to_string()]);
}
