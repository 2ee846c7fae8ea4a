//! Errors in the shape the API returns them.

use serde::Serialize;

/// The API's error types, with their HTTP statuses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// 400.
    #[serde(rename = "invalid_request_error")]
    InvalidRequest,
    /// 401.
    #[serde(rename = "authentication_error")]
    Authentication,
    /// 403.
    #[serde(rename = "permission_error")]
    Permission,
    /// 404.
    #[serde(rename = "not_found_error")]
    NotFound,
    /// 408: the request did not arrive in time (a body slower than the server's body timeout).
    /// The same `timeout_error` type as 504, under the HTTP layer's own status.
    #[serde(rename = "timeout_error")]
    RequestTimeout,
    /// 413.
    RequestTooLarge,
    /// 429.
    #[serde(rename = "rate_limit_error")]
    RateLimit,
    /// 500.
    #[serde(rename = "api_error")]
    Api,
    /// 504.
    #[serde(rename = "timeout_error")]
    Timeout,
    /// 529.
    #[serde(rename = "overloaded_error")]
    Overloaded,
}

impl ErrorKind {
    /// The HTTP status the API sends with this error.
    pub fn status(self) -> u16 {
        match self {
            ErrorKind::InvalidRequest => 400,
            ErrorKind::Authentication => 401,
            ErrorKind::Permission => 403,
            ErrorKind::NotFound => 404,
            ErrorKind::RequestTimeout => 408,
            ErrorKind::RequestTooLarge => 413,
            ErrorKind::RateLimit => 429,
            ErrorKind::Api => 500,
            ErrorKind::Timeout => 504,
            ErrorKind::Overloaded => 529,
        }
    }

    /// The `error.type` string.
    pub fn type_name(self) -> &'static str {
        match self {
            ErrorKind::InvalidRequest => "invalid_request_error",
            ErrorKind::Authentication => "authentication_error",
            ErrorKind::Permission => "permission_error",
            ErrorKind::NotFound => "not_found_error",
            ErrorKind::RequestTimeout => "timeout_error",
            ErrorKind::RequestTooLarge => "request_too_large",
            ErrorKind::RateLimit => "rate_limit_error",
            ErrorKind::Api => "api_error",
            ErrorKind::Timeout => "timeout_error",
            ErrorKind::Overloaded => "overloaded_error",
        }
    }

    /// The kind the API uses for an HTTP status (unlisted 4xx → invalid request, 5xx → api).
    pub fn from_status(status: u16) -> ErrorKind {
        match status {
            401 => ErrorKind::Authentication,
            403 => ErrorKind::Permission,
            404 => ErrorKind::NotFound,
            408 => ErrorKind::RequestTimeout,
            413 => ErrorKind::RequestTooLarge,
            429 => ErrorKind::RateLimit,
            504 => ErrorKind::Timeout,
            529 => ErrorKind::Overloaded,
            500..=599 => ErrorKind::Api,
            _ => ErrorKind::InvalidRequest,
        }
    }
}

/// A rejected request: what the API would answer instead of a message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{} ({status}): {message}", kind.type_name())]
pub struct ApiError {
    /// The error type.
    pub kind: ErrorKind,
    /// The human message, worded as the API words it where that wording is known.
    pub message: String,
    /// The HTTP status: the kind's own, unless the error was recorded under another status of
    /// its class (an upstream's 502 is an `api_error` too).
    pub status: u16,
}

impl ApiError {
    /// A 400 `invalid_request_error`.
    pub fn invalid(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorKind::InvalidRequest, message)
    }

    /// An error of any kind, under its kind's status.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> ApiError {
        ApiError { kind, message: message.into(), status: kind.status() }
    }

    /// An error as it was sent: its kind is the status's ([`ErrorKind::from_status`]), and the
    /// status stays what it was.
    pub fn with_status(status: u16, message: impl Into<String>) -> ApiError {
        ApiError { kind: ErrorKind::from_status(status), message: message.into(), status }
    }

    /// The response body: `{"type":"error","error":{"type","message"},"request_id"}`.
    pub fn to_json(&self, request_id: &str) -> String {
        serde_json::json!({
            "type": "error",
            "error": {"type": self.kind.type_name(), "message": self.message},
            "request_id": request_id,
        })
        .to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_body_has_the_api_shape() {
        let err = ApiError::invalid("max_tokens: Field required");
        assert_eq!(
            err.to_json("req_1"),
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: Field required"},"request_id":"req_1"}"#
        );
        assert_eq!(ErrorKind::from_status(529).type_name(), "overloaded_error");
        assert_eq!(ErrorKind::RequestTooLarge.status(), 413);
        // An upstream's 502 stays a 502 when replayed, under the API's type for a 5xx.
        assert_eq!(ApiError::with_status(502, "bad gateway").to_string(), "api_error (502): bad gateway");
        assert_eq!(ApiError::new(ErrorKind::Api, "x").to_string(), "api_error (500): x");
    }
}
