//! "Did you mean": the nearest known word to a mistyped one (a check id, a profile name, a
//! configuration key), for the messages that refuse or warn about it.

/// Levenshtein distance over chars (ids and keys are short; the table is two rows).
pub fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// The known word closest to `word`, when it is close enough to be what was meant: within a
/// third of the longer word's length (at least one edit, at most three), or a word that
/// `word` is the start of (`igx` for `igx-orin`), or that ends in `word` after a `.`
/// (`mrrs` for `pcie.mrrs`). Case is ignored. `None` when nothing is near or `word` is
/// itself known.
pub fn nearest<'a, I>(word: &str, known: I) -> Option<&'a str>
where
    I: IntoIterator<Item = &'a str>,
{
    let w = word.trim().to_ascii_lowercase();
    if w.is_empty() {
        return None;
    }
    let mut best: Option<(usize, &'a str)> = None;
    for k in known {
        let kl = k.to_ascii_lowercase();
        if kl == w {
            return None;
        }
        let d = distance(&w, &kl);
        let limit = (w.chars().count().max(kl.chars().count()) / 3).clamp(1, 3);
        let partial = (w.len() >= 3 && kl.starts_with(&w))
            || kl
                .rsplit_once('.')
                .is_some_and(|(_, tail)| distance(&w, tail) <= 1);
        let score = if d <= limit {
            d
        } else if partial {
            limit + 1
        } else {
            continue;
        };
        // Of two words as near, the one `word` is a subsequence of (a key missed, the
        // commonest slip: `pcie.mrs` is `pcie.mrrs` rather than `pcie.mps`).
        let score = 2 * score + usize::from(!subsequence(&w, &kl));
        if best.is_none_or(|(s, _)| score < s) {
            best = Some((score, k));
        }
    }
    best.map(|(_, k)| k)
}

/// Whether the chars of `a` appear in `b` in order.
fn subsequence(a: &str, b: &str) -> bool {
    let mut b = b.chars();
    a.chars().all(|c| b.any(|x| x == c))
}

/// `; did you mean `X`?` for [`nearest`], or nothing.
pub fn hint<'a, I>(word: &str, known: I) -> String
where
    I: IntoIterator<Item = &'a str>,
{
    nearest(word, known)
        .map(|k| format!("; did you mean `{k}`?"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn near_words() {
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(distance("", "ab"), 2);
        let ids = ["pcie.mrrs", "pcie.mps", "nic.mtu", "gpu.clocks"];
        assert_eq!(nearest("pcie.mrs", ids), Some("pcie.mrrs"));
        assert_eq!(
            nearest("pcie.mrs", ["pcie.mps", "pcie.mrrs"]),
            Some("pcie.mrrs")
        );
        assert_eq!(nearest("PCIE.MPS", ids), None, "known, in another case");
        assert_eq!(nearest("gpu-clock", ids), Some("gpu.clocks"));
        assert_eq!(nearest("zzzz", ids), None);
        assert_eq!(
            nearest("igx", ["igx-orin", "dgx-spark", "generic-dgpu"]),
            Some("igx-orin")
        );
        assert_eq!(
            nearest("log_levl", ["log_level", "cores"]),
            Some("log_level")
        );
        assert_eq!(nearest("adress", ["address", "name"]), Some("address"));
        assert_eq!(hint("x", ["check"]), "");
    }
}
