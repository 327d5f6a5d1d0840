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
    #[error("GPU sink: {0}")]
    Gpu(String),
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

/// probe's netlink clients keep the self-test's error texts: "netlink OP: ERRNO" stays
/// [`Error::Netlink`], so callers that look at the errno (EEXIST on a restore) still see it.
impl From<daqtune_probe::net::netlink::Error> for Error {
    fn from(e: daqtune_probe::net::netlink::Error) -> Self {
        use daqtune_probe::net::netlink::Error as Nl;
        match e {
            Nl::Io { op, source } => Error::Netlink { op, source },
            Nl::Unsupported(m) => Error::Unsupported(m),
            Nl::Invalid(m) => Error::Invalid(m),
        }
    }
}

pub type Result<T> = std::result::Result<T, Error>;
