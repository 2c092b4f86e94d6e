//! Bulk jobs: one action over the tasks a search filter matches, resumable
//! a step at a time. A job's set is frozen at its start (the tasks matching
//! its filter created at or before the start); `counting` steps walk the
//! filter's index within search's budget and record the ids found in
//! chunks; `running` steps take one task each, check it again and change it
//! through the task verb the action names, with a guard naming the job. The
//! task's change and the job's advance are one call, so no task is changed
//! twice by one job, whatever crashes between steps.
//!
//! The files: what a job is and how its row moves (`model`), its keys
//! (`rows`), one task's turn (`apply`), the verbs (`verbs`), and the
//! conversions to and from the WIT types the component and the host share
//! (`wire`). This file
//! only names them and re-exports; the files import from one another, never
//! from here. This module never changes a task but through `tasks`' verbs.

mod apply;
pub mod model;
mod rows;
mod verbs;
mod wire;

pub use apply::mismatch;
pub use model::{Job, JobAction, JobAssign, JobFailure, JobRow, JobState, KEPT_MISSES};
pub use rows::decode as decode_row;
pub use verbs::{CHUNK, DROP_PER_CALL, cancel, get, list, runnable, start, step};
