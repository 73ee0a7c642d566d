//! PATCH bodies: JSON merge patch, JSON patch, strategic merge (treated as merge) and
//! server-side apply (approximated as a merge that creates when absent; no field ownership).

use crate::error::ApiError;
use serde_json::Value;

/// The patch flavours kubesim understands, by `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    /// `application/merge-patch+json` (RFC 7386).
    Merge,
    /// `application/json-patch+json` (RFC 6902).
    Json,
    /// `application/strategic-merge-patch+json`, applied as a merge patch (lists replaced).
    Strategic,
    /// `application/apply-patch+yaml`, applied as a merge patch that may create the object.
    Apply,
}

impl PatchKind {
    /// Maps a `Content-Type` header value to a patch kind.
    pub fn from_content_type(ct: &str) -> Result<Self, ApiError> {
        let base = ct.split(';').next().unwrap_or_default().trim();
        match base {
            "application/merge-patch+json" => Ok(Self::Merge),
            "application/json-patch+json" => Ok(Self::Json),
            "application/strategic-merge-patch+json" => Ok(Self::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" => Ok(Self::Apply),
            other => Err(ApiError::unsupported_media(other)),
        }
    }

    /// Parses the patch body (YAML for apply, JSON otherwise).
    pub fn parse_body(self, body: &[u8]) -> Result<Value, ApiError> {
        let parsed = if self == Self::Apply {
            serde_yaml_ng::from_slice::<Value>(body).map_err(|e| e.to_string())
        } else {
            serde_json::from_slice::<Value>(body).map_err(|e| e.to_string())
        };
        parsed.map_err(|e| ApiError::bad_request(format!("invalid patch body: {e}")))
    }

    /// Applies a parsed patch to a copy of `doc`.
    pub fn apply(self, doc: &Value, patch: &Value) -> Result<Value, ApiError> {
        let mut out = doc.clone();
        match self {
            Self::Json => {
                let ops: json_patch::Patch = serde_json::from_value(patch.clone())
                    .map_err(|e| ApiError::bad_request(format!("invalid JSON patch: {e}")))?;
                json_patch::patch(&mut out, &ops)
                    .map_err(|e| ApiError::invalid(format!("JSON patch failed: {e}")))?;
            }
            Self::Merge | Self::Strategic | Self::Apply => json_patch::merge(&mut out, patch),
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_null_removes_and_objects_merge() {
        let doc = json!({"a": {"b": 1, "c": 2}, "d": 3});
        let out = PatchKind::Merge
            .apply(&doc, &json!({"a": {"b": null, "e": 5}}))
            .unwrap();
        assert_eq!(out, json!({"a": {"c": 2, "e": 5}, "d": 3}));
    }

    #[test]
    fn json_patch_test_op_failure_is_invalid() {
        let doc = json!({"a": 1});
        let err = PatchKind::Json
            .apply(&doc, &json!([{"op": "test", "path": "/a", "value": 2}]))
            .unwrap_err();
        assert_eq!(err.code, 422);
    }

    #[test]
    fn unknown_content_type_is_415() {
        assert_eq!(
            PatchKind::from_content_type("text/plain").unwrap_err().code,
            415
        );
    }
}
