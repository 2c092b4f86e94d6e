//! One entry's delivery: attempts, each signed afresh with the keys in
//! force and the time of the attempt, under the tenant's bound on requests
//! in flight, until the receiver acknowledges it, answers `410 Gone`, or
//! the retry schedule is used up. It owns an entry's attempts and what
//! they tell the operator (the attempt records, the counters, the next
//! retry); it must never touch the position or the subscription's state
//! (its worker does, from what it returns).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::Semaphore;

use crate::filter::Key;
use crate::retry::{Next, RetryPolicy, Verdict, verdict};
use crate::sender::{Outcome, Sender, Signed};
use crate::signing::signature_header;
use crate::stats::SubscriptionMetrics;
use crate::store::{AttemptRecord, Subscription};

/// Milliseconds since 1970 of `t`.
pub(crate) fn ms(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// What a worker shows of itself while it runs, and the failed attempts
/// it has yet to record in the store.
#[derive(Debug, Default)]
pub(crate) struct Live {
    pub attempts: VecDeque<AttemptRecord>,
    pub unrecorded: Vec<AttemptRecord>,
    pub retry_at: HashMap<u64, SystemTime>,
    pub delivered_to: String,
    pub in_flight: usize,
    pub queued: usize,
    pub queued_bytes: usize,
    pub lag_entries: u64,
    pub lag_seconds: f64,
}

/// Most failed attempts held for the store between two checkpoints.
const UNRECORDED_MAX: usize = 64;

impl Live {
    fn attempted(&mut self, record: AttemptRecord, failed: bool, shown: usize) {
        if failed {
            if self.unrecorded.len() >= UNRECORDED_MAX {
                self.unrecorded.remove(0);
            }
            self.unrecorded.push(record.clone());
        }
        self.attempts.push_back(record);
        while self.attempts.len() > shown {
            self.attempts.pop_front();
        }
    }
}

/// What every delivery of one worker shares.
pub(crate) struct Target {
    pub sub: Subscription,
    pub sender: Sender,
    pub retry: RetryPolicy,
    pub permits: Arc<Semaphore>,
    pub live: Arc<Mutex<Live>>,
    pub metrics: Arc<Mutex<SubscriptionMetrics>>,
    pub attempts_shown: usize,
}

/// One entry to deliver.
pub(crate) struct Message {
    /// Its place in the worker's window.
    pub idx: u64,
    pub key: Key,
    pub id: String,
    pub body: bytes::Bytes,
    /// When its change was made (ms).
    pub at: i64,
}

/// How an entry's delivery ended.
#[derive(Debug)]
pub(crate) enum End {
    Acknowledged,
    /// The receiver answered `410 Gone`.
    Gone(AttemptRecord),
    /// The schedule was used up; the last attempt.
    GaveUp(AttemptRecord),
}

/// Delivers `msg` until it ends; returns its window place and key with how.
pub(crate) async fn deliver(target: Arc<Target>, msg: Message) -> (u64, Key, End) {
    let first = Instant::now();
    let mut attempt = 1u32;
    loop {
        let permit = target.permits.clone().acquire_owned().await;
        let now = SystemTime::now();
        let now_ms = ms(now);
        let secrets = target.sub.signing_secrets(now_ms);
        let timestamp = now_ms.div_euclid(1000);
        let result = if secrets.is_empty() {
            crate::sender::Attempted {
                outcome: Outcome::Refused("the subscription has no signing key in force".into()),
                latency: Duration::ZERO,
                retry_after: None,
            }
        } else {
            let signed = Signed {
                id: msg.id.clone(),
                timestamp,
                signature: signature_header(&secrets, &msg.id, timestamp, &msg.body),
                body: msg.body.clone(),
            };
            target.sender.send(&target.sub.url, &signed).await
        };
        drop(permit);
        let judged = match result.outcome {
            Outcome::Status(s) => verdict(s),
            _ => Verdict::Failed,
        };
        let record = AttemptRecord {
            message_id: msg.id.clone(),
            at: now_ms,
            attempt,
            outcome: result.outcome,
            latency_ms: u64::try_from(result.latency.as_millis()).unwrap_or(u64::MAX),
        };
        {
            let mut m = lock(&target.metrics);
            m.attempt_seconds.observe(result.latency.as_secs_f64());
            if attempt > 1 {
                m.retried += 1;
            }
            match judged {
                Verdict::Acknowledged => {
                    m.delivered += 1;
                    let age = ms(SystemTime::now()).saturating_sub(msg.at).max(0);
                    m.delivery_seconds.observe(age as f64 / 1000.0);
                }
                Verdict::Gone | Verdict::Failed => m.failed += 1,
            }
        }
        let ok = judged == Verdict::Acknowledged;
        lock(&target.live).attempted(record.clone(), !ok, target.attempts_shown);
        match judged {
            Verdict::Acknowledged => return (msg.idx, msg.key, End::Acknowledged),
            Verdict::Gone => {
                lock(&target.metrics).given_up += 1;
                return (msg.idx, msg.key, End::Gone(record));
            }
            Verdict::Failed => {}
        }
        match target.retry.next(
            attempt,
            first.elapsed(),
            result.retry_after,
            fastrand::f64(),
        ) {
            Next::GiveUp => {
                lock(&target.metrics).given_up += 1;
                return (msg.idx, msg.key, End::GaveUp(record));
            }
            Next::After(wait) => {
                lock(&target.live)
                    .retry_at
                    .insert(msg.idx, SystemTime::now() + wait);
                tokio::time::sleep(wait).await;
                lock(&target.live).retry_at.remove(&msg.idx);
                attempt = attempt.saturating_add(1);
            }
        }
    }
}
