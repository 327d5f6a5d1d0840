//! Kernel arguments: the words daqtune wants on the command line, the grub drop-in that
//! carries them, and a static evaluation of the grub defaults files that finds what would
//! fight them.
//!
//! grub-mkconfig sources `/etc/default/grub` and then every `/etc/default/grub.d/*.cfg` in glob
//! order, and puts `GRUB_CMDLINE_LINUX` followed by `GRUB_CMDLINE_LINUX_DEFAULT` on the
//! default entry's `linux` line. daqtune never edits `/etc/default/grub`: it writes one
//! drop-in that *appends* to `GRUB_CMDLINE_LINUX` (seed 000, DGX Spark Step 4: "Edit a new
//! file rather than /etc/default/grub directly so Spark platform updates don't fight your
//! changes").
//!
//! Two things can still defeat the drop-in, and [`analyze`] reports both: a drop-in sorted
//! after ours that *assigns* `GRUB_CMDLINE_LINUX` instead of appending (our words vanish), and
//! a parameter we set that already has another value elsewhere (an `isolcpus=` left in
//! `GRUB_CMDLINE_LINUX_DEFAULT`, which comes later on the line and so wins for parameters
//! whose last occurrence counts).

use crate::validate::{self, InvalidValue, PciAddr};
use std::collections::BTreeMap;

/// Hugepage reservation at boot (seed 000 Step 4: `default_hugepagesz=1G hugepagesz=1G hugepages=4`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HugepageArgs {
    /// Also make this the default size (`default_hugepagesz=`), so /dev/hugepages uses it.
    pub default_size: bool,
    pub size: String,
    pub count: u64,
}

/// CPU isolation (seed 000 Step 5: `isolcpus=9-11 irqaffinity=0-8 nohz_full=9-11 rcu_nocbs=9-11 rcu_nocb_poll`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsolationArgs {
    pub isolated: String,
    pub irqaffinity: Option<String>,
    pub nohz_full: bool,
    pub rcu_nocbs: bool,
    pub rcu_nocb_poll: bool,
}

/// What the kernel command line should carry. Rendered in the seed's order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KernelArgSpec {
    /// One entry per pool (`hugepagesz=2M hugepages=512 hugepagesz=1G hugepages=1`); the
    /// first with `default_size` also gives `default_hugepagesz=`.
    pub hugepages: Vec<HugepageArgs>,
    pub isolation: Option<IsolationArgs>,
    /// `cpufreq.default_governor=performance` (kernel >= 5.9).
    pub governor_performance: bool,
    /// `pci=disable_acs_redir=<bdf>;<bdf>` for the ports between GPU and NIC.
    pub acs_redir_disable: Vec<PciAddr>,
    /// Further words (`iommu=pt`), validated like the rest.
    pub extra: Vec<String>,
}

/// Validated kernel command-line words, unescaped (as the kernel will see them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KernelArgs {
    words: Vec<String>,
}

impl KernelArgSpec {
    pub fn build(&self) -> Result<KernelArgs, InvalidValue> {
        let mut words = Vec::new();
        if let Some(h) = self.hugepages.iter().find(|h| h.default_size) {
            words.push(format!(
                "default_hugepagesz={}",
                validate::page_size(&h.size)?
            ));
        }
        for h in &self.hugepages {
            words.push(format!("hugepagesz={}", validate::page_size(&h.size)?));
            words.push(format!("hugepages={}", h.count));
        }
        if let Some(i) = &self.isolation {
            let iso = validate::cpu_list(&i.isolated)?;
            words.push(format!("isolcpus={iso}"));
            if let Some(irq) = &i.irqaffinity {
                words.push(format!("irqaffinity={}", validate::cpu_list(irq)?));
            }
            if i.nohz_full {
                words.push(format!("nohz_full={iso}"));
            }
            if i.rcu_nocbs {
                words.push(format!("rcu_nocbs={iso}"));
            }
            if i.rcu_nocb_poll {
                words.push("rcu_nocb_poll".into());
            }
        }
        if self.governor_performance {
            words.push("cpufreq.default_governor=performance".into());
        }
        if !self.acs_redir_disable.is_empty() {
            let mut bdfs: Vec<String> = self
                .acs_redir_disable
                .iter()
                .map(|a| a.to_string())
                .collect();
            bdfs.sort();
            bdfs.dedup();
            words.push(format!("pci=disable_acs_redir={}", bdfs.join(";")));
        }
        for w in &self.extra {
            words.push(validate::kernel_word(w)?.to_string());
        }
        Ok(KernelArgs { words })
    }
}

