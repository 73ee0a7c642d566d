//! [`AgentMetrics`]: the agent's Prometheus metrics (`prometheus-client`), recorded by the
//! heartbeat loop (one call per attempt, with its round trip) and the check engine (one
//! call per round), and encoded on `/metrics`. Per-check gauges are rebuilt from the
//! checks' current results at each scrape, so a check removed from the config disappears
//! from the next scrape.
//! docs/metrics.md lists every metric.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, SystemTime};

use parking_lot::Mutex;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::family::MetricConstructor;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

use fleetpulse_common::protocol::report::CheckResult;

/// `reason` label of failed heartbeats.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

/// `outcome` label of the heartbeat round-trip histogram.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

/// Upper bounds (seconds) of the heartbeat round-trip buckets: Prometheus' default
/// buckets, fine enough to say "p99 below 100 ms" from a scrape.
pub const HEARTBEAT_DURATION_BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Builds each `outcome`'s histogram with [`HEARTBEAT_DURATION_BUCKETS`].
#[derive(Clone, Copy, Debug, Default)]
struct HeartbeatBuckets;

impl MetricConstructor<Histogram> for HeartbeatBuckets {
    fn new_metric(&self) -> Histogram {
        Histogram::new(HEARTBEAT_DURATION_BUCKETS)
    }
}

/// Labels of the per-check result gauges.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CheckLabels {
    check: String,
    phase: &'static str,
    kind: String,
}

/// `check` label of the duration gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CheckNameLabels {
    check: String,
}

/// The agent's metrics. Cheap to clone (one shared set); the default is a fresh set that
/// nobody serves, which costs a few atomics per heartbeat.
#[derive(Clone, Debug, Default)]
pub struct AgentMetrics {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    registry: Registry,
    sent: Counter,
    hedges: Counter,
    failed: Family<ReasonLabels, Counter>,
    heartbeat_duration: Family<OutcomeLabels, Histogram, HeartbeatBuckets>,
    last_accepted: Gauge<f64, AtomicU64>,
    check_passing: Family<CheckLabels, Gauge>,
    check_failures: Family<CheckLabels, Gauge>,
    check_duration: Family<CheckNameLabels, Gauge<f64, AtomicU64>>,
    round_duration: Histogram,
    lua_memory: Gauge,
    /// Last run duration per check name, in seconds.
    durations: Mutex<HashMap<String, f64>>,
    /// One scrape at a time rebuilds the per-check gauges.
    scrape: Mutex<()>,
}

impl Default for Inner {
    fn default() -> Self {
        let mut inner = Inner {
            registry: Registry::default(),
            sent: Counter::default(),
            hedges: Counter::default(),
            failed: Family::default(),
            heartbeat_duration: Family::new_with_constructor(HeartbeatBuckets),
            last_accepted: Gauge::default(),
            check_passing: Family::default(),
            check_failures: Family::default(),
            check_duration: Family::default(),
            // 1 ms to about 65 s.
            round_duration: Histogram::new(exponential_buckets(0.001, 4.0, 9)),
            lua_memory: Gauge::default(),
            durations: Mutex::default(),
            scrape: Mutex::default(),
        };
        let r = inner.registry.sub_registry_with_prefix("fleetpulse_agent");
        r.register(
            "heartbeats_sent",
            "Signed heartbeat reports sent to the hub (every attempt, retries included)",
            inner.sent.clone(),
        );
        r.register(
            "heartbeat_hedges",
            "Hedged heartbeat copies sent: the report of a retry left unanswered for a third of the request timeout, sent again beside it over a second connection",
            inner.hedges.clone(),
        );
        r.register(
            "heartbeats_failed",
            "Heartbeat attempts that failed, by reason: unreachable, http_error, bad_answer or the hub's rejection code",
            inner.failed.clone(),
        );
        r.register_with_unit(
            "heartbeat_duration",
            "Round trip of each heartbeat attempt, from sending the signed report to the hub's answer (or the transport error), by outcome: accepted, refused (any other answer) or no_answer",
            Unit::Seconds,
            inner.heartbeat_duration.clone(),
        );
        r.register_with_unit(
            "last_accepted_heartbeat_timestamp",
            "When the hub last accepted a heartbeat (Unix time; absent until it has)",
            Unit::Seconds,
            inner.last_accepted.clone(),
        );
        r.register(
            "check_passing",
            "1 when the check counts as passing (thresholds applied), 0 when failing",
            inner.check_passing.clone(),
        );
        r.register(
            "check_consecutive_failures",
            "Consecutive failed runs of the check",
            inner.check_failures.clone(),
        );
        r.register_with_unit(
            "check_duration",
            "How long the check's last run took (Lua checks: the Lua batch they ran in)",
            Unit::Seconds,
            inner.check_duration.clone(),
        );
        r.register_with_unit(
            "check_round_duration",
            "How long a round of due checks took, listing and probes included",
            Unit::Seconds,
            inner.round_duration.clone(),
        );
        r.register_with_unit(
            "lua_memory",
            "Memory the last round's Lua state held after evaluating its Lua checks",
            Unit::Bytes,
            inner.lua_memory.clone(),
        );
        inner
    }
}

