//! The fleet outputs on every fixture root, checked the way their consumers read them:
//! the NFD feature file against Kubernetes' label rules and NFD's parser (expiry directive),
//! the node_exporter textfile with `promtool check metrics`, `plan --format json`, the
//! systemd units with `systemd-analyze verify`, /etc/default/daqtune driving `report`, and
//! the Kubernetes DaemonSet's own command line run against a fixture standing in for /host.

use crate::fleet_support;

use crate::testroot;

use fleet_support::*;
use serde_yaml_ng::Value as Yaml;
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

// ---------------------------------------------------------------------------------------
// Kubernetes label rules and NFD's feature-file parser, written here from their definitions
// (apimachinery's IsQualifiedName / IsValidLabelValue, NFD's source/local), independently of
// the renderer's own validation.

fn alnum(c: char) -> bool {
    c.is_ascii_alphanumeric()
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, at most 63.
fn qualified_name_part(s: &str) -> bool {
    let c: Vec<char> = s.chars().collect();
    !c.is_empty()
        && c.len() <= 63
        && alnum(c[0])
        && alnum(c[c.len() - 1])
        && c.iter()
            .all(|&x| alnum(x) || x == '-' || x == '_' || x == '.')
}

/// DNS-1123 subdomain: `[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*`, ≤ 253.
fn dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253
        && !s.is_empty()
        && s.split('.').all(|l| {
            let c: Vec<char> = l.chars().collect();
            let ok = |x: char| x.is_ascii_lowercase() || x.is_ascii_digit();
            !c.is_empty() && ok(c[0]) && ok(c[c.len() - 1]) && c.iter().all(|&x| ok(x) || x == '-')
        })
}

/// A label key with the prefix NFD requires of feature-file labels (Kubernetes itself also
/// allows a bare name).
fn k8s_label_key(k: &str) -> bool {
    match k.split_once('/') {
        Some((prefix, name)) => dns1123_subdomain(prefix) && qualified_name_part(name),
        None => false,
    }
}

fn k8s_label_value(v: &str) -> bool {
    v.is_empty() || qualified_name_part(v)
}

/// `YYYY-MM-DDTHH:MM:SSZ` to seconds since the epoch (the form daqtune writes; NFD takes
/// any RFC 3339).
fn parse_rfc3339_utc(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() != 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[19] != b'Z' {
        return None;
    }
    let n = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, m, d) = (n(0..4)?, n(5..7)?, n(8..10)?);
    let (hh, mm, ss) = (n(11..13)?, n(14..16)?, n(17..19)?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    let y2 = if m <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
    Some(days * 86_400 + hh * 3600 + mm * 60 + ss)
}

/// One label as NFD's local source sees it: key, value and the expiry in force.
#[derive(Debug)]
struct NfdLabel {
    key: String,
    value: String,
    expiry: Option<i64>,
}

/// NFD's parseFeatureFile: trimmed lines; `#` lines are comments, `# +KEY=VALUE` directives
/// (unknown ones are errors there, so here too); `key[=value]`, value `true` when absent.
fn parse_nfd(text: &str) -> Result<Vec<NfdLabel>, String> {
    if text.len() > 65_536 {
        return Err("over NFD's 64 KiB limit: the file would be ignored".into());
    }
    let mut expiry = None;
    let mut out = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(directive) = line.strip_prefix("# +") {
            let (k, v) = directive.split_once('=').unwrap_or((directive, ""));
            match k {
                "expiry-time" => {
                    expiry =
                        Some(parse_rfc3339_utc(v.trim()).ok_or(format!("bad expiry-time `{v}`"))?)
                }
                "no-label" | "no-feature" => return Err(format!("unexpected `{line}`")),
                _ => return Err(format!("unknown directive `{line}`")),
            }
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        let (k, v) = line.split_once('=').unwrap_or((line, "true"));
        out.push(NfdLabel {
            key: k.into(),
            value: v.into(),
            expiry,
        });
    }
    Ok(out)
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs() as i64
}

const NFD_KEYS: [&str; 6] = [
    "daqtune.feature.node.kubernetes.io/profile",
    "daqtune.feature.node.kubernetes.io/gate",
    "daqtune.feature.node.kubernetes.io/pending-reboot",
    "daqtune.feature.node.kubernetes.io/gpudirect",
    "daqtune.feature.node.kubernetes.io/hugepages",
    "daqtune.feature.node.kubernetes.io/cores-isolated",
];

