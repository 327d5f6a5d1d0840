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

/// The options of the top level (`GlobalArgs`) that take a value.
const GLOBAL_VALUED: [&str; 3] = ["--root", "--profile", "-p"];

/// How many words a top-level option at `args[i]` spans (`--root X`: 2, `--root=X` and
/// `--no-cache`: 1), or 0 when `args[i]` is none.
fn global_len(args: &[String], i: usize) -> usize {
    let a = args[i].as_str();
    if GLOBAL_VALUED.contains(&a) {
        if i + 1 < args.len() {
            2
        } else {
            1
        }
    } else if a.starts_with("--root=")
        || a.starts_with("--profile=")
        || (a.starts_with("-p") && a.len() > 2 && !a.starts_with("--"))
        || a == "--no-cache"
    {
        1
    } else {
        0
    }
}

/// The subcommand names (and `help`), from the command-line definition.
fn subcommands() -> Vec<String> {
    use clap::CommandFactory;
    let cmd = crate::cli::Cli::command();
    let mut names: Vec<String> = cmd
        .get_subcommands()
        .flat_map(|c| {
            std::iter::once(c.get_name().to_string()).chain(c.get_all_aliases().map(String::from))
        })
        .collect();
    names.push("help".into());
    names
}

/// Whether subcommand `sub` takes the long option `long` itself.
fn takes(sub: &str, long: &str) -> bool {
    use clap::CommandFactory;
    crate::cli::Cli::command()
        .find_subcommand(sub)
        .is_some_and(|c| c.get_arguments().any(|a| a.get_long() == Some(long)))
}

/// The long name of a top-level option word (`-p`, `--profile=x` -> `profile`).
fn global_long(word: &str) -> &str {
    let w = word.split_once('=').map_or(word, |(f, _)| f);
    match w {
        "-p" => "profile",
        _ if w.starts_with("-p") && !w.starts_with("--") => "profile",
        _ => w.trim_start_matches('-'),
    }
}

/// Put the command line in the order clap reads: tune_system.py's flags (`--check mrrs`,
/// `--set mrrs`, `--check schematic`) become subcommands; the subcommand's own options given
/// before it (`daqtune -f json check`) move after its name; the host and profile options
/// given after a subcommand that has none of its own (`daqtune topo --profile x`) move in
/// front of it. Global options stay where clap reads them for every command.
pub fn translate_legacy(args: Vec<String>) -> Vec<String> {
    let Some(argv0) = args.first().cloned() else {
        return args;
    };
    let subs = subcommands();
    let mut globals: Vec<String> = Vec::new();
    let mut pre: Vec<String> = Vec::new();
    let mut i = 1;
    let at = loop {
        let Some(a) = args.get(i) else {
            return args;
        };
        if a == "--" {
            return args;
        }
        let n = global_len(&args, i);
        if n > 0 {
            globals.extend_from_slice(&args[i..i + n]);
            i += n;
            continue;
        }
        let flag = a.split_once('=').map_or(a.as_str(), |(f, _)| f);
        if subs.iter().any(|s| s == a) || flag == "--check" || flag == "--set" {
            break i;
        }
        pre.push(a.clone());
        i += 1;
    };
    let word = args[at].clone();
    let mut rest: Vec<String> = args[at + 1..].to_vec();
    let (sub_words, rest) = match translate_flag(&word, &mut rest) {
        Some(t) => (t, rest),
        None if word.starts_with("--") => return args,
        None => (vec![word.clone()], rest),
    };
    let sub = sub_words[0].clone();
    // The subcommand's own words: those given before it, then those after, in order; a
    // top-level option it does not take itself goes to the front.
    let mut own: Vec<String> = Vec::new();
    let words: Vec<String> = pre.into_iter().chain(rest).collect();
    let mut j = 0;
    while j < words.len() {
        if words[j] == "--" {
            own.extend_from_slice(&words[j..]);
            break;
        }
        let n = global_len(&words, j);
        if n > 0 && sub != "help" && !takes(&sub, global_long(&words[j])) {
            globals.extend_from_slice(&words[j..j + n]);
            j += n;
            continue;
        }
        own.push(words[j].clone());
        j += 1;
    }
    let own = if sub == "topo" && word.starts_with("--check") {
        schematic_output(own)
    } else {
        own
    };
    let mut out = vec![argv0];
    out.extend(globals);
    out.extend(sub_words);
    out.extend(own);
    out
}

/// tune_system.py's `--schematic-output FILE` as `topo --svg FILE`; without it the file
/// tune_system.py wrote where no PNG renderer was installed, `pcie_schematic.svg` in the
/// current directory (its default `pcie_schematic.png` became that SVG).
fn schematic_output(words: Vec<String>) -> Vec<String> {
    let mut out = Vec::new();
    let mut given = false;
    let mut it = words.into_iter();
    while let Some(a) = it.next() {
        if a == "--schematic-output" {
            out.push("--svg".into());
            given = true;
            if let Some(v) = it.next() {
                out.push(v);
            }
        } else if let Some(v) = a.strip_prefix("--schematic-output=") {
            out.push(format!("--svg={v}"));
            given = true;
        } else {
            if a == "--svg" || a.starts_with("--svg=") {
                given = true;
            }
            out.push(a);
        }
    }
    if !given {
        out.push("--svg".into());
        out.push(SCHEMATIC_DEFAULT.into());
    }
    out
}

