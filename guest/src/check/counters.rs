//! The counters: every shard of the open-task, leased-claim and armed-timer
//! counters against the rows that count in it. Where a keyspace spreads
//! counts by row (layouts 3 and 4), counters are checked shard by shard
//! against the rows that count in each shard, which is stronger than
//! checking their sums: a count in the wrong shard leaves the sum right, yet
//! can later make a correct write fail as taking a shard below zero. Spread
//! by writer (layout 5 on), a row's count may sit in any shard, so each
//! counter's sum is checked. The walks of the rows count them; this module
//! only compares, and never reads a row.

use crate::keys::Elem;
use crate::kv::Kv;
use crate::model::StoreError;
#[allow(unused_imports)]
use crate::prelude::*;
use crate::schema::{self, Shards};
use crate::store;

use super::walk::{Findings, decoded, text};

/// A count per counter shard; spread by writer, the whole count in the first.
pub(super) type PerShard = [u64; schema::MAX_SHARDS as usize];

/// Where [`PerShard`] keeps the count of a row whose own shard is `own`.
pub(super) fn tally(shards: Shards, own: impl FnOnce() -> u8) -> usize {
    if shards.by_writer() {
        0
    } else {
        usize::from(own())
    }
}

/// What one counter's shards should hold, from the rows.
pub(super) struct Expected {
    pub(super) name: &'static str,
    /// The finding's structure: the verb that reads the counter.
    pub(super) structure: &'static str,
    /// What the counter counts, for findings.
    pub(super) rows: &'static str,
    pub(super) per_shard: PerShard,
}

/// Walks every key in the counters' range (an absent shard is zero), then
/// compares each of the keyspace's `shards` with the rows that count in it.
pub(super) fn check_counters<K: Kv + ?Sized>(
    kv: &mut K,
    f: &mut Findings,
    shards: Shards,
    expected: [Expected; 3],
) -> Result<(), StoreError> {
    const SHARDS: usize = schema::MAX_SHARDS as usize;
    let mut stored = [[0i64; SHARDS]; 3];
    // A shard already reported as unreadable is not compared as well.
    let mut unreadable = [[false; SHARDS]; 3];
    let prefix = schema::counters();
    store::walk(kv, &prefix, |_, key, value| {
        let Some(elems) = decoded(f, "counter", &key, &prefix) else {
            return Ok(!f.full());
        };
        let found = match elems.as_slice() {
            [Elem::Str(name), Elem::Int(shard)] => expected
                .iter()
                .position(|e| e.name == name)
                .zip(u8::try_from(*shard).ok())
                .filter(|&(_, s)| s < shards.count()),
            _ => None,
        };
        let Some((c, shard)) = found else {
            f.add(
                "counter",
                &text(&elems),
                "a key among the counters that is no counter's shard",
            );
            return Ok(!f.full());
        };
        let e = &expected[c];
        match <[u8; 8]>::try_from(value.as_slice()) {
            Ok(raw) => stored[c][usize::from(shard)] = i64::from_be_bytes(raw),
            Err(_) => {
                unreadable[c][usize::from(shard)] = true;
                f.add(
                    e.structure,
                    &format!("{}/{shard}", e.name),
                    format!(
                        "counter {}, shard {shard}, holds {} bytes, not 8",
                        e.name,
                        value.len()
                    ),
                );
            }
        }
        Ok(!f.full())
    })?;
    for (c, e) in expected.iter().enumerate() {
        if shards.by_writer() {
            if unreadable[c].iter().any(|&u| u) {
                continue;
            }
            let counted: i128 = stored[c].iter().map(|&n| i128::from(n)).sum();
            let rows = e.per_shard[0];
            if counted != i128::from(rows) {
                f.add(
                    e.structure,
                    e.name,
                    format!(
                        "the shards of counter {} sum to {counted}; there are {rows} {}",
                        e.name, e.rows
                    ),
                );
            }
            continue;
        }
        for shard in 0..shards.count() {
            let s = usize::from(shard);
            let (counted, rows) = (stored[c][s], e.per_shard[s]);
            if i128::from(counted) != i128::from(rows) && !unreadable[c][s] {
                f.add(
                    e.structure,
                    &format!("{}/{shard}", e.name),
                    format!(
                        "counter {}, shard {shard}, says {counted}; {rows} {} count in that shard",
                        e.name, e.rows
                    ),
                );
            }
        }
    }
    Ok(())
}
