//! A timer's changes in the feed: each change a timer undergoes appended
//! in the call that makes it, naming the timer's previous change (its log
//! holds where that is). A call that changes many timers (a sweep's page)
//! records them together over one [`FeedTail`], so the slot's head is read
//! and written once a page rather than once a timer; the entries are the
//! same, in the same order. It records only, and never decides whether a
//! timer changes.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::kv::Kv;
use crate::model::{StoreError, TimerChange, TimerEvent};
use crate::schema;

use super::codec::{corrupt, encode_row};
use super::layout::shards;
use super::record::{FeedTail, TimerFeedRow, decode_position};
use super::rows::TimerRow;

/// Records what `verb` did to a timer, as `row` now stands (or stood, when
/// it was retired).
pub fn record_timer<K: Kv + ?Sized>(
    kv: &mut K,
    verb: &'static str,
    row: &TimerRow,
    what: TimerEvent,
) -> Result<(), StoreError> {
    record_timers(kv, verb, what, core::slice::from_ref(row))
}

/// Records that `verb` did `what` to each of `rows`, in their order, as
/// [`record_timer`] once for each would.
pub fn record_timers<K: Kv + ?Sized>(
    kv: &mut K,
    verb: &'static str,
    what: TimerEvent,
    rows: &[TimerRow],
) -> Result<(), StoreError> {
    if rows.is_empty() {
        return Ok(());
    }
    let log_keys: Vec<Vec<u8>> = rows
        .iter()
        .map(|r| schema::timer_log(&r.timer.run, &r.timer.effect).into_bytes())
        .collect();
    // A timer changed twice in one page follows its own first change, which
    // the batched read of the logs below cannot see: such a page is
    // recorded a change at a time.
    let mut sorted: Vec<&Vec<u8>> = log_keys.iter().collect();
    sorted.sort_unstable();
    if sorted.windows(2).any(|w| w[0] == w[1]) {
        for row in rows {
            record_timers(kv, verb, what, core::slice::from_ref(row))?;
        }
        return Ok(());
    }
    let sh = shards(kv)?;
    let at = kv.call_time();
    let mut tail = FeedTail::open(kv, sh)?;
    // One batched read of every log; a log written earlier in this call is
    // answered from its buffer.
    let logs = kv.get_many(&log_keys)?;
    for ((row, log_key), log) in rows.iter().zip(log_keys).zip(logs) {
        let t = &row.timer;
        let prev = log
            .map(|b| {
                decode_position(&b)
                    .map_err(|e| corrupt(format!("the log of timer {}/{}: {e}", t.run, t.effect)))
            })
            .transpose()?;
        let change = TimerChange {
            run: t.run.clone(),
            effect: t.effect.clone(),
            at,
            verb: verb.to_owned(),
            what,
            fire_at: t.fire_at,
            lease_until: match what {
                TimerEvent::Claimed => row.lease_until,
                TimerEvent::Armed | TimerEvent::Retired | TimerEvent::Rescheduled => None,
            },
        };
        let entry = encode_row(&TimerFeedRow {
            prev,
            change: &change,
        })?;
        let position = tail.push_encoded(kv, entry)?;
        kv.put(log_key, encode_row(&position)?)?;
    }
    tail.close(kv)
}
