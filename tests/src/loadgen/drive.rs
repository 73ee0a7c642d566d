//! Sending the pre-signed heartbeats on schedule: agent `i` of `n` reports at
//! `start + round * interval + i * interval / n`, so the fleet's load is spread evenly over
//! each interval, as independent agents' phases are. Latency counts from the time a
//! heartbeat was due (not from when it was sent), so a hub that falls behind shows it.
//!
//! The first rounds are a warm-up (a cluster's first reports change its conditions and are
//! written to the store); the timed rounds start, on a fresh schedule, once every warm-up
//! heartbeat is answered, so their latency measures the hub rather than the warm-up's
//! backlog. The hub's CPU time is sampled when the timed rounds start and after their last
//! answer.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use reqwest::header::{ACCEPT, CONTENT_TYPE};
use tokio::sync::Semaphore;

use fleetpulse_common::protocol::CONTENT_TYPE_JOSE;
use fleetpulse_common::protocol::errors::ErrorBody;

use super::hub::ProcSample;
use super::reports::SimAgent;
use super::stats::{Outcome, Tally};

/// When to send.
#[derive(Clone, Copy, Debug)]
pub struct Schedule {
    /// Every agent's heartbeat interval.
    pub interval: Duration,
    /// Rounds before the timed phase.
    pub warmup_rounds: usize,
    /// Rounds in total (each agent sends one report per round).
    pub rounds: usize,
    /// The index, in each agent's presigned reports, of the report of round 0 (a phase
    /// after another sends the reports that follow the other's).
    pub offset: usize,
    /// Most heartbeats in flight at once.
    pub max_in_flight: usize,
    /// Send `GET /healthz` instead of each heartbeat: what the hub spends on an HTTPS
    /// request that does nothing (the transport floor).
    pub floor: bool,
}

/// What a run measured.
#[derive(Debug)]
pub struct Driven {
    /// Outcomes of the warm-up rounds.
    pub warmup: Tally,
    /// Outcomes of the timed rounds.
    pub timed: Tally,
    /// Wall time from the first timed heartbeat to the last answer.
    pub elapsed: Duration,
    /// The hub's process when the timed rounds started and after their last answer.
    pub hub: Option<(ProcSample, ProcSample)>,
    /// The latest any heartbeat was sent after it was due (the generator falling behind).
    pub max_send_lag: Duration,
}

/// Every agent's heartbeat URL on the hub at `base`.
pub fn urls(agents: &[SimAgent], base: &reqwest::Url) -> anyhow::Result<Vec<reqwest::Url>> {
    Ok((agents.iter())
        .map(|a| base.join(&a.path))
        .collect::<Result<Vec<_>, _>>()?)
}

/// Sends every agent's reports, round by round, through `clients` (agent `i` uses client
/// `i % clients.len()` and posts to `urls[i]`; the floor GETs `healthz`); `probe` samples
/// the hub's process.
pub async fn drive(
    agents: &[SimAgent],
    clients: &[reqwest::Client],
    urls: &[reqwest::Url],
    healthz: &reqwest::Url,
    schedule: Schedule,
    probe: &dyn Fn() -> Option<ProcSample>,
) -> anyhow::Result<Driven> {
    anyhow::ensure!(urls.len() == agents.len(), "a URL per agent");
    let tallies = Arc::new([Mutex::new(Tally::default()), Mutex::new(Tally::default())]);
    let permits = Arc::new(Semaphore::new(schedule.max_in_flight));
    let n = agents.len().max(1) as u32;
    let mut start = Instant::now() + Duration::from_millis(100);
    // The round `start` is the time of: the timed rounds start afresh once the warm-up drained.
    let mut start_round = 0;
    let mut timed_start = None;
    let mut before = None;
    let mut max_send_lag = Duration::ZERO;
    for round in 0..schedule.rounds {
        let phase = usize::from(round >= schedule.warmup_rounds);
        if round == schedule.warmup_rounds && round > 0 {
            // Every warm-up heartbeat answered before the first timed one is sent: the
            // timed rounds' latency and CPU are the hub's, not a queue the warm-up left.
            let last_sent = Instant::now();
            drop(permits.acquire_many(schedule.max_in_flight as u32).await?);
            eprintln!(
                "loadgen: warm-up drained {:.1}s after its last heartbeat was sent",
                last_sent.elapsed().as_secs_f64()
            );
            start = Instant::now() + Duration::from_millis(100);
            start_round = round;
        }
        eprintln!(
            "loadgen: round {}/{} ({}), {} heartbeats in flight",
            round + 1,
            schedule.rounds,
            ["warm-up", "timed"][phase],
            schedule.max_in_flight - permits.available_permits()
        );
        for (i, agent) in agents.iter().enumerate() {
            let due = start
                + schedule.interval * (round - start_round) as u32
                + schedule.interval * i as u32 / n;
            tokio::time::sleep_until(due.into()).await;
            let permit = permits.clone().acquire_owned().await?;
            if phase == 1 && timed_start.is_none() {
                before = probe();
                timed_start = Some(Instant::now());
            }
            max_send_lag = max_send_lag.max(due.elapsed());
            let client = &clients[i % clients.len()];
            let request = if schedule.floor {
                client.get(healthz.clone())
            } else {
                client
                    .post(urls[i].clone())
                    .header(CONTENT_TYPE, CONTENT_TYPE_JOSE)
                    .header(ACCEPT, "application/json")
                    .body(agent.reports[schedule.offset + round].clone())
            };
            let tallies = tallies.clone();
            tokio::spawn(async move {
                let outcome = send(request).await;
                tallies[phase]
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .record(outcome, due.elapsed());
                // Release the tallies before the permit: the run reads them once every
                // permit is back.
                drop(tallies);
                drop(permit);
            });
        }
    }
    let _all = permits.acquire_many(schedule.max_in_flight as u32).await?;
    let after = probe();
    let elapsed = timed_start.map_or(Duration::ZERO, |t| t.elapsed());
    let [warmup, timed] = Arc::into_inner(tallies)
        .ok_or_else(|| anyhow::anyhow!("a request task outlived the run"))?
        .map(|t| t.into_inner().unwrap_or_else(PoisonError::into_inner));
    Ok(Driven {
        warmup,
        timed,
        elapsed,
        hub: before.zip(after),
        max_send_lag,
    })
}

async fn send(request: reqwest::RequestBuilder) -> Outcome {
    let response = match request.send().await {
        Ok(r) => r,
        Err(e) => return Outcome::Failed(error_chain(&e)),
    };
    let status = response.status();
    let body = match response.bytes().await {
        Ok(b) => b,
        Err(e) => return Outcome::Failed(error_chain(&e)),
    };
    if status.is_success() {
        return Outcome::Accepted;
    }
    match serde_json::from_slice::<ErrorBody>(&body) {
        Ok(error) => Outcome::Rejected {
            code: error.code.as_str().to_owned(),
            message: error.message,
        },
        Err(_) => Outcome::Rejected {
            code: format!("http_{}", status.as_u16()),
            message: String::from_utf8_lossy(&body).chars().take(200).collect(),
        },
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
