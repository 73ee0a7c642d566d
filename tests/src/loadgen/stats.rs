//! What a run counts (accepted, rejected by code, transport failures, latencies) and the
//! figures it prints, with the machine-readable last line and its parser.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// The outcomes of the heartbeats of one phase (warm-up or timed).
#[derive(Debug, Default)]
pub struct Tally {
    /// Answered 200.
    pub accepted: u64,
    /// Refused by the hub, by rejection code (or HTTP status when the body had none).
    pub rejected: BTreeMap<String, u64>,
    /// No answer (connection, TLS, timeout).
    pub failed: u64,
    /// From the time a heartbeat was due to its answer, in microseconds.
    pub latencies_us: Vec<u32>,
    /// The first few rejection and failure messages, to show what went wrong.
    pub samples: Vec<String>,
}

impl Tally {
    /// Records one answered-or-failed heartbeat.
    pub fn record(&mut self, outcome: Outcome, latency: Duration) {
        self.latencies_us
            .push(latency.as_micros().try_into().unwrap_or(u32::MAX));
        let sample = match outcome {
            Outcome::Accepted => None,
            Outcome::Rejected { code, message } => {
                *self.rejected.entry(code.clone()).or_default() += 1;
                Some(format!("{code}: {message}"))
            }
            Outcome::Failed(message) => {
                self.failed += 1;
                Some(message)
            }
        };
        match sample {
            None => self.accepted += 1,
            Some(s) if self.samples.len() < 5 => self.samples.push(s),
            Some(_) => {}
        }
    }

    /// Every refused heartbeat.
    pub fn rejected_total(&self) -> u64 {
        self.rejected.values().sum()
    }

    /// Latency percentile `p` (0..=100) in milliseconds; sorts the latencies.
    pub fn latency_ms(&mut self, p: f64) -> f64 {
        if self.latencies_us.is_empty() {
            return f64::NAN;
        }
        self.latencies_us.sort_unstable();
        let rank = ((p / 100.0) * (self.latencies_us.len() - 1) as f64).round() as usize;
        f64::from(self.latencies_us[rank]) / 1000.0
    }
}

/// What became of one heartbeat.
#[derive(Debug)]
pub enum Outcome {
    /// 200 with a heartbeat answer.
    Accepted,
    /// Refused.
    Rejected {
        /// The stable code (or `http_<status>`).
        code: String,
        /// The hub's message.
        message: String,
    },
    /// No answer.
    Failed(String),
}

/// A heartbeat against the floor of the stack it runs on, all three measured in one run,
/// in phases that alternate: the hub's CPU per heartbeat (`hb_us`, the mean of the
/// heartbeat phases), per HTTPS request that does nothing (`floor_us`, `GET /healthz` on
/// the same schedule and connections, the mean of the floor phases), and one signature in
/// a batch of 32 alone (`batch_sig_us`, the mean of its measurements, on the hub's CPUs
/// when the hub is pinned, where the other two are measured, else on the load generator's
/// own core). `stack_ratio = hb_us / (floor_us + batch_sig_us)`: 1.0 would be a
/// heartbeat costing the hub nothing but its request and its signature.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stack {
    /// Hub CPU per accepted request of the floor phases, in microseconds.
    pub floor_us: f64,
    /// CPU per signature in a batch of 32, in microseconds.
    pub batch_sig_us: f64,
    /// Hub CPU per accepted heartbeat of the heartbeat phases, in microseconds.
    pub hb_us: f64,
}

impl Stack {
    /// Not measured (a floor run): every figure NaN.
    pub const UNMEASURED: Stack = Stack {
        floor_us: f64::NAN,
        batch_sig_us: f64::NAN,
        hb_us: f64::NAN,
    };

    /// `hb_us / (floor_us + batch_sig_us)`.
    pub fn ratio(&self) -> f64 {
        self.hb_us / (self.floor_us + self.batch_sig_us)
    }
}