impl KernelArgs {
    pub fn from_words<I: IntoIterator<Item = S>, S: AsRef<str>>(
        words: I,
    ) -> Result<Self, InvalidValue> {
        let mut out = Vec::new();
        for w in words {
            out.push(validate::kernel_word(w.as_ref())?.to_string());
        }
        Ok(KernelArgs { words: out })
    }

    pub fn words(&self) -> &[String] {
        &self.words
    }

    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// The "print the kernel arguments only" mode: one line, as the kernel sees them, for
    /// boot managers daqtune does not write (systemd-boot, U-Boot scripts, PXE).
    pub fn render_plain(&self) -> String {
        let mut s = self.words.join(" ");
        s.push('\n');
        s
    }

    /// The words escaped for grub script: grub-mkconfig copies GRUB_CMDLINE_LINUX verbatim
    /// onto the `linux` line of grub.cfg, where `;` would end the command. `\;` survives the
    /// shell (a backslash before `;` inside double quotes is kept) and grub turns it into `;`.
    pub fn grub_words(&self) -> Vec<String> {
        self.words.iter().map(|w| w.replace(';', "\\;")).collect()
    }

    /// `key` of each word (before `=`), with `-` folded to `_` as the kernel does.
    pub fn keys(&self) -> Vec<String> {
        self.words.iter().map(|w| param_key(w)).collect()
    }
}

fn param_key(word: &str) -> String {
    word.split_once('=')
        .map_or(word, |(k, _)| k)
        .replace('-', "_")
}

/// The drop-in that appends `args` to GRUB_CMDLINE_LINUX.
pub fn render_dropin(args: &KernelArgs, profile: &str) -> Result<String, InvalidValue> {
    let profile = validate::profile_ref(profile)?;
    let mut s = String::new();
    s.push_str(&format!(
        "# {} (profile {profile}); `daqtune revert` removes it.\n",
        crate::OWNER_MARK
    ));
    s.push_str(
        "# Sourced by grub-mkconfig after /etc/default/grub and the drop-ins sorted before it;\n",
    );
    s.push_str("# it appends to GRUB_CMDLINE_LINUX so the arguments set there are kept.\n");
    s.push_str("# Run update-grub (or grub2-mkconfig -o ...) and reboot for it to take effect.\n");
    s.push_str(&format!(
        "GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX {}\"\n",
        args.grub_words().join(" ")
    ));
    Ok(s)
}

/// The drop-ins grub-mkconfig sources, in the order it sources them: names matching `*.cfg`
/// (the shell's `*` skips names starting with `.`), sorted bytewise as `sh` does in the C
/// locale, which is how update-grub runs from package hooks and units.
pub fn dropin_order<S: AsRef<str>>(names: &[S]) -> Vec<String> {
    let mut v: Vec<String> = names
        .iter()
        .map(|n| n.as_ref().to_string())
        .filter(|n| n.ends_with(".cfg") && !n.starts_with('.') && n.len() > 4 && !n.contains('/'))
        .collect();
    v.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    v
}

/// One assignment to a variable found while evaluating the files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    pub file: String,
    pub line: usize,
    pub var: String,
    /// The right-hand side refers to the variable itself (`X="$X more"`): it keeps what
    /// earlier files set.
    pub appends: bool,
    /// The variable's value after this assignment.
    pub value: String,
}

/// A line the evaluator does not model (commands, `if`, command substitution).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsupported {
    pub file: String,
    pub line: usize,
    pub text: String,
    /// The line mentions GRUB_CMDLINE_LINUX[_DEFAULT], so the evaluated value may be wrong.
    pub touches_cmdline: bool,
}

/// The result of sourcing the grub defaults files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GrubEval {
    pub vars: BTreeMap<String, String>,
    pub assignments: Vec<Assignment>,
    pub unsupported: Vec<Unsupported>,
}

pub const CMDLINE: &str = "GRUB_CMDLINE_LINUX";
pub const CMDLINE_DEFAULT: &str = "GRUB_CMDLINE_LINUX_DEFAULT";

impl GrubEval {
    pub fn get(&self, var: &str) -> &str {
        self.vars.get(var).map_or("", |s| s.as_str())
    }

