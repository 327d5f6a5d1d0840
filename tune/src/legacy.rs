//! tune_system.py's spellings (`--check mrrs`, `--set mrrs`, `--check schematic`) and the
//! `selftest rdma` invocation, whose flags belong to the RDMA helper: both are rewritten or
//! split off before clap sees the command line.

use crate::cli::GlobalArgs;

/// Recognises `daqtune [GLOBAL...] selftest rdma [ARGS...]` (the RDMA engine's flags are its
/// own, see `rdma_cmd::RdmaArgs`) and splits off the global options, wherever they stand.
/// `--root` also comes from `DAQTUNE_ROOT`, as for every other command.
pub fn split_rdma_invocation(argv: &[String]) -> Option<(GlobalArgs, Vec<String>)> {
    let mut g = GlobalArgs::default();
    let mut words = Vec::new();
    let mut it = argv.iter().skip(1);
    while let Some(a) = it.next() {
        if let Some(v) = a.strip_prefix("--root=") {
            g.root = Some(v.into());
        } else if let Some(v) = a.strip_prefix("--profile=") {
            g.profile = Some(v.to_string());
        } else if a == "--root" {
            g.root = it.next().map(Into::into);
        } else if a == "--profile" || a == "-p" {
            g.profile = it.next().cloned();
        } else if a == "--no-cache" {
            g.no_cache = true;
        } else {
            words.push(a.clone());
        }
    }
    // The environment (DAQTUNE_ROOT, DAQTUNE_PROFILE) as for every other command.
    (words.first().map(String::as_str) == Some("selftest")
        && words.get(1).map(String::as_str) == Some("rdma"))
    .then(|| (g.over(&GlobalArgs::default()), words.split_off(2)))
}

/// How many words after the program name are global options (`--root X`, `-p P`,
/// `--profile=P`, `--no-cache`): tune_system.py's flag may follow them.
fn leading_globals(args: &[String]) -> usize {
    let mut i = 1;
    while let Some(a) = args.get(i) {
        if a == "--root" || a == "--profile" || a == "-p" {
            i += 2;
        } else if a.starts_with("--root=") || a.starts_with("--profile=") || a == "--no-cache" {
            i += 1;
        } else {
            break;
        }
    }
    i.min(args.len()) - 1
}

/// Rewrite tune_system.py's flags into subcommands before clap sees them; global options
/// before the flag (`daqtune --root X --check mrrs`) stay in front of the subcommand.
pub fn translate_legacy(args: Vec<String>) -> Vec<String> {
    let n = leading_globals(&args);
    if n == 0 {
        return translate_first(args);
    }
    let globals: Vec<String> = args[1..=n].to_vec();
    let mut rest = vec![args[0].clone()];
    rest.extend_from_slice(&args[n + 1..]);
    let translated = translate_first(rest.clone());
    if translated == rest {
        return args;
    }
    let mut out = vec![args[0].clone()];
    out.extend(globals);
    out.extend_from_slice(&translated[1..]);
    out
}