/// How a heartbeat attempt failed, as the metrics label it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Failure {
    /// Whether the hub answered (it refused) rather than not at all.
    pub answered: bool,
    /// The `reason` label: the hub's rejection code, or what kind of transport failure.
    pub reason: &'static str,
}

/// The `outcome` label of a heartbeat attempt's round trip.
fn outcome(result: Result<(), Failure>) -> &'static str {
    match result {
        Ok(()) => "accepted",
        Err(Failure {
            answered: false, ..
        }) => "no_answer",
        Err(_) => "refused",
    }
}

impl AgentMetrics {
    /// Records one heartbeat attempt: sent, its round trip `took` (from sending the report
    /// to the answer or the error), and accepted at `now` or failed.
    pub fn heartbeat(&self, result: Result<(), Failure>, took: Duration, now: SystemTime) {
        let m = &self.inner;
        m.sent.inc();
        m.heartbeat_duration
            .get_or_create(&OutcomeLabels {
                outcome: outcome(result),
            })
            .observe(took.as_secs_f64());
        match result {
            Ok(()) => {
                let unix = now
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .unwrap_or_default();
                m.last_accepted.set(unix.as_secs_f64());
            }
            Err(err) => {
                m.failed
                    .get_or_create(&ReasonLabels { reason: err.reason })
                    .inc();
            }
        }
    }

    /// Records a hedge: the report of an unanswered retry sent again beside it.
    pub fn hedge_sent(&self) {
        self.inner.hedges.inc();
    }

    /// When the hub last accepted a heartbeat.
    pub fn last_accepted(&self) -> Option<SystemTime> {
        let seconds = self.inner.last_accepted.get();
        (seconds > 0.0).then(|| SystemTime::UNIX_EPOCH + Duration::from_secs_f64(seconds))
    }

    /// Records one round of checks: each check's run duration, the round's, and the bytes
    /// its Lua state held when it ran Lua checks. A round that ran nothing is not counted.
    pub fn check_round<'a>(
        &self,
        checks: impl IntoIterator<Item = (&'a str, Duration)>,
        round: Duration,
        lua_memory: Option<usize>,
    ) {
        let mut durations = self.inner.durations.lock();
        let mut ran = false;
        for (name, took) in checks {
            durations.insert(name.to_owned(), took.as_secs_f64());
            ran = true;
        }
        drop(durations);
        if ran {
            self.inner.round_duration.observe(round.as_secs_f64());
        }
        if let Some(bytes) = lua_memory {
            let bytes = i64::try_from(bytes).unwrap_or(i64::MAX);
            self.inner.lua_memory.set(bytes);
        }
    }

    /// The metrics in the Prometheus text format, with per-check gauges for `checks` (the
    /// current results).
    pub fn encode(&self, checks: &[CheckResult]) -> String {
        let m = &self.inner;
        let _one_scrape = m.scrape.lock();
        m.check_passing.clear();
        m.check_failures.clear();
        m.check_duration.clear();
        let durations = m.durations.lock();
        for c in checks {
            let labels = CheckLabels {
                check: c.name.clone(),
                phase: match c.phase {
                    fleetpulse_common::api::CheckPhase::Readiness => "readiness",
                    fleetpulse_common::api::CheckPhase::Liveness => "liveness",
                },
                kind: kind_label(c),
            };
            m.check_passing
                .get_or_create(&labels)
                .set(i64::from(c.passing));
            m.check_failures
                .get_or_create(&labels)
                .set(i64::from(c.consecutive_failures));
            if let Some(took) = durations.get(&c.name) {
                m.check_duration
                    .get_or_create(&CheckNameLabels {
                        check: c.name.clone(),
                    })
                    .set(*took);
            }
        }
        drop(durations);
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &m.registry)
            .expect("writing to a String cannot fail");
        out
    }
}

/// The check kind as the protocol spells it (`lua`, `http`, `apiServer`, ...).
fn kind_label(check: &CheckResult) -> String {
    match serde_json::to_value(check.kind) {
        Ok(serde_json::Value::String(kind)) => kind,
        _ => format!("{:?}", check.kind),
    }
}

#[cfg(test)]
mod tests;
