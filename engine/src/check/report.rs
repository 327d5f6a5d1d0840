//! The check report and its machine formats: JSON (`daqtune.report/v1`) and JUnit; the fleet
//! formats (Prometheus textfile, NFD feature file) and `check`'s format dispatch
//! ([`crate::fleet::render`]) are in `crate::fleet`, above this module. Its text is the
//! CLI's (`daqtune-render`).

use crate::check::run_info::RunInfo;
use crate::model::verdict::{Status, Verdict};
use crate::tunables::REGISTRY;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;

pub const SCHEMA: &str = "daqtune.report/v1";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HostInfo {
    pub hostname: Option<String>,
    pub kernel: Option<String>,
    pub arch: Option<String>,
    pub product: Option<String>,
    /// `/` for the live host, else the host root that was read.
    pub root: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    pub schema: String,
    pub daqtune_version: String,
    pub host: HostInfo,
    pub profile: String,
    pub profile_origin: String,
    pub checks: Vec<Verdict>,
    pub summary: BTreeMap<String, usize>,
    /// Required checks that ended in skip or error (they fail a gate).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gate_failures: Vec<String>,
    pub elapsed_ms: u64,
    /// When the run ended, its gate and capabilities (fleet outputs; `check`, `report` and
    /// `qualify` set it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<RunInfo>,
    /// Where this run's GPU facts came from, when it read any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_facts: Option<GpuFactsSource>,
}

impl Report {
    /// The report's run information, or one derived from its verdicts (a report from a
    /// daqtune before `run` existed).
    pub fn run_info(&self) -> RunInfo {
        self.run
            .clone()
            .unwrap_or_else(|| RunInfo::derive(&self.checks, &self.gate_failures))
    }
}

/// Where a run's GPU facts came from: NVML and CUDA on the live host (the CUDA attributes
/// possibly from the per-boot cache, said in `cuda_cache`), or a host root's record.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GpuFactsSource {
    /// `live` or `recorded`.
    pub source: String,
    /// When the facts were gathered (Unix seconds).
    #[serde(default)]
    pub captured_unix: Option<u64>,
    /// The CUDA attribute cache: `hit` (CUDA not initialised), `stored`, `not_stored`,
    /// `bypassed` (`--no-cache`) or `miss`, with the file, when its attributes were read from
    /// CUDA, and why it was not used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_cache: Option<daqtune_probe::gpu::CacheUse>,
    /// Driver start-up and query times of this run.
    pub timing: daqtune_probe::gpu::Timing,
}

impl GpuFactsSource {
    pub fn of(snap: &daqtune_probe::gpu::GpuSnapshot, live: bool) -> Self {
        GpuFactsSource {
            source: if live { "live" } else { "recorded" }.into(),
            captured_unix: snap.captured_unix,
            cuda_cache: snap.cuda_cache.clone().filter(|_| live),
            timing: snap.timing.clone(),
        }
    }

    /// One line for the text report: which facts came from the cache, and when.
    pub fn describe(&self) -> Option<String> {
        use daqtune_probe::gpu::CacheOutcome;
        let c = self.cuda_cache.as_ref()?;
        let when = c
            .taken_unix
            .map(|t| format!(" at {}", daqtune_probe::text::rfc3339_utc(t)))
            .unwrap_or_default();
        let why = c
            .reason
            .as_deref()
            .map(|r| format!(" ({r})"))
            .unwrap_or_default();
        let init = self
            .timing
            .cuda_init_ms
            .map(|ms| format!("cuInit {ms:.0} ms; "))
            .unwrap_or_default();
        Some(match c.outcome {
            CacheOutcome::Hit => format!(
                "GPU facts: NVML live for what moves (names, maxima and thresholds from the cache); CUDA attributes from this boot's cache {} (read from CUDA{when}); --no-cache reads both afresh",
                c.path
            ),
            CacheOutcome::Stored => format!(
                "GPU facts: NVML and CUDA live ({init}stored in {} for later runs of this boot){why}",
                c.path
            ),
            CacheOutcome::Bypassed => {
                format!("GPU facts: NVML and CUDA live (--no-cache; {init}cache {} rewritten)", c.path)
            }
            CacheOutcome::NotStored | CacheOutcome::Miss => {
                format!("GPU facts: NVML and CUDA live ({init}not cached){why}")
            }
        })
    }
}

