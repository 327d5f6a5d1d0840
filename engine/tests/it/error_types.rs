//! The engine's failures are typed: each concern has its error enum (`StepError`,
//! `CommandError`, `UndoError`, `EthtoolError`, `SetError`, ...) and the words a user reads are
//! made only where a report is filled. Issue 24 caps the functions that still return a bare
//! `String` error at 10; this fails when a change takes the count back above that.
//!
//! The scan is issue 24's counting script's, not a line grep: every `fn NAME ... -> RET` up to
//! the body's `{`, a `;` or `where`, across lines, whose return type holds
//! `Result<..., String>` anywhere (`Vec<(String, Result<(), String>)>` too).

use std::path::Path;

use crate::common::source;

/// Issue 24's "Done when": at most this many engine signatures return `Result<_, String>`.
const MAX_STRING_ERRORS: usize = 10;

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Whether a return type holds `Result<` followed (anywhere later) by `, String>`, with any
/// whitespace around `String` (the script's `Result<.*,\s*String\s*>`).
fn returns_string_error(ret: &str) -> bool {
    let Some(r) = ret.find("Result<") else {
        return false;
    };
    let rest = &ret[r + "Result<".len()..];
    rest.match_indices(',').any(|(i, _)| {
        let after = rest[i + 1..].trim_start();
        after
            .strip_prefix("String")
            .is_some_and(|t| t.trim_start().starts_with('>'))
    })
}

/// `(name, line, return type)` of each function whose return type holds a `String` error.
/// As the script's `\bfn\s+(\w+)[^{;]*?->\s*([^{;]*?)(?:\{|;|where)`: after `fn NAME`, the
/// first `->` before any `{` or `;`; the return type runs to the first `{`, `;` or `where`.
fn string_errors(text: &str) -> Vec<(String, usize, String)> {
    let b = text.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while let Some(off) = text[i..].find("fn") {
        let at = i + off;
        i = at + 2;
        if at > 0 && is_word(b[at - 1]) {
            continue;
        }
        let mut k = at + 2;
        let ws = k;
        while k < b.len() && b[k].is_ascii_whitespace() {
            k += 1;
        }
        let name_start = k;
        while k < b.len() && is_word(b[k]) {
            k += 1;
        }
        if ws == name_start || name_start == k {
            continue;
        }
        let name = &text[name_start..k];
        // Up to the first `{` or `;`: the arrow must come before it.
        let stop = text[k..].find(['{', ';']).map_or(text.len(), |s| k + s);
        let Some(arrow) = text[k..stop].find("->").map(|a| k + a) else {
            continue;
        };
        let ret_start = arrow + 2;
        let ends = [
            text[ret_start..].find('{'),
            text[ret_start..].find(';'),
            text[ret_start..].find("where"),
        ];
        let Some(end) = ends.iter().flatten().min().map(|e| ret_start + e) else {
            continue;
        };
        let ret = text[ret_start..end].trim_start();
        if returns_string_error(ret) {
            let line = text[..at].matches('\n').count() + 1;
            let ret = ret.split_whitespace().collect::<Vec<_>>().join(" ");
            found.push((name.to_string(), line, ret));
        }
        i = end + 1;
    }
    found
}

#[test]
fn the_scan_counts_what_the_script_counts() {
    let sample = "
        fn a() -> Result<(), String> { }
        pub fn b(
            x: u8,
        ) -> Vec<(String, Result<(), String>)> {
        }
        fn c() -> Result<Vec<(String, u64)>, String>;
        fn d<T>() -> Result<T,
            String
        > where T: Clone {}
        fn e() -> Result<(), StepError> {}
        fn f() -> Result<String, io::Error> {}
        fn g(f: fn(u8) -> Result<(), String>) {}
        fn not(f: u8) {}
        let h = |x| -> Result<(), String> { x };
        fn i() -> Option<String> {}
    ";
    let names: Vec<String> = string_errors(sample).into_iter().map(|f| f.0).collect();
    // `g` takes, not returns, such a function: the script counts it all the same (its first
    // arrow), and so does this scan, to stay comparable with it.
    assert_eq!(names, ["a", "b", "c", "d", "g"]);
}

#[test]
fn at_most_ten_engine_functions_return_string_errors() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    // Every file, `tests.rs` included, as issue 24's count does.
    let mut files = source::rust_files(&src, true);
    files.sort();
    assert!(files.len() > 50, "engine/src read: {} files", files.len());
    let mut hits = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).expect("read source");
        for (name, line, ret) in string_errors(&text) {
            let rel = f.strip_prefix(&src).unwrap_or(f);
            hits.push(format!("{}:{line}: {name} -> {ret}", rel.display()));
        }
    }
    assert!(
        hits.len() <= MAX_STRING_ERRORS,
        "{} engine functions return `Result<_, String>` (at most {MAX_STRING_ERRORS}: give the \
         failure an error enum and word it where the report is made):\n{}",
        hits.len(),
        hits.join("\n")
    );
}