    /// The default entry's command line as grub-mkconfig assembles it (grub script escapes
    /// still in place).
    pub fn default_entry_line(&self) -> String {
        format!("{} {}", self.get(CMDLINE), self.get(CMDLINE_DEFAULT))
            .trim()
            .to_string()
    }
}

/// Evaluate `files` (name, text) in order, as `sh` sourcing them one after the other.
///
/// The model covers what grub defaults files contain: comments, `NAME=value` (several per
/// line), `export`, single quotes, double quotes with `$NAME`/`${NAME}` and backslash escapes,
/// and line continuations. Anything else (commands, `if`, `$(...)`, backticks, `${X:-y}`) is
/// listed in [`GrubEval::unsupported`] and does not change any variable; the caller reports
/// those that touch the command-line variables.
pub fn evaluate(files: &[(String, String)]) -> GrubEval {
    let mut ev = GrubEval::default();
    for (name, text) in files {
        for (line_no, logical) in logical_lines(text) {
            match parse_statement(&logical, &ev.vars) {
                Ok(assigns) => {
                    for (var, value, appends) in assigns {
                        ev.vars.insert(var.clone(), value.clone());
                        ev.assignments.push(Assignment {
                            file: name.clone(),
                            line: line_no,
                            var,
                            appends,
                            value,
                        });
                    }
                }
                Err(()) => ev.unsupported.push(Unsupported {
                    file: name.clone(),
                    line: line_no,
                    text: logical.trim().to_string(),
                    touches_cmdline: logical.contains(CMDLINE),
                }),
            }
        }
    }
    ev
}

/// Split text into logical lines: a backslash-newline joins lines, and a quoted string may
/// span lines. Returns (first physical line number, text).
fn logical_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut start = 1usize;
    let mut line_no = 1usize;
    let mut quote: Option<char> = None;
    let mut chars = text.chars().peekable();
    let mut in_comment = false;
    while let Some(c) = chars.next() {
        if in_comment {
            if c == '\n' {
                in_comment = false;
                out.push((start, std::mem::take(&mut cur)));
                line_no += 1;
                start = line_no;
            } else {
                cur.push(c);
            }
            continue;
        }
        match (quote, c) {
            (None, '#') if cur.is_empty() || cur.ends_with(char::is_whitespace) => {
                in_comment = true;
                cur.push(c);
            }
            (None, '\\') | (Some('"'), '\\') => {
                if chars.peek() == Some(&'\n') {
                    chars.next();
                    line_no += 1;
                } else {
                    cur.push(c);
                    if let Some(n) = chars.next() {
                        if n == '\n' {
                            line_no += 1;
                        }
                        cur.push(n);
                    }
                }
            }
            (None, '\'') | (None, '"') => {
                quote = Some(c);
                cur.push(c);
            }
            (Some(q), _) if c == q => {
                quote = None;
                cur.push(c);
            }
            (None, '\n') => {
                out.push((start, std::mem::take(&mut cur)));
                line_no += 1;
                start = line_no;
            }
            (Some(_), '\n') => {
                cur.push(c);
                line_no += 1;
            }
            _ => cur.push(c),
        }
    }
    if !cur.trim().is_empty() {
        out.push((start, cur));
    }
    out
}

fn is_name_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Parse one logical line: empty, a comment, or assignments. `Err` for anything else.
#[allow(clippy::type_complexity)]
fn parse_statement(
    line: &str,
    vars: &BTreeMap<String, String>,
) -> Result<Vec<(String, String, bool)>, ()> {
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0usize;
    let mut out = Vec::new();
    // Assignments on one line take effect left to right in sh (`A=1 B=$A` gives B=1).
    let mut local = vars.clone();
    let skip_ws = |i: &mut usize| {
        while *i < chars.len() && (chars[*i] == ' ' || chars[*i] == '\t') {
            *i += 1;
        }
    };
    loop {
        skip_ws(&mut i);
        if i >= chars.len() || chars[i] == '#' {
            break;
        }
        if chars[i] == ';' && out.is_empty() {
            return Err(());
        }
        if chars[i] == ';' {
            i += 1;
            continue;
        }
        // `export NAME=...` and `export NAME` (the latter changes nothing we model).
        let rest: String = chars[i..].iter().collect();
        if let Some(r) = rest
            .strip_prefix("export")
            .filter(|r| r.starts_with([' ', '\t']))
        {
            i += rest.len() - r.len();
            skip_ws(&mut i);
            let start = i;
            while i < chars.len() && is_name_char(chars[i]) {
                i += 1;
            }
            if i == start {
                return Err(());
            }
            if i >= chars.len() || chars[i] != '=' {
                continue;
            }
            i = start;
        }
        if !is_name_start(chars[i]) {
            return Err(());
        }
        let start = i;
        while i < chars.len() && is_name_char(chars[i]) {
            i += 1;
        }
        if i >= chars.len() || chars[i] != '=' {
            return Err(());
        }
        let name: String = chars[start..i].iter().collect();
        i += 1;
        let (value, refs_self, next) = parse_word(&chars, i, &local, &name)?;
        i = next;
        local.insert(name.clone(), value.clone());
        out.push((name, value, refs_self));
        if i < chars.len() && !matches!(chars[i], ' ' | '\t' | ';') {
            return Err(());
        }
    }
    Ok(out)
}