/// The last line a run prints:
/// `clusters=N accepted_per_s=X hub_cpu_us_per_hb=Y hub_ingest_per_core=Z
/// verify_only_per_core=V ratio=Z/V allocs_per_hb=A rss_mib=M p99_ms=L floor_us=F
/// batch_sig_us=B hb_us=H stack_ratio=S` ([`Stack`]). CPU and memory figures are NaN when
/// the hub's process is unknown, `allocs_per_hb` when allocations were not counted, the
/// stack's when it was not measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FinalLine {
    /// Simulated clusters.
    pub clusters: usize,
    /// Accepted heartbeats per second of the timed phase.
    pub accepted_per_s: f64,
    /// Hub CPU time (user + system) per accepted heartbeat, in microseconds.
    pub hub_cpu_us_per_hb: f64,
    /// `1e6 / hub_cpu_us_per_hb`: heartbeats one core of the hub would take per second.
    pub hub_ingest_per_core: f64,
    /// Strict single-signature verifications per second of one core.
    pub verify_only_per_core: f64,
    /// `hub_ingest_per_core / verify_only_per_core`.
    pub ratio: f64,
    /// Heap allocations per heartbeat (see [`super::allocs`]).
    pub allocs_per_hb: f64,
    /// The hub's resident memory at the end, in MiB.
    pub rss_mib: f64,
    /// The 99th percentile of the timed heartbeats' latency (due to answer), in ms.
    pub p99_ms: f64,
    /// The heartbeat against the stack's floor.
    pub stack: Stack,
}

const KEYS: [&str; 13] = [
    "clusters",
    "accepted_per_s",
    "hub_cpu_us_per_hb",
    "hub_ingest_per_core",
    "verify_only_per_core",
    "ratio",
    "allocs_per_hb",
    "rss_mib",
    "p99_ms",
    "floor_us",
    "batch_sig_us",
    "hb_us",
    "stack_ratio",
];

impl fmt::Display for FinalLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "clusters={} accepted_per_s={:.1} hub_cpu_us_per_hb={:.2} hub_ingest_per_core={:.0} \
             verify_only_per_core={:.0} ratio={:.3} allocs_per_hb={:.1} rss_mib={:.1} p99_ms={:.2} \
             floor_us={:.2} batch_sig_us={:.2} hb_us={:.2} stack_ratio={:.3}",
            self.clusters,
            self.accepted_per_s,
            self.hub_cpu_us_per_hb,
            self.hub_ingest_per_core,
            self.verify_only_per_core,
            self.ratio,
            self.allocs_per_hb,
            self.rss_mib,
            self.p99_ms,
            self.stack.floor_us,
            self.stack.batch_sig_us,
            self.stack.hb_us,
            self.stack.ratio(),
        )
    }
}

impl FinalLine {
    /// Parses the line [`fmt::Display`] writes (keys in that order, nothing else).
    pub fn parse(line: &str) -> anyhow::Result<FinalLine> {
        let pairs: Vec<(&str, &str)> = line
            .split_whitespace()
            .map(|kv| kv.split_once('=').unwrap_or((kv, "")))
            .collect();
        let keys: Vec<&str> = pairs.iter().map(|(k, _)| *k).collect();
        anyhow::ensure!(keys == KEYS, "not a loadgen final line: {line:?}");
        let num = |i: usize| -> anyhow::Result<f64> {
            pairs[i]
                .1
                .parse()
                .map_err(|e| anyhow::anyhow!("{}={:?}: {e}", pairs[i].0, pairs[i].1))
        };
        Ok(FinalLine {
            clusters: pairs[0].1.parse()?,
            accepted_per_s: num(1)?,
            hub_cpu_us_per_hb: num(2)?,
            hub_ingest_per_core: num(3)?,
            verify_only_per_core: num(4)?,
            ratio: num(5)?,
            allocs_per_hb: num(6)?,
            rss_mib: num(7)?,
            p99_ms: num(8)?,
            stack: Stack {
                floor_us: num(9)?,
                batch_sig_us: num(10)?,
                hb_us: num(11)?,
            },
        })
    }
}

