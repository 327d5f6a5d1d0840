//! The one record every report renders: a [`Verdict`] per check and subject.

use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Status {
    #[serde(rename = "pass")]
    Pass,
    #[serde(rename = "warn")]
    Warn,
    #[serde(rename = "fail")]
    Fail,
    /// Could not check: device missing, permission, library absent.
    #[serde(rename = "skip")]
    Skip,
    /// Does not apply on this platform.
    #[serde(rename = "n/a")]
    NotApplicable,
    /// The check itself failed to run (a bug or an unexpected host state).
    #[serde(rename = "error")]
    Error,
    /// The change is in place and takes effect at the next boot.
    #[serde(rename = "pending-reboot")]
    PendingReboot,
}

impl Status {
    pub const ALL: [Status; 7] = [
        Status::Pass,
        Status::Warn,
        Status::Fail,
        Status::Skip,
        Status::NotApplicable,
        Status::Error,
        Status::PendingReboot,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Warn => "warn",
            Status::Fail => "fail",
            Status::Skip => "skip",
            Status::NotApplicable => "n/a",
            Status::Error => "error",
            Status::PendingReboot => "pending-reboot",
        }
    }

    pub fn parse(s: &str) -> Option<Status> {
        Status::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// Severity for `--fail-on`: pass/skip/n/a never fail a gate by themselves (a required
    /// check that skips is handled by the gate, not here). pending-reboot counts as warn.
    pub fn severity(self) -> u8 {
        match self {
            Status::Pass | Status::Skip | Status::NotApplicable => 0,
            Status::Warn | Status::PendingReboot => 1,
            Status::Fail | Status::Error => 2,
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The result of one check on one subject (a device, an interface, a CPU set, or the host).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    pub id: String,
    /// What was judged: `host`, `cpu0-11`, `0000:01:00.0 (cx7_0)`, `GPU-8c3e... 0000:09:00.0`.
    pub subject: String,
    pub status: Status,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<String>,
    pub message: String,
    /// The exact command or step that fixes a failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
    /// Set when this verdict was downgraded by a profile waiver (the reason and expiry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waived: Option<String>,
    /// A platform limit the verdict passes under: what the platform caps, as a fact the
    /// fleet outputs carry (JSON, the textfile's `daqtune_platform_limit`, NFD's
    /// `limit.<id>` label), so a pass with a note does not hide it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<Limit>,
}

/// A platform limit: `value` is short and label-safe (`128`), `note` says what it is and why
/// it is the platform's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limit {
    pub value: String,
    pub note: String,
}

impl Verdict {
    pub fn new(
        id: &str,
        subject: impl Into<String>,
        status: Status,
        message: impl Into<String>,
    ) -> Self {
        Verdict {
            id: id.to_string(),
            subject: subject.into(),
            status,
            observed: None,
            expected: None,
            message: message.into(),
            fix: None,
            waived: None,
            limit: None,
        }
    }
    pub fn pass(id: &str, subject: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(id, subject, Status::Pass, message)
    }
    pub fn warn(id: &str, subject: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(id, subject, Status::Warn, message)
    }
    pub fn fail(id: &str, subject: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(id, subject, Status::Fail, message)
    }
    pub fn skip(id: &str, subject: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(id, subject, Status::Skip, message)
    }
    pub fn na(id: &str, subject: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(id, subject, Status::NotApplicable, message)
    }
    pub fn error(id: &str, subject: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(id, subject, Status::Error, message)
    }
    pub fn observed(mut self, v: impl fmt::Display) -> Self {
        self.observed = Some(v.to_string());
        self
    }
    pub fn expected(mut self, v: impl fmt::Display) -> Self {
        self.expected = Some(v.to_string());
        self
    }
    pub fn limit(mut self, value: impl Into<String>, note: impl Into<String>) -> Self {
        self.limit = Some(Limit {
            value: value.into(),
            note: note.into(),
        });
        self
    }
    pub fn fix(mut self, v: impl Into<String>) -> Self {
        self.fix = Some(v.into());
        self
    }
    pub fn maybe_fix(mut self, v: Option<String>) -> Self {
        self.fix = v;
        self
    }
}

/// Report areas, in the order the text report prints them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Area {
    Platform,
    Cpu,
    Kernel,
    Memory,
    Pcie,
    Nic,
    Gpu,
    Network,
}

impl Area {
    pub fn title(self) -> &'static str {
        match self {
            Area::Platform => "Platform",
            Area::Cpu => "CPU",
            Area::Kernel => "Kernel",
            Area::Memory => "Memory",
            Area::Pcie => "PCIe",
            Area::Nic => "NIC",
            Area::Gpu => "GPU",
            Area::Network => "Network stack",
        }
    }
}

/// Why a tunable cannot judge its setting on this host: what its check reports as `skip` and
/// its plan as a skip note, in the host's own terms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unjudged {
    /// A fact the judgement needs cannot be read (the message names it and why).
    #[error("{0}")]
    Facts(String),
    /// The profile and the host leave nothing to judge (no data cores, no data-path NIC).
    #[error("{0}")]
    Nothing(&'static str),
}

impl From<String> for Unjudged {
    fn from(s: String) -> Self {
        Unjudged::Facts(s)
    }
}

impl From<crate::model::cores::CoresError> for Unjudged {
    fn from(e: crate::model::cores::CoresError) -> Self {
        Unjudged::Facts(e.to_string())
    }
}

impl From<&str> for Unjudged {
    fn from(s: &str) -> Self {
        Unjudged::Facts(s.to_string())
    }
}
