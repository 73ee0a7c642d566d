//! What one signature costs a core: `verify_strict` alone, and in batches of each size
//! ([`verify_many`], as the hub's batch verifier calls it), over a signing input the size
//! of the load generator's reports (1,670 bytes, with its default 4 checks). Each figure is
//! the median of 100 ms slices of this thread's CPU time, and the batch figures are also
//! given as a ratio to the strict one measured in the same run.
//!
//! `cargo bench -p fleetpulse-hub --bench verify` (set `VERIFY_BENCH_SECONDS` to measure
//! each figure longer than 1 s).

use std::time::{Duration, Instant};

use ed25519_dalek::{Signature, Signer, SigningKey};

use fleetpulse_common::protocol::jws::batch::{Item, verify_many};
use fleetpulse_common::protocol::keys::{self, StrongKey};

/// CPU time this thread has run, in nanoseconds.
fn thread_cpu_ns() -> u64 {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat")
        .expect("/proc/thread-self/schedstat is readable (Linux)");
    text.split_whitespace()
        .next()
        .and_then(|ns| ns.parse().ok())
        .expect("schedstat starts with the thread's CPU nanoseconds")
}

/// Signatures per CPU second of `round`, which checks `per_round` signatures: the median
/// of slices of `wall` in total.
fn rate(per_round: usize, wall: Duration, mut round: impl FnMut()) -> f64 {
    let slice = Duration::from_millis(100);
    let start = Instant::now();
    let mut rates = Vec::new();
    while start.elapsed() < wall || rates.len() < 3 {
        let (t0, c0) = (Instant::now(), thread_cpu_ns());
        let mut n = 0;
        while t0.elapsed() < slice {
            round();
            n += per_round;
        }
        let cpu = thread_cpu_ns() - c0;
        if cpu > 0 {
            rates.push(n as f64 * 1e9 / cpu as f64);
        }
    }
    rates.sort_by(f64::total_cmp);
    rates[rates.len() / 2]
}

fn main() {
    let wall = std::env::var("VERIFY_BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .map_or(Duration::from_secs(1), Duration::from_secs_f64);
    let signed: Vec<(Vec<u8>, Signature, StrongKey)> = (0..256)
        .map(|i| {
            let key: SigningKey = keys::generate();
            let message = format!("eyJhbGciOiJFZERTQSJ9.{i:04}{}", "A".repeat(1645)).into_bytes();
            let signature = key.sign(&message);
            (message, signature, StrongKey::of(&key))
        })
        .collect();
    let (m, s, k) = &signed[0];
    let strict = rate(1, wall, || {
        assert!(k.verify_strict(std::hint::black_box(m), s).is_ok());
    });
    println!(
        "strict: {strict:.0} signatures per CPU second ({:.2} us each)",
        1e6 / strict
    );
    for size in [2, 4, 8, 16, 32, 48, 64, 96, 128, 256] {
        let items: Vec<Item<'_>> = signed[..size]
            .iter()
            .map(|(message, signature, key)| Item {
                message,
                signature,
                key,
            })
            .collect();
        let batched = rate(size, wall, || {
            let verdicts = verify_many(std::hint::black_box(&items));
            assert!(verdicts.iter().all(|v| *v));
        });
        println!(
            "batch={size}: {batched:.0} signatures per CPU second ({:.2} us each, {:.2}x strict)",
            1e6 / batched,
            batched / strict
        );
    }
}