/// Every rule a feature file must meet; `expiry_secs` after a run that ended in
/// [`t0`, `t1`].
fn assert_nfd_file(text: &str, what: &str, t0: i64, t1: i64, expiry_secs: i64) {
    let labels = parse_nfd(text).unwrap_or_else(|e| panic!("{what}: {e}\n{text}"));
    let keys: Vec<&str> = labels.iter().map(|l| l.key.as_str()).collect();
    assert_eq!(
        keys[..NFD_KEYS.len().min(keys.len())],
        NFD_KEYS,
        "{what}: the stable label set\n{text}"
    );
    // After it, only platform limits (`limit.<check id>`, docs/fleet.md), one per check.
    let limits = &keys[NFD_KEYS.len()..];
    assert!(
        limits
            .iter()
            .all(|k| k.starts_with("daqtune.feature.node.kubernetes.io/limit.")),
        "{what}: {limits:?}\n{text}"
    );
    let mut unique = limits.to_vec();
    unique.dedup();
    assert_eq!(unique.len(), limits.len(), "{what}: {limits:?}");
    for l in &labels {
        assert!(k8s_label_key(&l.key), "{what}: key `{}`", l.key);
        assert!(
            k8s_label_value(&l.value),
            "{what}: value `{}` of {}",
            l.value,
            l.key
        );
        let e = l
            .expiry
            .unwrap_or_else(|| panic!("{what}: {} has no expiry-time before it", l.key));
        assert!(
            (t0 + expiry_secs..=t1 + expiry_secs).contains(&e),
            "{what}: expiry {e} not {expiry_secs}s after the run ({t0}..{t1})"
        );
        let name = l.key.rsplit('/').next().unwrap_or("");
        let allowed: &[&str] = match name {
            "profile" => &[],
            // A platform limit's values (`128`, `128_256`): checked as label values above.
            _ if name.starts_with("limit.") => &[],
            "gate" => &["pass", "fail"],
            "pending-reboot" => &["true", "false"],
            _ => &["true", "false", "unknown", "na"],
        };
        assert!(
            allowed.is_empty() || allowed.contains(&l.value.as_str()),
            "{what}: {}={}",
            l.key,
            l.value
        );
    }
}

#[test]
fn k8s_rules_of_this_test_reject_what_kubernetes_rejects() {
    // The validator above must be able to fail, or the fixture test proves nothing.
    for bad in [
        "noprefix=x",
        "Upper.example/x",
        "a/-x",
        "a/x-",
        "a/",
        "a..b/x",
        "a/b/c",
    ] {
        let k = bad.split('=').next().unwrap_or(bad);
        assert!(!k8s_label_key(k), "{k}");
    }
    assert!(!k8s_label_key(&format!("a/{}", "x".repeat(64))));
    assert!(k8s_label_key(&format!("a/{}", "x".repeat(63))));
    assert!(!k8s_label_value("a b") && !k8s_label_value("-a") && !k8s_label_value("é"));
    assert!(!k8s_label_value(&"x".repeat(64)));
    assert!(parse_nfd("a/b=c\n# +bogus=1\n").is_err());
    assert_eq!(
        parse_rfc3339_utc("2023-11-14T22:13:20Z"),
        Some(1_700_000_000)
    );
    assert_eq!(parse_rfc3339_utc("2023-11-14 22:13:20"), None);
    let l = parse_nfd("x/a\n# +expiry-time=2000-01-01T00:00:00Z\nx/b=1\n").expect("parse");
    assert_eq!((l[0].value.as_str(), l[0].expiry), ("true", None));
    assert_eq!(l[1].expiry, Some(946_684_800));
}

#[test]
fn nfd_feature_file_for_every_fixture_root() {
    for root in fixture_roots() {
        let name = root.file_name().unwrap_or_default().to_string_lossy();
        let d = tempfile::tempdir().expect("tmp");
        let out = d.path().join("features.d/daqtune");
        let t0 = now();
        let o = daqtune(&[
            "check",
            "--root",
            root.to_str().expect("utf8"),
            "--format",
            "nfd",
            "--nfd-expiry",
            "90m",
            "-o",
            out.to_str().expect("utf8"),
        ]);
        let t1 = now();
        assert!(
            matches!(o.status.code(), Some(0 | 1)),
            "{name}: {}",
            text(&o)
        );
        assert!(o.stdout.is_empty(), "{name}: -o prints nothing");
        let body = read(&out);
        assert_nfd_file(&body, &name, t0, t1, 5400);
        // The gate label is the exit status of the same run.
        let gate = if o.status.code() == Some(0) {
            "pass"
        } else {
            "fail"
        };
        assert!(
            body.contains(&format!("kubernetes.io/gate={gate}\n")),
            "{name}"
        );
        let mode = std::fs::metadata(&out).expect("meta").permissions().mode() & 0o7777;
        assert_eq!(mode, 0o644, "{name}");
        let entries: Vec<_> = std::fs::read_dir(out.parent().expect("dir"))
            .expect("ls")
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(entries.len(), 1, "{name}: no temp file left: {entries:?}");
    }
}

