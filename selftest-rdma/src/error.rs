//! Errors of the RDMA self-test.

use std::io;

#[derive(Debug, thiserror::Error)]
pub enum RdmaError {
    /// The crate was built without feature `rdma`.
    #[error(
        "built without RDMA support (rebuild daqtune-rdma with `--features rdma`; needs \
         rdma-core's libibverbs)"
    )]
    NotBuilt,
    /// Nothing to test on: no kernel RDMA support, no device, no active port. A `skip`.
    #[error("{0}")]
    Unavailable(String),
    /// A verb failed.
    #[error("{verb}: {source}")]
    Verbs {
        verb: String,
        #[source]
        source: io::Error,
    },
    #[error("invalid request: {0}")]
    Invalid(String),
    /// The TCP side channel to a peer failed or spoke garbage.
    #[error("side channel: {0}")]
    SideChannel(String),
    #[error("{0}")]
    Io(#[from] io::Error),
}

impl RdmaError {
    pub fn verbs(verb: impl Into<String>, source: io::Error) -> Self {
        RdmaError::Verbs {
            verb: verb.into(),
            source,
        }
    }

    /// Whether the run should be reported as skipped rather than failed.
    pub fn is_skip(&self) -> bool {
        matches!(self, RdmaError::NotBuilt | RdmaError::Unavailable(_))
    }
}
