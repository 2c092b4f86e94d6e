//! `feed`: the entries after a reader's position, merged across the slots
//! by time, each given only once the previous change of its task or timer
//! lies at or behind the position (see `changes`); a position trimmed past,
//! or not of this feed, is answered `gone`. It reads only.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::kv::Kv;
use crate::model::{FeedEntry, FeedPage, FeedRead, StoreError, Timestamp};
use crate::schema::MAX_SHARDS;
use crate::store::FeedRow;
use crate::validate;

use super::cursor::Cursor;
use super::slots::{READ_BUDGET, Slots, first_chunk, read_slots, streams};

/// Whether the entry a feed row follows is at or behind `at`.
fn follows_read(row: &FeedRow, at: &Cursor, slots: &Slots) -> Result<bool, StoreError> {
    match row.prev {
        None => Ok(true),
        Some(p) if p.slot >= slots.shards.count() || p.seq > slots.head.get(p.slot) => {
            Err(StoreError::Corrupt(format!(
                "a feed entry follows {}.{}, which the feed has never held",
                p.slot, p.seq
            )))
        }
        Some(p) => Ok(p.seq <= at.get(p.slot)),
    }
}

/// `feed`: up to `limit` entries after `after`, each only once its task's
/// or timer's previous change has been given.
pub fn feed<K: Kv + ?Sized>(
    kv: &mut K,
    after: Option<&str>,
    limit: u32,
) -> Result<FeedRead, StoreError> {
    validate::limit("limit", limit)?;
    let asked = after.map(Cursor::parse).transpose()?;
    let Some(slots) = read_slots(kv)? else {
        // Nothing was ever written: only the start is a position here.
        return Ok(match asked {
            Some(c) if c != Cursor::START => FeedRead::Gone(Cursor::START.encode()),
            _ => FeedRead::Page(FeedPage {
                entries: Vec::new(),
                next: Cursor::START.encode(),
                head: Cursor::START.encode(),
            }),
        });
    };
    let head = slots.head.encode();
    let from = match asked {
        None => slots.floor,
        Some(c) => {
            let gone = (0..MAX_SHARDS).any(|s| {
                let at = c.get(s);
                if s >= slots.shards.count() {
                    at != 0
                } else {
                    at < slots.floor.get(s) || at > slots.head.get(s)
                }
            });
            if gone {
                return Ok(FeedRead::Gone(head));
            }
            c
        }
    };
    let mut at = from;
    let mut streams = streams(&slots, &from);
    let chunk = first_chunk(limit, streams.len());
    let mut bytes = 0usize;
    let mut entries: Vec<FeedEntry> = Vec::new();
    loop {
        if entries.len() >= limit as usize {
            break;
        }
        // Every stream with more to read keeps something buffered, while the
        // read has budget left (or has given nothing yet).
        for s in streams.iter_mut() {
            if s.buffered.is_empty() && s.more() && (entries.is_empty() || bytes < READ_BUDGET) {
                let chunk = if bytes < READ_BUDGET { chunk } else { 1 };
                bytes += s.fill(kv, chunk)?;
            }
        }
        let mut best: Option<(Timestamp, u8, usize)> = None;
        for (i, s) in streams.iter().enumerate() {
            if let Some((_, row)) = s.buffered.front()
                && follows_read(row, &at, &slots)?
                && best.is_none_or(|(t, slot, _)| (row.at(), s.slot) < (t, slot))
            {
                best = Some((row.at(), s.slot, i));
            }
        }
        let Some((_, _, i)) = best else {
            if streams.iter().any(|s| !s.buffered.is_empty()) && !entries.is_empty() {
                // What is buffered waits on entries past this read's budget.
                break;
            }
            if streams.iter().any(|s| !s.buffered.is_empty()) {
                return Err(StoreError::Corrupt(
                    "the feed's entries name predecessors that never come before them".into(),
                ));
            }
            break;
        };
        let s = &mut streams[i];
        let Some((seq, row)) = s.buffered.pop_front() else {
            break;
        };
        at.set(s.slot, seq);
        entries.push(FeedEntry {
            position: at.encode(),
            change: row.change,
        });
    }
    Ok(FeedRead::Page(FeedPage {
        entries,
        next: at.encode(),
        head,
    }))
}
