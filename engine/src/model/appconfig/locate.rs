//! Where each key of a YAML document sits: a map from key paths (`daqiri.cfg.interfaces[0].
//! rx.queues[1].cpu_core`) to 1-based line and column.
//!
//! serde_yaml_ng gives values but no spans, so positions come from this small structural
//! scan of the text instead of a second YAML parser. Why not a parser crate with marks: the
//! workspace already parses with serde_yaml_ng (YAML 1.2 scalar resolution, the property
//! that keeps `0000:01:00.0` a string), and a second parser would be a second opinion on the
//! *values*; here only positions are needed, and DAQIRI's configuration files are block-style
//! YAML (its reference and every example are). The scan understands block mappings, block
//! sequences (including a sequence at the same indentation as its key, and `- key: v` items),
//! quoted keys, comments, directives, block scalars (`|`, `>`) and one-line flow collections
//! (`{type: queue, id: 0}`, `[local, rdma_read]`). Anything it cannot place (a flow
//! collection spanning lines, anchors merged with `<<`) falls back to the nearest enclosing
//! key that it did place, so a finding always carries a line, at worst its parent's.

use std::collections::HashMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pos {
    pub line: usize,
    pub col: usize,
}

#[derive(Debug, Default, Clone)]
pub struct LineIndex {
    map: HashMap<String, Pos>,
}

#[derive(Debug)]
struct Frame {
    col: usize,
    path: String,
    item: bool,
}

/// Strip a trailing comment: `#` at the start or after whitespace, outside quotes.
fn strip_comment(s: &str) -> &str {
    let b = s.as_bytes();
    let (mut sq, mut dq) = (false, false);
    for i in 0..b.len() {
        match b[i] {
            b'\'' if !dq => sq = !sq,
            b'"' if !sq => dq = !dq,
            b'#' if !sq && !dq && (i == 0 || b[i - 1] == b' ' || b[i - 1] == b'\t') => {
                return s[..i].trim_end();
            }
            _ => {}
        }
    }
    s.trim_end()
}

/// Split `key: rest` (or `key:` at the end), honouring quotes; `None` when the text is a
/// scalar. Returns the unquoted key and the text after the colon (trimmed).
fn split_key(s: &str) -> Option<(String, &str)> {
    let b = s.as_bytes();
    if b.is_empty() {
        return None;
    }
    if b[0] == b'"' || b[0] == b'\'' {
        let q = b[0];
        let mut i = 1;
        while i < b.len() {
            if b[i] == q {
                // '' inside single quotes is an escaped quote.
                if q == b'\'' && i + 1 < b.len() && b[i + 1] == b'\'' {
                    i += 2;
                    continue;
                }
                if q == b'"' && b[i - 1] == b'\\' {
                    i += 1;
                    continue;
                }
                break;
            }
            i += 1;
        }
        let key = s.get(1..i)?.to_string();
        let rest = s.get(i + 1..)?.trim_start();
        let rest = rest.strip_prefix(':')?;
        if !(rest.is_empty() || rest.starts_with(' ') || rest.starts_with('\t')) {
            return None;
        }
        return Some((key, rest.trim()));
    }
    if matches!(
        b[0],
        b'[' | b'{' | b'|' | b'>' | b'&' | b'*' | b'!' | b'%' | b'@' | b'`'
    ) {
        return None;
    }
    for i in 0..b.len() {
        if b[i] == b':' && (i + 1 == b.len() || b[i + 1] == b' ' || b[i + 1] == b'\t') {
            let key = s[..i].trim_end().to_string();
            if key.is_empty() {
                return None;
            }
            return Some((key, s[i + 1..].trim()));
        }
    }
    None
}

