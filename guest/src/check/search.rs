//! The search entries and counts: every entry names a task whose row implies
//! it, every row that has its entries (one a layout-10 build changed, or one
//! the build has reached) has them all, each state's count shards sum to its
//! rows, and the build mark reads. A task written before search and not yet
//! reached by the build has none, and is not counted. This module only
//! compares, and reads rows only to do so.

use crate::keys::{Elem, Key};
use crate::kv::Kv;
use crate::model::{ALL_STATES, StoreError};
#[allow(unused_imports)]
use crate::prelude::*;
use crate::schema;
use crate::store;

use super::walk::{Findings, decoded, read_ahead, text};

/// The search indexes, by name.
fn indexes() -> [(&'static str, Key); 6] {
    [
        ("by-state-index", schema::by_states()),
        ("by-kind-index", schema::by_kinds()),
        ("assigned-index", schema::assigneds()),
        ("by-due-index", schema::by_due()),
        ("by-run-index", schema::by_runs()),
        ("by-priority-index", schema::by_priority()),
    ]
}

pub(super) fn check_search<K: Kv + ?Sized>(kv: &mut K, f: &mut Findings) -> Result<(), StoreError> {
    let built = match store::search_built(kv) {
        Ok(b) => b,
        Err(StoreError::Corrupt(d)) => {
            f.add("search-build", "meta/search", d);
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    let has = |row: &store::TaskRow| row.task.revision > 0 || built.covers(&row.task.id);
    // Every entry's row implies it.
    for (name, prefix) in indexes() {
        let ahead = |kv: &mut K, chunk: &[crate::kv::Entry]| {
            let keys = chunk
                .iter()
                .filter_map(|(key, _)| match store::suffix(key, &prefix).ok()?.last() {
                    Some(Elem::Str(id)) => Some(schema::task(id).into_bytes()),
                    _ => None,
                })
                .collect();
            read_ahead(kv, keys)
        };
        store::walk_ahead(kv, &prefix, store::SCAN_CHUNK, ahead, |kv, key, _| {
            let Some(elems) = decoded(f, name, &key, &prefix) else {
                return Ok(!f.full());
            };
            let Some(Elem::Str(id)) = elems.last() else {
                f.add(name, &text(&elems), "an entry has the wrong shape");
                return Ok(!f.full());
            };
            match kv.get(schema::task(id).as_bytes())? {
                None => f.add(name, id, "an entry for a task with no row"),
                Some(bytes) => {
                    if let Ok(row) = store::decode_task(&bytes)
                        && (!has(&row) || !row.search_keys().contains(&key))
                    {
                        f.add(
                            name,
                            id,
                            format!("an entry the row does not imply ({})", text(&elems)),
                        );
                    }
                }
            }
            Ok(!f.full())
        })?;
    }
    // Every row that has its entries has them all, and counts in its state.
    let mut per_state = [0i64; ALL_STATES.len()];
    // A row that does not decode cannot say its state: the counts are not
    // compared then, as the row walk has reported it.
    let mut unreadable = false;
    let prefix = schema::tasks();
    let ahead = |kv: &mut K, chunk: &[crate::kv::Entry]| {
        let keys = chunk
            .iter()
            .filter_map(|(_, value)| store::decode_task(value).ok())
            .flat_map(|row| row.search_keys())
            .collect();
        read_ahead(kv, keys)
    };
    store::walk_ahead(kv, &prefix, store::SCAN_CHUNK, ahead, |kv, key, value| {
        let Ok(elems) = store::suffix(&key, &prefix) else {
            return Ok(!f.full());
        };
        let [Elem::Str(id)] = elems.as_slice() else {
            return Ok(!f.full());
        };
        // A row that does not decode was reported by the row walk.
        let Ok(row) = store::decode_task(&value) else {
            unreadable = true;
            return Ok(!f.full());
        };
        if !has(&row) {
            return Ok(!f.full());
        }
        if let Some(i) = ALL_STATES.iter().position(|s| *s == row.task.state) {
            per_state[i] += 1;
        }
        for k in row.search_keys() {
            if kv.get(&k)?.is_none() {
                f.add(
                    "search-index",
                    id,
                    "the row implies this search entry; it is missing",
                );
            }
        }
        Ok(!f.full())
    })?;
    let counts = schema::search_counts();
    let mut stored = [0i64; ALL_STATES.len()];
    store::walk(kv, &counts, |_, key, value| {
        let Some(elems) = decoded(f, "search-count", &key, &counts) else {
            return Ok(!f.full());
        };
        let state = match elems.as_slice() {
            [Elem::Str(state), Elem::Int(shard)]
                if (0..i64::from(schema::MAX_SHARDS)).contains(shard) =>
            {
                ALL_STATES.iter().position(|s| s.as_str() == state)
            }
            _ => None,
        };
        match (state, store::count_value(&value)) {
            (Some(i), Ok(n)) => stored[i] += n,
            (None, _) => f.add("search-count", &text(&elems), "a key of no known shape"),
            (_, Err(StoreError::Corrupt(d))) => f.add("search-count", &text(&elems), d),
            (_, Err(e)) => return Err(e),
        }
        Ok(!f.full())
    })?;
    for (i, s) in ALL_STATES.iter().enumerate() {
        if stored[i] != per_state[i] && !unreadable {
            f.add(
                "search-count",
                s.as_str(),
                format!(
                    "the shards sum to {}, and {} rows with search entries are {}",
                    stored[i],
                    per_state[i],
                    s.as_str()
                ),
            );
        }
    }
    Ok(())
}