pub fn summarize(verdicts: &[Verdict]) -> BTreeMap<String, usize> {
    let mut m: BTreeMap<String, usize> = Status::ALL
        .iter()
        .map(|s| (s.as_str().to_string(), 0))
        .collect();
    for v in verdicts {
        *m.entry(v.status.as_str().to_string()).or_default() += 1;
    }
    m
}

/// The report formats of `check`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
    Junit,
    /// node_exporter textfile collector (`crate::fleet::prometheus`).
    Prometheus,
    /// Node Feature Discovery feature file: labels and their expiry (`crate::fleet::nfd`).
    Nfd,
}

pub fn json(report: &Report) -> String {
    let mut s =
        serde_json::to_string_pretty(report).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
    s.push('\n');
    s
}

pub use daqtune_probe::text::xml_escape;

/// One testcase per verdict; fail/error -> <failure>, skip/n/a -> <skipped>.
pub fn junit(report: &Report) -> String {
    let failures = report
        .checks
        .iter()
        .filter(|v| matches!(v.status, Status::Fail | Status::Error))
        .count()
        + report.gate_failures.len();
    let skipped = report
        .checks
        .iter()
        .filter(|v| matches!(v.status, Status::Skip | Status::NotApplicable))
        .count();
    let tests = report.checks.len() + report.gate_failures.len();
    let mut s = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        s,
        "<testsuites name=\"daqtune\" tests=\"{tests}\" failures=\"{failures}\" errors=\"0\" skipped=\"{skipped}\" time=\"{:.3}\">",
        report.elapsed_ms as f64 / 1000.0
    );
    let _ = writeln!(
        s,
        "  <testsuite name=\"daqtune.check.{}\" tests=\"{tests}\" failures=\"{failures}\" errors=\"0\" skipped=\"{skipped}\" hostname=\"{}\">",
        xml_escape(&report.profile),
        xml_escape(report.host.hostname.as_deref().unwrap_or("host"))
    );
    for v in &report.checks {
        let _ = write!(
            s,
            "    <testcase classname=\"daqtune.{}\" name=\"{}\">",
            xml_escape(&v.id),
            xml_escape(&v.subject)
        );
        let detail = format!(
            "{}{}{}",
            v.message,
            v.observed
                .as_ref()
                .map(|o| format!("\nobserved: {o}"))
                .unwrap_or_default(),
            v.fix
                .as_ref()
                .map(|f| format!("\nfix: {f}"))
                .unwrap_or_default()
        );
        let detail = match &v.limit {
            Some(l) => format!("{detail}\nplatform limit: {}", l.note),
            None => detail,
        };
        match v.status {
            Status::Fail | Status::Error => {
                let _ = write!(
                    s,
                    "<failure type=\"{}\" message=\"{}\">{}</failure>",
                    v.status,
                    xml_escape(&v.message),
                    xml_escape(&detail)
                );
            }
            Status::Skip | Status::NotApplicable => {
                let _ = write!(
                    s,
                    "<skipped message=\"{}: {}\"/>",
                    v.status,
                    xml_escape(&v.message)
                );
            }
            // A warning passes the gate but must not vanish in a CI view: JUnit has no warning
            // element, so it carries a property (`daqtune.status=warn`, which Jenkins and
            // GitLab list) and its text on <system-err>, which those views show beside the
            // case, where <system-out> is folded away.
            Status::Warn => {
                let _ = write!(
                    s,
                    "<properties><property name=\"daqtune.status\" value=\"warn\"/></properties><system-err>warn: {}</system-err>",
                    xml_escape(&detail)
                );
            }
            _ => {
                let _ = write!(
                    s,
                    "<system-out>{}: {}</system-out>",
                    v.status,
                    xml_escape(&detail)
                );
            }
        }
        let _ = writeln!(s, "</testcase>");
    }
    for g in &report.gate_failures {
        let _ = writeln!(
            s,
            "    <testcase classname=\"daqtune.gate\" name=\"required\"><failure type=\"gate\" message=\"{}\"/></testcase>",
            xml_escape(g)
        );
    }
    s.push_str("  </testsuite>\n</testsuites>\n");
    s
}

