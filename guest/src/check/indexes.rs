//! The task indexes (queue, overdue, case, lease, held and wake): every entry names a
//! task whose row implies exactly that entry. The other side, each row's
//! entries being there, is the walk of the rows'.

use crate::keys::{Elem, Key};
use crate::kv::Kv;
use crate::model::StoreError;
#[allow(unused_imports)]
use crate::prelude::*;
use crate::schema;
use crate::store;

use super::walk::{Findings, decoded, read_ahead, text};

/// Names the index a key belongs to, for findings.
pub(super) fn index_name(key: &[u8]) -> &'static str {
    let starts = |p: Key| key.starts_with(p.as_bytes());
    if starts(schema::queue_roles()) || starts(schema::queue_any()) {
        "queue-index"
    } else if starts(schema::overdue()) {
        "overdue-index"
    } else if starts(schema::cases()) {
        "case-index"
    } else if starts(schema::leases()) {
        "lease-index"
    } else if starts(schema::helds()) {
        "held-index"
    } else if starts(schema::wakes()) {
        "wake-index"
    } else {
        "index"
    }
}

/// The task id at the end of an index key, whatever the index.
fn indexed_id(elems: &[Elem]) -> Option<&str> {
    match elems.last() {
        Some(Elem::Str(id)) => Some(id),
        _ => None,
    }
}

/// Walks every task index: each entry's row is there and implies it.
pub(super) fn check_task_indexes<K: Kv + ?Sized>(
    kv: &mut K,
    f: &mut Findings,
) -> Result<(), StoreError> {
    for prefix in [
        schema::queue_roles(),
        schema::queue_any(),
        schema::overdue(),
        schema::cases(),
        schema::leases(),
        schema::helds(),
        schema::wakes(),
    ] {
        let ahead = |kv: &mut K, chunk: &[crate::kv::Entry]| {
            let keys = chunk
                .iter()
                .filter_map(|(key, _)| {
                    let elems = store::suffix(key, &prefix).ok()?;
                    Some(schema::task(indexed_id(&elems)?).into_bytes())
                })
                .collect();
            read_ahead(kv, keys)
        };
        store::walk_ahead(kv, &prefix, store::SCAN_CHUNK, ahead, |kv, key, _| {
            let structure = index_name(&key);
            let Some(elems) = decoded(f, structure, &key, &prefix) else {
                return Ok(!f.full());
            };
            let Some(id) = indexed_id(&elems) else {
                f.add(structure, &text(&elems), "an entry has the wrong shape");
                return Ok(!f.full());
            };
            match kv.get(schema::task(id).as_bytes())? {
                None => f.add(structure, id, "an entry for a task with no row"),
                Some(bytes) => {
                    // A row that does not decode was reported by the row walk.
                    if let Ok(row) = store::decode_task(&bytes)
                        && !row.index_keys().contains(&key)
                    {
                        f.add(
                            structure,
                            id,
                            format!("an entry the row does not imply ({})", text(&elems)),
                        );
                    }
                }
            }
            Ok(!f.full())
        })?;
    }
    Ok(())
}
