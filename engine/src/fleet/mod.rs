//! Outputs that fleet engines read: node_exporter's textfile collector ([`prometheus`]),
//! Node Feature Discovery's local feature files ([`nfd`]), Ansible local facts (the JSON
//! report with its [`crate::check::run_info::RunInfo`]), the machine-readable plan ([`plan_json`]), the atomic
//! `-o` writer ([`output`]) and `daqtune report`, which refreshes all of them from one run
//! ([`report_cmd`]). docs/fleet.md documents every file, label and metric.
//!
//! The renderers are pure functions of a [`Report`] (plus the run's time and gate result,
//! carried in [`crate::check::run_info::RunInfo`]), so each format is tested on every fixture root without a
//! cluster. [`render`] is every `check --format`: it sits above the report module because the
//! Prometheus and NFD renderers read the report type (report -> `run_info` -> nothing above).

pub mod nfd;
pub mod output;
pub mod plan_json;
pub mod prometheus;
pub mod report_cmd;

use crate::check::report::{Format, Report};
use std::time::Duration;

/// How `check` renders its report, besides the format.
#[derive(Debug, Clone, Copy)]
pub struct RenderOptions {
    /// Color the text report (a terminal, NO_COLOR unset).
    pub color: bool,
    /// Text: every verdict (passing ones are folded per check otherwise).
    pub verbose: bool,
    /// NFD: how long the labels stay valid after the run.
    pub nfd_expiry: Duration,
    /// Text: the terminal's width in columns, to wrap and shorten to (`None`: lines whole).
    pub width: Option<usize>,
}

impl Default for RenderOptions {
    fn default() -> Self {
        RenderOptions {
            color: false,
            verbose: false,
            nfd_expiry: crate::fleet::nfd::DEFAULT_EXPIRY,
            width: None,
        }
    }
}

/// The report in one of `check`'s machine formats; `None` for [`Format::Text`], whose words
/// are the CLI's (`daqtune-render`).
pub fn render(report: &Report, format: Format, o: &RenderOptions) -> Option<String> {
    Some(match format {
        Format::Text => return None,
        Format::Json => crate::check::report::json(report),
        Format::Junit => crate::check::report::junit(report),
        Format::Prometheus => crate::fleet::prometheus::render(report),
        Format::Nfd => crate::fleet::nfd::render(report, o.nfd_expiry),
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use crate::check::report::{summarize, HostInfo, Report, SCHEMA};
    use crate::model::verdict::Verdict;

    pub(crate) fn report(checks: Vec<Verdict>) -> Report {
        Report {
            schema: SCHEMA.into(),
            daqtune_version: "0.1.0".into(),
            host: HostInfo {
                hostname: Some("h".into()),
                kernel: None,
                arch: None,
                product: None,
                root: "/".into(),
            },
            profile: "igx-orin".into(),
            profile_origin: "--profile igx-orin".into(),
            summary: summarize(&checks),
            checks,
            gate_failures: vec![],
            elapsed_ms: 1234,
            run: None,
            gpu_facts: None,
        }
    }

    #[test]
    fn render_dispatches_every_format() {
        use super::*;
        let r = report(vec![Verdict::pass("hugepages", "1G pages", "ok")]);
        let o = RenderOptions::default();
        let r = |f| render(&r, f, &o).unwrap_or_default();
        // The text is daqtune-render's (its `report::render` covers every format).
        assert_eq!(r(Format::Text), "");
        assert!(r(Format::Json).contains("\"schema\": \"daqtune.report/v1\""));
        assert!(r(Format::Junit).contains("<testsuites"));
        assert!(r(Format::Prometheus).contains("daqtune_check_status{"));
        assert!(r(Format::Nfd).contains("# +expiry-time="));
    }
}
