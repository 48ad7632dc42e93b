//! The library's typed errors and the one vocabulary every failure maps to: [`ErrorCode`],
//! with its gRPC code, HTTP status and MCP JSON-RPC code side by side in this file. The
//! transports only render it (`api::status` for gRPC, the HTTP and MCP edges in `http`).
//!
//! Model-level faults are not errors: they are results for the model (`call::ModelFault`).

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

/// What went wrong, as callers of every transport see it: a restricted set of gRPC codes
/// (as quickwit does), each with the HTTP status and JSON-RPC code that say the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    InvalidArgument,
    NotFound,
    FailedPrecondition,
    ResourceExhausted,
    Unavailable,
    DeadlineExceeded,
    Unauthenticated,
    Internal,
}

impl ErrorCode {
    /// The `google.rpc.Code` number.
    pub const fn grpc(self) -> i32 {
        match self {
            ErrorCode::InvalidArgument => 3,
            ErrorCode::DeadlineExceeded => 4,
            ErrorCode::NotFound => 5,
            ErrorCode::ResourceExhausted => 8,
            ErrorCode::FailedPrecondition => 9,
            ErrorCode::Internal => 13,
            ErrorCode::Unavailable => 14,
            ErrorCode::Unauthenticated => 16,
        }
    }

    /// The HTTP status (Google's mapping of gRPC codes to HTTP).
    pub const fn http(self) -> u16 {
        match self {
            ErrorCode::InvalidArgument | ErrorCode::FailedPrecondition => 400,
            ErrorCode::Unauthenticated => 401,
            ErrorCode::NotFound => 404,
            ErrorCode::ResourceExhausted => 429,
            ErrorCode::Internal => 500,
            ErrorCode::Unavailable => 503,
            ErrorCode::DeadlineExceeded => 504,
        }
    }

    /// The JSON-RPC error code of an MCP response: the protocol's own codes for requests a
    /// client must change (-32602 invalid params, -32600 invalid request), -32603 for faults
    /// of the server or its dependencies, and implementation-defined codes in the
    /// -32000…-32099 range for the rest.
    pub const fn jsonrpc(self) -> i32 {
        match self {
            ErrorCode::InvalidArgument | ErrorCode::NotFound => -32602,
            ErrorCode::FailedPrecondition => -32600,
            ErrorCode::ResourceExhausted => -32029,
            ErrorCode::Unavailable => -32003,
            ErrorCode::DeadlineExceeded => -32001,
            ErrorCode::Unauthenticated => -32004,
            ErrorCode::Internal => -32603,
        }
    }

    /// The canonical upper-case name (`INVALID_ARGUMENT`, …).
    pub const fn name(self) -> &'static str {
        match self {
            ErrorCode::InvalidArgument => "INVALID_ARGUMENT",
            ErrorCode::NotFound => "NOT_FOUND",
            ErrorCode::FailedPrecondition => "FAILED_PRECONDITION",
            ErrorCode::ResourceExhausted => "RESOURCE_EXHAUSTED",
            ErrorCode::Unavailable => "UNAVAILABLE",
            ErrorCode::DeadlineExceeded => "DEADLINE_EXCEEDED",
            ErrorCode::Unauthenticated => "UNAUTHENTICATED",
            ErrorCode::Internal => "INTERNAL",
        }
    }
}

/// The one message of every refused credential: nothing about why it failed.
pub const UNAUTHENTICATED_MESSAGE: &str = "missing or invalid credentials";

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
    #[error("{0}")]
    DeadlineExceeded(String),
    #[error("{UNAUTHENTICATED_MESSAGE}")]
    Unauthenticated,
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

    pub fn code(&self) -> ErrorCode {
        match self {
            Error::InvalidArgument(_) => ErrorCode::InvalidArgument,
            Error::NotFound(_) => ErrorCode::NotFound,
            Error::FailedPrecondition(_) => ErrorCode::FailedPrecondition,
            Error::ResourceExhausted(_) => ErrorCode::ResourceExhausted,
            Error::Unavailable(_) => ErrorCode::Unavailable,
            Error::DeadlineExceeded(_) => ErrorCode::DeadlineExceeded,
            Error::Unauthenticated => ErrorCode::Unauthenticated,
            Error::Internal(_) => ErrorCode::Internal,
        }
    }

    /// The message a caller may see: an internal error's detail is logged, never sent.
    pub fn public_message(&self) -> String {
        match self {
            Error::Internal(_) => "internal error".to_string(),
            other => other.to_string(),
        }
    }

    /// The offending fields of an invalid request.
    pub fn violations(&self) -> &[FieldViolation] {
        match self {
            Error::InvalidArgument(v) => v,
            _ => &[],
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [ErrorCode; 8] = [
        ErrorCode::InvalidArgument,
        ErrorCode::NotFound,
        ErrorCode::FailedPrecondition,
        ErrorCode::ResourceExhausted,
        ErrorCode::Unavailable,
        ErrorCode::DeadlineExceeded,
        ErrorCode::Unauthenticated,
        ErrorCode::Internal,
    ];

    #[test]
    fn every_code_has_distinct_grpc_numbers_and_client_errors_are_4xx() {
        let mut grpc: Vec<i32> = ALL.iter().map(|c| c.grpc()).collect();
        grpc.sort();
        grpc.dedup();
        assert_eq!(grpc.len(), ALL.len());
        for c in ALL {
            let client = matches!(
                c,
                ErrorCode::InvalidArgument
                    | ErrorCode::NotFound
                    | ErrorCode::FailedPrecondition
                    | ErrorCode::ResourceExhausted
                    | ErrorCode::Unauthenticated
            );
            assert_eq!(c.http() < 500, client, "{c:?}");
            assert!((-32700..=-32000).contains(&c.jsonrpc()), "{c:?}");
        }
    }
}
