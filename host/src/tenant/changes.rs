//! The `changes` interface: a task's history (numbers rising, entry 0 only
//! first), where an entry sits in the feed, the feed from a position, and
//! trimming, each answer held to its limit.

use leasehold_guest::model::{FeedPlace, FeedRead, HistoryEntry, Timestamp, TrimOutcome};

use crate::bindings::wit;
use crate::error::Error;
use crate::verbs::Verb;

use super::Tenant;
use super::checks::{StoreAnswer, at_most, malformed, store};

impl Tenant {
    /// Task `id`'s history: its entries after `after` (a `seq`; from the
    /// first kept one without it), oldest first, at most `limit`. A task
    /// written before history was kept answers first, without `after`, an
    /// entry with `seq` 0 and verb `before-history` (see the WIT).
    pub fn history(
        &self,
        id: &str,
        after: Option<u64>,
        limit: u32,
    ) -> Result<Vec<HistoryEntry>, Error> {
        self.call(
            Verb::History,
            |x, s| x.call(s, (id, after, limit)),
            |a: StoreAnswer<Vec<wit::HistoryEntry>>| {
                let entries: Vec<HistoryEntry> = at_most(store(a)?, limit, "history")?
                    .into_iter()
                    .map(Into::into)
                    .collect();
                let mut last = after;
                for (i, e) in entries.iter().enumerate() {
                    // Entry 0 says the task predates its history: only ever
                    // first, and only on a read from the start.
                    let opening = i == 0 && after.is_none() && e.verb == "before-history";
                    if last.is_some_and(|l| e.seq <= l) || (e.seq == 0 && !opening) {
                        return Err(malformed(format!(
                            "history answered entry {} of task {id} after {last:?}",
                            e.seq
                        )));
                    }
                    last = Some(e.seq);
                }
                Ok(entries)
            },
        )
    }

    /// Where entry `seq` of task `id`'s history sits in the feed (its writer
    /// slot and its number there); none when that entry is not kept. For a
    /// host that gives its own positions to readers who see part of the
    /// feed; a reader of the whole feed never needs it.
    pub fn entry_place(&self, id: &str, seq: u64) -> Result<Option<FeedPlace>, Error> {
        self.call(
            Verb::FeedPlace,
            |x, s| x.call(s, (id, seq)),
            |a: StoreAnswer<Option<wit::FeedPlace>>| Ok(store(a)?.map(Into::into)),
        )
    }

    /// The feed after position `after` (from the oldest entry kept without
    /// it), at most `limit` entries: a page, or [`FeedRead::Gone`] when
    /// entries after `after` were trimmed or `after` is not a position of
    /// this feed.
    pub fn feed(&self, after: Option<&str>, limit: u32) -> Result<FeedRead, Error> {
        self.call(
            Verb::Feed,
            |x, s| x.call(s, (after, limit)),
            |a: StoreAnswer<wit::FeedRead>| {
                let read = FeedRead::from(store(a)?);
                if let FeedRead::Page(p) = &read
                    && p.entries.len() > limit as usize
                {
                    return Err(malformed(format!(
                        "feed answered {} entries for a limit of {limit}",
                        p.entries.len()
                    )));
                }
                Ok(read)
            },
        )
    }

    /// Removes the oldest feed entries recorded before `before`, or beyond
    /// the newest `keep` (at least one given), at most `limit` of them,
    /// with the history they cover (never a task's last entry).
    pub fn trim(
        &self,
        before: Option<Timestamp>,
        keep: Option<u64>,
        limit: u32,
    ) -> Result<TrimOutcome, Error> {
        self.call(
            Verb::Trim,
            |x, s| x.call(s, (before, keep, limit)),
            |a: StoreAnswer<wit::TrimOutcome>| {
                let out = TrimOutcome::from(store(a)?);
                if out.feed_removed > limit {
                    return Err(malformed(format!(
                        "trim removed {} entries for a limit of {limit}",
                        out.feed_removed
                    )));
                }
                Ok(out)
            },
        )
    }
}
