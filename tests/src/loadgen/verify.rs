//! The reference the hub is measured against: how many report signatures one core can
//! verify when it does nothing else. `verify_strict` (what the hub runs) over the signing
//! input of a real report, in a loop on one thread, timed by the thread's own CPU clock
//! (`/proc/thread-self/schedstat`), so that other processes on the machine slow the wall
//! clock but not the figure.

use std::time::{Duration, Instant};

use ed25519_dalek::{Signature, Signer, SigningKey};

/// The single-core verification rate.
#[derive(Clone, Copy, Debug)]
pub struct VerifyRate {
    /// Verifications per CPU second of one core (the median of the slices measured).
    pub per_core: f64,
    /// Verifications done.
    pub iterations: u64,
}

/// CPU time the calling thread has run, in nanoseconds (first field of
/// `/proc/thread-self/schedstat`).
pub fn thread_cpu_ns() -> anyhow::Result<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat")?;
    let ns = text
        .split_whitespace()
        .next()
        .ok_or_else(|| anyhow::anyhow!("empty /proc/thread-self/schedstat"))?;
    Ok(ns.parse()?)
}

/// Verifies the JWS signing input `message` (as signed by `key`) strictly, over and over,
/// for about `wall` (in slices of 250 ms), and returns the median rate of the slices.
pub fn verify_only(key: &SigningKey, message: &[u8], wall: Duration) -> anyhow::Result<VerifyRate> {
    let signature: Signature = key.sign(message);
    let public = key.verifying_key();
    let slice = Duration::from_millis(250);
    let mut rates = Vec::new();
    let mut iterations = 0;
    let start = Instant::now();
    while start.elapsed() < wall || rates.is_empty() {
        let (t0, c0) = (Instant::now(), thread_cpu_ns()?);
        let mut n = 0u64;
        while t0.elapsed() < slice {
            for _ in 0..64 {
                public
                    .verify_strict(std::hint::black_box(message), &signature)
                    .map_err(|e| anyhow::anyhow!("reference signature does not verify: {e}"))?;
            }
            n += 64;
        }
        let cpu = thread_cpu_ns()? - c0;
        iterations += n;
        if cpu > 0 {
            rates.push(n as f64 * 1e9 / cpu as f64);
        }
    }
    rates.sort_by(f64::total_cmp);
    Ok(VerifyRate {
        per_core: rates[rates.len() / 2],
        iterations,
    })
}

/// Signatures a hub batch holds (what `cargo bench -p fleetpulse-hub --bench verify`
/// measures one signature of).
pub const BATCH: usize = 32;

/// The CPU time one signature costs in a batch of [`BATCH`], alone: `verify_batch` over
/// `inputs` (signing inputs of real reports, each signed by its key in `keys`, cycled to a
/// full batch), over and over for about `wall` in slices of 250 ms of the thread's CPU
/// time; the median slice's microseconds per signature.
pub fn batch_only(keys: &[SigningKey], inputs: &[&[u8]], wall: Duration) -> anyhow::Result<f64> {
    anyhow::ensure!(
        !keys.is_empty() && keys.len() == inputs.len(),
        "a key per input"
    );
    let messages: Vec<&[u8]> = (0..BATCH).map(|i| inputs[i % inputs.len()]).collect();
    let signatures: Vec<Signature> = (0..BATCH)
        .map(|i| keys[i % keys.len()].sign(messages[i]))
        .collect();
    let public: Vec<_> = (0..BATCH)
        .map(|i| keys[i % keys.len()].verifying_key())
        .collect();
    let slice = Duration::from_millis(250);
    let mut per_signature = Vec::new();
    let start = Instant::now();
    while start.elapsed() < wall || per_signature.is_empty() {
        let (t0, c0) = (Instant::now(), thread_cpu_ns()?);
        let mut n = 0u64;
        while t0.elapsed() < slice {
            ed25519_dalek::verify_batch(std::hint::black_box(&messages), &signatures, &public)
                .map_err(|e| anyhow::anyhow!("the reference batch does not verify: {e}"))?;
            n += BATCH as u64;
        }
        let cpu = thread_cpu_ns()? - c0;
        if cpu > 0 {
            per_signature.push(cpu as f64 / 1e3 / n as f64);
        }
    }
    per_signature.sort_by(f64::total_cmp);
    Ok(per_signature[per_signature.len() / 2])
}

