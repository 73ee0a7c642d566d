//! Which hub replica to send a cluster's requests to when replicas share the fleet.
//!
//! A replica that does not own this cluster's shard answers `307 Temporary Redirect` to
//! the replica that does. The agent checks the redirect ([`owner_of`]: an absolute URL,
//! the configured hub's scheme, the same path under the owner's base),
//! resends the request there once, and keeps the owner's base URL ([`Owner`]) for the
//! requests that follow, so the extra round trip is paid once per move, not once per
//! heartbeat. The cached owner is dropped as soon as it refuses: unreachable, `503`, or a
//! redirect of its own (the shard moved), and the next request goes to the configured hub
//! again, whose replicas redirect it to the new owner. The owner is reached with the
//! same TLS trust as the configured hub (its CA or pin), so a redirect cannot send a
//! report to a server the agent would not trust.

use std::sync::Mutex;

use crate::Url;

/// Why a redirect was not followed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RedirectRefused {
    /// The `Location` is not an absolute URL.
    #[error("Location {location:?} is not an absolute URL")]
    NotAbsolute {
        /// The header's value.
        location: String,
    },
    /// The `Location` has another scheme than the configured hub (a downgrade from
    /// HTTPS, or an upgrade the agent has no trust configured for).
    #[error("Location {location} uses {scheme}, but the hub is reached over {hub_scheme}")]
    Scheme {
        /// The header's value.
        location: String,
        /// Its scheme.
        scheme: String,
        /// The configured hub's scheme.
        hub_scheme: String,
    },
    /// The `Location` carries credentials or a fragment.
    #[error("Location {location} carries credentials or a fragment")]
    Extras {
        /// The header's value.
        location: String,
    },
    /// The `Location` names another path than the request's.
    #[error("Location {location} is not for {path}")]
    OtherPath {
        /// The header's value.
        location: String,
        /// The request's path below the hub's base URL.
        path: String,
    },
}

/// The base URL of the replica a redirect names for a request to `path` (below the
/// hub's base URL): the `Location` with `path` taken off its end.
pub fn owner_of(location: &str, hub: &Url, path: &str) -> Result<Url, RedirectRefused> {
    let url = Url::parse(location).map_err(|_| RedirectRefused::NotAbsolute {
        location: location.to_owned(),
    })?;
    if url.scheme() != hub.scheme() {
        return Err(RedirectRefused::Scheme {
            location: location.to_owned(),
            scheme: url.scheme().to_owned(),
            hub_scheme: hub.scheme().to_owned(),
        });
    }
    if !url.username().is_empty() || url.password().is_some() || url.fragment().is_some() {
        return Err(RedirectRefused::Extras {
            location: location.to_owned(),
        });
    }
    let other_path = || RedirectRefused::OtherPath {
        location: location.to_owned(),
        path: path.to_owned(),
    };
    if url.query().is_some() {
        return Err(other_path());
    }
    let base_path = url.path().strip_suffix(path).ok_or_else(other_path)?;
    let mut base = url.clone();
    base.set_path(if base_path.is_empty() { "/" } else { base_path });
    Ok(base)
}

/// The owner a redirect last named, until it refuses.
#[derive(Debug, Default)]
pub struct Owner(Mutex<Option<Url>>);

impl Owner {
    /// The cached owner's base URL, if any.
    pub fn get(&self) -> Option<Url> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Sends later requests to `base`.
    pub fn set(&self, base: Url) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(base);
    }

    /// Drops `base` if it is still the cached owner (a concurrent request may already
    /// have cached a newer one), so the next request goes to the configured hub.
    pub fn forget(&self, base: &Url) {
        let mut owner = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if owner.as_ref() == Some(base) {
            *owner = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PATH: &str = "/v1/clusters/team-a/east-1/heartbeat";

    fn url(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    #[test]
    fn a_redirect_to_the_same_path_names_the_owners_base() {
        let hub = url("https://hub.example:8443");
        let owner = owner_of(&format!("https://hub-1.example:8443{PATH}"), &hub, PATH);
        assert_eq!(owner, Ok(url("https://hub-1.example:8443/")));
        let prefixed = owner_of(&format!("https://h.example/replica-2{PATH}"), &hub, PATH);
        assert_eq!(prefixed, Ok(url("https://h.example/replica-2")));
    }

    #[test]
    fn a_redirect_that_downgrades_or_changes_the_request_is_refused() {
        let hub = url("https://hub.example:8443");
        let plain = owner_of(&format!("http://hub-1.example{PATH}"), &hub, PATH);
        assert!(
            matches!(plain, Err(RedirectRefused::Scheme { .. })),
            "{plain:?}"
        );
        let ftp = owner_of(
            &format!("ftp://hub-1.example{PATH}"),
            &url("http://h"),
            PATH,
        );
        assert!(
            matches!(ftp, Err(RedirectRefused::Scheme { .. })),
            "{ftp:?}"
        );
        let other = owner_of(
            "https://hub-1.example/v1/clusters/x/y/heartbeat",
            &hub,
            PATH,
        );
        assert!(
            matches!(other, Err(RedirectRefused::OtherPath { .. })),
            "{other:?}"
        );
        let query = owner_of(&format!("https://hub-1.example{PATH}?a=1"), &hub, PATH);
        assert!(
            matches!(query, Err(RedirectRefused::OtherPath { .. })),
            "{query:?}"
        );
        let creds = owner_of(&format!("https://u:p@hub-1.example{PATH}"), &hub, PATH);
        assert!(
            matches!(creds, Err(RedirectRefused::Extras { .. })),
            "{creds:?}"
        );
        let relative = owner_of(PATH, &hub, PATH);
        assert!(
            matches!(relative, Err(RedirectRefused::NotAbsolute { .. })),
            "{relative:?}"
        );
    }

    #[test]
    fn an_http_hub_is_sent_on_only_to_http() {
        let hub = url("http://127.0.0.1:8080");
        let owner = owner_of(&format!("http://127.0.0.1:8081{PATH}"), &hub, PATH);
        assert_eq!(owner, Ok(url("http://127.0.0.1:8081/")));
        let tls = owner_of(&format!("https://hub-1.example{PATH}"), &hub, PATH);
        assert!(
            matches!(tls, Err(RedirectRefused::Scheme { .. })),
            "{tls:?}"
        );
    }

    #[test]
    fn forgetting_an_owner_leaves_a_newer_one_cached() {
        let owner = Owner::default();
        let (old, new) = (url("https://a.example/"), url("https://b.example/"));
        owner.set(old.clone());
        owner.set(new.clone());
        owner.forget(&old);
        assert_eq!(owner.get(), Some(new.clone()));
        owner.forget(&new);
        assert_eq!(owner.get(), None);
    }
}
