//! The one error type of the API surface, rendered as a Kubernetes `Status` object so that
//! kube's error parsing yields `kube::Error::Api` with the right code and reason.

use axum::{
    Json,
    http::StatusCode,
    response::{IntoResponse, Response},
};
use serde_json::{Value, json};

/// A failed API request: HTTP code, Kubernetes `reason`, human message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason} ({code}): {message}")]
pub struct ApiError {
    /// HTTP status code, repeated as `code` in the Status body.
    pub code: u16,
    /// Machine-readable reason, e.g. `NotFound`, `AlreadyExists`, `Conflict`.
    pub reason: &'static str,
    /// Human-readable message saying what failed for which object.
    pub message: String,
}

impl ApiError {
    /// 404 for a missing object, phrased like the real API server.
    pub fn not_found(resource: &str, name: &str) -> Self {
        Self {
            code: 404,
            reason: "NotFound",
            message: format!("{resource} \"{name}\" not found"),
        }
    }

    /// 404 for a path that names no served resource.
    pub fn no_route(path: &str) -> Self {
        Self {
            code: 404,
            reason: "NotFound",
            message: format!("the server could not find the requested resource ({path})"),
        }
    }

    /// 500 for a request the test made the server refuse.
    pub fn internal(message: impl Into<String>) -> Self {
        Self {
            code: 500,
            reason: "InternalError",
            message: message.into(),
        }
    }

    /// 409 for a create whose name is taken.
    pub fn already_exists(resource: &str, name: &str) -> Self {
        Self {
            code: 409,
            reason: "AlreadyExists",
            message: format!("{resource} \"{name}\" already exists"),
        }
    }

    /// 409 for an update carrying a stale `metadata.resourceVersion`.
    pub fn conflict(resource: &str, name: &str) -> Self {
        Self {
            code: 409,
            reason: "Conflict",
            message: format!(
                "Operation cannot be fulfilled on {resource} \"{name}\": the object has been \
                 modified; please apply your changes to the latest version and try again"
            ),
        }
    }

    /// 409 for a server-side apply that would change a label another manager owns.
    pub fn apply_conflict(resource: &str, name: &str, label: &str, owners: &[String]) -> Self {
        Self {
            code: 409,
            reason: "Conflict",
            message: format!(
                "Apply failed with 1 conflict: conflict with {:?}: .metadata.labels.{label} \
                 (on {resource} \"{name}\"; apply with force to take it over)",
                owners.join(", ")
            ),
        }
    }

    /// 400 for a malformed request.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self {
            code: 400,
            reason: "BadRequest",
            message: message.into(),
        }
    }

    /// 422 for an object that fails the (minimal) validation kubesim performs.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self {
            code: 422,
            reason: "Invalid",
            message: message.into(),
        }
    }

    /// 405 for a verb the path does not support.
    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self {
            code: 405,
            reason: "MethodNotAllowed",
            message: message.into(),
        }
    }

    /// 410 for a watch from a resourceVersion older than the retained history.
    pub fn gone(rv: u64) -> Self {
        Self {
            code: 410,
            reason: "Expired",
            message: format!("too old resource version: {rv}"),
        }
    }

    /// 415 for a PATCH with an unknown content type.
    pub fn unsupported_media(content_type: &str) -> Self {
        Self {
            code: 415,
            reason: "UnsupportedMediaType",
            message: format!("the body of the request was in an unknown format: {content_type}"),
        }
    }

    /// The `Status` object for this error.
    pub fn status(&self) -> Value {
        json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        })
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (code, Json(self.status())).into_response()
    }
}
