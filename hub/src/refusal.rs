//! [`Refusal`]: the one type every refused agent request is, from whichever step: its
//! stable code is the HTTP status, the `result` label of the request metrics and the log
//! field; its body is the JSON answer.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use fleetpulse_common::protocol::errors::{ErrorBody, RejectCode};

/// A refused request.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal(pub ErrorBody);

impl Refusal {
    /// A refusal with a code and a message.
    pub fn new(code: RejectCode, message: impl Into<String>) -> Self {
        Self(ErrorBody {
            code,
            message: message.into(),
            last_accepted: None,
        })
    }

    /// The stable code, as the metrics label it.
    pub fn label(&self) -> &'static str {
        self.0.code.as_str()
    }
}

impl From<ErrorBody> for Refusal {
    fn from(body: ErrorBody) -> Self {
        Self(body)
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.0.code.as_str(), self.0.message)
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.0.code.http_status())
            .expect("every reject code maps to a valid status");
        (status, Json(self.0)).into_response()
    }
}
