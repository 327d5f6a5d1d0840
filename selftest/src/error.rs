//! Errors of the self-test crate.

use std::io;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: io::Error,
    },
    #[error("netlink {op}: {source}")]
    Netlink {
        op: String,
        #[source]
        source: io::Error,
    },
    #[error("refused: {0}")]
    Refused(String),
    #[error("invalid request: {0}")]
    Invalid(String),
    #[error("not supported here: {0}")]
    Unsupported(String),
    #[error("interrupted")]
    Interrupted,
    #[error("journal {path}: {message}")]
    Journal { path: String, message: String },
}

impl Error {
    pub fn io(what: impl Into<String>, source: io::Error) -> Self {
        Error::Io {
            what: what.into(),
            source,
        }
    }
}

pub type Result<T> = std::result::Result<T, Error>;