/// Parse an assignment's right-hand side starting at `i`; stop at unquoted blank or `;`.
/// Returns (expanded value, whether `$self_name` was referenced, index after the word).
fn parse_word(
    chars: &[char],
    mut i: usize,
    vars: &BTreeMap<String, String>,
    self_name: &str,
) -> Result<(String, bool, usize), ()> {
    let mut val = String::new();
    let mut refs_self = false;
    let expand = |i: &mut usize, val: &mut String, refs_self: &mut bool| -> Result<(), ()> {
        // chars[*i] == '$'
        *i += 1;
        if *i >= chars.len() {
            val.push('$');
            return Ok(());
        }
        let name: String;
        if chars[*i] == '{' {
            let start = *i + 1;
            let mut j = start;
            while j < chars.len() && is_name_char(chars[j]) {
                j += 1;
            }
            if j >= chars.len() || chars[j] != '}' || j == start || !is_name_start(chars[start]) {
                return Err(());
            }
            name = chars[start..j].iter().collect();
            *i = j + 1;
        } else if is_name_start(chars[*i]) {
            let start = *i;
            while *i < chars.len() && is_name_char(chars[*i]) {
                *i += 1;
            }
            name = chars[start..*i].iter().collect();
        } else if chars[*i] == '(' || chars[*i].is_ascii_digit() || "@*#?$!-".contains(chars[*i]) {
            return Err(());
        } else {
            val.push('$');
            return Ok(());
        }
        if name == self_name {
            *refs_self = true;
        }
        val.push_str(vars.get(&name).map_or("", |s| s.as_str()));
        Ok(())
    };
    while i < chars.len() {
        match chars[i] {
            ' ' | '\t' | ';' => break,
            '`' | '(' | ')' | '<' | '>' | '|' | '&' => return Err(()),
            '\\' => {
                i += 1;
                if i < chars.len() {
                    val.push(chars[i]);
                    i += 1;
                }
            }
            '\'' => {
                i += 1;
                while i < chars.len() && chars[i] != '\'' {
                    val.push(chars[i]);
                    i += 1;
                }
                if i >= chars.len() {
                    return Err(());
                }
                i += 1;
            }
            '"' => {
                i += 1;
                loop {
                    if i >= chars.len() {
                        return Err(());
                    }
                    match chars[i] {
                        '"' => {
                            i += 1;
                            break;
                        }
                        '`' => return Err(()),
                        '\\' => {
                            // Inside double quotes a backslash escapes only $ ` " \ and newline.
                            match chars.get(i + 1) {
                                Some(&n) if matches!(n, '$' | '`' | '"' | '\\') => {
                                    val.push(n);
                                    i += 2;
                                }
                                Some('\n') => i += 2,
                                _ => {
                                    val.push('\\');
                                    i += 1;
                                }
                            }
                        }
                        '$' => expand(&mut i, &mut val, &mut refs_self)?,
                        c => {
                            val.push(c);
                            i += 1;
                        }
                    }
                }
            }
            '$' => expand(&mut i, &mut val, &mut refs_self)?,
            c => {
                val.push(c);
                i += 1;
            }
        }
    }
    Ok((val, refs_self, i))
}

