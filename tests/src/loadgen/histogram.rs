//! Prometheus histograms and counters read back from `/metrics` scrapes: one histogram
//! family's buckets summed over its label sets (and over agents), the difference between
//! two scrapes, and quantiles known only to the bucket they fall in, reported as that
//! bucket's upper bound.

/// Cumulative bucket counts of a histogram, by upper bound (`le`), in increasing order; the
/// last bound is `+Inf` when the scrape had one.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Buckets {
    bounds: Vec<(f64, u64)>,
}

/// The value of the `le` label of a `_bucket` sample's labels (`+Inf` is infinity).
fn le(labels: &str) -> Option<f64> {
    let rest = &labels[labels.find("le=\"")? + 4..];
    let value = &rest[..rest.find('"')?];
    match value {
        "+Inf" => Some(f64::INFINITY),
        v => v.parse().ok(),
    }
}

/// Every sample named exactly `name` in a scrape: its label text (inside the braces, empty
/// when none) and its value.
fn samples<'a>(text: &'a str, name: &'a str) -> impl Iterator<Item = (&'a str, f64)> + 'a {
    text.lines().filter_map(move |line| {
        let rest = line.strip_prefix(name)?;
        let (labels, value) = match rest.strip_prefix('{') {
            Some(inner) => inner.split_once('}')?,
            None if rest.starts_with(' ') => ("", rest),
            None => return None,
        };
        let value = value.split_whitespace().next()?.parse().ok()?;
        Some((labels, value))
    })
}

/// The sum of the samples named `name` (a counter's `..._total`) whose labels contain
/// `with` (every sample when it is empty); 0 when there is none.
pub fn counter(text: &str, name: &str, with: &str) -> u64 {
    samples(text, name)
        .filter(|(labels, _)| labels.contains(with))
        .map(|(_, v)| v as u64)
        .sum()
}

/// The sum of the samples named `name` as a float (a counter of seconds), or `None` when
/// the scrape has none.
pub fn value(text: &str, name: &str) -> Option<f64> {
    samples(text, name).map(|(_, v)| v).reduce(|a, b| a + b)
}

impl Buckets {
    /// The buckets of histogram `family` (its `{family}_bucket` samples) in a scrape, summed
    /// over every label set.
    pub fn parse(text: &str, family: &str) -> Self {
        let mut buckets = Self::default();
        let name = format!("{family}_bucket");
        for (labels, value) in samples(text, &name) {
            if let Some(bound) = le(labels) {
                buckets.add(bound, value as u64);
            }
        }
        buckets
    }

    fn add(&mut self, bound: f64, count: u64) {
        match self.bounds.iter_mut().find(|(b, _)| *b == bound) {
            Some((_, c)) => *c += count,
            None => {
                self.bounds.push((bound, count));
                self.bounds.sort_by(|a, b| a.0.total_cmp(&b.0));
            }
        }
    }

    /// Adds `other`'s counts (another agent's histogram, same buckets) to these.
    pub fn merge(&mut self, other: &Buckets) {
        for &(bound, count) in &other.bounds {
            self.add(bound, count);
        }
    }

    /// What was observed between the scrape `earlier` and this one.
    pub fn since(&self, earlier: &Buckets) -> Buckets {
        let before = |bound: f64| {
            earlier
                .bounds
                .iter()
                .find(|(b, _)| *b == bound)
                .map_or(0, |(_, c)| *c)
        };
        Buckets {
            bounds: self
                .bounds
                .iter()
                .map(|&(b, c)| (b, c.saturating_sub(before(b))))
                .collect(),
        }
    }

    /// Observations counted (the largest bucket's count, `+Inf` when present).
    pub fn count(&self) -> u64 {
        self.bounds.last().map_or(0, |(_, c)| *c)
    }

    /// The upper bound of the bucket the `q` quantile (0 to 1) falls in: the smallest bound
    /// at or below which at least `q` of the observations lie. `None` with no observations;
    /// infinity when it lies above the largest finite bound.
    pub fn quantile_bound(&self, q: f64) -> Option<f64> {
        let count = self.count();
        if count == 0 {
            return None;
        }
        let rank = ((q * count as f64).ceil() as u64).clamp(1, count);
        self.bounds
            .iter()
            .find(|(_, c)| *c >= rank)
            .map(|(b, _)| *b)
    }

