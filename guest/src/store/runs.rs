//! The seal of a run: one key per sealed run, holding nothing.
//!
//! Only the mark is read here. Sealing is [`crate::runs`]'s, which writes the
//! mark in the same call that disarms the run's timers and withdraws its
//! tasks; nothing ever removes a mark, and this module must never write one.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::kv::Kv;
use crate::model::StoreError;
use crate::schema;

pub fn is_sealed<K: Kv + ?Sized>(kv: &mut K, run: &str) -> Result<bool, StoreError> {
    Ok(kv.get(schema::sealed(run).as_bytes())?.is_some())
}