#[test]
fn nfd_profile_label_of_a_badly_named_profile_is_valid() {
    let d = tempfile::tempdir().expect("tmp");
    let prof = d.path().join("weird.yaml");
    std::fs::write(
        &prof,
        "name: \"-Lab profile/v2 (Ärzte) for the 3rd floor, rack 12, which has a name far longer than sixty-three characters-\"\nextends: generic-dgpu\n",
    )
    .expect("write");
    let out = d.path().join("daqtune");
    let (t0, o, t1) = (
        now(),
        daqtune(&[
            "check",
            "--root",
            fixtures().join("x86-2s").to_str().expect("utf8"),
            "--profile",
            prof.to_str().expect("utf8"),
            "--format",
            "nfd",
            "-o",
            out.to_str().expect("utf8"),
        ]),
        now(),
    );
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", text(&o));
    let body = read(&out);
    assert_nfd_file(&body, "weird profile", t0, t1, 3600);
    assert!(
        body.contains("/profile=Lab-profile-v2---rzte--for-the-3rd-floor--rack-12--which-has-a\n"),
        "{body}"
    );
}

// ---------------------------------------------------------------------------------------
// Prometheus textfile.

/// One sample line: name, labels, value. Panics on anything the text format does not allow
/// or the textfile collector refuses (a timestamp).
fn parse_sample(line: &str) -> (String, Vec<(String, String)>, f64) {
    let name_end = line
        .find(['{', ' '])
        .unwrap_or_else(|| panic!("no value: {line}"));
    let name = &line[..name_end];
    assert!(
        name.starts_with("daqtune_") && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
        "metric name `{name}`"
    );
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(r) = rest.strip_prefix('{') {
        let (l, after) = parse_labels(r, line);
        labels = l;
        rest = after;
    }
    let fields: Vec<&str> = rest.split_whitespace().collect();
    assert_eq!(
        fields.len(),
        1,
        "exactly one value and no timestamp: {line}"
    );
    let v: f64 = fields[0]
        .parse()
        .unwrap_or_else(|_| panic!("value of {line}"));
    (name.to_string(), labels, v)
}

/// `name="value",...}`: the labels up to the closing brace, and what follows it.
fn parse_labels<'a>(s: &'a str, line: &str) -> (Vec<(String, String)>, &'a str) {
    let mut labels = Vec::new();
    let mut i = 0;
    loop {
        let eq = s[i..]
            .find("=\"")
            .unwrap_or_else(|| panic!("label in {line}"))
            + i;
        let lname = s[i..eq].to_string();
        assert!(
            !lname.is_empty() && lname.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "label name `{lname}` in {line}"
        );
        let mut j = eq + 2;
        let mut value = String::new();
        loop {
            let c = s[j..]
                .chars()
                .next()
                .unwrap_or_else(|| panic!("unterminated: {line}"));
            j += c.len_utf8();
            match c {
                '"' => break,
                '\\' => {
                    let e = s[j..].chars().next().expect("escape");
                    j += e.len_utf8();
                    value.push(match e {
                        'n' => '\n',
                        '\\' => '\\',
                        '"' => '"',
                        other => panic!("bad escape \\{other} in {line}"),
                    });
                }
                c => value.push(c),
            }
        }
        labels.push((lname, value));
        match &s[j..j + 1] {
            "," => i = j + 1,
            "}" => return (labels, &s[j + 1..]),
            other => panic!("`{other}` after a label value in {line}"),
        }
    }
}

/// One sample's labels and value.
type Sample = (Vec<(String, String)>, f64);

/// Structure the textfile collector needs, and the metric design of docs/fleet.md.
fn assert_textfile(body: &str, what: &str, verdicts: usize, gate_passed: bool) {
    let mut help = BTreeSet::new();
    let mut types = BTreeMap::new();
    let mut samples: BTreeMap<String, Vec<Sample>> = BTreeMap::new();
    let mut series = BTreeSet::new();
    for line in body.lines() {
        if let Some(h) = line.strip_prefix("# HELP ") {
            let name = h.split(' ').next().expect("name").to_string();
            assert!(help.insert(name.clone()), "{what}: two HELP for {name}");
            assert!(!samples.contains_key(&name), "{what}: HELP after samples");
        } else if let Some(t) = line.strip_prefix("# TYPE ") {
            let (name, ty) = t.split_once(' ').expect("type");
            assert!(
                types.insert(name.to_string(), ty.to_string()).is_none(),
                "{what}: two TYPE for {name}"
            );
            assert_eq!(ty, "gauge", "{what}: {name}");
        } else {
            assert!(!line.starts_with('#'), "{what}: stray comment {line}");
            let (name, labels, v) = parse_sample(line);
            assert!(types.contains_key(&name), "{what}: {name} before its TYPE");
            assert!(
                series.insert(format!("{name}{labels:?}")),
                "{what}: duplicate series {line}"
            );
            samples.entry(name).or_default().push((labels, v));
        }
    }
    assert_eq!(
        help,
        types.keys().cloned().collect::<BTreeSet<_>>(),
        "{what}"
    );
    let one = |n: &str| -> f64 {
        let s = &samples[n];
        assert_eq!(s.len(), 1, "{what}: {n}");
        s[0].1
    };
    assert_eq!(
        samples["daqtune_check_status"].len(),
        verdicts,
        "{what}: one series per verdict"
    );
    for (labels, v) in &samples["daqtune_check_status"] {
        let names: Vec<&str> = labels.iter().map(|l| l.0.as_str()).collect();
        assert_eq!(names, ["id", "subject", "status"], "{what}");
        assert_eq!(*v, 1.0);
    }
    assert_eq!(samples["daqtune_verdicts"].len(), 7, "{what}");
    let total: f64 = samples["daqtune_verdicts"].iter().map(|s| s.1).sum();
    assert_eq!(total as usize, verdicts, "{what}");
    assert_eq!(one("daqtune_gate_passed"), f64::from(u8::from(gate_passed)));
    assert!([0.0, 1.0].contains(&one("daqtune_pending_reboot")));
    assert!(one("daqtune_run_duration_seconds") >= 0.0);
    let ts = one("daqtune_last_run_timestamp_seconds");
    assert!((ts - now() as f64).abs() < 600.0, "{what}: run time {ts}");
    assert_eq!(samples["daqtune_capability"].len(), 3, "{what}");
    assert_eq!(samples["daqtune_profile_info"].len(), 1, "{what}");
}