    /// The buckets as `le_ms:count` pairs (the count in each bucket alone, not cumulative),
    /// e.g. `5:0 10:12 25:1180 +Inf:0`, for the output.
    pub fn per_bucket_ms(&self) -> String {
        let mut previous = 0;
        self.bounds
            .iter()
            .map(|&(bound, cumulative)| {
                let alone = cumulative.saturating_sub(previous);
                previous = cumulative;
                format!("{}:{alone}", ms(Some(bound)))
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// A bucket bound in seconds written in milliseconds (`50`, `2.5`, `inf`, `nan` for none).
pub fn ms(bound: Option<f64>) -> String {
    match bound {
        None => "nan".to_owned(),
        Some(b) if b.is_infinite() => "inf".to_owned(),
        Some(b) => format!("{}", (b * 1e6).round() / 1e3),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FAMILY: &str = "fleetpulse_agent_heartbeat_duration_seconds";

    fn scrape(accepted: [u64; 4], refused: [u64; 4]) -> String {
        let mut text = format!("# TYPE {FAMILY} histogram\n");
        for (outcome, counts) in [("accepted", accepted), ("refused", refused)] {
            for (le, c) in ["0.01", "0.05", "0.1", "+Inf"].iter().zip(counts) {
                text.push_str(&format!(
                    "{FAMILY}_bucket{{le=\"{le}\",outcome=\"{outcome}\"}} {c}\n"
                ));
            }
            text.push_str(&format!(
                "{FAMILY}_count{{outcome=\"{outcome}\"}} {}\n",
                counts[3]
            ));
        }
        text.push_str("fleetpulse_agent_heartbeats_failed_total{reason=\"unreachable\"} 2\n");
        text.push_str("fleetpulse_agent_heartbeats_failed_total{reason=\"bad_signature\"} 1\n");
        text.push_str("fleetpulse_agent_heartbeats_sent_total 40\n");
        text
    }

    #[test]
    fn buckets_are_summed_over_outcomes_and_agents_and_differenced_between_scrapes() {
        let before = Buckets::parse(&scrape([1, 5, 5, 5], [0, 0, 0, 0]), FAMILY);
        let mut after = Buckets::parse(&scrape([2, 60, 90, 99], [0, 0, 1, 1]), FAMILY);
        assert_eq!(after.count(), 100);
        after.merge(&Buckets::parse(
            &scrape([0, 100, 100, 100], [0, 0, 0, 0]),
            FAMILY,
        ));
        let window = after.since(&before);
        assert_eq!(window.count(), 195);
        assert_eq!(window.per_bucket_ms(), "10:1 50:154 100:31 inf:9");
        // 95 % of 195 is rank 186, just reached in the 100 ms bucket (186 at or below it).
        assert_eq!(window.quantile_bound(0.95), Some(0.1));
        assert_eq!(window.quantile_bound(0.5), Some(0.05));
        assert_eq!(window.quantile_bound(0.99), Some(f64::INFINITY));
        assert_eq!(window.quantile_bound(0.0), Some(0.01));
        assert_eq!(Buckets::default().quantile_bound(0.99), None);
    }

    #[test]
    fn quantile_bounds_print_in_milliseconds() {
        assert_eq!(ms(Some(0.05)), "50");
        assert_eq!(ms(Some(0.0025)), "2.5");
        assert_eq!(ms(Some(f64::INFINITY)), "inf");
        assert_eq!(ms(None), "nan");
    }

    #[test]
    fn counters_are_summed_over_the_labels_asked_for() {
        let text = scrape([0; 4], [0; 4]);
        let failed = "fleetpulse_agent_heartbeats_failed_total";
        assert_eq!(counter(&text, failed, ""), 3);
        assert_eq!(counter(&text, failed, "reason=\"unreachable\""), 2);
        assert_eq!(
            counter(&text, "fleetpulse_agent_heartbeats_sent_total", ""),
            40
        );
        // A name that is a prefix of another's is not summed with it.
        assert_eq!(counter(&text, "fleetpulse_agent_heartbeats", ""), 0);
    }
}
