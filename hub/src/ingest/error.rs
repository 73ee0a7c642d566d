//! One error type for every refused request: the HTTP status and a JSON
//! [`ErrorBody`] with a stable code, so clients and metrics can tell rejections apart.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use fleetpulse_common::protocol::errors::{ErrorBody, RejectCode};
use fleetpulse_common::protocol::replay::Rejection;

/// A refused request.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError(pub ErrorBody);

impl ApiError {
    /// An error with a code and a message.
    pub fn new(code: RejectCode, message: impl Into<String>) -> Self {
        Self(ErrorBody {
            code,
            message: message.into(),
            last_accepted: None,
        })
    }
}

impl From<Rejection> for ApiError {
    fn from(r: Rejection) -> Self {
        Self(ErrorBody {
            code: r.code,
            message: r.message,
            last_accepted: r.last_accepted,
        })
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.0.code.http_status())
            .expect("every reject code maps to a valid status");
        (status, Json(self.0)).into_response()
    }
}
