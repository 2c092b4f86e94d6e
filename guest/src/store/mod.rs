//! Rows, counters and the layout mark: reading and writing them so that a row
//! and everything derived from it change together, in the caller's call.
//!
//! A row that does not decode is `corrupt`, never a default. Index entries are
//! derived from the parsed row by one function per row kind and written as the
//! difference between the old and new derivations, so no verb can forget one.
//!
//! The files below split the store by what it keeps: task rows, timer rows,
//! run seals, counters, the layout mark and the change record, over the row
//! codec, batched reads and range walks they share, and the row types
//! (`rows`) that the row files and the change record both speak of. This file only names them and re-exports what
//! the domain modules use, so their paths stay `store::…`. It decides
//! nothing, and the files below import from one another, never from here;
//! only the tests use the store through it, as its callers do.

mod batch;
mod codec;
mod counters;
mod layout;
mod ranges;
mod record;
mod rows;
mod runs;
mod search_entries;
mod tasks;
mod timer_record;
mod timers;

#[cfg(test)]
mod tests;

pub use codec::{RowError, encode_row};
pub use counters::{
    add_to_counter, add_to_shards, read_counter, read_shard, task_counter_keys, task_shard,
    timer_counter_key, timer_shard,
};
pub use layout::{
    check_layout, claim_layout, expected_feed_head, expected_shards, feed_slot_of, history_in_feed,
    known_layout, records_from_the_start, shards,
};
pub(crate) use ranges::bad_entry;
pub use ranges::{SCAN_CHUNK, scan_all, suffix, walk, walk_ahead, walk_chunked};
pub use record::{
    BEFORE_HISTORY, Cause, FeedRow, HISTORY_CHECKPOINT, HistoryRow, Position, TaskLog,
    before_history, decode_feed_row, decode_history, decode_history_start, decode_position,
    decode_seq, decode_task_log, load_history_entry, load_history_start, load_task_log, walk_chain,
    walk_start,
};
pub use rows::{TaskRow, TimerRow};
pub use runs::is_sealed;
pub use search_entries::{
    Built, build as build_search, count_value, has_search_entries, search_built, sum_counts,
};
pub use tasks::{
    Along, decode_task, indexed_rows, indexed_tasks, load_task, prefetch_task, prefetch_tasks,
    write_task,
};
pub use timer_record::record_timers;
pub use timers::{
    decode_timer, load_timer, load_timers, remove_timer, retire_timer, rewrite_timer_row,
    timer_from, write_timer,
};
