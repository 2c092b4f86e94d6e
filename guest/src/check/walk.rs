//! What every walk of the check shares: the findings it adds to (and stops
//! listing past [`MAX_FINDINGS`]), reading a chunk's point reads ahead, and
//! naming a key it cannot read. It decides no finding of its own and knows
//! no structure.

use crate::keys::{self, Elem, Key};
use crate::kv::Kv;
use crate::model::{Discrepancy, StoreError};
#[allow(unused_imports)]
use crate::prelude::*;
use crate::store;

/// Past this many findings the check stops listing and says so.
pub const MAX_FINDINGS: usize = 1000;

/// What the check has found so far.
pub(super) struct Findings(Vec<Discrepancy>);

impl Findings {
    pub(super) fn new() -> Findings {
        Findings(Vec::new())
    }

    pub(super) fn add(&mut self, structure: &str, subject: &str, detail: impl Into<String>) {
        if self.0.len() < MAX_FINDINGS {
            self.0.push(Discrepancy {
                structure: structure.to_owned(),
                subject: subject.to_owned(),
                detail: detail.into(),
            });
        }
    }

    /// Whether it lists no more: a walk stops there.
    pub(super) fn full(&self) -> bool {
        self.0.len() >= MAX_FINDINGS
    }

    /// The findings, with a last one that says so where listing stopped.
    pub(super) fn into_list(mut self) -> Vec<Discrepancy> {
        if self.full() {
            self.0.push(Discrepancy {
                structure: "check".into(),
                subject: "findings".into(),
                detail: format!("stopped listing after {MAX_FINDINGS} findings"),
            });
        }
        self.0
    }
}

/// A key's elements as findings name them: `a/b/3`.
pub(super) fn text(elems: &[Elem]) -> String {
    elems
        .iter()
        .map(|e| match e {
            Elem::Str(s) => s.clone(),
            Elem::Int(n) => n.to_string(),
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// Reads `keys` ahead of the point reads that follow, in batches the host
/// takes (its `get-many` is bounded), each key once.
pub(super) fn read_ahead<K: Kv + ?Sized>(
    kv: &mut K,
    mut keys: Vec<Vec<u8>>,
) -> Result<(), StoreError> {
    keys.sort_unstable();
    keys.dedup();
    for batch in keys.chunks(AHEAD_BATCH) {
        kv.prefetch(batch)?;
    }
    Ok(())
}

/// Keys per batch read ahead: well under the hosts' bound on `get-many`.
const AHEAD_BATCH: usize = 1024;

/// The tuple after `prefix` in `key`, or a finding when it does not decode.
pub(super) fn decoded(
    f: &mut Findings,
    structure: &str,
    key: &[u8],
    prefix: &Key,
) -> Option<Vec<Elem>> {
    match store::suffix(key, prefix) {
        Ok(elems) => Some(elems),
        Err(_) => {
            f.add(structure, &keys::to_hex(key), "the key does not decode");
            None
        }
    }
}
