//! Task kinds: a tenant's definitions of what a decision on a task of a kind
//! may be (its allowed outcomes, which need a reason, an output schema per
//! outcome), under `("kind", name)`. `settle` checks a decision against its
//! task's own outcomes or, when it declares none, its kind's.
//!
//! This module owns the definitions and the choice of which rules apply to
//! a task; checking a decision against them is `tasks::settle`'s. It never
//! touches a task row.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::keys::Elem;
use crate::kv::Kv;
use crate::model::{ClaimError, KindDefinition, OutcomeRule, StoreError, Task};
use crate::schema;
use crate::store;
use crate::validate;

/// A stored definition of kind `name`; anything else is `corrupt`.
pub(crate) fn decode(name: &str, bytes: &[u8]) -> Result<KindDefinition, StoreError> {
    let def: KindDefinition = match postcard::take_from_bytes(bytes) {
        Ok((def, [])) => def,
        Ok((_, left)) => {
            return Err(StoreError::Corrupt(format!(
                "kind {name}: {} bytes left over after the definition",
                left.len()
            )));
        }
        Err(e) => return Err(StoreError::Corrupt(format!("kind {name}: {e}"))),
    };
    if def.kind != name {
        return Err(StoreError::Corrupt(format!(
            "kind {name}: the definition is stored under another name ({})",
            def.kind
        )));
    }
    Ok(def)
}

fn load<K: Kv + ?Sized>(kv: &mut K, name: &str) -> Result<Option<KindDefinition>, StoreError> {
    kv.get(schema::kind(name).as_bytes())?
        .map(|b| decode(name, &b))
        .transpose()
}

/// `define-kind`: creates or replaces a definition, compiling each output
/// schema now; with `expected`, only over that revision (0: undefined).
pub fn define<K: Kv + ?Sized>(
    kv: &mut K,
    def: &KindDefinition,
    expected: Option<u64>,
) -> Result<KindDefinition, StoreError> {
    validate::name("kind", &def.kind)?;
    validate::outcome_rules("outcomes", &def.outcomes)?;
    store::check_layout(kv, true)?;
    let current = load(kv, &def.kind)?;
    let revision = current.as_ref().map_or(0, |d| d.revision);
    if let Some(e) = expected
        && e != revision
    {
        return Err(StoreError::Stale(revision));
    }
    let next = KindDefinition {
        kind: def.kind.clone(),
        outcomes: def.outcomes.clone(),
        revision: revision.saturating_add(1),
    };
    // A definition only a layout-10 build reads: the mark moves with it.
    store::claim_layout(kv)?;
    kv.set(
        schema::kind(&def.kind).as_bytes(),
        &store::encode_row(&next)?,
    )?;
    Ok(next)
}

pub fn get<K: Kv + ?Sized>(kv: &mut K, name: &str) -> Result<Option<KindDefinition>, StoreError> {
    validate::name("kind", name)?;
    store::check_layout(kv, false)?;
    load(kv, name)
}

pub fn list<K: Kv + ?Sized>(
    kv: &mut K,
    limit: u32,
    after: Option<&str>,
) -> Result<Vec<KindDefinition>, StoreError> {
    validate::limit("limit", limit)?;
    if let Some(a) = after {
        validate::name("after", a)?;
    }
    store::check_layout(kv, false)?;
    let prefix = schema::kinds();
    let start = match after {
        Some(a) => schema::kind(a).successor(),
        None => prefix.as_bytes().to_vec(),
    };
    let mut out = Vec::new();
    for (k, v) in kv.scan(&start, Some(&prefix.prefix_end()), limit, false)? {
        match store::suffix(&k, &prefix)?.as_slice() {
            [Elem::Str(name)] => out.push(decode(name, &v)?),
            _ => return Err(store::bad_entry("kind")),
        }
    }
    Ok(out)
}

pub fn remove<K: Kv + ?Sized>(kv: &mut K, name: &str) -> Result<bool, StoreError> {
    validate::name("kind", name)?;
    store::check_layout(kv, true)?;
    if load(kv, name)?.is_none() {
        return Ok(false);
    }
    kv.delete(schema::kind(name).as_bytes())?;
    Ok(true)
}

/// The outcome rules a decision on `task` answers to: its own, else its
/// kind's; empty means any outcome.
pub fn rules_for<K: Kv + ?Sized>(kv: &mut K, task: &Task) -> Result<Vec<OutcomeRule>, ClaimError> {
    if !task.outcomes.is_empty() {
        return Ok(task.outcomes.clone());
    }
    Ok(load(kv, &task.kind)?
        .map(|d| d.outcomes)
        .unwrap_or_default())
}
