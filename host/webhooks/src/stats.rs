//! What an operator sees of deliveries: per subscription its counters and
//! histograms (delivered, failed, retried, given up; attempt latency and
//! commit-to-delivery time; lag), and a status (position, lag, last
//! attempts, next retry, state). Plain data: a server renders it in its
//! own `/metrics` ([`render_prometheus`] is one way). Labels are the
//! tenant and the subscription id, both server-made and bounded in number
//! by the per-tenant bound on subscriptions. It must never hold a body or
//! a secret.

use std::fmt::Write as _;
use std::time::SystemTime;

use crate::store::{AttemptRecord, SubState};

/// Upper bounds (seconds) of the latency buckets.
pub const LATENCY_BUCKETS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

/// A histogram: counts per bucket (the last one unbounded), their sum
/// and number.
#[derive(Clone, Debug, PartialEq)]
pub struct Histogram {
    /// Upper bounds of the buckets, ascending; one more bucket holds the rest.
    pub bounds: &'static [f64],
    /// Observations per bucket (not cumulative), `bounds.len() + 1` of them.
    pub counts: Vec<u64>,
    /// The sum of every observation.
    pub sum: f64,
    /// How many observations.
    pub count: u64,
}

impl Histogram {
    /// An empty histogram over `bounds`.
    pub fn new(bounds: &'static [f64]) -> Histogram {
        Histogram {
            bounds,
            counts: vec![0; bounds.len() + 1],
            sum: 0.0,
            count: 0,
        }
    }

    /// Adds one observation.
    pub fn observe(&mut self, v: f64) {
        let i = self.bounds.partition_point(|b| *b < v);
        self.counts[i] += 1;
        self.sum += v;
        self.count += 1;
    }

    /// The smallest bucket bound at or below which at least `q` (0 to 1) of
    /// the observations lie: an upper estimate of the quantile.
    pub fn quantile_bound(&self, q: f64) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let want = (q * self.count as f64).ceil() as u64;
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= want.max(1) {
                return Some(self.bounds.get(i).copied().unwrap_or(f64::INFINITY));
            }
        }
        Some(f64::INFINITY)
    }
}

/// One subscription's counters since this process started delivering it.
#[derive(Clone, Debug, PartialEq)]
pub struct SubscriptionMetrics {
    /// The tenant.
    pub tenant: String,
    /// The subscription.
    pub subscription: String,
    /// Entries acknowledged.
    pub delivered: u64,
    /// Attempts that failed (any answer but 2xx, or none).
    pub failed: u64,
    /// Attempts after an entry's first.
    pub retried: u64,
    /// Entries given up (the subscription went failing) or refused with
    /// `410 Gone` (it paused).
    pub given_up: u64,
    /// Each attempt's time.
    pub attempt_seconds: Histogram,
    /// From a change's commit to its acknowledgement.
    pub delivery_seconds: Histogram,
    /// Feed entries after what was delivered, as of the last read.
    pub lag_entries: u64,
    /// Age of the oldest entry still owed (0 when none is).
    pub lag_seconds: f64,
}

impl SubscriptionMetrics {
    pub(crate) fn new(tenant: &str, subscription: &str) -> SubscriptionMetrics {
        SubscriptionMetrics {
            tenant: tenant.to_owned(),
            subscription: subscription.to_owned(),
            delivered: 0,
            failed: 0,
            retried: 0,
            given_up: 0,
            attempt_seconds: Histogram::new(&LATENCY_BUCKETS),
            delivery_seconds: Histogram::new(&LATENCY_BUCKETS),
            lag_entries: 0,
            lag_seconds: 0.0,
        }
    }
}

/// What this process is doing for a subscription it delivers.
#[derive(Clone, Debug, PartialEq)]
pub struct Running {
    /// The position delivered up to, as this worker knows it (it is
    /// written to the store at most a moment later).
    pub delivered_to: String,
    /// Entries being delivered (one per task or timer at most).
    pub in_flight: usize,
    /// Entries read and owed, waiting their turn.
    pub queued: usize,
    /// Bytes of bodies held.
    pub queued_bytes: usize,
    /// The soonest retry planned.
    pub next_retry: Option<SystemTime>,
    /// Feed entries after `delivered_to`, as of the last read.
    pub lag_entries: u64,
    /// Age of the oldest entry still owed (0 when none is).
    pub lag_seconds: f64,
    /// The last attempts, oldest first.
    pub last_attempts: Vec<AttemptRecord>,
}