fn promtool_check(promtool: &Path, file: &Path) -> std::process::Output {
    Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(std::fs::File::open(file).expect("open"))
        .output()
        .expect("run promtool")
}

#[test]
fn prometheus_textfile_for_every_fixture_root_passes_promtool() {
    let promtool = tool("promtool", "prometheus");
    if let Err(why) = &promtool {
        skip(
            "promtool check metrics (the structural checks still run)",
            why,
        );
    }
    let d = tempfile::tempdir().expect("tmp");
    if let Ok(p) = &promtool {
        // promtool must be able to fail: a gauge named like a counter, a metric without HELP.
        let bad = d.path().join("bad.prom");
        std::fs::write(
            &bad,
            "# HELP daqtune_x_total x\n# TYPE daqtune_x_total gauge\ndaqtune_x_total 1\ndaqtune_y 2\n",
        )
        .expect("write");
        let o = promtool_check(p, &bad);
        assert!(!o.status.success(), "promtool accepted a bad file");
    }
    for root in fixture_roots() {
        let name = root.file_name().unwrap_or_default().to_string_lossy();
        let rs = root.to_str().expect("utf8");
        let prom = d.path().join(format!("{name}.prom"));
        let o = daqtune(&[
            "check",
            "--root",
            rs,
            "--format",
            "prometheus",
            "-o",
            prom.to_str().expect("utf8"),
        ]);
        assert!(
            matches!(o.status.code(), Some(0 | 1)),
            "{name}: {}",
            text(&o)
        );
        let j = daqtune(&["check", "--root", rs, "--format", "json"]);
        let rep: serde_json::Value = serde_json::from_slice(&j.stdout).expect("json");
        let verdicts = rep["checks"].as_array().expect("checks").len();
        let body = read(&prom);
        assert_textfile(&body, &name, verdicts, o.status.code() == Some(0));
        if let Ok(p) = &promtool {
            let out = promtool_check(p, &prom);
            assert!(
                out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
                "{name}: promtool check metrics: {}",
                text(&out)
            );
        }
    }
}

#[test]
fn textfile_escapes_label_values_promtool_parses_them() {
    // A subject with a quote, a backslash and a line feed (a profile can name interfaces).
    let d = tempfile::tempdir().expect("tmp");
    let prof = d.path().join("p.yaml");
    std::fs::write(
        &prof,
        "name: \"quote\\\" back\\\\slash\"\nextends: generic-dgpu\n",
    )
    .expect("write");
    let prom = d.path().join("daqtune.prom");
    let o = daqtune(&[
        "check",
        "--root",
        fixtures().join("spark").to_str().expect("utf8"),
        "--profile",
        prof.to_str().expect("utf8"),
        "--format",
        "prometheus",
        "-o",
        prom.to_str().expect("utf8"),
    ]);
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", text(&o));
    let body = read(&prom);
    assert!(
        body.contains(
            "daqtune_profile_info{profile=\"quote\\\" back\\\\slash\",source=\"given\"} 1\n"
        ),
        "{body}"
    );
    for line in body.lines().filter(|l| !l.starts_with('#')) {
        parse_sample(line);
    }
    match tool("promtool", "prometheus") {
        Ok(p) => {
            let out = promtool_check(&p, &prom);
            assert!(out.status.success(), "{}", text(&out));
        }
        Err(why) => skip("promtool", &why),
    }
}

// ---------------------------------------------------------------------------------------
// -o, plan --format json.