/// Split the inside of a one-line flow collection at top-level commas.
fn split_flow(inner: &str) -> Vec<(usize, &str)> {
    let b = inner.as_bytes();
    let (mut depth, mut sq, mut dq, mut start) = (0i32, false, false, 0usize);
    let mut out = Vec::new();
    for i in 0..b.len() {
        match b[i] {
            b'\'' if !dq => sq = !sq,
            b'"' if !sq => dq = !dq,
            b'[' | b'{' if !sq && !dq => depth += 1,
            b']' | b'}' if !sq && !dq => depth -= 1,
            b',' if !sq && !dq && depth == 0 => {
                out.push((start, &inner[start..i]));
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push((start, &inner[start..]));
    out.into_iter()
        .map(|(o, t)| {
            let lead = t.len() - t.trim_start().len();
            (o + lead, t.trim())
        })
        .filter(|(_, t)| !t.is_empty())
        .collect()
}

impl LineIndex {
    pub fn build(src: &str) -> LineIndex {
        let mut idx = LineIndex::default();
        let mut stack: Vec<Frame> = Vec::new();
        let mut counters: HashMap<String, usize> = HashMap::new();
        // While inside a block scalar: the indentation its owner key had.
        let mut block_scalar: Option<usize> = None;
        for (n, raw) in src.lines().enumerate() {
            let line = n + 1;
            let trimmed = raw.trim_start_matches(' ');
            let indent = raw.len() - trimmed.len();
            if let Some(owner) = block_scalar {
                if trimmed.trim().is_empty() || indent > owner {
                    continue;
                }
                block_scalar = None;
            }
            let content = strip_comment(trimmed);
            if content.is_empty() || content.starts_with('%') {
                continue;
            }
            if content == "---" || content.starts_with("--- ") || content == "..." {
                if line > 1 && !idx.map.is_empty() {
                    // A second document: DAQIRI reads the first one only.
                    break;
                }
                continue;
            }
            let mut col = indent;
            let mut rest = content;
            loop {
                if rest == "-" || rest.starts_with("- ") || rest.starts_with("-\t") {
                    while stack
                        .last()
                        .is_some_and(|f| f.col > col || (f.item && f.col == col))
                    {
                        stack.pop();
                    }
                    let parent = stack.last().map(|f| f.path.clone()).unwrap_or_default();
                    let c = counters.entry(parent.clone()).or_insert(0);
                    let path = format!("{parent}[{c}]");
                    *c += 1;
                    idx.map
                        .entry(path.clone())
                        .or_insert(Pos { line, col: col + 1 });
                    stack.push(Frame {
                        col,
                        path,
                        item: true,
                    });
                    let after = &rest[1..];
                    let skip = after.len() - after.trim_start().len();
                    col += 1 + skip;
                    rest = after.trim_start();
                    if rest.is_empty() {
                        break;
                    }
                    continue;
                }
                let Some((key, value)) = split_key(rest) else {
                    // A scalar (a sequence entry or a continuation line): nothing to place
                    // beyond the item already recorded.
                    if let Some(top) = stack.last() {
                        if top.item && (rest.starts_with('[') || rest.starts_with('{')) {
                            let p = top.path.clone();
                            idx.flow(&p, rest, line, col);
                        }
                    }
                    break;
                };
                while stack.last().is_some_and(|f| f.col >= col) {
                    stack.pop();
                }
                let parent = stack.last().map(|f| f.path.clone()).unwrap_or_default();
                let path = if parent.is_empty() {
                    key.clone()
                } else {
                    format!("{parent}.{key}")
                };
                idx.map
                    .entry(path.clone())
                    .or_insert(Pos { line, col: col + 1 });
                // A key opens a new child scope: forget counts of a previous use of the path.
                counters.remove(&path);
                let value_col = col + rest.len() - value.len();
                if value.starts_with('|') || value.starts_with('>') {
                    block_scalar = Some(col);
                } else if value.starts_with('{') || value.starts_with('[') {
                    idx.flow(&path, value, line, value_col);
                }
                stack.push(Frame {
                    col,
                    path,
                    item: false,
                });
                break;
            }
        }
        idx
    }

    /// Place the members of a one-line flow collection at `path`.
    fn flow(&mut self, path: &str, text: &str, line: usize, col: usize) {
        let (open, close) = match text.as_bytes().first() {
            Some(b'{') => ('{', '}'),
            Some(b'[') => ('[', ']'),
            _ => return,
        };
        let Some(inner) = text
            .strip_prefix(open)
            .and_then(|t| t.trim_end().strip_suffix(close))
        else {
            return;
        };
        for (i, (off, part)) in split_flow(inner).into_iter().enumerate() {
            let pcol = col + 1 + off;
            if open == '{' {
                let (key, value) = match split_key(part) {
                    Some(kv) => kv,
                    None => (part.trim_end_matches(':').to_string(), ""),
                };
                let p = format!("{path}.{key}");
                self.map.entry(p.clone()).or_insert(Pos {
                    line,
                    col: pcol + 1,
                });
                let vcol = pcol + part.len() - value.len();
                self.flow(&p, value, line, vcol);
            } else {
                let p = format!("{path}[{i}]");
                self.map.entry(p.clone()).or_insert(Pos {
                    line,
                    col: pcol + 1,
                });
                self.flow(&p, part, line, pcol);
            }
        }
    }

    /// The position of a path, else of its nearest placed ancestor.
    pub fn find(&self, path: &str) -> Option<Pos> {
        let mut p = path;
        loop {
            if let Some(pos) = self.map.get(p) {
                return Some(*pos);
            }
            let cut = p.rfind(['.', '['])?;
            p = &p[..cut];
            if p.is_empty() {
                return None;
            }
        }
    }

    /// The line of a path (1 when nothing at all could be placed).
    pub fn line(&self, path: &str) -> usize {
        self.find(path).map(|p| p.line).unwrap_or(1)
    }

    pub fn exact(&self, path: &str) -> Option<Pos> {
        self.map.get(path).copied()
    }

    #[cfg(test)]
    pub fn debug_entries(&self) -> Vec<(String, Pos)> {
        self.map.iter().map(|(k, v)| (k.clone(), *v)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "%YAML 1.2\n---\n# comment\ndaqiri:\n  cfg:\n    master_core: 3 # trailing\n    memory_regions:\n    - name: \"A\"\n      kind: huge\n      access:\n        - local\n    - name: B\n      kind: device\n    interfaces:\n    - name: tx\n      address: 0000:01:00.0\n      tx:\n        queues:\n        - name: q0\n          cpu_core: 11\n          memory_regions: [A, B]\n        - name: q1\n          cpu_core: 12\n      rx:\n        flows:\n        - action: {type: queue, id: 0}\n          note: |\n            text: not a key\n            - not an item\n          match:\n            udp_src: 4096\nbench_rx:\n- interface_name: rx\n  cpu_core: 8\n- interface_name: rx\n  cpu_core: 11\n\"quoted key\": 1\n";

    #[test]
    fn places_block_keys_and_items() {
        let i = LineIndex::build(DOC);
        let l = |p: &str| i.exact(p).map(|p| p.line);
        assert_eq!(l("daqiri.cfg.master_core"), Some(6));
        assert_eq!(l("daqiri.cfg.memory_regions[0]"), Some(8));
        assert_eq!(l("daqiri.cfg.memory_regions[0].name"), Some(8));
        assert_eq!(l("daqiri.cfg.memory_regions[0].kind"), Some(9));
        assert_eq!(l("daqiri.cfg.memory_regions[0].access[0]"), Some(11));
        assert_eq!(l("daqiri.cfg.memory_regions[1].kind"), Some(13));
        assert_eq!(l("daqiri.cfg.interfaces[0].address"), Some(16));
        assert_eq!(
            l("daqiri.cfg.interfaces[0].tx.queues[0].cpu_core"),
            Some(20)
        );
        assert_eq!(
            l("daqiri.cfg.interfaces[0].tx.queues[1].cpu_core"),
            Some(23)
        );
        assert_eq!(
            l("daqiri.cfg.interfaces[0].tx.queues[0].memory_regions[1]"),
            Some(21)
        );
        assert_eq!(
            l("daqiri.cfg.interfaces[0].rx.flows[0].action.id"),
            Some(26)
        );
        assert_eq!(
            l("daqiri.cfg.interfaces[0].rx.flows[0].match.udp_src"),
            Some(31)
        );
        assert_eq!(l("bench_rx[0].cpu_core"), Some(34));
        assert_eq!(l("bench_rx[1].cpu_core"), Some(36));
        assert_eq!(l("quoted key"), Some(37));
        // The block scalar's lines are text, not structure.
        assert_eq!(l("daqiri.cfg.interfaces[0].rx.flows[0].note.text"), None);
        assert_eq!(l("daqiri.cfg.interfaces[0].rx.flows[1]"), None);
        // Columns are 1-based.
        assert_eq!(i.exact("daqiri.cfg.master_core").map(|p| p.col), Some(5));
    }

    #[test]
    fn unknown_paths_fall_back_to_an_ancestor() {
        let i = LineIndex::build(DOC);
        assert_eq!(i.line("daqiri.cfg.interfaces[0].tx.queues[0].nothing"), 19);
        assert_eq!(i.line("nowhere"), 1);
    }

    #[test]
    fn odd_inputs_do_not_panic() {
        for s in [
            "",
            "-",
            "- - -",
            ":",
            "key:",
            "\"unterminated: x",
            "a: {b: [c, {d: e}], f: 'g, h'}",
            "a:\n\t- tab",
            "? complex\n: value",
            "a: [1,\n  2]\n",
            "- a: 1\n  - b",
        ] {
            let _ = LineIndex::build(s);
        }
        let i = LineIndex::build("a: {b: [c, {d: e}], f: 'g, h'}");
        assert_eq!(i.exact("a.b[1].d").map(|p| p.line), Some(1));
        assert!(i.exact("a.f").is_some());
    }
}
