//! The gRPC wire's own faults, told in the error vocabulary: a request whose deadline passes
//! is DEADLINE_EXCEEDED (tonic's own timer would answer CANCELLED), and a request message
//! that does not decode is INVALID_ARGUMENT (tonic answers INTERNAL).

use std::time::Duration;

use crate::error::ErrorCode;

/// tonic's decoder's message for a request that is not the protobuf it expects, as sent in
/// `grpc-message` (percent-encoded).
const DECODE_FAILURE: &str = "failed%20to%20decode%20Protobuf%20message";

/// Our deadline fires this much before tonic's (which starts a moment earlier and is polled
/// after ours): the caller hears DEADLINE_EXCEEDED.
pub(super) const AHEAD: Duration = Duration::from_millis(2);

/// The `grpc-timeout` a client sent.
pub fn grpc_timeout(headers: &http::HeaderMap) -> Option<Duration> {
    parse_timeout(headers.get("grpc-timeout")?.to_str().ok()?)
}

/// A `grpc-timeout` value: digits and a unit, as gRPC over HTTP/2 defines it.
pub fn parse_timeout(v: &str) -> Option<Duration> {
    let (digits, unit) = v.split_at(v.len().checked_sub(1)?);
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n.saturating_mul(3600)),
        "M" => Duration::from_secs(n.saturating_mul(60)),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

/// The answer to a request whose deadline passed before it was answered.
pub fn deadline_passed() -> http::Response<tonic::body::Body> {
    let code = tonic::Code::from_i32(ErrorCode::DeadlineExceeded.grpc());
    tonic::Status::new(code, "the request's deadline passed before it was answered").into_http()
}

/// A response saying tonic could not decode the request (INTERNAL) says INVALID_ARGUMENT.
pub fn tell_undecodable(parts: &mut http::response::Parts) {
    let internal = tonic::Code::Internal as i32;
    let undecodable = parts.headers.get("grpc-status").and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<i32>().ok()) == Some(internal)
        && parts.headers.get("grpc-message").and_then(|v| v.to_str().ok()).is_some_and(|m| m.starts_with(DECODE_FAILURE));
    if undecodable {
        let code = ErrorCode::InvalidArgument.grpc().to_string();
        parts.headers.insert("grpc-status", http::HeaderValue::from_str(&code).expect("digits"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeouts_parse_in_every_unit_and_bad_ones_are_ignored() {
        let h = |v: &str| {
            let mut m = http::HeaderMap::new();
            m.insert("grpc-timeout", v.parse().unwrap());
            grpc_timeout(&m)
        };
        assert_eq!(h("2S"), Some(Duration::from_secs(2)));
        assert_eq!(h("1500m"), Some(Duration::from_millis(1500)));
        assert_eq!(h("3M"), Some(Duration::from_secs(180)));
        assert_eq!(h("7u"), Some(Duration::from_micros(7)));
        assert_eq!(h("S"), None);
        assert_eq!(h("12x"), None);
        assert_eq!(grpc_timeout(&http::HeaderMap::new()), None);
    }
}
