//! fleetpulse-common: everything the agent and the hub must agree on.
//!
//! - [`api`]: the Kubernetes API types (`fleetpulse.io/v1alpha1` CRDs) and their validation.
//! - [`protocol`]: the signed heartbeat protocol: report and answer types, JWS signing and
//!   strict verification, key ids, the replay rules and the size limits.
//! - [`enrol`]: bootstrap tokens, the hub CA pin, registration and rotation messages,
//!   and the key-set rules.
//! - [`checks`]: selector templates, label-selector strings, resolved resource queries.
//! - [`compact`]: objects kept as compact JSON text, parsed where they are read.
//! - [`selector`]: Kubernetes label-selector matching.
//! - [`duration`]: Go-style duration strings (`10m`, `1h30m`) as used in check specs.
//! - [`lua`]: the Luau sandbox that evaluates Lua checks over Kubernetes objects.
//! - [`cli`]: what both binaries' command lines share: the log shape and error reporting.
#![forbid(unsafe_code)]

pub mod api;
pub mod checks;
pub mod cli;
pub mod compact;
pub mod duration;
pub mod enrol;
pub mod lua;
pub mod protocol;
pub mod selector;

/// The version of this build, reported by agents and shown by the hub.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
