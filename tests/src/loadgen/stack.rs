//! A heartbeat against the floor of its stack, in one run ([`super::stats::Stack`]): after
//! the run's timed heartbeat phase, each sitting sends `GET /healthz` on the same schedule
//! and connections (the floor), times one signature in a batch of 32 alone (on the hub's
//! cores when the hub is pinned, as the floor and the heartbeat are measured there, and on
//! the generator's own core beside it), and, until the last sitting, runs another heartbeat phase with the reports
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
    /// The CPUs the hub is pinned to (`--hub-cpus`), if it is.
    pub hub_cpus: Option<&'a str>,
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
    let (mut floor, mut batch, mut batch_here) = (Vec::new(), Vec::new(), Vec::new());
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
        let (signature, here) = tokio::task::block_in_place(|| signature_alone(p, keys, &inputs))?;
        batch.push(signature);
        batch_here.push(here);
        println!(
            "stack: sitting {} floor_us={:.2} batch_sig_us={signature:.2} ({}; on the load \
             generator's core {here:.2})",
            sitting + 1,
            floor[sitting],
            p.hub_cpus
                .map_or("the hub is not pinned".to_owned(), |c| format!(
                    "on the hub's CPUs {c}"
                )),
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
    let here = Stack {
        batch_sig_us: mean(&batch_here),
        ..stack
    };
    println!(
        "stack: with the signature alone timed on the load generator's core instead: \
         batch_sig_us={:.2} stack_ratio={:.3}",
        here.batch_sig_us,
        here.ratio()
    );
    Ok((stack, refused))
}

/// One signature in a batch of 32 alone: on the hub's CPUs when it is pinned (else on the
/// generator's core), and on the generator's core.
fn signature_alone(
    p: &Phases<'_>,
    keys: &[SigningKey],
    inputs: &[&[u8]],
) -> anyhow::Result<(f64, f64)> {
    let wall = Duration::from_secs(2);
    let here = verify::batch_only(keys, inputs, wall)?;
    let there = match p.hub_cpus {
        Some(cpus) => verify::batch_only_on(cpus, keys, inputs, wall)?,
        None => here,
    };
    Ok((there, here))
}

fn count(refused: &mut Refused, d: &Driven) {
    refused.rejected += d.timed.rejected_total();
    refused.failed += d.timed.failed;
}
