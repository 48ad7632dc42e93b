//! The one place where library errors become gRPC statuses.

use tonic::{Code, Status};
use tonic_types::{ErrorDetails, FieldViolation, StatusExt};

use crate::control::discovery::DiscoveryError;
use crate::error::Error;

pub fn to_status(e: Error) -> Status {
    match e {
        Error::InvalidArgument(violations) => {
            let message = Error::InvalidArgument(violations.clone()).to_string();
            let details: Vec<FieldViolation> =
                violations.into_iter().map(|v| FieldViolation::new(v.field, v.description)).collect();
            Status::with_error_details(Code::InvalidArgument, message, ErrorDetails::with_bad_request(details))
        }
        Error::NotFound(m) => Status::not_found(m),
        Error::FailedPrecondition(m) => Status::failed_precondition(m),
        Error::ResourceExhausted(m) => Status::resource_exhausted(m),
        Error::Unavailable(m) => Status::unavailable(m),
        Error::Internal(m) => {
            tracing::error!(error = %m, "internal error");
            Status::internal("internal error")
        }
    }
}

/// Typed Discovery RPCs report what the JSON tools show the model as statuses.
pub fn discovery_status(e: DiscoveryError, message: String) -> Status {
    match e {
        DiscoveryError::UnknownGroup(_) | DiscoveryError::UnknownTool { .. } => Status::not_found(message),
        DiscoveryError::TooLarge { .. } => Status::failed_precondition(message),
        DiscoveryError::BadArgument(_) => Status::invalid_argument(message),
    }
}

pub fn invalid(field: &str, description: impl Into<String>) -> Status {
    to_status(Error::invalid(field, description))
}