fn translate_first(args: Vec<String>) -> Vec<String> {
    let Some(first) = args.get(1) else {
        return args;
    };
    // tune_system.py's check names are the registry's aliases (`Tunable::aliases`); a name
    // it does not know is passed on for `check` to refuse with the list of ids.
    let map_check = |name: &str| -> Vec<String> {
        if name == "all" {
            return vec![];
        }
        match daqtune_engine::tunables::find(name) {
            Some(t) => vec![t.id.to_string()],
            None => vec![name.to_string()],
        }
    };
    let mut rest: Vec<String> = args[2..].to_vec();
    let value_of = |flag: &str, inline: Option<&str>, rest: &mut Vec<String>| -> Option<String> {
        if let Some(v) = inline {
            return Some(v.to_string());
        }
        let _ = flag;
        if rest.is_empty() {
            None
        } else {
            Some(rest.remove(0))
        }
    };
    let (flag, inline) = match first.split_once('=') {
        Some((f, v)) => (f.to_string(), Some(v.to_string())),
        None => (first.clone(), None),
    };
    match flag.as_str() {
        "--check" => {
            let Some(name) = value_of("--check", inline.as_deref(), &mut rest) else {
                return args;
            };
            if name == "schematic" {
                let mut out = vec![args[0].clone(), "topo".into()];
                let mut it = rest.into_iter();
                while let Some(a) = it.next() {
                    if a == "--schematic-output" {
                        out.push("--svg".into());
                        if let Some(v) = it.next() {
                            out.push(v);
                        }
                    } else if let Some(v) = a.strip_prefix("--schematic-output=") {
                        out.push(format!("--svg={v}"));
                    } else {
                        out.push(a);
                    }
                }
                return out;
            }
            let mut out = vec![args[0].clone(), "check".into()];
            out.extend(map_check(&name));
            out.extend(rest);
            out
        }
        "--set" => {
            let Some(name) = value_of("--set", inline.as_deref(), &mut rest) else {
                return args;
            };
            let mut out = vec![args[0].clone(), "apply".into(), "--only".into()];
            out.extend(map_check(&name));
            out.extend(rest);
            out
        }
        _ => args,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn rdma_invocation_with_globals_anywhere() {
        let (g, rest) =
            split_rdma_invocation(&argv("daqtune --profile igx-orin selftest rdma --dev rxe0"))
                .expect("rdma");
        assert_eq!(g.profile.as_deref(), Some("igx-orin"));
        assert_eq!(rest, argv("--dev rxe0"));
        let (g, rest) = split_rdma_invocation(&argv(
            "daqtune selftest rdma --tx-if a -p dgx-spark --rx-if b --root=/r",
        ))
        .expect("rdma");
        assert_eq!(g.profile.as_deref(), Some("dgx-spark"));
        assert_eq!(g.root.as_deref(), Some(std::path::Path::new("/r")));
        assert_eq!(rest, argv("--tx-if a --rx-if b"));
        assert!(split_rdma_invocation(&argv("daqtune selftest socket --veth")).is_none());
        assert!(split_rdma_invocation(&argv("daqtune --profile x check")).is_none());
        assert!(split_rdma_invocation(&argv("daqtune")).is_none());
    }

    fn v(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn legacy_flags() {
        assert_eq!(
            translate_legacy(v("daqtune --check all")),
            v("daqtune check")
        );
        assert_eq!(
            translate_legacy(v("daqtune --check mrrs")),
            v("daqtune check pcie.mrrs")
        );
        assert_eq!(
            translate_legacy(v("daqtune --check=mtu --format json")),
            v("daqtune check nic.mtu --format json")
        );
        assert_eq!(
            translate_legacy(v("daqtune --set mrrs")),
            v("daqtune apply --only pcie.mrrs")
        );
        assert_eq!(
            translate_legacy(v("daqtune --check schematic --schematic-output x.svg")),
            v("daqtune topo --svg x.svg")
        );
        assert_eq!(translate_legacy(v("daqtune check")), v("daqtune check"));
        assert_eq!(translate_legacy(v("daqtune --check")), v("daqtune --check"));
        // After global options, as tune_system.py users type them.
        assert_eq!(
            translate_legacy(v("daqtune --root X --check mrrs")),
            v("daqtune --root X check pcie.mrrs")
        );
        assert_eq!(
            translate_legacy(v(
                "daqtune --root=X -p igx-orin --no-cache --set mrrs --yes"
            )),
            v("daqtune --root=X -p igx-orin --no-cache apply --only pcie.mrrs --yes")
        );
        assert_eq!(
            translate_legacy(v("daqtune --root X check")),
            v("daqtune --root X check")
        );
        assert_eq!(translate_legacy(v("daqtune --root")), v("daqtune --root"));
        // Every alias of the registry, and nothing else, is rewritten.
        assert_eq!(
            translate_legacy(v("daqtune --set hugepage")),
            v("daqtune apply --only hugepages")
        );
        assert_eq!(
            translate_legacy(v("daqtune --check nope")),
            v("daqtune check nope")
        );
    }
}