#[test]
fn output_file_replaces_atomically_with_mode_0644_and_devices_are_written_in_place() {
    let d = tempfile::tempdir().expect("tmp");
    let f = d.path().join("daqtune.fact");
    std::fs::write(&f, "old").expect("write");
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let root = fixtures().join("igx-tuned");
    let rs = root.to_str().expect("utf8");
    let o = daqtune(&[
        "check",
        "--root",
        rs,
        "--format",
        "json",
        "-o",
        f.to_str().expect("utf8"),
    ]);
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", text(&o));
    let rep: serde_json::Value = serde_json::from_str(&read(&f)).expect("json facts");
    assert_eq!(rep["schema"], "daqtune.report/v1");
    assert!(rep["run"]["gate"]["passed"].is_boolean());
    assert!(rep["run"]["finished_at"]
        .as_str()
        .is_some_and(|s| s.ends_with('Z')));
    assert!(rep["run"]["capabilities"]["gpudirect"].is_string());
    assert_eq!(
        std::fs::metadata(&f).expect("meta").permissions().mode() & 0o7777,
        0o644
    );
    // `--junit /dev/stdout` writes to the device; a rename would have replaced it.
    let o = daqtune(&[
        "check",
        "--root",
        rs,
        "--format",
        "nfd",
        "--junit",
        "/dev/stdout",
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("daqtune.feature.node.kubernetes.io/gate="),
        "{out}"
    );
    assert!(out.contains("<testsuites name=\"daqtune\""), "{out}");
}

#[test]
fn plan_json_names_changes_then_none_after_apply() {
    let d = tempfile::tempdir().expect("tmp");
    let root = d.path().join("root");
    testroot::copy_tree(&fixtures().join("igx-untuned"), &root);
    install_stub(&root);
    let rs = root.to_str().expect("utf8");
    let plan = |extra: &[&str]| {
        let mut args = vec![
            "plan",
            "--root",
            rs,
            "--profile",
            "igx-orin",
            "--format",
            "json",
        ];
        args.extend_from_slice(extra);
        let o = daqtune(&args);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        o
    };
    let o = plan(&[]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("plan json");
    assert_eq!(v["schema"], "daqtune.plan/v1");
    assert_eq!(v["target"], "root");
    let changes = v["changes"].as_array().expect("changes");
    assert!(changes.len() > 3, "{v:#}");
    for c in changes {
        assert!(
            c["check"].is_string() && c["action"]["kind"].is_string(),
            "{c}"
        );
    }
    assert!(v["reboot_needed"]
        .as_array()
        .is_some_and(|r| r.iter().any(|x| x == "kernel.cmdline")));
    let file = d.path().join("plan.json");
    let o2 = plan(&["-o", file.to_str().expect("utf8")]);
    assert!(o2.stdout.is_empty());
    assert_eq!(
        read(&file).as_bytes(),
        o.stdout.as_slice(),
        "-o holds what stdout had"
    );
    let a = daqtune(&["apply", "--root", rs, "--profile", "igx-orin", "--yes"]);
    assert_eq!(a.status.code(), Some(0), "{}", text(&a));
    let v: serde_json::Value = serde_json::from_slice(&plan(&[]).stdout).expect("json");
    assert_eq!(v["changes"], serde_json::json!([]), "{v:#}");
    assert_eq!(v["reboot_needed"], serde_json::json!([]));
}

// ---------------------------------------------------------------------------------------
// systemd timer and service, /etc/default/daqtune.

fn deploy() -> PathBuf {
    repo().join("deploy")
}

#[test]
fn report_units_pass_systemd_analyze_verify_and_run_no_shell() {
    let service = read(&deploy().join("systemd/daqtune-report.service"));
    let timer = read(&deploy().join("systemd/daqtune-report.timer"));
    let exec: Vec<&str> = service
        .lines()
        .filter(|l| l.starts_with("ExecStart"))
        .collect();
    assert_eq!(
        exec,
        ["ExecStart=/usr/bin/daqtune report"],
        "no shell, no $VAR"
    );
    assert!(service.contains("\nEnvironmentFile=-/etc/default/daqtune\n"));
    assert!(timer.contains("\n[Install]\nWantedBy=timers.target\n"));
    let analyze = match tool("systemd-analyze", "systemd") {
        Ok(p) => p,
        Err(why) => return skip("systemd-analyze verify", &why),
    };
    let d = tempfile::tempdir().expect("tmp");
    let exe = d.path().join("bin/daqtune");
    std::fs::create_dir_all(exe.parent().expect("p")).expect("mkdir");
    std::fs::write(&exe, "#!/bin/sh\nexit 0\n").expect("write");
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let units = d.path().join("units");
    std::fs::create_dir_all(&units).expect("mkdir");
    let exe_s = exe.to_str().expect("utf8");
    let mut files = Vec::new();
    for (name, body) in [
        ("daqtune-report.service", &service),
        ("daqtune-report.timer", &timer),
    ] {
        let p = units.join(name);
        std::fs::write(&p, body.replace("/usr/bin/daqtune", exe_s)).expect("write");
        files.push(p);
    }
    let verify = |files: &[PathBuf]| {
        Command::new(&analyze)
            .args(["verify", "--man=no"])
            .args(files)
            .env("SYSTEMD_LOG_LEVEL", "warning")
            .output()
            .expect("systemd-analyze")
    };
    let out = verify(&files);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("Failed to initialize manager")
        || stderr.contains("Failed to setup working directory")
    {
        return skip("systemd-analyze verify", "cannot start a manager here");
    }
    assert!(out.status.success(), "{stderr}");
    let ours: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("daqtune-report"))
        .collect();
    assert!(ours.is_empty(), "systemd-analyze warned: {ours:#?}");
    // The same check flags a broken unit, or it proves nothing.
    std::fs::write(
        &files[0],
        service.replace("/usr/bin/daqtune", exe_s) + "ProtectSytem=strict\n",
    )
    .expect("write");
    let out = verify(&files);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("ProtectSytem"),
        "{}",
        text(&out)
    );
}

