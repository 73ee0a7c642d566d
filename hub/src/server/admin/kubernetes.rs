//! Admin callers authenticated and authorized by the management cluster, as
//! kube-rbac-proxy does: the bearer token goes to a `TokenReview`
//! (`authentication.k8s.io/v1`, the API server's default audience); the user it names
//! goes to a `SubjectAccessReview` (`authorization.k8s.io/v1`) for verb `get` on the
//! request's path as a non-resource URL (`/v1/memberclusters`, `/metrics`, ...), which a
//! ClusterRole grants with `nonResourceURLs: ["/v1/*", "/metrics"]`. Every request is
//! reviewed (nothing is cached), two small API calls each.

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};

use fleetpulse_common::protocol::errors::RejectCode;

use crate::refusal::Refusal;

/// Reviews tokens and access with the management cluster's API.
pub(crate) struct Reviewer {
    client: kube::Client,
}

impl Reviewer {
    pub(crate) fn new(client: kube::Client) -> Self {
        Self { client }
    }

    /// Allows `token` to `get` `path`, or says why not.
    pub(crate) async fn review(&self, token: &str, path: &str) -> Result<(), Refusal> {
        let reviews: Api<TokenReview> = Api::all(self.client.clone());
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_owned(),
                audiences: None,
            },
            ..Default::default()
        };
        let answer = reviews
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| unavailable("TokenReview", &e))?;
        let status = answer.status.unwrap_or_default();
        let user = match (status.authenticated, status.user) {
            (Some(true), Some(user)) => user,
            _ => {
                let why = status.error.map(|e| format!(" ({e})")).unwrap_or_default();
                return Err(Refusal::new(
                    RejectCode::Unauthenticated,
                    format!(
                        "the management cluster did not authenticate this bearer token{why}: \
                         send a valid Kubernetes token, e.g. a ServiceAccount's"
                    ),
                ));
            }
        };
        let name = user.username.clone().unwrap_or_default();
        let access = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username,
                groups: user.groups,
                uid: user.uid,
                extra: user.extra,
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(path.to_owned()),
                    verb: Some("get".into()),
                }),
                resource_attributes: None,
            },
            ..Default::default()
        };
        let answer = Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &access)
            .await
            .map_err(|e| unavailable("SubjectAccessReview", &e))?;
        let status = answer.status.unwrap_or_default();
        if status.allowed {
            return Ok(());
        }
        let why = status.reason.map(|r| format!(" ({r})")).unwrap_or_default();
        Err(Refusal::new(
            RejectCode::Forbidden,
            format!(
                "{name} may not get {path} on this hub{why}: grant it a ClusterRole with \
                 nonResourceURLs [\"/v1/*\", \"/metrics\"] and verbs [\"get\"]"
            ),
        ))
    }
}

fn unavailable(what: &str, error: &kube::Error) -> Refusal {
    tracing::warn!(error = %error, "{what} for an admin request failed");
    Refusal::new(
        RejectCode::Unavailable,
        format!("the hub could not ask the management cluster for a {what} ({error}); retry"),
    )
}
