//! kubesim: an in-process stand-in for the Kubernetes API server, driven through the real
//! `kube` client, with a simulated scheduler/kubelet. It lets fleetpulse test its Kubernetes
//! code with no cluster: CRUD, selectors, paging, patches, status subresources, finalizers,
//! watches (with 410 Gone, closable on demand, counted while open), label ownership under
//! server-side apply, discovery of CRDs registered at runtime, per-request ledgers and a
//! count of the bytes served.
//! It speaks enough for the real `kubectl` too: Tables from printer columns, OpenAPI v3 from
//! CRD schemas (`kubectl explain`), short names, one Event store behind both Event APIs.
//!
//! ```no_run
//! # async fn demo() {
//! let sim = fleetpulse_kubesim::KubeSim::builder().nodes(2).build();
//! let client = sim.client();
//! # let _ = client;
//! # }
//! ```
#![forbid(unsafe_code)]

mod discovery;
pub mod error;
mod events;
mod handlers;
pub mod kubelet;
mod managed_fields;
mod openapi;
mod ops;
mod patch;
pub mod resources;
pub mod reviews;
mod selector;
mod server;
mod sim;
pub mod store;
mod table;
mod wait;
mod watch;

pub use error::ApiError;
pub use kubelet::{Outcome, PodMatcher};
pub use sim::{KubeSim, KubeSimBuilder, kubeconfig};
pub use store::RequestRecord;
pub use wait::eventually;