#[test]
fn default_file_drives_report_through_the_environment() {
    let default = read(&deploy().join("default/daqtune"));
    // clap wraps its help: compare with whitespace collapsed.
    let help = text(&daqtune(&["report", "--help"]))
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let d = tempfile::tempdir().expect("tmp");
    let mut env: Vec<(String, String)> = Vec::new();
    // Every setting, uncommented, as systemd's EnvironmentFile would pass it; outputs moved
    // into the temporary directory.
    for line in default.lines() {
        let Some(assign) = line.strip_prefix('#').filter(|l| l.starts_with("DAQTUNE_")) else {
            assert!(
                line.is_empty() || line.starts_with("# ") || line == "#",
                "not a comment or setting: {line}"
            );
            continue;
        };
        let (k, v) = assign.split_once('=').expect("KEY=value");
        assert!(
            k == "DAQTUNE_PROFILE" || help.contains(&format!("env: {k}=")),
            "{k} is not a setting of `daqtune report`"
        );
        assert!(!v.contains(['"', '\'', '$', ' ']), "plain value: {line}");
        let v = match k {
            "DAQTUNE_REPORT_CONFIG" => repo()
                .join("tests/configs/rdma_igx.yaml")
                .display()
                .to_string(),
            k if v.starts_with('/') => d
                .path()
                .join(k.to_lowercase())
                .join(Path::new(v).file_name().expect("name"))
                .display()
                .to_string(),
            _ => v.to_string(),
        };
        env.push((k.to_string(), v));
    }
    let keys: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
    for k in [
        "DAQTUNE_PROFILE",
        "DAQTUNE_REPORT_PROMETHEUS",
        "DAQTUNE_REPORT_NFD",
        "DAQTUNE_REPORT_JSON",
        "DAQTUNE_REPORT_JUNIT",
    ] {
        assert!(keys.contains(&k), "{k} documented in /etc/default/daqtune");
    }
    let run = |env: &[(String, String)]| {
        Command::new(bin())
            .arg("report")
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("DAQTUNE_ROOT", fixtures().join("igx-tuned"))
            .envs(env.iter().map(|(k, v)| (k, v)))
            .output()
            .expect("daqtune report")
    };
    let o = run(&env);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    for (k, v) in &env {
        if k.starts_with("DAQTUNE_REPORT_") && v.starts_with(d.path().to_str().expect("utf8")) {
            let p = Path::new(v);
            let body = read(p);
            assert!(!body.is_empty(), "{k}");
            assert_eq!(
                std::fs::metadata(p).expect("meta").permissions().mode() & 0o7777,
                0o644
            );
        }
    }
    let facts: serde_json::Value =
        serde_json::from_str(&read(&d.path().join("daqtune_report_json/daqtune.fact")))
            .expect("facts json");
    assert_eq!(facts["profile"], "igx-orin");
    assert!(facts["run"]["gate"]["required_checks"] == true);
    // The DAQIRI configuration was used: app.* verdicts are there.
    assert!(facts["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .any(|c| c["id"].as_str().is_some_and(|i| i.starts_with("app."))));
    // Every output empty (the shipped file, all commented): a clear usage error.
    let none: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| {
            let v = if k.starts_with("DAQTUNE_REPORT_") && v.starts_with('/') {
                String::new()
            } else {
                v.clone()
            };
            (k.clone(), v)
        })
        .collect();
    let o = run(&none);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("nothing to write"), "{}", text(&o));
}

// ---------------------------------------------------------------------------------------
// Kubernetes manifests: what the schema cannot say (fleet_tools.rs validates the schema).

fn yaml_docs(p: &Path) -> Vec<Yaml> {
    let body = read(p);
    serde_yaml_ng::Deserializer::from_str(&body)
        .map(|d| {
            serde::Deserialize::deserialize(d).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        })
        .collect()
}

fn s(v: &Yaml) -> &str {
    v.as_str().unwrap_or_default()
}

fn seq(v: &Yaml) -> &[Yaml] {
    v.as_sequence().map(Vec::as_slice).unwrap_or_default()
}

/// hostPath volumes by name: (host path, mounted read-only?) for each mount of the container.
fn host_mounts(pod: &Yaml, container: &Yaml) -> Vec<(String, String, bool)> {
    let hp: BTreeMap<&str, &str> = seq(&pod["volumes"])
        .iter()
        .filter(|v| !v["hostPath"].is_null())
        .map(|v| (s(&v["name"]), s(&v["hostPath"]["path"])))
        .collect();
    seq(&container["volumeMounts"])
        .iter()
        .filter_map(|m| {
            hp.get(s(&m["name"])).map(|h| {
                (
                    h.to_string(),
                    s(&m["mountPath"]).to_string(),
                    m["readOnly"].as_bool() == Some(true),
                )
            })
        })
        .collect()
}