/// Prints the phases' tallies and the hub's figures, the [`FinalLine`] last.
pub fn summarize(
    args: &super::Args,
    d: &mut super::drive::Driven,
    verify_per_core: f64,
    allocs_per_hb: Option<f64>,
    end: Option<super::hub::ProcSample>,
    stack: (Stack, super::stack::Refused),
) -> super::Run {
    let (stack, extra) = stack;
    let secs = d.elapsed.as_secs_f64();
    for (name, tally) in [("warmup", &mut d.warmup), ("timed", &mut d.timed)] {
        println!(
            "{name}: accepted={} rejected={} failed={} {:?}",
            tally.accepted,
            tally.rejected_total(),
            tally.failed,
            tally.rejected
        );
        for sample in &tally.samples {
            println!("  {name} refusal: {sample}");
        }
        println!(
            "{name} latency_ms (due to answer): p50={:.2} p90={:.2} p99={:.2} p99.9={:.2} \
             max={:.2}",
            tally.latency_ms(50.0),
            tally.latency_ms(90.0),
            tally.latency_ms(99.0),
            tally.latency_ms(99.9),
            tally.latency_ms(100.0),
        );
    }
    let accepted_per_s = d.timed.accepted as f64 / secs;
    println!(
        "timed phase {secs:.1}s, max send lag {:.1} ms",
        d.max_send_lag.as_secs_f64() * 1e3
    );
    let cpu = d.hub.map_or(f64::NAN, |(a, b)| b.cpu_secs - a.cpu_secs);
    let hub_cpu_us_per_hb = cpu * 1e6 / d.timed.accepted as f64;
    let rss_mib = end.map_or(f64::NAN, |s| s.rss_kib as f64 / 1024.0);
    println!(
        "hub: cpu_s={cpu:.2} cores_used={:.3} rss_mib={rss_mib:.1}",
        cpu / secs
    );
    // The stack's phases' too: every heartbeat and request of the run.
    let rejected = d.warmup.rejected_total() + d.timed.rejected_total() + extra.rejected;
    let failed = d.warmup.failed + d.timed.failed + extra.failed;
    println!("rejected={rejected} failed={failed}");
    let hub_ingest_per_core = 1e6 / hub_cpu_us_per_hb;
    let line = FinalLine {
        clusters: args.clusters,
        accepted_per_s,
        hub_cpu_us_per_hb,
        hub_ingest_per_core,
        verify_only_per_core: verify_per_core,
        ratio: hub_ingest_per_core / verify_per_core,
        allocs_per_hb: allocs_per_hb.unwrap_or(f64::NAN),
        rss_mib,
        p99_ms: d.timed.latency_ms(99.0),
        stack,
    };
    println!("{line}");
    super::Run {
        line,
        rejected,
        failed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn final_line_round_trips_through_its_text() {
        let line = FinalLine {
            clusters: 10_000,
            accepted_per_s: 1000.25,
            hub_cpu_us_per_hb: 40.0,
            hub_ingest_per_core: 25_000.0,
            verify_only_per_core: 30_000.0,
            ratio: 25.0 / 30.0,
            allocs_per_hb: 64.5,
            rss_mib: 120.5,
            p99_ms: 7.25,
            stack: Stack {
                floor_us: 24.0,
                batch_sig_us: 20.0,
                hb_us: 55.0,
            },
        };
        let text = line.to_string();
        assert!(text.starts_with("clusters=10000 accepted_per_s=1000.2"));
        let back = FinalLine::parse(&text).unwrap();
        assert_eq!(back.clusters, 10_000);
        assert!((back.ratio - 0.833).abs() < 1e-9);
        assert_eq!((back.allocs_per_hb, back.p99_ms), (64.5, 7.25));
        assert!(text.ends_with("hb_us=55.00 stack_ratio=1.250"), "{text}");
        assert_eq!(back.stack.hb_us, 55.0);
        assert!(FinalLine::parse("clusters=1 ratio=2").is_err());
    }

    #[test]
    fn tally_counts_outcomes_and_ranks_latencies() {
        let mut t = Tally::default();
        for ms in 1..=100 {
            t.record(Outcome::Accepted, Duration::from_millis(ms));
        }
        t.record(
            Outcome::Rejected {
                code: "replayed".into(),
                message: "again".into(),
            },
            Duration::ZERO,
        );
        assert_eq!((t.accepted, t.rejected_total(), t.failed), (100, 1, 0));
        assert_eq!(t.latency_ms(50.0), 50.0);
        assert_eq!(t.latency_ms(100.0), 100.0);
        assert_eq!(t.samples, ["replayed: again"]);
    }
}