/// Something in the existing grub configuration that works against the drop-in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// A file sourced after ours assigns GRUB_CMDLINE_LINUX without appending: our words
    /// would be dropped.
    LaterOverride { file: String, line: usize },
    /// A parameter we set already appears with another value (or, for a flag, at all in a
    /// form we do not set).
    Conflict {
        param: String,
        ours: String,
        theirs: String,
        var: String,
        file: String,
        line: usize,
    },
    /// The same word is already there: harmless, reported so the user knows.
    Duplicate {
        word: String,
        var: String,
        file: String,
        line: usize,
    },
    /// A line the evaluator could not model touches the command-line variables.
    Unmodelled {
        file: String,
        line: usize,
        text: String,
    },
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Finding::LaterOverride { file, line } => write!(
                f,
                "{file}:{line} assigns {CMDLINE} after daqtune's drop-in without appending (`{CMDLINE}=\"${CMDLINE} ...\"`): the tuning arguments would be dropped; make it append or rename it to sort before the drop-in"
            ),
            Finding::Conflict { param, ours, theirs, var, file, line } => write!(
                f,
                "{file}:{line} already sets `{theirs}` in {var}; daqtune sets `{ours}` — the kernel sees both{}; remove `{param}` there",
                if var == CMDLINE_DEFAULT { " and GRUB_CMDLINE_LINUX_DEFAULT comes later on the line, so it wins" } else { "" }
            ),
            Finding::Duplicate { word, var, file, line } => {
                write!(f, "{file}:{line} already has `{word}` in {var} (same value, harmless)")
            }
            Finding::Unmodelled { file, line, text } => write!(
                f,
                "{file}:{line} changes the command line in a way daqtune cannot evaluate (`{text}`); check the result in /boot/grub/grub.cfg"
            ),
        }
    }
}

impl Finding {
    /// Whether the drop-in cannot do its job while this stands.
    pub fn is_blocking(&self) -> bool {
        matches!(
            self,
            Finding::LaterOverride { .. } | Finding::Conflict { .. }
        )
    }
}

/// Compare what the drop-in `ours` (a file name among `files`) adds with the rest of the
/// configuration. `files` are (name, text) in sourcing order, ours included or not.
pub fn analyze(files: &[(String, String)], ours: &str, args: &KernelArgs) -> Vec<Finding> {
    let mut findings = Vec::new();
    let pos = files.iter().position(|(n, _)| n == ours);
    let others: Vec<(String, String)> = files.iter().filter(|(n, _)| n != ours).cloned().collect();
    let ev = evaluate(&others);
    for u in &ev.unsupported {
        if u.touches_cmdline {
            findings.push(Finding::Unmodelled {
                file: u.file.clone(),
                line: u.line,
                text: u.text.clone(),
            });
        }
    }
    // Files after ours: the position in the sourcing order, or where our name would sort.
    let after: Vec<&String> = match pos {
        Some(p) => files[p + 1..].iter().map(|(n, _)| n).collect(),
        None => files
            .iter()
            .map(|(n, _)| n)
            .filter(|n| is_dropin(n) && base_name(n).as_bytes() > base_name(ours).as_bytes())
            .collect(),
    };
    for a in &ev.assignments {
        if a.var == CMDLINE && !a.appends && after.contains(&&a.file) {
            findings.push(Finding::LaterOverride {
                file: a.file.clone(),
                line: a.line,
            });
        }
    }
    for var in [CMDLINE, CMDLINE_DEFAULT] {
        let theirs = ev.get(var);
        // grub script unescapes `\;`; compare as the kernel will see the words.
        let words: Vec<String> = theirs
            .split_whitespace()
            .map(|w| w.replace("\\;", ";"))
            .collect();
        for ours_w in args.words() {
            let key = param_key(ours_w);
            for tw in words.iter().filter(|w| param_key(w) == key) {
                let (file, line) = origin(&ev, var, tw);
                if tw == ours_w {
                    findings.push(Finding::Duplicate {
                        word: tw.clone(),
                        var: var.into(),
                        file,
                        line,
                    });
                } else if !multi_valued(&key) {
                    findings.push(Finding::Conflict {
                        param: key.clone(),
                        ours: ours_w.clone(),
                        theirs: tw.clone(),
                        var: var.into(),
                        file,
                        line,
                    });
                }
            }
        }
    }
    findings
}

/// Parameters that may legitimately appear several times with different values
/// (`hugepagesz=2M hugepages=512 hugepagesz=1G hugepages=4` reserves both pools).
fn multi_valued(key: &str) -> bool {
    matches!(key, "hugepagesz" | "hugepages")
}

