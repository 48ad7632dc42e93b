//! gRPC rendering of the one error vocabulary (`crate::error::ErrorCode`): the code comes
//! from the vocabulary, invalid requests carry `google.rpc.BadRequest` field violations.
//!
//! The whole error metadata (message and details) stays within [`MAX_ERROR_METADATA`], so a
//! client with default limits (8 KiB of metadata in grpc-python and grpc-go) always reads
//! the refusal: the first violations are kept and the rest counted.

use tonic::{Code, Status};
use tonic_types::{ErrorDetails, FieldViolation, StatusExt};

use crate::error::{self, Error};

/// Bytes of error metadata a refusal may take, all headers included.
pub const MAX_ERROR_METADATA: usize = 4 * 1024;
/// Of which the message (before percent-encoding).
const MAX_MESSAGE: usize = 400;

pub fn to_status(e: Error) -> Status {
    let code = Code::from_i32(e.code().grpc());
    match e {
        Error::InvalidArgument(violations) => {
            let message = message(&violations);
            let with = |kept: usize| {
                let mut details: Vec<FieldViolation> =
                    violations[..kept].iter().map(|v| FieldViolation::new(v.field.clone(), v.description.clone())).collect();
                if kept < violations.len() {
                    details.push(FieldViolation::new("", format!("{} more violations left out", violations.len() - kept)));
                }
                Status::with_error_details(code, message.clone(), ErrorDetails::with_bad_request(details))
            };
            // The most leading violations whose whole metadata fits (a refusal is rare: a
            // few encodings to find it are cheap).
            if metadata_bytes(&with(violations.len())) <= MAX_ERROR_METADATA {
                return with(violations.len());
            }
            let (mut fits, mut over) = (0, violations.len());
            while over - fits > 1 {
                let mid = (fits + over) / 2;
                if metadata_bytes(&with(mid)) <= MAX_ERROR_METADATA { fits = mid } else { over = mid }
            }
            with(fits)
        }
        Error::Internal(m) => {
            tracing::error!(error = %m, "internal error");
            Status::new(code, "internal error")
        }
        other => Status::new(code, other.to_string()),
    }
}

/// The bytes of a status's headers as sent (names and values).
fn metadata_bytes(s: &Status) -> usize {
    let response = s.clone().into_http::<tonic::body::Body>();
    response.headers().iter().map(|(k, v)| k.as_str().len() + v.len()).sum()
}

/// `invalid argument: field: description; …`, cut at a violation boundary within the budget.
fn message(violations: &[error::FieldViolation]) -> String {
    let mut out = String::from("invalid argument: ");
    for (i, v) in violations.iter().enumerate() {
        let part = format!("{}{}: {}", if i > 0 { "; " } else { "" }, v.field, v.description);
        if out.len() + part.len() > MAX_MESSAGE - 32 {
            let cut: String = part.chars().take((MAX_MESSAGE - 32).saturating_sub(out.len())).collect();
            out.push_str(&cut);
            out.push_str(&format!("… ({} violations in all)", violations.len()));
            return out;
        }
        out.push_str(&part);
    }
    out
}

pub fn invalid(field: &str, description: impl Into<String>) -> Status {
    to_status(Error::invalid(field, description))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_with_many_violations_keeps_its_metadata_within_4_kib() {
        let violations: Vec<error::FieldViolation> = (0..500)
            .map(|i| {
                error::FieldViolation::new(format!("definition.sources[0].function.tools[{i}].name"), "use 1-64 of ASCII letters, digits, _ or -")
            })
            .collect();
        let status = to_status(Error::InvalidArgument(violations));
        assert_eq!(status.code(), Code::InvalidArgument);
        assert!(metadata_bytes(&status) <= MAX_ERROR_METADATA, "{} bytes", metadata_bytes(&status));
        let bad = status.get_details_bad_request().expect("details");
        let last = bad.field_violations.last().expect("violations");
        assert!(last.description.ends_with("more violations left out"), "{last:?}");
        assert_eq!(bad.field_violations[0].field, "definition.sources[0].function.tools[0].name");
        assert!(status.message().ends_with("(500 violations in all)"), "{}", status.message());
    }

    #[test]
    fn a_refusal_with_few_violations_keeps_them_all() {
        let status = to_status(Error::invalid("agent_id", "name the agent"));
        assert_eq!(status.message(), "invalid argument: agent_id: name the agent");
        assert_eq!(status.get_details_bad_request().expect("details").field_violations.len(), 1);
    }
}
