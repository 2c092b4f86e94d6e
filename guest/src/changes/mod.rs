//! Reading the change record: a task's history, the feed from a position,
//! and trimming both.
//!
//! The feed is kept per writer slot (see [`crate::schema`]): within a slot,
//! a higher sequence number always committed later, so a reader's position
//! is one sequence number per slot, and everything at or below it is read.
//! Across slots nothing is ordered but the changes of one task or timer:
//! each entry names its predecessor, and a read gives an entry only once
//! that predecessor lies at or behind the reader's position. The change
//! committed first among those not yet read always qualifies (its
//! predecessor committed before it), so every read that has something to
//! give gives something. A position whose entries were trimmed, or that
//! names entries this feed never had, is answered `gone`: a reader never
//! passes a gap. This module only reads and trims the record; the writes
//! that append to it live in `store`, and it must never change a task or a
//! timer.
//!
//! The files below split it by concept: a reader's position (`cursor`), the
//! slots as a read finds them and the stream of each (`slots`), a task's
//! history and where one entry sits (`history`), reading the feed
//! (`feed`), and trimming (`trim`). This file only names them and
//! re-exports the verbs, so their paths stay `changes::…`; the files import
//! from one another, never from here.

pub(crate) mod cursor;
mod feed;
mod history;
pub(crate) mod slots;
mod trim;

pub use cursor::Cursor;
pub use feed::feed;
pub use history::{entry_place, history};
pub use trim::{HELD_FOR_SUBSCRIPTIONS, trim, trim_holding};