/// [`batch_only`] on a thread of its own that runs only on `cpus` (a `taskset` list, e.g.
/// the hub's, so that the signature alone is timed on the core the hub's figures come
/// from; cores of one virtual machine need not run alike).
pub fn batch_only_on(
    cpus: &str,
    keys: &[SigningKey],
    inputs: &[&[u8]],
    wall: Duration,
) -> anyhow::Result<f64> {
    std::thread::scope(|s| {
        s.spawn(|| {
            pin_this_thread(cpus)?;
            batch_only(keys, inputs, wall)
        })
        .join()
        .map_err(|_| anyhow::anyhow!("the pinned batch measurement panicked"))?
    })
}

/// Restricts the calling thread (not its process) to `cpus`, with `taskset -p` on the
/// thread's id (`/proc/thread-self` names it).
fn pin_this_thread(cpus: &str) -> anyhow::Result<()> {
    let link = std::fs::read_link("/proc/thread-self")?;
    let tid = link
        .file_name()
        .and_then(|t| t.to_str())
        .ok_or_else(|| anyhow::anyhow!("/proc/thread-self is {}", link.display()))?;
    let out = std::process::Command::new("taskset")
        .args(["-p", "-c", cpus, tid])
        .output()
        .map_err(|e| anyhow::anyhow!("cannot run taskset: {e}"))?;
    anyhow::ensure!(
        out.status.success(),
        "taskset -p -c {cpus} {tid}: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(())
}

/// The CPUs the calling thread may run on (the `Cpus_allowed_list` of its status).
pub fn this_thread_cpus() -> anyhow::Result<String> {
    let status = std::fs::read_to_string("/proc/thread-self/status")?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(|l| l.trim().to_owned())
        .ok_or_else(|| anyhow::anyhow!("no Cpus_allowed_list in /proc/thread-self/status"))
}

/// The signing input (`BASE64URL(header) "." BASE64URL(payload)`) of a compact JWS.
pub fn signing_input(compact: &str) -> anyhow::Result<&str> {
    compact
        .rsplit_once('.')
        .map(|(input, _)| input)
        .ok_or_else(|| anyhow::anyhow!("not a compact JWS"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use fleetpulse_common::protocol::keys;

    #[test]
    fn verify_only_reports_a_positive_rate_of_a_report_sized_input() {
        let key = keys::generate();
        let input = "e30.".to_owned() + &"A".repeat(800);
        let rate = verify_only(&key, input.as_bytes(), Duration::ZERO).unwrap();
        assert!(rate.per_core > 0.0 && rate.iterations > 0);
        assert_eq!(signing_input("a.b.c").unwrap(), "a.b");
    }

    #[test]
    fn a_batched_signature_costs_a_positive_time_and_a_forged_batch_is_refused() {
        let keys = [keys::generate(), keys::generate()];
        let inputs = [&b"e30.one"[..], &b"e30.two"[..]];
        let us = batch_only(&keys, &inputs, Duration::ZERO).unwrap();
        assert!(us > 0.0 && us.is_finite());
        assert!(batch_only(&keys[..1], &inputs, Duration::ZERO).is_err());
    }

    #[test]
    fn a_batch_timed_on_given_cpus_runs_there_and_leaves_the_caller_where_it_was() {
        let keys = [keys::generate(), keys::generate()];
        let inputs = [&b"e30.one"[..], &b"e30.two"[..]];
        let before = this_thread_cpus().unwrap();
        // The first CPU this thread may use: a list of one that exists here.
        let first = before.split([',', '-']).next().unwrap().to_owned();
        let us = batch_only_on(&first, &keys, &inputs, Duration::ZERO).unwrap();
        assert!(us > 0.0 && us.is_finite());
        assert_eq!(this_thread_cpus().unwrap(), before);
        let pinned = std::thread::scope(|s| {
            s.spawn(|| pin_this_thread(&first).and_then(|()| this_thread_cpus()))
                .join()
                .unwrap()
        });
        assert_eq!(pinned.unwrap(), first);
        assert!(batch_only_on("no-such-cpu", &keys, &inputs, Duration::ZERO).is_err());
    }
}
