//! Reading the engine's own sources, for the tests that guard its shape (layering.rs,
//! renderers.rs, error_types.rs): one walker and one test-module stripper, so each guard scans
//! the same files the same way.

use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`; `with_test_files` keeps the `tests.rs` files of `mod tests;`
/// (their code is test code: the shape guards other than the error count leave them out).
pub fn rust_files(dir: &Path, with_test_files: bool) -> Vec<PathBuf> {
    let mut out = Vec::new();
    walk(dir, with_test_files, &mut out);
    out.sort();
    out
}

fn walk(dir: &Path, with_test_files: bool, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("read_dir").flatten() {
        let p = e.path();
        if p.is_dir() {
            walk(&p, with_test_files, out);
        } else if p.extension().is_some_and(|x| x == "rs")
            && (with_test_files || p.file_name().is_some_and(|n| n != "tests.rs"))
        {
            out.push(p);
        }
    }
}

/// The code of a file without its test modules and comments.
pub fn code(text: &str) -> String {
    let mut out = String::new();
    let mut skip_depth: Option<i32> = None;
    let mut depth = 0i32;
    let mut test_attr = false;
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with("//") {
            continue;
        }
        let opens = line.matches('{').count() as i32;
        let closes = line.matches('}').count() as i32;
        if skip_depth.is_none() && test_attr && t.starts_with("mod ") {
            skip_depth = Some(depth);
        }
        test_attr = t.starts_with("#[cfg(test)]");
        depth += opens - closes;
        match skip_depth {
            Some(d) if depth <= d => skip_depth = None,
            Some(_) => {}
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}
