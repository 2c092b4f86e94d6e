//! `open`: first open wins. A repeat of an existing id answers the stored
//! task whatever the new copy says; only a new task must be open and
//! unheld. The one verb that may lay out a fresh keyspace.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::kv::Kv;
use crate::model::{StoreError, Task};
use crate::store::{self, Cause, TaskRow};
use crate::timeline;
use crate::validate;

/// `open`: first open wins.
pub fn open<K: Kv + ?Sized>(kv: &mut K, task: &Task) -> Result<Task, StoreError> {
    let mut task = validate::task_input(task)?;
    timeline::tidy("", &mut task)?;
    task.steps_done = 0;
    store::prefetch_task(kv, &task.id)?;
    store::check_layout(kv, false)?;
    if let Some(found) = store::load_task(kv, &task.id)? {
        return Ok(found.task);
    }
    // Only a new task must be open and unheld: a repeat of an existing id
    // answers the stored task whatever this copy says.
    validate::new_task(&task)?;
    store::check_layout(kv, true)?;
    let mut row = TaskRow {
        task,
        ever_escalated: false,
    };
    store::write_task(kv, Cause::service("open"), None, &mut row)?;
    Ok(row.task)
}
