//! The loop itself: one heartbeat per interval, backoff and hedged retries while the hub
//! is unreachable (longer where its `Retry-After` asks), the incarnation rule on sequence
//! rejections, and the config pull.
//!
//! The rules are listed in the [`crate::runner`] module docs.

mod key_rotation;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use ed25519_dalek::SigningKey;
use fleetpulse_common::protocol::replay::Position;
use fleetpulse_common::protocol::report::{ClusterId, HeartbeatAnswer};
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use super::AgentStatus;
use crate::checks::ChecksSource;
use crate::hub_client::attempts::Send;
use crate::hub_client::{Attempts, HubClient, HubError, RetrySchedule};
use crate::metrics::AgentMetrics;
use crate::options::AgentOptions;
use crate::report::{
    ReportBuilder, incarnation_at, sign_config_request, sign_report, unix_seconds,
};
use crate::rotation::RotationSettings;

/// Transient failures in a row are logged at warn for the first and every `LOG_EVERY`th.
const LOG_EVERY: u32 = 10;

/// The retry schedule while the hub is unreachable ([`RetrySchedule`]).
pub fn retry_backoff(interval: Duration) -> RetrySchedule {
    RetrySchedule::new(interval)
}

/// The timeout of one request ([`RetrySchedule::request_timeout`]).
pub fn request_timeout(interval: Duration) -> Duration {
    RetrySchedule::new(interval).request_timeout()
}

/// One agent's loop state, over any [`HubClient`].
pub(crate) struct Agent<H> {
    /// Shared with the requests in flight, so a hedge can run beside a retry.
    hub: Arc<H>,
    key: SigningKey,
    cluster: ClusterId,
    audience: String,
    /// Key rotation and when the next is due (`None`: never on a schedule).
    rotation: Option<(RotationSettings, Option<Instant>)>,
    reports: ReportBuilder,
    checks: Arc<dyn ChecksSource>,
    interval: Duration,
    applied_generation: u64,
    failures: u32,
    status: watch::Sender<AgentStatus>,
    metrics: AgentMetrics,
}

impl<H: HubClient> Agent<H> {
    /// An agent starting now (its incarnation is the current time in milliseconds).
    pub(crate) fn new(hub: H, opts: AgentOptions) -> (Self, watch::Receiver<AgentStatus>) {
        let incarnation = incarnation_at(SystemTime::now());
        let audience = opts.audience.clone();
        let rotation = opts.rotation.map(|r| {
            let due = (!r.every.is_zero()).then(|| Instant::now() + r.every);
            (r, due)
        });
        let reports = ReportBuilder::new(
            opts.audience,
            opts.cluster.clone(),
            opts.cluster_uid,
            incarnation,
        );
        let (status, rx) = watch::channel(AgentStatus::starting(
            opts.cluster.clone(),
            incarnation,
            opts.interval,
        ));
        let agent = Self {
            hub: Arc::new(hub),
            key: opts.key,
            cluster: opts.cluster,
            audience,
            rotation,
            reports,
            checks: opts.checks,
            interval: opts.interval,
            applied_generation: 0,
            failures: 0,
            status,
            metrics: opts.metrics,
        };
        (agent, rx)
    }

    /// Runs until `shutdown` is cancelled; cancellation abandons any request or sleep.
    pub(crate) async fn run(mut self, shutdown: CancellationToken) {
        info!(cluster = %self.cluster, incarnation = self.reports.incarnation(), "agent started");
        shutdown
            .run_until_cancelled(self.finish_staged_rotation())
            .await;
        while let Some(()) = shutdown.run_until_cancelled(self.tick()).await {}
        info!(cluster = %self.cluster, "agent stopped");
    }

    /// One heartbeat (with its retries and config pull), then the wait for the next.
    async fn tick(&mut self) {
        match self.deliver().await {
            Ok((answer, sent_at)) => {
                self.accepted(&answer);
                if answer.config_generation != self.applied_generation {
                    self.pull_config(answer.config_generation).await;
                }
                if self.rotation_due(answer.rotate_key) {
                    self.rotate().await;
                }
                // Paced from the accepted attempt's start, not from its answer: the hub
                // sees one report per interval whatever the network's delay, and a slow
                // answer does not lengthen the next silence (docs/detection.md).
                tokio::time::sleep_until(sent_at + self.interval).await;
            }
            Err(err) => {
                self.refused(&err);
                tokio::time::sleep(self.interval).await;
            }
        }
    }

