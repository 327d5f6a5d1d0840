//! Text helpers shared by the report writers of the workspace (the main binary's reports and
//! the self-test's JUnit), so every report escapes the same way.

/// Escapes text for XML attributes and content (JUnit reports).
pub fn xml_escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            // XML 1.0 forbids most control characters even escaped.
            c if (c as u32) < 0x20 && !matches!(c, '\n' | '\r' | '\t') => o.push('?'),
            c => o.push(c),
        }
    }
    o
}

/// Host data (a hostname, a DMI string, a GPU name) made safe for a terminal: control
/// characters (C0, DEL, C1, which start escape sequences) are written as `\xHH` / `\u{HHHH}`
/// and a backslash as `\\`, so a hostile string prints as text and cannot move the cursor,
/// retitle the terminal or hide a line. Machine outputs (JSON) keep the exact bytes.
pub fn printable(s: &str) -> std::borrow::Cow<'_, str> {
    let bad = |c: char| c.is_control() || c == '\\' || is_bidi_control(c);
    if !s.chars().any(bad) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut o = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x100 && c.is_control() => {
                o.push_str(&format!("\\x{:02x}", c as u32))
            }
            c if c.is_control() || is_bidi_control(c) => {
                o.push_str(&format!("\\u{{{:04x}}}", c as u32))
            }
            c => o.push(c),
        }
    }
    std::borrow::Cow::Owned(o)
}

/// The directional formatting characters (Unicode's bidi embeddings, overrides and isolates,
/// and the LRM/RLM marks): not control characters, but a terminal that honours them shows the
/// text after them reordered (`U+202E` makes `evil.cfg\u{202e}gfc.txt` read as a `.txt`), so
/// host data prints them escaped like the controls.
pub fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// A text stream made safe for a terminal on the way out: every control character but newline
/// and tab, and every directional override ([`is_bidi_control`]), is written as [`printable`]
/// writes it (`\x1b`, `\u{009b}`, `\u{202e}`), so host data that a plan, an apply, a revert,
/// `status` or a matrix quotes (a file's old contents, a path from a journal, a netdev or DMI
/// name from a snapshot) cannot move the cursor, retitle the terminal or reorder a line. For
/// the text outputs that draw no colours of their own; the check report escapes its fields
/// itself (it paints status words). A C1 control is two bytes in UTF-8 (`0xC2 0x80..=0x9F`)
/// and a directional override three (`0xE2 0x80|0x81 ..`), which one write may split: the
/// lead bytes wait for the next write.
pub struct TerminalSafe<W: std::io::Write> {
    inner: W,
    pending: Vec<u8>,
}

impl<W: std::io::Write> TerminalSafe<W> {
    pub fn new(inner: W) -> Self {
        TerminalSafe {
            inner,
            pending: Vec::new(),
        }
    }
}

/// One byte that starts nothing: written as it is, or escaped when it is a C0 control or DEL.
fn plain_byte(o: &mut Vec<u8>, b: u8) {
    match b {
        b'\n' | b'\t' => o.push(b),
        0x00..=0x1f | 0x7f => o.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
        _ => o.push(b),
    }
}

impl<W: std::io::Write> std::io::Write for TerminalSafe<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut o = Vec::with_capacity(buf.len());
        for &b in buf {
            match self.pending.as_slice() {
                [0xc2] => {
                    self.pending.clear();
                    if (0x80..=0x9f).contains(&b) {
                        o.extend_from_slice(format!("\\u{{{b:04x}}}").as_bytes());
                        continue;
                    }
                    o.push(0xc2);
                }
                [0xe2] if b == 0x80 || b == 0x81 => {
                    self.pending.push(b);
                    continue;
                }
                [0xe2] => {
                    self.pending.clear();
                    o.push(0xe2);
                }
                [0xe2, x] => {
                    let x = *x;
                    self.pending.clear();
                    let cp = 0x2000 | (u32::from(x & 0x3f) << 6) | u32::from(b & 0x3f);
                    if (0x80..=0xbf).contains(&b) && char::from_u32(cp).is_some_and(is_bidi_control)
                    {
                        o.extend_from_slice(format!("\\u{{{cp:04x}}}").as_bytes());
                        continue;
                    }
                    o.extend_from_slice(&[0xe2, x]);
                }
                _ => {}
            }
            if b == 0xc2 || b == 0xe2 {
                self.pending.push(b);
            } else {
                plain_byte(&mut o, b);
            }
        }
        self.inner.write_all(&o)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let rest = std::mem::take(&mut self.pending);
        if !rest.is_empty() {
            self.inner.write_all(&rest)?;
        }
        self.inner.flush()
    }
}