/// The catalogue as Markdown (docs/checks/README.md is generated from this).
pub fn catalogue_markdown() -> String {
    let mut s = String::from("# Check catalogue\n\nGenerated by `daqtune explain --list --markdown` from the tunables' registry in the binary. `apply` sets the ids marked in its column (`daqtune apply --only ID`); the others are observations.\n\n| id | area | what | needs root to see everything | tune_system.py names | apply | profile keys |\n| --- | --- | --- | --- | --- | --- | --- |\n");
    for c in REGISTRY {
        let keys: Vec<String> = c.profile_keys.iter().map(|k| format!("`{k}`")).collect();
        let _ = writeln!(
            s,
            "| [{id}]({id}.md) | {} | {} | {} | {} | {} | {} |",
            c.area.title(),
            c.title,
            if c.needs_root { "yes" } else { "no" },
            c.aliases.join(", "),
            if c.plans() { "yes" } else { "" },
            keys.join(", "),
            id = c.id
        );
    }
    s
}

/// The closing line of a `check` run by a user who is not root, when it skipped what only
/// root may read: the checks not judged, and that root is the reason. `None` for root, or
/// when nothing was skipped for want of it. (docs/cli.md, "Not root": the exit code stays
/// the verdicts'; this line says what the run could not judge.)
pub fn not_root_line(checks: &[Verdict], is_root: bool) -> Option<String> {
    if is_root {
        return None;
    }
    // The skips' own words: every reader that is refused for want of root says so
    // ("permission denied (run as root)", "(not root)", "(needs root)", CAP_NET_ADMIN).
    // ("a host root" is no such reason).
    let for_root = |m: &str| {
        let m = m.to_ascii_lowercase();
        [
            "permission denied",
            "not permitted",
            "not root",
            "needs root",
            "need root",
            "as root",
        ]
        .iter()
        .any(|w| m.contains(w))
    };
    let mut ids: Vec<&str> = checks
        .iter()
        .filter(|v| v.status == Status::Skip && for_root(&v.message))
        .map(|v| v.id.as_str())
        .collect();
    let n = ids.len();
    ids.dedup();
    if ids.is_empty() {
        return None;
    }
    Some(format!(
        "not judged: {n} verdict(s) of {} check(s) skipped because this user is not root ({}); run `sudo daqtune check` to judge them",
        ids.len(),
        ids.join(", ")
    ))
}

/// The checks whose registry entry names `key` or a section above it (`nic.rings` covers
/// `nic.rings.rx`).
fn checks_reading(key: &str) -> Vec<&'static str> {
    let bare = key.replace("[]", "");
    REGISTRY
        .iter()
        .filter(|t| {
            t.profile_keys.iter().any(|k| {
                bare == *k
                    || bare.starts_with(&format!("{k}."))
                    || k.starts_with(&format!("{bare}."))
            })
        })
        .map(|t| t.id)
        .collect()
}