#[test]
fn daemonset_reads_read_only_writes_two_dirs_and_its_command_line_works() {
    let k = deploy().join("kubernetes");
    let ds = &yaml_docs(&k.join("daemonset.yaml"))[0];
    let cm = &yaml_docs(&k.join("configmap.yaml"))[0];
    let pod = &ds["spec"]["template"]["spec"];
    let c = &seq(&pod["containers"])[0];
    let args: Vec<&str> = seq(&c["args"]).iter().map(s).collect();
    let out_dir = |flag: &str| {
        let i = args.iter().position(|a| *a == flag).expect(flag);
        Path::new(args[i + 1])
            .parent()
            .expect("dir")
            .display()
            .to_string()
    };
    let writable = [out_dir("--nfd"), out_dir("--prometheus")];
    let mounts = host_mounts(pod, c);
    for (host, at, ro) in &mounts {
        assert_eq!(
            *ro,
            !writable.contains(at),
            "{host} at {at}: read-only exactly where it only reads"
        );
    }
    let hosts: BTreeMap<&str, &str> = mounts
        .iter()
        .map(|(h, at, _)| (at.as_str(), h.as_str()))
        .collect();
    assert_eq!(
        hosts[writable[0].as_str()],
        "/etc/kubernetes/node-feature-discovery/features.d"
    );
    assert_eq!(hosts["/host/sys"], "/sys");
    assert_eq!(hosts["/host/proc"], "/proc");
    let sc = &c["securityContext"];
    assert_eq!(sc["privileged"].as_bool(), Some(false));
    assert_eq!(sc["allowPrivilegeEscalation"].as_bool(), Some(false));
    assert_eq!(sc["readOnlyRootFilesystem"].as_bool(), Some(true));
    let caps = |k: &str| -> Vec<&str> { seq(&sc["capabilities"][k]).iter().map(s).collect() };
    assert_eq!(caps("drop"), ["ALL"]);
    assert_eq!(caps("add"), ["SYS_ADMIN"]);
    assert_eq!(pod["automountServiceAccountToken"].as_bool(), Some(false));

    // The container's command line, run here: /host is a copy of a fixture, the two output
    // directories are temporary ones, $(VAR) is expanded from the ConfigMap as the kubelet
    // does, and `--once` replaces the period.
    let d = tempfile::tempdir().expect("tmp");
    let host = d.path().join("host");
    testroot::copy_tree(&fixtures().join("igx-tuned"), &host);
    let mut env: BTreeMap<String, String> = BTreeMap::new();
    for e in seq(&c["env"]) {
        let name = s(&e["name"]).to_string();
        if let Some(v) = e["value"].as_str() {
            env.insert(name, v.into());
        } else if !e["valueFrom"]["configMapKeyRef"].is_null() {
            let r = &e["valueFrom"]["configMapKeyRef"];
            assert_eq!(s(&r["name"]), s(&cm["metadata"]["name"]));
            match cm["data"][s(&r["key"])].as_str() {
                Some(v) => {
                    env.insert(name, v.into());
                }
                None => assert_eq!(r["optional"].as_bool(), Some(true), "{name}"),
            }
        }
    }
    let map_path = |a: &str| -> String {
        for (at, local) in [
            (writable[0].as_str(), d.path().join("nfd")),
            (writable[1].as_str(), d.path().join("textfile")),
            ("/host", host.clone()),
        ] {
            if a == at || a.starts_with(&format!("{at}/")) {
                return format!("{}{}", local.display(), &a[at.len()..]);
            }
        }
        a.to_string()
    };
    let argv: Vec<String> = args
        .iter()
        .map(|a| {
            let mut a = a.to_string();
            for (k, v) in &env {
                a = a.replace(&format!("$({k})"), v);
            }
            assert!(!a.contains("$("), "unexpanded {a}");
            map_path(&a)
        })
        .chain(["--once".to_string()])
        .collect();
    let t0 = now();
    let o = Command::new(bin())
        .args(&argv)
        .env_remove("DAQTUNE_ROOT")
        .envs(&env)
        .output()
        .expect("run");
    let t1 = now();
    assert_eq!(o.status.code(), Some(0), "{argv:?}: {}", text(&o));
    let expiry = env
        .get("DAQTUNE_REPORT_NFD_EXPIRY")
        .map(|e| {
            e.strip_suffix('h')
                .and_then(|h| h.parse::<i64>().ok())
                .expect("hours")
                * 3600
        })
        .expect("expiry");
    assert_nfd_file(
        &read(&d.path().join("nfd/daqtune")),
        "daemonset",
        t0,
        t1,
        expiry,
    );
    let prom = read(&d.path().join("textfile/daqtune.prom"));
    assert!(prom.contains("daqtune_gate_passed "), "{prom}");
    // --live-gpu-facts recorded this machine's GPUs (none here) into the host root.
    let facts: serde_json::Value =
        serde_json::from_str(&read(&host.join("daqtune/gpu.json"))).expect("gpu.json");
    assert_eq!(facts["schema"], "daqtune.gpu/v1");
}

