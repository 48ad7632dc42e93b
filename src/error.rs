//! The library's typed errors. They become gRPC statuses in exactly one place (`api::status`).

/// One offending field of a request, with a path such as `definition.groups["crm"].description`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldViolation {
    pub field: String,
    pub description: String,
}

impl FieldViolation {
    pub fn new(field: impl Into<String>, description: impl Into<String>) -> Self {
        Self { field: field.into(), description: description.into() }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid argument: {}", summarize(.0))]
    InvalidArgument(Vec<FieldViolation>),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    FailedPrecondition(String),
    #[error("{0}")]
    ResourceExhausted(String),
    #[error("{0}")]
    Unavailable(String),
    #[error("internal error: {0}")]
    Internal(String),
}

fn summarize(v: &[FieldViolation]) -> String {
    v.iter().map(|v| format!("{}: {}", v.field, v.description)).collect::<Vec<_>>().join("; ")
}

impl Error {
    pub fn invalid(field: impl Into<String>, description: impl Into<String>) -> Self {
        Error::InvalidArgument(vec![FieldViolation::new(field, description)])
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
