//! gRPC rendering of the one error vocabulary (`crate::error::ErrorCode`): the code comes
//! from the vocabulary, invalid requests carry `google.rpc.BadRequest` field violations.

use tonic::{Code, Status};
use tonic_types::{ErrorDetails, FieldViolation, StatusExt};

use crate::error::Error;

pub fn to_status(e: Error) -> Status {
    let code = Code::from_i32(e.code().grpc());
    match e {
        Error::InvalidArgument(violations) => {
            let message = Error::InvalidArgument(violations.clone()).to_string();
            let details: Vec<FieldViolation> = violations.into_iter().map(|v| FieldViolation::new(v.field, v.description)).collect();
            Status::with_error_details(code, message, ErrorDetails::with_bad_request(details))
        }
        Error::Internal(m) => {
            tracing::error!(error = %m, "internal error");
            Status::new(code, "internal error")
        }
        other => Status::new(code, other.to_string()),
    }
}

pub fn invalid(field: &str, description: impl Into<String>) -> Status {
    to_status(Error::invalid(field, description))
}