/// One subscription as an operator sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct SubscriptionStatus {
    /// Its id.
    pub id: String,
    /// Its state.
    pub state: SubState,
    /// Why it is in that state.
    pub note: Option<String>,
    /// Its revision.
    pub revision: u64,
    /// The durable position (what the store holds).
    pub position: Option<String>,
    /// The attempts the store recorded, oldest first.
    pub recorded_attempts: Vec<AttemptRecord>,
    /// What this process is doing for it, if it delivers it.
    pub running: Option<Running>,
    /// Whether the tenant's bound on subscriptions leaves it undelivered.
    pub over_bound: bool,
}

/// Metrics in Prometheus' text format: counters `leasehold_webhook_*_total`,
/// histograms `leasehold_webhook_attempt_seconds` and
/// `leasehold_webhook_delivery_seconds`, gauges `leasehold_webhook_lag_*`,
/// each labelled by tenant and subscription.
pub fn render_prometheus(metrics: &[SubscriptionMetrics]) -> String {
    let mut out = String::new();
    let label = |m: &SubscriptionMetrics| {
        format!(
            "tenant=\"{}\",subscription=\"{}\"",
            escape(&m.tenant),
            escape(&m.subscription)
        )
    };
    for (name, kind, get) in [
        (
            "delivered_total",
            "counter",
            (|m| m.delivered as f64) as fn(&SubscriptionMetrics) -> f64,
        ),
        ("failed_attempts_total", "counter", |m| m.failed as f64),
        ("retried_attempts_total", "counter", |m| m.retried as f64),
        ("given_up_total", "counter", |m| m.given_up as f64),
        ("lag_entries", "gauge", |m| m.lag_entries as f64),
        ("lag_seconds", "gauge", |m| m.lag_seconds),
    ] {
        let _ = writeln!(out, "# TYPE leasehold_webhook_{name} {kind}");
        for m in metrics {
            let _ = writeln!(out, "leasehold_webhook_{name}{{{}}} {}", label(m), get(m));
        }
    }
    for (name, get) in [
        (
            "attempt_seconds",
            (|m| &m.attempt_seconds) as fn(&SubscriptionMetrics) -> &Histogram,
        ),
        ("delivery_seconds", |m| &m.delivery_seconds),
    ] {
        let _ = writeln!(out, "# TYPE leasehold_webhook_{name} histogram");
        for m in metrics {
            let h = get(m);
            let mut cumulative = 0;
            for (i, c) in h.counts.iter().enumerate() {
                cumulative += c;
                let le = h.bounds.get(i).map_or("+Inf".to_owned(), |b| b.to_string());
                let _ = writeln!(
                    out,
                    "leasehold_webhook_{name}_bucket{{{},le=\"{le}\"}} {cumulative}",
                    label(m)
                );
            }
            let _ = writeln!(
                out,
                "leasehold_webhook_{name}_sum{{{}}} {}",
                label(m),
                h.sum
            );
            let _ = writeln!(
                out,
                "leasehold_webhook_{name}_count{{{}}} {}",
                label(m),
                h.count
            );
        }
    }
    out
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_histogram_counts_into_its_buckets() {
        let mut h = Histogram::new(&LATENCY_BUCKETS);
        for v in [0.001, 0.005, 0.2, 0.2, 1000.0] {
            h.observe(v);
        }
        assert_eq!(h.count, 5);
        assert_eq!(h.counts[0], 2, "0.005 is in the first bucket (le)");
        assert_eq!(h.counts[5], 2);
        assert_eq!(h.counts[LATENCY_BUCKETS.len()], 1);
        assert_eq!(h.quantile_bound(0.5), Some(0.25));
        assert_eq!(h.quantile_bound(0.99), Some(f64::INFINITY));
        assert_eq!(Histogram::new(&LATENCY_BUCKETS).quantile_bound(0.5), None);
    }

    #[test]
    fn prometheus_text_is_cumulative_and_labelled() {
        let mut m = SubscriptionMetrics::new("acme", "sub_\"1\"");
        m.delivered = 3;
        m.attempt_seconds.observe(0.003);
        m.attempt_seconds.observe(0.3);
        let text = render_prometheus(&[m]);
        let labels = r#"tenant="acme",subscription="sub_\"1\"""#;
        assert!(text.contains(&format!("leasehold_webhook_delivered_total{{{labels}}} 3")));
        assert!(text.contains(&format!(
            "leasehold_webhook_attempt_seconds_bucket{{{labels},le=\"0.005\"}} 1"
        )));
        assert!(text.contains(&format!(
            "leasehold_webhook_attempt_seconds_bucket{{{labels},le=\"+Inf\"}} 2"
        )));
        assert!(text.contains(&format!(
            "leasehold_webhook_attempt_seconds_count{{{labels}}} 2"
        )));
    }
}
