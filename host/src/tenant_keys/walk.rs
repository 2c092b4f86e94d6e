//! One tenant's entries in key order, a batch at a time, from one read
//! snapshot: what an export and a backup are written from. It owns the
//! walk's position; it must never begin or commit a transaction (its caller
//! hands it a snapshot).

use crate::storage::backend::{Entry, Txn};
use crate::tenant_keys::bounds::batch_bounds;
use crate::tenant_keys::error::KeysError;

/// One tenant's entries in key order, a batch at a time, from one read
/// snapshot (however long the walk takes, it sees one moment).
pub struct Walk {
    txn: Box<dyn Txn>,
    /// Where the next batch starts; `None` once the end was reached.
    next: Option<Vec<u8>>,
}

impl Walk {
    /// Walks the tenant `txn` was begun on, from its first key.
    pub fn new(txn: Box<dyn Txn>) -> Walk {
        Walk {
            txn,
            next: Some(Vec::new()),
        }
    }

    /// The next entries, at most [`batch_bounds`] of them; empty once there
    /// are no more.
    pub fn batch(&mut self) -> Result<Vec<Entry>, KeysError> {
        let Some(start) = self.next.take() else {
            return Ok(Vec::new());
        };
        let (limit, max_bytes) = batch_bounds();
        let (entries, more) = self
            .txn
            .scan(&start, None, limit, false, max_bytes)
            .map_err(KeysError::Storage)?;
        match entries.last() {
            Some((last, _)) => {
                // The key right after the last one, bytewise.
                let mut after = last.clone();
                after.push(0);
                self.next = Some(after);
            }
            None if more => return Err(KeysError::TooLarge { max_bytes }),
            None => {}
        }
        Ok(entries)
    }
}
