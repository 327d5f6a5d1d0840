//! Property test: for generated grub defaults files, [`grub::evaluate`] gives the same
//! GRUB_CMDLINE_LINUX and GRUB_CMDLINE_LINUX_DEFAULT as `sh` sourcing them in order.

use daqtune_units::grub;
use proptest::prelude::*;
use std::process::Command;

const VARS: &[&str] = &["GRUB_CMDLINE_LINUX", "GRUB_CMDLINE_LINUX_DEFAULT", "X"];

fn word() -> impl Strategy<Value = String> {
    "[a-z0-9_.,=:-]{1,8}"
}

fn var() -> impl Strategy<Value = &'static str> {
    prop::sample::select(VARS)
}

/// One line of a defaults file, in the forms real files use.
fn line() -> impl Strategy<Value = String> {
    prop_oneof![
        (var(), word()).prop_map(|(v, w)| format!("{v}={w}")),
        (var(), var(), word()).prop_map(|(v, r, w)| format!("{v}=\"${r} {w}\"")),
        (var(), var(), word()).prop_map(|(v, r, w)| format!("{v}=\"${{{r}}} {w}\\\\;x\"")),
        (var(), word(), word()).prop_map(|(v, a, b)| format!("{v}='{a}  {b}'")),
        (var(), var(), word()).prop_map(|(v, r, w)| format!("export {v}=\"${r} {w}\" # note")),
        (var(), word(), var()).prop_map(|(v, w, v2)| format!("{v}={w} {v2}=\"${v}\"")),
        word().prop_map(|w| format!("# {w}")),
        (var(), word()).prop_map(|(v, w)| format!("{v}=\"{w} \\\n  cont\"")),
        Just(String::new()),
    ]
}

fn file() -> impl Strategy<Value = String> {
    prop::collection::vec(line(), 0..5).prop_map(|ls| ls.join("\n") + "\n")
}

fn sh_eval(files: &[String]) -> (String, String) {
    let mut script = String::from("set -e\n");
    for (i, _) in files.iter().enumerate() {
        script.push_str(&format!(". ./f{i}\n"));
    }
    script.push_str("printf '%s\\n%s' \"$GRUB_CMDLINE_LINUX\" \"$GRUB_CMDLINE_LINUX_DEFAULT\"");
    let dir = tempfile::tempdir().expect("tmp");
    for (i, t) in files.iter().enumerate() {
        std::fs::write(dir.path().join(format!("f{i}")), t).expect("write");
    }
    let out = Command::new("sh")
        .arg("-c")
        .arg(&script)
        .current_dir(dir.path())
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .output()
        .expect("sh");
    assert!(
        out.status.success(),
        "sh failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = String::from_utf8(out.stdout).expect("utf8");
    let (a, b) = s.split_once('\n').expect("two values");
    (a.into(), b.into())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]
    #[test]
    fn matches_sh(files in prop::collection::vec(file(), 1..4)) {
        let named: Vec<(String, String)> = files.iter().enumerate().map(|(i, t)| (format!("f{i}"), t.clone())).collect();
        let ev = grub::evaluate(&named);
        prop_assert!(ev.unsupported.is_empty(), "{:?}", ev.unsupported);
        let (l, d) = sh_eval(&files);
        prop_assert_eq!(ev.get(grub::CMDLINE), l.as_str());
        prop_assert_eq!(ev.get(grub::CMDLINE_DEFAULT), d.as_str());
    }
}
