//! Sealing runs: once a run's outcome is decided, nothing may wake it or ask a
//! person about it again. `seal` does all of it in the caller's one call, so
//! no crash can leave a sealed run with live timers or offered tasks.

use crate::kv::Kv;
use crate::model::{SealOutcome, StoreError};
#[allow(unused_imports)]
use crate::prelude::*;
use crate::schema;
use crate::store;
use crate::tasks;
use crate::timers;
use crate::validate;

pub fn seal<K: Kv + ?Sized>(
    kv: &mut K,
    run: &str,
    awaited: &[String],
) -> Result<SealOutcome, StoreError> {
    validate::name("run", run)?;
    let awaited = validate::names("awaited", awaited)?;
    store::check_layout(kv, true)?;
    if !store::is_sealed(kv, run)? {
        kv.set(schema::sealed(run).as_bytes(), &[])?;
    }
    Ok(SealOutcome {
        timers_disarmed: timers::retire_run(kv, "seal", run)?,
        tasks_withdrawn: tasks::withdraw_awaited(kv, "seal", run, &awaited)?,
    })
}

pub fn is_sealed<K: Kv + ?Sized>(kv: &mut K, run: &str) -> Result<bool, StoreError> {
    validate::name("run", run)?;
    store::check_layout(kv, false)?;
    store::is_sealed(kv, run)
}
