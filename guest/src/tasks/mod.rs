//! The worklist verbs: the claim ladder, take-over as compare-and-swap,
//! settlement as compare-and-set, escalation, leased claims, and the indexed
//! reads. The queue's merge and its cursors live in the `queue` module; the
//! verbs here own what a page is for, and all the writing.
//!
//! A leased claim's row carries its lease end, and the row implies an entry
//! in the lease index at that instant (see [`crate::store::TaskRow::index_keys`]),
//! so whatever ends or moves a lease (renew, release, settle, escalate, a new
//! claim) moves the entry with it: `reclaim-lapsed` reads only entries at or
//! before `now`, and never sees a lease that no longer holds.
//!
//! Each verb checks its inputs, then existence, then its own rules, and only
//! then writes; and since every write goes to the call's buffer, a call that
//! returns an error hands the host nothing to commit. Every write goes through
//! [`crate::store::write_task`], which keeps the indexes and the open counter
//! in step with the row. Each verb asks for the rows it will need in one
//! batched read first, so a host on the network pays one round trip, not one
//! per key.
//!
//! The files below group the verbs by what they do: `open`, the claim
//! ladder (`claims`), a worker's batches of heads claimed and settled
//! (`batch`), moving a claim by someone's say (`assign`), changes
//! after open and notes (`change`), settling (`settle`) and a decision's
//! checks (`decide`), reminders and chain steps firing (`steps`), and the reads (`reads`), over how
//! a changing verb reaches its rows (`lookup`). A new verb gets a file of its
//! own, or joins the group it belongs to. This file only names them and
//! re-exports the verbs, so their paths stay `tasks::…`; the files import
//! from one another, never from here.

mod assign;
mod batch;
mod change;
mod claims;
mod decide;
mod lookup;
mod open;
mod reads;
mod settle;
mod steps;

pub use assign::{assign, delegate, unassign};
pub use batch::{MAX_BATCH, claim_batch, claim_next, settle_and_claim};
pub(crate) use change::checked as checked_changes;
pub use change::{note, update};
pub use claims::{claim, reclaim_lapsed, release, renew, take_over};
pub use open::open;
pub use reads::{for_case, get, held, leased_count, next_lease_end, open_count, overdue, queue};
pub(crate) use settle::withdraw_awaited;
pub use settle::{escalate, settle, withdraw_run};
pub use steps::{expire_overdue, next_wake};