impl<W: std::io::Write> Drop for TerminalSafe<W> {
    fn drop(&mut self) {
        let _ = std::io::Write::flush(self);
    }
}

/// One word of a shell command, quoted so that pasting the command runs exactly that word:
/// left bare when it holds only characters no shell treats specially, else in single quotes
/// (a `'` inside as `'\''`), and as `$'...'` with `\xHH` escapes when it holds control
/// characters (a newline pasted inside plain quotes would still reach the terminal). Every
/// fix line built from host data quotes that data with this one helper.
pub fn shell_quote(s: &str) -> std::borrow::Cow<'_, str> {
    let plain = |b: u8| b.is_ascii_alphanumeric() || b"_@%+=:,./-".contains(&b);
    if !s.is_empty() && s.bytes().all(plain) {
        return std::borrow::Cow::Borrowed(s);
    }
    if s.chars().any(char::is_control) {
        let mut o = String::from("$'");
        for c in s.chars() {
            match c {
                '\'' => o.push_str("\\'"),
                '\\' => o.push_str("\\\\"),
                c if c.is_control() => {
                    let mut buf = [0u8; 4];
                    for b in c.encode_utf8(&mut buf).bytes() {
                        o.push_str(&format!("\\x{b:02x}"));
                    }
                }
                c => o.push(c),
            }
        }
        o.push('\'');
        return std::borrow::Cow::Owned(o);
    }
    std::borrow::Cow::Owned(format!("'{}'", s.replace('\'', "'\\''")))
}