    /// Sends reports until one is accepted (retrying and hedging transient failures, as
    /// [`Attempts`] plans) or one is refused for good; an accepted report comes with the
    /// moment its request was sent.
    async fn deliver(&mut self) -> Result<(HeartbeatAnswer, Instant), HubError> {
        let origin = Instant::now();
        let mut plan = Attempts::new(retry_backoff(self.interval));
        let mut flying = FuturesUnordered::new();
        // The newest report signed, kept for a hedge: each request takes a copy.
        let mut newest: Option<(String, Position)> = None;
        let mut send = Send::NewReport;
        let mut restarted = false;
        loop {
            let (jws, sent) = match (send, &newest) {
                (Send::Hedge, Some(newest)) => newest.clone(),
                _ => {
                    let report = self.reports.build(
                        unix_seconds(SystemTime::now()),
                        self.interval.as_secs().clamp(1, u32::MAX.into()) as u32,
                        self.applied_generation,
                        self.checks.results(),
                    );
                    let sent = Position {
                        incarnation: report.incarnation,
                        seq: report.seq,
                    };
                    self.status.send_modify(|s| s.last_sent = Some(sent));
                    newest
                        .insert((sign_report(&self.key, &report), sent))
                        .clone()
                }
            };
            if send == Send::Hedge {
                debug!(cluster = %self.cluster, seq = sent.seq, "retry unanswered; sending the same report beside it");
                self.metrics.hedge_sent();
            }
            let (hub, timeout) = (Arc::clone(&self.hub), request_timeout(self.interval));
            let sent_at = Instant::now();
            plan.started(sent_at - origin);
            flying.push(async move {
                // The round trip on the real clock, even where tests pause tokio's.
                let started = std::time::Instant::now();
                let result = match send {
                    Send::NewReport => hub.send_heartbeat(jws, timeout).await,
                    Send::Hedge => hub.send_heartbeat_beside(jws, timeout).await,
                };
                (result, sent, sent_at, started.elapsed())
            });
            // Wait for an answer, or for when the plan sends the next request.
            send = loop {
                let next = plan.next();
                let at = next.map_or(origin, |n| origin + n.at);
                let (result, sent, sent_at, took) = tokio::select! {
                    Some(done) = flying.next() => done,
                    () = tokio::time::sleep_until(at), if next.is_some() => {
                        break next.map_or(Send::NewReport, |n| n.send);
                    }
                };
                let conflict = result.as_ref().err().and_then(HubError::sequence_conflict);
                if conflict == Some(sent) {
                    // Another copy of this report was accepted; its answer is on its way.
                    debug!(cluster = %self.cluster, seq = sent.seq, "a copy of this report was accepted first");
                    plan.overtaken();
                    continue;
                }
                self.metrics.heartbeat(
                    result.as_ref().map(|_| ()).map_err(|e| e.failure()),
                    took,
                    SystemTime::now(),
                );
                let err = match result {
                    Ok(answer) => return Ok((answer, sent_at)),
                    Err(err) => err,
                };
                if !restarted
                    && let Some(last) = conflict
                    && let Some(incarnation) = self.reports.restart_above(last)
                {
                    restarted = true;
                    warn!(
                        cluster = %self.cluster,
                        code = ?err.code(),
                        last_accepted.incarnation = last.incarnation,
                        last_accepted.seq = last.seq,
                        incarnation,
                        error = %err,
                        "hub refused this report's sequence as passed (a hub restart that \
                         may have lost its positions, a clock reset, or a second agent with \
                         the same key); restarting the sequence above it"
                    );
                    self.status.send_modify(|s| s.incarnation = incarnation);
                    // What is still in flight carries the old sequence: start over at once.
                    flying.clear();
                    plan = Attempts::new(retry_backoff(self.interval));
                    break Send::NewReport;
                }
                if !err.is_transient() {
                    return Err(err);
                }
                self.note_failure(&err);
                let (cluster, seq, failures) = (&self.cluster, sent.seq, self.failures);
                // A 503 or 429 with `Retry-After`: at least that long before the next
                // attempt, instead of a shorter backoff.
                let wait = err.retry_after();
                let retry_after_seconds = wait.map(|w| w.as_secs_f64());
                if failures == 1 || failures.is_multiple_of(LOG_EVERY) {
                    warn!(%cluster, seq, failures, retry_after_seconds, error = %err, "heartbeat failed; backing off");
                } else {
                    debug!(%cluster, seq, failures, retry_after_seconds, error = %err, "heartbeat failed; backing off");
                }
                plan.failed_asked_to_wait(Instant::now() - origin, rand::random::<f64>(), wait);
            };
        }
    }

