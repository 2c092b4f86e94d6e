//! The timer logs: each names its timer's last change where the feed still
//! holds it, a retirement when the timer is gone and anything else while it
//! is armed.

use crate::changes::slots::Slots;
use crate::keys::Elem;
use crate::kv::Kv;
use crate::model::{Change, StoreError, TimerEvent};
#[allow(unused_imports)]
use crate::prelude::*;
use crate::schema;
use crate::store;

use super::record::{RECORD_WALK, at, feed_row, kept, past_head};
use super::walk::{Findings, decoded, read_ahead, text};

/// Each timer log names the timer's last change where the feed still holds
/// it: a retirement when the timer is gone, anything else while it is
/// armed.
pub(super) fn check_timer_logs<K: Kv + ?Sized>(
    kv: &mut K,
    f: &mut Findings,
    slots: &Slots,
) -> Result<(), StoreError> {
    let prefix = schema::timer_logs();
    let ahead = |kv: &mut K, chunk: &[crate::kv::Entry]| {
        let mut keys = Vec::new();
        for (key, value) in chunk {
            if let Ok(elems) = store::suffix(key, &prefix)
                && let [Elem::Str(run), Elem::Str(effect)] = elems.as_slice()
            {
                keys.push(schema::timer(run, effect).into_bytes());
            }
            if let Ok(p) = store::decode_position(value)
                && kept(slots, p)
            {
                keys.push(schema::feed_entry(p.slot, p.seq).into_bytes());
            }
        }
        read_ahead(kv, keys)
    };
    store::walk_ahead(kv, &prefix, RECORD_WALK, ahead, |kv, key, value| {
        let Some(elems) = decoded(f, "timer-log", &key, &prefix) else {
            return Ok(!f.full());
        };
        let subject = text(&elems);
        let [Elem::Str(run), Elem::Str(effect)] = elems.as_slice() else {
            f.add("timer-log", &subject, "a log key has the wrong shape");
            return Ok(!f.full());
        };
        let position = match store::decode_position(&value) {
            Ok(p) => p,
            Err(e) => {
                f.add(
                    "timer-log",
                    &subject,
                    format!("the log does not decode: {e}"),
                );
                return Ok(!f.full());
            }
        };
        if past_head(slots, position) {
            f.add(
                "timer-log",
                &subject,
                format!(
                    "the last change is at {}, past the feed's head",
                    at(position)
                ),
            );
            return Ok(!f.full());
        }
        if !kept(slots, position) {
            return Ok(!f.full());
        }
        let armed = kv.get(schema::timer(run, effect).as_bytes())?.is_some();
        match feed_row(kv, position)?.map(|r| r.change) {
            Some(Change::Timer(t)) if t.run == *run && t.effect == *effect => {
                if armed == (t.what == TimerEvent::Retired) {
                    f.add(
                        "timer-log",
                        &subject,
                        format!(
                            "the last change was {:?}, but the timer is {}",
                            t.what,
                            if armed { "armed" } else { "gone" }
                        ),
                    );
                }
            }
            _ => f.add(
                "timer-log",
                &subject,
                format!("the feed entry at {} is not this timer's", at(position)),
            ),
        }
        Ok(!f.full())
    })
}