/// A default as YAML would write it, on one line.
fn flow(v: &serde_yaml_ng::Value) -> String {
    use serde_yaml_ng::Value;
    match v {
        Value::Null => "unset".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) if s.is_empty() => "\"\"".into(),
        Value::String(s) => s.clone(),
        Value::Sequence(q) => format!("[{}]", q.iter().map(flow).collect::<Vec<_>>().join(", ")),
        Value::Mapping(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, v)| format!("{}: {}", flow(k), flow(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Value::Tagged(t) => flow(&t.value),
    }
}

/// The default of a key: what a profile that neither sets it nor extends one that does gets.
fn default_of(
    doc: &crate::model::profile::keys::KeyDoc,
    defaults: &serde_yaml_ng::Value,
) -> String {
    if let Some(d) = doc.default {
        return d.to_string();
    }
    let mut v = Some(defaults);
    for seg in doc.key.split('.') {
        v = v.and_then(|x| x.get(seg));
    }
    v.map(flow).unwrap_or_else(|| "unset".into())
}

/// A table cell: pipes escaped, one line.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// docs/profiles.md: every profile key with its type, default, unit, an example, what reads
/// it and what it means (`daqtune profiles keys --markdown`; a test keeps the page in step).
pub fn profile_keys_markdown() -> String {
    let defaults = serde_yaml_ng::to_value(crate::model::profile::Profile::default())
        .unwrap_or(serde_yaml_ng::Value::Null);
    let mut s = String::from(PROFILE_PAGE_INTRO);
    let mut section = "";
    for d in crate::model::profile::keys::KEYS {
        let this = match d.key.split(['.', '[']).next().unwrap_or(d.key) {
            "name" | "description" | "extends" => "The profile",
            "not_applicable" | "required" | "waivers" => "Checks and the gate",
            top => top,
        };
        if this != section {
            section = this;
            let title = if this.starts_with(char::is_uppercase) {
                this.to_string()
            } else {
                format!("`{this}`")
            };
            let _ = write!(
                s,
                "\n## {title}\n\n| key | type | default | unit | example | read by | meaning |\n| --- | --- | --- | --- | --- | --- | --- |\n"
            );
        }
        let mut readers: Vec<String> = checks_reading(d.key)
            .into_iter()
            .map(|id| format!("[{id}](checks/{id}.md)"))
            .collect();
        if !d.used_by.is_empty() {
            readers.push(d.used_by.to_string());
        }
        let _ = writeln!(
            s,
            "| `{}` | {} | {} | {} | `{}` | {} | {} |",
            d.key,
            cell(d.ty),
            cell(&default_of(d, &defaults)),
            cell(d.unit),
            cell(d.example),
            cell(&readers.join(", ")),
            cell(d.what)
        );
    }
    s
}

/// `daqtune profiles keys`: one line a key (key, type, default, unit, what reads it); the
/// meanings are on the Markdown page.
pub fn profile_keys_text() -> String {
    let defaults = serde_yaml_ng::to_value(crate::model::profile::Profile::default())
        .unwrap_or(serde_yaml_ng::Value::Null);
    let rows: Vec<[String; 4]> = crate::model::profile::keys::KEYS
        .iter()
        .map(|d| {
            let mut readers: Vec<String> = checks_reading(d.key)
                .into_iter()
                .map(String::from)
                .collect();
            if !d.used_by.is_empty() {
                readers.push(d.used_by.replace('`', ""));
            }
            let unit = if d.unit.is_empty() {
                String::new()
            } else {
                format!(" ({})", d.unit)
            };
            [
                d.key.to_string(),
                format!("{}{unit}", d.ty),
                {
                    // A long default (the sysctl minimums) is on the page.
                    let v = default_of(d, &defaults).replace('`', "");
                    if v.chars().count() > 40 {
                        format!("{}...", v.chars().take(37).collect::<String>())
                    } else {
                        v
                    }
                },
                readers.join(", "),
            ]
        })
        .collect();
    let w: Vec<usize> = (0..3)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut s = String::new();
    for r in rows {
        let line = format!(
            "{:<w0$}  {:<w1$}  {:<w2$}  {}",
            r[0],
            r[1],
            r[2],
            r[3],
            w0 = w[0],
            w1 = w[1],
            w2 = w[2]
        );
        s.push_str(line.trim_end());
        s.push('\n');
    }
    s.push_str("(meanings and examples: daqtune profiles keys --markdown, docs/profiles.md)\n");
    s
}

const PROFILE_PAGE_INTRO: &str = "# Profile keys

Generated by `daqtune profiles keys --markdown` from the profile schema (`engine/src/model/profile/`)
and the checks' registry: a key added to the schema without its entry in
`engine/src/model/profile/keys.rs` fails the engine's tests, and this page out of step with the
binary fails `tune/tests/it/foundation.rs`.

A profile is a YAML file given with `--profile FILE` (or a built-in name: `igx-orin`,
`dgx-spark`, `generic-dgpu`; `daqtune profiles show NAME` prints one whole). Every key is
optional but `name`. With `extends: NAME` the file builds on a built-in profile: mappings merge
key by key and this file's values win; a list (and `hugepages.pools` against `size`/`count`)
replaces what the profile below gave. An unknown key or a value of the wrong type is refused with
`file:line:column`, and so is a value out of range (an MRRS that is not a power of two,
isolated CPUs that overlap `irqaffinity`), located in the layer that set it.

\"default\" is what a profile gets when neither it nor a profile it extends sets the key;
the built-in profiles set many keys (`daqtune profiles show NAME`). \"read by\" names the checks
that judge with the key (their pages say how) and the commands that use it otherwise.

```yaml
name: lab-dgx
extends: generic-dgpu
cpu:
  isolated: \"4-7\"
nic:
  interfaces: [enp1s0f0np0, enp1s0f1np1]
required: [kernel.cmdline, cpu.governor, hugepages, pcie.mrrs, nic.mtu, gpu.clocks]
selftest:
  floor: 0.9
  reference:
    - path: socket.tcp
      message_size: 8192
      streams: 4
      gbps: 90
      source: \"our lab, 2026-11: 8 KB x 4 streams\"
```

One floor mechanism holds self-test results: `selftest.floor` x `selftest.reference`
(docs/ci-gate.md). The older `selftest.min_tcp_gbps` and `selftest.reference_gbps` are still
read, each with a note naming its file:line and what to write instead, and are mapped onto
`selftest.reference`; `profiles show` prints what they became, never the old keys.
";

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Report {
        let checks = vec![
            Verdict::fail("cpu.governor", "cpu64-127", "64/128 CPUs <b>").fix("x"),
            Verdict::skip("hugepages", "host", "no"),
            Verdict::pass("numa", "host", "ok"),
        ];
        Report {
            schema: SCHEMA.into(),
            daqtune_version: "0".into(),
            host: HostInfo {
                hostname: Some("h".into()),
                kernel: None,
                arch: None,
                product: None,
                root: "/".into(),
            },
            profile: "generic-dgpu".into(),
            profile_origin: "given".into(),
            summary: summarize(&checks),
            checks,
            gate_failures: vec![],
            elapsed_ms: 3,
            run: None,
            gpu_facts: None,
        }
    }

    #[test]
    fn junit_maps_statuses() {
        let j = junit(&sample());
        assert!(j.contains("<failure type=\"fail\""));
        assert!(j.contains("<skipped message=\"skip: no\"/>"));
        assert!(j.contains("&lt;b&gt;"));
        assert!(j.contains("tests=\"3\" failures=\"1\""));
    }

    /// Issue 46 item 4: a warning shows in CI views (a property and <system-err>), not only in
    /// the folded <system-out>, and still counts as neither failure nor skip.
    #[test]
    fn junit_warnings_are_visible() {
        let mut r = sample();
        r.checks.push(Verdict::warn(
            "pcie.link",
            "0000:01:00.0",
            "trained at x8 <of x16>",
        ));
        r.summary = summarize(&r.checks);
        let j = junit(&r);
        let doc = roxmltree::Document::parse(&j).expect("JUnit XML");
        let case = doc
            .descendants()
            .find(|n| {
                n.has_tag_name("testcase") && n.attribute("classname") == Some("daqtune.pcie.link")
            })
            .expect("the warning's testcase");
        let prop = case
            .descendants()
            .find(|n| n.has_tag_name("property"))
            .expect("a property");
        assert_eq!(prop.attribute("name"), Some("daqtune.status"));
        assert_eq!(prop.attribute("value"), Some("warn"));
        let err = case
            .descendants()
            .find(|n| n.has_tag_name("system-err"))
            .and_then(|n| n.text())
            .expect("system-err");
        assert!(err.starts_with("warn: trained at x8 <of x16>"), "{err}");
        assert!(j.contains("tests=\"4\" failures=\"1\""), "{j}");
    }
}
