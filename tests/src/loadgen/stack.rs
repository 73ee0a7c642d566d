//! A heartbeat against the floor of its stack, in one run ([`super::stats::Stack`]): after
//! the run's timed heartbeat phase, each sitting sends `GET /healthz` on the same schedule
//! and connections (the floor), times one signature in a batch of 32 on the generator's
//! own core, and, until the last sitting, runs another heartbeat phase with the reports
//! that follow. Alternating, so that a host whose speed drifts over the minutes of a run
//! (these do, by more than the gains measured) moves every figure alike.

use std::time::Duration;

use ed25519_dalek::SigningKey;

use super::drive::{self, Driven, Schedule};
use super::hub::ProcSample;
use super::reports::SimAgent;
use super::stats::Stack;
use super::verify;

/// What every phase is sent with.
pub struct Phases<'a> {
    /// The simulated agents and their presigned reports.
    pub agents: &'a [SimAgent],
    /// The connections.
    pub clients: &'a [reqwest::Client],
    /// Each agent's heartbeat URL.
    pub urls: &'a [reqwest::Url],
    /// The hub's `/healthz`.
    pub healthz: &'a reqwest::Url,
    /// Each agent's key, in the order of `agents`.
    pub keys: &'a [SigningKey],
    /// Samples the hub's process.
    pub probe: &'a dyn Fn() -> Option<ProcSample>,
}

/// The run's timed heartbeat phase, the first of the heartbeat phases.
#[derive(Clone, Copy)]
pub struct Timed<'a> {
    /// Its schedule (its warm-up rounds came before it).
    pub schedule: Schedule,
    /// Its rounds: each phase here has as many.
    pub rounds: usize,
    /// What it measured.
    pub first: &'a Driven,
}

/// What the phases here had refused or left unanswered, beyond the run's own phases.
#[derive(Debug, Default)]
pub struct Refused {
    /// Refused by the hub.
    pub rejected: u64,
    /// Without an answer.
    pub failed: u64,
}

/// The hub's CPU per accepted request of a phase, in microseconds (NaN without a sample).
fn per_request(d: &Driven) -> f64 {
    let cpu = d.hub.map_or(f64::NAN, |(a, b)| b.cpu_secs - a.cpu_secs);
    cpu * 1e6 / d.timed.accepted as f64
}

fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

/// Runs `sittings` sittings after `timed` and returns the stack's figures, each phase's
/// printed as it ends.
pub async fn measure(
    p: &Phases<'_>,
    timed: Timed<'_>,
    sittings: usize,
) -> anyhow::Result<(Stack, Refused)> {
    let n = p.agents.len().min(verify::BATCH).min(p.keys.len());
    let inputs: Vec<&[u8]> = (p.agents[..n].iter())
        .map(|a| verify::signing_input(&a.reports[0]).map(str::as_bytes))
        .collect::<anyhow::Result<_>>()?;
    let keys = &p.keys[..n];
    let mut refused = Refused::default();
    let mut hb = vec![per_request(timed.first)];
    let (mut floor, mut batch) = (Vec::new(), Vec::new());
    println!("stack: sitting 1 hb_us={:.2}", hb[0]);
    for sitting in 0..sittings {
        let phase = |floor: bool, offset: usize| Schedule {
            warmup_rounds: 0,
            rounds: timed.rounds,
            offset,
            floor,
            ..timed.schedule
        };
        let driven = drive::drive(
            p.agents,
            p.clients,
            p.urls,
            p.healthz,
            phase(true, 0),
            p.probe,
        )
        .await?;
        count(&mut refused, &driven);
        floor.push(per_request(&driven));
        let signature = tokio::task::block_in_place(|| {
            verify::batch_only(keys, &inputs, Duration::from_secs(2))
        })?;
        batch.push(signature);
        println!(
            "stack: sitting {} floor_us={:.2} batch_sig_us={signature:.2}",
            sitting + 1,
            floor[sitting]
        );
        if sitting + 1 == sittings {
            break;
        }
        let offset = timed.schedule.warmup_rounds + timed.rounds * (sitting + 1);
        let driven = drive::drive(
            p.agents,
            p.clients,
            p.urls,
            p.healthz,
            phase(false, offset),
            p.probe,
        )
        .await?;
        count(&mut refused, &driven);
        hb.push(per_request(&driven));
        println!(
            "stack: sitting {} hb_us={:.2}",
            sitting + 2,
            hb[sitting + 1]
        );
    }
    let stack = Stack {
        floor_us: mean(&floor),
        batch_sig_us: mean(&batch),
        hb_us: mean(&hb),
    };
    Ok((stack, refused))
}

fn count(refused: &mut Refused, d: &Driven) {
    refused.rejected += d.timed.rejected_total();
    refused.failed += d.timed.failed;
}
