//! What the change record's tests share: reading a whole feed, a task's
//! history, and a call run over a snapshot to be committed later.

use super::*;
use crate::changes;
use crate::kv::{self, Write};
use crate::model::{Change, FeedEntry, FeedPage, FeedRead, HistoryEntry};

pub(super) fn page(read: FeedRead) -> FeedPage {
    match read {
        FeedRead::Page(p) => p,
        FeedRead::Gone(head) => panic!("gone, head {head}"),
    }
}

/// Reads the whole feed after `after`, `limit` entries at a time.
pub(super) fn read_all(kv: &mut MemKv, after: &mut Option<String>, limit: u32) -> Vec<FeedEntry> {
    let mut out = Vec::new();
    loop {
        let p = page(changes::feed(kv, after.as_deref(), limit).expect("feed"));
        assert!(p.entries.len() <= limit as usize);
        let done = p.entries.is_empty();
        out.extend(p.entries);
        *after = Some(p.next);
        if done {
            return out;
        }
    }
}

/// (task, seq) of each task change.
pub(super) fn task_changes(entries: &[FeedEntry]) -> Vec<(String, u64)> {
    entries
        .iter()
        .filter_map(|e| match &e.change {
            Change::Task(c) => Some((c.id.clone(), c.entry.seq)),
            Change::Timer(_) => None,
        })
        .collect()
}

pub(super) fn history(kv: &mut MemKv, id: &str) -> Vec<HistoryEntry> {
    changes::history(kv, id, None, 1000).expect("history")
}

/// A call run over a snapshot taken now, at writer slot `slot` and call
/// time `at`, whose batch the caller applies later: two such calls on
/// different keys are what a serializable store commits in either order.
pub(super) fn begun<T: fmt::Debug, E: fmt::Debug>(
    kv: &MemKv,
    slot: u32,
    at: i64,
    f: impl FnOnce(&mut kv::Buffered<&mut MemKv>) -> Result<T, E>,
) -> Vec<Write> {
    let mut snapshot = kv.clone();
    snapshot.slot = slot;
    snapshot.now = at;
    let (answer, batch) = kv::buffered(&mut snapshot, f);
    answer.expect("the call succeeds");
    batch
}