/// Where `--check schematic` draws without `--schematic-output` (see [`schematic_output`]).
pub const SCHEMATIC_DEFAULT: &str = "pcie_schematic.svg";

/// tune_system.py's `--check NAME` / `--set NAME` (`word`, its value inline or first in
/// `rest`) as a subcommand with its words; `None` for any other word.
fn translate_flag(word: &str, rest: &mut Vec<String>) -> Option<Vec<String>> {
    let (flag, inline) = match word.split_once('=') {
        Some((f, v)) => (f, Some(v.to_string())),
        None => (word, None),
    };
    if flag != "--check" && flag != "--set" {
        return None;
    }
    let name = match inline {
        Some(v) => v,
        None if rest.is_empty() => return None,
        None => rest.remove(0),
    };
    // tune_system.py's check names are the registry's aliases (`Tunable::aliases`); a name
    // it does not know is passed on for `check` to refuse with the nearest id.
    let id = |name: &str| match daqtune_engine::tunables::find(name) {
        Some(t) => t.id.to_string(),
        None => name.to_string(),
    };
    Some(match (flag, name.as_str()) {
        ("--check", "schematic") => vec!["topo".into()],
        ("--check", "all") => vec!["check".into()],
        ("--check", n) => vec!["check".into(), id(n)],
        // tune_system.py's `--set` asked nothing: boot scripts run it without a terminal.
        // `--tune-system-set` does not ask either, and makes the change at runtime alone
        // where no daqtune binary is installed to make it again at boot (as tune_system.py
        // did), with a note.
        (_, n) => vec![
            "apply".into(),
            "--only".into(),
            id(n),
            "--tune-system-set".into(),
        ],
    })
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
            v("daqtune apply --only pcie.mrrs --tune-system-set")
        );
        assert_eq!(
            translate_legacy(v("daqtune --check schematic --schematic-output x.svg")),
            v("daqtune topo --svg x.svg")
        );
        // tune_system.py's default name, as the SVG it wrote without a PNG renderer.
        assert_eq!(
            translate_legacy(v("daqtune --check schematic")),
            v("daqtune topo --svg pcie_schematic.svg")
        );
        assert_eq!(
            translate_legacy(v("daqtune --schematic-output=t.svg --check schematic")),
            v("daqtune topo --svg=t.svg")
        );
        assert_eq!(translate_legacy(v("daqtune check")), v("daqtune check"));
        assert_eq!(translate_legacy(v("daqtune --check")), v("daqtune --check"));
        // After global options, as tune_system.py users type them.
        assert_eq!(
            translate_legacy(v("daqtune --root X --check mrrs")),
            v("daqtune --root X check pcie.mrrs")
        );
        assert_eq!(
            translate_legacy(v("daqtune --root=X -p igx-orin --no-cache --set mrrs --yes")),
            v("daqtune --root=X -p igx-orin --no-cache apply --only pcie.mrrs --tune-system-set --yes")
        );
        assert_eq!(
            translate_legacy(v("daqtune --root X check")),
            v("daqtune --root X check")
        );
        assert_eq!(translate_legacy(v("daqtune --root")), v("daqtune --root"));
        // Every alias of the registry, and nothing else, is rewritten.
        assert_eq!(
            translate_legacy(v("daqtune --set hugepage")),
            v("daqtune apply --only hugepages --tune-system-set")
        );
        assert_eq!(
            translate_legacy(v("daqtune --check nope")),
            v("daqtune check nope")
        );
    }

    #[test]
    fn options_on_either_side_of_the_subcommand() {
        // The subcommand's own options before its name move after it.
        assert_eq!(
            translate_legacy(v("daqtune -f json --root X check nic.mtu")),
            v("daqtune --root X check -f json nic.mtu")
        );
        assert_eq!(
            translate_legacy(v("daqtune -f json -v check")),
            v("daqtune check -f json -v")
        );
        // Host and profile options after a subcommand that has none of its own go in front.
        assert_eq!(
            translate_legacy(v("daqtune topo -f json --profile igx-orin --no-cache")),
            v("daqtune --profile igx-orin --no-cache topo -f json")
        );
        assert_eq!(
            translate_legacy(v("daqtune check --profile igx-orin")),
            v("daqtune check --profile igx-orin")
        );
        assert_eq!(
            translate_legacy(v("daqtune --version")),
            v("daqtune --version")
        );
        assert_eq!(
            translate_legacy(v("daqtune explain -- --root")),
            v("daqtune explain -- --root")
        );
    }
}