/// Unix seconds as RFC 3339 UTC with second precision (`2026-11-24T03:57:10Z`): what NFD's
/// `expiry-time` directive parses and what reports print. Civil-from-days (Howard Hinnant's
/// algorithm), so no time crate is needed.
pub fn rfc3339_utc(unix: u64) -> String {
    let days = (unix / 86_400) as i64;
    let rem = unix % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Why a YAML document was refused before parsing, and where (1-based line and column).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct YamlShapeError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

/// Refuses a YAML document deeper than `max_depth` or with a sequence of more than
/// `max_items` entries, in one pass over the text and before any YAML parser sees it: a
/// parser given 100,000 nested `[` or 40,000 list entries spends seconds and hundreds of MB
/// on what no profile or DAQIRI configuration ever holds. Depth counts open flow brackets,
/// block indentation levels and compact `- - ` items; sequence entries are counted per
/// enclosing key (block items at one indentation, and the members of a flow sequence).
/// Quotes and comments are honoured; an unusual construct can only count as deeper than it
/// is, never hide depth.
pub fn yaml_shape(src: &str, max_depth: usize, max_items: usize) -> Result<(), YamlShapeError> {
    let err = |line: usize, column: usize, message: String| YamlShapeError {
        line,
        column,
        message,
    };
    // Block structure: indentation columns of open levels, and entries seen per level.
    let mut indents: Vec<(usize, usize)> = Vec::new();
    // Flow structure: per open bracket, the line it opened on, and its members so far.
    let mut flow: Vec<(usize, usize)> = Vec::new();
    let mut quote: Option<u8> = None;
    // Inside a block scalar (`|`, `>`): the indentation of the line that opened it.
    let mut block: Option<usize> = None;
    for (n, raw) in src.lines().enumerate() {
        let line = n + 1;
        let b = raw.as_bytes();
        let mut i = 0;
        let indent = b.iter().take_while(|c| **c == b' ').count();
        if let Some(owner) = block {
            if indent == b.len() || indent > owner {
                continue;
            }
            block = None;
        }
        if flow.is_empty() && quote.is_none() {
            let rest = &b[indent..];
            if rest.is_empty() || rest[0] == b'#' {
                continue;
            }
            while indents.last().is_some_and(|(c, _)| *c > indent) {
                indents.pop();
            }
            if indents.last().is_none_or(|(c, _)| *c < indent) {
                indents.push((indent, 0));
            }
            // Compact nested items (`- - - x`) open one level each.
            let mut dashes = 0usize;
            i = indent;
            while i < b.len() && b[i] == b'-' && (i + 1 == b.len() || b[i + 1] == b' ') {
                dashes += 1;
                i += 1;
                while i < b.len() && b[i] == b' ' {
                    i += 1;
                }
            }
            if dashes > 0 {
                if let Some(top) = indents.last_mut() {
                    top.1 += 1;
                    if top.1 > max_items {
                        return Err(err(
                            line,
                            indent + 1,
                            format!("more than {max_items} entries in one list"),
                        ));
                    }
                }
            }
            let depth = indents.len() + dashes.saturating_sub(1);
            if depth > max_depth {
                return Err(err(
                    line,
                    i.min(b.len()) + 1,
                    format!("nested more than {max_depth} levels deep"),
                ));
            }
        }
        let mut prev = b' ';
        while i < b.len() {
            let c = b[i];
            match quote {
                Some(q) => {
                    if c == b'\\' && q == b'"' {
                        i += 1;
                    } else if c == q {
                        if q == b'\'' && b.get(i + 1) == Some(&b'\'') {
                            i += 1;
                        } else {
                            quote = None;
                        }
                    }
                }
                None => match c {
                    b'#' if prev == b' ' || prev == b'\t' => break,
                    b'\'' | b'"' if matches!(prev, b' ' | b'\t' | b'[' | b'{' | b',' | b':') => {
                        quote = Some(c)
                    }
                    b'[' | b'{' => {
                        flow.push((line, 0));
                        let depth = indents.len() + flow.len();
                        if depth > max_depth {
                            return Err(err(
                                line,
                                i + 1,
                                format!("nested more than {max_depth} levels deep"),
                            ));
                        }
                    }
                    b']' | b'}' => {
                        flow.pop();
                    }
                    b',' => {
                        if let Some(top) = flow.last_mut() {
                            top.1 += 1;
                            if top.1 >= max_items {
                                return Err(err(
                                    line,
                                    i + 1,
                                    format!(
                                        "more than {max_items} entries in one list (opened on line {})",
                                        top.0
                                    ),
                                ));
                            }
                        }
                    }
                    _ => {}
                },
            }
            prev = c;
            i += 1;
        }
        // A line ending in a block scalar indicator: the deeper lines after it are text.
        if flow.is_empty() && quote.is_none() {
            let word = raw[..i].split_whitespace().last().unwrap_or("");
            let mut w = word.bytes();
            if matches!(w.next(), Some(b'|' | b'>'))
                && w.all(|c| c == b'-' || c == b'+' || c.is_ascii_digit())
            {
                block = Some(indent);
            }
        }
    }
    Ok(())
}

/// Columns a terminal gives `s` (East Asian wide characters take two, combining marks none).
pub fn display_width(s: &str) -> usize {
    unicode_width::UnicodeWidthStr::width(s)
}

/// Breaks `text` into lines for a terminal: the first at most `first` columns wide, the
/// others at most `rest`. Breaks go at spaces (the spaces at a break are dropped; runs of
/// spaces inside a line are kept); a word wider than a whole line is cut where the line ends.
/// A first word that fits only the wider later lines leaves the first line empty, so a caller
/// whose first line starts far right (a message after a long subject) gets the text below.
pub fn wrap(text: &str, first: usize, rest: usize) -> Vec<String> {
    let rest = rest.max(1);
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    let mut used = 0usize;
    let room = |lines: &Vec<String>| if lines.is_empty() { first } else { rest };
    let mut rest_text = text;
    while !rest_text.is_empty() {
        let gap_len = rest_text.len() - rest_text.trim_start_matches(' ').len();
        let after = &rest_text[gap_len..];
        let word_len = after.find(' ').unwrap_or(after.len());
        let word = &after[..word_len];
        rest_text = &after[word_len..];
        if word.is_empty() {
            break;
        }
        let gap = if line.is_empty() { 0 } else { gap_len };
        let w = display_width(word);
        if used + gap + w <= room(&lines) {
            line.push_str(&" ".repeat(gap));
            line.push_str(word);
            used += gap + w;
            continue;
        }
        if !line.is_empty() || (lines.is_empty() && w <= rest && first < rest) {
            lines.push(std::mem::take(&mut line));
            used = 0;
            if w <= rest {
                line.push_str(word);
                used = w;
                continue;
            }
        }
        // Wider than a line: cut it where each line ends.
        for c in word.chars() {
            let cw = unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
            if used + cw > room(&lines) && (used > 0 || room(&lines) == 0) {
                lines.push(std::mem::take(&mut line));
                used = 0;
            }
            line.push(c);
            used += cw;
        }
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// [`wrap`], then at most `max` lines: the last one kept ends with `marker` (which says where
/// the whole text is), words dropped from its end to make room.
pub fn wrap_at_most(
    text: &str,
    first: usize,
    rest: usize,
    max: usize,
    marker: &str,
) -> Vec<String> {
    let mut lines = wrap(text, first, rest);
    if lines.len() <= max.max(1) {
        return lines;
    }
    lines.truncate(max.max(1));
    let room = if lines.len() == 1 { first } else { rest };
    let mw = display_width(marker);
    let last = lines.pop().unwrap_or_default();
    let mut kept = String::new();
    for (i, word) in last.split(' ').enumerate() {
        let sep = usize::from(i > 0);
        if display_width(&kept) + sep + display_width(word) + 1 + mw > room {
            break;
        }
        if i > 0 {
            kept.push(' ');
        }
        kept.push_str(word);
    }
    let kept = kept.trim_end();
    lines.push(if kept.is_empty() {
        marker.to_string()
    } else {
        format!("{kept} {marker}")
    });
    lines
}

#[cfg(test)]
mod tests {
    use super::{
        display_width, printable, rfc3339_utc, shell_quote, wrap, wrap_at_most, xml_escape,
        yaml_shape,
    };

    #[test]
    fn rfc3339_instants() {
        assert_eq!(rfc3339_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339_utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339_utc(1_795_488_468), "2026-11-24T02:47:48Z");
    }

    #[test]
    fn escapes_markup_and_control_characters() {
        assert_eq!(xml_escape("a<b>&\"'"), "a&lt;b&gt;&amp;&quot;&apos;");
        assert_eq!(xml_escape("x\u{1}y\n\r\t"), "x?y\n\r\t");
    }

    #[test]
    fn yaml_nesting_bomb_refused_where_it_starts() {
        let bomb = format!("name: x\nisolated: {}", "[".repeat(100_000));
        let e = yaml_shape(&bomb, 64, 4096).expect_err("bomb");
        assert_eq!((e.line, e.column), (2, 74));
        assert!(e.message.contains("64 levels"), "{e:?}");
        let dashes = format!("a:\n  {}x\n", "- ".repeat(100));
        let e = yaml_shape(&dashes, 64, 4096).expect_err("compact");
        assert_eq!(e.line, 2);
        let mut deep = String::new();
        for d in 0..80 {
            deep.push_str(&format!("{}k{d}:\n", " ".repeat(d)));
        }
        assert_eq!(yaml_shape(&deep, 64, 4096).expect_err("indent").line, 65);
    }

    #[test]
    fn yaml_long_lists_refused() {
        let mut cfg = String::from("daqiri:\n  cfg:\n    queues:\n");
        for q in 0..5000 {
            cfg.push_str(&format!("    - name: q{q}\n      cpu_core: 3\n"));
        }
        let e = yaml_shape(&cfg, 64, 4096).expect_err("long");
        assert_eq!(e.line, 4 + 2 * 4096);
        assert!(e.message.contains("4096 entries"), "{e:?}");
        let flow = format!("a: [{}]\n", "1,".repeat(5000));
        assert!(yaml_shape(&flow, 64, 4096).is_err());
    }

    #[test]
    fn yaml_real_documents_pass() {
        let doc = "%YAML 1.2\n---\n# c [[[[\nname: \"it's [ok\"\nv: 'a''[b'\nl: [a, {b: c}, [d]]\nblock: |\n  [[[[ text\n  more\n\nseq:\n- - a\n  - b\n- c # ]]]\n";
        assert_eq!(yaml_shape(doc, 8, 3), Ok(()));
    }

    #[test]
    fn shell_words_quoted() {
        assert_eq!(shell_quote("GPU-1a2b"), "GPU-1a2b");
        assert_eq!(shell_quote("0000:01:00.0"), "0000:01:00.0");
        assert_eq!(shell_quote("GPU-1; rm -rf / #"), "'GPU-1; rm -rf / #'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("a\nb\x1b]0;x\x07"), "$'a\\x0ab\\x1b]0;x\\x07'");
        assert_eq!(shell_quote("$(id)`id`"), "'$(id)`id`'");
    }

    #[test]
    fn control_characters_escaped_for_terminals() {
        assert_eq!(printable("igx-01"), "igx-01");
        assert_eq!(printable("a\x1b[2Jb"), "a\\x1b[2Jb");
        assert_eq!(printable("x\ny\u{9b}z\\"), "x\\x0ay\\x9bz\\\\");
    }

    /// Breaks at spaces, first line narrower, a long word cut, nothing lost: joining the
    /// pieces gives the words back.
    #[test]
    fn wrap_breaks_at_spaces_within_the_width() {
        let text = "isolcpus is not set (the profile's data cores are 8-11)";
        let lines = wrap(text, 20, 30);
        assert_eq!(
            lines,
            [
                "isolcpus is not set",
                "(the profile's data cores are",
                "8-11)"
            ]
        );
        assert_eq!(lines.join(" "), text);
        // A word wider than any line is cut, nothing dropped.
        let long = "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor";
        let cut = wrap(long, 20, 20);
        assert!(cut.iter().all(|l| display_width(l) <= 20), "{cut:?}");
        assert_eq!(cut.concat(), long);
        // A first line with no room for the first word starts the text below.
        assert_eq!(wrap("abcdef ghi", 3, 10), ["", "abcdef ghi"]);
        // Runs of spaces inside a line are kept.
        assert_eq!(wrap("a   (b)", 10, 10), ["a   (b)"]);
        // East Asian wide characters take two columns (Unicode East Asian Width: W).
        assert_eq!(display_width("\u{65e5}\u{672c}"), 4);
        assert_eq!(
            wrap("\u{65e5}\u{672c} \u{65e5}", 4, 4),
            ["\u{65e5}\u{672c}", "\u{65e5}"]
        );
    }

    #[test]
    fn wrap_at_most_ends_with_the_marker() {
        let text = "one two three four five six seven eight nine ten";
        let l = wrap_at_most(text, 10, 10, 2, "(-v)");
        assert_eq!(l.len(), 2, "{l:?}");
        assert!(
            l[1].ends_with("(-v)") && display_width(&l[1]) <= 10,
            "{l:?}"
        );
        assert_eq!(wrap_at_most(text, 100, 100, 2, "(-v)"), [text]);
    }
}

/// Why pasted text is not the capture a parser reads (lspci, nvidia-smi, ibstat, ethtool,
/// topo -m), with the 1-based line: one type, so the importer maps every parser's error the
/// same way.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct LineError {
    pub line: usize,
    pub message: String,
}
