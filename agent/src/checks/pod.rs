//! Pod checks: run a pod from a template on a schedule and judge the check by the success
//! rate of its recent runs and by its consecutive failures.
//!
//! - [`window`]: [`SuccessWindow`], the verdict over recent runs (pure, time as argument).
//! - [`template`]: the pod of one run from the check's template, and its labels (pure).
//! - [`status`]: what a look at a pod says: finished, failed, not starting, running (pure).
//! - [`watch`]: following one pod to its end, and the log tail of a failure.
//! - [`runner`]: [`PodCheckRunner`], the schedule, cleanup and verdict of one check.
//! - [`settings`]: [`RunnerSettings`], the runner's knobs outside the spec.
//! - [`api`]: [`PodApi`], the Kubernetes operations it needs, and [`PodApiError`].
//! - [`kube_api`]: [`KubePodApi`], the real [`PodApi`] over `kube::Api<Pod>`.

pub mod api;
pub mod kube_api;
pub mod runner;
pub mod settings;
pub mod status;
pub mod template;
pub mod watch;
pub mod window;

#[cfg(test)]
mod fake_api;
#[cfg(test)]
mod runner_loop_tests;
#[cfg(test)]
mod runner_tests;
#[cfg(test)]
mod test_fixtures;

pub use api::{PodApi, PodApiError};
pub use kube_api::KubePodApi;
pub use runner::{PodCheckRunner, RunReport};
pub use settings::RunnerSettings;
pub use window::{SuccessWindow, WindowVerdict};