#[test]
fn qualify_job_and_kustomization() {
    let k = deploy().join("kubernetes");
    let job = &yaml_docs(&k.join("qualify/job.yaml"))[0];
    let pod = &job["spec"]["template"]["spec"];
    let c = &seq(&pod["containers"])[0];
    let args: Vec<&str> = seq(&c["args"]).iter().map(s).collect();
    assert_eq!(&args[..3], ["qualify", "--level", "2"]);
    assert_eq!(s(&pod["restartPolicy"]), "Never");
    assert_eq!(
        s(&pod["nodeSelector"]["kubernetes.io/hostname"]),
        "NODE-NAME"
    );
    // The qualify command line parses (a typo would fail the Job on the node).
    let o = daqtune(&[&args[..], &["--help"]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    for (host, at, ro) in host_mounts(pod, c) {
        assert_eq!(ro, at != "/results", "{host} at {at}");
    }
    let kust = &yaml_docs(&k.join("kustomization.yaml"))[0];
    let image = s(&seq(&kust["images"])[0]["name"]);
    for r in seq(&kust["resources"]) {
        assert!(k.join(s(r)).is_file(), "{}", s(r));
    }
    for f in ["daemonset.yaml", "qualify/job.yaml"] {
        let doc = &yaml_docs(&k.join(f))[0];
        for c in seq(&doc["spec"]["template"]["spec"]["containers"]) {
            assert_eq!(s(&c["image"]).split(':').next(), Some(image), "{f}");
        }
    }
    let dockerfile = read(&k.join("Dockerfile"));
    assert!(
        dockerfile.contains("ENTRYPOINT [\"/usr/bin/tini\", \"-g\", \"--\", \"/usr/bin/daqtune\"]")
    );
}

#[test]
fn report_interval_runs_children_and_stops_on_a_usage_error() {
    let d = tempfile::tempdir().expect("tmp");
    let prom = d.path().join("daqtune.prom");
    let root = fixtures().join("spark");
    let rs = root.to_str().expect("utf8");
    let ps = prom.to_str().expect("utf8");
    // `--once` (what the loop passes to each child) runs a single report.
    let o = daqtune(&[
        "--root",
        rs,
        "report",
        "--interval",
        "1h",
        "--once",
        "--prometheus",
        ps,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(read(&prom).contains("daqtune_gate_passed "));
    // A child that fails on a usage error ends the loop with it instead of repeating it
    // every period (the DaemonSet's pod then shows the error).
    let o = daqtune(&[
        "--root",
        rs,
        "--profile",
        "no-such-profile",
        "report",
        "--interval",
        "1h",
        "--prometheus",
        ps,
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("no-such-profile"), "{}", text(&o));
    // Nothing to write is refused before any run.
    let o = daqtune(&["--root", rs, "report", "--interval", "1h"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("nothing to write"), "{}", text(&o));
    // --live-gpu-facts needs a root to record into.
    let o = daqtune(&["report", "--live-gpu-facts", "--prometheus", ps]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("needs --root"), "{}", text(&o));
}

/// Issue 46 item 4 (verified again this session): `report`'s cores-isolated label follows
/// the kernel command line's verdict on the Spark and IGX roots: `true` where kernel.cmdline
/// passes (and no NIC interrupt may land on a data core), `false` where it fails. The Spark
/// root once read `unknown` while kernel.cmdline passed (irq.affinity skipped there).
#[test]
fn report_cores_isolated_follows_the_cmdline_verdict() {
    for (name, want) in [
        ("spark", "true"),
        ("igx-tuned", "true"),
        ("igx-untuned", "false"),
    ] {
        let root = fixtures().join(name);
        let d = tempfile::tempdir().expect("tmp");
        let (nfd, json) = (d.path().join("nfd"), d.path().join("r.json"));
        let o = daqtune(&[
            "report",
            "--root",
            root.to_str().expect("utf8"),
            "--nfd",
            nfd.to_str().expect("utf8"),
            "--json",
            json.to_str().expect("utf8"),
        ]);
        assert!(
            matches!(o.status.code(), Some(0 | 1)),
            "{name}: {}",
            text(&o)
        );
        let r: serde_json::Value = serde_json::from_str(&read(&json)).expect("json");
        let cmdline: Vec<&str> = r["checks"]
            .as_array()
            .expect("checks")
            .iter()
            .filter(|v| v["id"] == "kernel.cmdline")
            .filter_map(|v| v["status"].as_str())
            .collect();
        let expect_cmdline = if want == "true" { "pass" } else { "fail" };
        assert_eq!(cmdline, [expect_cmdline], "{name}");
        assert!(
            read(&nfd).contains(&format!("kubernetes.io/cores-isolated={want}\n")),
            "{name}: {}",
            read(&nfd)
        );
        assert_eq!(r["run"]["capabilities"]["cores-isolated"], want, "{name}");
    }
}