    fn accepted(&mut self, answer: &HeartbeatAnswer) {
        if self.failures > 0 {
            info!(
                cluster = %self.cluster,
                seq = answer.accepted_seq,
                failed_attempts = self.failures,
                "hub accepted a heartbeat again"
            );
        }
        self.failures = 0;
        let interval = Duration::from_secs(answer.interval_seconds.max(1).into());
        if interval != self.interval {
            info!(
                cluster = %self.cluster,
                interval_seconds = interval.as_secs(),
                "adopting the hub's heartbeat interval"
            );
            self.interval = interval;
        }
        let accepted = Position {
            incarnation: answer.incarnation,
            seq: answer.accepted_seq,
        };
        self.status.send_modify(|s| {
            s.last_accepted = Some(accepted);
            s.accepted_total += 1;
            s.interval = interval;
            s.consecutive_failures = 0;
            s.last_error = None;
            s.last_reject_code = None;
        });
    }

    /// Logs a refusal: at error the first time (and every [`LOG_EVERY`]th repeat), so a
    /// revoked key says once, clearly, how to re-enrol instead of flooding the log.
    fn refused(&mut self, err: &HubError) {
        let repeat = self
            .status
            .borrow()
            .last_reject_code
            .is_some_and(|c| Some(c) == err.code());
        self.note_failure(err);
        let (cluster, seq) = (&self.cluster, self.reports.next_seq() - 1);
        let retry_in_seconds = self.interval.as_secs();
        if !repeat || self.failures.is_multiple_of(LOG_EVERY) {
            error!(%cluster, seq, code = ?err.code(), error = %err, retry_in_seconds, "hub refused the heartbeat; fix what the hub's message names");
        } else {
            debug!(%cluster, seq, code = ?err.code(), error = %err, retry_in_seconds, "hub refused the heartbeat again");
        }
    }

    fn note_failure(&mut self, err: &HubError) {
        self.failures = self.failures.saturating_add(1);
        let failures = self.failures;
        self.status.send_modify(|s| {
            s.consecutive_failures = failures;
            s.last_error = Some(err.to_string());
            s.last_reject_code = err.code();
        });
    }

    /// Pulls the config announced as `generation`; on failure the next heartbeat's answer
    /// triggers another pull.
    async fn pull_config(&mut self, generation: u64) {
        let request = self.reports.config_request(unix_seconds(SystemTime::now()));
        let jws = sign_config_request(&self.key, &request);
        match self
            .hub
            .fetch_config(jws, request_timeout(self.interval))
            .await
        {
            Ok(config) => {
                self.checks.apply_config(&config);
                self.applied_generation = config.generation;
                info!(
                    cluster = %self.cluster,
                    generation = config.generation,
                    readiness_checks = config.readiness_checks.len(),
                    liveness_checks = config.liveness_checks.len(),
                    "applied the hub's config"
                );
                let config = Arc::new(config);
                self.status.send_modify(|s| {
                    s.config_generation = config.generation;
                    s.config = Some(config);
                });
            }
            Err(err) => {
                warn!(
                    cluster = %self.cluster,
                    generation,
                    error = %err,
                    "cannot pull the config; retrying after the next heartbeat"
                );
                self.status
                    .send_modify(|s| s.last_error = Some(err.to_string()));
            }
        }
    }
}