fn is_dropin(name: &str) -> bool {
    name.contains("grub.d/")
}

fn base_name(name: &str) -> &str {
    name.rsplit('/').next().unwrap_or(name)
}

/// The first assignment of `var` whose value carries `word` and from which the word was never
/// removed: the file and line that introduced it.
fn origin(ev: &GrubEval, var: &str, word: &str) -> (String, usize) {
    let mut found: Option<&Assignment> = None;
    for a in ev.assignments.iter().filter(|a| a.var == var) {
        let has = a
            .value
            .split_whitespace()
            .any(|w| w.replace("\\;", ";") == word);
        match (has, found) {
            (true, None) => found = Some(a),
            (false, Some(_)) => found = None,
            _ => {}
        }
    }
    found.map_or((String::new(), 0), |a| (a.file.clone(), a.line))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(name: &str, text: &str) -> (String, String) {
        (name.to_string(), text.to_string())
    }

    pub(crate) fn igx_spec() -> KernelArgSpec {
        KernelArgSpec {
            hugepages: vec![HugepageArgs {
                default_size: true,
                size: "1G".into(),
                count: 4,
            }],
            isolation: Some(IsolationArgs {
                isolated: "9-11".into(),
                irqaffinity: Some("0-8".into()),
                nohz_full: true,
                rcu_nocbs: true,
                rcu_nocb_poll: true,
            }),
            governor_performance: true,
            acs_redir_disable: vec![],
            extra: vec![],
        }
    }

    #[test]
    fn two_pools_reserve_both_sizes_and_the_first_is_the_default() {
        let spec = KernelArgSpec {
            hugepages: vec![
                HugepageArgs {
                    default_size: true,
                    size: "1G".into(),
                    count: 1,
                },
                HugepageArgs {
                    default_size: false,
                    size: "2M".into(),
                    count: 512,
                },
            ],
            ..Default::default()
        };
        assert_eq!(
            spec.build().expect("args").render_plain(),
            "default_hugepagesz=1G hugepagesz=1G hugepages=1 hugepagesz=2M hugepages=512\n"
        );
    }

    #[test]
    fn seed_order() {
        let a = igx_spec().build().expect("build");
        assert_eq!(
            a.render_plain(),
            "default_hugepagesz=1G hugepagesz=1G hugepages=4 isolcpus=9-11 irqaffinity=0-8 nohz_full=9-11 rcu_nocbs=9-11 rcu_nocb_poll cpufreq.default_governor=performance\n"
        );
    }

    #[test]
    fn acs_escaped_for_grub_only() {
        let spec = KernelArgSpec {
            acs_redir_disable: vec![
                "0000:02:00.0".parse().expect("bdf"),
                "0000:01:00.0".parse().expect("bdf"),
            ],
            ..Default::default()
        };
        let a = spec.build().expect("build");
        assert_eq!(
            a.words(),
            ["pci=disable_acs_redir=0000:01:00.0;0000:02:00.0"]
        );
        assert_eq!(
            a.grub_words(),
            ["pci=disable_acs_redir=0000:01:00.0\\;0000:02:00.0"]
        );
        let d = render_dropin(&a, "igx-orin").expect("render");
        assert!(
            d.contains(
                "\"$GRUB_CMDLINE_LINUX pci=disable_acs_redir=0000:01:00.0\\;0000:02:00.0\"\n"
            ),
            "{d}"
        );
    }

    #[test]
    fn bad_values_rejected() {
        let mut s = igx_spec();
        s.isolation.as_mut().expect("iso").isolated = "9-11 init=/bin/sh".into();
        assert!(s.build().is_err());
        let s = KernelArgSpec {
            extra: vec!["a\"b".into()],
            ..Default::default()
        };
        assert!(s.build().is_err());
        let a = igx_spec().build().expect("build");
        assert!(render_dropin(&a, "x\ny").is_err());
    }

    #[test]
    fn order_of_dropins() {
        assert_eq!(
            dropin_order(&[
                "99-daqtune.cfg",
                "10-a.cfg",
                ".hidden.cfg",
                "50-b.cfg.bak",
                "Z.cfg",
                "a.cfg",
                ".cfg"
            ]),
            ["10-a.cfg", "99-daqtune.cfg", "Z.cfg", "a.cfg"]
        );
    }

    #[test]
    fn evaluates_quotes_and_expansion() {
        let ev = evaluate(&[f(
            "grub",
            "# comment\nGRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT=\"quiet splash\"\nGRUB_CMDLINE_LINUX='a  b'\nGRUB_DISTRIBUTOR=`lsb_release -i -s 2> /dev/null || echo Debian`\nX=1 Y=\"$X\"2 # trailing\nexport Z=${Y}3\nGRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX \\\"q\\\" \\$HOME \\; c\\\nd\"\n",
        )]);
        assert_eq!(ev.get(CMDLINE_DEFAULT), "quiet splash");
        assert_eq!(ev.get("Y"), "12");
        assert_eq!(ev.get("Z"), "123");
        assert_eq!(ev.get(CMDLINE), "a  b \"q\" $HOME \\; cd");
        assert_eq!(ev.unsupported.len(), 1);
        assert!(!ev.unsupported[0].touches_cmdline);
        let last = ev.assignments.last().expect("assignment");
        assert!(last.appends);
        assert_eq!(last.line, 8);
    }

    #[test]
    fn garbage_never_panics() {
        for t in [
            "\"", "'", "X=\"", "X='", "\\", "X=$", "X=${", "X=${}", "X=${1}", "if", "=", "X=a b",
            "\u{0}", "X=\"$(\"", "export", "export ;",
        ] {
            let _ = evaluate(&[f("g", t)]);
        }
    }

    #[test]
    fn analysis_finds_conflicts_and_overrides() {
        let args = igx_spec().build().expect("build");
        let files = vec![
            f("/etc/default/grub", "GRUB_CMDLINE_LINUX_DEFAULT=\"quiet isolcpus=2-3\"\nGRUB_CMDLINE_LINUX=\"console=ttyS0 rcu_nocb_poll\"\n"),
            f("/etc/default/grub.d/50-cloud.cfg", "GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX nohz_full=1\"\n"),
            f("/etc/default/grub.d/99-daqtune.cfg", &render_dropin(&args, "igx-orin").expect("r")),
            f("/etc/default/grub.d/99-zz.cfg", "GRUB_CMDLINE_LINUX=\"console=tty0\"\n"),
        ];
        let found = analyze(&files, "/etc/default/grub.d/99-daqtune.cfg", &args);
        let text: Vec<String> = found.iter().map(|x| x.to_string()).collect();
        assert!(
            found.contains(&Finding::LaterOverride {
                file: "/etc/default/grub.d/99-zz.cfg".into(),
                line: 1
            }),
            "{text:#?}"
        );
        assert!(found.iter().any(|x| matches!(x, Finding::Conflict { param, var, line: 1, .. } if param == "isolcpus" && var == CMDLINE_DEFAULT)), "{text:#?}");
        // nohz_full=1 came from 50-cloud.cfg, but 99-zz.cfg assigned over it: only what survives counts.
        assert!(
            !found
                .iter()
                .any(|x| matches!(x, Finding::Conflict { param, .. } if param == "nohz_full")),
            "{text:#?}"
        );
        // Without the later override the earlier drop-in's nohz_full is reported with its file.
        let files2 = &files[..3];
        let found2 = analyze(files2, "/etc/default/grub.d/99-daqtune.cfg", &args);
        assert!(found2.iter().any(|x| matches!(x, Finding::Conflict { param, file, .. } if param == "nohz_full" && file.ends_with("50-cloud.cfg"))), "{found2:#?}");
        assert!(found2
            .iter()
            .any(|x| matches!(x, Finding::Duplicate { word, .. } if word == "rcu_nocb_poll")));
        assert!(!found2
            .iter()
            .any(|x| matches!(x, Finding::LaterOverride { .. })));
    }

    #[test]
    fn analysis_before_the_dropin_exists() {
        let args = igx_spec().build().expect("build");
        let files = vec![
            f("/etc/default/grub", "GRUB_CMDLINE_LINUX=\"\"\n"),
            f(
                "/etc/default/grub.d/00-early.cfg",
                "GRUB_CMDLINE_LINUX=\"x\"\n",
            ),
            f("/etc/default/grub.d/zz.cfg", "GRUB_CMDLINE_LINUX=\"y\"\n"),
        ];
        let found = analyze(&files, "/etc/default/grub.d/99-daqtune.cfg", &args);
        assert_eq!(
            found,
            vec![Finding::LaterOverride {
                file: "/etc/default/grub.d/zz.cfg".into(),
                line: 1
            }]
        );
    }
}
